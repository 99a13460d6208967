/* funnel_bench.c: the shuffle-read benchmark (issue 4).
 *
 * For each workload shape (P partitions x C columns x R rows per partition)
 * and column mix, P partitions are generated once as real Arrow IPC streams
 * (Schema + one RecordBatch + EOS, written by tests/native/ipc_writer),
 * outside every timed region. Each strategy then turns those host bytes into
 * data in device memory, timed end to end (host bytes in, device data ready):
 *
 *   funnel       funnel_reader_read_async + funnel_table_wait
 *   link         one copy of the same number of bytes: the physical limit
 *   naive        one synchronous copy per column buffer per partition, into
 *                one preallocated device buffer (the pattern of cudf #2881)
 *   host_concat  memcpy every column piece to its final place in one pinned
 *                host buffer (one thread), then one copy
 *
 * from two sources: partitions in pinned memory (funnel's pinned pool) and
 * in pageable (malloc'd) memory. The baselines call the backend through the
 * same funnel__dev_* wrappers funnel uses, on their own instance of the
 * device's backend, so the driver calls of every strategy are counted alike
 * (funnel__calls_now, per thread; everything here runs on the main thread).
 *
 * The baselines only move bytes: they neither rebase string offsets nor
 * shift validity bits, so what they leave on the device is not a valid
 * table. That makes them lower bounds on the cost of each pattern, which is
 * the conservative side for funnel.
 *
 *   cmake -S . -B build -DFUNNEL_WITH_JNI=OFF && cmake --build build -j
 *   build/funnel_bench --quick                  # about a minute on cpu
 *   build/funnel_bench --shape 200x10x10k --mix strings --json out.jsonl
 *   build/funnel_bench --help */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "ipc_writer.h"

#define WARMUP 2
#define MAX_SHAPES 256

/* ------------------------------------------------------------- utilities */

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("funnel_bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) die("out of host memory (%zu bytes)", n);
  return p;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (p == NULL) die("out of host memory");
  return p;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

static int64_t read_i64(const uint8_t *p) {
  int64_t v;
  memcpy(&v, p, 8);
  return v;
}

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* "1000", "10k", "1M" (rows: powers of 1000) or "512M", "1G" (bytes: powers
 * of 1024, with `unit` 1024). Returns 0 on a malformed or non-positive value. */
static int64_t parse_count(const char *s, int64_t unit) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || v <= 0) return 0;
  int64_t mult = 1;
  switch (tolower((unsigned char)*end)) {
    case '\0': break;
    case 'k': mult = unit; end++; break;
    case 'm': mult = unit * unit; end++; break;
    case 'g': mult = unit * unit * unit; end++; break;
    default: return 0;
  }
  if (*end == 'i' || *end == 'I') end++; /* "MiB" */
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0' || v > INT64_MAX / mult) return 0;
  return v * mult;
}

/* ------------------------------------------------------------- workloads */

enum { MIX_INT64, MIX_MIXED, MIX_STRINGS, N_MIXES };
static const char *const MIX_NAMES[N_MIXES] = {"int64", "mixed", "strings"};

enum { SRC_PINNED, SRC_PAGEABLE, N_SOURCES };
static const char *const SOURCE_NAMES[N_SOURCES] = {"pinned", "pageable"};

struct shape {
  int parts, cols;
  int64_t rows; /* per partition */
};

/* One shape and mix to measure. */
struct job {
  struct shape shape;
  int mix;
  int64_t est_bytes;
};

static struct iw_field mix_field(int mix, int c) {
  static const int cycle[4] = {FUNNEL_TYPE_INT32, FUNNEL_TYPE_INT64, FUNNEL_TYPE_FLOAT64,
                               FUNNEL_TYPE_BOOL};
  struct iw_field f = {.type = FUNNEL_TYPE_INT64, .nullable = mix != MIX_INT64};
  if (mix == MIX_MIXED) f.type = cycle[c % 4];
  if (mix == MIX_STRINGS && c % 2 == 0) f.type = FUNNEL_TYPE_UTF8;
  return f;
}

static int mix_null_permille(int mix) { return mix == MIX_INT64 ? 0 : 100; }

#define STRING_MIN 8
#define STRING_MAX 64

/* Bytes per row of column c, to skip shapes over --max-bytes before
 * generating them (the real sizes are measured once generated). */
static double column_bytes_per_row(int mix, int c) {
  const struct iw_field f = mix_field(mix, c);
  const double validity = mix_null_permille(mix) ? 0.125 : 0;
  const double string = 0.9 * (STRING_MIN + STRING_MAX) / 2.0; /* nulls are empty */
  switch (f.type) {
    case FUNNEL_TYPE_BOOL: return 0.125 + validity;
    case FUNNEL_TYPE_UTF8: return 4 + string + validity;
    default: return iw_value_width(&f) + validity;
  }
}

static int64_t estimate_bytes(struct shape s, int mix) {
  double per_row = 0;
  for (int c = 0; c < s.cols; c++) per_row += column_bytes_per_row(mix, c);
  /* metadata: the schema and batch headers, buffer padding, EOS */
  const double per_part = (double)s.rows * per_row + 512.0 + 200.0 * s.cols;
  return (int64_t)(per_part * s.parts);
}

/* A column buffer (validity, offsets or data) inside one partition. */
struct piece {
  int64_t offset, length;
};

/* A generated shape: the partitions, where each column buffer lies in them,
 * and what the result must hold. */
struct workload {
  struct shape shape;
  int mix;
  struct iw_field *fields;
  char *names; /* 16 bytes per column */
  struct iw_schema schema;
  int n_bufs;         /* column buffers per partition */
  int64_t *part_off;  /* partition p: region[part_off[p], + part_len[p]) */
  int64_t *part_len;
  int64_t region_size;
  int64_t total_bytes; /* sum of part_len: the bytes every strategy brings over */
  struct piece *pieces; /* [p * n_bufs + k], within partition p */
  int64_t *dst;         /* [p * n_bufs + k]: its place in the concatenated layout */
  int64_t concat_bytes; /* size of that layout */
  uint8_t *pageable;    /* the region, malloc'd */
  void *pinned;         /* a copy of the region in funnel's pinned pool, or NULL */
  struct funnel_partition *parts[N_SOURCES];
  int64_t *expect0;     /* int64 mix: column 0, every partition in order */
  int64_t *nulls;       /* per column */
};

/* iw_col_random draws strings of 0 to 8 bytes; the issue asks for 8 to 64:
 * keep its validity, redraw the lengths (nulls empty, as writers make them)
 * and the characters, eight per draw because this is the slow part of
 * generating the big shapes. */
static void redraw_strings(struct iw_col *col, uint64_t *rng) {
  int64_t total = 0;
  for (int64_t r = 0; r < col->rows; r++) {
    if (col->valid[r])
      total += STRING_MIN + (int64_t)check_rand_below(rng, STRING_MAX - STRING_MIN + 1);
    col->ends[r] = total;
  }
  free(col->chars);
  col->chars = xmalloc((size_t)total);
  for (int64_t i = 0; i < total; i += 8) {
    uint64_t x = check_rand(rng);
    for (int k = 0; k < 8 && i + k < total; k++, x >>= 8)
      col->chars[i + k] = (uint8_t)('a' + (x & 0xFF) % 26);
  }
}

/* Appends partition p (a whole stream) to `region` and records where its
 * column buffers went, from the layout the writer reports. */
static void generate_partition(struct workload *w, int p, struct iw_col *cols,
                               struct iw_buf *region, uint64_t *rng) {
  const int64_t rows = w->shape.rows;
  for (int c = 0; c < w->shape.cols; c++) {
    iw_col_random(&cols[c], &w->fields[c], rows, mix_null_permille(w->mix), rng);
    if (w->fields[c].type == FUNNEL_TYPE_UTF8) redraw_strings(&cols[c], rng);
    for (int64_t r = 0; r < rows; r++) w->nulls[c] += !cols[c].valid[r];
  }
  if (w->expect0 != NULL) memcpy(w->expect0 + (int64_t)p * rows, cols[0].values, (size_t)rows * 8);

  /* partitions start 64-byte aligned in the region, as in a fetch buffer */
  while (region->len % 64) iw_buf_append(region, NULL, 1);
  const int64_t start = (int64_t)region->len;
  w->part_off[p] = start;
  iw_schema_message(region, &w->schema, NULL, NULL);
  struct iw_layout layout = {0};
  const struct iw_encode encode = {.layout = &layout};
  iw_batch_from_cols(region, &w->schema, cols, 0, rows, &encode, NULL);
  iw_eos(region, NULL);
  w->part_len[p] = (int64_t)region->len - start;
  for (int k = 0; k < w->n_bufs; k++) {
    /* RecordBatch.buffers[k]: {int64 offset within the body, int64 length} */
    const uint8_t *b = region->data + layout.buffers + 16 * (size_t)k;
    w->pieces[p * w->n_bufs + k] =
        (struct piece){(int64_t)layout.body - start + read_i64(b), read_i64(b + 8)};
  }
  for (int c = 0; c < w->shape.cols; c++) iw_col_free(&cols[c]);
}

/* The layout the baselines copy into: buffer k of every partition after
 * each other, buffer k + 1 after them (64-byte aligned), as the columns of
 * a concatenated table would be. */
static void plan_destinations(struct workload *w) {
  int64_t at = 0;
  for (int k = 0; k < w->n_bufs; k++) {
    for (int p = 0; p < w->shape.parts; p++) {
      w->dst[p * w->n_bufs + k] = at;
      at += w->pieces[p * w->n_bufs + k].length;
    }
    at = align_up(at, 64);
  }
  w->concat_bytes = at;
}

static void workload_free(struct funnel_device *dev, struct workload *w) {
  if (w->pinned != NULL) funnel_device_pinned_free(dev, w->pinned, (size_t)w->region_size);
  free(w->pageable);
  for (int s = 0; s < N_SOURCES; s++) free(w->parts[s]);
  free(w->fields);
  free(w->names);
  free(w->part_off);
  free(w->part_len);
  free(w->pieces);
  free(w->dst);
  free(w->expect0);
  free(w->nulls);
  memset(w, 0, sizeof(*w));
}

static void workload_build(struct funnel_device *dev, const struct job *job, struct workload *w) {
  memset(w, 0, sizeof(*w));
  const struct shape s = job->shape;
  w->shape = s;
  w->mix = job->mix;
  w->fields = xcalloc((size_t)s.cols, sizeof(*w->fields));
  w->names = xcalloc((size_t)s.cols, 16);
  for (int c = 0; c < s.cols; c++) {
    w->fields[c] = mix_field(job->mix, c);
    snprintf(w->names + 16 * c, 16, "c%d", c);
    w->fields[c].name = w->names + 16 * c;
    w->n_bufs += iw_buffer_count(&w->fields[c]);
  }
  w->schema = (struct iw_schema){s.cols, w->fields, 0};
  w->part_off = xcalloc((size_t)s.parts, sizeof(int64_t));
  w->part_len = xcalloc((size_t)s.parts, sizeof(int64_t));
  w->pieces = xcalloc((size_t)s.parts * (size_t)w->n_bufs, sizeof(struct piece));
  w->dst = xcalloc((size_t)s.parts * (size_t)w->n_bufs, sizeof(int64_t));
  w->nulls = xcalloc((size_t)s.cols, sizeof(int64_t));
  if (job->mix == MIX_INT64) w->expect0 = xmalloc((size_t)(s.parts * s.rows) * 8);

  /* the same bytes for a shape in every run */
  uint64_t rng = 0x5EED0000ULL ^ ((uint64_t)s.parts << 40) ^ ((uint64_t)s.cols << 32) ^
                 (uint64_t)s.rows * 31 ^ (uint64_t)job->mix;
  struct iw_col *cols = xcalloc((size_t)s.cols, sizeof(*cols));
  struct iw_buf region = {0};
  for (int p = 0; p < s.parts; p++) generate_partition(w, p, cols, &region, &rng);
  free(cols);
  w->pageable = region.data; /* the region is the pageable source */
  w->region_size = (int64_t)region.len;
  for (int p = 0; p < s.parts; p++) w->total_bytes += w->part_len[p];
  plan_destinations(w);

  /* the pinned source: the same region copied into funnel's pool, so reads
   * of it copy without staging */
  void *pinned = NULL;
  struct funnel_error err;
  if (funnel_device_pinned_alloc(dev, (size_t)w->region_size, &pinned, &err) == FUNNEL_OK) {
    memcpy(pinned, w->pageable, (size_t)w->region_size);
    w->pinned = pinned;
  }
  for (int src = 0; src < N_SOURCES; src++) {
    const uint8_t *base = src == SRC_PINNED ? w->pinned : w->pageable;
    if (base == NULL) continue;
    w->parts[src] = xcalloc((size_t)s.parts, sizeof(struct funnel_partition));
    for (int p = 0; p < s.parts; p++)
      w->parts[src][p] = (struct funnel_partition){base + w->part_off[p], (size_t)w->part_len[p]};
  }
}

static const uint8_t *source_base(const struct workload *w, int src) {
  return src == SRC_PINNED ? (const uint8_t *)w->pinned : w->pageable;
}

/* ----------------------------------------------------------- the bench */

struct bench {
  struct funnel_device *dev;
  struct funnel_reader *reader;
  /* the baselines' own instance of the device's backend */
  struct funnel_backend be;
  int be_open;
  void *stream;
  void *event;
  uint64_t dev_buf; /* the baselines' destination */
  int64_t dev_cap;
  void *host_buf;   /* host_concat's pinned buffer */
  int64_t host_cap;
};

/* What one timed iteration did. */
struct sample {
  int64_t ns;
  struct funnel__calls calls;
  struct funnel_read_stats stats; /* funnel only */
};

/* The timed region: counters are read outside the clock. */
struct span {
  struct funnel__calls c0;
  int64_t t0;
};

static struct span span_begin(void) {
  struct span s;
  s.c0 = funnel__calls_now();
  s.t0 = now_ns();
  return s;
}

static void span_end(const struct span *s, struct sample *out) {
  out->ns = now_ns() - s->t0;
  const struct funnel__calls c = funnel__calls_now();
  out->calls = (struct funnel__calls){
      .calls = c.calls - s->c0.calls,
      .allocs = c.allocs - s->c0.allocs,
      .host_allocs = c.host_allocs - s->c0.host_allocs,
      .h2d_copies = c.h2d_copies - s->c0.h2d_copies,
      .bytes_h2d = c.bytes_h2d - s->c0.bytes_h2d,
      .d2h_copies = c.d2h_copies - s->c0.d2h_copies,
      .bytes_d2h = c.bytes_d2h - s->c0.bytes_d2h,
      .launches = c.launches - s->c0.launches,
      .syncs = c.syncs - s->c0.syncs};
}

/* Waits for everything the baselines enqueued on their stream. */
static int sync_stream(struct bench *b, struct funnel_error *err) {
  int st = funnel__dev_event_record(&b->be, b->event, b->stream, err);
  return st == FUNNEL_OK ? funnel__dev_event_wait(&b->be, b->event, err) : st;
}

typedef int (*iteration_fn)(struct bench *b, const struct workload *w, int src,
                            struct sample *out, struct funnel_error *err);

static int iter_funnel(struct bench *b, const struct workload *w, int src, struct sample *out,
                       struct funnel_error *err) {
  struct funnel_table *t = NULL;
  const struct span sp = span_begin();
  int st = funnel_reader_read_async(b->reader, w->parts[src], (size_t)w->shape.parts, 0, &t, err);
  if (st == FUNNEL_OK) st = funnel_table_wait(t, err);
  span_end(&sp, out);
  if (st == FUNNEL_OK) funnel_table_stats(t, &out->stats, NULL);
  /* freeing is not part of a read: a consumer frees after using the table */
  funnel_table_free(t);
  return st;
}

static int iter_link(struct bench *b, const struct workload *w, int src, struct sample *out,
                     struct funnel_error *err) {
  const struct span sp = span_begin();
  int st = funnel__dev_copy_h2d_async(&b->be, b->dev_buf, source_base(w, src),
                                      (size_t)w->total_bytes, b->stream, err);
  if (st == FUNNEL_OK) st = sync_stream(b, err);
  span_end(&sp, out);
  return st;
}

static int iter_naive(struct bench *b, const struct workload *w, int src, struct sample *out,
                      struct funnel_error *err) {
  const uint8_t *base = source_base(w, src);
  int st = FUNNEL_OK;
  const struct span sp = span_begin();
  for (int p = 0; p < w->shape.parts && st == FUNNEL_OK; p++) {
    for (int k = 0; k < w->n_bufs && st == FUNNEL_OK; k++) {
      const struct piece pc = w->pieces[p * w->n_bufs + k];
      if (pc.length == 0) continue;
      st = funnel__dev_copy_h2d_async(&b->be, b->dev_buf + (uint64_t)w->dst[p * w->n_bufs + k],
                                      base + w->part_off[p] + pc.offset, (size_t)pc.length,
                                      b->stream, err);
      if (st == FUNNEL_OK) st = sync_stream(b, err); /* synchronous, as cudf's loop was */
    }
  }
  span_end(&sp, out);
  return st;
}

static int iter_host_concat(struct bench *b, const struct workload *w, int src,
                            struct sample *out, struct funnel_error *err) {
  const uint8_t *base = source_base(w, src);
  uint8_t *host = b->host_buf;
  const struct span sp = span_begin();
  /* buffer by buffer, so the writes into the pinned buffer are sequential */
  for (int k = 0; k < w->n_bufs; k++) {
    for (int p = 0; p < w->shape.parts; p++) {
      const struct piece pc = w->pieces[p * w->n_bufs + k];
      if (pc.length > 0)
        memcpy(host + w->dst[p * w->n_bufs + k], base + w->part_off[p] + pc.offset,
               (size_t)pc.length);
    }
  }
  int st = funnel__dev_copy_h2d_async(&b->be, b->dev_buf, host, (size_t)w->concat_bytes,
                                      b->stream, err);
  if (st == FUNNEL_OK) st = sync_stream(b, err);
  span_end(&sp, out);
  return st;
}

struct strategy {
  const char *name;
  iteration_fn run;
};

enum { S_FUNNEL, S_LINK, S_NAIVE, S_HOST_CONCAT, N_STRATEGIES };
static const struct strategy STRATEGIES[N_STRATEGIES] = {
    {"funnel", iter_funnel},
    {"link", iter_link},
    {"naive", iter_naive},
    {"host_concat", iter_host_concat},
};

/* One strategy on one shape, mix and source. */
struct measurement {
  int status;           /* FUNNEL_OK, or why it stopped */
  char error[FUNNEL_ERROR_MESSAGE_SIZE + 64];
  int reps;
  double ms_median, ms_min;
  struct funnel__calls calls; /* per iteration (the last timed one) */
  struct funnel_read_stats stats;
};

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void measure(struct bench *b, const struct workload *w, int src, int reps,
                    const struct strategy *s, struct measurement *m) {
  memset(m, 0, sizeof(*m));
  int64_t *ns = xcalloc((size_t)reps, sizeof(int64_t));
  for (int i = 0; i < WARMUP + reps; i++) {
    struct sample smp;
    memset(&smp, 0, sizeof(smp));
    struct funnel_error err;
    funnel__error_clear(&err);
    const int st = s->run(b, w, src, &smp, &err);
    if (st != FUNNEL_OK) {
      m->status = st;
      snprintf(m->error, sizeof(m->error), "%s: %s", funnel_code_name(st), err.message);
      break;
    }
    if (i >= WARMUP) {
      ns[i - WARMUP] = smp.ns;
      m->calls = smp.calls;
      m->stats = smp.stats;
    }
  }
  if (m->status == FUNNEL_OK) {
    qsort(ns, (size_t)reps, sizeof(int64_t), cmp_i64);
    const double mid = reps % 2 ? (double)ns[reps / 2] : (ns[reps / 2 - 1] + ns[reps / 2]) / 2.0;
    m->reps = reps;
    m->ms_median = mid / 1e6;
    m->ms_min = (double)ns[0] / 1e6;
  }
  free(ns);
}

/* Once per shape and source, untimed: the row count, the null counts, and
 * for the int64 mix column 0's values copied back. */
static int verify(struct bench *b, const struct workload *w, int src, char *why, size_t why_size) {
  struct funnel_error err;
  struct funnel_table *t = NULL;
  int st = funnel_reader_read_async(b->reader, w->parts[src], (size_t)w->shape.parts, 0, &t, &err);
  if (st == FUNNEL_OK) st = funnel_table_wait(t, &err);
  if (st != FUNNEL_OK) {
    snprintf(why, why_size, "read failed: %s: %s", funnel_code_name(st), err.message);
    funnel_table_free(t);
    return 0;
  }
  int ok = 1;
  const int64_t rows = (int64_t)w->shape.parts * w->shape.rows;
  if (funnel_table_num_rows(t) != rows) {
    snprintf(why, why_size, "%lld rows, expected %lld", (long long)funnel_table_num_rows(t),
             (long long)rows);
    ok = 0;
  }
  for (int c = 0; ok && c < w->shape.cols; c++) {
    struct funnel_column col;
    memset(&col, 0, sizeof(col));
    if (funnel_table_column(t, c, &col, &err) != FUNNEL_OK || col.null_count != w->nulls[c]) {
      snprintf(why, why_size, "column %d: null count %lld, expected %lld", c,
               (long long)col.null_count, (long long)w->nulls[c]);
      ok = 0;
    }
  }
  if (ok && w->expect0 != NULL) {
    struct funnel_host_column *host = xcalloc((size_t)w->shape.cols, sizeof(*host));
    int64_t *got = xmalloc((size_t)rows * 8);
    host[0].data = got;
    st = funnel_table_copy_to_host(t, host, &err);
    if (st != FUNNEL_OK) {
      snprintf(why, why_size, "copy back failed: %s: %s", funnel_code_name(st), err.message);
      ok = 0;
    }
    for (int64_t r = 0; ok && r < rows; r++) {
      if (got[r] != w->expect0[r]) {
        snprintf(why, why_size, "column 0 row %lld: %lld, expected %lld", (long long)r,
                 (long long)got[r], (long long)w->expect0[r]);
        ok = 0;
      }
    }
    free(got);
    free(host);
  }
  funnel_table_free(t);
  return ok;
}

/* Grows the baselines' device and pinned buffers to fit the workload. Every
 * earlier iteration has waited for its work, so the old ones are unused. */
static int ensure_buffers(struct bench *b, const struct workload *w, struct funnel_error *err) {
  const int64_t dev_need = w->total_bytes > w->concat_bytes ? w->total_bytes : w->concat_bytes;
  if (dev_need > b->dev_cap) {
    funnel__dev_free(&b->be, b->dev_buf, b->stream);
    b->dev_buf = 0;
    b->dev_cap = 0;
    FUNNEL_RETURN_NOT_OK(funnel__dev_alloc(&b->be, (size_t)dev_need, b->stream, &b->dev_buf, err));
    b->dev_cap = dev_need;
  }
  if (w->concat_bytes > b->host_cap) {
    funnel__dev_host_free(&b->be, b->host_buf);
    b->host_buf = NULL;
    b->host_cap = 0;
    FUNNEL_RETURN_NOT_OK(funnel__dev_host_alloc(&b->be, (size_t)w->concat_bytes, &b->host_buf, err));
    b->host_cap = w->concat_bytes;
  }
  return FUNNEL_OK;
}

static int bench_open(struct bench *b, const char *backend, struct funnel_error *err) {
  memset(b, 0, sizeof(*b));
  FUNNEL_RETURN_NOT_OK(funnel_device_open(backend, &b->dev, err));
  /* no public accessor for a device's backend: open another of its kind */
  const char *name = funnel_device_backend(b->dev);
  FUNNEL_RETURN_NOT_OK(strcmp(name, "cuda") == 0 ? funnel__cuda_backend_init(&b->be, err)
                                                 : funnel__cpu_backend_init(&b->be, err));
  b->be_open = 1;
  FUNNEL_RETURN_NOT_OK(funnel__dev_stream_create(&b->be, &b->stream, err));
  FUNNEL_RETURN_NOT_OK(funnel__dev_event_create(&b->be, &b->event, err));
  return funnel_reader_create(b->dev, NULL, 0, &b->reader, err);
}

static void bench_close(struct bench *b) {
  funnel_reader_free(b->reader);
  if (b->be_open) {
    if (b->stream != NULL) {
      funnel__dev_free(&b->be, b->dev_buf, b->stream);
      if (b->event != NULL) sync_stream(b, NULL);
    }
    funnel__dev_event_destroy(&b->be, b->event);
    funnel__dev_stream_destroy(&b->be, b->stream);
    funnel__dev_host_free(&b->be, b->host_buf);
    if (b->be.release) b->be.release(&b->be);
  }
  funnel_device_close(b->dev);
}

/* --------------------------------------------------------------- options */

enum { PRESET_DEFAULT, PRESET_QUICK, PRESET_FULL };

struct options {
  const char *backend;
  int preset;
  struct shape shapes[MAX_SHAPES];
  int n_shapes;
  int mixes[N_MIXES];
  int n_mixes;
  int reps; /* 0: the preset's */
  int64_t max_bytes;
  const char *csv_path;
  const char *json_path;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: funnel_bench [--backend auto|cpu|cuda] [--quick | --full] [--shape PxCxR]...\n"
          "                    [--mix int64|mixed|strings]... [--reps N] [--max-bytes SIZE]\n"
          "                    [--csv PATH] [--json PATH]\n"
          "\n"
          "Times reading P shuffle partitions (Arrow IPC streams, C columns, R rows each)\n"
          "into one device table with funnel, against one copy of the same bytes (link),\n"
          "a synchronous copy per column buffer per partition (naive) and a host-side\n"
          "concatenation then one copy (host_concat), from pinned and pageable memory.\n"
          "\n"
          "  --backend     device to open (default auto: cuda when there is one, else cpu)\n"
          "  (default)     P {2,16,200,1000} x C {2,10,20} x R {1,100,10k,1M}, every mix, 7 reps\n"
          "  --quick       P {2,16,200} x C {2,10} x R {100,10k}, int64 and strings, 3 reps\n"
          "  --full        P {2,16,200,1000} x C {2,10,20} x R {1,10,...,1M}, every mix, 7 reps\n"
          "  --shape       a shape to run instead of the grid, e.g. 200x10x10k (repeatable)\n"
          "  --mix         a column mix to run (repeatable, or comma-separated)\n"
          "  --reps        timed iterations after %d warm-up ones; the median is reported\n"
          "  --max-bytes   skip shapes whose partitions exceed SIZE bytes (default 1G)\n"
          "  --csv         results as CSV (default bench-results.csv)\n"
          "  --json        results as JSON lines (default: none)\n",
          WARMUP);
}

static const char *need_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) die("%s needs a value (see --help)", argv[*i]);
  return argv[++*i];
}

static void add_mixes(struct options *o, const char *list) {
  char *copy = xmalloc(strlen(list) + 1);
  strcpy(copy, list);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int m = 0; m < N_MIXES; m++)
      if (strcmp(tok, MIX_NAMES[m]) == 0) found = m;
    if (found < 0) die("unknown mix '%s': expected int64, mixed or strings", tok);
    int dup = 0;
    for (int i = 0; i < o->n_mixes; i++) dup |= o->mixes[i] == found;
    if (!dup) o->mixes[o->n_mixes++] = found;
  }
  free(copy);
}

static struct shape parse_shape(const char *s) {
  char buf[128];
  if (strlen(s) >= sizeof(buf)) die("bad shape '%s': expected PxCxR, e.g. 200x10x1000", s);
  strcpy(buf, s);
  char *save = NULL, *p = strtok_r(buf, "xX", &save), *c = strtok_r(NULL, "xX", &save),
       *r = strtok_r(NULL, "xX", &save);
  const int64_t parts = p ? parse_count(p, 1000) : 0, cols = c ? parse_count(c, 1000) : 0,
                rows = r ? parse_count(r, 1000) : 0;
  if (!parts || !cols || !rows || strtok_r(NULL, "xX", &save) || parts > 1000000 || cols > 10000)
    die("bad shape '%s': expected PxCxR with positive P <= 1000000, C <= 10000, R", s);
  return (struct shape){(int)parts, (int)cols, rows};
}

static void parse_options(int argc, char **argv, struct options *o) {
  memset(o, 0, sizeof(*o));
  o->backend = "auto";
  o->max_bytes = (int64_t)1 << 30;
  o->csv_path = "bench-results.csv";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--backend") == 0) {
      o->backend = need_value(argc, argv, &i);
      if (strcmp(o->backend, "auto") && strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda"))
        die("unknown backend '%s': expected auto, cpu or cuda", o->backend);
    } else if (strcmp(a, "--quick") == 0) {
      o->preset = PRESET_QUICK;
    } else if (strcmp(a, "--full") == 0) {
      o->preset = PRESET_FULL;
    } else if (strcmp(a, "--shape") == 0) {
      if (o->n_shapes == MAX_SHAPES) die("at most %d --shape", MAX_SHAPES);
      o->shapes[o->n_shapes++] = parse_shape(need_value(argc, argv, &i));
    } else if (strcmp(a, "--mix") == 0) {
      add_mixes(o, need_value(argc, argv, &i));
    } else if (strcmp(a, "--reps") == 0) {
      const int64_t reps = parse_count(need_value(argc, argv, &i), 1000);
      if (reps <= 0 || reps > 100000) die("--reps must be a positive number");
      o->reps = (int)reps;
    } else if (strcmp(a, "--max-bytes") == 0) {
      o->max_bytes = parse_count(need_value(argc, argv, &i), 1024);
      if (o->max_bytes <= 0) die("--max-bytes must be a positive size, e.g. 1073741824 or 1G");
    } else if (strcmp(a, "--csv") == 0) {
      o->csv_path = need_value(argc, argv, &i);
    } else if (strcmp(a, "--json") == 0) {
      o->json_path = need_value(argc, argv, &i);
    } else {
      usage(stderr);
      die("unknown argument '%s'", a);
    }
  }
  if (o->reps == 0) o->reps = o->preset == PRESET_QUICK ? 3 : 7;
  if (o->n_mixes == 0) {
    if (o->preset == PRESET_QUICK) add_mixes(o, "int64,strings");
    else add_mixes(o, "int64,mixed,strings");
  }
}

/* The jobs of the chosen grid, those over --max-bytes left out (counted). */
static struct job *make_jobs(const struct options *o, int *n_jobs, int *n_skipped) {
  static const int P_ALL[] = {2, 16, 200, 1000}, P_QUICK[] = {2, 16, 200};
  static const int C_ALL[] = {2, 10, 20}, C_QUICK[] = {2, 10};
  static const int64_t R_DEFAULT[] = {1, 100, 10000, 1000000}, R_QUICK[] = {100, 10000},
                       R_FULL[] = {1, 10, 100, 1000, 10000, 100000, 1000000};
  const int quick = o->preset == PRESET_QUICK;
  const int *ps = quick ? P_QUICK : P_ALL, *cs = quick ? C_QUICK : C_ALL;
  const int np = quick ? 3 : 4, nc = quick ? 2 : 3;
  const int64_t *rs = quick ? R_QUICK : o->preset == PRESET_FULL ? R_FULL : R_DEFAULT;
  const int nr = quick ? 2 : o->preset == PRESET_FULL ? 7 : 4;

  struct shape shapes[MAX_SHAPES];
  int n_shapes = 0;
  if (o->n_shapes > 0) {
    memcpy(shapes, o->shapes, sizeof(shapes[0]) * (size_t)o->n_shapes);
    n_shapes = o->n_shapes;
  } else {
    for (int i = 0; i < np; i++)
      for (int j = 0; j < nc; j++)
        for (int k = 0; k < nr; k++) shapes[n_shapes++] = (struct shape){ps[i], cs[j], rs[k]};
  }
  struct job *jobs = xcalloc((size_t)(n_shapes * o->n_mixes), sizeof(*jobs));
  *n_jobs = *n_skipped = 0;
  for (int s = 0; s < n_shapes; s++)
    for (int m = 0; m < o->n_mixes; m++) {
      const int64_t est = estimate_bytes(shapes[s], o->mixes[m]);
      if (est > o->max_bytes) {
        ++*n_skipped;
        continue;
      }
      jobs[(*n_jobs)++] = (struct job){shapes[s], o->mixes[m], est};
    }
  return jobs;
}

/* FUNNEL_PINNED_POOL_BYTES, read when the device opens: room for the pinned
 * copy of the largest shape, for staging its pageable copy (cuda) and for
 * the segment tables: 3x its bytes, capped at a quarter of the host's memory
 * and 16 GiB (cuda pins all of it at once). Left alone when already set. */
static void size_pinned_pool(const struct job *jobs, int n_jobs) {
  const char *set = getenv("FUNNEL_PINNED_POOL_BYTES");
  if (set != NULL && *set) return;
  int64_t largest = 0;
  for (int i = 0; i < n_jobs; i++)
    if (jobs[i].est_bytes > largest) largest = jobs[i].est_bytes;
  int64_t size = 3 * largest + ((int64_t)64 << 20);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t cap = (int64_t)16 << 30;
  if (pages > 0 && page > 0 && (int64_t)pages * page / 4 < cap) cap = (int64_t)pages * page / 4;
  if (size > cap) size = cap;
  char buf[32];
  snprintf(buf, sizeof(buf), "%lld", (long long)size);
  setenv("FUNNEL_PINNED_POOL_BYTES", buf, 1);
}

/* ---------------------------------------------------------------- output */

/* Geometric means of the ratios per source, for the closing summary. */
struct summary {
  int n;
  double log_vs_link;       /* funnel / link */
  double log_over_naive;    /* naive / funnel */
  double log_over_concat;   /* host_concat / funnel */
  double best_over_naive, worst_over_naive;
};

struct report {
  const char *backend;
  FILE *csv, *json;
  struct summary summary[N_SOURCES];
};

static void shape_name(const struct shape *s, char *buf, size_t size) {
  snprintf(buf, size, "%dx%dx%lld", s->parts, s->cols, (long long)s->rows);
}

static void csv_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    const unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static const char CSV_HEADER[] =
    "backend,partitions,columns,rows_per_partition,rows,mix,source,strategy,bytes,h2d_bytes,"
    "reps,ms_median,ms_min,gb_per_s,ratio_to_link,funnel_speedup,calls,h2d_copies,launches,"
    "syncs,allocs,staged_partitions,parse_ms,plan_ms,submit_ms,verified,error\n";

static void print_table_header(void) {
  printf("%-16s %-8s %-8s %-11s %9s %10s %10s %7s %8s %9s %7s %6s %6s %6s\n", "shape", "mix",
         "source", "strategy", "MiB", "ms median", "ms min", "GB/s", "vs link", "funnel x",
         "calls", "h2d", "syncs", "launch");
}

static void report_group(struct report *r, const struct workload *w, int src, const char *verified,
                         const struct measurement m[N_STRATEGIES]) {
  char shape[64];
  shape_name(&w->shape, shape, sizeof(shape));
  const char *mix = MIX_NAMES[w->mix], *source = SOURCE_NAMES[src];
  const double link = m[S_LINK].status == FUNNEL_OK ? m[S_LINK].ms_median : 0;
  const double fun = m[S_FUNNEL].status == FUNNEL_OK ? m[S_FUNNEL].ms_median : 0;
  for (int s = 0; s < N_STRATEGIES; s++) {
    const struct measurement *x = &m[s];
    const int ok = x->status == FUNNEL_OK;
    /* every strategy delivers the same partitions: GB/s is of their bytes */
    const double gbps = ok && x->ms_median > 0 ? (double)w->total_bytes / (x->ms_median * 1e6) : 0;
    const double vs_link = ok && link > 0 ? x->ms_median / link : 0;
    const double speedup = ok && fun > 0 && s != S_FUNNEL ? x->ms_median / fun : 0;
    char speedup_text[32] = "-";
    if (speedup > 0) snprintf(speedup_text, sizeof(speedup_text), "%.2fx", speedup);
    if (ok)
      printf("%-16s %-8s %-8s %-11s %9.3f %10.3f %10.3f %7.2f %7.2fx %9s %7lld %6lld %6lld %6lld\n",
             shape, mix, source, STRATEGIES[s].name, mib(w->total_bytes), x->ms_median, x->ms_min,
             gbps, vs_link, speedup_text, (long long)x->calls.calls,
             (long long)x->calls.h2d_copies, (long long)x->calls.syncs,
             (long long)x->calls.launches);
    else
      printf("%-16s %-8s %-8s %-11s FAILED %s\n", shape, mix, source, STRATEGIES[s].name, x->error);

    const double parse_ms = x->stats.parse_ns / 1e6, plan_ms = x->stats.plan_ns / 1e6,
                 submit_ms = x->stats.submit_ns / 1e6;
    if (r->csv != NULL) {
      fprintf(r->csv, "%s,%d,%d,%lld,%lld,%s,%s,%s,%lld,%lld,%d,", r->backend, w->shape.parts,
              w->shape.cols, (long long)w->shape.rows,
              (long long)(w->shape.parts * w->shape.rows), mix, source, STRATEGIES[s].name,
              (long long)w->total_bytes, (long long)x->calls.bytes_h2d, x->reps);
      if (ok) fprintf(r->csv, "%.6f,%.6f,%.4f,%.4f,", x->ms_median, x->ms_min, gbps, vs_link);
      else fputs(",,,,", r->csv);
      if (speedup > 0) fprintf(r->csv, "%.4f", speedup);
      fprintf(r->csv, ",%lld,%lld,%lld,%lld,%lld,", (long long)x->calls.calls,
              (long long)x->calls.h2d_copies, (long long)x->calls.launches,
              (long long)x->calls.syncs, (long long)x->calls.allocs);
      if (s == S_FUNNEL && ok)
        fprintf(r->csv, "%lld,%.6f,%.6f,%.6f", (long long)x->stats.staged_partitions, parse_ms,
                plan_ms, submit_ms);
      else
        fputs(",,,", r->csv);
      fprintf(r->csv, ",%s,", verified);
      csv_string(r->csv, x->error);
      fputc('\n', r->csv);
    }
    if (r->json != NULL) {
      fprintf(r->json,
              "{\"backend\":\"%s\",\"partitions\":%d,\"columns\":%d,\"rows_per_partition\":%lld,"
              "\"rows\":%lld,\"mix\":\"%s\",\"source\":\"%s\",\"strategy\":\"%s\",\"bytes\":%lld,"
              "\"h2d_bytes\":%lld,\"reps\":%d,",
              r->backend, w->shape.parts, w->shape.cols, (long long)w->shape.rows,
              (long long)(w->shape.parts * w->shape.rows), mix, source, STRATEGIES[s].name,
              (long long)w->total_bytes, (long long)x->calls.bytes_h2d, x->reps);
      if (ok)
        fprintf(r->json, "\"ms_median\":%.6f,\"ms_min\":%.6f,\"gb_per_s\":%.4f,\"ratio_to_link\":%.4f,",
                x->ms_median, x->ms_min, gbps, vs_link);
      else
        fputs("\"ms_median\":null,\"ms_min\":null,\"gb_per_s\":null,\"ratio_to_link\":null,", r->json);
      if (speedup > 0) fprintf(r->json, "\"funnel_speedup\":%.4f,", speedup);
      else fputs("\"funnel_speedup\":null,", r->json);
      fprintf(r->json,
              "\"calls\":%lld,\"h2d_copies\":%lld,\"launches\":%lld,\"syncs\":%lld,\"allocs\":%lld,",
              (long long)x->calls.calls, (long long)x->calls.h2d_copies,
              (long long)x->calls.launches, (long long)x->calls.syncs, (long long)x->calls.allocs);
      if (s == S_FUNNEL && ok)
        fprintf(r->json,
                "\"staged_partitions\":%lld,\"parse_ms\":%.6f,\"plan_ms\":%.6f,\"submit_ms\":%.6f,",
                (long long)x->stats.staged_partitions, parse_ms, plan_ms, submit_ms);
      fprintf(r->json, "\"verified\":\"%s\",\"error\":", verified);
      json_string(r->json, x->error);
      fputs("}\n", r->json);
    }
  }
  putchar('\n');
  fflush(stdout);
  if (r->csv != NULL) fflush(r->csv); /* a long run interrupted keeps what it measured */
  if (r->json != NULL) fflush(r->json);

  int all_ok = 1;
  for (int s = 0; s < N_STRATEGIES; s++) all_ok &= m[s].status == FUNNEL_OK && m[s].ms_median > 0;
  if (all_ok) {
    struct summary *sum = &r->summary[src];
    const double over_naive = m[S_NAIVE].ms_median / fun;
    if (sum->n == 0 || over_naive > sum->best_over_naive) sum->best_over_naive = over_naive;
    if (sum->n == 0 || over_naive < sum->worst_over_naive) sum->worst_over_naive = over_naive;
    sum->n++;
    sum->log_vs_link += log(fun / link);
    sum->log_over_naive += log(over_naive);
    sum->log_over_concat += log(m[S_HOST_CONCAT].ms_median / fun);
  }
}

static void print_summary(const struct report *r) {
  printf("summary (geometric means over the shapes measured):\n");
  for (int src = 0; src < N_SOURCES; src++) {
    const struct summary *s = &r->summary[src];
    if (s->n == 0) continue;
    printf("  %-8s funnel/link %.2fx   funnel over naive %.2fx (%.2fx to %.2fx)   funnel over "
           "host_concat %.2fx   (%d shapes)\n",
           SOURCE_NAMES[src], exp(s->log_vs_link / s->n), exp(s->log_over_naive / s->n),
           s->worst_over_naive, s->best_over_naive, exp(s->log_over_concat / s->n), s->n);
  }
}

static void print_cpu_warning(void) {
  printf("*** backend cpu: no GPU is used. \"Device memory\" is host memory and streams are\n"
         "*** worker threads, so every copy is a memcpy: these are NOT GPU figures. On cpu the\n"
         "*** run checks the harness, the correctness and the call counts, not GPU speed.\n");
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  struct options opt;
  parse_options(argc, argv, &opt);
  int n_jobs = 0, n_skipped = 0;
  struct job *jobs = make_jobs(&opt, &n_jobs, &n_skipped);
  if (n_jobs == 0) die("nothing to run: every shape is over --max-bytes %lld", (long long)opt.max_bytes);
  size_pinned_pool(jobs, n_jobs);

  struct bench b;
  struct funnel_error err;
  funnel__error_clear(&err);
  if (bench_open(&b, opt.backend, &err) != FUNNEL_OK)
    die("cannot open backend '%s': %s: %s", opt.backend, funnel_code_name(err.code), err.message);
  const char *backend = funnel_device_backend(b.dev);

  struct report rep = {.backend = backend};
  rep.csv = fopen(opt.csv_path, "w");
  if (rep.csv == NULL) die("cannot write %s", opt.csv_path);
  fputs(CSV_HEADER, rep.csv);
  if (opt.json_path != NULL && (rep.json = fopen(opt.json_path, "w")) == NULL)
    die("cannot write %s", opt.json_path);

  printf("funnel_bench: backend %s, %d shape x mix runs x %d sources, %d warm-up + %d timed "
         "iterations each (median reported)\n",
         backend, n_jobs, N_SOURCES, WARMUP, opt.reps);
  printf("  max bytes per shape %.0f MiB (%d shape x mix skipped over it), pinned pool %s bytes\n",
         mib(opt.max_bytes), n_skipped, getenv("FUNNEL_PINNED_POOL_BYTES"));
  printf("  MiB and GB/s are of the partitions' bytes; vs link = ms / link ms of the same source;\n"
         "  funnel x = the strategy's ms / funnel's ms; calls, h2d, syncs, launch per iteration\n");
  if (strcmp(backend, "cpu") == 0) print_cpu_warning();
  printf("\n");
  print_table_header();

  int failures = 0, step = 0;
  const int steps = n_jobs * N_SOURCES;
  for (int j = 0; j < n_jobs; j++) {
    char shape[64];
    shape_name(&jobs[j].shape, shape, sizeof(shape));
    const char *mix = MIX_NAMES[jobs[j].mix];
    if (jobs[j].est_bytes > (64 << 20))
      fprintf(stderr, "       generating %s %s (~%.0f MiB)\n", shape, mix, mib(jobs[j].est_bytes));
    struct workload w;
    workload_build(b.dev, &jobs[j], &w);
    int st = ensure_buffers(&b, &w, &err);
    for (int src = 0; src < N_SOURCES; src++) {
      step++;
      fprintf(stderr, "[%d/%d] %s %s %s (%.1f MiB) ...\n", step, steps, shape, mix,
              SOURCE_NAMES[src], mib(w.total_bytes));
      if (st != FUNNEL_OK) {
        printf("%-16s %-8s %-8s FAILED: baseline buffers: %s: %s\n\n", shape, mix,
               SOURCE_NAMES[src], funnel_code_name(st), err.message);
        failures++;
        continue;
      }
      if (w.parts[src] == NULL) {
        printf("%-16s %-8s %-8s skipped: the pinned pool cannot hold %.3f MiB more (raise "
               "FUNNEL_PINNED_POOL_BYTES)\n\n", shape, mix, SOURCE_NAMES[src], mib(w.region_size));
        continue;
      }
      char why[FUNNEL_ERROR_MESSAGE_SIZE + 128] = "";
      const int verified = verify(&b, &w, src, why, sizeof(why));
      if (!verified) {
        printf("%-16s %-8s %-8s VERIFY FAILED: %s\n", shape, mix, SOURCE_NAMES[src], why);
        failures++;
      }
      struct measurement m[N_STRATEGIES];
      for (int s = 0; s < N_STRATEGIES; s++) {
        measure(&b, &w, src, opt.reps, &STRATEGIES[s], &m[s]);
        failures += m[s].status != FUNNEL_OK;
      }
      report_group(&rep, &w, src, verified ? "ok" : "FAILED", m);
    }
    workload_free(b.dev, &w);
  }

  print_summary(&rep);
  if (strcmp(backend, "cpu") == 0) print_cpu_warning();
  printf("results: %s%s%s%s\n", opt.csv_path, opt.json_path ? ", " : "",
         opt.json_path ? opt.json_path : "", failures ? "" : "  (every result verified)");
  if (failures) printf("%d FAILURES (see above)\n", failures);
  fclose(rep.csv);
  if (rep.json != NULL) fclose(rep.json);
  bench_close(&b);
  free(jobs);
  return failures ? 1 : 0;
}
