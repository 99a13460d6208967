/* parse.c: a read's first phase: every partition's IPC headers parsed into
 * views (format.c does one partition), on the shared host threads when
 * there are many, in tasks of consecutive partitions, each with an arena
 * of its own; then compressed partitions decoded (decode.c does one) into
 * images the views then point to. Host only. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "flatbuf.h"
#include "lz4dec.h"
#include "zstddec.h"
#include "read.h"
#include "workers.h"

#define OUT_OF_MEMORY(error) FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory")

struct parse_job {
  const struct funnel_partition *parts;
  const struct funnel__schema *known;
  struct funnel__partition *pv;
  int64_t first, count;         /* the partitions of the parallel part */
  int64_t per_task;             /* partitions a task */
  struct funnel__arena *arenas; /* one a task */
  struct funnel_error *errors;  /* one a task */
  int64_t *bad;                 /* a task's failing partition, or -1 */
  bool *compressed;             /* a task's partitions have compressed batches */
};

static int parse_one(const struct funnel_partition *part, size_t i,
                     const struct funnel__schema *known, struct funnel__arena *arena,
                     struct funnel__partition *out, struct funnel_error *error) {
  if (part->length == 0) return FUNNEL_OK;
  if (part->data == NULL || part->length > INT64_MAX)
    return funnel__error_set(error, FUNNEL_ERR_INVALID_ARGUMENT, (int64_t)i, -1, -1,
                             "partition %zu: NULL data with length %zu", i, part->length);
  return funnel__partition_parse_known(part->data, (int64_t)part->length, (int64_t)i, known,
                                       arena, out, error);
}

static void parse_task(void *ctx, int64_t task) {
  struct parse_job *j = ctx;
  const int64_t end = j->first + j->count;
  const int64_t lo = j->first + task * j->per_task;
  const int64_t hi = lo + j->per_task < end ? lo + j->per_task : end;
  j->bad[task] = -1;
  for (int64_t i = lo; i < hi; i++) {
    if (parse_one(&j->parts[i], (size_t)i, j->known, &j->arenas[task], &j->pv[i],
                  &j->errors[task]) != FUNNEL_OK) {
      j->bad[task] = i;
      return;
    }
    j->compressed[task] |= j->pv[i].image_length > 0;
  }
}

/* Partitions [first, first + n) on the host threads; their arenas join
 * t->arena. */
static int parse_parallel(const struct funnel_partition *parts, int64_t first, int64_t n,
                          const struct funnel__schema *known, struct funnel_table *t,
                          struct funnel__partition *pv, bool *compressed,
                          struct funnel_error *error) {
  /* at most FUNNEL__PARSE_TASKS_MAX tasks: each has an arena, whose
   * first block a few partitions would leave mostly unused */
  int64_t per_task = (n + FUNNEL__PARSE_TASKS_MAX - 1) / FUNNEL__PARSE_TASKS_MAX;
  if (per_task < FUNNEL__PARSE_TASK) per_task = FUNNEL__PARSE_TASK;
  const int64_t tasks = (n + per_task - 1) / per_task;
  struct parse_job j = {.parts = parts, .known = known, .pv = pv, .first = first, .count = n,
                        .per_task = per_task,
                        .arenas = calloc((size_t)tasks, sizeof(struct funnel__arena)),
                        .errors = calloc((size_t)tasks, sizeof(struct funnel_error)),
                        .bad = calloc((size_t)tasks, sizeof(int64_t)),
                        .compressed = calloc((size_t)tasks, sizeof(bool))};
  int st = FUNNEL_OK;
  if (j.arenas == NULL || j.errors == NULL || j.bad == NULL || j.compressed == NULL) {
    st = FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  } else {
    funnel__parallel_for(tasks, parse_task, &j);
    for (int64_t k = 0; k < tasks; k++) {
      funnel__arena_splice(&t->arena, &j.arenas[k]);
      *compressed |= j.compressed[k];
      if (st == FUNNEL_OK && j.bad[k] >= 0) {
        st = j.errors[k].code;
        if (error != NULL) *error = j.errors[k];
      }
    }
  }
  free(j.arenas);
  free(j.errors);
  free(j.bad);
  free(j.compressed);
  return st;
}

int funnel__parse_all(const struct funnel_partition *parts, size_t count,
                      const struct funnel__schema *known, struct funnel_table *t,
                      struct funnel__partition **out, bool *compressed,
                      struct funnel_error *error) {
  *compressed = false;
  struct funnel__partition *pv = funnel__arena_calloc(&t->arena, count ? count : 1, sizeof(*pv));
  if (pv == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  /* without the reader's schema, the first partition that has one gives it
   * (the others repeat it, which parse_known then checks with a memcmp) */
  size_t i = 0;
  for (; i < count && (known == NULL || count - i < FUNNEL__PARSE_PARALLEL_MIN); i++) {
    FUNNEL_RETURN_NOT_OK(parse_one(&parts[i], i, known, &t->arena, &pv[i], error));
    *compressed |= pv[i].image_length > 0;
    if (known == NULL && parts[i].length > 0 && (known = pv[i].schema) != NULL)
      funnel__partition_bind(known, &pv[i], (int64_t)i, &t->arena); /* as the others are */
  }
  if (i < count)
    FUNNEL_RETURN_NOT_OK(parse_parallel(parts, (int64_t)i, (int64_t)(count - i), known, t, pv,
                                        compressed, error));
  *out = pv;
  return FUNNEL_OK;
}

/* ----------------------------------------------------------------- decode */

/* A task of funnel__decode_all: whole partitions [lo, hi), or buffers
 * [buf_lo, buf_hi) of batch `batch` of partition lo. */
struct decode_item {
  int64_t lo, hi;
  int64_t batch; /* -1: whole partitions */
  int32_t buf_lo, buf_hi;
};

struct decode_job {
  const struct funnel__schema *schema;
  struct funnel__partition *pv;
  struct funnel__arena *arenas; /* one a task that binds */
  uint8_t *block;
  const int64_t *image_at; /* per partition: where its image lies in block */
  const struct decode_item *items;
  pthread_mutex_t mu;
  int64_t bad[3]; /* the first failure in partition order: partition, batch, buffer */
  struct funnel_error error;
  int st;
};

static bool before(const int64_t a[3], const int64_t b[3]) {
  return a[0] != b[0] ? a[0] < b[0] : a[1] != b[1] ? a[1] < b[1] : a[2] < b[2];
}

static void decode_task(void *ctx, int64_t i) {
  struct decode_job *j = ctx;
  const struct decode_item *it = &j->items[i];
  struct funnel__decoder dec = {0};
  struct funnel_error e;
  int64_t at[3] = {it->lo, it->batch < 0 ? 0 : it->batch, it->batch < 0 ? 0 : it->buf_lo};
  int st = FUNNEL_OK;
  if (it->batch >= 0) {
    struct funnel__partition *p = &j->pv[it->lo];
    st = funnel__batch_decode(j->schema, p, &p->batches[it->batch], it->lo,
                              j->block + j->image_at[it->lo], it->buf_lo, it->buf_hi, &dec, &e);
  } else {
    for (int64_t k = it->lo; k < it->hi && st == FUNNEL_OK; k++) {
      struct funnel__partition *p = &j->pv[k];
      if (p->image_length == 0) continue;
      at[0] = k;
      st = funnel__partition_decode(j->schema, p, k, j->block + j->image_at[k], &dec, &e);
      if (st == FUNNEL_OK && j->schema != NULL) funnel__partition_bind(j->schema, p, k, &j->arenas[i]);
    }
  }
  funnel__decoder_free(&dec);
  if (st == FUNNEL_OK) return;
  pthread_mutex_lock(&j->mu);
  if (j->st == FUNNEL_OK || before(at, j->bad)) {
    j->st = st;
    j->error = e;
    memcpy(j->bad, at, sizeof(at));
  }
  pthread_mutex_unlock(&j->mu);
}

/* What decoding a partition costs, in bytes: its image's, and a frame
 * about as much as a few KiB of its bytes (small buffers count by their
 * number). */
static int64_t decode_weight(const struct funnel__partition *part) {
  int64_t frames = 0;
  for (int64_t b = 0; b < part->n_batches; b++) frames += part->batches[b].n_buffers;
  return part->image_length + frames * FUNNEL__DECODE_FRAME_BYTES;
}

/* The bytes of a task of a read whose partitions weigh `weight` in all:
 * FUNNEL__DECODE_TASK, or less so that every host thread gets one, but
 * never below FUNNEL__DECODE_TASK_MIN. */
static int64_t decode_task_bytes(int64_t weight) {
  const int64_t share = weight / funnel__host_threads();
  return share >= FUNNEL__DECODE_TASK       ? FUNNEL__DECODE_TASK
         : share <= FUNNEL__DECODE_TASK_MIN ? FUNNEL__DECODE_TASK_MIN
                                            : share;
}

/* The tasks: runs of partitions of at most FUNNEL__DECODE_TASK bytes,
 * about `task` bytes together (decode_task_bytes), a larger partition's
 * batches apart, a larger compressed batch's buffers in runs of about
 * FUNNEL__DECODE_TASK. A partition is split only past FUNNEL__DECODE_TASK
 * whatever `task` is: the parts of one are bound on the calling thread
 * after the loop, and a task of a few small batches would cost its
 * decoder's setup each. `items` NULL: counts them. */
static int64_t decode_items(const struct funnel__partition *pv, size_t count, int64_t task,
                            struct decode_item *items) {
  int64_t n = 0, group = 0;
  for (size_t p = 0; p < count; p++) {
    const struct funnel__partition *part = &pv[p];
    if (part->image_length == 0) continue;
    if (part->image_length <= FUNNEL__DECODE_TASK) {
      if (group == 0) n++;
      if (items != NULL) items[n - 1] = (struct decode_item){
                             group == 0 ? (int64_t)p : items[n - 1].lo, (int64_t)p + 1, -1, 0, 0};
      group += decode_weight(part);
      if (group >= task) group = 0;
      continue;
    }
    group = 0;
    for (int64_t b = 0; b < part->n_batches; b++) {
      const struct funnel__batch *batch = &part->batches[b];
      const int32_t nb = batch->n_buffers;
      int32_t lo = 0;
      int64_t bytes = 0;
      for (int32_t k = 0; k < nb; k++) {
        bytes += (int64_t)funnel__ld64(batch->dbuffers + 16 * k + 8);
        const bool last = k + 1 == nb;
        if (last || (batch->codec != FUNNEL__CODEC_NONE && bytes >= FUNNEL__DECODE_TASK)) {
          if (items != NULL) items[n] = (struct decode_item){(int64_t)p, (int64_t)p + 1, b, lo, k + 1};
          n++;
          lo = k + 1;
          bytes = 0;
        }
      }
    }
  }
  return n;
}

/* Which of a batch's buffers under `schema` hold values (a "data" buffer:
 * not a validity bitmap, not offsets): what no check on the host reads.
 * NULL when the schema has none. */
static uint8_t *value_buffers(const struct funnel__schema *schema, struct funnel__arena *arena,
                              int32_t *n_buffers) {
  int32_t n = 0;
  for (int i = 0; i < schema->n_fields; i++) n += schema->fields[i].n_buffers;
  uint8_t *v = funnel__arena_calloc(arena, (size_t)(n ? n : 1), 1);
  if (v == NULL) return NULL;
  for (int i = 0, k = 0; i < schema->n_fields; k += schema->fields[i].n_buffers, i++)
    for (int j = 0; j < schema->fields[i].n_buffers; j++)
      v[k + j] = funnel__buffer_holds_values(&schema->fields[i], j);
  *n_buffers = n;
  return v;
}

/* The codecs the device decodes in a read (dd_layout), a bit each. */
#define DD_LZ4 (1 << FUNNEL__CODEC_LZ4_FRAME)
#define DD_ZSTD (1 << FUNNEL__CODEC_ZSTD)

/* Whether the device decodes buffer k of batch b: a frame (not raw: -1)
 * of values, in one of the `codecs` it decodes. */
static bool device_buffer(const uint8_t *values, int32_t n_values,
                          const struct funnel__partition *part, const struct funnel__batch *b,
                          int32_t k, int codecs) {
  if (b->codec < 0 || !(codecs & (1 << b->codec)) || b->n_buffers != n_values || !values[k])
    return false;
  const int64_t off = (int64_t)funnel__ld64(b->buffers + 16 * k);
  const int64_t len = (int64_t)funnel__ld64(b->buffers + 16 * k + 8);
  return len > 8 && (int64_t)funnel__ld64(part->bytes + b->body + off) >= 0 &&
         (int64_t)funnel__ld64(b->dbuffers + 16 * k + 8) > 0;
}

/* Whether decoding `bytes` of values on the device pays (FUNNEL_DECODE_AUTO):
 * `jobs` (a block of two warps each for LZ4; a warp each for ZSTD, and for
 * the LZ4 jobs of a read of both codecs; 16 jobs an SM either way), the
 * longest decoding `longest` bytes one sequence after another, and
 * `zbytes` of frames up the link, against the host threads decoding them
 * all and sending the decoded bytes up (tuning.h's rates). A few long
 * buffers take the device longer than the host: 50 blocks of 160 KB are 7
 * ms on the H100 and 0.7 ms on its 16 host threads; and so do many tiny
 * ones, each of which costs the host its layout (tuning.h). */
bool funnel__device_pays(const struct funnel_backend *be, int codec, int64_t bytes,
                         int64_t zbytes, int64_t jobs, int64_t longest) {
  if (bytes < FUNNEL__DEVICE_DECODE_MIN) return false;
  const bool zstd = codec == FUNNEL__CODEC_ZSTD;
  /* jobs at once an SM, and a job's rate in a full wave */
  const int64_t jobs_sm = zstd ? FUNNEL__DEVICE_ZSTD_WARPS_SM : FUNNEL__DEVICE_DECODE_JOBS_SM;
  const double job_bps = zstd ? FUNNEL__DEVICE_ZSTD_WARP_BPS : FUNNEL__DEVICE_DECODE_JOB_BPS;
  const double host_bps = zstd ? FUNNEL__HOST_ZSTD_THREAD_BPS : FUNNEL__HOST_DECODE_THREAD_BPS;
  const int64_t at_once = be->multiprocessors > 0 ? (int64_t)be->multiprocessors * jobs_sm
                                                  : FUNNEL__DEVICE_DECODE_JOBS;
  const double waves = (double)((jobs + at_once - 1) / at_once);
  const double device = (double)longest / job_bps * waves +
                        (double)zbytes / FUNNEL__DECODE_LINK_BPS +
                        (double)jobs * FUNNEL__DEVICE_DECODE_JOB_S;
  const double host = (double)bytes / (funnel__host_threads() * host_bps) +
                      (double)bytes / FUNNEL__DECODE_LINK_BPS;
  return device < host;
}

int funnel__lz4_blocks_split(const struct funnel__partition *pv,
                             const struct funnel__schema *schema) {
  int32_t n = 0; /* the schema's buffers (a batch of others says nothing) */
  for (int i = 0; i < schema->n_fields; i++) n += schema->fields[i].n_buffers;
  for (int64_t b = 0; b < pv->n_batches; b++) {
    const struct funnel__batch *batch = &pv->batches[b];
    if (batch->codec != FUNNEL__CODEC_LZ4_FRAME || n != batch->n_buffers) continue;
    for (int i = 0, k = 0; i < schema->n_fields; i++)
      for (int j = 0; j < schema->fields[i].n_buffers; j++, k++) {
        if (!funnel__buffer_holds_values(&schema->fields[i], j)) continue;
        const int64_t off = (int64_t)funnel__ld64(batch->buffers + 16 * k);
        const int64_t len = (int64_t)funnel__ld64(batch->buffers + 16 * k + 8);
        /* bounds as the parse checked them; a raw (-1) or empty buffer says nothing */
        if (len <= 8 || off < 0 || off > batch->body_length - len) continue;
        const uint8_t *z = pv->bytes + batch->body + off;
        struct funnel__lz4_frame f;
        if ((int64_t)funnel__ld64(z) <= 0 || funnel__lz4_frame_read(z + 8, len - 8, &f) != FUNNEL__LZ4_OK)
          continue;
        return f.independent && f.block_max <= FUNNEL__LZ4_SPLIT_BLOCK_MAX;
      }
  }
  return -1;
}

/* What dd_layout rewrites in the partitions it lays out (their image
 * lengths, their batches' bodies and LZ4 batches' buffer entries), kept so
 * that a read whose block the pinned pool cannot hold goes back to the
 * host's layout. */
struct dd_undo {
  int64_t *v;
  uint8_t *entries;
};

static bool dd_save(struct funnel__arena *arena, const struct funnel__partition *pv,
                    size_t count, struct dd_undo *u) {
  size_t nv = 0, ne = 0;
  for (size_t p = 0; p < count; p++) {
    if (pv[p].image_length == 0) continue;
    nv += 1 + 2 * (size_t)pv[p].n_batches;
    for (int64_t b = 0; b < pv[p].n_batches; b++)
      if (pv[p].batches[b].codec != FUNNEL__CODEC_NONE)
        ne += 16 * (size_t)pv[p].batches[b].n_buffers;
  }
  u->v = funnel__arena_alloc(arena, (nv ? nv : 1) * sizeof(int64_t));
  u->entries = funnel__arena_alloc(arena, ne ? ne : 1);
  if (u->v == NULL || u->entries == NULL) return false;
  for (size_t p = 0, i = 0, e = 0; p < count; p++) {
    if (pv[p].image_length == 0) continue;
    u->v[i++] = pv[p].image_length;
    for (int64_t bi = 0; bi < pv[p].n_batches; bi++) {
      const struct funnel__batch *b = &pv[p].batches[bi];
      u->v[i++] = b->dbody;
      u->v[i++] = b->dbody_length;
      if (b->codec == FUNNEL__CODEC_NONE) continue;
      memcpy(u->entries + e, b->dbuffers, 16 * (size_t)b->n_buffers);
      e += 16 * (size_t)b->n_buffers;
    }
  }
  return true;
}

static void dd_restore(struct funnel__partition *pv, size_t count, const struct dd_undo *u) {
  for (size_t p = 0, i = 0, e = 0; p < count; p++) {
    /* the partitions dd_save kept: dd_layout leaves none of them at 0 */
    if (pv[p].image_length == 0) continue;
    pv[p].image_length = u->v[i++];
    for (int64_t bi = 0; bi < pv[p].n_batches; bi++) {
      struct funnel__batch *b = &pv[p].batches[bi];
      b->dbody = u->v[i++];
      b->dbody_length = u->v[i++];
      if (b->codec == FUNNEL__CODEC_NONE) continue;
      memcpy((uint8_t *)b->dbuffers, u->entries + e, 16 * (size_t)b->n_buffers);
      e += 16 * (size_t)b->n_buffers;
      b->ddev = NULL;
    }
  }
}

/* The device's share of the read, when it decodes one (FUNNEL_OPTION_DECODE):
 * marks its buffers (batch.ddev), lays the host's images out without them
 * (each partition's image_length shrinks), and lays out the block's frames
 * and jobs and the region they decode to (t->dd; dd.up is the block's size),
 * and takes the block from the pinned pool (*block). Returns the block's
 * size; 0 when the device decodes nothing (the partitions as they were:
 * also when the pool cannot hold the block, and the host then decodes
 * every buffer); -1 out of host memory. */
static int64_t dd_layout(struct funnel_table *t, struct funnel__partition *pv, size_t count,
                         const struct funnel__schema *schema, int decode, uint8_t **block) {
  const bool cpu = t->dev->be.arrow_device_type == ARROW_DEVICE_CPU;
  if (decode == FUNNEL_DECODE_HOST || (decode == FUNNEL_DECODE_AUTO && cpu) || schema == NULL)
    return 0;
  /* the codecs the device decodes: AUTO decides each by its own rates */
  int codecs = DD_LZ4 | DD_ZSTD;
  if (decode == FUNNEL_DECODE_AUTO) {
    /* first from what the parse counted, a batch at a time: the device's
     * least cost (a job a frame, none of them long) against the host's.
     * Most reads the host takes are decided here, without the walk below
     * of every frame's blocks on this thread (which cost a read of 50,000
     * small partitions 20 ms) */
    int64_t frames[2] = {0}, fbytes[2] = {0}, fzbytes[2] = {0};
    for (size_t p = 0; p < count; p++)
      for (int64_t b = 0; pv[p].image_length > 0 && b < pv[p].n_batches; b++) {
        const int c = pv[p].batches[b].codec;
        if (c < 0) continue;
        frames[c] += pv[p].batches[b].value_frames;
        fbytes[c] += pv[p].batches[b].value_bytes;
        fzbytes[c] += pv[p].batches[b].value_zbytes;
      }
    for (int c = 0; c < 2; c++)
      if (!funnel__device_pays(&t->dev->be, c, fbytes[c], fzbytes[c], frames[c], 0)) codecs &= ~(1 << c);
    if (codecs == 0) return 0;
  }
  int32_t n_values = 0;
  const uint8_t *values = value_buffers(schema, &t->arena, &n_values);
  if (values == NULL) return -1;
  /* per codec: the buffers, their bytes decoded and compressed, their jobs
   * and the longest */
  int64_t nc[2] = {0}, bytes[2] = {0}, zbytes[2] = {0}, n_jobs[2] = {0}, longest[2] = {0};
  for (size_t p = 0; p < count; p++)
    for (int64_t b = 0; pv[p].image_length > 0 && b < pv[p].n_batches; b++) {
      const struct funnel__batch *batch = &pv[p].batches[b];
      const int c = batch->codec;
      for (int32_t k = 0; k < batch->n_buffers; k++) {
        if (!device_buffer(values, n_values, &pv[p], batch, k, codecs)) continue;
        const int64_t want = (int64_t)funnel__ld64(batch->dbuffers + 16 * k + 8);
        const int64_t len = (int64_t)funnel__ld64(batch->buffers + 16 * k + 8) - 8;
        nc[c]++;
        bytes[c] += want;
        zbytes[c] += len;
        if (decode != FUNNEL_DECODE_AUTO) continue;
        /* its jobs, as below: an LZ4 block each where the frame's are
         * independent; a ZSTD frame whole */
        const int64_t blocks =
            c != FUNNEL__CODEC_LZ4_FRAME
                ? 0
                : funnel__lz4_split(
                      pv[p].bytes + batch->body + (int64_t)funnel__ld64(batch->buffers + 16 * k) + 8,
                      len, want, 0, 0, NULL, FUNNEL__DECODE_BLOCKS_MAX);
        n_jobs[c] += blocks > 0 ? blocks : 1;
        const int64_t job = blocks > 0 ? (want + blocks - 1) / blocks : want;
        if (job > longest[c]) longest[c] = job;
      }
    }
  for (int c = 0; c < 2 && decode == FUNNEL_DECODE_AUTO; c++)
    if (!funnel__device_pays(&t->dev->be, c, bytes[c], zbytes[c], n_jobs[c], longest[c]))
      codecs &= ~(1 << c);
  const int64_t n = ((codecs & DD_LZ4) ? nc[0] : 0) + ((codecs & DD_ZSTD) ? nc[1] : 0);
  if (n == 0) return 0;
  /* the frames stay where they lie when every partition holding them is
   * pinned (the pool's): no copy of them into the block on the host */
  const struct funnel__pool_span span = funnel__pool_span(&t->dev->pool);
  bool in_source = true;
  for (size_t p = 0; p < count && in_source; p++)
    if (pv[p].image_length > 0 && pv[p].n_batches > 0)
      in_source = funnel__span_contains(span, pv[p].bytes, pv[p].length);
  int64_t *src = funnel__arena_alloc(&t->arena, (size_t)n * sizeof(int64_t));
  int64_t *dst = funnel__arena_alloc(&t->arena, (size_t)n * sizeof(int64_t));
  int64_t *where = funnel__arena_alloc(&t->arena, (size_t)n * 3 * sizeof(int64_t));
  int64_t *first_job = funnel__arena_alloc(&t->arena, ((size_t)n + 1) * sizeof(int64_t));
  struct dd_undo undo;
  if (src == NULL || dst == NULL || where == NULL || first_job == NULL ||
      !dd_save(&t->arena, pv, count, &undo))
    return -1;
  int64_t jobs = 0;
  /* the host's images without the device's buffers; the frames' and the
   * region's offsets relative for now */
  int64_t j = 0, host = 0, frames = 0, region = 0;
  for (size_t p = 0; p < count; p++) {
    struct funnel__partition *part = &pv[p];
    if (part->image_length == 0) continue;
    int64_t at = 0;
    for (int64_t bi = 0; bi < part->n_batches; bi++) {
      struct funnel__batch *b = &part->batches[bi];
      b->dbody = at;
      if (b->codec == FUNNEL__CODEC_NONE) { /* laid out as it was */
        at = funnel__align_up(at + b->dbody_length, FUNNEL__ALIGN);
        continue;
      }
      uint8_t *ddev = funnel__arena_calloc(&t->arena, (size_t)(b->n_buffers ? b->n_buffers : 1), 1);
      if (ddev == NULL) return -1;
      uint8_t *entries = (uint8_t *)b->dbuffers; /* the arena's, written at parse */
      int64_t cursor = 0;
      for (int32_t k = 0; k < b->n_buffers; k++) {
        int64_t e[2];
        memcpy(e, entries + 16 * k, 16);
        if (device_buffer(values, n_values, part, b, k, codecs)) {
          ddev[k] = 1;
          const int64_t len = (int64_t)funnel__ld64(b->buffers + 16 * k + 8);
          if (in_source) { /* its frame's offset in the partition */
            src[j] = b->body + (int64_t)funnel__ld64(b->buffers + 16 * k) + 8;
          } else {
            src[j] = frames;
            frames = funnel__align_up(frames + len - 8, 16);
          }
          dst[j] = region;
          region = funnel__align_up(region + e[1], FUNNEL__ALIGN);
          where[3 * j] = (int64_t)p;
          where[3 * j + 1] = bi;
          where[3 * j + 2] = k;
          /* a job a block where an LZ4 frame's blocks are independent (a
           * ZSTD frame is one job) */
          const int64_t blocks =
              b->codec != FUNNEL__CODEC_LZ4_FRAME
                  ? 0
                  : funnel__lz4_split(
                        part->bytes + b->body + (int64_t)funnel__ld64(b->buffers + 16 * k) + 8,
                        len - 8, e[1], 0, 0, NULL, FUNNEL__DECODE_BLOCKS_MAX);
          t->dd.codecs |= 1 << b->codec;
          first_job[j] = jobs;
          jobs += blocks > 0 ? blocks : 1;
          j++;
          e[0] = -1; /* placed below, once the block's size is known */
        } else {
          e[0] = cursor;
          cursor = funnel__align_up(cursor + e[1], FUNNEL__ALIGN);
        }
        memcpy(entries + 16 * k, e, 16);
      }
      b->ddev = ddev;
      b->dbody_length = cursor;
      at = funnel__align_up(at + cursor, FUNNEL__ALIGN);
    }
    /* at least one aligned word, as format.c lays images out: a partition
     * whose every buffer left is empty (fixed-width columns without
     * nulls) is still decoded and bound on the host */
    part->image_length = at > 0 ? at : FUNNEL__ALIGN;
    host += funnel__align_up(part->image_length, FUNNEL__ALIGN);
  }
  first_job[n] = jobs;
  const int64_t jobs_at = funnel__align_up(host + frames, FUNNEL__ALIGN);
  const int64_t up = jobs_at + jobs * (int64_t)sizeof(struct funnel__lz4_job);
  const int64_t region_at = funnel__align_up(up, FUNNEL__ALIGN);
  /* the block holds the host's images, the frames and the jobs, and must be
   * pinned; without room for it the host decodes everything, as it would
   * have had the device not been asked */
  if ((*block = funnel__pool_alloc(&t->dev->pool, up)) == NULL) {
    dd_restore(pv, count, &undo);
    t->dd.codecs = 0;
    return 0;
  }
  /* the device's buffers, relative to their batch's body in the partition's image */
  for (int64_t k = 0, image = 0, p = -1; k < n; k++) {
    for (; p < where[3 * k]; p++) /* image: where partition where[3k]'s starts */
      if (p >= 0) image += funnel__align_up(pv[p].image_length, FUNNEL__ALIGN);
    const struct funnel__batch *b = &pv[p].batches[where[3 * k + 1]];
    const int64_t rel = region_at + dst[k] - image - b->dbody;
    memcpy((uint8_t *)b->dbuffers + 16 * where[3 * k + 2], &rel, 8);
    if (!in_source) src[k] += host;
    dst[k] += region_at;
  }
  if (in_source &&
      (t->dd.src_at = funnel__arena_alloc(&t->arena, count * sizeof(int64_t))) == NULL)
    return -1;
  t->dd.in_source = in_source;
  t->dd.n = n;
  t->dd.first_job = first_job;
  t->dd.src = src;
  t->dd.dst = dst;
  t->dd.where = where;
  t->dd.jobs_at = jobs_at;
  t->dd.up = up;
  t->dd.region = region;
  return up;
}

/* Copies the device's buffers' frames into the block, on the host threads. */
struct frames_job {
  const struct funnel_table *t;
  const struct funnel__partition *pv;
  uint8_t *block;
};

static void frames_task(void *ctx, int64_t i) {
  const struct frames_job *f = ctx;
  const int64_t per = 64; /* frames a task */
  for (int64_t k = i * per; k < (i + 1) * per && k < f->t->dd.n; k++) {
    const int64_t *w = &f->t->dd.where[3 * k];
    const struct funnel__partition *part = &f->pv[w[0]];
    const struct funnel__batch *b = &part->batches[w[1]];
    const int64_t off = (int64_t)funnel__ld64(b->buffers + 16 * w[2]);
    const int64_t len = (int64_t)funnel__ld64(b->buffers + 16 * w[2] + 8);
    memcpy(f->block + f->t->dd.src[k], part->bytes + b->body + off + 8, (size_t)(len - 8));
  }
}

int funnel__decode_all(struct funnel_table *t, struct funnel__partition *pv, size_t count,
                       const struct funnel__schema *schema, int decode,
                       struct funnel_error *error) {
  int64_t total = 0, parts = 0, zbytes = 0, weight = 0;
  for (size_t p = 0; p < count; p++) {
    if (pv[p].image_length == 0) continue;
    parts++;
    /* below 2^63: the images are bounded (`total`), and a frame takes 16
     * bytes of its partition's metadata */
    weight += decode_weight(&pv[p]);
    for (int64_t b = 0; b < pv[p].n_batches; b++) zbytes += pv[p].batches[b].zbytes;
    /* each image at most FUNNEL__MAX_OUTPUT_BYTES + 1 (format.c) */
    if (funnel__add_overflows(total, funnel__align_up(pv[p].image_length, FUNNEL__ALIGN), &total) ||
        total > FUNNEL__MAX_OUTPUT_BYTES)
      return funnel__error_set(error, FUNNEL_ERR_LIMIT, (int64_t)p, -1, -1,
                               "partition %zu: the compressed partitions up to it declare more "
                               "than %lld uncompressed bytes", p,
                               (long long)FUNNEL__MAX_OUTPUT_BYTES);
  }
  if (parts == 0) return FUNNEL_OK;
  for (size_t p = 0; p < count && schema == NULL; p++) schema = pv[p].schema;
  const int64_t t0 = funnel__now_ns();
  const int64_t decoded = total;
  /* the device's share, when it takes one, and its pinned block */
  uint8_t *block = NULL;
  const int64_t up = dd_layout(t, pv, count, schema, decode, &block);
  if (up < 0) return OUT_OF_MEMORY(error);
  if (up > 0) total = up;
  /* the images, back to back: pinned, they go up as one run */
  int64_t *image_at = funnel__arena_alloc(&t->arena, count * sizeof(int64_t));
  const int64_t task = decode_task_bytes(weight);
  const int64_t n_items = decode_items(pv, count, task, NULL);
  struct decode_item *items = funnel__arena_alloc(&t->arena, (size_t)n_items * sizeof(*items));
  if (image_at == NULL || items == NULL) {
    if (block != NULL) funnel__pool_free(&t->dev->pool, block, up);
    return OUT_OF_MEMORY(error);
  }
  decode_items(pv, count, task, items);
  for (int64_t p = 0, at = 0; p < (int64_t)count; p++) {
    image_at[p] = at;
    at += funnel__align_up(pv[p].image_length, FUNNEL__ALIGN);
  }
  if (block == NULL) block = funnel__pool_alloc(&t->dev->pool, total);
  t->decoded_malloced = block == NULL;
  if (block == NULL && posix_memalign((void **)&block, FUNNEL__ALIGN, (size_t)total) != 0)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY,
                      "out of host memory for %lld bytes of decoded partitions",
                      (long long)total);
  t->decoded = (struct funnel__staged){block, total};
  if (t->dd.n > 0) {
    t->dd.jobs = block + t->dd.jobs_at;
    struct frames_job f = {t, pv, block};
    if (!t->dd.in_source) funnel__parallel_for((t->dd.n + 63) / 64, frames_task, &f);
  }
  struct decode_job j = {.schema = schema, .pv = pv, .block = block, .image_at = image_at,
                         .items = items,
                         .arenas = calloc((size_t)n_items, sizeof(struct funnel__arena))};
  if (j.arenas == NULL) return OUT_OF_MEMORY(error);
  pthread_mutex_init(&j.mu, NULL);
  funnel__parallel_for(n_items, decode_task, &j);
  pthread_mutex_destroy(&j.mu);
  for (int64_t i = 0; i < n_items; i++) funnel__arena_splice(&t->arena, &j.arenas[i]);
  free(j.arenas);
  if (j.st != FUNNEL_OK) {
    if (error != NULL) *error = j.error;
    return j.st;
  }
  /* the partitions decoded a batch or buffers at a time */
  for (int64_t i = 0; i < n_items; i++) {
    struct funnel__partition *p = &pv[items[i].lo];
    if (items[i].batch < 0 || p->decoded) continue;
    funnel__partition_use_image(p, block + image_at[items[i].lo]);
    if (schema != NULL) funnel__partition_bind(schema, p, items[i].lo, &t->arena);
  }
  t->stats.compressed_partitions = parts;
  t->stats.bytes_compressed = zbytes;
  t->stats.bytes_decoded = decoded;
  t->stats.decoded_pinned = !t->decoded_malloced;
  t->stats.decode_ns = funnel__now_ns() - t0;
  return FUNNEL_OK;
}

int funnel__first_codec(const struct funnel_partition *parts, size_t count,
                        const struct funnel__parts_scan *scan) {
  if (scan->first < 0 || scan->bad) return FUNNEL__CODEC_NONE;
  /* past a few partitions of a schema alone (a map task that wrote no
   * rows for this reducer) */
  for (size_t i = (size_t)scan->first, tries = 0; i < count && tries < 16; i++) {
    if (parts[i].length == 0) continue;
    tries++;
    const int codec = funnel__first_batch_codec(parts[i].data, (int64_t)parts[i].length);
    if (codec != FUNNEL__CODEC_NO_BATCH) return codec;
  }
  return FUNNEL__CODEC_NONE;
}
