// concat.cu: the partition-map concat on the device. One launch runs a
// whole segment table (segment.h): block b takes segment b and its threads
// stride over it. Bit segments share boundary words with their neighbours,
// so those two words are written with atomics that change only the
// segment's own bits; every other word belongs to one segment.
#include <stdint.h>

extern "C" {
#include "segment.h"
}

namespace {

__device__ __forceinline__ uint32_t load_bits32(const uint8_t *src, uint64_t bit) {
  // 32 bits starting at any bit: up to 5 bytes, read one by one because
  // sources sit at any byte alignment
  const uint8_t *p = src + (bit >> 3);
  const unsigned shift = (unsigned)(bit & 7);
  uint64_t v = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
               (uint64_t)p[3] << 24;
  if (shift) v |= (uint64_t)p[4] << 32;
  return (uint32_t)(v >> shift);
}

// Bits [lo, hi) of a segment that lands in 32-bit output word w. Reads of
// the source stay inside its count bits, rounded up to whole bytes.
__device__ void write_word(uint32_t *dst, uint64_t w, uint64_t dst_bit, uint64_t count,
                           const uint8_t *src, uint64_t src_bit, int kind) {
  const uint64_t word_first = w * 32;
  const uint64_t lo = word_first > dst_bit ? word_first : dst_bit;
  const uint64_t end = dst_bit + count;
  const uint64_t hi = word_first + 32 < end ? word_first + 32 : end;
  const unsigned n = (unsigned)(hi - lo);
  const unsigned at = (unsigned)(lo - word_first);
  const uint32_t mask = (n == 32 ? 0xFFFFFFFFu : ((1u << n) - 1u)) << at;
  uint32_t bits;
  if (kind == FUNNEL_SEG_BITS) {
    const uint64_t from = src_bit + (lo - dst_bit);
    // never read past the source's last byte
    const uint64_t src_end_byte = (src_bit + count + 7) >> 3;
    uint32_t v;
    if (((from >> 3) + 5) <= src_end_byte) {
      v = load_bits32(src, from);
    } else {
      v = 0;
      for (unsigned k = 0; k < n; k++) {
        const uint64_t b = from + k;
        v |= (uint32_t)((src[b >> 3] >> (b & 7)) & 1u) << k;
      }
    }
    bits = (v << at) & mask;
  } else {
    bits = kind == FUNNEL_SEG_ONES ? mask : 0u;
  }
  if (mask == 0xFFFFFFFFu) {
    dst[w] = bits;
  } else {
    atomicAnd(&dst[w], ~mask);
    atomicOr(&dst[w], bits);
  }
}

__device__ void run_bits(const funnel__segment &s) {
  if (s.count == 0) return;
  // dst is 64-byte aligned (the plan carves every output buffer so)
  uint32_t *dst = (uint32_t *)(uintptr_t)s.dst;
  const uint8_t *src = (const uint8_t *)(uintptr_t)s.src;
  const uint64_t first = s.dst_bit / 32, last = (s.dst_bit + s.count - 1) / 32;
  for (uint64_t w = first + threadIdx.x; w <= last; w += blockDim.x)
    write_word(dst, w, s.dst_bit, s.count, src, s.src_bit, (int)s.kind);
}

// Copies n bytes with words of type W once src and dst are both W-aligned
// (the caller checked they can be: same alignment mod sizeof(W)).
template <typename W>
__device__ void copy_words(uint8_t *dst, const uint8_t *src, uint64_t n) {
  const uint64_t head = (sizeof(W) - ((uintptr_t)dst & (sizeof(W) - 1))) & (sizeof(W) - 1);
  const uint64_t h = head < n ? head : n;
  for (uint64_t i = threadIdx.x; i < h; i += blockDim.x) dst[i] = src[i];
  const uint64_t words = (n - h) / sizeof(W);
  const W *sw = (const W *)(src + h);
  W *dw = (W *)(dst + h);
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) dw[i] = sw[i];
  for (uint64_t i = h + words * sizeof(W) + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

// Copies n bytes whose source and destination differ in alignment mod 8
// (string characters land at any byte; callers with a skew of 0 mod 8 use
// copy_words): every thread writes aligned 8-byte
// words of dst, each joined from the two aligned source words it straddles,
// so no thread moves single bytes but at the two ends. Both source words
// hold at least one byte of the range, so no read leaves the aligned words
// that hold it.
__device__ void copy_shifted(uint8_t *dst, const uint8_t *src, uint64_t n) {
  const uint64_t head = (8 - ((uintptr_t)dst & 7)) & 7;
  const uint64_t h = head < n ? head : n;
  for (uint64_t i = threadIdx.x; i < h; i += blockDim.x) dst[i] = src[i];
  const uint64_t words = (n - h) / 8;
  const uint8_t *s = src + h;
  // dst + h is 8-aligned and the caller's skew is not a multiple of 8, so
  // the source is off by r in 1..7
  const unsigned r = (unsigned)((uintptr_t)s & 7);
  uint64_t *dw = (uint64_t *)(dst + h);
  const uint64_t *sa = (const uint64_t *)(s - r);
  const unsigned lo_shift = 8 * r, hi_shift = 64 - 8 * r;
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x)
    dw[i] = (sa[i] >> lo_shift) | (sa[i + 1] << hi_shift);
  for (uint64_t i = h + words * 8 + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

__device__ void run_bytes(const funnel__segment &s) {
  const uint8_t *src = (const uint8_t *)(uintptr_t)s.src;
  uint8_t *dst = (uint8_t *)(uintptr_t)s.dst;
  // the widest word both sides can be aligned to: IPC buffers are 8-aligned
  // in their partition, outputs 64-aligned, so fixed-width data mostly
  // goes by 8 or 16 bytes; string bytes start anywhere
  const uint64_t skew = s.src ^ s.dst;
  if ((skew & 15) == 0) copy_words<uint4>(dst, src, s.count);
  else if ((skew & 7) == 0) copy_words<uint2>(dst, src, s.count);
  else copy_shifted(dst, src, s.count);
}

// T is unsigned: offsets are rebased before the host has checked them (a
// read with a bad one is dropped), so the sum may wrap.
template <typename T>
__device__ void run_offsets(const funnel__segment &s) {
  const uint8_t *src = (const uint8_t *)(uintptr_t)s.src;
  T *dst = (T *)(uintptr_t)s.dst;  // output offsets are aligned
  const T delta = (T)s.value;
  if ((s.src & (sizeof(T) - 1)) == 0) {
    const T *in = (const T *)src;
    for (uint64_t i = threadIdx.x; i < s.count; i += blockDim.x) dst[i] = in[i] + delta;
  } else {
    for (uint64_t i = threadIdx.x; i < s.count; i += blockDim.x) {
      T v = 0;
      for (unsigned k = 0; k < sizeof(T); k++) v |= (T)src[i * sizeof(T) + k] << (8 * k);
      dst[i] = v + delta;
    }
  }
}

}  // namespace

extern "C" __global__ void funnel_concat(const funnel__segment *segments, int64_t count) {
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const funnel__segment s = segments[i];
    switch (s.kind) {
      case FUNNEL_SEG_BYTES: run_bytes(s); break;
      case FUNNEL_SEG_BITS:
      case FUNNEL_SEG_ONES:
      case FUNNEL_SEG_ZEROS: run_bits(s); break;
      case FUNNEL_SEG_OFFSETS32: run_offsets<uint32_t>(s); break;
      case FUNNEL_SEG_OFFSETS64: run_offsets<uint64_t>(s); break;
      case FUNNEL_SEG_PUT32:
        if (threadIdx.x == 0) *(int32_t *)(uintptr_t)s.dst = (int32_t)s.value;
        break;
      case FUNNEL_SEG_PUT64:
        if (threadIdx.x == 0) *(int64_t *)(uintptr_t)s.dst = s.value;
        break;
      default: break;
    }
  }
}

// ------------------------------------------------------------ device path
// The stages of dpath.h (launched by cuda_backend.c with the block sizes
// of tuning.h, which the launch bounds repeat): the parse a group of lanes
// a partition (funnel__dp_parse_lanes; its lanes split the loops over bytes
// and rows; a warp walks the flatbuffer in shared memory), the pieces a
// group of m lanes a piece (m from the pieces' mean size), the bits a group
// a word (funnel__dp_bit_lanes), the scan a block an array.

extern "C" {
#include "dpath.h"
}

// the kernels' launch bounds and the scan's tile are this block size
static_assert(FUNNEL__DPATH_THREADS == 256, "the launch bounds below say 256");

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

// Lays the output out (dpath.h) with the whole block: a thread a column,
// the columns' footprints scanned, so no thread walks a chain of loads
// through every column.
__device__ void layout_block(funnel__dp_args *a) {
  __syncthreads();  // the scan's totals, written by thread 0, seen by all
  int64_t rows;
  if (!funnel__dp_layout_begin(a, &rows)) return;  // the same for every thread
  const int n_cols = a->n_cols;
  int64_t at = 0, nb = 0;
  for (int base = 0; base < n_cols; base += (int)blockDim.x) {
    const int c = base + (int)threadIdx.x;
    int64_t size[3] = {-1, -1, -1};
    int bits = 0;
    bool ok = true;
    if (c < n_cols) {
      ok = funnel__dp_column_sizes(a, c, rows, size, &bits);
      // each at most the allocation, so the block's sum cannot overflow
      ok = ok && funnel__dp_footprint(size) <= a->out_capacity;
    }
    if (!__syncthreads_and(ok)) return;
    int64_t foot_total, bits_total;
    const int64_t foot = block_exclusive_scan(c < n_cols ? funnel__dp_footprint(size) : 0, &foot_total);
    const int64_t bit = block_exclusive_scan(bits, &bits_total);
    if (at + foot_total > a->out_capacity) return;
    if (c < n_cols) funnel__dp_place_column(a, c, at + foot, size, nb + bit);
    at += foot_total;
    nb += bits_total;
  }
  if (threadIdx.x == 0) funnel__dp_layout_end(a, at, nb);
}

// Hands the summary to the host, when it reads it where the kernel can
// write (args.summary_back): after the layout, by the block that made it.
__device__ void publish_summary(const funnel__dp_args *a) {
  if (a->summary_back == 0) return;
  __syncthreads();  // the layout's marks, written by thread 0, seen by all
  const int64_t *src = (const int64_t *)(uintptr_t)a->summary;
  int64_t *dst = (int64_t *)(uintptr_t)a->summary_back;
  for (int64_t k = threadIdx.x; k < funnel__dp_summary_bytes(a) / 8; k += blockDim.x)
    dst[k] = src[k];
  __threadfence_system();
}

}  // namespace

// m lanes a partition (args.parse_lanes): a warp walks a partition's
// metadata in shared memory, a smaller group where it lies; then each
// block sums its tile of every scan array, or, when the partitions fit one
// tile of the scan, the block that finishes last scans them and lays the
// output out.
extern "C" __global__ void __launch_bounds__(256) funnel_dp_parse(funnel__dp_args *a,
                                                                    int64_t n, int64_t m) {
  __shared__ uint64_t stage[FUNNEL__DPATH_THREADS / 32][FUNNEL__DP_STAGE_BYTES / 8];
  const int lanes = (int)m;
  const int64_t tile = FUNNEL__DPATH_THREADS / lanes, first = (int64_t)blockIdx.x * tile;
  const int64_t p = first + threadIdx.x / (unsigned)lanes;
  if (p < n) {
    const unsigned warp = threadIdx.x / 32;
    funnel__dp_parse(a, p, (int)(threadIdx.x % (unsigned)lanes), lanes,
                     lanes == 32 ? (uint8_t *)stage[warp] : NULL, FUNNEL__DP_STAGE_BYTES);
  }
  __syncthreads();
  if (!FUNNEL__DP_PARSE_SCANS(n)) {
    int64_t *tiles = (int64_t *)(uintptr_t)a->tiles;
    const int64_t q = first + threadIdx.x;
    for (int64_t k = 0; k <= a->n_var; k++) {
      const int64_t sum = block_sum(threadIdx.x < tile && q < n ? scan_array(a, k)[q] : 0);
      if (threadIdx.x == 0) tiles[k * a->n_tiles + blockIdx.x] = sum;
    }
    return;
  }
  funnel__dp_summary *s = (funnel__dp_summary *)(uintptr_t)a->summary;
  if (!last_block_to_finish(s)) return;
  const int64_t q = threadIdx.x;  // one tile: a thread a partition
  for (int64_t k = 0; k <= a->n_var; k++) {
    int64_t *v = scan_array(a, k);
    const int64_t x = q < n ? v[q] : 0;
    int64_t total;
    const int64_t before = block_exclusive_scan(x, &total);
    if (q < n) v[q] = before;
    if (threadIdx.x == 0) {
      v[n] = total;
      if (k == 0) s->rows = total;
      else ((int64_t *)(s + 1))[a->n_cols + (k - 1)] = total;
    }
  }
  layout_block(a);
  publish_summary(a);
}

// The pieces, m lanes a piece, then the bit buffers' words, a group of
// lanes a word (funnel__dp_bit_lanes): one launch for the whole concat.
extern "C" __global__ void __launch_bounds__(256) funnel_dp_concat(const funnel__dp_args *a,
                                                                     int64_t n, int64_t m) {
  if (!funnel__dp_laid_out(a)) return;
  const int lanes = (int)m;
  const int64_t thread = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t threads = (int64_t)gridDim.x * blockDim.x;
  const int lane = (int)(threadIdx.x & (unsigned)(lanes - 1));
  const int lanes_lg = __ffs(lanes) - 1;  // lanes is a power of two
  for (int64_t i = thread >> lanes_lg; i < n; i += threads >> lanes_lg)
    funnel__dp_piece_copy(a, i, lane, lanes);
  const int64_t rows = ((const int64_t *)(uintptr_t)a->rows)[a->n_parts];
  const int64_t words = FUNNEL__DP_WORDS(rows);
  const int bit_lanes = funnel__dp_bit_lanes(a->n_parts, rows);
  const int bit_lane = (int)(threadIdx.x & (unsigned)(bit_lanes - 1));
  const int bit_lg = __ffs(bit_lanes) - 1;
  const double per_row = rows > 0 ? (double)a->n_parts / (double)rows : 0.0;
  for (int64_t k = thread >> bit_lg; k < a->n_bitbufs * words; k += threads >> bit_lg)
    funnel__dp_bits_word(a, k / words, k % words, per_row, bit_lane, bit_lanes);
}

// Block (b, k) scans tile b of array k: the tiles before it give its
// carry (their sums, from the parse), the block scans its values. The last
// tile writes the total to [n_parts] and to the summary. The block that
// finishes last lays the output out.
extern "C" __global__ void __launch_bounds__(256) funnel_dp_scan(funnel__dp_args *a,
                                                                   int64_t n, int64_t m) {
  (void)n;
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
