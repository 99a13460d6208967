/* The ZSTD and LZ4 decoders' device code (zstddec.h and lz4dec.h as nvcc
 * compiles them: a warp of 32 lanes a job, their votes, ranks and
 * shuffles) run on the host, on an emulated warp, so that the code the
 * host's one lane never takes is tested without a GPU. Each lane is a
 * coroutine (ucontext); every warp collective (__syncwarp, __ballot_sync,
 * __any_sync, __match_any_sync, the shuffles) is a meeting of all 32
 * lanes, which must arrive at the same one (else the warp diverged: a
 * failure). Between meetings the lanes run one after another, in order,
 * in reverse or at random: a lane that reads shared bytes another lane of
 * the same round writes gets different bytes in different orders. Loads
 * through __ldg are checked against the job's source bytes. Expected
 * values come from libzstd and liblz4: a frame or block they wrote
 * decodes to its input; a spoiled one is refused, or decoded as libzstd
 * decodes it (ZSTD) or as the host's lane does (LZ4: lz4dec.h as the cpu
 * backend compiles it, warp_host.c, with the same status); and every order
 * gives the same status and bytes.
 *
 * Under a sanitizer the test is skipped (ASan and TSan do not follow
 * swapcontext's stacks). */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, MAP_NORESERVE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "check.h"
#include "ipc_writer.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WARP_SKIPPED 1
#else
#define WARP_SKIPPED 0
#endif

/* ------------------------------------------------------ the emulated warp */

/* A warp's lanes; a block of two warps' (funnel__lz4_block_pair's) */
enum { LANES = 32, MOST_LANES = 64, STACK = 1 << 17 };
/* a lane's collectives: the warp's, the block's barrier (__syncthreads),
 * its end */
enum { K_SYNC = 1, K_BALLOT, K_ANY, K_MATCH, K_SHFL, K_UP, K_XOR, K_BAR, K_EXIT };

static ucontext_t warp_main, lane_ctx[MOST_LANES];
static unsigned current;     /* the running lane: its warp's lane is current % 32 */
static int threads = LANES;  /* the block's lanes: one warp, or two */
static uint64_t lane_val[MOST_LANES], lane_res[MOST_LANES];
static int lane_kind[MOST_LANES], lane_line[MOST_LANES], lane_arg[MOST_LANES];
/* what a lane's load may touch: its job's source (a lane may be at the
 * next job while another is still at this one) */
static const uint8_t *span_lo[MOST_LANES], *span_hi[MOST_LANES];

/* A lane's arrival at a collective: back to the warp, which answers. */
static uint64_t meet(int kind, int line, uint64_t v, int arg) {
  const unsigned l = current;
  lane_kind[l] = kind;
  lane_line[l] = line;
  lane_val[l] = v;
  lane_arg[l] = arg;
  swapcontext(&lane_ctx[l], &warp_main);
  return lane_res[l];
}

/* Whether the k bytes at p are the job's (else a failure: the load then
 * reads 0, not what lies there). */
static int checked_load(const void *p, size_t k) {
  const uint8_t *b = (const uint8_t *)p, *lo = span_lo[current], *hi = span_hi[current];
  if (b >= lo && b + k <= hi) return 1;
  check_fail(__FILE__, __LINE__, "lane %u: a load of bytes [%td, %td) outside the job's [0, %td)",
             current, b - lo, b + k - lo, hi - lo);
  return 0;
}

#define __syncwarp() ((void)meet(K_SYNC, __LINE__, 0, 0))
#define __syncthreads() ((void)meet(K_BAR, __LINE__, 0, 0))
#define __ballot_sync(m, c) ((unsigned)meet(K_BALLOT, __LINE__, (c) ? 1 : 0, 0))
#define __any_sync(m, c) ((int)meet(K_ANY, __LINE__, (c) ? 1 : 0, 0))
#define __match_any_sync(m, v) ((unsigned)meet(K_MATCH, __LINE__, (uint64_t)(v), 0))
#define __shfl_sync(m, v, q) ((__typeof__(v))meet(K_SHFL, __LINE__, (uint64_t)(v), (int)(q)))
#define __shfl_up_sync(m, v, d) ((__typeof__(v))meet(K_UP, __LINE__, (uint64_t)(v), (int)(d)))
#define __shfl_xor_sync(m, v, o) ((__typeof__(v))meet(K_XOR, __LINE__, (uint64_t)(v), (int)(o)))
#define __ldg(p)                                   \
  ({                                               \
    __typeof__(p) ldg_p = (p);                     \
    checked_load(ldg_p, sizeof(*ldg_p)) ? *ldg_p : 0; \
  })
#define __popc(v) ((unsigned)__builtin_popcount(v))
#define __ffs(v) __builtin_ffs((int)(v))
#define __clz(v) __builtin_clz(v)
static uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, unsigned shift) {
  return (uint32_t)(((uint64_t)hi << 32 | lo) >> (shift & 31));
}
/* (the device's is approximate: funnel__lz_mod corrects the quotient) */
static float __fdividef(float a, float b) { return a / b; }
/* a product rounded toward zero: the exact one (in a double), then a
 * float rounded to nearest stepped back toward zero when it is past it */
static float __fmul_rz(float a, float b) {
  const double p = (double)a * (double)b;
  float f = (float)p;
  if ((p >= 0 && f > p) || (p < 0 && f < p)) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bits--;
    memcpy(&f, &bits, 4);
  }
  return f;
}
#define __CUDACC__ 1
#define __device__
#define __forceinline__
#define __noinline__
#define __constant__
/* lz4dec.h's PTX (a shuffle, a prefetch): the emulation's __shfl_sync, nothing */
#define FUNNEL_LZ_NO_PTX 1
/* (the device's functions are static here, not inline: some go unused;
 * lz4dec.h's #pragma unroll is nvcc's) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "zstddec.h" /* and lz4dec.h, both as the device compiles them */
#pragma GCC diagnostic pop
#undef __CUDACC__

/* The host's lane (warp_host.c): funnel__lz4_run_jobs as the cpu backend
 * compiles it. */
void warp_host_lz4_jobs(struct funnel__lz4_job *jobs, int64_t n, uint64_t base, unsigned ways);

enum { MAX_JOBS = 72 };
/* the block's shared memory: concat.cu's funnel_zstd_decode's union */
static union {
  struct funnel__zstd_scratch z;
  struct funnel__lz4_scratch l;
} scratch;
/* two warps' (concat.cu's funnel_lz4_decode's) */
static struct funnel__lz4_pair pair;
static int job_codec; /* 0: a ZSTD buffer; 1: LZ4 jobs; 2: xxHash32 of job_src's job_n bytes */
static const uint8_t *job_src;
static int64_t job_n, job_cap;
static uint8_t *job_dst;
static struct funnel__lz4_job *lz4_jobs;
static int lz4_n;
static unsigned lz4_ways = 1; /* each job's ways (funnel__lz4_frames_way), one after another */
static uint64_t lz4_base;
static int lane_status[MOST_LANES][MAX_JOBS];
static uint32_t lane_hash[LANES];
static char stacks[MOST_LANES][STACK];

static void lane_main(void) {
  const unsigned l = current;
  if (job_codec == 2) {
    lane_hash[l] = funnel__xxh32_warp(job_src, job_n, l);
  } else if (job_codec == 0) {
    lane_status[l][0] =
        funnel__zstd_frames(job_src, job_n, job_dst, job_cap, l, LANES, &scratch.z);
  } else {
    /* a warp's jobs one after another, as concat.cu's funnel_zstd_decode
     * takes them, with one scratch; or a block's, two warps a job, a
     * barrier after each, as funnel_lz4_decode does */
    const int pair_of_warps = threads == MOST_LANES;
    for (int j = 0; j < lz4_n; j++) {
      const struct funnel__lz4_job job = lz4_jobs[j];
      span_lo[l] = (const uint8_t *)(uintptr_t)job.src;
      span_hi[l] = span_lo[l] + job.src_length;
      /* its ways' worst status, as funnel_lz4_decode's atomicMax keeps it */
      lane_status[l][j] = -1;
      for (unsigned w = 0; w < lz4_ways; w++) {
        const int st = funnel__lz4_job_run(&job, lz4_base, w, lz4_ways, l % LANES,
                                           (unsigned)threads, l / LANES,
                                           pair_of_warps ? NULL : &scratch.l,
                                           pair_of_warps ? &pair : NULL);
        if (st > lane_status[l][j]) lane_status[l][j] = st;
        if (pair_of_warps) __syncthreads();
      }
    }
  }
  meet(K_EXIT, -1, 0, 0);
}

/* Runs the block's lanes (lane_main: `threads` of them, one warp or two)
 * to their end, between meetings in `order` (0 in turn, 1 in reverse, 2
 * at random from seed; 3 as 2, and between two barriers one warp, chosen
 * at random, waits until the other is at the second or ended, so that
 * what one warp writes before a barrier and the other reads after it is
 * tested apart from the warps' lockstep): 0, or -100 when a warp diverged
 * or a barrier waits for a warp that ended. A warp's collective is
 * answered once its 32 lanes are at it; a barrier once every warp's are. */
static uint32_t order_seed; /* (static: the lanes' swapcontext would clobber a local) */
static int lane_waits[MOST_LANES];

static int warp_run(int order, uint32_t seed) {
  order_seed = seed;
  for (int l = 0; l < threads; l++) {
    getcontext(&lane_ctx[l]);
    lane_ctx[l].uc_stack.ss_sp = stacks[l];
    lane_ctx[l].uc_stack.ss_size = STACK;
    lane_ctx[l].uc_link = NULL;
    makecontext(&lane_ctx[l], lane_main, 0);
    lane_waits[l] = 0;
  }
  int perm[MOST_LANES];
  const int warps = threads / LANES;
  int held = -1; /* order 3: the warp that waits for the other, until the barrier */
  for (;;) {
    if (order == 3 && warps == 2 && held < 0) {
      order_seed = order_seed * 1103515245u + 12345u;
      held = (int)(order_seed >> 8 & 1);
    }
    int skip = -1; /* the warp held now: until the other is at a barrier or ended */
    if (held >= 0) {
      const int other = LANES * (1 - held);
      if (!lane_waits[other] || (lane_kind[other] != K_BAR && lane_kind[other] != K_EXIT))
        skip = held;
    }
    for (int i = 0; i < threads; i++) perm[i] = order == 1 ? threads - 1 - i : i;
    for (int i = threads - 1; order >= 2 && i > 0; i--) {
      order_seed = order_seed * 1103515245u + 12345u;
      const int k = (int)((order_seed >> 8) % (uint32_t)(i + 1)), t = perm[i];
      perm[i] = perm[k];
      perm[k] = t;
    }
    for (int i = 0; i < threads; i++) {
      if (lane_waits[perm[i]] || perm[i] / LANES == skip) continue;
      current = (unsigned)perm[i];
      swapcontext(&warp_main, &lane_ctx[perm[i]]);
      lane_waits[perm[i]] = 1;
    }
    /* each warp's lanes at one collective; those of the warp's own
     * answered */
    int answered = 0, ended = 0, waiting = 0;
    for (int w = 0; w < warps; w++) {
      if (!lane_waits[LANES * w]) { /* (the warp held) */
        waiting = 1;
        continue;
      }
      const int *kinds = lane_kind + LANES * w, *lines = lane_line + LANES * w;
      const uint64_t *val = lane_val + LANES * w;
      const int kind = kinds[0], line = lines[0];
      for (int l = 1; l < LANES; l++)
        if (kinds[l] != kind || lines[l] != line) {
          check_fail(__FILE__, __LINE__,
                     "warp %d diverged: lane 0 at a collective of line %d, lane %d of line %d", w,
                     line, l, lines[l]);
          return -100; /* (the lanes' stacks are left as they are) */
        }
      if (kind == K_EXIT || kind == K_BAR) {
        ended += kind == K_EXIT;
        continue;
      }
      uint32_t ballot = 0;
      for (int l = 0; l < LANES; l++) ballot |= (uint32_t)(val[l] & 1) << l;
      for (int l = 0; l < LANES; l++) {
        uint64_t r = 0;
        const int arg = lane_arg[LANES * w + l];
        if (kind == K_BALLOT) r = ballot;
        else if (kind == K_ANY) r = ballot != 0;
        else if (kind == K_MATCH)
          for (int q = 0; q < LANES; q++)
            r |= (uint64_t)((uint32_t)val[q] == (uint32_t)val[l]) << q;
        else if (kind == K_SHFL) r = val[arg & 31];
        else if (kind == K_UP) r = l >= arg ? val[l - arg] : val[l];
        else if (kind == K_XOR) r = val[(l ^ arg) & 31];
        lane_res[LANES * w + l] = r;
        lane_waits[LANES * w + l] = 0;
      }
      answered = 1;
    }
    if (answered || waiting) continue;
    if (ended == warps) break;
    /* every warp at a barrier or ended: the barrier, when every warp is
     * at it (the same one) */
    for (int w = 1; w < warps; w++)
      if (lane_kind[LANES * w] != K_BAR || lane_line[LANES * w] != lane_line[0] ||
          lane_kind[0] != K_BAR) {
        check_fail(__FILE__, __LINE__,
                   "a barrier (line %d) that not every warp reaches: warp %d at line %d",
                   lane_kind[0] == K_BAR ? lane_line[0] : lane_line[LANES * w], w,
                   lane_line[LANES * w]);
        return -100;
      }
    for (int l = 0; l < threads; l++) lane_res[l] = 0, lane_waits[l] = 0;
    held = -1;
  }
  return 0;
}

/* Whether every lane ended job j with lane 0's status. */
static int lanes_agree(int j) {
  for (int l = 1; l < threads; l++)
    if (lane_status[l][j] != lane_status[0][j]) {
      check_fail(__FILE__, __LINE__, "job %d: lane %d ended with status %d, lane 0 with %d", j, l,
                 lane_status[l][j], lane_status[0][j]);
      return 0;
    }
  return 1;
}

/* Decodes the ZSTD frames of n bytes at src into exactly cap at dst on the
 * emulated warp, its lanes run in `order`: the status, or -100 when the
 * warp diverged. */
static int warp_decode(const uint8_t *src, int64_t n, uint8_t *dst, int64_t cap, int order,
                       uint32_t seed) {
  job_codec = 0;
  job_src = src;
  job_n = n;
  job_dst = dst;
  job_cap = cap;
  for (int l = 0; l < LANES; l++) span_lo[l] = src, span_hi[l] = src + n;
  if (warp_run(order, seed) != 0 || !lanes_agree(0)) return -100;
  return lane_status[0][0];
}

/* Runs the n LZ4 jobs, their dst `base` more, on the emulated warp, its
 * lanes run in `order`: each job's status into its .status (-100 when the
 * lanes disagree), or -100 when the warp diverged. */
static int warp_lz4_jobs(struct funnel__lz4_job *jobs, int n, uint64_t base, int order,
                         uint32_t seed) {
  job_codec = 1;
  memset(&pair, 0xC3, sizeof(pair)); /* (no read of a round before it is written) */
  lz4_jobs = jobs;
  lz4_n = n;
  lz4_base = base;
  if (warp_run(order, seed) != 0) return -100;
  for (int j = 0; j < n; j++) jobs[j].status = lanes_agree(j) ? lane_status[0][j] : -100;
  return 0;
}

/* xxHash32 of the n bytes at p by the emulated warp (funnel__xxh32_warp),
 * its lanes run in `order`: lane 0's, or 0 with a failure when the warp
 * diverged or a lane got another. */
static uint32_t warp_xxh32(const uint8_t *p, int64_t n, int order, uint32_t seed) {
  job_codec = 2;
  job_src = p;
  job_n = n;
  if (warp_run(order, seed) != 0) return 0;
  for (int l = 1; l < LANES; l++)
    if (lane_hash[l] != lane_hash[0]) {
      check_fail(__FILE__, __LINE__, "lane %d hashed %08x, lane 0 %08x", l, lane_hash[l],
                 lane_hash[0]);
      return 0;
    }
  return lane_hash[0];
}

/* ------------------------------------------------------------------ tests */

/* A frame (zn bytes, at an offset of 0 to 7 from an aligned buffer, as
 * the device's sources are) decoded into exactly n bytes in each order:
 * every order's status and bytes alike; the status is returned and the
 * bytes left at out. */
static int decode_in_every_order(const uint8_t *z, size_t zn, uint8_t *out, int64_t n,
                                 int offset, uint32_t seed) {
  uint8_t *src = malloc(zn + 8), *again = malloc((size_t)n + 1);
  memcpy(src + offset, z, zn);
  memset(out, 0xA5, (size_t)n);
  const int st = warp_decode(src + offset, (int64_t)zn, out, n, 0, seed);
  for (int order = 1; order <= 2; order++) {
    memset(again, 0x5A, (size_t)n);
    const int st2 = warp_decode(src + offset, (int64_t)zn, again, n, order, seed + 7);
    CHECK_EQ_I64(st2, st);
    if (st == FUNNEL__LZ4_OK && st2 == FUNNEL__LZ4_OK) CHECK_MEM(again, out, n);
  }
  free(again);
  free(src);
  return st;
}

static void warp_decodes_what_libzstd_writes(void) {
  if (WARP_SKIPPED) {
    printf("    SKIPPED %s: under a sanitizer (swapcontext)\n", __func__);
    return;
  }
  static const int64_t SIZES[] = {0, 1, 7, 245, 1000, 4096, 65536, 131073};
  static const int LEVELS[] = {-5, 1, 3, 19};
  uint64_t rng = 4242;
  int64_t refused = 0, decoded_alike = 0;
  for (int si = 0; si < 8; si++)
    for (int li = 0; li < 4; li++)
      for (int kind = 0; kind < 5; kind++) {
        const int64_t n = SIZES[si];
        check_context("%lld bytes, level %d, kind %d", (long long)n, LEVELS[li], kind);
        uint8_t *in = malloc((size_t)n + 1), *out = malloc((size_t)n + 1),
                *ref = malloc((size_t)n + 1);
        iw_sample_bytes(in, n, kind, &rng);
        size_t zn;
        uint8_t *z =
            iw_zstd_frame(LEVELS[li], (si + kind) % 2, (li + kind) % 2, in, (size_t)n, &zn);
        const int st = decode_in_every_order(z, zn, out, n, (int)(check_rand_below(&rng, 8)),
                                             (uint32_t)check_rand(&rng));
        CHECK_EQ_I64(st, FUNNEL__LZ4_OK);
        if (st == FUNNEL__LZ4_OK) CHECK_MEM(out, in, n);
        /* spoiled: refused, or decoded as libzstd decodes it */
        for (int k = 0; k < (n <= 4096 ? 6 : 2); k++) {
          size_t cut;
          uint8_t *bad = iw_spoiled_copy(&rng, z, zn, &cut);
          const int sst = decode_in_every_order(bad, cut, out, n, (int)check_rand_below(&rng, 8),
                                                (uint32_t)check_rand(&rng));
          CHECK(sst >= FUNNEL__LZ4_OK && sst <= FUNNEL__LZ4_DICTIONARY);
          if (sst == FUNNEL__LZ4_OK) {
            decoded_alike++;
            CHECK_EQ_I64(iw_zstd_decompress(bad, cut, ref, (size_t)n), n);
            CHECK_MEM(out, ref, n);
          } else {
            refused++;
          }
          free(bad);
        }
        free(z);
        free(ref);
        free(out);
        free(in);
      }
  check_context("%s", "");
  printf("    spoiled frames: %lld refused, %lld decoded as libzstd decodes them\n",
         (long long)refused, (long long)decoded_alike);
  CHECK(refused > 200 && decoded_alike > 20);
  /* an FSE table of count -1 symbols only */
  uint8_t lows[8], ref[8];
  const size_t lows_n = sizeof(IW_ZSTD_ALL_LOW_FRAME);
  CHECK_EQ_I64(iw_zstd_decompress(IW_ZSTD_ALL_LOW_FRAME, lows_n, ref, 8), 8);
  CHECK_EQ_I64(decode_in_every_order(IW_ZSTD_ALL_LOW_FRAME, lows_n, lows, 8, 3, 1), FUNNEL__LZ4_OK);
  CHECK_MEM(lows, ref, 8);
}

/* The warp's xxHash32 (the LZ4 frames' checksums, funnel__xxh32_warp) of
 * n bytes ending 0 to 7 bytes before a page the process may not read (so
 * at every alignment, and a load past the bytes is a crash), for n around
 * each length where its paths change (128-byte chunks, groups of
 * FUNNEL_XXH_GROUP of them, the last group's reach), in each order of the
 * lanes: the checksum liblz4 writes after a frame of those bytes. */
static void warp_hashes_as_liblz4_does(void) {
  if (WARP_SKIPPED) {
    printf("    SKIPPED %s: under a sanitizer (swapcontext)\n", __func__);
    return;
  }
  enum { GROUP = 128 * FUNNEL_XXH_GROUP, MOST = 4 * GROUP + 600 };
  uint64_t rng = 4444;
  const size_t page = 4096, room = (MOST + 16 + page - 1) / page * page;
  uint8_t *bytes = malloc(MOST), *map = mmap(NULL, room + page, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!CHECK(map != MAP_FAILED && mprotect(map + room, page, PROT_NONE) == 0)) return;
  iw_sample_bytes(bytes, MOST, 0, &rng);
  int64_t hashed = 0;
  for (int64_t n = 0; n < MOST; n++) {
    const int near =
        n < 160 || n % 128 < 6 || n % 128 > 122 || n % GROUP < 8 || n % GROUP > GROUP - 8;
    if (!(near || check_rand_below(&rng, 40) == 0)) continue;
    struct iw_lz4_shape sh = {.block_size_id = 4, .content_checksum = 1};
    size_t zn;
    uint8_t *z = iw_lz4_frame(&sh, bytes, (size_t)n, &zn);
    const uint32_t want = funnel__lz_ld32(z + zn - 4);
    free(z);
    for (int at = 0; at < 8; at++) {
      uint8_t *p = map + room - at - n;
      check_context("%lld bytes, %d before the page, at an offset of %d", (long long)n, at,
                    (int)((uintptr_t)p & 7));
      memcpy(p, bytes, (size_t)n);
      const int order = (int)((n + at) % 3);
      CHECK_EQ_I64(warp_xxh32(p, n, order, (uint32_t)check_rand(&rng)), want);
      hashed++;
    }
  }
  check_context("%s", "");
  printf("    %lld hashes\n", (long long)hashed);
  munmap(map, room + page);
  free(bytes);
}

/* ------------------------------------------------------------------ LZ4 */

enum { GUARD = 64 };

/* A copy (to free()) of the n bytes at z at an offset of 0 to 7 from an
 * aligned buffer, as the device's sources are: *block the buffer. */
static uint8_t *lz4_placed(const uint8_t *z, size_t n, uint64_t *rng, uint8_t **block) {
  const size_t at = (size_t)check_rand_below(rng, 8);
  *block = malloc(n + 8);
  if (n > 0) memcpy(*block + at, z, n);
  return *block + at;
}

/* The n jobs (each one's dst an offset in a buffer of `cap` bytes) of the
 * case `what` run on the host's lane, on the emulated warp and on a block
 * of two (funnel__lz4_block_pair), in every order: each order's statuses
 * the host's, its bytes the host's in each
 * job that decoded, no byte written outside the buffer. The host's
 * statuses are left in jobs[] and its bytes at out. */
static void lz4_in_every_order(const char *what, struct funnel__lz4_job *jobs, int n,
                               uint8_t *out, int64_t cap, uint32_t seed, int spoiled) {
  const size_t whole = (size_t)cap + 2 * GUARD;
  /* the warp's buffer in a reservation of 128 KiB before it and 1 GiB
   * after, untouched but by a faulty decoder, whose reads of the output
   * (a source up to 65,536 before a block's start and 2^30 after) then
   * get zeros, not a crash */
  const size_t before = (size_t)1 << 17, span = before + whole + ((size_t)1 << 30);
  uint8_t *reserved = mmap(NULL, span, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!CHECK(reserved != MAP_FAILED)) return;
  uint8_t *host = malloc(whole), *warp = reserved + before, fill[GUARD];
  struct funnel__lz4_job got[MAX_JOBS];
  memset(fill, 0xC3, GUARD);
  memset(host, 0xC3, whole);
  for (int j = 0; j < n; j++) jobs[j].status = -1;
  warp_host_lz4_jobs(jobs, n, (uint64_t)(uintptr_t)(host + GUARD), 1);
  /* a warp a job (funnel_zstd_decode's: lanes in orders 0 to 2), two
   * (funnel_lz4_decode's: in orders 0 to 2, and twice in order 3), and two
   * a way of each job's 2 and 3 ways (funnel_lz4_decode's ways: in orders
   * 0 and 3) */
  for (int run = 0; run <= 9; run++) {
    const int warps = run < 3 ? 1 : 2, order = run < 6 ? run % 3 : run < 8 ? 3 : (run - 8) * 3;
    threads = LANES * warps;
    lz4_ways = run < 8 ? 1 : (unsigned)run - 6;
    memset(warp, 0xC3, whole);
    memcpy(got, jobs, (size_t)n * sizeof(*jobs));
    const int ran = warp_lz4_jobs(got, n, (uint64_t)(uintptr_t)(warp + GUARD), order,
                                  seed + 7 * (uint32_t)run);
    threads = LANES;
    const unsigned ways = lz4_ways;
    lz4_ways = 1;
    if (ran != 0) continue; /* (a failure) */
    for (int j = 0; j < n; j++) {
      check_context("%s; job %d of %d (job kind %d, %lld bytes to %lld), %d warps, lanes in "
                    "order %d, %u ways",
                    what, j, n, (int)jobs[j].kind, (long long)jobs[j].src_length,
                    (long long)jobs[j].dst_length, warps, order, ways);
      /* in ways, a spoiled frame may fail where the host's lane decodes
       * it (a block short of the frame's block size: the host then
       * decodes the buffer), never the other way round, and its status
       * is the worst of its ways' (which the whole frame need not meet) */
      if (ways == 1 || !spoiled) CHECK_EQ_I64(got[j].status, jobs[j].status);
      else CHECK(got[j].status != FUNNEL__LZ4_OK || jobs[j].status == FUNNEL__LZ4_OK);
      if (got[j].status == FUNNEL__LZ4_OK && jobs[j].status == FUNNEL__LZ4_OK)
        CHECK_MEM(warp + GUARD + jobs[j].dst, host + GUARD + jobs[j].dst,
                  jobs[j].dst_length);
    }
    check_context("%s; %d warps, lanes in order %d", what, warps, order);
    CHECK_MEM(warp, fill, GUARD);
    CHECK_MEM(warp + GUARD + cap, fill, GUARD);
  }
  check_context("%s", what);
  CHECK_MEM(host, fill, GUARD);
  CHECK_MEM(host + GUARD + cap, fill, GUARD);
  memcpy(out, host + GUARD, (size_t)cap);
  munmap(reserved, span);
  free(host);
}

/* The jobs a frame of zn bytes at z that decodes to n bytes makes, into
 * jobs[]: the frame whole (dst 0), and a job a block where it splits
 * (funnel__lz4_split, as parse.c does; dst n on, *split of them). */
static int lz4_frame_jobs(const uint8_t *z, int64_t zn, int64_t n, struct funnel__lz4_job *jobs,
                          int *split) {
  jobs[0] = (struct funnel__lz4_job){(uint64_t)(uintptr_t)z, zn, 0, n, FUNNEL__LZ4_FRAMES, -1};
  *split = (int)funnel__lz4_split(z, zn, n, (uint64_t)(uintptr_t)z, (uint64_t)n, jobs + 1,
                                  MAX_JOBS - 4);
  return 1 + *split;
}

/* liblz4's frames of every shape the device decodes (64 KiB and 4 MiB
 * blocks, linked and independent, full or of a few pieces, with and
 * without block and content checksums and the content size, fast and HC;
 * uncompressed blocks), its raw blocks, and stored bytes, of every kind of
 * bytes (iw_sample_bytes, shuffle-like ones among them), each as the jobs
 * a read makes of it: a frame whole, a job a block where it splits
 * (FUNNEL__LZ4_BLOCK and _STORED), a raw block, the bytes stored (and a
 * frame declared a byte longer), all on one warp, in every order: their
 * input, as the host's lane decodes them. Then spoiled copies of each
 * frame and block: refused, or decoded, with the host lane's status and
 * bytes. */
static void warp_decodes_what_liblz4_writes(void) {
  if (WARP_SKIPPED) {
    printf("    SKIPPED %s: under a sanitizer (swapcontext)\n", __func__);
    return;
  }
  static const int64_t SIZES[] = {0, 1, 15, 200, 1500, 6000, 70000};
  uint64_t rng = 4343;
  int64_t frames = 0, pieced = 0, split_jobs = 0, split_stored = 0, refused = 0,
          decoded_alike = 0;
  for (int si = 0; si < 7; si++)
    for (int kind = 0; kind < 7; kind++) {
      const int64_t n = SIZES[si];
      /* (three frames of 64 KiB blocks, repetitive: more cost the warp's
       * emulation too much time; the pieces' frames have blocks too) */
      if (n > 65536 && (kind < 1 || kind > 3)) continue;
      /* the frame's shape: a permutation of the 64 over the cases */
      const int shape = (si * 7 + kind) * 37 % 64;
      struct iw_lz4_shape sh = {.block_size_id = shape & 16 ? 7 : 4,
                                .linked = shape & 1,
                                .block_checksum = shape >> 1 & 1,
                                .content_checksum = shape >> 2 & 1,
                                .content_size = shape >> 3 & 1,
                                .level = shape & 32 ? 9 : 0,
                                .piece = n >= 1500 && kind % 2 ? (size_t)n / 4 + 1 : 0};
      if (n > 65536) sh.block_size_id = 4, sh.linked = kind == 2; /* several 64 KiB blocks */
      /* ... the third as lz4-java writes them, which the device decodes in
       * ways (funnel__lz4_frames_way) */
      if (n > 65536 && kind == 3) sh.content_checksum = 0, sh.block_checksum = 1, sh.piece = 0;
      char what[200];
      snprintf(what, sizeof(what), "%lld bytes of kind %d, %s blocks of %s%s%s%s%s, level %d",
               (long long)n, kind, sh.linked ? "linked" : "independent",
               sh.block_size_id == 7 ? "4 MiB" : "64 KiB", sh.piece ? ", 4 pieces" : "",
               sh.block_checksum ? ", block checksums" : "",
               sh.content_checksum ? ", content checksum" : "",
               sh.content_size ? ", content size" : "", sh.level);
      check_context("%s", what);
      uint8_t *in = malloc((size_t)n + 1);
      iw_sample_bytes(in, n, kind, &rng);
      size_t zn, bn;
      uint8_t *z = iw_lz4_frame(&sh, in, (size_t)n, &zn);
      uint8_t *b = iw_lz4_block(sh.level, in, (size_t)n, &bn);
      uint8_t *zb, *bb, *ib;
      const uint8_t *zp = lz4_placed(z, zn, &rng, &zb), *bp = lz4_placed(b, bn, &rng, &bb),
                    *ip = lz4_placed(in, (size_t)n, &rng, &ib);
      struct funnel__lz4_job jobs[MAX_JOBS];
      int split;
      int k = lz4_frame_jobs(zp, (int64_t)zn, n, jobs, &split);
      jobs[k++] = (struct funnel__lz4_job){(uint64_t)(uintptr_t)bp, (int64_t)bn, (uint64_t)(2 * n),
                                           n, FUNNEL__LZ4_BLOCK, -1};
      jobs[k++] = (struct funnel__lz4_job){(uint64_t)(uintptr_t)ip, n, (uint64_t)(3 * n), n,
                                           FUNNEL__LZ4_STORED, -1};
      const int longer = n <= 1500; /* (another decode of the frame: the small ones') */
      if (longer)
        jobs[k++] = (struct funnel__lz4_job){(uint64_t)(uintptr_t)zp, (int64_t)zn,
                                             (uint64_t)(4 * n), n + 1, FUNNEL__LZ4_FRAMES, -1};
      uint8_t *out = malloc((size_t)(5 * n + 1));
      lz4_in_every_order(what, jobs, k, out, 5 * n + 1, (uint32_t)check_rand(&rng), 0);
      for (int j = 0; j < k - longer; j++) CHECK_EQ_I64(jobs[j].status, FUNNEL__LZ4_OK);
      if (longer) CHECK_EQ_I64(jobs[k - 1].status, FUNNEL__LZ4_LENGTH);
      for (int r = 0; r < 4; r++)
        if (r != 1 || split > 0) CHECK_MEM(out + r * n, in, n);
      frames++, pieced += sh.piece > 0, split_jobs += split;
      for (int j = 1; j <= split; j++) split_stored += jobs[j].kind == FUNNEL__LZ4_STORED;
      /* spoiled: the frame (whole, and its blocks where it still splits)
       * and the raw block, refused or decoded as the host's lane does */
      for (int t = 0; t < (n <= 6000 ? 3 : 1); t++) {
        size_t zcut, bcut;
        uint8_t *zbad = iw_spoiled_copy(&rng, z, zn, &zcut),
                *bbad = iw_spoiled_copy(&rng, b, bn, &bcut);
        uint8_t *zbadb, *bbadb;
        const uint8_t *zbp = lz4_placed(zbad, zcut, &rng, &zbadb),
                      *bbp = lz4_placed(bbad, bcut, &rng, &bbadb);
        int ks = lz4_frame_jobs(zbp, (int64_t)zcut, n, jobs, &split);
        jobs[ks++] = (struct funnel__lz4_job){(uint64_t)(uintptr_t)bbp, (int64_t)bcut,
                                              (uint64_t)(2 * n), n, FUNNEL__LZ4_BLOCK, -1};
        lz4_in_every_order(what, jobs, ks, out, 3 * n + 1, (uint32_t)check_rand(&rng), 1);
        for (int j = 0; j < ks; j++) {
          CHECK(jobs[j].status >= FUNNEL__LZ4_OK && jobs[j].status <= FUNNEL__LZ4_DICTIONARY);
          if (jobs[j].status == FUNNEL__LZ4_OK) decoded_alike++;
          else refused++;
        }
        free(zbadb), free(bbadb), free(zbad), free(bbad);
      }
      free(out), free(zb), free(bb), free(ib), free(z), free(b), free(in);
    }
  check_context("%s", "");
  printf("    %lld frames (%lld of pieces), %lld jobs a block of them (%lld stored blocks); "
         "spoiled: %lld jobs refused, %lld decoded as the host decodes them\n",
         (long long)frames, (long long)pieced, (long long)split_jobs, (long long)split_stored,
         (long long)refused, (long long)decoded_alike);
  CHECK(split_jobs > 10 && split_stored > 3 && refused > 150 && decoded_alike > 50);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!iw_codecs_available()) {
    fprintf(stderr, "test_warp: liblz4.so.1 and libzstd.so.1 are needed to write the frames\n");
    return 1;
  }
  static const struct check_test tests[] = {
      CHECK_TEST(warp_decodes_what_libzstd_writes),
      CHECK_TEST(warp_decodes_what_liblz4_writes),
      CHECK_TEST(warp_hashes_as_liblz4_does),
  };
  return CHECK_MAIN(argc, argv, tests);
}
