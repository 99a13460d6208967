/* lz4dec.h: the LZ4 frame decoder the device runs (concat.cu's
 * funnel_lz4_decode: a warp a buffer or block, its lanes sharing each
 * copy) and the cpu backend runs alike (one thread emulating the warp's
 * lanes), for the buffers a read leaves to the device to decode (parse.c,
 * funnel__decode_all): one source, so that the tests here run the
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
 * nor the host's path for frames without checksums, decode.c).
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

/* The launch_dpath stage (backend.h) that decodes n jobs at `args`, a warp
 * (cuda) a job; its `m` is added to every job's dst (0: the jobs' dst are
 * addresses; the device path's jobs are offsets in its decoded buffers). */
#define FUNNEL_DP_STAGE_LZ4 16

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
  FUNNEL__LZ4_SKIP = 3
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

/* The warp's primitives the block decoder uses, and their host
 * emulation. On the device a warp decodes a block, each lane running the
 * code once with its own `lane`. On the host one thread runs it for all 32
 * lanes: FUNNEL_LZ_LANES(l) repeats a statement for each lane, the last
 * lane first (a lane's copy must read only bytes written before the copy
 * began: in the lanes' order a byte-by-byte copy would hide reading one
 * another's), a window is read straight from the input, and a sync is
 * nothing. The general path's copies run one byte at a time on the host,
 * reading only earlier sequences' bytes all the same. */
#if defined(__CUDACC__)
#define FUNNEL_LZ_LANES(l) for (unsigned l = lane, l##_once = 1; l##_once; l##_once = 0)
#define FUNNEL_LZ_LANE0 lane
#define FUNNEL_LZ_STEP 32u
/* a window: the 32 input bytes from position i on, a byte a lane (0 past
 * the end), loaded at once through the read-only path */
#define FUNNEL_LZ_WINDOW(in, i, end) ((i) + lane < (end) ? (unsigned)__ldg((in) + (i) + lane) : 0u)
#define FUNNEL_LZ_BYTE(in, p) ((unsigned)__ldg((in) + (p)))

/* Byte j of window v (held by lane j): the shuffle of a converged warp
 * (the decoder's lanes never diverge around one). */
static __device__ __forceinline__ unsigned funnel__lz_at(unsigned v, unsigned j, const uint8_t *in,
                                                         uint32_t i, uint32_t end) {
  (void)in, (void)i, (void)end;
  unsigned r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(j));
  return r;
}

/* this lane's byte of window v */
#define FUNNEL_LZ_MINE(v, in, i, end, l) (v)

/* 1 / off, for funnel__lz_mod */
#define FUNNEL_LZ_INV(off) __fdividef(1.0f, (float)(off))
static __device__ __forceinline__ uint32_t funnel__lz_mul_rz(uint32_t i, float inv) {
  return (uint32_t)__fmul_rz((float)i, inv);
}
#else
#define FUNNEL_LZ_LANES(l) for (unsigned l = 32; l-- > 0;)
#define FUNNEL_LZ_LANE0 0u
#define FUNNEL_LZ_STEP 1u
#define FUNNEL_LZ_WINDOW(in, i, end) 0u /* read in place, below */
#define FUNNEL_LZ_BYTE(in, p) ((unsigned)(in)[p])

static inline unsigned funnel__lz_at(unsigned v, unsigned j, const uint8_t *in, uint32_t i,
                                     uint32_t end) {
  (void)v;
  return i + j < end ? in[i + j] : 0u;
}

#define FUNNEL_LZ_MINE(v, in, i, end, l) funnel__lz_at(v, l, in, i, end)
#define FUNNEL_LZ_INV(off) (1.0f / (float)(off))
static inline uint32_t funnel__lz_mul_rz(uint32_t i, float inv) {
  return (uint32_t)((float)i * inv);
}
#endif

/* Lane 0's value of v, in every lane of the warp (the host's one thread:
 * its own). */
#if defined(__CUDACC__)
#define FUNNEL_LZ_FROM0(v) __shfl_sync(0xFFFFFFFFu, (v), 0)
#else
#define FUNNEL_LZ_FROM0(v) (v)
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
/* funnel__xxh32 by the warp, every lane getting it: the stripes of each
 * 128 bytes loaded a word a lane at once, lane j < 4 keeping accumulator
 * j, which takes word j of each stripe by a shuffle; the rest as one
 * thread does. (Lane 0 alone, a load at a time, took 3.4 ms more of the
 * decoder over 200x10x20k.) */
FUNNEL_LZ uint32_t funnel__xxh32_warp(const uint8_t *p, int64_t n, unsigned lane) {
  if (n < 128) return funnel__xxh32(p, n); /* (without this branch the decoder spills) */
  uint32_t mine = funnel__xxh_seed(lane & 3);
  const int64_t chunks = n / 128;
#pragma unroll 4
  for (int64_t c = 0; c < chunks; c++) {
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

/* Decodes one block of `n` bytes (at most 4 MiB, as every frame's blocks
 * are) at `in` to dst[*op ...), at most up to `cap`; a match reaches back
 * at most to dst[window].
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
FUNNEL_LZ int funnel__lz4_block(const uint8_t *in, int64_t n, uint8_t *dst, int64_t *op_io,
                                int64_t cap, int64_t window, unsigned lane) {
  (void)lane; /* the host's is every lane */
  /* no block of any frame holds or decodes to more than 4 MiB: so the
   * lengths below stay far from 32 bits' end (a length byte adds at most
   * 255), and funnel__lz_mod's quotients are exact to one */
  const int64_t most = (int64_t)4 << 20;
  if (n > most) return FUNNEL__LZ4_CORRUPT;
  uint8_t *const out = dst + *op_io;
  const uint32_t end = (uint32_t)n;
  /* the bytes it may write, and those before `out` a match may reach */
  const uint32_t room = cap - *op_io > most ? (uint32_t)most : (uint32_t)(cap - *op_io);
  const uint32_t back = *op_io - window > 0x7FFFFFFF ? 0x7FFFFFFFu : (uint32_t)(*op_io - window);
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

/* Decodes the frames of `n` bytes at `src` into exactly `cap` bytes at
 * `dst`: FUNNEL__LZ4_OK or what failed. */
FUNNEL_LZ int funnel__lz4_frames(const uint8_t *src, int64_t n, uint8_t *dst, int64_t cap,
                                 unsigned lane, unsigned lanes) {
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
        for (int64_t i = lane; i < size; i += lanes) dst[op + i] = src[at + i];
        op += size;
      } else {
        const int st = funnel__lz4_block(src + at, size, dst, &op, cap,
                                         f.independent ? op : frame_start, lane);
        if (st != FUNNEL__LZ4_OK) return st;
      }
      FUNNEL_LZ_SYNC();
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

/* Decodes job `j`, its dst `base` more (every lane of a group of `lanes`
 * calls it). */
FUNNEL_LZ int funnel__lz4_job_run(const struct funnel__lz4_job *j, uint64_t base, unsigned lane,
                                  unsigned lanes) {
  if (j->kind == FUNNEL__LZ4_SKIP) return FUNNEL__LZ4_OK;
  const uint8_t *src = (const uint8_t *)(uintptr_t)j->src;
  uint8_t *dst = (uint8_t *)(uintptr_t)(j->dst + base);
  if (j->kind == FUNNEL__LZ4_FRAMES)
    return funnel__lz4_frames(src, j->src_length, dst, j->dst_length, lane, lanes);
  if (j->kind == FUNNEL__LZ4_STORED) {
    if (j->src_length != j->dst_length) return FUNNEL__LZ4_LENGTH;
    for (int64_t i = lane; i < j->src_length; i += lanes) dst[i] = src[i];
    return FUNNEL__LZ4_OK;
  }
  int64_t op = 0;
  const int st = funnel__lz4_block(src, j->src_length, dst, &op, j->dst_length, 0, lane);
  return st != FUNNEL__LZ4_OK ? st : op == j->dst_length ? FUNNEL__LZ4_OK : FUNNEL__LZ4_LENGTH;
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

/* Runs the jobs on this thread, as the cpu backend's stream does. */
FUNNEL_LZ void funnel__lz4_run_jobs(struct funnel__lz4_job *jobs, int64_t n, uint64_t base) {
  for (int64_t j = 0; j < n; j++) jobs[j].status = funnel__lz4_job_run(&jobs[j], base, 0, 1);
}

#endif
