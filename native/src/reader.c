/* reader.c: the public API. A read is three phases, each in its own
 * function: parse (format.c), plan (plan.c), submit (here, the only phase
 * that talks to the backend). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "plan.h"
#include "pool.h"
#include "table.h"
#include "workers.h"

static struct shared_schema *schema_ref(struct shared_schema *s) {
  if (s != NULL) atomic_fetch_add(&s->refs, 1);
  return s;
}

static void schema_unref(struct shared_schema *s) {
  if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1) {
    funnel__arena_free(&s->arena);
    free(s);
  }
}

#define CHECK_ARG(cond, what) \
  if (!(cond)) return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "%s", what)

/* ----------------------------------------------------------------- device */

funnel_status funnel_device_open(const char *kind, struct funnel_device **out,
                                 struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(kind != NULL && out != NULL, "funnel_device_open: kind and out must not be NULL");
  bool want_cuda = strcmp(kind, "cuda") == 0, want_cpu = strcmp(kind, "cpu") == 0;
  if (!want_cuda && !want_cpu && strcmp(kind, "auto") != 0)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "unknown backend '%s': expected auto, cpu or cuda", kind);
  struct funnel_device *dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  int st = FUNNEL_ERR_NO_DEVICE;
  if (!want_cpu) {
    struct funnel_error probe;
    st = funnel__cuda_backend_init(&dev->be, &probe);
    if (st != FUNNEL_OK && want_cuda) {
      if (error != NULL) *error = probe;
      free(dev);
      return st;
    }
  }
  if (st != FUNNEL_OK) st = funnel__cpu_backend_init(&dev->be, error);
  if (st == FUNNEL_OK) st = funnel__dev_stream_create(&dev->be, &dev->stream, error);
  if (st != FUNNEL_OK) {
    if (dev->be.release) dev->be.release(&dev->be);
    free(dev);
    return st;
  }
  const char *pool_bytes = getenv("FUNNEL_PINNED_POOL_BYTES");
  const char *stage = getenv("FUNNEL_STAGE_PAGEABLE"); /* 1 or 0: force, for tests */
  int64_t size = strcmp(dev->be.name, "cuda") == 0 ? 256 << 20 : 64 << 20;
  if (pool_bytes != NULL && *pool_bytes) size = strtoll(pool_bytes, NULL, 10);
  funnel__pool_init(&dev->pool, &dev->be, size > 0 ? size : 0);
  dev->stage_pageable = stage != NULL && *stage ? atoi(stage) != 0 : dev->be.stage_pageable;
  atomic_init(&dev->refs, 1);
  *out = dev;
  return FUNNEL_OK;
}

const char *funnel_device_backend(const struct funnel_device *dev) {
  return dev ? dev->be.name : "none";
}

struct funnel_device *funnel__device_ref(struct funnel_device *dev) {
  atomic_fetch_add(&dev->refs, 1);
  return dev;
}

void funnel__device_unref(struct funnel_device *dev) {
  if (dev == NULL || atomic_fetch_sub(&dev->refs, 1) != 1) return;
  funnel__dev_stream_destroy(&dev->be, dev->stream);
  funnel__pool_release(&dev->pool);
  if (dev->be.release) dev->be.release(&dev->be);
  free(dev);
}

void funnel_device_close(struct funnel_device *dev) { funnel__device_unref(dev); }

funnel_status funnel_device_stream_create(struct funnel_device *dev, uintptr_t *out,
                                          struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(dev != NULL && out != NULL, "funnel_device_stream_create: NULL argument");
  void *s = NULL;
  FUNNEL_RETURN_NOT_OK(funnel__dev_stream_create(&dev->be, &s, error));
  *out = (uintptr_t)s;
  return FUNNEL_OK;
}

void funnel_device_stream_destroy(struct funnel_device *dev, uintptr_t stream) {
  if (dev != NULL) funnel__dev_stream_destroy(&dev->be, (void *)stream);
}

funnel_status funnel_device_pinned_alloc(struct funnel_device *dev, size_t size, void **out,
                                         struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(dev != NULL && out != NULL, "funnel_device_pinned_alloc: NULL argument");
  CHECK_ARG(size <= INT64_MAX, "funnel_device_pinned_alloc: size too large");
  void *p = funnel__pool_alloc(&dev->pool, (int64_t)size);
  if (p == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY,
                      "the pinned pool (%lld bytes, %lld in use) cannot hold %zu more bytes",
                      (long long)dev->pool.size, (long long)funnel_device_pinned_in_use(dev), size);
  *out = p;
  return FUNNEL_OK;
}

void funnel_device_pinned_free(struct funnel_device *dev, void *ptr, size_t size) {
  if (dev != NULL && ptr != NULL) funnel__pool_free(&dev->pool, ptr, (int64_t)size);
}

int64_t funnel_device_pinned_in_use(struct funnel_device *dev) {
  if (dev == NULL) return 0;
  pthread_mutex_lock(&dev->pool.mu);
  int64_t n = dev->pool.in_use;
  pthread_mutex_unlock(&dev->pool.mu);
  return n;
}

/* ----------------------------------------------------------------- reader */

funnel_status funnel_reader_create(struct funnel_device *dev, const void *schema,
                                   size_t schema_length, struct funnel_reader **out,
                                   struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(dev != NULL && out != NULL, "funnel_reader_create: dev and out must not be NULL");
  CHECK_ARG(schema != NULL || schema_length == 0, "funnel_reader_create: schema is NULL but its length is not 0");
  CHECK_ARG(schema_length <= INT64_MAX, "funnel_reader_create: schema length too large");
  struct funnel_reader *r = calloc(1, sizeof(*r));
  if (r == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  r->dev = funnel__device_ref(dev);
  int st = FUNNEL_OK;
  if (schema_length > 0) {
    r->schema = calloc(1, sizeof(*r->schema));
    if (r->schema != NULL) atomic_init(&r->schema->refs, 1);
    st = r->schema ? funnel__schema_parse(schema, (int64_t)schema_length, &r->schema->arena,
                                          &r->schema->schema, error)
                   : FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  }
  if (st == FUNNEL_OK) st = funnel__dev_stream_create(&dev->be, &r->stream, error);
  if (st != FUNNEL_OK) {
    schema_unref(r->schema);
    funnel__device_unref(r->dev);
    free(r);
    return st;
  }
  *out = r;
  return FUNNEL_OK;
}

void funnel_reader_free(struct funnel_reader *reader) {
  if (reader == NULL) return;
  /* completes the work queued on the stream: tables in flight stay valid */
  funnel__dev_stream_destroy(&reader->dev->be, reader->stream);
  schema_unref(reader->schema);
  funnel__device_unref(reader->dev);
  free(reader);
}

funnel_status funnel_reader_set_option(struct funnel_reader *reader, int option, int64_t value,
                                       struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(reader != NULL, "funnel_reader_set_option: reader is NULL");
  switch (option) {
    case FUNNEL_OPTION_TRANSFER:
      if (value != FUNNEL_TRANSFER_AUTO && value != FUNNEL_TRANSFER_COPY &&
          value != FUNNEL_TRANSFER_DIRECT)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "FUNNEL_OPTION_TRANSFER: %lld is not AUTO (0), COPY (1) or DIRECT (2)",
                          (long long)value);
      reader->transfer = (int)value;
      return FUNNEL_OK;
    case FUNNEL_OPTION_TIME_KERNEL:
      if (value != 0 && value != 1)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "FUNNEL_OPTION_TIME_KERNEL: %lld is not 0 or 1", (long long)value);
      reader->time_kernel = (int)value;
      return FUNNEL_OK;
    case FUNNEL_OPTION_SHAREABLE:
      if (value != 0 && value != 1)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "FUNNEL_OPTION_SHAREABLE: %lld is not 0 or 1", (long long)value);
      if (value == 1 && reader->dev->be.shared_alloc == NULL)
        return FUNNEL_ERR(error, FUNNEL_ERR_UNSUPPORTED, "the %s backend cannot share tables",
                          reader->dev->be.name);
      reader->shareable = (int)value;
      return FUNNEL_OK;
    default:
      return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "funnel_reader_set_option: unknown option %d",
                        option);
  }
}

/* ------------------------------------------------------------------- read */

/* Parsing many partitions runs on the shared host threads, in tasks of
 * consecutive partitions, each with an arena of its own. */
/* partitions: below this one thread is quicker (H100 host, 2026-11-23: 200
 * partitions parsed in 0.08 ms alone, 0.12 ms on 16 threads; 1000 in 0.38
 * and 0.13 ms) */
#define PARSE_PARALLEL_MIN 400
#define PARSE_TASK 8          /* partitions a task */

struct parse_job {
  const struct funnel_partition *parts;
  const struct funnel__schema *known;
  struct funnel__partition *pv;
  int64_t first, count;       /* the partitions of the parallel part */
  struct funnel__arena *arenas; /* one a task */
  struct funnel_error *errors;  /* one a task */
  int64_t *bad;                 /* a task's failing partition, or -1 */
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
  const int64_t lo = j->first + task * PARSE_TASK;
  const int64_t hi = lo + PARSE_TASK < j->first + j->count ? lo + PARSE_TASK : j->first + j->count;
  j->bad[task] = -1;
  for (int64_t i = lo; i < hi; i++)
    if (parse_one(&j->parts[i], (size_t)i, j->known, &j->arenas[task], &j->pv[i],
                  &j->errors[task]) != FUNNEL_OK) {
      j->bad[task] = i;
      return;
    }
}

/* Parses every partition; the error, if any, is the first bad partition's
 * in partition order, as one thread going through them would find. */
static int parse_all(const struct funnel_partition *parts, size_t count,
                     const struct funnel__schema *known, struct funnel_table *t,
                     struct funnel__partition **out, struct funnel_error *error) {
  struct funnel__partition *pv = funnel__arena_calloc(&t->arena, count ? count : 1, sizeof(*pv));
  if (pv == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  for (size_t i = 0; i < count; i++) t->stats.empty_partitions += parts[i].length == 0;
  /* without the reader's schema, the first partition that has one gives it
   * (the others repeat it, which parse_known then checks with a memcmp) */
  size_t i = 0;
  for (; i < count && (known == NULL || count - i < PARSE_PARALLEL_MIN); i++) {
    FUNNEL_RETURN_NOT_OK(parse_one(&parts[i], i, known, &t->arena, &pv[i], error));
    if (known == NULL && parts[i].length > 0) known = pv[i].schema;
  }
  if (i < count) {
    const int64_t n = (int64_t)(count - i), tasks = (n + PARSE_TASK - 1) / PARSE_TASK;
    struct parse_job j = {
        .parts = parts, .known = known, .pv = pv, .first = (int64_t)i, .count = n,
        .arenas = calloc((size_t)tasks, sizeof(struct funnel__arena)),
        .errors = calloc((size_t)tasks, sizeof(struct funnel_error)),
        .bad = calloc((size_t)tasks, sizeof(int64_t))};
    int st = FUNNEL_OK;
    if (j.arenas == NULL || j.errors == NULL || j.bad == NULL) {
      st = FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    } else {
      funnel__parallel_for(tasks, parse_task, &j);
      for (int64_t k = 0; k < tasks; k++) {
        funnel__arena_splice(&t->arena, &j.arenas[k]);
        if (st == FUNNEL_OK && j.bad[k] >= 0) {
          st = j.errors[k].code;
          if (error != NULL) *error = j.errors[k];
        }
      }
    }
    free(j.arenas);
    free(j.errors);
    free(j.bad);
    FUNNEL_RETURN_NOT_OK(st);
  }
  *out = pv;
  return FUNNEL_OK;
}

/* Partitions that lie at most this far after each other in pinned memory go
 * up in one copy, the gap with them. No further: a wider gap may be another
 * thread's pool block, which the copy would read while that thread writes
 * it (a data race on the cpu backend, found by ThreadSanitizer in
 * test_stress). Up to 64 bytes the gap is the padding the pool rounds each
 * block to, so it belongs to the block of the partition before it; a fetch
 * that wrote its partitions back to back into one buffer still goes up in
 * one copy. */
#define MERGE_GAP ((int64_t)FUNNEL__ALIGN)

/* FUNNEL_TRANSFER_AUTO, for a read of partitions only some of which are
 * pinned, reads the pinned ones in place when they total at most this many
 * bytes (FUNNEL_DIRECT_MAX_BYTES overrides; read per read so that
 * benchmarks can sweep it). Measured on an H100 (PCIe Gen5) on 2026-11-22,
 * in a run whose record did not land: the kernel reads pinned host memory
 * at ~44 GB/s, the copy engine at ~55 GB/s; in place won at 3.6 MiB (0.280
 * against 0.316 ms), copying at 15.5 MiB (0.484 against 0.512). A read of
 * pinned partitions only copies them before parsing (early_copies), which
 * beat both on 2026-11-23 (bench/RESULTS.md). */
#define DIRECT_MAX_DEFAULT ((int64_t)8 << 20)

static int64_t direct_max_bytes(void) {
  const char *env = getenv("FUNNEL_DIRECT_MAX_BYTES");
  return env != NULL && *env ? strtoll(env, NULL, 10) : DIRECT_MAX_DEFAULT;
}

/* One host-to-device copy: a run of partitions back to back in pinned
 * memory (or one pageable partition, copied by the driver). */
struct run {
  const uint8_t *src;
  int64_t length;
  int64_t scratch; /* offset in the scratch allocation */
  bool pinned;
};

/* Lays partition bytes [src, src + len) out in the scratch allocation:
 * into the last run when both are pinned, `src` follows it within
 * MERGE_GAP and the caller allows it (`may_merge`), else as a new run.
 * Returns the bytes' offset in scratch; *scratch is the size laid out. */
static int64_t add_run(struct run *runs, int64_t *nr, int64_t *scratch, const uint8_t *src,
                       int64_t len, bool pinned, bool may_merge) {
  struct run *last = *nr > 0 ? &runs[*nr - 1] : NULL;
  if (last != NULL && may_merge && last->pinned && pinned &&
      src >= last->src + last->length && src - (last->src + last->length) <= MERGE_GAP) {
    /* the gap is pool memory too: both ends lie in the one pinned block */
    last->length = src + len - last->src;
    *scratch = funnel__align_up(last->scratch + last->length, FUNNEL__ALIGN);
    return last->scratch + (src - last->src);
  }
  runs[(*nr)++] = (struct run){src, len, *scratch, pinned};
  const int64_t at = *scratch;
  *scratch = funnel__align_up(at + len, FUNNEL__ALIGN);
  return at;
}

/* Staging: memcpy of pageable partitions into pinned memory, in tasks of
 * STAGE_TASK bytes run on the shared host threads (one thread copies
 * ~5-10 GB/s; the link takes ~55). */
#define STAGE_TASK ((int64_t)1 << 20)

struct stage_copy {
  uint8_t *dst;
  const uint8_t *src;
  int64_t length;
  int64_t first_task; /* tasks before this copy's first */
};

struct stage_plan {
  struct stage_copy *copies;
  int64_t n;
  int64_t tasks;        /* STAGE_TASK-sized memcpys, in the order of their bytes in the block */
  int64_t first;        /* stage_range: the first task of the range that runs */
  uint8_t *block;       /* the pinned block the pageable partitions go to, or NULL */
  int64_t block_size;
};

/* memcpy with stores that bypass the cache where the processor has them
 * (x86-64): staged bytes are read next by the copy engine, not by this
 * thread, and a cached store first reads the line it writes, a third of the
 * memory traffic of a copy. */
static void stream_copy(uint8_t *dst, const uint8_t *src, size_t n) {
#if defined(__SSE2__)
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > n) head = n;
  memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
    const __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    const __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
    const __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, n - i);
  _mm_sfence(); /* the streamed stores are visible before the copy is enqueued */
#else
  memcpy(dst, src, n);
#endif
}

static void stage_task(void *ctx, int64_t i) {
  const struct stage_plan *sp = ctx;
  const int64_t task = sp->first + i;
  int64_t lo = 0, hi = sp->n - 1; /* the copy holding this task */
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (sp->copies[mid].first_task <= task) lo = mid; else hi = mid - 1;
  }
  const struct stage_copy *c = &sp->copies[lo];
  const int64_t at = (task - c->first_task) * STAGE_TASK;
  const int64_t len = c->length - at < STAGE_TASK ? c->length - at : STAGE_TASK;
  stream_copy(c->dst + at, c->src + at, (size_t)len);
}

static void hold(struct funnel_table *t, void *ptr, int64_t size) {
  t->staged[t->n_staged++] = (struct staged){ptr, size};
}

/* Decides how each partition reaches the device: read in place from pinned
 * memory (direct), or copied into the scratch allocation, pageable ones
 * staged through the pinned pool first; lays out the runs. Host only. */
static int layout_transfer(struct funnel_table *t, int transfer, uint64_t *in_base,
                           int64_t *in_scratch, struct run *runs, int64_t *n_runs,
                           int64_t *scratch_size, bool *direct, struct stage_plan *staging,
                           struct funnel_error *error) {
  const struct funnel__plan *plan = &t->plan;
  struct funnel__pool *pool = &t->dev->pool;
  const int64_t n = plan->n_parts;
  bool *pinned = funnel__arena_calloc(&t->arena, (size_t)(n ? n : 1), sizeof(bool));
  if (pinned == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  int64_t pinned_bytes = 0, stage_bytes = 0;
  for (int64_t p = 0; p < n; p++) {
    const struct funnel__partition *part = &plan->parts[p];
    if (part->rows == 0) continue;
    pinned[p] = funnel__pool_contains(pool, part->bytes, part->length);
    if (pinned[p]) pinned_bytes += part->length;
    else stage_bytes += funnel__align_up(part->length, FUNNEL__ALIGN);
  }
  *direct = pinned_bytes > 0 && funnel__pool_device_address(pool, pool->base) != 0 &&
            (transfer == FUNNEL_TRANSFER_DIRECT ||
             (transfer == FUNNEL_TRANSFER_AUTO && pinned_bytes <= direct_max_bytes()));
  /* pageable partitions are staged back to back in one pinned block, so
   * they go up in one copy; without room, one block each, or none */
  uint8_t *stage = NULL;
  int64_t stage_at = 0;
  if (t->dev->stage_pageable && stage_bytes > 0) {
    stage = funnel__pool_alloc(pool, stage_bytes);
    if (stage != NULL) hold(t, stage, stage_bytes);
  }

  struct stage_plan sp = {.copies = funnel__arena_calloc(&t->arena, (size_t)(n ? n : 1),
                                                         sizeof(struct stage_copy))};
  if (sp.copies == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  int64_t stage_tasks = 0;
  int64_t scratch = 0, nr = 0;
  for (int64_t p = 0; p < n; p++) {
    const struct funnel__partition *part = &plan->parts[p];
    in_scratch[p] = -1;
    if (part->rows == 0) continue;
    const uint8_t *src = part->bytes;
    const int64_t len = part->length;
    bool is_pinned = pinned[p];
    if (is_pinned && *direct) {
      in_base[p] = funnel__pool_device_address(pool, src);
      t->stats.direct_partitions++;
      t->stats.bytes_direct += len;
      continue;
    }
    if (!is_pinned && t->dev->stage_pageable) {
      uint8_t *to = NULL;
      if (stage != NULL) {
        to = stage + stage_at;
        stage_at += funnel__align_up(len, FUNNEL__ALIGN);
      } else if ((to = funnel__pool_alloc(pool, len)) != NULL) {
        hold(t, to, len);
      }
      if (to != NULL) { /* else the driver stages it */
        sp.copies[sp.n++] = (struct stage_copy){to, src, len, stage_tasks};
        stage_tasks += (len + STAGE_TASK - 1) / STAGE_TASK;
        t->stats.staged_partitions++;
        t->stats.bytes_staged += len;
        src = to;
        is_pinned = true;
      }
    }
    /* a run lies wholly inside the staging block or wholly outside it:
     * enqueue_runs copies those outside at once, before the block is
     * staged, and those inside round by round as the block fills */
    const bool in_block = stage != NULL && src >= stage && src < stage + stage_bytes;
    const struct run *last = nr > 0 ? &runs[nr - 1] : NULL;
    const bool last_in_block =
        last != NULL && stage != NULL && last->src >= stage && last->src < stage + stage_bytes;
    in_scratch[p] = add_run(runs, &nr, &scratch, src, len, is_pinned, in_block == last_in_block);
  }
  sp.tasks = stage_tasks;
  sp.block = stage;
  sp.block_size = stage_at;
  *staging = sp;
  *n_runs = nr;
  *scratch_size = scratch;
  return FUNNEL_OK;
}

/* The end, in the staging block, of the bytes that tasks [0, end_task)
 * have written (the gaps between partitions come along in the copies). */
static const uint8_t *staged_upto(const struct stage_plan *sp, int64_t end_task) {
  if (end_task >= sp->tasks) return sp->block + sp->block_size;
  int64_t lo = 0, hi = sp->n - 1; /* the copy holding the task end_task */
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (sp->copies[mid].first_task <= end_task) lo = mid; else hi = mid - 1;
  }
  const struct stage_copy *c = &sp->copies[lo];
  return c->dst + (end_task - c->first_task) * STAGE_TASK;
}

/* Staging proceeds in up to this many rounds of at least ROUND_MIN bytes
 * (16 tasks: work for every host thread); the bytes of each round go up
 * while the next is staged, so the host's memcpy and the link overlap. */
#define STAGE_ROUNDS 16
#define STAGE_ROUND_MIN ((int64_t)16 << 20)

/* Enqueues the copy of every run, one each; the runs out of the staging
 * block first, then, round by round as the host threads stage them, the
 * bytes of the runs in the staging block. */
static int enqueue_runs(struct funnel_table *t, const struct run *runs, int64_t n_runs,
                        struct stage_plan *sp, void *stream, bool *enqueued,
                        struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  if (sp->tasks > 0 && sp->block == NULL) {
    /* no room for one block: the partitions were staged into blocks of
     * their own, which go up like any pinned partition once filled */
    sp->first = 0;
    funnel__parallel_for(sp->tasks, stage_task, sp);
    sp->tasks = 0;
  }
  const uint8_t *lo = sp->block, *hi = sp->block ? sp->block + sp->block_size : NULL;
  int st = FUNNEL_OK;
  for (int64_t i = 0; i < n_runs && st == FUNNEL_OK; i++) {
    if (lo != NULL && runs[i].src >= lo && runs[i].src < hi) continue;
    st = funnel__dev_copy_h2d_async(be, t->scratch + (uint64_t)runs[i].scratch, runs[i].src,
                                    (size_t)runs[i].length, stream, error);
    *enqueued |= st == FUNNEL_OK;
  }
  if (sp->tasks == 0 || st != FUNNEL_OK) return st;
  int64_t rounds = sp->block_size / STAGE_ROUND_MIN;
  if (rounds > STAGE_ROUNDS) rounds = STAGE_ROUNDS;
  if (rounds < 1) rounds = 1;
  const int64_t per_round = (sp->tasks + rounds - 1) / rounds;
  int64_t r = 0; /* the next run to copy, of those in the block */
  const uint8_t *sent = lo;
  for (int64_t first = 0; first < sp->tasks && st == FUNNEL_OK; first += per_round) {
    const int64_t end = first + per_round < sp->tasks ? first + per_round : sp->tasks;
    sp->first = first;
    funnel__parallel_for(end - first, stage_task, sp);
    const uint8_t *upto = staged_upto(sp, end);
    while (st == FUNNEL_OK && r < n_runs && sent < upto) {
      const struct run *run = &runs[r];
      if (run->src < lo || run->src >= hi || run->src + run->length <= sent) {
        r++;
        continue;
      }
      const uint8_t *from = run->src > sent ? run->src : sent;
      const uint8_t *to = run->src + run->length < upto ? run->src + run->length : upto;
      if (to > from) {
        st = funnel__dev_copy_h2d_async(be, t->scratch + (uint64_t)(run->scratch + (from - run->src)),
                                        from, (size_t)(to - from), stream, error);
        *enqueued |= st == FUNNEL_OK;
      }
      sent = to;
      if (to == run->src + run->length) r++;
    }
  }
  return st;
}

/* Whether a read may put its copies in one batched call. Off unless
 * FUNNEL_BATCH_COPY=1: on an H100 with driver 580.159.04, a
 * cuMemcpyBatchAsync of thousands of host-to-device copies of mixed sizes
 * failed now and then with a sticky CUDA_ERROR_LAUNCH_FAILED, which leaves
 * the process unable to use the device (bench/RESULTS.md, 2026-11-23;
 * test_pool's copy_mode_many_runs_of_mixed_sizes). One cuMemcpyHtoDAsync
 * per run costs ~2 us of host time each, and only reads of partitions that
 * lie far apart in pinned memory make many runs. */
static bool batch_copy_enabled(void) {
  const char *env = getenv("FUNNEL_BATCH_COPY");
  return env != NULL && strcmp(env, "1") == 0;
}

/* After a failure with work enqueued on `stream`: records the table's event
 * after it (once more, if the first record is what failed) and waits, so
 * that everything can be freed. If even that fails, forgets the memory the
 * work may still use: a leak is safe, a free is not. */
static void settle(struct funnel_table *t, void *stream) {
  struct funnel_backend *be = &t->dev->be;
  struct funnel_error e;
  if (t->event != NULL && funnel__dev_event_record(be, t->event, stream, &e) == FUNNEL_OK &&
      funnel__dev_event_wait(be, t->event, &e) == FUNNEL_OK)
    return;
  t->scratch = t->seg_scratch = t->out = 0;
  t->n_staged = 0;
}

/* Before parsing: when every partition lies in the pinned pool (a fetch
 * that wrote into PinnedPool buffers), their runs are copied at once, so
 * the copies fly while the host parses and plans; the kernel then reads
 * device memory. Records the table's event after them: a read that fails
 * later waits for them before it frees anything. */
static int early_copies(struct funnel_table *t, const struct funnel_partition *parts,
                        size_t count, int transfer, void *stream, struct funnel_error *error) {
  if (transfer == FUNNEL_TRANSFER_DIRECT || count == 0) return FUNNEL_OK;
  struct funnel__pool *pool = &t->dev->pool;
  for (size_t i = 0; i < count; i++)
    if (parts[i].length > 0 &&
        (parts[i].data == NULL || parts[i].length > INT64_MAX ||
         !funnel__pool_contains(pool, parts[i].data, (int64_t)parts[i].length)))
      return FUNNEL_OK;
  int64_t *in = funnel__arena_alloc(&t->arena, count * sizeof(int64_t));
  struct run *runs = funnel__arena_alloc(&t->arena, count * sizeof(struct run));
  if (in == NULL || runs == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  int64_t nr = 0, scratch = 0;
  for (size_t i = 0; i < count; i++)
    in[i] = parts[i].length == 0 ? -1
                                 : add_run(runs, &nr, &scratch, parts[i].data,
                                           (int64_t)parts[i].length, true, true);
  if (nr == 0) return FUNNEL_OK;
  struct funnel_backend *be = &t->dev->be;
  /* the event first: once a copy is enqueued, the read must be able to
   * wait for it, whatever fails next */
  FUNNEL_RETURN_NOT_OK(funnel__dev_event_create(be, &t->event, error));
  FUNNEL_RETURN_NOT_OK(funnel__dev_alloc(be, (size_t)scratch, stream, &t->scratch, error));
  int st = FUNNEL_OK;
  bool enqueued = false;
  for (int64_t r = 0; r < nr && st == FUNNEL_OK; r++) {
    st = funnel__dev_copy_h2d_async(be, t->scratch + (uint64_t)runs[r].scratch, runs[r].src,
                                    (size_t)runs[r].length, stream, error);
    enqueued |= st == FUNNEL_OK;
  }
  if (st == FUNNEL_OK) st = funnel__dev_event_record(be, t->event, stream, error);
  if (st != FUNNEL_OK && enqueued) settle(t, stream);
  if (st == FUNNEL_OK) t->early_in = in;
  return st;
}

/* Enqueues the copies, the segment table and the launch, records the
 * event. On failure after something was enqueued, waits for it, so the
 * caller can free everything. */
static int submit(struct funnel_table *t, const struct funnel_reader *reader, void *stream,
                  struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  struct funnel__pool *pool = &t->dev->pool;
  const struct funnel__plan *plan = &t->plan;
  const int64_t n = plan->n_parts;
  t->staged = funnel__arena_calloc(&t->arena, (size_t)n + 2, sizeof(*t->staged));
  uint64_t *in_base = funnel__arena_calloc(&t->arena, (size_t)n + 1, sizeof(uint64_t));
  int64_t *in_scratch = funnel__arena_calloc(&t->arena, (size_t)n + 1, sizeof(int64_t));
  struct run *runs = funnel__arena_calloc(&t->arena, (size_t)n + 1, sizeof(struct run));
  if (t->staged == NULL || in_base == NULL || in_scratch == NULL || runs == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  if (plan->max_segments == 0) return FUNNEL_OK; /* no columns: nothing to run */
  /* the event before anything is enqueued (see early_copies) */
  if (t->event == NULL) FUNNEL_RETURN_NOT_OK(funnel__dev_event_create(be, &t->event, error));

  /* the segment table sits in pinned memory when the pool has room; a
   * direct read lets the kernel read it there, else it goes up with the
   * partitions */
  const int64_t seg_bytes = plan->max_segments * (int64_t)sizeof(struct funnel__segment);
  struct funnel__segment *segs = funnel__pool_alloc(pool, seg_bytes);
  const bool segs_pinned = segs != NULL;
  if (segs_pinned) hold(t, segs, seg_bytes);
  else segs = funnel__arena_alloc(&t->arena, (size_t)seg_bytes);
  if (segs == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");

  int64_t n_runs = 0, scratch_size = 0;
  bool direct = false;
  struct stage_plan staging;
  memset(&staging, 0, sizeof(staging));
  const bool early = t->early_in != NULL;
  if (early) { /* the partitions are on their way (early_copies) */
    for (int64_t p = 0; p < n; p++) in_scratch[p] = t->early_in[p];
  } else {
    FUNNEL_RETURN_NOT_OK(layout_transfer(t, reader->transfer, in_base, in_scratch, runs, &n_runs,
                                         &scratch_size, &direct, &staging, error));
  }
  /* the kernel reads the segment table in pinned memory when it reads its
   * partitions there, or when they went up early */
  const bool segs_in_place =
      segs_pinned && (direct || (early && funnel__pool_device_address(pool, segs) != 0));
  int64_t segs_scratch = -1;
  if (!segs_in_place && !early) {
    segs_scratch = scratch_size;
    scratch_size += seg_bytes;
  }

  int st = FUNNEL_OK;
  if (plan->out_size > 0 && reader->shareable) {
    st = funnel__dev_shared_alloc(be, (size_t)plan->out_size, &t->out, &t->out_handle, error);
    t->out_shared = st == FUNNEL_OK;
  } else if (plan->out_size > 0) {
    st = funnel__dev_alloc(be, (size_t)plan->out_size, stream, &t->out, error);
  }
  if (st == FUNNEL_OK && scratch_size > 0)
    st = funnel__dev_alloc(be, (size_t)scratch_size, stream, &t->scratch, error);
  if (st == FUNNEL_OK && early && !segs_in_place)
    st = funnel__dev_alloc(be, (size_t)seg_bytes, stream, &t->seg_scratch, error);
  if (st != FUNNEL_OK) return st;
  for (int64_t p = 0; p < n; p++)
    if (in_scratch[p] >= 0) in_base[p] = t->scratch + (uint64_t)in_scratch[p];
  const int64_t n_segs = funnel__plan_segments(plan, in_base, t->out, segs);
  t->stats.segments = n_segs;
  if (n_segs > plan->max_segments)
    return FUNNEL_ERR(error, FUNNEL_ERR_LIMIT, "internal error: %lld segments, room for %lld",
                      (long long)n_segs, (long long)plan->max_segments);
  const uint64_t seg_dev = segs_in_place ? funnel__pool_device_address(pool, segs)
                           : early       ? t->seg_scratch
                                         : t->scratch + (uint64_t)segs_scratch;

  bool enqueued = early; /* the early copies are in flight */
  /* runs from pinned memory may go in one batched call (FUNNEL_BATCH_COPY=1) */
  int64_t first_pageable = 0;
  while (first_pageable < n_runs && runs[first_pageable].pinned) first_pageable++;
  if (first_pageable == n_runs && n_runs > 2 && be->copy_h2d_batch_async != NULL &&
      batch_copy_enabled() && staging.tasks == 0) {
    uint64_t *dst = funnel__arena_calloc(&t->arena, (size_t)n_runs, sizeof(uint64_t));
    const void **src = funnel__arena_calloc(&t->arena, (size_t)n_runs, sizeof(void *));
    size_t *len = funnel__arena_calloc(&t->arena, (size_t)n_runs, sizeof(size_t));
    if (dst == NULL || src == NULL || len == NULL)
      return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    for (int64_t i = 0; i < n_runs; i++) {
      dst[i] = t->scratch + (uint64_t)runs[i].scratch;
      src[i] = runs[i].src;
      len[i] = (size_t)runs[i].length;
    }
    st = funnel__dev_copy_h2d_batch_async(be, dst, (const void *const *)src, len, (size_t)n_runs,
                                          stream, error);
    enqueued |= st == FUNNEL_OK;
  } else {
    st = enqueue_runs(t, runs, n_runs, &staging, stream, &enqueued, error);
  }
  if (st == FUNNEL_OK && !segs_in_place) {
    st = funnel__dev_copy_h2d_async(be, seg_dev, segs, (size_t)n_segs * sizeof(*segs), stream, error);
    enqueued |= st == FUNNEL_OK;
  }
  if (st == FUNNEL_OK && reader->time_kernel) {
    st = funnel__dev_event_create_timed(be, &t->ev_start, error);
    if (st == FUNNEL_OK) st = funnel__dev_event_create_timed(be, &t->ev_end, error);
    if (st == FUNNEL_OK) st = funnel__dev_event_record(be, t->ev_start, stream, error);
    enqueued |= st == FUNNEL_OK;
  }
  if (st == FUNNEL_OK) {
    st = funnel__dev_launch_concat(be, seg_dev, n_segs, stream, error);
    enqueued |= st == FUNNEL_OK;
  }
  if (st == FUNNEL_OK && t->ev_end != NULL) st = funnel__dev_event_record(be, t->ev_end, stream, error);
  if (st == FUNNEL_OK) st = funnel__dev_event_record(be, t->event, stream, error);
  if (st != FUNNEL_OK && enqueued) settle(t, stream);
  return st;
}

static void release_staged(struct funnel_table *t) {
  for (int64_t i = 0; i < t->n_staged; i++)
    funnel__pool_free(&t->dev->pool, t->staged[i].ptr, t->staged[i].size);
  t->n_staged = 0;
}

static void table_release(struct funnel_table *t) {
  struct funnel_backend *be = &t->dev->be;
  if (t->event != NULL) {
    funnel__dev_event_wait(be, t->event, NULL);
    funnel__dev_event_destroy(be, t->event);
  }
  funnel__dev_event_destroy(be, t->ev_start);
  funnel__dev_event_destroy(be, t->ev_end);
  release_staged(t);
  /* the read's work has completed: free on the device's own stream (the
   * read's may be gone with its reader) */
  funnel__dev_free(be, t->scratch, t->dev->stream);
  funnel__dev_free(be, t->seg_scratch, t->dev->stream);
  if (t->out_shared)
    funnel__dev_shared_free(be, t->out, (size_t)t->plan.out_size, &t->out_handle);
  else
    funnel__dev_free(be, t->out, t->dev->stream);
  if (t->import != NULL) funnel__import_release(t);
  pthread_mutex_destroy(&t->mu);
  funnel__arena_free(&t->arena);
  schema_unref(t->schema);
  funnel__device_unref(t->dev);
  free(t);
}

struct funnel_table *funnel__table_ref(struct funnel_table *t) {
  atomic_fetch_add(&t->refs, 1);
  return t;
}

void funnel__table_unref(struct funnel_table *t) {
  if (t != NULL && atomic_fetch_sub(&t->refs, 1) == 1) table_release(t);
}

funnel_status funnel_reader_read_async(struct funnel_reader *reader,
                                       const struct funnel_partition *parts, size_t count,
                                       uintptr_t stream, struct funnel_table **out,
                                       struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(reader != NULL && out != NULL, "funnel_reader_read_async: reader and out must not be NULL");
  CHECK_ARG(parts != NULL || count == 0, "funnel_reader_read_async: parts is NULL");
  struct funnel_table *t = calloc(1, sizeof(*t));
  if (t == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  atomic_init(&t->refs, 1);
  t->dev = funnel__device_ref(reader->dev);
  pthread_mutex_init(&t->mu, NULL);
  t->stats.partitions = (int64_t)count;
  t->stats.kernel_ns = -1;

  void *the_stream = stream ? (void *)stream : reader->stream;
  const struct funnel__calls c_early = funnel__calls_now();
  const int64_t t_early = funnel__now_ns();
  int st = early_copies(t, parts, count, reader->transfer, the_stream, error);
  const struct funnel__calls c0 = funnel__calls_now();
  const int64_t t0 = funnel__now_ns();
  t->schema = schema_ref(reader->schema); /* the table may outlive the reader */
  const struct funnel__schema *schema = t->schema ? &t->schema->schema : NULL;
  struct funnel__partition *pv = NULL;
  if (st == FUNNEL_OK) st = parse_all(parts, count, schema, t, &pv, error);
  const struct funnel__calls c1 = funnel__calls_now();
  const int64_t t1 = funnel__now_ns();

  if (st == FUNNEL_OK) st = funnel__plan_build(schema, pv, (int64_t)count, &t->arena, &t->plan, error);
  const struct funnel__calls c2 = funnel__calls_now();
  const int64_t t2 = funnel__now_ns();

  if (st == FUNNEL_OK) st = submit(t, reader, the_stream, error);
  /* while the copies run: a bad offset fails the read, whose release
   * waits for what it enqueued before freeing anything */
  if (st == FUNNEL_OK) st = funnel__plan_check_offsets(&t->plan, error);
  const struct funnel__calls c3 = funnel__calls_now();
  const int64_t t3 = funnel__now_ns();
  if (st != FUNNEL_OK) {
    table_release(t);
    return st;
  }

  struct funnel_read_stats *s = &t->stats;
  const struct funnel__plan *plan = &t->plan;
  s->batches = plan->batches;
  s->rows = plan->rows;
  s->columns = plan->schema->n_fields;
  s->column_sets = c3.launches - c2.launches > 0 ? 1 : 0;
  /* the early copies are part of submitting, made before parsing */
  s->h2d_copies = c3.h2d_copies - c_early.h2d_copies;
  s->bytes_h2d = c3.bytes_h2d - c_early.bytes_h2d;
  s->concat_launches = c3.launches - c_early.launches;
  s->device_allocs = c3.allocs - c_early.allocs;
  s->pinned_allocs = c3.host_allocs - c_early.host_allocs;
  s->syncs_in_read = c3.syncs - c_early.syncs;
  s->device_calls_parse = c1.calls - c0.calls;
  s->device_calls_plan = c2.calls - c1.calls;
  s->device_calls_submit = (c3.calls - c2.calls) + (c0.calls - c_early.calls);
  for (int c = 0; c < plan->schema->n_fields; c++)
    s->bytes_out += plan->columns[c].validity_size + plan->columns[c].offsets_size +
                    plan->columns[c].data_size;
  s->parse_ns = t1 - t0;
  s->plan_ns = t2 - t1;
  s->submit_ns = (t3 - t2) + (t0 - t_early);
  *out = t;
  return FUNNEL_OK;
}

/* ------------------------------------------------------------------ table */

funnel_status funnel_table_wait(struct funnel_table *t, struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(t != NULL, "funnel_table_wait: table is NULL");
  pthread_mutex_lock(&t->mu);
  int st = FUNNEL_OK;
  if (!t->done) {
    if (t->event != NULL) st = funnel__dev_event_wait(&t->dev->be, t->event, error);
    if (st == FUNNEL_OK && t->ev_end != NULL &&
        funnel__dev_event_elapsed_ns(&t->dev->be, t->ev_start, t->ev_end, &t->stats.kernel_ns,
                                     NULL) != FUNNEL_OK)
      t->stats.kernel_ns = -1;
    if (st == FUNNEL_OK) {
      /* the inputs are no longer needed on the device */
      funnel__dev_free(&t->dev->be, t->scratch, t->dev->stream);
      funnel__dev_free(&t->dev->be, t->seg_scratch, t->dev->stream);
      t->scratch = t->seg_scratch = 0;
      release_staged(t);
      t->done = 1;
    }
  }
  pthread_mutex_unlock(&t->mu);
  return st;
}

int funnel_table_is_ready(struct funnel_table *t) {
  if (t == NULL) return 0;
  if (t->event == NULL) return 1; /* set by the read, fixed until the table is freed */
  int done = 0;
  /* another thread may hold the lock for a whole wait: never block on it;
   * the event itself answers from any thread */
  if (pthread_mutex_trylock(&t->mu) == 0) {
    done = t->done;
    pthread_mutex_unlock(&t->mu);
  }
  if (!done && funnel__dev_event_query(&t->dev->be, t->event, &done, NULL) != FUNNEL_OK) done = 0;
  return done;
}

int64_t funnel_table_num_rows(const struct funnel_table *t) { return t ? t->plan.rows : 0; }

int funnel_table_num_columns(const struct funnel_table *t) {
  return t ? t->plan.schema->n_fields : 0;
}

uint64_t funnel__table_buffer(const struct funnel_table *t, int c, int k, int64_t *size) {
  const struct funnel__out_column *oc = &t->plan.columns[c];
  const int64_t offset = k == 0 ? oc->validity : k == 1 ? oc->offsets : oc->data;
  const int64_t n = k == 0 ? oc->validity_size : k == 1 ? oc->offsets_size : oc->data_size;
  const uint64_t address = t->import_addr != NULL ? t->import_addr[3 * c + k]
                           : offset >= 0 && t->out != 0 ? t->out + (uint64_t)offset
                                                         : 0;
  *size = address != 0 ? n : 0;
  return address;
}

static struct funnel_buffer buffer_at(const struct funnel_table *t, int c, int k) {
  struct funnel_buffer b;
  b.address = funnel__table_buffer(t, c, k, &b.size);
  return b;
}

funnel_status funnel_table_column(const struct funnel_table *t, int index,
                                  struct funnel_column *out, struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(t != NULL && out != NULL, "funnel_table_column: NULL argument");
  if (index < 0 || index >= t->plan.schema->n_fields)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "column %d out of range [0, %d)", index,
                      t->plan.schema->n_fields);
  const struct funnel__field *f = &t->plan.schema->fields[index];
  const struct funnel__out_column *oc = &t->plan.columns[index];
  memset(out, 0, sizeof(*out));
  out->name = f->name;
  out->type_id = f->type_id;
  out->nullable = f->nullable;
  out->byte_width = f->byte_width;
  out->offset_width = f->offset_width;
  out->time_unit = f->time_unit;
  out->timezone = f->timezone;
  out->decimal_precision = f->precision;
  out->decimal_scale = f->scale;
  out->length = t->plan.rows;
  out->null_count = oc->null_count;
  out->validity = buffer_at(t, index, 0);
  out->offsets = buffer_at(t, index, 1);
  out->data = buffer_at(t, index, 2);
  return FUNNEL_OK;
}

const void *funnel_table_schema_ipc(const struct funnel_table *t, size_t *length) {
  if (t == NULL) return NULL;
  if (length != NULL) *length = (size_t)t->plan.schema->ipc_length;
  return t->plan.schema->ipc;
}

/* Enqueues copies of `n` ranges (device address, size, host destination)
 * on the device's stream and waits for them. */
struct d2h {
  uint64_t src;
  int64_t size;
  void *dst;
};

static int copy_back(struct funnel_table *t, const struct d2h *copies, size_t n,
                     struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  void *stream = t->dev->stream;
  /* the event before any copy: the caller's buffers may be released only
   * once every copy into them is known complete */
  void *event = NULL;
  FUNNEL_RETURN_NOT_OK(funnel__dev_event_create(be, &event, error));
  bool enqueued = false;
  int st = FUNNEL_OK;
  for (size_t i = 0; i < n && st == FUNNEL_OK; i++) {
    if (copies[i].dst == NULL || copies[i].src == 0 || copies[i].size == 0) continue;
    st = funnel__dev_copy_d2h_async(be, copies[i].dst, copies[i].src, (size_t)copies[i].size,
                                    stream, error);
    enqueued |= st == FUNNEL_OK;
  }
  if (!enqueued) {
    funnel__dev_event_destroy(be, event);
    return st;
  }
  struct funnel_error ev_error;
  int ev = funnel__dev_event_record(be, event, stream, st == FUNNEL_OK ? error : &ev_error);
  if (ev != FUNNEL_OK) { /* once more: the copies must be waited for */
    if (st == FUNNEL_OK) st = ev;
    ev = funnel__dev_event_record(be, event, stream, &ev_error);
  }
  if (ev == FUNNEL_OK) ev = funnel__dev_event_wait(be, event, st == FUNNEL_OK ? error : &ev_error);
  if (ev != FUNNEL_OK && st == FUNNEL_OK) st = ev;
  funnel__dev_event_destroy(be, event);
  return st;
}

funnel_status funnel_table_copy_to_host(struct funnel_table *t,
                                        const struct funnel_host_column *columns,
                                        struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(t != NULL && columns != NULL, "funnel_table_copy_to_host: NULL argument");
  FUNNEL_RETURN_NOT_OK(funnel_table_wait(t, error));
  const int n = t->plan.schema->n_fields;
  struct d2h *copies = calloc(3 * (size_t)n + 1, sizeof(*copies));
  if (copies == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  for (int c = 0; c < n; c++) {
    void *const dst[3] = {columns[c].validity, columns[c].offsets, columns[c].data};
    for (int k = 0; k < 3; k++) {
      copies[3 * c + k].src = funnel__table_buffer(t, c, k, &copies[3 * c + k].size);
      copies[3 * c + k].dst = dst[k];
    }
  }
  const int st = copy_back(t, copies, 3 * (size_t)n, error);
  free(copies);
  return st;
}

funnel_status funnel_table_copy_ranges_to_host(struct funnel_table *t,
                                               const struct funnel_host_range *ranges,
                                               size_t count, struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(t != NULL && (ranges != NULL || count == 0),
            "funnel_table_copy_ranges_to_host: NULL argument");
  struct d2h *copies = calloc(count + 1, sizeof(*copies));
  if (copies == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  for (size_t i = 0; i < count; i++) {
    const struct funnel_host_range *r = &ranges[i];
    int64_t size = 0, end;
    const bool known = r->column >= 0 && r->column < t->plan.schema->n_fields && r->buffer >= 0 &&
                       r->buffer <= 2;
    const uint64_t base = known ? funnel__table_buffer(t, r->column, r->buffer, &size) : 0;
    if (!known || r->offset < 0 || r->length < 0 || (r->length > 0 && r->dst == NULL) ||
        funnel__add_overflows(r->offset, r->length, &end) || end > size) {
      free(copies);
      return funnel__error_set(error, FUNNEL_ERR_INVALID_ARGUMENT, -1, known ? r->column : -1, -1,
                               "range %zu: column %d, buffer %d, bytes [%lld, +%lld) is outside "
                               "the buffer (%lld bytes)",
                               i, r->column, r->buffer, (long long)r->offset,
                               (long long)r->length, (long long)size);
    }
    copies[i] = (struct d2h){base + (uint64_t)r->offset, r->length, r->dst};
  }
  int st = funnel_table_wait(t, error);
  if (st == FUNNEL_OK) st = copy_back(t, copies, count, error);
  free(copies);
  return st;
}

funnel_status funnel_table_stats(const struct funnel_table *t, struct funnel_read_stats *out,
                                 struct funnel_error *error) {
  funnel__error_clear(error);
  CHECK_ARG(t != NULL && out != NULL, "funnel_table_stats: NULL argument");
  *out = t->stats;
  return FUNNEL_OK;
}

void funnel_table_free(struct funnel_table *t) {
  if (t == NULL) return;
  /* the caller may release the partitions on return, also when an export
   * keeps the table: its work must be over */
  funnel_table_wait(t, NULL);
  funnel__table_unref(t);
}
