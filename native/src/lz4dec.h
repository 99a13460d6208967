/* lz4dec.h: the LZ4 frame decoder the device runs (concat.cu's
 * funnel_lz4_decode: two warps a buffer or block, one walking its
 * sequences while the other writes their bytes; funnel_zstd_decode's LZ4
 * jobs: a warp each) and the cpu backend runs alike (one thread emulating
 * a warp's lanes), for the buffers a read leaves to the device to decode
 * (parse.c, funnel__decode_all): one source, so that the tests here run the
 * device's code. Written from the LZ4
 * frame and block format descriptions (lz4's doc/lz4_Frame_format.md and
 * lz4_Block_format.md).
 *
 * It decodes what liblz4 writes and reads: frames one after another
 * (skippable frames skipped), linked or independent blocks of any maximum
 * size, uncompressed blocks, with or without block and content checksums
 * and content size. It checks every read and write against the bounds of
 * the buffer and every match offset against the bytes its block may reach
 * (the frame's for linked blocks), and that the buffer decodes to exactly
 * the bytes its prefix declared. A job that decodes whole frames
 * (FUNNEL__LZ4_FRAMES) verifies their block and content checksums
 * (xxHash32) as liblz4 does, the warp hashing once its lanes have
 * written; a job of one block of a frame cannot see the frame's content,
 * and a buffer whose frame has a content checksum is split into blocks
 * only when it has several (funnel__lz4_split); such a job verifies the
 * descriptor's checksum byte too (which a job of one block does not read,
 * nor the host's path for frames without checksums, decode.c). A job of
 * frames decoded in ways (funnel__lz4_frames_way) checks what the whole
 * frame's decoding checks, its descriptor's checksum byte included, each
 * way in its own blocks.
 * A dictionary frame (which Arrow's writers never make) is refused. Any
 * failure is a status: the host then decodes that buffer itself (liblz4),
 * which either finds the error and names it, or decodes what this decoder
 * refused. */
#ifndef FUNNEL_LZ4DEC_H
#define FUNNEL_LZ4DEC_H

#include <stdint.h>

#if defined(__CUDACC__)
#define FUNNEL_LZ static __device__ __forceinline__
/* the lanes' writes, seen by the others before a match reads them */
#define FUNNEL_LZ_SYNC() __syncwarp()
#else
#define FUNNEL_LZ static inline
#define FUNNEL_LZ_SYNC() ((void)0)
#endif

/* The most bytes a compressed buffer of n bytes may declare that it
 * decodes to, by its codec (0 LZ4_FRAME, else ZSTD): the host's parse
 * (decode.c) and the device path's (dpath.h) refuse more alike. An LZ4
 * sequence adds at most 255 bytes of match a byte of length code; a ZSTD
 * block of 128 KiB can be 4 bytes (an RLE block). */
FUNNEL_LZ int64_t funnel__max_decoded(int64_t codec, int64_t n) {
  const int64_t ratio = codec == 0 ? 256 : 32768;
  return n > (INT64_MAX - 4096) / ratio ? INT64_MAX - 4096 : n * ratio + 4096;
}

/* The blocks of funnel_lz4_decode (concat.cu: a job a block of two warps,
 * funnel__lz4_block_pair) an SM holds: 16 at 64 registers (14 and 12
 * measured no faster: bench/RESULTS.md, session 51). */
#define FUNNEL_LZ4_PAIR_BLOCKS 16
/* The most ways a job of frames is decoded in (funnel__lz4_frames_way: a
 * block of two warps each on the device) */
#define FUNNEL_LZ4_WAYS_MAX 16

/* The launch_dpath stage (backend.h) that decodes n jobs at `args`, two
 * warps (cuda) a job; its `m` is added to every job's dst (0: the jobs'
 * dst are addresses; the device path's jobs are offsets in its decoded
 * buffers). */
#define FUNNEL_DP_STAGE_LZ4 16
/* ... and a job of frames in ways (funnel__lz4_frames_way; on the cpu
 * backend FUNNEL__LZ4_CPU_WAYS, one after the other): the device path's
 * jobs of a read of large partitions, a buffer each (dread.c,
 * decoder_stage; the host path's, FUNNEL_DP_STAGE_LZ4, are a block each
 * already, funnel__lz4_split, and ways only add idle blocks to them: 1.12
 * of the time on 64x10x15k mixed on the H100, bench/RESULTS.md, session
 * 56) */
#define FUNNEL_DP_STAGE_LZ4_WAYS 18
/* The launch_dpath stage (backend.h) that decodes the n jobs at `args`,
 * some of them ZSTD ones (zstddec.h: a warp a job; the LZ4 ones a warp
 * each, funnel__lz4_block: one launch decodes a read of both codecs). */
#define FUNNEL_DP_STAGE_ZSTD 17

/* One buffer to decode: the frames of `src_length` bytes at `src` into
 * exactly `dst_length` bytes at `dst` (device addresses); `status` is
 * written: a FUNNEL__LZ4_* code. */
struct funnel__lz4_job {
  uint64_t src;
  int64_t src_length;
  uint64_t dst;
  int64_t dst_length;
  int64_t kind; /* FUNNEL__LZ4_FRAMES, _BLOCK or _STORED */
  int64_t status;
};

enum {
  FUNNEL__LZ4_FRAMES = 0, /* the buffer's frames, whole */
  FUNNEL__LZ4_BLOCK = 1,  /* one independent block, to exactly dst_length bytes */
  FUNNEL__LZ4_STORED = 2, /* one stored (uncompressed) block */
  /* nothing to decode: the buffer's dst_length bytes lie at src as they
   * are (the device path's raw and empty buffers, dpath.h) */
  FUNNEL__LZ4_SKIP = 3,
  /* the buffer's ZSTD frames, whole: FUNNEL_DP_STAGE_ZSTD's (zstddec.h),
   * which FUNNEL_DP_STAGE_LZ4 leaves alone */
  FUNNEL__ZSTD_FRAMES = 4
};

enum {
  FUNNEL__LZ4_OK = 0,
  FUNNEL__LZ4_CORRUPT = 1,   /* out of bounds, a bad header, a bad offset */
  FUNNEL__LZ4_LENGTH = 2,    /* decodes to another length than declared */
  FUNNEL__LZ4_DICTIONARY = 3 /* a frame with a dictionary id */
};

FUNNEL_LZ uint32_t funnel__lz_ld32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A frame's descriptor: what follows its magic number. */
struct funnel__lz4_frame {
  int independent, block_sum, content_sum; /* its FLG bits */
  int64_t block_max;                        /* 64 KiB ... 4 MiB */
  int64_t content;                          /* its content size, or -1 */
  int64_t header;                           /* bytes of magic and descriptor */
};

/* Reads the frame that starts at z (n bytes left) up to its first block:
 * FUNNEL__LZ4_OK, FUNNEL__LZ4_CORRUPT (not a frame: its magic, version,
 * reserved bits, block size or length), or FUNNEL__LZ4_DICTIONARY. The
 * descriptor's checksum byte is not verified. */
FUNNEL_LZ int funnel__lz4_frame_read(const uint8_t *z, int64_t n, struct funnel__lz4_frame *f) {
  if (n < 7 || funnel__lz_ld32(z) != 0x184D2204u) return FUNNEL__LZ4_CORRUPT;
  const unsigned flg = z[4], bd = z[5];
  if ((flg >> 6) != 1 || (flg & 2) != 0 || (bd & 0x8F) != 0 || ((bd >> 4) & 7) < 4)
    return FUNNEL__LZ4_CORRUPT;
  if (flg & 1) return FUNNEL__LZ4_DICTIONARY;
  const int sized = (flg >> 3) & 1;
  f->independent = (flg >> 5) & 1;
  f->block_sum = (flg >> 4) & 1;
  f->content_sum = (flg >> 2) & 1;
  f->block_max = (int64_t)1 << (8 + 2 * ((bd >> 4) & 7));
  f->header = 7 + (sized ? 8 : 0); /* magic, FLG, BD, [size], HC */
  if (n < f->header) return FUNNEL__LZ4_CORRUPT;
  f->content = sized ? (int64_t)((uint64_t)funnel__lz_ld32(z + 6) |
                                 (uint64_t)funnel__lz_ld32(z + 10) << 32)
                     : -1;
  return FUNNEL__LZ4_OK;
}

/* The next block of frame f, whose header ends at *ip of the n bytes at
 * z: 1 with its bytes at z[*at], *size of them, *stored when they are the
 * block's content as is, and *ip past them and their checksum; 0 at the
 * end mark, *ip past it and the content checksum; -1 when the frame ends
 * before either, or a block is larger than the frame's maximum. */
FUNNEL_LZ int funnel__lz4_block_next(const uint8_t *z, int64_t n, const struct funnel__lz4_frame *f,
                                     int64_t *ip, int64_t *at, int64_t *size, int *stored) {
  if (n - *ip < 4) return -1;
  const uint32_t word = funnel__lz_ld32(z + *ip);
  *ip += 4;
  if (word == 0) { /* the end mark */
    if (f->content_sum && n - *ip < 4) return -1;
    *ip += f->content_sum ? 4 : 0;
    return 0;
  }
  *size = word & 0x7FFFFFFFu;
  *stored = (word & 0x80000000u) != 0;
  *at = *ip;
  if (*size > f->block_max || *size > n - *ip) return -1;
  *ip += *size;
  if (f->block_sum && n - *ip < 4) return -1;
  *ip += f->block_sum ? 4 : 0;
  return 1;
}

/* The warp's primitives the block decoders use, and their host
 * emulation. On the device a warp decodes a block, each lane running the
 * code once with its own `lane`: a loop from FUNNEL_LZ_LANE0 by
 * FUNNEL_LZ_STEP takes the lane's share of its indices. On the host one
 * thread runs it for all 32 lanes: such a loop takes every index, in
 * order, lane 0's part runs, and a sync is nothing; FUNNEL_LZ_LANES(l)
 * repeats a statement for each lane, the last lane first (a lane's copy
 * must read only bytes written before the copy began: in the lanes' order
 * a byte-by-byte copy would hide reading one another's), and a window is
 * read straight from the input. */
#if defined(__CUDACC__)
#define FUNNEL_LZ_LANE0 lane
#define FUNNEL_LZ_STEP 32u
#define FUNNEL_LZ_LANES(l) for (unsigned l = lane, l##_once = 1; l##_once; l##_once = 0)
/* a window: the 32 input bytes from position i on, a byte a lane (0 past
 * the end), loaded at once through the read-only path */
#define FUNNEL_LZ_WINDOW(in, i, end) ((i) + lane < (end) ? (unsigned)__ldg((in) + (i) + lane) : 0u)

/* Byte j of window v (held by lane j): the shuffle of a converged warp
 * (the decoder's lanes never diverge around one). The PTX here and in
 * FUNNEL_LZ_PREFETCH is the device's alone: a host emulation of the warp
 * (tests/native/test_warp.c) defines FUNNEL_LZ_NO_PTX, and its own
 * __shfl_sync stands in. (__shfl_sync on the device: the same instruction
 * count and registers, but other code, its constants in registers.) */
static __device__ __forceinline__ unsigned funnel__lz_at(unsigned v, unsigned j, const uint8_t *in,
                                                         uint32_t i, uint32_t end) {
  (void)in, (void)i, (void)end;
#if defined(FUNNEL_LZ_NO_PTX)
  return __shfl_sync(0xFFFFFFFFu, v, j);
#else
  unsigned r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(j));
  return r;
#endif
}

/* this lane's byte of window v */
#define FUNNEL_LZ_MINE(v, in, i, end, l) (v)
#define FUNNEL_LZ_BYTE(in, p) ((unsigned)__ldg((in) + (p)))
/* lane 0's value of v, in every lane (the host's one thread: its own) */
#define FUNNEL_LZ_FROM0(v) __shfl_sync(0xFFFFFFFFu, (v), 0)
/* whether c holds in any lane */
#define FUNNEL_LZ_ANY(c) __any_sync(0xFFFFFFFFu, (c))
/* a hint: the L1 line of p, for the walk to find there */
#if defined(FUNNEL_LZ_NO_PTX)
#define FUNNEL_LZ_PREFETCH(p) ((void)(p))
#else
#define FUNNEL_LZ_PREFETCH(p) asm volatile("prefetch.global.L1 [%0];" ::"l"(p))
#endif
/* each lane once, k its index (the host's one thread: every k below n) */
#define FUNNEL_LZ_EACH(k, n) for (uint32_t k = lane, k##_once = 1; k##_once; k##_once = 0)
/* the longest part of a sequence a lane writes the sources of alone (the
 * warp takes a longer one together); the host's one thread, any */
#define FUNNEL_LZ_ALONE 32u
/* a loop of a constant count, unrolled (the host's: as written) */
#define FUNNEL_LZ_UNROLL _Pragma("unroll")

/* 1 / off, for funnel__lz_mod */
#define FUNNEL_LZ_INV(off) __fdividef(1.0f, (float)(off))
static __device__ __forceinline__ uint32_t funnel__lz_mul_rz(uint32_t i, float inv) {
  return (uint32_t)__fmul_rz((float)i, inv);
}
#else
#define FUNNEL_LZ_LANE0 0u
#define FUNNEL_LZ_STEP 1u
#define FUNNEL_LZ_LANES(l) for (unsigned l = 32; l-- > 0;)
#define FUNNEL_LZ_WINDOW(in, i, end) 0u /* read in place, below */

static inline unsigned funnel__lz_at(unsigned v, unsigned j, const uint8_t *in, uint32_t i,
                                     uint32_t end) {
  (void)v;
  return i + j < end ? in[i + j] : 0u;
}

#define FUNNEL_LZ_MINE(v, in, i, end, l) funnel__lz_at(v, l, in, i, end)
#define FUNNEL_LZ_BYTE(in, p) ((unsigned)(in)[p])
#define FUNNEL_LZ_FROM0(v) (v)
#define FUNNEL_LZ_ANY(c) (c)
#define FUNNEL_LZ_PREFETCH(p) ((void)(p))
#define FUNNEL_LZ_EACH(k, n) for (uint32_t k = 0; k < (n); k++)
#define FUNNEL_LZ_ALONE 0xFFFFFFFFu
#define FUNNEL_LZ_UNROLL
#define FUNNEL_LZ_INV(off) (1.0f / (float)(off))
static inline uint32_t funnel__lz_mul_rz(uint32_t i, float inv) {
  return (uint32_t)((float)i * inv);
}
#endif

/* xxHash32 with seed 0: the LZ4 frame format's block and content
 * checksums. Written from the algorithm's description (lz4's
 * doc/lz4_Frame_format.md names it; xxHash's doc/xxhash_spec.md defines
 * it): four accumulators of 4-byte words over 16-byte stripes, merged, then
 * the tail's words and bytes, then the avalanche. */
#define FUNNEL_XXH_P1 2654435761u
#define FUNNEL_XXH_P2 2246822519u
#define FUNNEL_XXH_P3 3266489917u
#define FUNNEL_XXH_P4 668265263u
#define FUNNEL_XXH_P5 374761393u

FUNNEL_LZ uint32_t funnel__xxh_rotl(uint32_t x, int r) { return x << r | x >> (32 - r); }

/* An accumulator's step over one word of a stripe. */
FUNNEL_LZ uint32_t funnel__xxh_round(uint32_t v, uint32_t w) {
  return funnel__xxh_rotl(v + w * FUNNEL_XXH_P2, 13) * FUNNEL_XXH_P1;
}

/* Accumulator j's first value. */
FUNNEL_LZ uint32_t funnel__xxh_seed(unsigned j) {
  return j == 0 ? FUNNEL_XXH_P1 + FUNNEL_XXH_P2 : j == 1 ? FUNNEL_XXH_P2 : j == 2 ? 0u : 0u - FUNNEL_XXH_P1;
}

/* The hash of the n bytes at p whose stripes before byte i the
 * accumulators v0 to v3 have taken: the stripes from i on, the merge, the
 * tail, the avalanche. */
FUNNEL_LZ uint32_t funnel__xxh_end(const uint8_t *p, int64_t i, int64_t n, uint32_t v0,
                                   uint32_t v1, uint32_t v2, uint32_t v3) {
  for (; i + 16 <= n; i += 16) {
    v0 = funnel__xxh_round(v0, funnel__lz_ld32(p + i));
    v1 = funnel__xxh_round(v1, funnel__lz_ld32(p + i + 4));
    v2 = funnel__xxh_round(v2, funnel__lz_ld32(p + i + 8));
    v3 = funnel__xxh_round(v3, funnel__lz_ld32(p + i + 12));
  }
  uint32_t h = n >= 16 ? funnel__xxh_rotl(v0, 1) + funnel__xxh_rotl(v1, 7) +
                             funnel__xxh_rotl(v2, 12) + funnel__xxh_rotl(v3, 18)
                       : FUNNEL_XXH_P5;
  h += (uint32_t)n;
  for (; i + 4 <= n; i += 4)
    h = funnel__xxh_rotl(h + funnel__lz_ld32(p + i) * FUNNEL_XXH_P3, 17) * FUNNEL_XXH_P4;
  for (; i < n; i++) h = funnel__xxh_rotl(h + p[i] * FUNNEL_XXH_P5, 11) * FUNNEL_XXH_P1;
  h ^= h >> 15;
  h *= FUNNEL_XXH_P2;
  h ^= h >> 13;
  h *= FUNNEL_XXH_P3;
  h ^= h >> 16;
  return h;
}

/* xxHash32 of the n bytes at p, by one thread. */
FUNNEL_LZ uint32_t funnel__xxh32(const uint8_t *p, int64_t n) {
  return funnel__xxh_end(p, 0, n, funnel__xxh_seed(0), funnel__xxh_seed(1), funnel__xxh_seed(2),
                         funnel__xxh_seed(3));
}

#if defined(__CUDACC__)
/* Chunks of 128 bytes whose words funnel__xxh32_warp loads at once, the
 * next group's while it hashes this one's. */
#define FUNNEL_XXH_GROUP 4

/* funnel__xxh32 by the warp, every lane getting it: each 128 bytes a word
 * a lane, lane j < 4 keeping accumulator j, which takes word j of each
 * stripe by a shuffle; the rest as one thread does. (Lane 0 alone, a load
 * at a time, took 3.4 ms more of the decoder over 200x10x20k.)
 * The words are loaded whole, a group of chunks at a time, the next
 * group's before this one's are hashed: a lane's word at any alignment is
 * cut from the two aligned words it spans (the second is the next lane's,
 * loaded again), and no load reaches past the n bytes (nor before p's
 * aligned word). The chunks after the last whole group, byte by byte.
 * A call, not inlined: inlined, its words spilled the decoder's registers.
 * (ncu put a sixth of the decoder's warps' samples over Arrow Java's
 * frames, whose content every job hashes, on the chunks loaded a byte at a
 * time; but alone, in the one-warp decoder, the word loads took 1.03 of
 * its time over those frames (and 0.94 over strings'): measured since
 * only with the two warps a job, whose build has them. bench/RESULTS.md,
 * session 51.) */
static __device__ __noinline__ uint32_t funnel__xxh32_warp(const uint8_t *p, int64_t n,
                                                          unsigned lane) {
  if (n < 128) return funnel__xxh32(p, n); /* (without this branch the decoder spills) */
  uint32_t mine = funnel__xxh_seed(lane & 3);
  const int64_t chunks = n / 128;
  const unsigned r = (unsigned)((uintptr_t)p & 3);
  const uint32_t *q = (const uint32_t *)(uintptr_t)((uintptr_t)p - r) + lane;
  /* groups whose words (and, cut, the word after each) lie in the n bytes */
  const int64_t groups = (r == 0 ? n : n + r - 4) / (128 * FUNNEL_XXH_GROUP);
  uint32_t lo[FUNNEL_XXH_GROUP], hi[FUNNEL_XXH_GROUP];
  FUNNEL_LZ_UNROLL
  for (int k = 0; k < FUNNEL_XXH_GROUP; k++) {
    lo[k] = groups > 0 ? q[32 * k] : 0u;
    hi[k] = groups > 0 && r != 0 ? q[32 * k + 1] : 0u;
  }
  for (int64_t g = 0; g < groups; g++) {
    uint32_t w[FUNNEL_XXH_GROUP];
    FUNNEL_LZ_UNROLL
    for (int k = 0; k < FUNNEL_XXH_GROUP; k++)
      w[k] = r == 0 ? lo[k] : __funnelshift_r(lo[k], hi[k], 8 * r);
    if (g + 1 < groups) {
      const uint32_t *next = q + 32 * FUNNEL_XXH_GROUP * (g + 1);
      FUNNEL_LZ_UNROLL
      for (int k = 0; k < FUNNEL_XXH_GROUP; k++) {
        lo[k] = next[32 * k];
        if (r != 0) hi[k] = next[32 * k + 1];
      }
    }
    FUNNEL_LZ_UNROLL
    for (int k = 0; k < FUNNEL_XXH_GROUP; k++)
      FUNNEL_LZ_UNROLL
      for (int s = 0; s < 8; s++)
        mine = funnel__xxh_round(mine, __shfl_sync(0xFFFFFFFFu, w[k], 4 * s + (lane & 3)));
  }
#pragma unroll 4
  for (int64_t c = groups * FUNNEL_XXH_GROUP; c < chunks; c++) {
    const uint32_t w = funnel__lz_ld32(p + 128 * c + 4 * lane);
#pragma unroll
    for (int s = 0; s < 8; s++)
      mine = funnel__xxh_round(mine, __shfl_sync(0xFFFFFFFFu, w, 4 * s + (lane & 3)));
  }
  return funnel__xxh_end(p, chunks * 128, n, __shfl_sync(0xFFFFFFFFu, mine, 0),
                         __shfl_sync(0xFFFFFFFFu, mine, 1), __shfl_sync(0xFFFFFFFFu, mine, 2),
                         __shfl_sync(0xFFFFFFFFu, mine, 3));
}
#endif

/* Whether the n bytes at p hash (xxHash32) to the 4-byte checksum at sum,
 * in every lane: the warp hashes together on the device. */
FUNNEL_LZ int funnel__lz_sum_ok(const uint8_t *p, int64_t n, const uint8_t *sum, unsigned lane) {
#if defined(__CUDACC__)
  return funnel__xxh32_warp(p, n, lane) == funnel__lz_ld32(sum);
#else
  (void)lane;
  return funnel__xxh32(p, n) == funnel__lz_ld32(sum);
#endif
}

/* i % off, off >= 1, i < 2^22 (a block's 4 MiB): by a reciprocal, then
 * corrected (the quotient is off by at most one either way) */
FUNNEL_LZ uint32_t funnel__lz_mod(uint32_t i, uint32_t off, float inv) {
  int32_t r = (int32_t)i - (int32_t)(funnel__lz_mul_rz(i, inv) * off);
  while (r < 0) r += (int32_t)off;
  while (r >= (int32_t)off) r -= (int32_t)off;
  return (uint32_t)r;
}

/* A length's continuation bytes from position p (15 in the token, then
 * bytes of 255 and one less): adds them to *len and returns the position
 * after them, or 0 past `end`. */
FUNNEL_LZ uint32_t funnel__lz_length(const uint8_t *in, uint32_t p, uint32_t end, uint32_t *len) {
  unsigned b;
  do {
    if (p >= end) return 0;
    b = FUNNEL_LZ_BYTE(in, p++);
    *len += b;
  } while (b == 255);
  return p;
}

/* No block of any frame holds or decodes to more than 4 MiB: so a block
 * decoder's lengths stay far from 32 bits' end (a length byte adds at most
 * 255), and funnel__lz_mod's quotients are exact to one. */
#define FUNNEL_LZ_MOST ((int64_t)4 << 20)

/* The bytes a block decoded to dst[op ...) may write (up to cap, and at
 * most FUNNEL_LZ_MOST) ... */
FUNNEL_LZ uint32_t funnel__lz_room(int64_t op, int64_t cap) {
  return cap - op > FUNNEL_LZ_MOST ? (uint32_t)FUNNEL_LZ_MOST : (uint32_t)(cap - op);
}

/* ... and those before dst[op] its matches may reach (from dst[window]). */
FUNNEL_LZ uint32_t funnel__lz_back(int64_t op, int64_t window) {
  return op - window > 0x7FFFFFFF ? 0x7FFFFFFFu : (uint32_t)(op - window);
}

/* funnel__lz4_block one sequence after another: for blocks of long
 * sequences (funnel__lz4_block says which).
 *
 * Written for a warp's time, which goes to the chain of its sequences
 * (token, offset, match), not to bytes: the benchmark's columns average 10
 * to 35 bytes a sequence, and ncu found the warps waiting on each
 * instruction's result for the next. A sequence whose lengths fit its
 * token (most: literals under 15 bytes, a match under 19) takes its token,
 * literals and offset from the window (the 32 input bytes from the token
 * on, held a byte a lane), copies each in one step, and loads the next
 * window first; any other sequence (long runs, the last literals, a bound
 * crossed) takes the general path. Positions are 32-bit. A match reads the
 * bytes the warp wrote before the sync between its literals and it. */
FUNNEL_LZ int funnel__lz4_serial(const uint8_t *in, int64_t n, uint8_t *dst, int64_t *op_io,
                                int64_t cap, int64_t window, unsigned lane) {
  (void)lane; /* the host's is every lane */
  if (n > FUNNEL_LZ_MOST) return FUNNEL__LZ4_CORRUPT;
  uint8_t *const out = dst + *op_io;
  const uint32_t end = (uint32_t)n, room = funnel__lz_room(*op_io, cap);
  const uint32_t back = funnel__lz_back(*op_io, window);
  uint32_t i = 0, o = 0;
  unsigned v = FUNNEL_LZ_WINDOW(in, i, end);
  while (i < end) {
    const unsigned token = funnel__lz_at(v, 0, in, i, end);
    uint32_t lit = token >> 4, ml = (token & 15) + 4;
    if (lit < 15 && ml < 19 && end - i >= lit + 3 && room - o >= lit + ml) {
      const uint32_t next_i = i + lit + 3;
      const unsigned next = FUNNEL_LZ_WINDOW(in, next_i, end);
      const uint32_t off = funnel__lz_at(v, lit + 1, in, i, end) |
                           funnel__lz_at(v, lit + 2, in, i, end) << 8;
      FUNNEL_LZ_LANES(l) {
        if (l - 1 < lit) out[o + l - 1] = (uint8_t)FUNNEL_LZ_MINE(v, in, i, end, l);
      }
      o += lit;
      if (off - 1 >= o + back) return FUNNEL__LZ4_CORRUPT; /* 0, or before the window */
      FUNNEL_LZ_SYNC(); /* the literals (and earlier matches) every lane wrote */
      const uint8_t *from = out + o - off;
      FUNNEL_LZ_LANES(l) {
        if (l < ml) out[o + l] = from[off >= ml ? l : funnel__lz_mod(l, off, FUNNEL_LZ_INV(off))];
      }
      o += ml;
      i = next_i;
      v = next;
      continue;
    }
    /* the general path */
    uint32_t p = i + 1;
    if (lit == 15 && (p = funnel__lz_length(in, p, end, &lit)) == 0) return FUNNEL__LZ4_CORRUPT;
    if (lit > end - p || lit > room - o) return FUNNEL__LZ4_CORRUPT;
    for (uint32_t k = FUNNEL_LZ_LANE0; k < lit; k += FUNNEL_LZ_STEP)
      out[o + k] = (uint8_t)FUNNEL_LZ_BYTE(in, p + k);
    p += lit;
    o += lit;
    if (p == end) break; /* the last sequence: literals only */
    if (end - p < 2) return FUNNEL__LZ4_CORRUPT;
    const uint32_t off = FUNNEL_LZ_BYTE(in, p) | FUNNEL_LZ_BYTE(in, p + 1) << 8;
    p += 2;
    if ((token & 15) == 15 && (p = funnel__lz_length(in, p, end, &ml)) == 0)
      return FUNNEL__LZ4_CORRUPT;
    if (off - 1 >= o + back || ml > room - o) return FUNNEL__LZ4_CORRUPT;
    FUNNEL_LZ_SYNC();
    const uint8_t *from = out + o - off;
    const float inv = FUNNEL_LZ_INV(off);
    for (uint32_t k = FUNNEL_LZ_LANE0; k < ml; k += FUNNEL_LZ_STEP)
      out[o + k] = from[off >= ml ? k : funnel__lz_mod(k, off, inv)];
    o += ml;
    i = p;
    v = FUNNEL_LZ_WINDOW(in, i, end);
  }
  *op_io += o;
  return FUNNEL__LZ4_OK;
}

/* The block decoder's rounds: the warp walks at most FUNNEL_LZ_SEQS
 * sequences a round, then writes their bytes in chunks of at most
 * FUNNEL_LZ_SPAN. */
#define FUNNEL_LZ_SEQS 32u
#define FUNNEL_LZ_SPAN 512u
/* a block whose first round's sequences average this many bytes or more
 * goes one sequence after another instead (funnel__lz4_serial) */
#define FUNNEL_LZ_LONG 24u

/* A byte's source, in funnel__lz4_scratch.src: below FUNNEL_LZ_SPAN, the
 * chunk's byte there (not known yet); with FUNNEL_LZ_IN, the input's byte
 * at the low 31 bits; with FUNNEL_LZ_OUT, the output's byte at the low 30
 * bits less 65536, from the block's first byte (the match of a linked
 * block reaches back into the blocks before it, by at most 65,535). */
#define FUNNEL_LZ_IN 0x80000000u
#define FUNNEL_LZ_OUT 0x40000000u

/* A lane's bytes of a chunk, and its sources of a pass (the device's),
 * loaded together before any is stored: the loop over them one at a time
 * waited on each load before the next (a store to the output might have
 * been what the next byte read; bench/RESULTS.md, session 50). */
#define FUNNEL_LZ_BATCH 8u
#define FUNNEL_LZ_PASS_BATCH 4u

/* A round's sequences, as the walk notes them (in shared memory). */
struct funnel__lz4_round {
  uint32_t at[FUNNEL_LZ_SEQS + 1]; /* a sequence's first byte in the block (and the round's end) */
  uint32_t in[FUNNEL_LZ_SEQS];     /* its literals' input position */
  uint32_t lit[FUNNEL_LZ_SEQS];    /* how many */
  uint32_t ml[FUNNEL_LZ_SEQS];     /* its match's length (0: it has none) */
  uint32_t off[FUNNEL_LZ_SEQS];    /* and offset */
};

/* A warp's shared memory for a block's rounds (the host's: its stack). */
struct funnel__lz4_scratch {
  uint32_t src[2][FUNNEL_LZ_SPAN]; /* each byte's source, and the next pass's */
  struct funnel__lz4_round rd;
};

/* The source of the block's byte x, of a match that starts at m and
 * reaches `off` back, x - m = r (mod off), in the chunk from c0: one of the
 * `off` bytes before the match (a match longer than its offset repeats
 * them). */
FUNNEL_LZ uint32_t funnel__lz_match_source(uint32_t m, uint32_t off, uint32_t r, uint32_t c0) {
  const int32_t q = (int32_t)(m + r) - (int32_t)off;
  return q < (int32_t)c0 ? FUNNEL_LZ_OUT | (uint32_t)(q + 65536) : (uint32_t)q - c0;
}

/* A short sequence: one whose token is at `at` of the block's n bytes,
 * its lengths in the token or with one byte more each (literals under
 * 270, a match under 274), its offset in the block, a match after its
 * literals: 1 with its lengths and offset and its bytes' count, or 0 (not
 * one, or past the end). */
FUNNEL_LZ int funnel__lz_short(const uint8_t *in, uint32_t n, uint32_t at, uint32_t *lit,
                               uint32_t *ml, uint32_t *off, uint32_t *size) {
  const unsigned token = at < n ? FUNNEL_LZ_BYTE(in, at) : 0xFFu;
  uint32_t p = at + 1;
  *lit = token >> 4, *ml = (token & 15) + 4, *off = 0, *size = 3;
  if (at >= n) return 0;
  if (*lit == 15) {
    const unsigned more = p < n ? FUNNEL_LZ_BYTE(in, p) : 255u;
    if (more == 255) return 0;
    *lit += more, p++;
  }
  if (n - p < *lit + 2) return 0; /* (the last sequence: literals only) */
  p += *lit;
  *off = FUNNEL_LZ_BYTE(in, p) | FUNNEL_LZ_BYTE(in, p + 1) << 8;
  p += 2;
  if (*ml == 19) {
    const unsigned more = p < n ? FUNNEL_LZ_BYTE(in, p) : 255u;
    if (more == 255) return 0;
    *ml += more, p++;
  }
  *size = p - at;
  return 1;
}

/* The walk of a block's round (funnel__lz4_block): the sequences from
 * input position *i_io on, at most FUNNEL_LZ_SEQS, noted in rd and placed
 * from the block's byte o0 on, every bound checked: FUNNEL__LZ4_OK, with
 * *np_out of them ending at *oe_out (rd->at[*np_out]), *i_io past them and
 * *done set when they are the block's last; or what failed. Its lanes read
 * the input only. */
FUNNEL_LZ int funnel__lz_walk(const uint8_t *in, uint32_t end, uint32_t room, uint32_t back,
                              uint32_t *i_io, uint32_t o0, unsigned lane,
                              struct funnel__lz4_round *rd, uint32_t *np_out, uint32_t *oe_out,
                              int *done) {
  (void)lane; /* the host's is every lane */
  uint32_t i = *i_io;
  uint32_t np = 0;
  if (end > 0) {
    const uint32_t ahead = i + 128 * FUNNEL_LZ_LANE0;
    FUNNEL_LZ_PREFETCH(in + (ahead < end ? ahead : end - 1));
  }
  /* the round's sequences: their literals' input positions and lengths,
   * their matches' lengths and offsets (their places and the bounds of
   * the output are found after) */
  while (np < FUNNEL_LZ_SEQS) {
    if (i >= end) { /* every sequence walked */
      *done = 1;
      break;
    }
    /* the short sequences from i on whose tokens lie in the 32 bytes
     * from i (funnel__lz_short) */
    uint32_t took = 0, cur = 0, lit, ml, off, size;
#if defined(__CUDACC__)
    /* each lane reads the sequence a token at its byte would start, and
     * the chain from lane 0 follows one to the next by a shuffle */
    const int fast = funnel__lz_short(in, end, i + lane, &lit, &ml, &off, &size);
    const unsigned fasts = __ballot_sync(0xFFFFFFFFu, fast);
    const uint32_t next = lane + size;
    unsigned chain = 0;
    for (; cur < 32 && (fasts >> cur & 1) && took < FUNNEL_LZ_SEQS - np; took++) {
      chain |= 1u << cur;
      cur = __shfl_sync(0xFFFFFFFFu, next, cur);
    }
    if (chain >> lane & 1) {
      const uint32_t k = np + __popc(chain & ((1u << lane) - 1));
      rd->in[k] = i + lane + 1 + (lit >= 15), rd->lit[k] = lit, rd->ml[k] = ml, rd->off[k] = off;
    }
#else
    /* the same chain, walked */
    for (; cur < 32 && took < FUNNEL_LZ_SEQS - np &&
           funnel__lz_short(in, end, i + cur, &lit, &ml, &off, &size);
         took++) {
      rd->in[np + took] = i + cur + 1 + (lit >= 15), rd->lit[np + took] = lit;
      rd->ml[np + took] = ml, rd->off[np + took] = off;
      cur += size;
    }
#endif
    np += took, i += cur;
    if (took > 0) continue;
    /* any other sequence (a length past its token, the last literals, a
     * bound crossed), by lane 0 */
    int st = FUNNEL__LZ4_OK;
    if (FUNNEL_LZ_LANE0 == 0) {
      const unsigned token = FUNNEL_LZ_BYTE(in, i);
      uint32_t p = i + 1;
      lit = token >> 4, ml = 0, off = 0;
      if (lit == 15 && (p = funnel__lz_length(in, p, end, &lit)) == 0) st = FUNNEL__LZ4_CORRUPT;
      else if (lit > end - p || lit > room) st = FUNNEL__LZ4_CORRUPT;
      else {
        rd->in[np] = p, rd->lit[np] = lit;
        p += lit;
        if (p < end) { /* (the last sequence is literals only) */
          ml = (token & 15) + 4;
          if (end - p < 2) st = FUNNEL__LZ4_CORRUPT;
          else {
            off = FUNNEL_LZ_BYTE(in, p) | FUNNEL_LZ_BYTE(in, p + 1) << 8;
            p += 2;
            if ((token & 15) == 15 && (p = funnel__lz_length(in, p, end, &ml)) == 0)
              st = FUNNEL__LZ4_CORRUPT;
            else if (ml > room) st = FUNNEL__LZ4_CORRUPT;
          }
        }
        rd->ml[np] = ml, rd->off[np] = off;
        i = p;
      }
    }
    st = FUNNEL_LZ_FROM0(st);
    if (st != FUNNEL__LZ4_OK) return st;
    i = FUNNEL_LZ_FROM0(i);
    np++;
  }
  *i_io = i;
  FUNNEL_LZ_SYNC(); /* the sequences noted */
  /* their places in the block, each after the ones before it (a lane a
   * sequence, by a scan of their lengths), and the output's bounds: the
   * room, and how far back a match may reach (its offset 0, or before
   * the window) */
  uint32_t oe = o0;
  unsigned bad = 0;
#if defined(__CUDACC__)
  {
    const int seq = lane < np;
    const uint32_t lit = seq ? rd->lit[lane] : 0, ml = seq ? rd->ml[lane] : 0;
    const uint32_t off = seq ? rd->off[lane] : 1, len = lit + ml;
    uint32_t upto = len;
#pragma unroll
    for (unsigned d = 1; d < 32; d <<= 1) {
      const uint32_t v = __shfl_up_sync(0xFFFFFFFFu, upto, d);
      upto += lane >= d ? v : 0;
    }
    const uint32_t at = o0 + upto - len;
    bad = len > room - at || (ml > 0 && off - 1 >= at + lit + back);
    if (seq) rd->at[lane] = at;
    oe = o0 + __shfl_sync(0xFFFFFFFFu, upto, 31);
  }
#else
  for (uint32_t k = 0; k < np; k++) {
    const uint32_t len = rd->lit[k] + rd->ml[k];
    bad |= len > room - oe || (rd->ml[k] > 0 && rd->off[k] - 1 >= oe + rd->lit[k] + back);
    rd->at[k] = oe;
    oe += len;
    if (bad) break; /* (past the room, oe might go past 32 bits) */
  }
#endif
  if (FUNNEL_LZ_ANY(bad)) return FUNNEL__LZ4_CORRUPT;
  if (FUNNEL_LZ_LANE0 == 0) rd->at[np] = oe;
  FUNNEL_LZ_SYNC();
  *np_out = np, *oe_out = oe;
  return FUNNEL__LZ4_OK;
}

/* The bytes of a walked round (funnel__lz4_block): its np sequences in rd,
 * the block's bytes o0 to oe at out, in chunks of at most FUNNEL_LZ_SPAN,
 * with srcs (shared memory) for their sources. Reads of the output before
 * o0 find the bytes this warp wrote. */
FUNNEL_LZ void funnel__lz_write(const uint8_t *in, uint8_t *out, uint32_t o0, uint32_t oe,
                                uint32_t np, const struct funnel__lz4_round *rd,
                                uint32_t (*srcs)[FUNNEL_LZ_SPAN], unsigned lane) {
  (void)lane; /* the host's is every lane */
  for (uint32_t c0 = o0; c0 < oe; c0 += FUNNEL_LZ_SPAN) {
    const uint32_t c1 = oe - c0 > FUNNEL_LZ_SPAN ? c0 + FUNNEL_LZ_SPAN : oe;
    uint32_t *src = srcs[0];
    int inner = 0; /* whether a source is in the chunk */
    /* each sequence's bytes in the chunk: its literals', its match's */
    FUNNEL_LZ_EACH(k, np) {
      /* (on the device every lane, k < np or not) */
      const int seq = k < np;
      const uint32_t a = seq ? rd->at[k] : c0, m = seq ? a + rd->lit[k] : c0;
      const uint32_t e = seq ? rd->at[k + 1] : c0, off = seq ? rd->off[k] : 1;
      const uint32_t la = a > c0 ? a : c0, lb = m < c1 ? m : c1;
      const uint32_t ma = m > c0 ? m : c0, mb = e < c1 ? e : c1;
      const uint32_t from = seq ? rd->in[k] - a : 0; /* a literal's input position, less its place */
      for (uint32_t x = la; x < lb && lb - la <= FUNNEL_LZ_ALONE; x++) src[x - c0] = FUNNEL_LZ_IN | (from + x);
      if (ma < mb && mb - ma <= FUNNEL_LZ_ALONE) {
        uint32_t r = ma - m < off ? ma - m : funnel__lz_mod(ma - m, off, FUNNEL_LZ_INV(off));
        for (uint32_t x = ma; x < mb; x++) {
          const uint32_t v = funnel__lz_match_source(m, off, r, c0);
          src[x - c0] = v;
          inner |= v < FUNNEL_LZ_SPAN;
          r = r + 1 == off ? 0 : r + 1;
        }
      }
#if defined(__CUDACC__)
      /* a longer part, by the warp: each lane a byte in 32 */
      unsigned many = __ballot_sync(0xFFFFFFFFu, lb > la && lb - la > FUNNEL_LZ_ALONE);
      while (many) {
        const int l = __ffs(many) - 1;
        many &= many - 1;
        const uint32_t f = __shfl_sync(0xFFFFFFFFu, from, l), b = __shfl_sync(0xFFFFFFFFu, lb, l);
        for (uint32_t x = __shfl_sync(0xFFFFFFFFu, la, l) + lane; x < b; x += 32)
          src[x - c0] = FUNNEL_LZ_IN | (f + x);
      }
      many = __ballot_sync(0xFFFFFFFFu, mb > ma && mb - ma > FUNNEL_LZ_ALONE);
      while (many) {
        const int l = __ffs(many) - 1;
        many &= many - 1;
        const uint32_t lm = __shfl_sync(0xFFFFFFFFu, m, l), loff = __shfl_sync(0xFFFFFFFFu, off, l);
        const uint32_t lma = __shfl_sync(0xFFFFFFFFu, ma, l), lmb = __shfl_sync(0xFFFFFFFFu, mb, l);
        const float inv = FUNNEL_LZ_INV(loff);
        const uint32_t step = funnel__lz_mod(32, loff, inv);
        uint32_t r = funnel__lz_mod(lma + lane - lm, loff, inv);
        for (uint32_t x = lma + lane; x < lmb; x += 32) {
          const uint32_t v = funnel__lz_match_source(lm, loff, r, c0);
          src[x - c0] = v;
          inner |= v < FUNNEL_LZ_SPAN;
          r += step;
          r -= r >= loff ? loff : 0;
        }
      }
#endif
    }
    inner = FUNNEL_LZ_ANY(inner);
    FUNNEL_LZ_SYNC();
    /* the sources in the chunk, followed to the input or the output
     * before it: a source in the chunk is an earlier byte, whose source
     * each pass takes, from one copy of the sources into the other (so
     * that no lane reads what another writes); the host's one pass in
     * order finds each earlier byte's already followed */
    const uint32_t span = c1 - c0;
#if defined(__CUDACC__)
    for (int p = 0; inner; p ^= 1) {
      const uint32_t *from = srcs[p];
      uint32_t *to = srcs[p ^ 1];
      inner = 0;
      for (uint32_t b0 = lane; b0 < span; b0 += 32 * FUNNEL_LZ_PASS_BATCH) {
        uint32_t got[FUNNEL_LZ_PASS_BATCH];
        FUNNEL_LZ_UNROLL
        for (uint32_t k = 0; k < FUNNEL_LZ_PASS_BATCH; k++) {
          const uint32_t b = b0 + 32 * k;
          uint32_t v = b < span ? from[b] : FUNNEL_LZ_IN;
          if (v < FUNNEL_LZ_SPAN) v = from[v], inner |= v < FUNNEL_LZ_SPAN;
          got[k] = v;
        }
        FUNNEL_LZ_UNROLL
        for (uint32_t k = 0; k < FUNNEL_LZ_PASS_BATCH; k++)
          if (b0 + 32 * k < span) to[b0 + 32 * k] = got[k];
      }
      inner = __any_sync(0xFFFFFFFFu, inner);
      src = to;
      __syncwarp();
    }
#else
    for (uint32_t b = 0; inner && b < span; b++)
      if (src[b] < FUNNEL_LZ_SPAN) src[b] = src[src[b]];
#endif
    /* the bytes: the output's before the chunk, which the warp wrote
     * before the sync above (or before this block's) */
    for (uint32_t b0 = FUNNEL_LZ_LANE0; b0 < span; b0 += FUNNEL_LZ_BATCH * FUNNEL_LZ_STEP) {
      unsigned got[FUNNEL_LZ_BATCH];
      FUNNEL_LZ_UNROLL
      for (uint32_t k = 0; k < FUNNEL_LZ_BATCH; k++) {
        const uint32_t b = b0 + k * FUNNEL_LZ_STEP;
        const uint32_t v = b < span ? src[b] : FUNNEL_LZ_IN;
        got[k] = (v & FUNNEL_LZ_IN) ? (b < span ? FUNNEL_LZ_BYTE(in, v & ~FUNNEL_LZ_IN) : 0u)
                                    : out[(int32_t)(v & ~FUNNEL_LZ_OUT) - 65536];
      }
      FUNNEL_LZ_UNROLL
      for (uint32_t k = 0; k < FUNNEL_LZ_BATCH; k++)
        if (b0 + k * FUNNEL_LZ_STEP < span) out[c0 + b0 + k * FUNNEL_LZ_STEP] = (uint8_t)got[k];
    }
    FUNNEL_LZ_SYNC();
  }
}

/* Decodes one block of `n` bytes (at most 4 MiB, as every frame's blocks
 * are) at `in` to dst[*op ...), at most up to `cap`; a match reaches back
 * at most to dst[window].
 *
 * Written for the warp's time, which the chain from one sequence to the
 * next sets: decoding a sequence and copying it before the next
 * (funnel__lz4_serial) took the warp about 1,000 cycles a sequence
 * (session 29, ncu), each step waiting on the one before, and a column of
 * small values averages about 10 bytes a sequence. So the block goes in
 * rounds of up to FUNNEL_LZ_SEQS sequences:
 * - The walk: each lane reads the sequence that would start at its byte
 *   of the 32 input bytes from the walk's position (funnel__lz_short), and
 *   the chain of tokens from the first is followed by shuffles, a few
 *   sequences a window; any other sequence lane 0 reads alone. Each is
 *   noted in shared memory.
 * - Their places, by a scan of their lengths, and every bound checked.
 * - Each lane takes a sequence and writes the source of each of its
 *   bytes: the input for literals; for a match's, the output before the
 *   chunk or a byte of the chunk. The warp takes a long part together.
 * - The lanes follow the sources in the chunk (each pass replaces a source
 *   in the chunk by that byte's own, so a chain of n matches that copy one
 *   another takes log2(n) passes), then copy the bytes, each lane
 *   loading 8 before it stores any.
 * On the H100 this took the mixed columns' blocks 23 to 29% less time than
 * funnel__lz4_serial; blocks of long sequences (strings: 35 bytes a
 * sequence) were as fast or faster one sequence after another, so a block
 * whose first round averages FUNNEL_LZ_LONG bytes a sequence or more goes
 * that way (bench/RESULTS.md, session 37). */
FUNNEL_LZ int funnel__lz4_block(const uint8_t *in, int64_t n, uint8_t *dst, int64_t *op_io,
                                int64_t cap, int64_t window, unsigned lane,
                                struct funnel__lz4_scratch *sc) {
  if (n > FUNNEL_LZ_MOST) return FUNNEL__LZ4_CORRUPT;
  uint8_t *const out = dst + *op_io;
  const uint32_t end = (uint32_t)n, room = funnel__lz_room(*op_io, cap);
  const uint32_t back = funnel__lz_back(*op_io, window);
  uint32_t i = 0;  /* the next sequence's input position */
  uint32_t o0 = 0; /* the round's first byte, in the block */
  for (int done = 0; !done;) {
    uint32_t np, oe;
    const int st = funnel__lz_walk(in, end, room, back, &i, o0, lane, &sc->rd, &np, &oe, &done);
    if (st != FUNNEL__LZ4_OK) return st;
    /* a block whose first round's sequences are long goes one sequence
     * after another instead, from its start */
    if (o0 == 0 && !done && oe >= FUNNEL_LZ_LONG * np)
      return funnel__lz4_serial(in, n, dst, op_io, cap, window, lane);
    funnel__lz_write(in, out, o0, oe, np, &sc->rd, sc->src, lane);
    o0 = oe;
  }
  *op_io += o0;
  return FUNNEL__LZ4_OK;
}

/* Two warps' shared memory for a block (funnel__lz4_block_pair): the
 * writer's sources, and two rounds the walker notes, round k in [k % 2]:
 * its sequences, their count and end, and what the walker found
 * (FUNNEL_LZ_PAIR_*, or a status less than 0). */
struct funnel__lz4_pair {
  uint32_t src[2][FUNNEL_LZ_SPAN];
  struct funnel__lz4_round rd[2];
  uint32_t np[2], oe[2];
  int32_t state[2];
  int32_t status; /* the serial path's, for both warps */
  int64_t op;
};

enum {
  FUNNEL_LZ_PAIR_MORE = 0,  /* a round, more after it */
  FUNNEL_LZ_PAIR_LAST = 1,  /* the block's last round */
  FUNNEL_LZ_PAIR_SERIAL = 2 /* a first round of long sequences: the block goes serially */
};

#if defined(__CUDACC__)
/* funnel__lz4_block by two warps of a block (every thread of it calls it,
 * `warp` 0 or 1): warp 0 walks round k while warp 1 writes round k - 1,
 * then the block's barrier, so that the walk (a third of the one warp's
 * samples, ncu, over columns of short sequences) is off the writer's
 * chain. It took those reads to 0.90 to 0.93 of one warp's time, not
 * nearer half: at 64 registers the kernel spills, and each round waits
 * for the slower warp (bench/RESULTS.md, session 51). The writer alone
 * writes and reads the output. A block the first round finds long goes
 * serially on the writer. Both warps return the same status. */
FUNNEL_LZ int funnel__lz4_block_pair(const uint8_t *in, int64_t n, uint8_t *dst, int64_t *op_io,
                                     int64_t cap, int64_t window, unsigned lane, unsigned warp,
                                     struct funnel__lz4_pair *pc) {
  if (n > FUNNEL_LZ_MOST) return FUNNEL__LZ4_CORRUPT;
  uint8_t *const out = dst + *op_io;
  const uint32_t end = (uint32_t)n, room = funnel__lz_room(*op_io, cap);
  const uint32_t back = funnel__lz_back(*op_io, window);
  uint32_t i = 0;  /* the walker's next sequence's input position */
  uint32_t o0 = 0; /* the next round's first byte: the walker's to walk, the writer's to write */
  for (uint32_t k = 0;; k++) {
    /* whether round k - 1 was the block's last (the walker wrote its
     * state before the barrier that ended step k - 1) */
    const int last = k > 0 && pc->state[(k - 1) & 1] == FUNNEL_LZ_PAIR_LAST;
    if (warp == 0) {
      if (!last) {
        uint32_t np = 0, oe = o0;
        int done = 0;
        const int st =
            funnel__lz_walk(in, end, room, back, &i, o0, lane, &pc->rd[k & 1], &np, &oe, &done);
        int32_t state = st != FUNNEL__LZ4_OK ? -st
                        : done                ? FUNNEL_LZ_PAIR_LAST
                        : o0 == 0 && oe >= FUNNEL_LZ_LONG * np ? FUNNEL_LZ_PAIR_SERIAL
                                                                : FUNNEL_LZ_PAIR_MORE;
        if (lane == 0) pc->np[k & 1] = np, pc->oe[k & 1] = oe, pc->state[k & 1] = state;
        o0 = oe;
      }
    } else if (k > 0) {
      const unsigned b = (k - 1) & 1;
      funnel__lz_write(in, out, o0, pc->oe[b], pc->np[b], &pc->rd[b], pc->src, lane);
      o0 = pc->oe[b];
    }
    __syncthreads();
    if (last) break;
    const int32_t state = pc->state[k & 1];
    if (state < 0) return -state;
    if (state == FUNNEL_LZ_PAIR_SERIAL) {
      if (warp == 1) {
        int64_t op = *op_io;
        const int st = funnel__lz4_serial(in, n, dst, &op, cap, window, lane);
        if (lane == 0) pc->status = st, pc->op = op;
      }
      __syncthreads();
      const int st = pc->status;
      if (st == FUNNEL__LZ4_OK) *op_io = pc->op;
      __syncthreads(); /* (before a later block's serial path writes them) */
      return st;
    }
  }
  *op_io += o0;
  return FUNNEL__LZ4_OK;
}

/* A job's lanes' writes, seen by all of its lanes: one warp's, or the
 * block's two warps' (pc) */
#define FUNNEL_LZ_SYNC_JOB(pc) \
  do {                         \
    if ((pc) != NULL) __syncthreads(); \
    else __syncwarp();         \
  } while (0)
#else
#define FUNNEL_LZ_SYNC_JOB(pc) ((void)(pc))
#endif

/* funnel__lz4_block by one warp (sc), or by two (pc, on the device). */
FUNNEL_LZ int funnel__lz4_block_by(const uint8_t *in, int64_t n, uint8_t *dst, int64_t *op_io,
                                   int64_t cap, int64_t window, unsigned lane, unsigned warp,
                                   struct funnel__lz4_scratch *sc, struct funnel__lz4_pair *pc) {
#if defined(__CUDACC__)
  if (pc != NULL) return funnel__lz4_block_pair(in, n, dst, op_io, cap, window, lane, warp, pc);
#else
  (void)warp, (void)pc;
#endif
  return funnel__lz4_block(in, n, dst, op_io, cap, window, lane, sc);
}

/* Decodes the frames of `n` bytes at `src` into exactly `cap` bytes at
 * `dst`: FUNNEL__LZ4_OK or what failed. A warp decodes them (`lanes` 32,
 * `warp` 0, its scratch sc), or two warps of a block (`lanes` 64, `warp`
 * 0 and 1, their pc; on the device), each with its own `lane`. */
FUNNEL_LZ int funnel__lz4_frames(const uint8_t *src, int64_t n, uint8_t *dst, int64_t cap,
                                 unsigned lane, unsigned lanes, unsigned warp,
                                 struct funnel__lz4_scratch *sc, struct funnel__lz4_pair *pc) {
  int64_t ip = 0, op = 0;
  while (ip < n) {
    if (n - ip < 8) return FUNNEL__LZ4_CORRUPT; /* a magic and at least a size or header */
    const uint32_t magic = funnel__lz_ld32(src + ip);
    if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) { /* a skippable frame */
      const int64_t size = funnel__lz_ld32(src + ip + 4);
      if (size > n - ip - 8) return FUNNEL__LZ4_CORRUPT;
      ip += 8 + size;
      continue;
    }
    struct funnel__lz4_frame f;
    const int read = funnel__lz4_frame_read(src + ip, n - ip, &f);
    if (read != FUNNEL__LZ4_OK) return read;
    /* the descriptor's checksum byte: the second byte of its hash */
    int hc = 1;
    if (lane == 0) hc = (funnel__xxh32(src + ip + 4, f.header - 5) >> 8 & 0xFF) == src[ip + f.header - 1];
    if (!FUNNEL_LZ_FROM0(hc)) return FUNNEL__LZ4_CORRUPT;
    ip += f.header;
    const int64_t frame_start = op;
    int64_t at, size;
    int stored, more;
    while ((more = funnel__lz4_block_next(src, n, &f, &ip, &at, &size, &stored)) > 0) {
      const int64_t before = op;
      if (stored) {
        if (size > cap - op) return FUNNEL__LZ4_CORRUPT;
        for (int64_t i = lane + 32 * warp; i < size; i += lanes) dst[op + i] = src[at + i];
        op += size;
      } else {
        const int st = funnel__lz4_block_by(src + at, size, dst, &op, cap,
                                            f.independent ? op : frame_start, lane, warp, sc, pc);
        if (st != FUNNEL__LZ4_OK) return st;
      }
      FUNNEL_LZ_SYNC_JOB(pc);
      if (op - before > f.block_max) return FUNNEL__LZ4_CORRUPT;
      /* the block's checksum: of its bytes as stored */
      if (f.block_sum && !funnel__lz_sum_ok(src + at, size, src + at + size, lane))
        return FUNNEL__LZ4_CORRUPT;
    }
    if (more < 0) return FUNNEL__LZ4_CORRUPT;
    if (f.content >= 0 && op - frame_start != f.content) return FUNNEL__LZ4_LENGTH;
    /* the content's checksum, after the end mark: of the frame's bytes as
     * decoded, which every lane wrote before the sync above */
    if (f.content_sum && !funnel__lz_sum_ok(dst + frame_start, op - frame_start, src + ip - 4, lane))
      return FUNNEL__LZ4_CORRUPT;
  }
  return op == cap ? FUNNEL__LZ4_OK : FUNNEL__LZ4_LENGTH;
}

/* A buffer of `n` bytes of frames that decodes to `want` bytes, as jobs of
 * one block each, so that more warps share it: when it is one frame of
 * independent blocks, each but the last of the frame's block size (as
 * every LZ4 writer fills them), at most `cap` of them. Fills out[] (NULL:
 * counts only) with the blocks' offsets in the frames and in the decoded
 * bytes (added to src and dst) and returns how many, or 0: the buffer is
 * decoded whole (FUNNEL__LZ4_FRAMES). A block that decodes to another
 * length fails its job, and the host then decodes the buffer. */
FUNNEL_LZ int64_t funnel__lz4_split(const uint8_t *z, int64_t n, int64_t want, uint64_t src,
                                    uint64_t dst, struct funnel__lz4_job *out, int64_t cap) {
  struct funnel__lz4_frame f;
  if (funnel__lz4_frame_read(z, n, &f) != FUNNEL__LZ4_OK || !f.independent)
    return 0; /* linked blocks, a dictionary, a bad header: whole */
  const int64_t block_max = f.block_max;
  int64_t ip = f.header, k = 0, at, size;
  int stored, more;
  while ((more = funnel__lz4_block_next(z, n, &f, &ip, &at, &size, &stored)) > 0) {
    const int64_t to = k * block_max;
    if (to >= want || k == cap) return 0;
    if (out != NULL)
      out[k] = (struct funnel__lz4_job){src + (uint64_t)at, size, dst + (uint64_t)to,
                                        want - to < block_max ? want - to : block_max,
                                        stored ? FUNNEL__LZ4_STORED : FUNNEL__LZ4_BLOCK, -1};
    k++;
  }
  if (more < 0) return 0;
  /* one block of a frame with a content checksum: whole, so that the
   * checksum is verified (a frame's several blocks go apart unverified) */
  if (k == 1 && f.content_sum) return 0;
  /* one frame, whose blocks cover the bytes declared */
  return ip == n && k > 0 && (k - 1) * block_max < want && k * block_max >= want ? k : 0;
}

/* Way `way` of `ways` (1 to FUNNEL_LZ4_WAYS_MAX) of a job of frames
 * (FUNNEL__LZ4_FRAMES), as funnel__lz4_frames takes the bytes and lanes:
 * when there are several ways and the buffer is one frame of independent
 * blocks without a content checksum that funnel__lz4_split would split
 * (lz4-java's, as the funnel shuffle writes them), the blocks b with b %
 * ways == way, each into its place, so that `ways` groups of lanes share
 * a long buffer as the host path's jobs of a block each do; else way 0
 * decodes the buffer whole and the others nothing. Each way walks the
 * frame's block headers (the split's walk, which checks that the blocks
 * cover the bytes declared and end the buffer) and checks the
 * descriptor's checksum byte, its content size if declared, and each of
 * its blocks' length and checksum: what funnel__lz4_frames checks, so
 * that the job (its status the ways' worst) decodes only where
 * funnel__lz4_frames decodes it, to the same bytes; it may fail where
 * that does not (a frame whose blocks but the last are not full, which
 * no writer makes: the host then decodes the buffer), and its failure's
 * code may be another. */
FUNNEL_LZ int funnel__lz4_frames_way(const uint8_t *src, int64_t n, uint8_t *dst, int64_t cap,
                                     unsigned way, unsigned ways, unsigned lane, unsigned lanes,
                                     unsigned warp, struct funnel__lz4_scratch *sc,
                                     struct funnel__lz4_pair *pc) {
  struct funnel__lz4_frame f;
  const int64_t k = ways > 1 && funnel__lz4_frame_read(src, n, &f) == FUNNEL__LZ4_OK &&
                            f.independent && !f.content_sum
                        ? funnel__lz4_split(src, n, cap, 0, 0, NULL, INT64_MAX)
                        : 0;
  if (k < 2)
    return way == 0 ? funnel__lz4_frames(src, n, dst, cap, lane, lanes, warp, sc, pc)
                    : FUNNEL__LZ4_OK;
  if (f.content >= 0 && f.content != cap) return FUNNEL__LZ4_LENGTH;
  int hc = 1;
  if (lane == 0) hc = (funnel__xxh32(src + 4, f.header - 5) >> 8 & 0xFF) == src[f.header - 1];
  if (!FUNNEL_LZ_FROM0(hc)) return FUNNEL__LZ4_CORRUPT;
  int64_t ip = f.header, at, size;
  int stored;
  for (int64_t b = 0; b < k && funnel__lz4_block_next(src, n, &f, &ip, &at, &size, &stored) > 0;
       b++) {
    if (b % ways != way) continue;
    const int64_t from = b * f.block_max;
    const int64_t len = cap - from < f.block_max ? cap - from : f.block_max;
    int64_t op = from;
    if (stored) {
      if (size != len) return FUNNEL__LZ4_LENGTH;
      for (int64_t i = lane + 32 * warp; i < size; i += lanes) dst[from + i] = src[at + i];
      op += size;
    } else {
      const int st = funnel__lz4_block_by(src + at, size, dst, &op, from + len, from, lane, warp,
                                          sc, pc);
      if (st != FUNNEL__LZ4_OK) return st;
    }
    FUNNEL_LZ_SYNC_JOB(pc);
    if (op != from + len) return FUNNEL__LZ4_LENGTH;
    if (f.block_sum && !funnel__lz_sum_ok(src + at, size, src + at + size, lane))
      return FUNNEL__LZ4_CORRUPT;
  }
  return FUNNEL__LZ4_OK;
}

/* Decodes way `way` of `ways` of job `j` (funnel__lz4_frames_way; a job
 * of one block is way 0's), its dst `base` more (every lane of a group of
 * `lanes` calls it, with the group's scratch, sc or pc, and `warp`, as
 * funnel__lz4_frames): its status, or -1 for a job of another decoder's
 * (zstddec.h's), left alone. */
FUNNEL_LZ int funnel__lz4_job_run(const struct funnel__lz4_job *j, uint64_t base, unsigned way,
                                  unsigned ways, unsigned lane, unsigned lanes, unsigned warp,
                                  struct funnel__lz4_scratch *sc, struct funnel__lz4_pair *pc) {
  if (j->kind == FUNNEL__LZ4_SKIP) return FUNNEL__LZ4_OK;
  if (j->kind > FUNNEL__LZ4_SKIP) return -1;
  const uint8_t *src = (const uint8_t *)(uintptr_t)j->src;
  uint8_t *dst = (uint8_t *)(uintptr_t)(j->dst + base);
  if (j->kind == FUNNEL__LZ4_FRAMES)
    return funnel__lz4_frames_way(src, j->src_length, dst, j->dst_length, way, ways, lane, lanes,
                                  warp, sc, pc);
  if (way != 0) return FUNNEL__LZ4_OK;
  if (j->kind == FUNNEL__LZ4_STORED) {
    if (j->src_length != j->dst_length) return FUNNEL__LZ4_LENGTH;
    for (int64_t i = lane + 32 * warp; i < j->src_length; i += lanes) dst[i] = src[i];
    return FUNNEL__LZ4_OK;
  }
  int64_t op = 0;
  const int st =
      funnel__lz4_block_by(src, j->src_length, dst, &op, j->dst_length, 0, lane, warp, sc, pc);
  return st != FUNNEL__LZ4_OK ? st : op == j->dst_length ? FUNNEL__LZ4_OK : FUNNEL__LZ4_LENGTH;
}

/* Runs the jobs on this thread, as the cpu backend's stream does, each in
 * `ways` ways one after the other (as the device's groups of lanes take
 * them at once), its status the worst of its ways'. */
FUNNEL_LZ void funnel__lz4_run_jobs(struct funnel__lz4_job *jobs, int64_t n, uint64_t base,
                                    unsigned ways) {
  struct funnel__lz4_scratch sc;
  for (int64_t j = 0; j < n; j++)
    for (unsigned w = 0; w < ways; w++) {
      const int st = funnel__lz4_job_run(&jobs[j], base, w, ways, 0, 1, 0, &sc, NULL);
      if (st >= 0 && (w == 0 || st > jobs[j].status)) jobs[j].status = st;
    }
}

#endif
