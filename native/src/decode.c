/* decode.c: compressed record batch bodies (format.h, "decode.c").
 *
 * The codecs are the reference libraries, liblz4 and libzstd, loaded the
 * first time a read meets their codec (dlopen, as libcuda is), through the
 * few entry points of their stable API declared here: funnel builds
 * without their headers, and a host without them reads every uncompressed
 * partition as before. LZ4 frames are decoded with the frame API, which
 * checks the block and content checksums a frame carries; ZSTD frames
 * (several may follow each other) with a decompression context. Both
 * write straight into the buffer's place in the image, never past the
 * length the prefix declares. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatbuf.h"
#include "format.h"
#include "lz4dec.h"

/* --------------------------------------------------------------- libraries */

#define LZ4F_VERSION 100 /* lz4frame.h: the frame API's version */

typedef struct {
  unsigned stable_dst; /* the output stays where it was between calls */
  unsigned skip_checksums;
  unsigned reserved1, reserved0;
} lz4f_decompress_options;

struct lz4_api {
  /* the block API: frames without checksums are walked here and their
   * blocks decoded straight into place (lz4_plain) */
  int (*block)(const char *src, char *dst, int n, int cap);
  int (*block_dict)(const char *src, char *dst, int n, int cap, const char *dict, int dict_size);
  size_t (*create)(void **dctx, unsigned version);
  size_t (*free)(void *dctx);
  void (*reset)(void *dctx);
  size_t (*decompress)(void *dctx, void *dst, size_t *dst_size, const void *src,
                       size_t *src_size, const lz4f_decompress_options *options);
  unsigned (*is_error)(size_t code);
  const char *(*error_name)(size_t code);
};

struct zstd_api {
  void *(*create)(void);
  size_t (*free)(void *dctx);
  size_t (*decompress)(void *dctx, void *dst, size_t cap, const void *src, size_t n);
  unsigned (*is_error)(size_t code);
  const char *(*error_name)(size_t code);
};

static struct {
  pthread_once_t once;
  bool ok;
  char why[160];
} loaded[2] = {{PTHREAD_ONCE_INIT, false, ""}, {PTHREAD_ONCE_INIT, false, ""}};
static struct lz4_api lz4;
static struct zstd_api zstd;

/* The libraries' files; FUNNEL_LZ4_LIBRARY and FUNNEL_ZSTD_LIBRARY name
 * others (a path, or a soname the loader finds). */
static const char *const library_default[2] = {"liblz4.so.1", "libzstd.so.1"};
static const char *const library_env[2] = {"FUNNEL_LZ4_LIBRARY", "FUNNEL_ZSTD_LIBRARY"};
static const char *library[2] = {"liblz4.so.1", "libzstd.so.1"};

/* Resolves `names` into the function pointers at `fns`; false naming the
 * first missing one in `why`. */
static bool resolve(void *lib, const char *const *names, void **fns, int n, int codec) {
  for (int i = 0; i < n; i++) {
    if ((fns[i] = dlsym(lib, names[i])) == NULL) {
      snprintf(loaded[codec].why, sizeof(loaded[codec].why), "%s has no %s", library[codec],
               names[i]);
      return false;
    }
  }
  return true;
}

static void load(int codec) {
  const char *name = getenv(library_env[codec]);
  library[codec] = name != NULL && name[0] != '\0' ? name : library_default[codec];
  void *lib = dlopen(library[codec], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *e = dlerror();
    snprintf(loaded[codec].why, sizeof(loaded[codec].why), "%s could not be loaded (%s)",
             library[codec], e != NULL ? e : "not found");
    return;
  }
  bool ok;
  if (codec == FUNNEL__CODEC_LZ4_FRAME) {
    static const char *const names[] = {
        "LZ4F_createDecompressionContext", "LZ4F_freeDecompressionContext",
        "LZ4F_resetDecompressionContext", "LZ4F_decompress", "LZ4F_isError",
        "LZ4F_getErrorName", "LZ4_decompress_safe", "LZ4_decompress_safe_usingDict"};
    void *fns[8];
    ok = resolve(lib, names, fns, 8, codec);
    if (ok) {
      *(void **)&lz4.create = fns[0];
      *(void **)&lz4.free = fns[1];
      *(void **)&lz4.reset = fns[2];
      *(void **)&lz4.decompress = fns[3];
      *(void **)&lz4.is_error = fns[4];
      *(void **)&lz4.error_name = fns[5];
      *(void **)&lz4.block = fns[6];
      *(void **)&lz4.block_dict = fns[7];
    }
  } else {
    static const char *const names[] = {"ZSTD_createDCtx", "ZSTD_freeDCtx",
                                        "ZSTD_decompressDCtx", "ZSTD_isError",
                                        "ZSTD_getErrorName"};
    void *fns[5];
    ok = resolve(lib, names, fns, 5, codec);
    if (ok) {
      *(void **)&zstd.create = fns[0];
      *(void **)&zstd.free = fns[1];
      *(void **)&zstd.decompress = fns[2];
      *(void **)&zstd.is_error = fns[3];
      *(void **)&zstd.error_name = fns[4];
    }
  }
  /* kept loaded for the process's life, as libcuda is */
  if (!ok) dlclose(lib);
  loaded[codec].ok = ok;
}

static void load_lz4(void) { load(FUNNEL__CODEC_LZ4_FRAME); }
static void load_zstd(void) { load(FUNNEL__CODEC_ZSTD); }

int funnel__codec_load(int codec, char *why, size_t why_size) {
  if (codec != FUNNEL__CODEC_LZ4_FRAME && codec != FUNNEL__CODEC_ZSTD) {
    snprintf(why, why_size, "unknown codec %d", codec);
    return FUNNEL_ERR_UNSUPPORTED;
  }
  pthread_once(&loaded[codec].once, codec == FUNNEL__CODEC_ZSTD ? load_zstd : load_lz4);
  if (loaded[codec].ok) return FUNNEL_OK;
  snprintf(why, why_size, "%s", loaded[codec].why);
  return FUNNEL_ERR_UNSUPPORTED;
}

const char *funnel__codec_name(int codec) {
  return codec == FUNNEL__CODEC_LZ4_FRAME ? "LZ4_FRAME"
         : codec == FUNNEL__CODEC_ZSTD    ? "ZSTD"
                                          : "uncompressed";
}

int64_t funnel__codec_max_decoded(int codec, int64_t n) {
  return funnel__max_decoded(codec == FUNNEL__CODEC_LZ4_FRAME ? 0 : 1, n);
}

/* Contexts given back, for the next task to take: an LZ4 context of 4 MiB
 * blocks allocates 8 MiB of buffers, whose page faults cost more than a
 * small buffer's decoding. At most POOLED of each kind are kept (the host
 * threads and a few callers), for the process's life. */
#define POOLED 32
static struct {
  pthread_mutex_t mu;
  void *lz4[POOLED], *zstd[POOLED];
  int n_lz4, n_zstd;
} pool = {PTHREAD_MUTEX_INITIALIZER, {NULL}, {NULL}, 0, 0};

static void *pool_take(void **slots, int *n) {
  pthread_mutex_lock(&pool.mu);
  void *c = *n > 0 ? slots[--*n] : NULL;
  pthread_mutex_unlock(&pool.mu);
  return c;
}

/* Keeps c when there is room; false: the caller frees it. */
static bool pool_give(void **slots, int *n, void *c) {
  pthread_mutex_lock(&pool.mu);
  const bool kept = *n < POOLED;
  if (kept) slots[(*n)++] = c;
  pthread_mutex_unlock(&pool.mu);
  return kept;
}

void funnel__decoder_free(struct funnel__decoder *d) {
  if (d->lz4 != NULL && !pool_give(pool.lz4, &pool.n_lz4, d->lz4)) lz4.free(d->lz4);
  if (d->zstd != NULL && !pool_give(pool.zstd, &pool.n_zstd, d->zstd)) zstd.free(d->zstd);
  d->lz4 = d->zstd = NULL;
}

/* ------------------------------------------------------------------ decode */

/* Frames without block or content checksums (lz4-java's in Spark, Arrow
 * C++'s) decoded by liblz4's block API, straight into place: no context,
 * no copy through a frame buffer. True when every frame was such a frame
 * and the buffer decoded to exactly `want` bytes; false otherwise, and
 * the frame API then decodes the buffer (it verifies the checksums, and
 * names what is wrong). The frame descriptor's own checksum byte is not
 * verified here (funnel__lz4_frame_read); every field of it is checked. */
static bool lz4_plain(uint8_t *dst, int64_t want, const uint8_t *src, int64_t n) {
  int64_t ip = 0, op = 0;
  while (ip < n) {
    struct funnel__lz4_frame f;
    if (funnel__lz4_frame_read(src + ip, n - ip, &f) != FUNNEL__LZ4_OK || f.block_sum ||
        f.content_sum)
      return false;
    ip += f.header;
    const int64_t frame_start = op;
    int64_t at, size;
    int stored, more;
    while ((more = funnel__lz4_block_next(src, n, &f, &ip, &at, &size, &stored)) > 0) {
      const int64_t room = want - op < f.block_max ? want - op : f.block_max;
      int got;
      if (stored) {
        if (size > room) return false;
        memcpy(dst + op, src + at, (size_t)size);
        got = (int)size;
      } else if (f.independent || op == frame_start) {
        got = lz4.block((const char *)src + at, (char *)dst + op, (int)size, (int)room);
      } else {
        const int64_t dict = op - frame_start < 65536 ? op - frame_start : 65536;
        got = lz4.block_dict((const char *)src + at, (char *)dst + op, (int)size, (int)room,
                             (const char *)dst + op - dict, (int)dict);
      }
      if (got < 0) return false;
      op += got;
    }
    if (more < 0) return false;
    if (f.content >= 0 && op - frame_start != f.content) return false;
  }
  return op == want;
}

static bool decode_lz4_frames(struct funnel__decoder *d, uint8_t *dst, int64_t want,
                              const uint8_t *src, int64_t n, char *why, size_t why_size);

/* Decodes n bytes of frames into exactly `want` bytes at dst; false with
 * `why` filled when they are corrupt or decode to another length. A
 * context whose frame failed is freed, not kept for the next: liblz4
 * 1.9.4's reset leaves the failed frame's remaining content size, and the
 * next frame without one then fails (ERROR_frameSize_wrong), a good one
 * (the fuzz harness found it; test_compress). */
static bool decode_lz4(struct funnel__decoder *d, uint8_t *dst, int64_t want, const uint8_t *src,
                       int64_t n, char *why, size_t why_size) {
  if (lz4_plain(dst, want, src, n)) return true;
  const bool ok = decode_lz4_frames(d, dst, want, src, n, why, why_size);
  if (!ok && d->lz4 != NULL) {
    lz4.free(d->lz4);
    d->lz4 = NULL;
  }
  return ok;
}

/* decode_lz4 by liblz4's frame API, which verifies the checksums. */
static bool decode_lz4_frames(struct funnel__decoder *d, uint8_t *dst, int64_t want,
                              const uint8_t *src, int64_t n, char *why, size_t why_size) {
  if (d->lz4 == NULL) d->lz4 = pool_take(pool.lz4, &pool.n_lz4);
  if (d->lz4 == NULL && lz4.is_error(lz4.create(&d->lz4, LZ4F_VERSION))) {
    d->lz4 = NULL;
    snprintf(why, why_size, "out of host memory for an LZ4 context");
    return false;
  }
  lz4.reset(d->lz4); /* after a frame that failed part way */
  const lz4f_decompress_options opt = {.stable_dst = 1};
  size_t left = (size_t)want, in = (size_t)n, hint = 1;
  while (in > 0) {
    size_t d_size = left, s_size = in;
    hint = lz4.decompress(d->lz4, dst, &d_size, src, &s_size, &opt);
    if (lz4.is_error(hint)) {
      snprintf(why, why_size, "corrupt LZ4 frame at byte %lld of %lld: %s",
               (long long)(n - (int64_t)in), (long long)n, lz4.error_name(hint));
      return false;
    }
    dst += d_size;
    left -= d_size;
    src += s_size;
    in -= s_size;
    if (d_size == 0 && s_size == 0) {
      snprintf(why, why_size, "LZ4 frame decodes to more than the %lld bytes declared",
               (long long)want);
      return false;
    }
  }
  if (hint != 0) {
    snprintf(why, why_size, "LZ4 frame ends early: %lld bytes hold no whole frame",
             (long long)n);
    return false;
  }
  if (left != 0) {
    snprintf(why, why_size, "LZ4 frame decodes to %lld bytes, not the %lld declared",
             (long long)(want - (int64_t)left), (long long)want);
    return false;
  }
  return true;
}

static bool decode_zstd(struct funnel__decoder *d, uint8_t *dst, int64_t want,
                        const uint8_t *src, int64_t n, char *why, size_t why_size) {
  if (d->zstd == NULL) d->zstd = pool_take(pool.zstd, &pool.n_zstd);
  if (d->zstd == NULL && (d->zstd = zstd.create()) == NULL) {
    snprintf(why, why_size, "out of host memory for a ZSTD context");
    return false;
  }
  const size_t got = zstd.decompress(d->zstd, dst, (size_t)want, src, (size_t)n);
  if (zstd.is_error(got)) {
    snprintf(why, why_size, "corrupt ZSTD frame (%lld bytes, %lld declared): %s", (long long)n,
             (long long)want, zstd.error_name(got));
    return false;
  }
  if ((int64_t)got != want) {
    snprintf(why, why_size, "ZSTD frame decodes to %lld bytes, not the %lld declared",
             (long long)got, (long long)want);
    return false;
  }
  return true;
}

int funnel__buffer_column(const struct funnel__schema *schema, int32_t n_buffers, int32_t k,
                          const char **kind) {
  *kind = "";
  if (schema == NULL) return -1;
  int32_t at = 0, col = -1, j = 0;
  for (int i = 0; i < schema->n_fields; i++) {
    const int nb = schema->fields[i].n_buffers;
    if (col < 0 && k < at + nb) {
      col = i;
      j = k - at;
    }
    at += nb;
  }
  if (at != n_buffers || col < 0) return -1;
  *kind = j == 0 ? "validity" : funnel__buffer_holds_values(&schema->fields[col], j) ? "data"
                                                                                     : "offsets";
  return col;
}

bool funnel__buffer_holds_values(const struct funnel__field *f, int j) {
  return j == 2 || (j == 1 && f->n_buffers == 2 && f->nested != FUNNEL__NESTED_LIST);
}

/* Decodes buffer k (as given: body at `body`, Buffer structs `buffers`
 * of the bytes at `bytes`) into dst. */
static int decode_one(const struct funnel__schema *schema, const struct funnel__batch *b,
                      const uint8_t *bytes, int64_t body, const uint8_t *buffers,
                      int64_t index, int32_t k, uint8_t *dst, int64_t want,
                      struct funnel__decoder *dec, struct funnel_error *error) {
  const int64_t off = (int64_t)funnel__ld64(buffers + 16 * k);
  const int64_t len = (int64_t)funnel__ld64(buffers + 16 * k + 8);
  if (len == 0) return FUNNEL_OK;
  const uint8_t *src = bytes + body + off;
  const uint8_t *z = src + 8;
  const int64_t zn = len - 8;
  char why[200];
  bool ok = true;
  if ((int64_t)funnel__ld64(src) == -1) memcpy(dst, z, (size_t)zn);
  else if (want == 0 && zn == 0) ok = true; /* empty: the prefix alone (Arrow Java) */
  else if (b->codec == FUNNEL__CODEC_LZ4_FRAME)
    ok = decode_lz4(dec, dst, want, z, zn, why, sizeof(why));
  else
    ok = decode_zstd(dec, dst, want, z, zn, why, sizeof(why));
  if (ok) return FUNNEL_OK;
  const char *kind;
  const int col = funnel__buffer_column(schema, b->n_buffers, k, &kind);
  char what[96];
  if (col >= 0)
    snprintf(what, sizeof(what), "column %d '%s', buffer %d (%s)", col, schema->fields[col].path,
             k, kind);
  else
    snprintf(what, sizeof(what), "buffer %d", k);
  return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, col, body + off,
                           "partition %lld: RecordBatch at offset %lld, %s at offset %lld: %s",
                           (long long)index, (long long)b->message_offset, what,
                           (long long)(body + off), why);
}

static int codec_ready(const struct funnel__batch *b, int64_t index, struct funnel_error *error) {
  char why[200];
  if (funnel__codec_load(b->codec, why, sizeof(why)) == FUNNEL_OK) return FUNNEL_OK;
  return funnel__error_set(error, FUNNEL_ERR_UNSUPPORTED, index, -1, b->message_offset,
                           "partition %lld: RecordBatch at offset %lld has a %s body, and %s",
                           (long long)index, (long long)b->message_offset,
                           funnel__codec_name(b->codec), why);
}

int funnel__batch_decode(const struct funnel__schema *schema,
                         const struct funnel__partition *part,
                         const struct funnel__batch *b, int64_t index, uint8_t *image,
                         int32_t lo, int32_t hi, struct funnel__decoder *dec,
                         struct funnel_error *error) {
  uint8_t *body = image + b->dbody;
  if (b->codec == FUNNEL__CODEC_NONE) {
    if (lo == 0 && b->body_length > 0)
      memcpy(body, part->bytes + b->body, (size_t)b->body_length);
    return FUNNEL_OK;
  }
  FUNNEL_RETURN_NOT_OK(codec_ready(b, index, error));
  for (int32_t k = lo; k < hi; k++) {
    if (b->ddev != NULL && b->ddev[k]) continue; /* the device's */
    const int64_t at = (int64_t)funnel__ld64(b->dbuffers + 16 * k);
    const int64_t want = (int64_t)funnel__ld64(b->dbuffers + 16 * k + 8);
    FUNNEL_RETURN_NOT_OK(decode_one(schema, b, part->bytes, b->body, b->buffers, index, k,
                                    body + at, want, dec, error));
  }
  return FUNNEL_OK;
}

int funnel__buffer_decode(const struct funnel__schema *schema,
                          const struct funnel__partition *part, const struct funnel__batch *b,
                          int64_t index, int32_t k, uint8_t *dst, struct funnel__decoder *dec,
                          struct funnel_error *error) {
  FUNNEL_RETURN_NOT_OK(codec_ready(b, index, error));
  const bool given = !part->decoded;
  return decode_one(schema, b, given ? part->bytes : part->source, given ? b->body : b->sbody,
                    given ? b->buffers : b->sbuffers, index, k, dst,
                    (int64_t)funnel__ld64(b->dbuffers + 16 * k + 8), dec, error);
}

void funnel__partition_use_image(struct funnel__partition *part, uint8_t *image) {
  for (int64_t i = 0; i < part->n_batches; i++) {
    struct funnel__batch *b = &part->batches[i];
    b->sbody = b->body;
    b->sbuffers = b->buffers;
    b->body = b->dbody;
    b->body_length = b->dbody_length;
    b->buffers = b->dbuffers;
  }
  part->source = part->bytes;
  part->source_length = part->length;
  part->bytes = image;
  part->length = part->image_length;
  part->decoded = true;
}

void funnel__decoded_error(const struct funnel__partition *parts, int64_t count,
                           struct funnel_error *error) {
  if (parts == NULL || error == NULL || error->partition < 0 || error->partition >= count) return;
  const struct funnel__partition *part = &parts[error->partition];
  const int64_t at = error->offset;
  if (!part->decoded || at < 0) return;
  /* the buffer whose bytes as decoded hold the offset (the device's lie
   * past the images) */
  for (int64_t i = 0; i < part->n_batches; i++) {
    const struct funnel__batch *b = &part->batches[i];
    for (int32_t k = 0; k < b->n_buffers; k++) {
      const int64_t start = b->dbody + (int64_t)funnel__ld64(b->dbuffers + 16 * k);
      const int64_t len = (int64_t)funnel__ld64(b->dbuffers + 16 * k + 8);
      if (at < start || at > start + len) continue;
      const int64_t given = b->sbody + (int64_t)funnel__ld64(b->sbuffers + 16 * k);
      const size_t used = strlen(error->message);
      snprintf(error->message + used, sizeof(error->message) - used,
               " (byte %lld of buffer %d as decoded; the %s buffer is at offset %lld)",
               (long long)(at - start), k, funnel__codec_name(b->codec), (long long)given);
      error->offset = given;
      return;
    }
  }
}

int funnel__partition_decode(const struct funnel__schema *schema,
                             struct funnel__partition *part, int64_t index, uint8_t *image,
                             struct funnel__decoder *dec, struct funnel_error *error) {
  for (int64_t i = 0; i < part->n_batches; i++)
    FUNNEL_RETURN_NOT_OK(funnel__batch_decode(schema, part, &part->batches[i], index, image, 0,
                                              part->batches[i].n_buffers, dec, error));
  funnel__partition_use_image(part, image);
  return FUNNEL_OK;
}
