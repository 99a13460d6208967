// dpath_kernels.cuh: the device path's kernels (concat.cu), compiled
// twice: the flat ones from dpath.h with FUNNEL_DP_FLAT_ONLY, the nested
// ones (names ending _nested) from dpath.h as it is. DPK names a kernel.

// the kernels' launch bounds and the scan's tile are this block size
static_assert(FUNNEL__DPATH_THREADS == 256, "the launch bounds below say 256");
// the tail of the parse copies the args to shared memory a word at a time
static_assert(sizeof(funnel__dp_args) % 8 == 0, "the args are whole 64-bit words");

namespace {

// The block's sum of one value a thread (every thread gets it).
__device__ int64_t block_sum(int64_t x) {
  __shared__ int64_t warp_sums[32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
  if (lane == 0) warp_sums[warp] = x;
  __syncthreads();
  int64_t total = 0;
  for (unsigned w = 0; w < warps; w++) total += warp_sums[w];
  __syncthreads();  // warp_sums is reused by the next call
  return total;
}

// The block's exclusive scan of one value a thread; *total gets the sum.
__device__ int64_t block_exclusive_scan(int64_t x, int64_t *total) {
  __shared__ int64_t warp_sums[32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int64_t v = x;  // inclusive within the warp
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t y = __shfl_up_sync(0xFFFFFFFFu, v, o);
    if (lane >= (unsigned)o) v += y;
  }
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  int64_t before = 0, all = 0;
  for (unsigned w = 0; w < warps; w++) {
    before += w < warp ? warp_sums[w] : 0;
    all += warp_sums[w];
  }
  *total = all;
  __syncthreads();  // warp_sums is reused by the next call
  return before + v - x;
}

// Whether this block is the grid's last to get here (counted in the
// summary); if so, it sees what every other block wrote before.
__device__ bool last_block_to_finish(funnel__dp_summary *s) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
    last = atomicAdd((unsigned long long *)&s->blocks_done, 1ull) == blocks - 1;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// Value p of scan array k: rows (k == 0), else string column k - 1's bytes.
__device__ int64_t *scan_array(const funnel__dp_args *a, int64_t k) {
  return k == 0 ? (int64_t *)(uintptr_t)a->rows
                : (int64_t *)(uintptr_t)a->chars + (k - 1) * (a->n_parts + 1);
}

// One round of the block's layout: thread c's column, whose buffers are
// `size` (`ok`: they fit the output), placed after the `*at` bytes and
// `*nb` bit buffers the rounds before placed, the columns' footprints
// scanned; false, for every thread, when a column of the round does not
// fit. A thread past the columns has none (its sizes all -1).
__device__ bool layout_round(funnel__dp_args *a, int c, bool ok, const int64_t size[3], int bits,
                             int64_t *at, int64_t *nb) {
  // each at most the allocation, so the block's sum cannot overflow
  if (!__syncthreads_and(ok && funnel__dp_footprint(size) <= a->out_capacity)) return false;
  int64_t foot_total, bits_total;
  const int64_t foot = block_exclusive_scan(funnel__dp_footprint(size), &foot_total);
  const int64_t bit = block_exclusive_scan(bits, &bits_total);
  if (*at + foot_total > a->out_capacity) return false;
  if (c < a->n_cols) funnel__dp_place_column(a, c, *at + foot, size, *nb + bit);
  *at += foot_total;
  *nb += bits_total;
  return true;
}

// Lays the output out (dpath.h) with the whole block: a thread a column,
// a round a block's columns, so no thread walks a chain of loads through
// every column.
__device__ void layout_block(funnel__dp_args *a) {
  __syncthreads();  // the scan's totals, written by thread 0, seen by all
  int64_t rows;
  if (!funnel__dp_layout_begin(a, &rows)) return;  // the same for every thread
  int64_t at = 0, nb = 0;
  for (int base = 0; base < a->n_cols; base += (int)blockDim.x) {
    const int c = base + (int)threadIdx.x;
    int64_t size[3] = {-1, -1, -1};
    int bits = 0;
    const bool ok = c >= a->n_cols || funnel__dp_column_sizes(a, c, rows, size, &bits);
    if (!layout_round(a, c, ok, size, bits, &at, &nb)) return;
  }
  if (threadIdx.x == 0) funnel__dp_layout_end(a, at, nb);
}

// The layout of a flat read of at most a block's columns, from what the
// tail of the parse loaded before its scan: thread c's column and null
// count, the partitions the parse left (`left`), and the scan's totals in
// shared memory (rows, then each string column's bytes). As layout_block,
// with no load from memory between the scan and the stores (the layout of
// 200x4x1 mixed on the H100, globaltimer: 2.5 us by layout_block's chain of
// loads, 1.9 so).
__device__ void layout_block_flat(funnel__dp_args *a, const funnel__dp_column &col, int64_t nulls,
                                  int64_t left, const int64_t *totals) {
  __syncthreads();  // the totals, written by thread 0, seen by all
  const int64_t rows = totals[0];
  if (left != 0 || rows > a->max_rows) return;  // the same for every thread
  const int c = (int)threadIdx.x;
  int64_t size[3] = {-1, -1, -1};
  int bits = 0;
  const bool ok = c >= a->n_cols ||
                  funnel__dp_sizes(&col, rows, nulls, col.var >= 0 ? totals[1 + col.var] : 0,
                                   a->out_capacity, size, &bits);
  int64_t at = 0, nb = 0;
  if (!layout_round(a, c, ok, size, bits, &at, &nb)) return;
  if (threadIdx.x == 0) funnel__dp_layout_end(a, at, nb);
}

// Hands the summary to the host, when it reads it where the kernel can
// write (args.summary_back): after the layout, by the block that made it.
// No fence: the host reads it after the event that follows the kernel,
// whose completion makes the kernel's writes to host memory visible
// (without a system fence here the reads of 200 and 1,000 partitions were
// 1 to 5% faster, an A/B on the H100).
__device__ void publish_summary(const funnel__dp_args *a) {
  if (a->summary_back == 0) return;
  __syncthreads();  // the layout's marks, written by thread 0, seen by all
  const int64_t *src = (const int64_t *)(uintptr_t)a->summary;
  int64_t *dst = (int64_t *)(uintptr_t)a->summary_back;
  for (int64_t k = threadIdx.x; k < funnel__dp_summary_bytes(a) / 8; k += blockDim.x)
    dst[k] = src[k];
}

}  // namespace

// m lanes a partition (args.parse_lanes): a warp walks a partition's
// metadata in shared memory, a smaller group where it lies; then each
// block sums its tile of every scan array, or, when the launch parses a
// whole read of few partitions (FUNNEL__DP_PARSE_SCANS), the block that
// finishes last scans them and lays the output out.
extern "C" __global__ void __launch_bounds__(256) DPK(funnel_dp_parse)(funnel__dp_args *a,
                                                                    int64_t from, int64_t count,
                                                                    int64_t m, int64_t gated) {
  __shared__ uint64_t stage[FUNNEL__DPATH_THREADS / 32][FUNNEL__DP_STAGE_BYTES / 8];
  if (gated && funnel__dp_shut(a)) return;  // a gated pass (dpath.h): the whole grid alike
  const int lanes = (int)m, lanes_lg = __ffs(lanes) - 1;  // lanes is a power of two
  const int64_t n = a->n_parts, end = from + count;
  // this block's tile of the read's partitions (256 / lanes of them):
  // `from` is a multiple of it
  const int tile_lg = 8 - lanes_lg;
  const int64_t tile = (int64_t)1 << tile_lg, block = (from >> tile_lg) + blockIdx.x;
  const int64_t first = block << tile_lg;
  const int64_t p = first + (threadIdx.x >> lanes_lg);
  if (p < end) {
    const int lane = (int)(threadIdx.x & (unsigned)(lanes - 1));
    uint8_t *st = lanes == 32 ? (uint8_t *)stage[threadIdx.x / 32] : NULL;
    // the short path for a warp a partition, its lanes a constant
    if (!(lanes == 32 && funnel__dp_parse_short(a, p, lane, 32, st, FUNNEL__DP_STAGE_BYTES)))
      funnel__dp_parse(a, p, lane, lanes, st, FUNNEL__DP_STAGE_BYTES);
  }
  if (a->zmode == FUNNEL_DP_UNPACK) return;  // the jobs and their bytes: nothing to scan
  __syncthreads();
  if (!FUNNEL__DP_PARSE_SCANS(n, from, count)) {
    int64_t *tiles = (int64_t *)(uintptr_t)a->tiles;
    const int64_t q = first + threadIdx.x;
    for (int64_t k = 0; k <= a->n_var; k++) {
      const int64_t sum = block_sum(threadIdx.x < tile && q < end ? scan_array(a, k)[q] : 0);
      if (threadIdx.x == 0) tiles[k * a->n_tiles + block] = sum;
    }
    return;
  }
  funnel__dp_summary *s = (funnel__dp_summary *)(uintptr_t)a->summary;
  if (!last_block_to_finish(s)) return;
  // the args, which the tail reads again and again between its stores to
  // global memory (which a pointer to them might alias), in shared memory
  __shared__ funnel__dp_args sa;
  for (unsigned w = threadIdx.x; w < sizeof(sa) / 8; w += blockDim.x)
    ((uint64_t *)&sa)[w] = ((const uint64_t *)a)[w];
  __syncthreads();
  // a flat read of at most a block's columns: what its layout reads, loaded
  // now (layout_block_flat), the scan's totals kept in the stage
  const bool flat = !FUNNEL_DP_NESTED(&sa) && sa.n_cols <= (int)blockDim.x &&
                    1 + sa.n_var <= (int64_t)sizeof(stage) / 8;
  int64_t *totals = (int64_t *)&stage[0][0];
  funnel__dp_column col = {};
  int64_t col_nulls = 0, left = 0;
  if (flat) {
    if ((int)threadIdx.x < sa.n_cols) {
      col = ((const funnel__dp_column *)(uintptr_t)sa.columns)[threadIdx.x];
      col_nulls = ((const int64_t *)(s + 1))[threadIdx.x];
    }
    left = s->left;
  }
  // a thread a run of `per` partitions (one, up to 256 of them; at most
  // PER): the run's sum, the block's scan of the sums, then the run
  // scanned from its start. Its loads are unconditional (a run's last
  // value read again past its end), so that they all go out at once, and
  // the next array's go out before this one's scan, so that the arrays
  // (rows, then each string column's bytes) wait for memory once, not once
  // each (globaltimer on the H100, the scan of this tail: 4.6 us for
  // 1000x4x1 strings, three arrays, and 4.7 us for 200x10x10 strings, six,
  // an array at a time)
  constexpr int PER = FUNNEL__DP_PARSE_SCAN_MAX / FUNNEL__DPATH_THREADS;
  const int64_t per = (n + FUNNEL__DPATH_THREADS - 1) / FUNNEL__DPATH_THREADS;
  const int64_t lo = threadIdx.x * per;
  int64_t x[PER], next[PER];
  const auto load = [&](int64_t k, int64_t *into) {
    const int64_t *v = scan_array(&sa, k);
#pragma unroll
    for (int j = 0; j < PER; j++) into[j] = v[min(lo + min((int64_t)j, per - 1), n - 1)];
  };
  load(0, x);
  for (int64_t k = 0; k <= sa.n_var; k++) {
    if (k < sa.n_var) load(k + 1, next);
    int64_t sum = 0, total;
#pragma unroll
    for (int j = 0; j < PER; j++) {
      if (!(j < per && lo + j < n)) x[j] = 0;
      sum += x[j];
    }
    int64_t before = block_exclusive_scan(sum, &total);
    int64_t *v = scan_array(&sa, k);
#pragma unroll
    for (int j = 0; j < PER; j++)
      if (j < per && lo + j < n) {
        v[lo + j] = before;
        before += x[j];
      }
    if (threadIdx.x == 0) {
      v[n] = total;
      if (flat) totals[k] = total;  // layout_block_flat's (the stage's parse is over)
      if (k == 0) s->rows = total;
      else ((int64_t *)(s + 1))[sa.n_cols + (k - 1)] = total;
    }
#pragma unroll
    for (int j = 0; j < PER; j++) x[j] = next[j];
  }
  if (flat) layout_block_flat(&sa, col, col_nulls, left, totals);
  else layout_block(&sa);
  if (threadIdx.x == 0) a->n_bitbufs = sa.n_bitbufs;  // the layout's, for the concat
  publish_summary(&sa);
}

// The pieces, m lanes a piece, then the bit buffers' words, a group of
// lanes a word (funnel__dp_bit_lanes): one launch for the whole concat.
// Two kernels run it: one with the registers the compiler wants (64), for
// reads of fixed-width columns; one held to 48 (a few spilled), so that
// five blocks an SM fit, not four, for flat reads with string columns
// (FUNNEL_DP_STAGE_VAR), whose pieces wait longer on memory. The kernel
// alone on the H100 at 48 registers against 64 (bench/RESULTS.md, session
// 36): 50000x10x27 strings 550 -> 474 us, 10000x4x100 strings 116 -> 101,
// 1000x10x100 strings 37 -> 32; but 50000x10x1 mixed 34 -> 37, 50000x10x10
// mixed 74 -> 79.
__device__ __forceinline__ void concat(const funnel__dp_args *a, int64_t n, int64_t m,
                                       int64_t pairs_min) {
  if (!funnel__dp_laid_out(a)) return;
  const int lanes = (int)m;
  const int64_t thread = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t threads = (int64_t)gridDim.x * blockDim.x;
  const int lane = (int)(threadIdx.x & (unsigned)(lanes - 1));
  const int lanes_lg = __ffs(lanes) - 1;  // lanes is a power of two
  for (int64_t i = thread >> lanes_lg; i < n; i += threads >> lanes_lg)
    funnel__dp_piece_copy(a, i, lane, lanes, pairs_min);
  const int64_t rows = ((const int64_t *)(uintptr_t)a->rows)[a->n_parts];
  const int64_t words = FUNNEL__DP_WORDS(funnel__dp_bit_rows(a));
  const int bit_lanes = funnel__dp_bit_lanes(a->n_parts, rows);
  const int bit_lane = (int)(threadIdx.x & (unsigned)(bit_lanes - 1));
  const int bit_lg = __ffs(bit_lanes) - 1;
  const double per_row = rows > 0 ? (double)a->n_parts / (double)rows : 0.0;
  for (int64_t k = thread >> bit_lg; k < a->n_bitbufs * words; k += threads >> bit_lg)
    funnel__dp_bits_word(a, k / words, k % words, per_row, bit_lane, bit_lanes);
}

extern "C" __global__ void __launch_bounds__(256) DPK(funnel_dp_concat)(const funnel__dp_args *a,
                                                                     int64_t n, int64_t m) {
  concat(a, n, m, FUNNEL__DP_COPY_PAIRS_MIN);
}

#if defined(FUNNEL_DP_FLAT_ONLY)
// Turing (sm_75) holds 1,024 threads an SM, four blocks: there the kernel
// gets the 64 registers four blocks leave (five would be out of range, and
// ptxas would ignore the bound with a warning)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FUNNEL__DP_CONCAT_VAR_BLOCKS 4
#else
#define FUNNEL__DP_CONCAT_VAR_BLOCKS 5
#endif
extern "C" __global__ void __launch_bounds__(256, FUNNEL__DP_CONCAT_VAR_BLOCKS)
    DPK(funnel_dp_concat_var)(const funnel__dp_args *a, int64_t n, int64_t m) {
  concat(a, n, m, INT64_MAX);  // 16-byte copies spill more of its 48 registers
}
#undef FUNNEL__DP_CONCAT_VAR_BLOCKS
#endif

// Block (b, k) scans tile b of array k: the tiles before it give its
// carry (their sums, from the parse), the block scans its values. The last
// tile writes the total to [n_parts] and to the summary. The block that
// finishes last lays the output out.
extern "C" __global__ void __launch_bounds__(256) DPK(funnel_dp_scan)(funnel__dp_args *a,
                                                                   int64_t n, int64_t m,
                                                                   int64_t gated) {
  (void)n;
  if (gated && funnel__dp_shut(a)) return;  // a gated pass (dpath.h): the whole grid alike
  const int64_t count = m, k = blockIdx.y, b = blockIdx.x;
  const int64_t *tiles = (const int64_t *)(uintptr_t)a->tiles + k * a->n_tiles;
  // the parse's tiles before this one's partitions
  const int64_t before_tiles = b * a->parse_lanes;
  int64_t part = 0;
  for (int64_t j = threadIdx.x; j < before_tiles; j += blockDim.x) part += tiles[j];
  const int64_t carry = block_sum(part);
  int64_t *v = scan_array(a, k);
  const int64_t p = b * blockDim.x + threadIdx.x;
  const int64_t x = p < count ? v[p] : 0;
  int64_t total;
  const int64_t before = block_exclusive_scan(x, &total);
  if (p < count) v[p] = carry + before;
  funnel__dp_summary *s = (funnel__dp_summary *)(uintptr_t)a->summary;
  if (b == gridDim.x - 1 && threadIdx.x == 0) {
    v[count] = carry + total;
    if (k == 0) s->rows = carry + total;
    else ((int64_t *)(s + 1))[a->n_cols + (k - 1)] = carry + total;
  }
  if (last_block_to_finish(s)) {
    layout_block(a);
    publish_summary(a);
  }
}
