/* ipc_writer.c: see ipc_writer.h. Little-endian hosts only, like funnel. */
#include "ipc_writer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (q == NULL) {
    fprintf(stderr, "ipc_writer: out of memory\n");
    abort();
  }
  return q;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* ------------------------------------------------------------ compression */

/* liblz4 and libzstd, loaded at run time with prototypes of their stable
 * API written here (no headers needed to build), independent of funnel's
 * own loading of them. */
typedef struct {
  int block_size_id, block_mode, content_checksum, frame_type;
  unsigned long long content_size;
  unsigned dict_id;
  int block_checksum;
} lz4f_frame_info;
typedef struct {
  lz4f_frame_info frame_info;
  int compression_level;
  unsigned auto_flush, favor_dec_speed, reserved[3];
} lz4f_preferences;

static struct {
  size_t (*lz4f_bound)(size_t, const lz4f_preferences *);
  size_t (*lz4f_compress)(void *, size_t, const void *, size_t, const lz4f_preferences *);
  size_t (*lz4f_create_c)(void **, unsigned);
  size_t (*lz4f_free_c)(void *);
  size_t (*lz4f_begin)(void *, void *, size_t, const lz4f_preferences *);
  size_t (*lz4f_update)(void *, void *, size_t, const void *, size_t, const void *);
  size_t (*lz4f_end)(void *, void *, size_t, const void *);
  size_t (*lz4f_update_bound)(size_t, const lz4f_preferences *);
  int (*lz4_bound)(int);
  int (*lz4_compress)(const char *, char *, int, int);
  int (*lz4_compress_hc)(const char *, char *, int, int, int);
  size_t (*lz4f_create_d)(void **, unsigned);
  size_t (*lz4f_free_d)(void *);
  size_t (*lz4f_decompress)(void *, void *, size_t *, const void *, size_t *, const void *);
  unsigned (*lz4f_is_error)(size_t);
  size_t (*zstd_bound)(size_t);
  size_t (*zstd_compress)(void *, size_t, const void *, size_t, int);
  size_t (*zstd_decompress)(void *, size_t, const void *, size_t);
  void *(*zstd_create_d)(void);
  size_t (*zstd_decompress_d)(void *, void *, size_t, const void *, size_t);
  unsigned (*zstd_is_error)(size_t);
  void *(*zstd_create_c)(void);
  size_t (*zstd_free_c)(void *);
  size_t (*zstd_set)(void *, int, int);
  size_t (*zstd_compress2)(void *, void *, size_t, const void *, size_t);
  int ok;
} codecs;
static pthread_once_t codecs_once = PTHREAD_ONCE_INIT;

static void codecs_load(void) {
  void *lz4 = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
  void *zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lz4 == NULL || zstd == NULL) return;
  *(void **)&codecs.lz4f_bound = dlsym(lz4, "LZ4F_compressFrameBound");
  *(void **)&codecs.lz4f_compress = dlsym(lz4, "LZ4F_compressFrame");
  *(void **)&codecs.lz4f_create_c = dlsym(lz4, "LZ4F_createCompressionContext");
  *(void **)&codecs.lz4f_free_c = dlsym(lz4, "LZ4F_freeCompressionContext");
  *(void **)&codecs.lz4f_begin = dlsym(lz4, "LZ4F_compressBegin");
  *(void **)&codecs.lz4f_update = dlsym(lz4, "LZ4F_compressUpdate");
  *(void **)&codecs.lz4f_end = dlsym(lz4, "LZ4F_compressEnd");
  *(void **)&codecs.lz4f_update_bound = dlsym(lz4, "LZ4F_compressBound");
  *(void **)&codecs.lz4_bound = dlsym(lz4, "LZ4_compressBound");
  *(void **)&codecs.lz4_compress = dlsym(lz4, "LZ4_compress_default");
  *(void **)&codecs.lz4_compress_hc = dlsym(lz4, "LZ4_compress_HC");
  *(void **)&codecs.lz4f_create_d = dlsym(lz4, "LZ4F_createDecompressionContext");
  *(void **)&codecs.lz4f_free_d = dlsym(lz4, "LZ4F_freeDecompressionContext");
  *(void **)&codecs.lz4f_decompress = dlsym(lz4, "LZ4F_decompress");
  *(void **)&codecs.lz4f_is_error = dlsym(lz4, "LZ4F_isError");
  *(void **)&codecs.zstd_bound = dlsym(zstd, "ZSTD_compressBound");
  *(void **)&codecs.zstd_compress = dlsym(zstd, "ZSTD_compress");
  *(void **)&codecs.zstd_decompress = dlsym(zstd, "ZSTD_decompress");
  *(void **)&codecs.zstd_create_d = dlsym(zstd, "ZSTD_createDCtx");
  *(void **)&codecs.zstd_decompress_d = dlsym(zstd, "ZSTD_decompressDCtx");
  *(void **)&codecs.zstd_is_error = dlsym(zstd, "ZSTD_isError");
  *(void **)&codecs.zstd_create_c = dlsym(zstd, "ZSTD_createCCtx");
  *(void **)&codecs.zstd_free_c = dlsym(zstd, "ZSTD_freeCCtx");
  *(void **)&codecs.zstd_set = dlsym(zstd, "ZSTD_CCtx_setParameter");
  *(void **)&codecs.zstd_compress2 = dlsym(zstd, "ZSTD_compress2");
  codecs.ok = codecs.lz4f_bound && codecs.lz4f_compress && codecs.lz4f_create_c &&
              codecs.lz4f_free_c && codecs.lz4f_begin && codecs.lz4f_update && codecs.lz4f_end &&
              codecs.lz4f_update_bound && codecs.lz4_bound && codecs.lz4_compress &&
              codecs.lz4_compress_hc && codecs.lz4f_create_d &&
              codecs.lz4f_free_d && codecs.lz4f_decompress && codecs.lz4f_is_error &&
              codecs.zstd_bound && codecs.zstd_compress && codecs.zstd_decompress &&
              codecs.zstd_is_error && codecs.zstd_create_d && codecs.zstd_decompress_d &&
              codecs.zstd_create_c && codecs.zstd_free_c && codecs.zstd_set &&
              codecs.zstd_compress2;
}

int iw_codecs_available(void) {
  pthread_once(&codecs_once, codecs_load);
  return codecs.ok;
}

static void need_codecs(void) {
  if (!iw_codecs_available()) {
    fprintf(stderr, "ipc_writer: liblz4.so.1 and libzstd.so.1 are needed to compress\n");
    abort();
  }
}

uint8_t *iw_compress(int codec, int lz4_style, int zstd_level, const void *src, size_t n,
                     size_t *out_len) {
  need_codecs();
  if (codec == 1) {
    const int java = lz4_style == IW_LZ4_JAVA, sums = lz4_style == IW_LZ4_SUMS;
    const int sized = lz4_style == IW_LZ4_SIZED;
    const struct iw_lz4_shape shape = {
        .block_size_id = java ? 7 : 4, /* max4MB, max64KB */
        .linked = lz4_style == IW_LZ4_CPP || sums,
        .block_checksum = sums,
        .content_checksum = java || sums || sized,
        .content_size = sized};
    return iw_lz4_frame(&shape, src, n, out_len);
  }
  const size_t cap = codecs.zstd_bound(n);
  uint8_t *dst = xrealloc(NULL, cap);
  const size_t len = codecs.zstd_compress(dst, cap, src, n, zstd_level > 0 ? zstd_level : 1);
  if (codecs.zstd_is_error(len)) abort();
  *out_len = len;
  return dst;
}

uint8_t *iw_lz4_frame(const struct iw_lz4_shape *shape, const void *src, size_t n,
                      size_t *out_len) {
  need_codecs();
  lz4f_preferences p;
  memset(&p, 0, sizeof(p));
  p.frame_info.block_size_id = shape->block_size_id;
  p.frame_info.block_mode = shape->linked ? 0 : 1;
  p.frame_info.content_checksum = shape->content_checksum;
  p.frame_info.content_size = shape->content_size ? (unsigned long long)n : 0;
  p.frame_info.block_checksum = shape->block_checksum;
  p.compression_level = shape->level;
  uint8_t *dst;
  size_t len;
  if (shape->piece == 0) {
    const size_t cap = codecs.lz4f_bound(n, &p);
    dst = xrealloc(NULL, cap);
    len = codecs.lz4f_compress(dst, cap, src, n, &p);
    if (codecs.lz4f_is_error(len)) abort();
  } else { /* a block a piece: each update flushed */
    p.auto_flush = 1;
    void *c;
    if (codecs.lz4f_is_error(codecs.lz4f_create_c(&c, 100))) abort();
    const size_t pieces = n / shape->piece + 1;
    const size_t cap = 32 + pieces * codecs.lz4f_update_bound(shape->piece, &p);
    dst = xrealloc(NULL, cap);
    len = codecs.lz4f_begin(c, dst, cap, &p);
    for (size_t at = 0; !codecs.lz4f_is_error(len) && at < n; at += shape->piece) {
      const size_t k = n - at < shape->piece ? n - at : shape->piece;
      const size_t w =
          codecs.lz4f_update(c, dst + len, cap - len, (const uint8_t *)src + at, k, NULL);
      len = codecs.lz4f_is_error(w) ? w : len + w;
    }
    if (!codecs.lz4f_is_error(len)) {
      const size_t w = codecs.lz4f_end(c, dst + len, cap - len, NULL);
      len = codecs.lz4f_is_error(w) ? w : len + w;
    }
    codecs.lz4f_free_c(c);
    if (codecs.lz4f_is_error(len)) abort();
  }
  *out_len = len;
  return dst;
}

uint8_t *iw_lz4_block(int level, const void *src, size_t n, size_t *out_len) {
  need_codecs();
  const int cap = codecs.lz4_bound((int)n);
  uint8_t *dst = xrealloc(NULL, (size_t)cap + 1);
  const int len = level < 3 ? codecs.lz4_compress(src, (char *)dst, (int)n, cap)
                            : codecs.lz4_compress_hc(src, (char *)dst, (int)n, cap, level);
  if (len <= 0) abort();
  *out_len = (size_t)len;
  return dst;
}

uint8_t *iw_zstd_frame(int level, int checksum, int content_size, const void *src, size_t n,
                       size_t *out_len) {
  need_codecs();
  void *c = codecs.zstd_create_c();
  if (c == NULL) abort();
  /* zstd.h's ZSTD_c_compressionLevel, ZSTD_c_contentSizeFlag, ZSTD_c_checksumFlag */
  if (codecs.zstd_is_error(codecs.zstd_set(c, 100, level)) ||
      codecs.zstd_is_error(codecs.zstd_set(c, 200, content_size)) ||
      codecs.zstd_is_error(codecs.zstd_set(c, 201, checksum)))
    abort();
  const size_t cap = codecs.zstd_bound(n);
  uint8_t *dst = xrealloc(NULL, cap);
  const size_t len = codecs.zstd_compress2(c, dst, cap, src, n);
  if (codecs.zstd_is_error(len)) abort();
  codecs.zstd_free_c(c);
  *out_len = len;
  return dst;
}

int64_t iw_zstd_decompress(const uint8_t *src, size_t n, uint8_t *dst, size_t cap) {
  need_codecs();
  const size_t got = codecs.zstd_decompress(dst, cap, src, n);
  return codecs.zstd_is_error(got) ? -1 : (int64_t)got;
}

/* Shuffle-like bytes (iw_sample_bytes' kind 5): pieces one after another,
 * each drawn: a match 1 to 8 bytes back (its copy overlapping itself), a
 * match a few bytes back, a run of zeros, a few random bytes, a long run
 * of them (literals), a match of 33 to 332 bytes, or one up to 65,535 back. */
static void shuffle_like(uint8_t *out, int64_t n, uint64_t *rng) {
  for (int64_t i = 0; i < n;) {
    const int draw = (int)check_rand_below(rng, 8);
    int64_t back = 0, len;
    if (draw == 0) { /* 1 to 8 back */
      back = 1 + (int64_t)check_rand_below(rng, 8);
      len = 4 + (int64_t)check_rand_below(rng, 30);
    } else if (draw == 1) { /* a few back */
      back = 1 + (int64_t)check_rand_below(rng, 40);
      len = 4 + (int64_t)check_rand_below(rng, 12);
    } else if (draw == 2) { /* zeros */
      len = 8 + (int64_t)check_rand_below(rng, 120);
    } else if (draw <= 4) { /* a few random bytes */
      len = 1 + (int64_t)check_rand_below(rng, 4);
    } else if (draw == 5) { /* a long run of them */
      len = 20 + (int64_t)check_rand_below(rng, 300);
    } else if (draw == 6) { /* a long match */
      back = 1 + (int64_t)check_rand_below(rng, 1000);
      len = 33 + (int64_t)check_rand_below(rng, 300);
    } else { /* far back */
      back = 1 + (int64_t)check_rand_below(rng, 65535);
      len = 4 + (int64_t)check_rand_below(rng, 40);
    }
    if (back > i) back = 0; /* (nothing that far back yet: random bytes) */
    for (; len > 0 && i < n; len--, i++)
      out[i] = back > 0 ? out[i - back] : draw == 2 ? 0 : (uint8_t)check_rand(rng);
  }
}

/* Long sequences, then short ones (iw_sample_bytes' kind 6): the first
 * 1,500 bytes 1 to 4 random bytes and a match of 24 to 63 bytes 1 to 40
 * back, then 1 to 14 random bytes and a match of 4 to 18 bytes 1 to 16
 * back, a long match (33 to 96 bytes) one time in eight. */
static void long_then_short(uint8_t *out, int64_t n, uint64_t *rng) {
  for (int64_t i = 0; i < n;) {
    const int head = i < 1500, longer = check_rand_below(rng, 8) == 0;
    for (int64_t r = 1 + (int64_t)check_rand_below(rng, head ? 4 : 14); r > 0 && i < n; r--, i++)
      out[i] = (uint8_t)check_rand(rng);
    const int64_t back = 1 + (int64_t)check_rand_below(rng, head ? 40 : 16);
    int64_t len = head ? 24 + (int64_t)check_rand_below(rng, 40)
                  : longer ? 33 + (int64_t)check_rand_below(rng, 64)
                           : 4 + (int64_t)check_rand_below(rng, 15);
    for (; len > 0 && i < n; len--, i++) out[i] = i >= back ? out[i - back] : 0;
  }
}

void iw_sample_bytes(uint8_t *out, int64_t n, int kind, uint64_t *rng) {
  if (kind == 5 || kind == 6) {
    (kind == 5 ? shuffle_like : long_then_short)(out, n, rng);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    out[i] = kind == 0   ? (uint8_t)check_rand(rng)
             : kind == 1 ? (uint8_t)("funnel shuffle "[i % 15] + (i / 9000) % 3)
             : kind == 2 ? (uint8_t)((i / 700) & 0xff)
             : kind == 3 ? (uint8_t)("abcdefghijklmnopqrstuvwxyz"[check_rand_below(rng, 26)] -
                                     (check_rand_below(rng, 9) == 0 ? 32 : 0))
                         : (uint8_t)(i % 8 == 0 ? check_rand_below(rng, 16) : 0);
}

uint8_t *iw_spoiled_copy(uint64_t *rng, const uint8_t *z, size_t zn, size_t *len) {
  uint8_t *bad = iw_dup(z, zn);
  for (int flips = 1 + (int)check_rand_below(rng, 3); flips > 0; flips--)
    bad[check_rand_below(rng, zn)] ^= (uint8_t)(1 + check_rand_below(rng, 255));
  *len = check_rand_below(rng, 4) == 0 ? check_rand_below(rng, zn + 1) : zn;
  return bad;
}

const uint8_t IW_ZSTD_ALL_LOW_FRAME[34] = {
    0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0xcd, 0x00, 0x00, 0x20, 0x61, 0x62,
    0x63, 0x64, 0x01, 0x64, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x3f};

int64_t iw_decompress_buffer(int codec, const uint8_t *src, size_t n, uint8_t *dst, size_t cap) {
  need_codecs();
  if (n == 0) return 0;
  if (n < 8) return -1;
  int64_t want;
  memcpy(&want, src, 8);
  src += 8;
  n -= 8;
  if (want == -1) {
    if (n > cap) return -1;
    memcpy(dst, src, n);
    return (int64_t)n;
  }
  if (want < 0 || (uint64_t)want > cap) return -1;
  if (want == 0) return 0;
  /* one context of each a thread, made once and kept (as a plugin's
   * decompressor would keep its own) */
  static _Thread_local void *zctx, *lctx;
  if (codec == 2) {
    if (zctx == NULL && (zctx = codecs.zstd_create_d()) == NULL) return -1;
    size_t got = codecs.zstd_decompress_d(zctx, dst, (size_t)want, src, n);
    return codecs.zstd_is_error(got) || got != (size_t)want ? -1 : want;
  }
  if (lctx == NULL && codecs.lz4f_is_error(codecs.lz4f_create_d(&lctx, 100))) {
    lctx = NULL;
    return -1;
  }
  size_t d = (size_t)want, s = n;
  size_t r = codecs.lz4f_decompress(lctx, dst, &d, src, &s, NULL);
  if (codecs.lz4f_is_error(r) || r != 0) { /* a fresh context for the next buffer */
    codecs.lz4f_free_d(lctx);
    lctx = NULL;
    return -1;
  }
  return d != (size_t)want || s != n ? -1 : want;
}

/* Appends buffer [ptr, ptr + len) to a body compressed as o says; returns
 * the bytes appended. */
static int64_t append_compressed(struct iw_buf *body, const void *ptr, int64_t len,
                                 const struct iw_options *o) {
  if (len == 0 && !o->empty_prefix) return 0;
  uint8_t prefix[8];
  if (len == 0) {
    put64(prefix, 0);
    iw_buf_append(body, prefix, 8);
    return 8;
  }
  uint8_t *zeros = ptr == NULL ? calloc(1, (size_t)len) : NULL;
  size_t zlen;
  uint8_t *z = iw_compress(o->compression, o->lz4_style, o->zstd_level, ptr ? ptr : zeros,
                           (size_t)len, &zlen);
  if (o->raw_fallback && zlen >= (size_t)len) {
    put64(prefix, UINT64_MAX); /* -1: the bytes follow as they are */
    iw_buf_append(body, prefix, 8);
    iw_buf_append(body, ptr, (size_t)len);
    zlen = (size_t)len;
  } else {
    put64(prefix, (uint64_t)len);
    iw_buf_append(body, prefix, 8);
    iw_buf_append(body, z, zlen);
  }
  free(z);
  free(zeros);
  return 8 + (int64_t)zlen;
}

/* ------------------------------------------------------------------ bytes */

static void buf_reserve(struct iw_buf *b, size_t extra) {
  if (b->cap - b->len >= extra) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < extra) cap *= 2;
  b->data = xrealloc(b->data, cap);
  b->cap = cap;
}

void iw_buf_append(struct iw_buf *b, const void *bytes, size_t n) {
  if (n == 0) return;
  buf_reserve(b, n);
  if (bytes != NULL) memcpy(b->data + b->len, bytes, n);
  else memset(b->data + b->len, 0, n);
  b->len += n;
}

void iw_buf_free(struct iw_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

uint8_t *iw_dup(const void *bytes, size_t n) {
  uint8_t *p = xrealloc(NULL, n);
  if (n) memcpy(p, bytes, n);
  return p;
}


/* Pads with zeros until len % align == 0, then reserves `size` zero bytes;
 * returns where they start. */
static size_t buf_alloc(struct iw_buf *b, size_t size, size_t align) {
  while (b->len % align) iw_buf_append(b, NULL, 1);
  size_t at = b->len;
  iw_buf_append(b, NULL, size);
  return at;
}

/* ------------------------------------------------------------- flatbuffer */

enum { S_ABSENT = 0, S_U8, S_I16, S_I32, S_I64, S_REF };

struct slot {
  int kind;
  int64_t value; /* scalars; a REF is patched later */
};

static size_t slot_size(int kind) {
  switch (kind) {
    case S_U8: return 1;
    case S_I16: return 2;
    case S_I32: case S_REF: return 4;
    case S_I64: return 8;
    default: return 0;
  }
}

#define MAX_SLOTS 8

/* Writes a vtable and then its table (soffset = table - vtable > 0).
 * Fields are laid out largest first, each naturally aligned (the table
 * starts 8-aligned). at[i] gets the absolute position of field i, 0 when
 * absent. Returns the table's position. */
static size_t fb_table(struct iw_buf *b, int n, const struct slot *s, size_t at[]) {
  uint16_t off[MAX_SLOTS] = {0};
  size_t cursor = 4; /* after the soffset */
  for (size_t size = 8; size >= 1; size /= 2)
    for (int i = 0; i < n; i++)
      if (slot_size(s[i].kind) == size) {
        cursor = (cursor + size - 1) / size * size;
        off[i] = (uint16_t)cursor;
        cursor += size;
      }
  size_t vt = buf_alloc(b, 4 + 2 * (size_t)n, 2);
  put16(b->data + vt, (uint16_t)(4 + 2 * n));
  put16(b->data + vt + 2, (uint16_t)cursor);
  for (int i = 0; i < n; i++) put16(b->data + vt + 4 + 2 * i, off[i]);
  size_t t = buf_alloc(b, cursor, 8);
  put32(b->data + t, (uint32_t)(int32_t)(t - vt));
  for (int i = 0; i < n; i++) {
    at[i] = off[i] ? t + off[i] : 0;
    uint8_t *p = b->data + t + off[i];
    switch (s[i].kind) {
      case S_U8: *p = (uint8_t)s[i].value; break;
      case S_I16: put16(p, (uint16_t)s[i].value); break;
      case S_I32: put32(p, (uint32_t)s[i].value); break;
      case S_I64: put64(p, (uint64_t)s[i].value); break;
      default: break;
    }
  }
  return t;
}

/* Points the uoffset at `at` to `target`, which must come after it. */
static void fb_patch(struct iw_buf *b, size_t at, size_t target) {
  if (target <= at) {
    fprintf(stderr, "ipc_writer: uoffset at %zu to %zu does not point forward\n", at, target);
    abort();
  }
  put32(b->data + at, (uint32_t)(target - at));
}

/* A vector of `count` elements of `elem` bytes whose first element is
 * `align`-aligned (align >= 4). Returns the position of its length. */
static size_t fb_vector(struct iw_buf *b, uint32_t count, size_t elem, size_t align) {
  while ((b->len + 4) % align) iw_buf_append(b, NULL, 1);
  size_t v = buf_alloc(b, 4 + count * elem, 4);
  put32(b->data + v, count);
  return v;
}

static size_t fb_string(struct iw_buf *b, const char *s) {
  size_t n = strlen(s);
  size_t v = buf_alloc(b, 4 + n + 1, 4);
  put32(b->data + v, (uint32_t)n);
  memcpy(b->data + v + 4, s, n);
  return v;
}

/* Writes a custom_metadata vector of KeyValue tables and points the
 * uoffset at `ref` to it. */
static void fb_metadata(struct iw_buf *b, size_t ref, int n, const struct iw_kv *kv) {
  size_t v = fb_vector(b, (uint32_t)n, 4, 4);
  fb_patch(b, ref, v);
  for (int i = 0; i < n; i++) {
    size_t at[2];
    struct slot s[2] = {{S_REF, 0}, {S_REF, 0}};
    size_t t = fb_table(b, 2, s, at);
    fb_patch(b, v + 4 + 4 * (size_t)i, t);
    fb_patch(b, at[0], fb_string(b, kv[i].key));
    fb_patch(b, at[1], fb_string(b, kv[i].value));
  }
}

static size_t fb_empty_table(struct iw_buf *b) {
  size_t none[1];
  return fb_table(b, 0, NULL, none);
}

/* ----------------------------------------------------------------- schema */

int iw_value_width(const struct iw_field *f) {
  switch (f->type) {
    case FUNNEL_TYPE_INT8: case FUNNEL_TYPE_UINT8: return 1;
    case FUNNEL_TYPE_INT16: case FUNNEL_TYPE_UINT16: return 2;
    case FUNNEL_TYPE_INT32: case FUNNEL_TYPE_UINT32: case FUNNEL_TYPE_FLOAT32:
    case FUNNEL_TYPE_DATE32: return 4;
    case FUNNEL_TYPE_INT64: case FUNNEL_TYPE_UINT64: case FUNNEL_TYPE_FLOAT64:
    case FUNNEL_TYPE_DATE64: case FUNNEL_TYPE_TIMESTAMP: return 8;
    case FUNNEL_TYPE_DECIMAL128: return 16;
    case FUNNEL_TYPE_FIXED_SIZE_BINARY: return f->byte_width;
    default: return 0;
  }
}

int iw_offset_width(const struct iw_field *f) {
  switch (f->type) {
    case FUNNEL_TYPE_UTF8: case FUNNEL_TYPE_BINARY: return 4;
    case FUNNEL_TYPE_LARGE_UTF8: case FUNNEL_TYPE_LARGE_BINARY: return 8;
    default: return 0;
  }
}

static int iw_is_list(const struct iw_field *f) {
  return f->type == FUNNEL_TYPE_LIST || f->type == FUNNEL_TYPE_LARGE_LIST ||
         f->type == FUNNEL_TYPE_MAP;
}

int iw_buffer_count(const struct iw_field *f) {
  if (f->type == FUNNEL_TYPE_STRUCT || f->type == FUNNEL_TYPE_FIXED_SIZE_LIST) return 1;
  return iw_offset_width(f) ? 3 : 2;
}

static void nodes_of(const struct iw_field *f, const struct iw_field **out, int cap, int *n) {
  if (*n < cap) out[*n] = f;
  (*n)++;
  for (int i = 0; i < f->n_children; i++) nodes_of(&f->children[i], out, cap, n);
}

int iw_schema_nodes(const struct iw_schema *s, const struct iw_field **out, int cap) {
  int n = 0;
  for (int i = 0; i < s->n_fields; i++) nodes_of(&s->fields[i], out, cap, &n);
  return n;
}

static size_t int_table(struct iw_buf *b, int bits, int is_signed) {
  size_t at[2];
  struct slot s[2] = {{S_I32, bits}, {S_U8, is_signed}};
  return fb_table(b, 2, s, at);
}

/* The Type union tag and table of `f`; returns the table's position. */
static size_t type_table(struct iw_buf *b, const struct iw_field *f, int *tag) {
  size_t at[3];
  switch (f->type) {
    case FUNNEL_TYPE_INT8: case FUNNEL_TYPE_INT16: case FUNNEL_TYPE_INT32: case FUNNEL_TYPE_INT64:
      *tag = IW_TAG_INT;
      return int_table(b, 8 * iw_value_width(f), 1);
    case FUNNEL_TYPE_UINT8: case FUNNEL_TYPE_UINT16: case FUNNEL_TYPE_UINT32: case FUNNEL_TYPE_UINT64:
      *tag = IW_TAG_INT;
      return int_table(b, 8 * iw_value_width(f), 0);
    case FUNNEL_TYPE_FLOAT32: case FUNNEL_TYPE_FLOAT64: case IW_TYPE_FLOAT16: {
      *tag = IW_TAG_FLOATING_POINT;
      int precision = f->type == IW_TYPE_FLOAT16 ? 0 : f->type == FUNNEL_TYPE_FLOAT32 ? 1 : 2;
      struct slot s[1] = {{S_I16, precision}};
      return fb_table(b, 1, s, at);
    }
    case FUNNEL_TYPE_BOOL: *tag = IW_TAG_BOOL; return fb_empty_table(b);
    case FUNNEL_TYPE_DATE32: case FUNNEL_TYPE_DATE64: {
      *tag = IW_TAG_DATE;
      struct slot s[1] = {{S_I16, f->type == FUNNEL_TYPE_DATE32 ? 0 : 1}};
      return fb_table(b, 1, s, at);
    }
    case FUNNEL_TYPE_TIMESTAMP: {
      *tag = IW_TAG_TIMESTAMP;
      struct slot s[2] = {{S_I16, f->time_unit}, {f->timezone ? S_REF : S_ABSENT, 0}};
      size_t t = fb_table(b, 2, s, at);
      if (f->timezone) fb_patch(b, at[1], fb_string(b, f->timezone));
      return t;
    }
    case FUNNEL_TYPE_DECIMAL128: case IW_TYPE_DECIMAL256: {
      *tag = IW_TAG_DECIMAL;
      struct slot s[3] = {{S_I32, f->precision}, {S_I32, f->scale},
                          {S_I32, f->type == IW_TYPE_DECIMAL256 ? 256 : 128}};
      return fb_table(b, 3, s, at);
    }
    case FUNNEL_TYPE_FIXED_SIZE_BINARY: {
      *tag = IW_TAG_FIXED_SIZE_BINARY;
      struct slot s[1] = {{S_I32, f->byte_width}};
      return fb_table(b, 1, s, at);
    }
    case FUNNEL_TYPE_UTF8: *tag = IW_TAG_UTF8; return fb_empty_table(b);
    case FUNNEL_TYPE_BINARY: *tag = IW_TAG_BINARY; return fb_empty_table(b);
    case FUNNEL_TYPE_LARGE_UTF8: *tag = IW_TAG_LARGE_UTF8; return fb_empty_table(b);
    case FUNNEL_TYPE_LARGE_BINARY: *tag = IW_TAG_LARGE_BINARY; return fb_empty_table(b);
    case FUNNEL_TYPE_LIST: *tag = IW_TAG_LIST; return fb_empty_table(b);
    case FUNNEL_TYPE_LARGE_LIST: *tag = 21; return fb_empty_table(b);
    case FUNNEL_TYPE_STRUCT: *tag = IW_TAG_STRUCT; return fb_empty_table(b);
    case FUNNEL_TYPE_FIXED_SIZE_LIST: {
      *tag = 16;
      struct slot s[1] = {{S_I32, f->list_size}};
      return fb_table(b, 1, s, at);
    }
    case FUNNEL_TYPE_MAP: {
      *tag = 17;
      struct slot s[1] = {{S_U8, f->keys_sorted ? 1 : 0}};
      return fb_table(b, 1, s, at);
    }
    case IW_TYPE_LIST: *tag = IW_TAG_LIST; return fb_empty_table(b);
    case IW_TYPE_STRUCT: *tag = IW_TAG_STRUCT; return fb_empty_table(b);
    case IW_TYPE_UTF8_VIEW: *tag = IW_TAG_UTF8_VIEW; return fb_empty_table(b);
    case IW_TYPE_RAW: *tag = f->raw_tag; return fb_empty_table(b);
    default:
      fprintf(stderr, "ipc_writer: unknown field type %d\n", f->type);
      abort();
  }
}

/* Writes a Field table and points the uoffset at `ref` to it. */
static void field_table(struct iw_buf *b, size_t ref, const struct iw_field *f) {
  /* List and Struct carry one int32 child, as Arrow writes them */
  static const struct iw_field item = {.type = FUNNEL_TYPE_INT32, .name = "item", .nullable = 1};
  static const struct iw_field a = {.type = FUNNEL_TYPE_INT32, .name = "a", .nullable = 1};
  const struct iw_field *child =
      f->type == IW_TYPE_LIST ? &item : f->type == IW_TYPE_STRUCT ? &a : NULL;
  int tag = 0;
  /* the tag is known only once the type table is written, so patch it */
  size_t at[7];
  struct slot s[7] = {{S_REF, 0}, {S_U8, f->nullable ? 1 : 0}, {S_U8, 0}, {S_REF, 0},
                      {f->dictionary ? S_REF : S_ABSENT, 0}, {S_REF, 0},
                      {f->n_metadata ? S_REF : S_ABSENT, 0}};
  size_t t = fb_table(b, f->n_metadata ? 7 : 6, s, at);
  fb_patch(b, ref, t);
  fb_patch(b, at[0], fb_string(b, f->name ? f->name : ""));
  size_t ty = type_table(b, f, &tag);
  b->data[at[2]] = (uint8_t)tag;
  fb_patch(b, at[3], ty);
  if (f->dictionary) {
    size_t dat[3];
    struct slot ds[3] = {{S_I64, 0}, {S_REF, 0}, {S_U8, 0}};
    size_t d = fb_table(b, 3, ds, dat);
    fb_patch(b, at[4], d);
    fb_patch(b, dat[1], int_table(b, 32, 1));
  }
  const int n_children = f->n_children > 0 ? f->n_children : child ? 1 : 0;
  size_t children = fb_vector(b, (uint32_t)n_children, 4, 4);
  fb_patch(b, at[5], children);
  for (int i = 0; i < n_children; i++)
    field_table(b, children + 4 + 4 * (size_t)i, f->n_children > 0 ? &f->children[i] : child);
  if (f->n_metadata) fb_metadata(b, at[6], f->n_metadata, f->metadata);
}

/* ---------------------------------------------------------------- message */

/* Starts a Message flatbuffer in `meta`: the root uoffset, then the
 * Message table. Returns the position of the header uoffset to patch. */
static size_t message_begin(struct iw_buf *meta, const struct iw_options *o, int header_type,
                            int64_t body_length, size_t at[4]) {
  size_t root = buf_alloc(meta, 4, 4);
  struct slot s[4] = {{S_I16, o && o->version ? o->version : 4}, {S_U8, header_type},
                      {S_REF, 0}, {S_I64, body_length}};
  size_t t = fb_table(meta, 4, s, at);
  fb_patch(meta, root, t);
  return at[2];
}

/* Appends prefix, metadata (padded so the body starts 8-aligned in `out`)
 * and body; shifts the metadata-relative positions in `layout` to `out`. */
static void message_frame(struct iw_buf *out, const struct iw_buf *meta, const uint8_t *body,
                          size_t body_length, const struct iw_options *o, const size_t at[4],
                          struct iw_layout *layout) {
  const size_t prefix = o && o->legacy ? 4 : 8;
  size_t start = out->len;
  size_t meta_len = meta->len;
  while ((start + prefix + meta_len) % 8) meta_len++;
  uint8_t head[8];
  put32(head, 0xFFFFFFFFu);
  put32(head + 4, (uint32_t)meta_len);
  iw_buf_append(out, prefix == 8 ? head : head + 4, prefix);
  size_t m = out->len;
  iw_buf_append(out, meta->data, meta->len);
  iw_buf_append(out, NULL, meta_len - meta->len);
  size_t body_at = out->len;
  iw_buf_append(out, body, body_length);
  if (layout != NULL) {
    /* relative positions were filled by the caller; make them absolute */
    size_t *rel[] = {&layout->length_field, &layout->nodes, &layout->buffers, &layout->fields,
                     &layout->codec_field, &layout->method_field};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++)
      if (*rel[i]) *rel[i] += m;
    layout->message = start;
    layout->metadata = m;
    layout->metadata_length = meta_len;
    layout->body = body_at;
    layout->body_length = body_length;
    layout->version_field = m + at[0];
    layout->header_type_field = m + at[1];
    layout->body_length_field = m + at[3];
    uint32_t header;
    memcpy(&header, meta->data + at[2], 4);
    layout->header = m + at[2] + header;
  }
}

/* Writes a Schema table and points the uoffset at `ref` to it; returns the
 * position of its fields vector. */
static size_t schema_table(struct iw_buf *b, size_t ref, const struct iw_schema *s,
                           const struct iw_options *o) {
  const int n_metadata = o ? o->n_metadata : 0;
  size_t sat[3];
  struct slot ss[3] = {{s->big_endian ? S_I16 : S_ABSENT, s->big_endian ? 1 : 0}, {S_REF, 0},
                       {n_metadata ? S_REF : S_ABSENT, 0}};
  size_t t = fb_table(b, n_metadata ? 3 : 2, ss, sat);
  fb_patch(b, ref, t);
  size_t fields = fb_vector(b, (uint32_t)s->n_fields, 4, 4);
  fb_patch(b, sat[1], fields);
  for (int i = 0; i < s->n_fields; i++) field_table(b, fields + 4 + 4 * (size_t)i, &s->fields[i]);
  if (n_metadata) fb_metadata(b, sat[2], n_metadata, o->metadata);
  return fields;
}

void iw_schema_message(struct iw_buf *out, const struct iw_schema *s, const struct iw_options *o,
                       struct iw_layout *layout) {
  struct iw_buf meta = {0};
  size_t at[4];
  size_t header = message_begin(&meta, o, 1, 0, at);
  struct iw_layout l = {0};
  l.fields = schema_table(&meta, header, s, o);
  message_frame(out, &meta, NULL, 0, o, at, &l);
  if (layout != NULL) *layout = l;
  iw_buf_free(&meta);
}

void iw_batch_message(struct iw_buf *out, const struct iw_schema *s, int64_t length,
                      const struct iw_column *cols, const struct iw_options *o,
                      struct iw_layout *layout) {
  /* the body first: it fixes bodyLength and the Buffer structs */
  const int n_nodes = iw_schema_nodes(s, NULL, 0);
  const struct iw_field **node = xrealloc(NULL, sizeof(*node) * (size_t)(n_nodes ? n_nodes : 1));
  iw_schema_nodes(s, node, n_nodes);
  int n_buffers = 0;
  for (int i = 0; i < n_nodes; i++) n_buffers += iw_buffer_count(node[i]);
  int64_t *boff = xrealloc(NULL, sizeof(int64_t) * 2 * (size_t)(n_buffers ? n_buffers : 1));
  struct iw_buf body = {0};
  int k = 0;
  for (int i = 0; i < n_nodes; i++) {
    const struct iw_column *c = &cols[i];
    const void *ptr[3] = {c->validity, c->data, NULL};
    int64_t len[3] = {c->validity_length, c->data_length, 0};
    if (iw_buffer_count(node[i]) == 3 || iw_is_list(node[i])) {
      ptr[1] = c->offsets;
      len[1] = c->offsets_length;
      ptr[2] = c->data;
      len[2] = c->data_length;
    }
    for (int j = 0; j < iw_buffer_count(node[i]); j++, k++) {
      boff[2 * k] = (int64_t)body.len;
      if (o != NULL && o->compression && !o->header_only) {
        boff[2 * k + 1] = append_compressed(&body, ptr[j], len[j], o);
      } else {
        boff[2 * k + 1] = len[j];
        iw_buf_append(&body, ptr[j], (size_t)len[j]);
      }
      while (body.len % 8) iw_buf_append(&body, NULL, 1);
    }
  }

  struct iw_buf meta = {0};
  size_t at[4], rat[4];
  size_t header = message_begin(&meta, o, 3, (int64_t)body.len, at);
  int compressed = o && o->compression;
  struct slot rs[4] = {{S_I64, length}, {S_REF, 0}, {S_REF, 0}, {compressed ? S_REF : S_ABSENT, 0}};
  size_t t = fb_table(&meta, 4, rs, rat);
  fb_patch(&meta, header, t);
  size_t nodes = fb_vector(&meta, (uint32_t)n_nodes, 16, 8);
  fb_patch(&meta, rat[1], nodes);
  for (int i = 0; i < n_nodes; i++) {
    put64(meta.data + nodes + 4 + 16 * (size_t)i, (uint64_t)cols[i].length);
    put64(meta.data + nodes + 12 + 16 * (size_t)i, (uint64_t)cols[i].null_count);
  }
  size_t buffers = fb_vector(&meta, (uint32_t)n_buffers, 16, 8);
  fb_patch(&meta, rat[2], buffers);
  for (int j = 0; j < n_buffers; j++) {
    put64(meta.data + buffers + 4 + 16 * (size_t)j, (uint64_t)boff[2 * j]);
    put64(meta.data + buffers + 12 + 16 * (size_t)j, (uint64_t)boff[2 * j + 1]);
  }
  size_t cat[2] = {0, 0};
  if (compressed) {
    struct slot cs[2] = {{S_U8, o->compression - 1}, {S_U8, 0}};
    fb_patch(&meta, rat[3], fb_table(&meta, 2, cs, cat));
  }
  struct iw_layout l = {0};
  l.codec_field = cat[0];
  l.method_field = cat[1];
  l.length_field = rat[0];
  l.nodes = nodes + 4;
  l.buffers = buffers + 4;
  message_frame(out, &meta, body.data, body.len, o, at, &l);
  if (layout != NULL) *layout = l;
  iw_buf_free(&meta);
  iw_buf_free(&body);
  free(boff);
  free(node);
}

void iw_dictionary_message(struct iw_buf *out, const struct iw_options *o,
                           struct iw_layout *layout) {
  struct iw_buf meta = {0};
  size_t at[4], dat[3], rat[3];
  size_t header = message_begin(&meta, o, 2, 0, at);
  struct slot ds[3] = {{S_I64, 0}, {S_REF, 0}, {S_U8, 0}};
  size_t d = fb_table(&meta, 3, ds, dat);
  fb_patch(&meta, header, d);
  struct slot rs[3] = {{S_I64, 0}, {S_REF, 0}, {S_REF, 0}};
  size_t r = fb_table(&meta, 3, rs, rat);
  fb_patch(&meta, dat[1], r);
  fb_patch(&meta, rat[1], fb_vector(&meta, 0, 16, 8));
  fb_patch(&meta, rat[2], fb_vector(&meta, 0, 16, 8));
  struct iw_layout l = {0};
  message_frame(out, &meta, NULL, 0, o, at, &l);
  if (layout != NULL) *layout = l;
  iw_buf_free(&meta);
}

void iw_eos(struct iw_buf *out, const struct iw_options *o) {
  uint8_t eos[8];
  put32(eos, 0xFFFFFFFFu);
  put32(eos + 4, 0);
  if (o && o->legacy) iw_buf_append(out, eos + 4, 4);
  else iw_buf_append(out, eos, 8);
}

static const char arrow_magic[6] = {'A', 'R', 'R', 'O', 'W', '1'};

void iw_file_begin(struct iw_buf *out) {
  iw_buf_append(out, arrow_magic, 6);
  iw_buf_append(out, NULL, 2);
}

void iw_file_end(struct iw_buf *out, const struct iw_schema *s, const struct iw_layout *batches,
                 int n_batches) {
  while (out->len % 8) iw_buf_append(out, NULL, 1);
  struct iw_buf fb = {0};
  size_t root = buf_alloc(&fb, 4, 4);
  size_t at[4];
  struct slot fs[4] = {{S_I16, 4}, {S_REF, 0}, {S_REF, 0}, {S_REF, 0}};
  size_t t = fb_table(&fb, 4, fs, at);
  fb_patch(&fb, root, t);
  schema_table(&fb, at[1], s, NULL);
  fb_patch(&fb, at[2], fb_vector(&fb, 0, 24, 8));
  size_t blocks = fb_vector(&fb, (uint32_t)n_batches, 24, 8);
  fb_patch(&fb, at[3], blocks);
  for (int i = 0; i < n_batches; i++) {
    /* Block {offset: long, metaDataLength: int, (4 bytes padding), bodyLength: long} */
    uint8_t *p = fb.data + blocks + 4 + 24 * (size_t)i;
    put64(p, (uint64_t)batches[i].message);
    put32(p + 8, (uint32_t)(batches[i].body - batches[i].message));
    put64(p + 16, (uint64_t)batches[i].body_length);
  }
  iw_buf_append(out, fb.data, fb.len);
  uint8_t size[4];
  put32(size, (uint32_t)fb.len);
  iw_buf_append(out, size, 4);
  iw_buf_append(out, arrow_magic, 6);
  iw_buf_free(&fb);
}

/* ------------------------------------------------------------ test tables */

void iw_col_random(struct iw_col *c, const struct iw_field *f, int64_t rows, int null_permille,
                   uint64_t *rng) {
  memset(c, 0, sizeof(*c));
  c->field = *f;
  c->rows = rows;
  size_t n = (size_t)rows;
  c->valid = xrealloc(NULL, n);
  for (size_t r = 0; r < n; r++)
    c->valid[r] = !f->nullable || (int)check_rand_below(rng, 1000) >= null_permille;
  if (iw_offset_width(f)) {
    c->ends = xrealloc(NULL, n * sizeof(int64_t));
    int64_t total = 0;
    for (size_t r = 0; r < n; r++) {
      /* nulls are mostly empty, as writers make them, but not always */
      int64_t len = (int64_t)check_rand_below(rng, 9);
      if (!c->valid[r] && check_rand_below(rng, 4) != 0) len = 0;
      total += len;
      c->ends[r] = total;
    }
    c->chars = xrealloc(NULL, (size_t)total);
    for (int64_t i = 0; i < total; i++) c->chars[i] = (uint8_t)('a' + check_rand_below(rng, 26));
  } else if (f->type == FUNNEL_TYPE_BOOL) {
    c->values = xrealloc(NULL, n);
    for (size_t r = 0; r < n; r++) c->values[r] = (uint8_t)(check_rand(rng) & 1);
  } else {
    size_t bytes = n * (size_t)iw_value_width(f);
    c->values = xrealloc(NULL, bytes);
    for (size_t i = 0; i < bytes; i++) c->values[i] = (uint8_t)check_rand(rng);
  }
}

void iw_col_free(struct iw_col *c) {
  free(c->valid);
  free(c->values);
  free(c->ends);
  free(c->chars);
  memset(c, 0, sizeof(*c));
}

static uint64_t pick(const struct iw_encode *e, uint64_t n) {
  return e->rng ? check_rand_below(e->rng, n) : 0;
}

/* A bitmap of bits[r0, r1) (one byte per bit in `bits`), with junk or
 * zeros after the last bit. */
static uint8_t *bitmap(const uint8_t *bits, int64_t r0, int64_t r1, const struct iw_encode *e,
                       int64_t *size) {
  int64_t n = r1 - r0;
  *size = (n + 7) / 8;
  uint8_t *p = xrealloc(NULL, (size_t)*size);
  for (int64_t i = 0; i < *size; i++)
    p[i] = e->junk_padding && e->rng ? (uint8_t)check_rand(e->rng) : 0;
  for (int64_t r = 0; r < n; r++) {
    uint8_t mask = (uint8_t)(1u << (r % 8));
    if (bits == NULL || bits[r0 + r]) p[r / 8] |= mask;
    else p[r / 8] &= (uint8_t)~mask;
  }
  return p;
}

void iw_batch_from_cols(struct iw_buf *out, const struct iw_schema *s, const struct iw_col *cols,
                        int64_t r0, int64_t r1, const struct iw_encode *e_in,
                        const struct iw_options *o) {
  static const struct iw_encode none = {0};
  const struct iw_encode *e = e_in ? e_in : &none;
  const int64_t n = r1 - r0;
  struct iw_column *ic = xrealloc(NULL, sizeof(*ic) * (size_t)(s->n_fields ? s->n_fields : 1));
  void **owned = xrealloc(NULL, sizeof(void *) * 3 * (size_t)(s->n_fields ? s->n_fields : 1));
  int n_owned = 0;
  for (int i = 0; i < s->n_fields; i++) {
    const struct iw_col *c = &cols[i];
    const struct iw_field *f = &s->fields[i];
    struct iw_column *x = &ic[i];
    memset(x, 0, sizeof(*x));
    x->length = n;
    for (int64_t r = r0; r < r1; r++) x->null_count += !c->valid[r];
    if (x->null_count > 0 || (e->vary && pick(e, 2))) {
      uint8_t *v = bitmap(x->null_count > 0 ? c->valid : NULL, r0, r1, e, &x->validity_length);
      x->validity = owned[n_owned++] = v;
    }
    const int ow = iw_offset_width(f);
    if (ow) {
      int64_t base = e->offset_base + (e->vary ? (int64_t)pick(e, 10) : 0);
      int64_t first = iw_col_start(c, r0), last = r1 > r0 ? c->ends[r1 - 1] : first;
      int64_t tail = e->vary ? (int64_t)pick(e, 5) : 0;
      uint8_t *data = xrealloc(NULL, (size_t)(base + (last - first) + tail));
      for (int64_t j = 0; j < base; j++) data[j] = (uint8_t)('A' + pick(e, 26));
      memcpy(data + base, c->chars + first, (size_t)(last - first));
      for (int64_t j = 0; j < tail; j++) data[base + (last - first) + j] = '#';
      x->data = owned[n_owned++] = data;
      x->data_length = base + (last - first) + tail;
      if (n == 0 && e->vary && pick(e, 2)) continue; /* an empty offsets buffer */
      uint8_t *offs = xrealloc(NULL, (size_t)((n + 1) * ow));
      for (int64_t k = 0; k <= n; k++) {
        int64_t v = base + (k == 0 ? 0 : c->ends[r0 + k - 1] - first);
        if (ow == 4) put32(offs + 4 * k, (uint32_t)v);
        else put64(offs + 8 * k, (uint64_t)v);
      }
      x->offsets = owned[n_owned++] = offs;
      x->offsets_length = (n + 1) * ow;
    } else if (f->type == FUNNEL_TYPE_BOOL) {
      x->data = owned[n_owned++] = bitmap(c->values, r0, r1, e, &x->data_length);
    } else {
      int w = iw_value_width(f);
      x->data = c->values + r0 * w;
      x->data_length = n * w;
    }
  }
  iw_batch_message(out, s, n, ic, o, e->layout);
  for (int i = 0; i < n_owned; i++) free(owned[i]);
  free(owned);
  free(ic);
}
