/* lz4dec.h: the LZ4 frame decoder the device runs (concat.cu's
 * funnel_lz4_decode: a warp a buffer, its lanes sharing each copy) and the
 * cpu backend runs alike (one lane), for the buffers a read leaves to the
 * device to decode (parse.c, funnel__decode_all). Written from the LZ4
 * frame and block format descriptions (lz4's doc/lz4_Frame_format.md and
 * lz4_Block_format.md).
 *
 * It decodes what liblz4 writes and reads: frames one after another
 * (skippable frames skipped), linked or independent blocks of any maximum
 * size, uncompressed blocks, with or without block and content checksums
 * and content size. It checks every read and write against the bounds of
 * the buffer and every match offset against the bytes its block may reach
 * (the frame's for linked blocks), and that the buffer decodes to exactly
 * the bytes its prefix declared; it does not verify the checksums (xxHash32)
 * nor the header checksum: a buffer the device decodes was read by no one
 * else, and a corrupt one that decodes in bounds gives wrong values, not
 * an unsafe read. A dictionary frame (which Arrow's writers never make)
 * is refused. Any failure is a status: the host then decodes that buffer
 * itself (liblz4), which either finds the error and names it, or decodes
 * what this decoder refused. */
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
 * (cuda) a job. */
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
  FUNNEL__LZ4_STORED = 2  /* one stored (uncompressed) block */
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

/* A length's continuation bytes (15, then bytes of 255 and one less):
 * adds them to *len; false past `end`. */
FUNNEL_LZ int funnel__lz_more(const uint8_t **ip, const uint8_t *end, int64_t *len) {
  unsigned b;
  do {
    if (*ip >= end) return 0;
    b = *(*ip)++;
    *len += b;
  } while (b == 255);
  return 1;
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

/* Decodes one block of `n` bytes at `ip` to dst[*op ...), at most up to
 * `cap`; a match reaches back at most to dst[window]. */
FUNNEL_LZ int funnel__lz4_block(const uint8_t *ip, int64_t n, uint8_t *dst, int64_t *op_io,
                                int64_t cap, int64_t window, unsigned lane, unsigned lanes) {
  const uint8_t *end = ip + n;
  int64_t op = *op_io;
  while (ip < end) {
    const unsigned token = *ip++;
    int64_t lit = token >> 4;
    if (lit == 15 && !funnel__lz_more(&ip, end, &lit)) return FUNNEL__LZ4_CORRUPT;
    if (lit > end - ip || lit > cap - op) return FUNNEL__LZ4_CORRUPT;
    /* lengths within a block (at most 4 MiB) from here: 32-bit loops */
    uint8_t *out = dst + op;
    for (uint32_t i = lane; i < (uint32_t)lit; i += lanes) out[i] = ip[i];
    ip += lit;
    op += lit;
    if (ip == end) break; /* the last sequence: literals only */
    if (end - ip < 2) return FUNNEL__LZ4_CORRUPT;
    const int64_t off = (int64_t)ip[0] | (int64_t)ip[1] << 8;
    ip += 2;
    int64_t ml = token & 15;
    if (ml == 15 && !funnel__lz_more(&ip, end, &ml)) return FUNNEL__LZ4_CORRUPT;
    ml += 4;
    if (off == 0 || off > op - window || ml > cap - op) return FUNNEL__LZ4_CORRUPT;
    FUNNEL_LZ_SYNC(); /* the literals (and earlier matches) every lane wrote */
    /* byte i of the match repeats byte i % off before it: every byte read
     * was written before this match began */
    out = dst + op;
    const uint8_t *from = out - off;
    const uint32_t n_match = (uint32_t)ml;
    if (off >= ml) {
      for (uint32_t i = lane; i < n_match; i += lanes) out[i] = from[i];
    } else { /* i % off kept as i steps by `lanes`: no division a byte */
      const uint32_t o = (uint32_t)off, step = lanes % o;
      uint32_t r = lane % o;
      for (uint32_t i = lane; i < n_match; i += lanes) {
        out[i] = from[r];
        r += step;
        if (r >= o) r -= o;
      }
    }
    FUNNEL_LZ_SYNC();
    op += ml;
  }
  *op_io = op;
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
    ip += f.header;
    const int64_t frame_start = op;
    for (;;) {
      if (n - ip < 4) return FUNNEL__LZ4_CORRUPT;
      const uint32_t word = funnel__lz_ld32(src + ip);
      ip += 4;
      if (word == 0) break; /* the end mark */
      const int64_t size = word & 0x7FFFFFFFu;
      if (size > f.block_max || size > n - ip) return FUNNEL__LZ4_CORRUPT;
      const int64_t before = op;
      if (word & 0x80000000u) { /* stored */
        if (size > cap - op) return FUNNEL__LZ4_CORRUPT;
        for (int64_t i = lane; i < size; i += lanes) dst[op + i] = src[ip + i];
        op += size;
      } else {
        const int st = funnel__lz4_block(src + ip, size, dst, &op, cap,
                                         f.independent ? op : frame_start, lane, lanes);
        if (st != FUNNEL__LZ4_OK) return st;
      }
      FUNNEL_LZ_SYNC();
      if (op - before > f.block_max) return FUNNEL__LZ4_CORRUPT;
      ip += size;
      if (f.block_sum) {
        if (n - ip < 4) return FUNNEL__LZ4_CORRUPT;
        ip += 4;
      }
    }
    if (f.content_sum) {
      if (n - ip < 4) return FUNNEL__LZ4_CORRUPT;
      ip += 4;
    }
    if (f.content >= 0 && op - frame_start != f.content) return FUNNEL__LZ4_LENGTH;
  }
  return op == cap ? FUNNEL__LZ4_OK : FUNNEL__LZ4_LENGTH;
}

/* Decodes job `j` (every lane of a group of `lanes` calls it). */
FUNNEL_LZ int funnel__lz4_job_run(const struct funnel__lz4_job *j, unsigned lane,
                                  unsigned lanes) {
  const uint8_t *src = (const uint8_t *)(uintptr_t)j->src;
  uint8_t *dst = (uint8_t *)(uintptr_t)j->dst;
  if (j->kind == FUNNEL__LZ4_FRAMES)
    return funnel__lz4_frames(src, j->src_length, dst, j->dst_length, lane, lanes);
  if (j->kind == FUNNEL__LZ4_STORED) {
    if (j->src_length != j->dst_length) return FUNNEL__LZ4_LENGTH;
    for (int64_t i = lane; i < j->src_length; i += lanes) dst[i] = src[i];
    return FUNNEL__LZ4_OK;
  }
  int64_t op = 0;
  const int st = funnel__lz4_block(src, j->src_length, dst, &op, j->dst_length, 0, lane, lanes);
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
  int64_t ip = f.header, k = 0;
  for (;;) {
    if (n - ip < 4) return 0;
    const uint32_t word = funnel__lz_ld32(z + ip);
    ip += 4;
    if (word == 0) break;
    const int64_t size = word & 0x7FFFFFFFu;
    const int64_t at = k * block_max;
    if (size > n - ip || at >= want || k == cap) return 0;
    if (out != NULL)
      out[k] = (struct funnel__lz4_job){
          src + (uint64_t)ip, size, dst + (uint64_t)at,
          want - at < block_max ? want - at : block_max,
          (word & 0x80000000u) ? FUNNEL__LZ4_STORED : FUNNEL__LZ4_BLOCK, -1};
    k++;
    ip += size + (f.block_sum ? 4 : 0);
  }
  ip += f.content_sum ? 4 : 0;
  /* one frame, whose blocks cover the bytes declared */
  return ip == n && k > 0 && (k - 1) * block_max < want && k * block_max >= want ? k : 0;
}

/* Runs the jobs on this thread, as the cpu backend's stream does. */
FUNNEL_LZ void funnel__lz4_run_jobs(struct funnel__lz4_job *jobs, int64_t n) {
  for (int64_t j = 0; j < n; j++) jobs[j].status = funnel__lz4_job_run(&jobs[j], 0, 1);
}

#endif
