/* The ZSTD decoder's device code (zstddec.h as nvcc compiles it: a warp
 * of 32 lanes a frame, their votes, ranks and shuffles) run on the host,
 * on an emulated warp, so that the code the host's one lane never takes is
 * tested without a GPU. Each lane is a coroutine (ucontext); every warp
 * collective (__syncwarp, __ballot_sync, __any_sync, __match_any_sync,
 * the shuffles) is a meeting of all 32 lanes, which must arrive at the
 * same one (else the warp diverged: a failure). Between meetings the lanes
 * run one after another, in order, in reverse or at random: a lane that
 * reads shared bytes another lane of the same round writes gets different
 * bytes in different orders. Loads through __ldg are checked against the
 * job's source bytes. Expected values come from libzstd: a frame it wrote
 * decodes to its input; a spoiled one is refused, or decoded as libzstd
 * decodes it; and every order gives the same status and bytes.
 *
 * Under a sanitizer the test is skipped (ASan and TSan do not follow
 * swapcontext's stacks). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "check.h"
#include "ipc_writer.h"
#include "lz4dec.h" /* (the host's, included once: zstddec.h finds it included) */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WARP_SKIPPED 1
#else
#define WARP_SKIPPED 0
#endif

/* ------------------------------------------------------ the emulated warp */

enum { LANES = 32, STACK = 1 << 17 };
enum { K_SYNC = 1, K_BALLOT, K_ANY, K_MATCH, K_SHFL, K_UP, K_XOR, K_EXIT };

static ucontext_t warp_main, lane_ctx[LANES];
static unsigned current;
static uint64_t lane_val[LANES], lane_res[LANES];
static int lane_kind[LANES], lane_line[LANES], lane_arg[LANES];
static const uint8_t *span_lo, *span_hi; /* what a load may touch */
static int warp_failed;

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

static void checked_load(const void *p, size_t k) {
  const uint8_t *b = (const uint8_t *)p;
  if (b < span_lo || b + k > span_hi) {
    check_fail(__FILE__, __LINE__, "a load of bytes [%td, %td) outside the job's [0, %td)",
               b - span_lo, b + k - span_lo, span_hi - span_lo);
    warp_failed = 1;
  }
}

#define __syncwarp() ((void)meet(K_SYNC, __LINE__, 0, 0))
#define __ballot_sync(m, c) ((unsigned)meet(K_BALLOT, __LINE__, (c) ? 1 : 0, 0))
#define __any_sync(m, c) ((int)meet(K_ANY, __LINE__, (c) ? 1 : 0, 0))
#define __match_any_sync(m, v) ((unsigned)meet(K_MATCH, __LINE__, (uint64_t)(v), 0))
#define __shfl_sync(m, v, q) ((__typeof__(v))meet(K_SHFL, __LINE__, (uint64_t)(v), (int)(q)))
#define __shfl_up_sync(m, v, d) ((__typeof__(v))meet(K_UP, __LINE__, (uint64_t)(v), (int)(d)))
#define __shfl_xor_sync(m, v, o) ((__typeof__(v))meet(K_XOR, __LINE__, (uint64_t)(v), (int)(o)))
#define __ldg(p)                               \
  ({                                           \
    __typeof__(p) ldg_p = (p);                 \
    checked_load(ldg_p, sizeof(*ldg_p));       \
    *ldg_p;                                    \
  })
#define __popc(v) ((unsigned)__builtin_popcount(v))
#define __ffs(v) __builtin_ffs((int)(v))
#define __clz(v) __builtin_clz(v)
static uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, unsigned shift) {
  return (uint32_t)(((uint64_t)hi << 32 | lo) >> (shift & 31));
}
#define __CUDACC__ 1
#define __device__
#define __forceinline__
#define __constant__
/* (the device's functions are static here, not inline: some go unused) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "zstddec.h"
#pragma GCC diagnostic pop
#undef __CUDACC__

static struct funnel__zstd_scratch scratch; /* the block's shared memory */
static const uint8_t *job_src;
static int64_t job_n, job_cap;
static uint8_t *job_dst;
static int lane_status[LANES];
static char stacks[LANES][STACK];

static void lane_main(void) {
  const unsigned l = current;
  lane_status[l] = funnel__zstd_frames(job_src, job_n, job_dst, job_cap, l, LANES, &scratch);
  meet(K_EXIT, -1, 0, 0);
}

/* Decodes the n bytes at src into exactly cap at dst on the emulated warp,
 * its lanes run between meetings in `order` (0 in turn, 1 in reverse, 2
 * at random from seed): the status, or -100 when the warp diverged. */
static uint32_t order_seed; /* (static: the lanes' swapcontext would clobber a local) */

static int warp_decode(const uint8_t *src, int64_t n, uint8_t *dst, int64_t cap, int order,
                       uint32_t seed) {
  order_seed = seed;
  job_src = src;
  job_n = n;
  job_dst = dst;
  job_cap = cap;
  span_lo = src;
  span_hi = src + n;
  for (int l = 0; l < LANES; l++) {
    getcontext(&lane_ctx[l]);
    lane_ctx[l].uc_stack.ss_sp = stacks[l];
    lane_ctx[l].uc_stack.ss_size = STACK;
    lane_ctx[l].uc_link = NULL;
    makecontext(&lane_ctx[l], lane_main, 0);
  }
  int perm[LANES];
  for (;;) {
    for (int i = 0; i < LANES; i++) perm[i] = order == 1 ? LANES - 1 - i : i;
    for (int i = LANES - 1; order == 2 && i > 0; i--) {
      order_seed = order_seed * 1103515245u + 12345u;
      const int k = (int)((order_seed >> 8) % (uint32_t)(i + 1)), t = perm[i];
      perm[i] = perm[k];
      perm[k] = t;
    }
    for (int i = 0; i < LANES; i++) {
      current = (unsigned)perm[i];
      swapcontext(&warp_main, &lane_ctx[perm[i]]);
    }
    const int kind = lane_kind[0], line = lane_line[0];
    for (int l = 1; l < LANES; l++)
      if (lane_kind[l] != kind || lane_line[l] != line) {
        check_fail(__FILE__, __LINE__,
                   "the warp diverged: lane 0 at a collective of line %d, lane %d of line %d",
                   line, l, lane_line[l]);
        return -100; /* (the lanes' stacks are left as they are) */
      }
    if (kind == K_EXIT) break;
    uint32_t ballot = 0;
    for (int l = 0; l < LANES; l++) ballot |= (uint32_t)(lane_val[l] & 1) << l;
    for (int l = 0; l < LANES; l++) {
      uint64_t r = 0;
      if (kind == K_BALLOT) r = ballot;
      else if (kind == K_ANY) r = ballot != 0;
      else if (kind == K_MATCH)
        for (int q = 0; q < LANES; q++)
          r |= (uint64_t)((uint32_t)lane_val[q] == (uint32_t)lane_val[l]) << q;
      else if (kind == K_SHFL) r = lane_val[lane_arg[l] & 31];
      else if (kind == K_UP) r = l >= lane_arg[l] ? lane_val[l - lane_arg[l]] : lane_val[l];
      else if (kind == K_XOR) r = lane_val[(l ^ lane_arg[l]) & 31];
      lane_res[l] = r;
    }
  }
  for (int l = 1; l < LANES; l++)
    if (lane_status[l] != lane_status[0]) {
      check_fail(__FILE__, __LINE__, "lane %d ended with status %d, lane 0 with %d", l,
                 lane_status[l], lane_status[0]);
      return -100;
    }
  return lane_status[0];
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

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!iw_codecs_available()) {
    fprintf(stderr, "test_warp: libzstd.so.1 is needed to write the frames\n");
    return 1;
  }
  static const struct check_test tests[] = {
      CHECK_TEST(warp_decodes_what_libzstd_writes),
  };
  return CHECK_MAIN(argc, argv, tests);
}
