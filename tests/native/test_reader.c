/* test_reader.c: funnel end to end through the public API (funnel.h only)
 * on the cpu backend: partitions written by ipc_writer.c, read, waited on,
 * copied back, and compared byte for byte with the concatenation of the
 * source rows computed here with plain loops.
 *
 * Async contract, which every test keeps: the partitions' bytes are freed
 * only after funnel_table_wait (or funnel_table_copy_to_host, which waits)
 * has returned; a read that fails enqueues nothing, so its partitions may
 * be freed at once. The cpu backend copies on a worker thread, so a test
 * that freed them early would be caught by ASan. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, MAP_NORESERVE */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "funnel.h"
#include "ipc_writer.h"
#include "tables.h"

static struct funnel_device *the_device;

static struct funnel_device *device(void) {
  if (the_device == NULL) {
    struct funnel_error err;
    if (!CHECK_OK(check_device_open(&the_device, &err), &err)) abort();
  }
  return the_device;
}

static struct funnel_reader *reader_new(const void *schema, size_t length) {
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(funnel_reader_create(device(), schema, length, &rd, &err), &err)) abort();
  return rd;
}

/* ------------------------------------------------------------- the inputs */

static const struct iw_field small_fields[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "k", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "v", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
};
static const struct iw_schema small_schema = {3, small_fields, 0};

/* Bytes of a schema message alone, for funnel_reader_create. */
static struct iw_buf schema_bytes(const struct iw_schema *s) {
  struct iw_buf b = {0};
  iw_schema_message(&b, s, NULL, NULL);
  return b;
}

enum framing {
  STREAM,      /* Schema, batches, end-of-stream */
  STREAM_NOEOS,/* Schema, batches */
  BARE,        /* batches only: the reader has the schema */
  FILE_FORMAT, /* the IPC file format: magic, stream, footer, magic */
  ZERO_BYTES   /* an empty shuffle block: no bytes at all (only for 0 rows) */
};

/* How a table is cut into partitions. */
struct shape {
  int n_parts;
  const int64_t *part_rows; /* rows of each partition; they sum to the table's */
  int max_batches;          /* each partition in 1..max_batches batches, cut at random
                               (0-row batches included) */
  int framing;              /* enum framing for partitions with rows */
  int empty_framing;        /* enum framing for partitions of 0 rows */
  int legacy_permille;      /* partitions in legacy framing */
  struct iw_encode enc;     /* enc.rng is set from the seed */
};

struct parts {
  size_t n;
  struct funnel_partition *p; /* each p[i].data malloc'd with exactly its length */
  int64_t batches;            /* RecordBatch messages written */
};

static void parts_free(struct parts *ps) {
  for (size_t i = 0; i < ps->n; i++) free((void *)ps->p[i].data);
  free(ps->p);
  ps->p = NULL;
  ps->n = 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static struct parts make_parts(const struct table_src *t, const struct shape *sh, uint64_t seed) {
  uint64_t rng = seed;
  struct iw_encode enc = sh->enc;
  enc.rng = &rng;
  struct parts ps = {(size_t)sh->n_parts, calloc((size_t)sh->n_parts + 1, sizeof(struct funnel_partition)), 0};
  int64_t r = 0;
  for (int i = 0; i < sh->n_parts; i++) {
    const int64_t n = sh->part_rows[i];
    const int framing = n > 0 ? sh->framing : sh->empty_framing;
    struct iw_options o = {.legacy = (int)check_rand_below(&rng, 1000) < sh->legacy_permille};
    struct iw_buf b = {0};
    struct iw_layout layouts[64];
    if (framing == FILE_FORMAT) iw_file_begin(&b);
    if (framing != ZERO_BYTES) {
      if (framing != BARE) iw_schema_message(&b, t->schema, &o, NULL);
      int nb = 1 + (int)check_rand_below(&rng, (uint64_t)(sh->max_batches > 0 ? sh->max_batches : 1));
      int64_t cuts[66];
      if (nb > 64) nb = 64;
      cuts[0] = 0;
      cuts[nb] = n;
      for (int k = 1; k < nb; k++) cuts[k] = (int64_t)check_rand_below(&rng, (uint64_t)n + 1);
      qsort(cuts + 1, (size_t)(nb > 1 ? nb - 1 : 0), sizeof(int64_t), cmp_i64);
      for (int k = 0; k < nb; k++) {
        enc.layout = &layouts[k];
        iw_batch_from_cols(&b, t->schema, t->cols, r + cuts[k], r + cuts[k + 1], &enc, &o);
        ps.batches++;
      }
      if (framing == STREAM || framing == FILE_FORMAT) iw_eos(&b, &o);
      if (framing == FILE_FORMAT) iw_file_end(&b, t->schema, layouts, nb);
    }
    ps.p[i].data = iw_dup(b.data, b.len);
    ps.p[i].length = b.len;
    iw_buf_free(&b);
    r += n;
  }
  if (r != t->rows) {
    check_fail(__FILE__, __LINE__, "shape covers %lld rows, table has %lld", (long long)r, (long long)t->rows);
    abort();
  }
  return ps;
}

/* ------------------------------------------------------------ the answers */

/* What every read must satisfy, counted by funnel from the calls made. */
static void check_stats(struct funnel_table *t, const struct parts *ps) {
  struct funnel_read_stats s;
  struct funnel_error err;
  if (!CHECK_OK(funnel_table_stats(t, &s, &err), &err)) return;
  int64_t empty = 0, bytes_out = 0;
  for (size_t i = 0; i < ps->n; i++) empty += ps->p[i].length == 0;
  for (int i = 0; i < funnel_table_num_columns(t); i++) {
    struct funnel_column c;
    funnel_table_column(t, i, &c, NULL);
    bytes_out += c.validity.size + c.offsets.size + c.data.size;
  }
  CHECK_EQ_I64(s.partitions, (int64_t)ps->n);
  CHECK_EQ_I64(s.empty_partitions, empty);
  CHECK_EQ_I64(s.rows, funnel_table_num_rows(t));
  CHECK_EQ_I64(s.columns, funnel_table_num_columns(t));
  CHECK(s.batches <= ps->batches);
  CHECK_READ_INVARIANTS(&s);
  if (check_on_device(&s)) {
    CHECK(s.concat_launches >= 2); /* parse (and scan over 1024 partitions), concat */
  } else if (s.segments > 0) {
    if (s.device_parsed > 0) /* after an attempt: its parse, its concat (which copied
                                nothing), and scan when over 1024 partitions */
      CHECK(s.concat_launches == 3 || s.concat_launches == 4);
    else
      CHECK_EQ_I64(s.concat_launches, 1);
    CHECK_EQ_I64(s.column_sets, 1);
    CHECK(s.h2d_copies >= 1);
  } else {
    CHECK_EQ_I64(s.concat_launches, 0);
  }
  CHECK_EQ_I64(s.bytes_out, bytes_out);
  CHECK(s.parse_ns >= 0 && s.plan_ns >= 0 && s.submit_ns >= 0);
}

/* Reads `ps` with `rd` (on `stream`), checks the result against `src` and
 * the stats (and, when `on_device`, that the device path took every
 * partition), frees the table, then the partitions. */
static void read_and_check_on(struct funnel_reader *rd, const struct table_src *src,
                              struct parts *ps, uintptr_t stream, int on_device) {
  struct funnel_table *t = NULL;
  struct funnel_error err;
  if (CHECK_OK(funnel_reader_read_async(rd, ps->p, ps->n, stream, &t, &err), &err)) {
    /* the shape is known before the work completes */
    CHECK_EQ_I64(funnel_table_num_rows(t), src->rows);
    CHECK_OK(funnel_table_wait(t, &err), &err);
    CHECK_EQ_I64(funnel_table_is_ready(t), 1);
    check_stats(t, ps);
    struct funnel_read_stats st;
    if (on_device && CHECK_OK(funnel_table_stats(t, &st, &err), &err)) {
      CHECK(check_on_device(&st));
      CHECK_EQ_I64(st.device_left, 0);
    }
    table_check_read(t, src);
    funnel_table_free(t);
  }
  parts_free(ps); /* only now: after the wait */
}

static void read_and_check(struct funnel_reader *rd, const struct table_src *src,
                           struct parts *ps, uintptr_t stream) {
  read_and_check_on(rd, src, ps, stream, 0);
}

/* Reads `src` cut by `sh` with a reader without a schema (or with one when
 * the shape has bare partitions); by the device path, forced, which must
 * take every partition, when `on_device`. */
static void round_trip_on(const struct table_src *src, const struct shape *sh, uint64_t seed,
                          int on_device) {
  int needs_schema = sh->framing == BARE || sh->empty_framing == BARE;
  struct iw_buf sb = schema_bytes(src->schema);
  struct funnel_reader *rd = needs_schema ? reader_new(sb.data, sb.len) : reader_new(NULL, 0);
  iw_buf_free(&sb);
  struct funnel_error err;
  if (on_device)
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, FUNNEL_PARSE_DEVICE, &err), &err);
  struct parts ps = make_parts(src, sh, seed);
  read_and_check_on(rd, src, &ps, 0, on_device);
  funnel_reader_free(rd);
}

static void round_trip(const struct table_src *src, const struct shape *sh, uint64_t seed) {
  round_trip_on(src, sh, seed, 0);
}

/* Rows of n partitions: random in [0, max], 0 for about empty_permille. */
static int64_t *random_rows(int n, int64_t max, int empty_permille, uint64_t *rng, int64_t *total) {
  int64_t *rows = calloc((size_t)n, sizeof(int64_t));
  *total = 0;
  for (int i = 0; i < n; i++) {
    rows[i] = (int)check_rand_below(rng, 1000) < empty_permille ? 0
                                                               : (int64_t)check_rand_below(rng, (uint64_t)max + 1);
    *total += rows[i];
  }
  return rows;
}

/* --------------------------------------------------------------- devices */

static void device_open_cuda_without_gpu_is_no_device(void) {
  struct funnel_device *dev = (struct funnel_device *)&dev; /* must stay untouched */
  struct funnel_error err;
  int st = funnel_device_open("cuda", &dev, &err);
  if (st == FUNNEL_OK) {
    /* a host with a GPU and a cuda build: nothing to check here */
    CHECK_EQ_STR(funnel_device_backend(dev), "cuda");
    funnel_device_close(dev);
    return;
  }
  if (CHECK_STATUS(st, FUNNEL_ERR_NO_DEVICE, &err)) CHECK(strstr(err.message, "CUDA") != NULL);
  CHECK(dev == (struct funnel_device *)&dev);
}

static void device_open_auto_falls_back_to_cpu(void) {
  struct funnel_device *cuda = NULL, *dev = NULL;
  struct funnel_error err;
  int has_cuda = funnel_device_open("cuda", &cuda, NULL) == FUNNEL_OK;
  funnel_device_close(cuda);
  if (CHECK_OK(funnel_device_open("auto", &dev, &err), &err)) {
    CHECK_EQ_STR(funnel_device_backend(dev), has_cuda ? "cuda" : "cpu");
    funnel_device_close(dev);
  }
  if (CHECK_OK(funnel_device_open("cpu", &dev, &err), &err)) {
    CHECK_EQ_STR(funnel_device_backend(dev), "cpu");
    funnel_device_close(dev);
  }
}

static void device_open_rejects_bad_arguments(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (CHECK_STATUS(funnel_device_open("gpu", &dev, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err))
    CHECK(strstr(err.message, "gpu") != NULL);
  CHECK_STATUS(funnel_device_open(NULL, &dev, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_device_open("cpu", NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_device_open("gpu", &dev, NULL), FUNNEL_ERR_INVALID_ARGUMENT, NULL);
  CHECK(dev == NULL);
  funnel_device_close(NULL);
  CHECK_EQ_STR(funnel_device_backend(NULL), "none");
}

/* ---------------------------------------------------------------- errors */

static void reader_create_rejects_bad_schema(void) {
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  struct iw_buf b = {0};
  struct iw_layout bl;
  /* a stream whose first message is a RecordBatch */
  static const int64_t k[1] = {5};
  struct iw_column c[3] = {{.length = 1, .data = k, .data_length = 8},
                           {.length = 1, .offsets = "\0\0\0\0\1\0\0\0", .offsets_length = 8, .data = "x", .data_length = 1},
                           {.length = 1, .data = "\1", .data_length = 1}};
  iw_batch_message(&b, &small_schema, 1, c, NULL, &bl);
  CHECK_STATUS(funnel_reader_create(device(), b.data, b.len, &rd, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  iw_buf_free(&b);
  struct iw_buf s = schema_bytes(&small_schema);
  if (CHECK_STATUS(funnel_reader_create(device(), s.data, s.len - 1, &rd, &err), FUNNEL_ERR_MALFORMED, &err))
    CHECK_EQ_I64(err.partition, -1);
  CHECK_STATUS(funnel_reader_create(device(), NULL, 10, &rd, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_reader_create(NULL, s.data, s.len, &rd, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_reader_create(device(), s.data, s.len, NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  iw_buf_free(&s);
  static const struct iw_field view[] = {{.type = IW_TYPE_UTF8_VIEW, .name = "v", .nullable = 1}};
  static const struct iw_schema ls = {1, view, 0};
  s = schema_bytes(&ls);
  if (CHECK_STATUS(funnel_reader_create(device(), s.data, s.len, &rd, &err), FUNNEL_ERR_UNSUPPORTED, &err))
    CHECK_EQ_I64(err.column, 0);
  iw_buf_free(&s);
  CHECK(rd == NULL);
}

static void read_rejects_invalid_arguments(void) {
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  struct funnel_partition p[2] = {{"", 0}, {NULL, 16}};
  CHECK_STATUS(funnel_reader_read_async(NULL, p, 1, 0, &t, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_reader_read_async(rd, p, 1, 0, NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_reader_read_async(rd, NULL, 3, 0, &t, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  if (CHECK_STATUS(funnel_reader_read_async(rd, p, 2, 0, &t, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err))
    CHECK_EQ_I64(err.partition, 1);
  CHECK(t == NULL);
  CHECK_STATUS(funnel_table_wait(NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_table_stats(NULL, NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_STATUS(funnel_table_copy_to_host(NULL, NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  CHECK_EQ_I64(funnel_table_is_ready(NULL), 0);
  CHECK_EQ_I64(funnel_table_num_rows(NULL), 0);
  funnel_table_free(NULL);
  funnel_reader_free(NULL);
  funnel_reader_free(rd);
}

static void read_rejects_missing_schema(void) {
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  /* zero partitions */
  CHECK_STATUS(funnel_reader_read_async(rd, NULL, 0, 0, &t, &err), FUNNEL_ERR_NO_SCHEMA, &err);
  /* empty partitions only */
  struct funnel_partition empty[3] = {{"", 0}, {"", 0}, {"", 0}};
  CHECK_STATUS(funnel_reader_read_async(rd, empty, 3, 0, &t, &err), FUNNEL_ERR_NO_SCHEMA, &err);
  /* bare batches: partitions 0 and 1 are empty, 2 holds a batch */
  struct table_src src = table_random(&small_schema, 30, 100, 11);
  static const int64_t rows[4] = {0, 0, 30, 0};
  struct shape sh = {.n_parts = 4, .part_rows = rows, .max_batches = 2, .framing = BARE, .empty_framing = ZERO_BYTES};
  struct parts ps = make_parts(&src, &sh, 1);
  if (CHECK_STATUS(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), FUNNEL_ERR_NO_SCHEMA, &err))
    CHECK_EQ_I64(err.partition, 2);
  CHECK(t == NULL);
  parts_free(&ps); /* a failed read enqueued nothing */
  table_src_free(&src);
  funnel_reader_free(rd);
}

static void read_rejects_schema_mismatch(void) {
  struct table_src a = table_random(&small_schema, 40, 100, 12);
  /* the same names, column 2 a different type */
  struct iw_field f[3] = {small_fields[0], small_fields[1], small_fields[2]};
  f[2].type = FUNNEL_TYPE_INT8;
  struct iw_schema other = {3, f, 0};
  struct table_src b = table_random(&other, 8, 100, 13);
  static const int64_t rows_a[5] = {10, 10, 0, 10, 10}, rows_b[1] = {8};
  struct shape sa = {.n_parts = 5, .part_rows = rows_a, .max_batches = 2, .framing = STREAM, .empty_framing = ZERO_BYTES};
  struct shape sb = {.n_parts = 1, .part_rows = rows_b, .max_batches = 1, .framing = STREAM};
  struct parts pa = make_parts(&a, &sa, 2), pb = make_parts(&b, &sb, 3);
  /* partition 3 comes from the other schema */
  struct funnel_partition mixed[5] = {pa.p[0], pa.p[1], pa.p[2], pb.p[0], pa.p[4]};
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  if (CHECK_STATUS(funnel_reader_read_async(rd, mixed, 5, 0, &t, &err), FUNNEL_ERR_SCHEMA_MISMATCH, &err)) {
    CHECK_EQ_I64(err.partition, 3);
    CHECK_EQ_I64(err.column, 2);
  }
  funnel_reader_free(rd);
  /* the reader's schema against a partition's */
  struct iw_buf s = schema_bytes(&other);
  rd = reader_new(s.data, s.len);
  iw_buf_free(&s);
  if (CHECK_STATUS(funnel_reader_read_async(rd, pa.p, 5, 0, &t, &err), FUNNEL_ERR_SCHEMA_MISMATCH, &err)) {
    CHECK_EQ_I64(err.partition, 0);
    CHECK_EQ_I64(err.column, 2);
    CHECK(strstr(err.message, "reader") != NULL);
  }
  funnel_reader_free(rd);
  /* one column fewer: the first column past the shorter schema */
  struct iw_schema two = {2, small_fields, 0};
  struct table_src c = table_random(&two, 8, 100, 14);
  struct parts pc = make_parts(&c, &sb, 4);
  struct funnel_partition fewer[2] = {pa.p[0], pc.p[0]};
  rd = reader_new(NULL, 0);
  if (CHECK_STATUS(funnel_reader_read_async(rd, fewer, 2, 0, &t, &err), FUNNEL_ERR_SCHEMA_MISMATCH, &err)) {
    CHECK_EQ_I64(err.partition, 1);
    CHECK_EQ_I64(err.column, 2);
  }
  funnel_reader_free(rd);
  CHECK(t == NULL);
  parts_free(&pa);
  parts_free(&pb);
  parts_free(&pc);
  table_src_free(&a);
  table_src_free(&b);
  table_src_free(&c);
}

static void read_rejects_malformed_partition_and_names_it(void) {
  struct table_src src = table_random(&small_schema, 80, 100, 15);
  static const int64_t rows[8] = {10, 10, 10, 10, 10, 10, 10, 10};
  struct shape sh = {.n_parts = 8, .part_rows = rows, .max_batches = 2, .framing = STREAM};
  struct parts ps = make_parts(&src, &sh, 5);
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  ps.p[5].length -= 11; /* cuts into the last batch's body */
  if (CHECK_STATUS(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), FUNNEL_ERR_MALFORMED, &err)) {
    CHECK_EQ_I64(err.partition, 5);
    CHECK(err.offset >= 0 && err.offset < (int64_t)ps.p[5].length);
    CHECK(strstr(err.message, "partition 5") != NULL);
  }
  CHECK(t == NULL);
  funnel_reader_free(rd);
  parts_free(&ps);
  table_src_free(&src);
}

/* Enough partitions that they are parsed on several host threads: of two
 * bad ones, the error names the first, as a serial parse would. */
static void read_names_the_first_of_many_bad_partitions(void) {
  enum { N = 600 };
  struct table_src src = table_random(&small_schema, 3 * N, 100, 16);
  int64_t rows[N];
  for (int i = 0; i < N; i++) rows[i] = 3;
  struct shape sh = {.n_parts = N, .part_rows = rows, .max_batches = 1, .framing = STREAM};
  struct parts ps = make_parts(&src, &sh, 6);
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  ps.p[211].length -= 11; /* both cut into their batch's body */
  ps.p[170].length -= 11;
  if (CHECK_STATUS(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), FUNNEL_ERR_MALFORMED, &err)) {
    CHECK_EQ_I64(err.partition, 170);
    CHECK(strstr(err.message, "partition 170") != NULL);
  }
  CHECK(t == NULL);
  ps.p[170].length += 11;
  if (CHECK_STATUS(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), FUNNEL_ERR_MALFORMED, &err))
    CHECK_EQ_I64(err.partition, 211);
  ps.p[211].length += 11;
  if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) {
    CHECK_EQ_I64(funnel_table_num_rows(t), 3 * N);
    funnel_table_free(t);
  }
  funnel_reader_free(rd);
  parts_free(&ps);
  table_src_free(&src);
}

/* Two partitions of 1.1e9 string bytes each overflow utf8's 32-bit
 * offsets. The bytes are an untouched anonymous mapping: parse and plan
 * read only the headers and the offsets, and the read fails before any
 * copy. */
static void read_rejects_utf8_over_int32_offsets(void) {
  static const struct iw_field f[] = {{.type = FUNNEL_TYPE_UTF8, .name = "big", .nullable = 0}};
  static const struct iw_schema s = {1, f, 0};
  const int64_t chars = 1100000000;
  struct iw_buf b = {0};
  struct iw_layout bl;
  int32_t offs[3] = {0, 1 << 29, (int32_t)chars};
  struct iw_column c = {.length = 2, .offsets = offs, .offsets_length = 12, .data = "x", .data_length = 1};
  iw_schema_message(&b, &s, NULL, NULL);
  iw_batch_message(&b, &s, 2, &c, NULL, &bl);
  /* buffers: validity, offsets (padded to 16), data at 16 */
  int64_t data_at;
  memcpy(&data_at, b.data + bl.buffers + 32, 8);
  const int64_t body_length = data_at + chars;
  memcpy(b.data + bl.buffers + 40, &chars, 8);
  memcpy(b.data + bl.body_length_field, &body_length, 8);
  const size_t size = bl.body + (size_t)body_length;
  uint8_t *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!CHECK(m != MAP_FAILED)) {
    iw_buf_free(&b);
    return;
  }
  memcpy(m, b.data, bl.body + (size_t)data_at);
  struct funnel_partition p[2] = {{m, size}, {m, size}};
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  if (CHECK_STATUS(funnel_reader_read_async(rd, p, 2, 0, &t, &err), FUNNEL_ERR_LIMIT, &err)) {
    CHECK_EQ_I64(err.column, 0);
    CHECK(strstr(err.message, "large_utf8") != NULL);
  }
  CHECK(t == NULL);
  funnel_reader_free(rd);
  munmap(m, size);
  iw_buf_free(&b);
}

/* ------------------------------------------------ the device path's errors */

/* A partition the device path may not take sends the whole read to the
 * host path (funnel.h, FUNNEL_PARSE_DEVICE), whose error must be the one a
 * FUNNEL_PARSE_HOST read gives: same code, partition, column, offset and
 * message. The partitions are small_schema's (k int64: buffers 0 1, v
 * utf8: 2 3 4, b bool: 5 6), each a Schema (unless bare), one batch and an
 * end-of-stream marker; a case breaks one or two of them. */

enum { DP_BAD_ROWS = 12 }; /* rows of a partition a case breaks */

static const struct iw_field renamed_fields[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "k", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "w", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
};
static const struct iw_schema renamed_schema = {3, renamed_fields, 0};

static int64_t get64(const uint8_t *p) {
  int64_t v;
  memcpy(&v, p, 8);
  return v;
}
static void put64(uint8_t *p, int64_t v) { memcpy(p, &v, 8); }
static int32_t get32(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}
static void put32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

/* Buffer k's {offset, length} and column c's {length, null_count} entries
 * in the batch message at `l`. */
static uint8_t *buffer_entry(uint8_t *b, const struct iw_layout *l, int k) {
  return b + l->buffers + 16 * (size_t)k;
}
static uint8_t *node_entry(uint8_t *b, const struct iw_layout *l, int c) {
  return b + l->nodes + 16 * (size_t)c;
}
static uint8_t *buffer_bytes(uint8_t *b, const struct iw_layout *l, int k) {
  return b + l->body + get64(buffer_entry(b, l, k));
}

/* The first column with a validity buffer of some bytes and a null, or -1. */
static int column_with_nulls(uint8_t *b, const struct iw_layout *l) {
  static const int validity[3] = {0, 2, 5};
  for (int c = 0; c < 3; c++)
    if (get64(node_entry(b, l, c) + 8) > 0 && get64(buffer_entry(b, l, validity[c]) + 8) > 0)
      return validity[c];
  return -1;
}

/* Each breaks the partition at `b` (its batch message at `l`), shortening
 * it through *length if need be; false when the partition cannot be broken
 * so (a test bug). */
typedef bool (*dp_break)(uint8_t *b, size_t *length, const struct iw_layout *l);

static bool cut_in_body(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)b;
  *length = l->body + l->body_length - 3;
  return true;
}
static bool cut_in_metadata(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)b;
  *length = l->metadata + 6;
  return true;
}
static bool string_offset_falls(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  uint8_t *o = buffer_bytes(b, l, 3);
  const int64_t k = DP_BAD_ROWS - 1; /* interior: the ends stay as they were */
  put32(o + 4 * k, get32(o + 4 * (k - 1)) - 1);
  return true;
}
static bool string_offsets_past_data(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put32(buffer_bytes(b, l, 3) + 4 * DP_BAD_ROWS, (int32_t)get64(buffer_entry(b, l, 4) + 8) + 1);
  return true;
}
static bool null_count_off_by_one(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  const int k = column_with_nulls(b, l);
  if (k < 0) return false;
  uint8_t *nc = node_entry(b, l, k == 0 ? 0 : k == 2 ? 1 : 2) + 8;
  put64(nc, get64(nc) - 1);
  return true;
}
static bool validity_too_short(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  const int k = column_with_nulls(b, l);
  if (k < 0) return false;
  put64(buffer_entry(b, l, k) + 8, 1); /* 12 rows need 2 bytes */
  return true;
}
static bool buffer_past_body(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  uint8_t *e = buffer_entry(b, l, 4);
  put64(e + 8, (int64_t)l->body_length - get64(e) + 1);
  return true;
}
static bool buffer_offset_negative(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put64(buffer_entry(b, l, 1), -8);
  return true;
}
static bool int64_data_too_short(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put64(buffer_entry(b, l, 1) + 8, 8 * DP_BAD_ROWS - 1);
  return true;
}
static bool bool_data_too_short(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put64(buffer_entry(b, l, 6) + 8, 1);
  return true;
}
static bool node_length_differs(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put64(node_entry(b, l, 2), DP_BAD_ROWS + 1);
  return true;
}
static bool null_count_negative(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put64(node_entry(b, l, 0) + 8, -1);
  return true;
}
static bool batch_length_negative(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put64(b + l->length_field, -1);
  return true;
}
static bool body_length_past_end(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put64(b + l->body_length_field, (int64_t)l->body_length + 64);
  return true;
}
static bool metadata_length_past_end(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put32(b + l->message + 4, 0x7FFF0000);
  return true;
}
static bool metadata_version_v3(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  b[l->version_field] = 2;
  b[l->version_field + 1] = 0;
  return true;
}
static bool header_type_dictionary(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  b[l->header_type_field] = 2;
  return true;
}
static bool root_offset_past_metadata(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)length;
  put32(b + l->metadata, (int32_t)l->metadata_length + 4);
  return true;
}
static bool no_break(uint8_t *b, size_t *length, const struct iw_layout *l) {
  (void)b, (void)length, (void)l;
  return true;
}

struct dp_case {
  const char *name;
  dp_break fn;
  int compression;                /* the bad partitions' batches say LZ4_FRAME, bodies as given */
  const struct iw_schema *schema; /* the bad partitions' Schema message; NULL: the read's */
};

static const struct dp_case dp_cases[] = {
    {"truncated in the body", cut_in_body, 0, NULL},
    {"truncated in the metadata", cut_in_metadata, 0, NULL},
    {"a string offset falls", string_offset_falls, 0, NULL},
    {"string offsets end past the data", string_offsets_past_data, 0, NULL},
    {"a null count the validity bits contradict", null_count_off_by_one, 0, NULL},
    {"a validity buffer shorter than the rows", validity_too_short, 0, NULL},
    {"a buffer ends past the body", buffer_past_body, 0, NULL},
    {"a buffer offset is negative", buffer_offset_negative, 0, NULL},
    {"an int64 data buffer one byte short", int64_data_too_short, 0, NULL},
    {"a bool data buffer short", bool_data_too_short, 0, NULL},
    {"a field node length differs from the batch", node_length_differs, 0, NULL},
    {"a negative null count", null_count_negative, 0, NULL},
    {"a negative batch length", batch_length_negative, 0, NULL},
    {"bodyLength past the partition", body_length_past_end, 0, NULL},
    {"metadata length past the partition", metadata_length_past_end, 0, NULL},
    {"metadata version V3", metadata_version_v3, 0, NULL},
    {"header type DictionaryBatch", header_type_dictionary, 0, NULL},
    {"root offset past the metadata", root_offset_past_metadata, 0, NULL},
    {"a compressed body", no_break, 1, NULL},
    {"a Schema naming a column differently", no_break, 0, &renamed_schema},
};

/* How the partitions of a run are written and read. */
struct dp_run {
  int n;           /* partitions */
  int bad, bad2;   /* the partitions a case breaks (bad2 -1: one only) */
  int bare;        /* batches only, the reader has the schema */
  int with_schema; /* the reader has the schema (always when bare) */
};

/* n partitions of src's rows; partition i's batch layout in lay[i]. Rows:
 * DP_BAD_ROWS for the bad ones, else 0 to 4, some zero-byte partitions. */
static struct parts dp_parts(const struct table_src *src, const struct dp_run *run,
                             const struct dp_case *c, struct iw_layout *lay) {
  struct parts ps = {(size_t)run->n, calloc((size_t)run->n + 1, sizeof(struct funnel_partition)), 0};
  int64_t r = 0;
  for (int i = 0; i < run->n; i++) {
    const bool bad = i == run->bad || i == run->bad2;
    const int64_t rows = bad ? DP_BAD_ROWS : i % 5;
    memset(&lay[i], 0, sizeof(lay[i]));
    if (!bad && i % 13 == 7) continue; /* an empty shuffle block: no bytes */
    /* a compressed body that is not: the bytes are as given (header_only) */
    struct iw_options o = {.compression = bad && c != NULL ? c->compression : 0,
                           .header_only = 1};
    struct iw_encode enc = {.layout = &lay[i]};
    struct iw_buf b = {0};
    if (!run->bare)
      iw_schema_message(&b, bad && c != NULL && c->schema ? c->schema : src->schema, NULL, NULL);
    iw_batch_from_cols(&b, src->schema, src->cols, r, r + rows, &enc, &o);
    ps.batches++;
    if (!run->bare) iw_eos(&b, NULL);
    ps.p[i].data = iw_dup(b.data, b.len);
    ps.p[i].length = b.len;
    iw_buf_free(&b);
    r += rows;
    if (r + DP_BAD_ROWS > src->rows) r = 0; /* the rows repeat; no answer is checked */
  }
  return ps;
}

/* Reads ps with `parse`: the status, and the error in *err. */
static int dp_read(struct funnel_reader *rd, const struct parts *ps, int parse,
                   struct funnel_error *err) {
  struct funnel_error e;
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse, &e), &e);
  struct funnel_table *t = NULL;
  memset(err, 0, sizeof(*err));
  const int st = funnel_reader_read_async(rd, ps->p, ps->n, 0, &t, err);
  if (st == FUNNEL_OK) {
    funnel_table_wait(t, NULL);
    funnel_table_free(t);
  } else {
    CHECK(t == NULL);
  }
  return st;
}

static void dp_run_case(const struct table_src *src, const struct dp_run *run,
                        const struct dp_case *c) {
  struct iw_layout *lay = calloc((size_t)run->n, sizeof(*lay));
  struct parts ps = dp_parts(src, run, c, lay);
  struct iw_buf sb = schema_bytes(src->schema);
  struct funnel_reader *rd = run->with_schema || run->bare ? reader_new(sb.data, sb.len)
                                                           : reader_new(NULL, 0);
  bool broken = true;
  for (int k = 0; k < 2; k++) {
    const int i = k == 0 ? run->bad : run->bad2;
    if (i >= 0) broken &= CHECK(c->fn((uint8_t *)ps.p[i].data, &ps.p[i].length, &lay[i]));
  }
  struct funnel_error host, dev;
  const int st_host = broken ? dp_read(rd, &ps, FUNNEL_PARSE_HOST, &host) : FUNNEL_OK;
  const int st_dev = broken ? dp_read(rd, &ps, FUNNEL_PARSE_DEVICE, &dev) : FUNNEL_OK;
  if (broken && CHECK(st_host != FUNNEL_OK)) {
    char name[32];
    const int first = run->bad2 >= 0 && run->bad2 < run->bad ? run->bad2 : run->bad;
    snprintf(name, sizeof(name), "partition %d", first);
    CHECK_EQ_I64(host.partition, first);
    CHECK(strstr(host.message, name) != NULL);
    CHECK_EQ_I64(st_dev, st_host);
    CHECK_EQ_I64(dev.code, host.code);
    CHECK_EQ_I64(dev.partition, host.partition);
    CHECK_EQ_I64(dev.column, host.column);
    CHECK_EQ_I64(dev.offset, host.offset);
    CHECK_EQ_STR(dev.message, host.message);
  }
  funnel_reader_free(rd);
  iw_buf_free(&sb);
  parts_free(&ps);
  free(lay);
}

/* The same partitions unbroken: the device path takes them all, so what
 * sends a case's read to the host is the break. */
static void dp_check_unbroken_on_device(const struct table_src *src, const struct dp_run *run) {
  struct iw_layout *lay = calloc((size_t)run->n, sizeof(*lay));
  struct parts ps = dp_parts(src, run, NULL, lay);
  struct iw_buf sb = schema_bytes(src->schema);
  struct funnel_reader *rd = run->with_schema || run->bare ? reader_new(sb.data, sb.len)
                                                           : reader_new(NULL, 0);
  struct funnel_error err;
  struct funnel_table *t = NULL;
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, FUNNEL_PARSE_DEVICE, &err), &err);
  if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) {
    struct funnel_read_stats s;
    CHECK_OK(funnel_table_wait(t, &err), &err);
    if (CHECK_OK(funnel_table_stats(t, &s, &err), &err)) {
      CHECK(check_on_device(&s));
      CHECK_EQ_I64(s.device_parsed, run->n);
      CHECK_READ_INVARIANTS(&s);
    }
    funnel_table_free(t);
  }
  funnel_reader_free(rd);
  iw_buf_free(&sb);
  parts_free(&ps);
  free(lay);
}

static void read_device_parse_fails_as_host_parse(void) {
  struct table_src src = table_random(&small_schema, 400, 300, 71);
  static const struct dp_run runs[] = {
      {.n = 1, .bad = 0, .bad2 = -1},
      {.n = 8, .bad = 5, .bad2 = -1},
      {.n = 300, .bad = 0, .bad2 = -1},
      {.n = 300, .bad = 137, .bad2 = -1},
      {.n = 300, .bad = 299, .bad2 = -1},
      {.n = 300, .bad = 211, .bad2 = 170}, /* the error names the first */
      {.n = 300, .bad = 137, .bad2 = -1, .with_schema = 1},
      {.n = 300, .bad = 137, .bad2 = -1, .bare = 1},
      {.n = 2000, .bad = 1999, .bad2 = -1},
  };
  for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
    const struct dp_run *run = &runs[r];
    check_context("%d partitions, bad %d and %d%s%s (unbroken)", run->n, run->bad, run->bad2,
                  run->bare ? ", bare" : "", run->with_schema ? ", reader schema" : "");
    dp_check_unbroken_on_device(&src, run);
    for (size_t k = 0; k < sizeof(dp_cases) / sizeof(dp_cases[0]); k++) {
      const struct dp_case *c = &dp_cases[k];
      /* bare partitions have no Schema to differ; a first partition of
       * another schema makes every other partition the odd one */
      if (c->schema != NULL && (run->bare || run->bad == 0)) continue;
      check_context("%d partitions, bad %d and %d%s%s: %s", run->n, run->bad, run->bad2,
                    run->bare ? ", bare" : "", run->with_schema ? ", reader schema" : "", c->name);
      dp_run_case(&src, run, c);
    }
  }
  check_context("%s", "");
  table_src_free(&src);
}

/* The device path allocates the output before anything is counted, from
 * an upper bound of its size (dread.c). The output outgrows the partitions
 * most where a bitmap appears that the partitions lacked: boolean and
 * empty-string columns whose nulls lie in one partition only (the others
 * carry no validity), sent bare (no schema message). The read must stay
 * on the device, and give the table. */
static void read_densest_output_on_the_device(void) {
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_BOOL, .name = "b1", .nullable = 1},
      {.type = FUNNEL_TYPE_BOOL, .name = "b2", .nullable = 1},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
      {.type = FUNNEL_TYPE_INT8, .name = "i", .nullable = 1},
  };
  static const struct iw_schema schema = {4, fields, 0};
  enum { PARTS = 300, ROWS = 2000 };
  struct table_src src = table_random(&schema, (int64_t)PARTS * ROWS, 0, 91);
  for (int c = 0; c < 4; c++) {
    struct iw_col *col = &src.cols[c];
    if (col->ends != NULL) /* every string empty */
      for (int64_t r = 0; r < src.rows; r++) col->ends[r] = 0;
    for (int64_t r = 0; r < ROWS; r += 7) col->valid[r] = 0; /* nulls in the first partition only */
  }
  int64_t *rows = calloc(PARTS, sizeof(int64_t));
  for (int p = 0; p < PARTS; p++) rows[p] = ROWS;
  struct shape sh = {.n_parts = PARTS, .part_rows = rows, .max_batches = 1, .framing = BARE};
  round_trip_on(&src, &sh, 92, 1);
  free(rows);
  table_src_free(&src);
}

/* The cuda concat copies a fixed-width piece of at least
 * FUNNEL__DP_COPY_PAIRS_MIN 8-byte words 16 bytes a lane where its place in
 * the output is 16-byte aligned: from a source 16-byte aligned, or 8 bytes
 * past that (each pair then from two aligned ones). Partitions of 47 to
 * 200 rows, even and odd, so that the pieces of the int64 and float64
 * columns start at both alignments in the output and in the partitions
 * (a column after one of an odd number of rows lies 8 bytes off), and
 * pieces just under and over the bound; sent with and without the schema
 * message, which moves every body. The cpu backend copies them by words. */
static void read_long_fixed_width_pieces_at_every_alignment(void) {
  static const int64_t cycle[] = {96, 97, 48, 47, 49, 130, 61, 200, 95, 1, 0, 64};
  enum { PARTS = 48, N = sizeof(cycle) / sizeof(cycle[0]) };
  int64_t rows[PARTS], total = 0;
  for (int p = 0; p < PARTS; p++) total += rows[p] = cycle[(p + p / N) % N];
  struct table_src src = table_random(&long_fixed_schema, total, 100, 97);
  static const int framings[] = {STREAM, BARE};
  for (int k = 0; k < 2; k++) {
    check_context("%s", framings[k] == STREAM ? "streams" : "bare batches");
    struct shape sh = {.n_parts = PARTS, .part_rows = rows, .max_batches = 1,
                       .framing = framings[k], .empty_framing = framings[k]};
    round_trip_on(&src, &sh, 98, 1);
  }
  table_src_free(&src);
}

/* Over 2,048 partitions the cuda parse gives each a group of fewer lanes
 * than a warp (funnel__dp_parse_lanes: 16 for 3,000, 8 for 9,000), and
 * sums its tiles by 256 / lanes partitions. */
static void read_many_partitions_on_the_device(int64_t n, uint64_t seed) {
  uint64_t rng = seed;
  int64_t total;
  int64_t *rows = random_rows(n, 4, 100, &rng, &total);
  struct table_src src = table_random(&every_schema, total, 200, seed + 1);
  struct shape sh = {.n_parts = n, .part_rows = rows, .max_batches = 1, .framing = STREAM,
                     .empty_framing = ZERO_BYTES, .enc = {.vary = 1, .junk_padding = 1}};
  round_trip_on(&src, &sh, seed + 2, 1);
  table_src_free(&src);
  free(rows);
}
static void read_3000_partitions_on_the_device(void) { read_many_partitions_on_the_device(3000, 96); }
static void read_9000_partitions_on_the_device(void) { read_many_partitions_on_the_device(9000, 93); }

/* FUNNEL_PARSE_AUTO takes the device path by the partitions' count and
 * their size on average (dread.c, funnel__dpath_wanted; tuning.h,
 * FUNNEL__DPATH_MIN_PARTS and _SMALL): from 64 partitions of at most 16
 * KiB, from 128 of more. Each read is checked whole, and the partitions'
 * average is checked to lie on the side of 16 KiB the case is about. */
static void read_auto_takes_the_device_path_by_count_and_size(void) {
  static const struct {
    int n;
    int64_t rows;   /* each partition's */
    int large;      /* over 16 KiB on average */
    int on_device;
  } cases[] = {
      {63, 20, 0, 0},   {64, 20, 0, 1},    {127, 20, 0, 1},   {64, 2000, 1, 0},
      {127, 2000, 1, 0}, {128, 2000, 1, 1},  {200, 20, 0, 1},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    check_context("%d partitions of %lld rows", cases[k].n, (long long)cases[k].rows);
    const int n = cases[k].n;
    int64_t *rows = malloc((size_t)n * sizeof(int64_t));
    for (int i = 0; i < n; i++) rows[i] = cases[k].rows;
    struct table_src src = table_random(&small_schema, (int64_t)n * cases[k].rows, 100, 500 + k);
    struct shape sh = {.n_parts = n, .part_rows = rows, .max_batches = 1, .framing = STREAM,
                       .empty_framing = ZERO_BYTES};
    struct parts ps = make_parts(&src, &sh, 600 + k);
    int64_t bytes = 0;
    for (int i = 0; i < n; i++) bytes += (int64_t)ps.p[i].length;
    if (!CHECK_EQ_I64(bytes > ((int64_t)16 << 10) * n, cases[k].large))
      fprintf(stderr, "  %lld bytes a partition\n", (long long)(bytes / n));
    struct funnel_reader *rd = reader_new(NULL, 0);
    struct funnel_table *t = NULL;
    struct funnel_error err;
    if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) {
      CHECK_OK(funnel_table_wait(t, &err), &err);
      check_stats(t, &ps);
      struct funnel_read_stats st;
      if (CHECK_OK(funnel_table_stats(t, &st, &err), &err)) {
        CHECK_EQ_I64(st.device_parsed, cases[k].on_device ? n : 0);
        CHECK_EQ_I64(check_on_device(&st), cases[k].on_device);
      }
      table_check_read(t, &src);
      funnel_table_free(t);
    }
    funnel_reader_free(rd);
    parts_free(&ps);
    table_src_free(&src);
    free(rows);
  }
  check_context("%s", "");
}

/* ----------------------------------------------------------- round trips */

static void read_every_type_one_partition(void) {
  struct table_src src = table_random(&every_schema, 300, 150, 21);
  static const int64_t rows[1] = {300};
  struct shape sh = {.n_parts = 1, .part_rows = rows, .max_batches = 1, .framing = STREAM};
  round_trip(&src, &sh, 1);
  table_src_free(&src);
}

static void read_every_type_two_partitions(void) {
  struct table_src src = table_random(&every_schema, 301, 150, 22);
  static const int64_t rows[2] = {133, 168};
  struct shape sh = {.n_parts = 2, .part_rows = rows, .max_batches = 1, .framing = STREAM};
  round_trip(&src, &sh, 2);
  table_src_free(&src);
}

static void read_every_type_200_partitions(void) {
  uint64_t rng = 23;
  int64_t total;
  int64_t *rows = random_rows(200, 40, 100, &rng, &total);
  struct table_src src = table_random(&every_schema, total, 200, 24);
  struct shape sh = {.n_parts = 200, .part_rows = rows, .max_batches = 3, .framing = STREAM,
                     .empty_framing = ZERO_BYTES, .legacy_permille = 100,
                     .enc = {.vary = 1, .junk_padding = 1}};
  round_trip(&src, &sh, 3);
  table_src_free(&src);
  free(rows);
}

static void read_1000_partitions(void) {
  uint64_t rng = 25;
  int64_t total;
  int64_t *rows = random_rows(1000, 9, 150, &rng, &total);
  struct table_src src = table_random(&every_schema, total, 300, 26);
  struct shape sh = {.n_parts = 1000, .part_rows = rows, .max_batches = 2, .framing = STREAM_NOEOS,
                     .empty_framing = ZERO_BYTES, .enc = {.vary = 1, .junk_padding = 1}};
  round_trip(&src, &sh, 4);
  table_src_free(&src);
  free(rows);
}

static void read_partitions_of_several_batches_with_empty_ones(void) {
  uint64_t rng = 27;
  int64_t total;
  int64_t *rows = random_rows(12, 60, 0, &rng, &total);
  struct table_src src = table_random(&every_schema, total, 100, 28);
  /* up to 8 batches a partition, so many are cut to 0 rows */
  struct shape sh = {.n_parts = 12, .part_rows = rows, .max_batches = 8, .framing = STREAM,
                     .enc = {.vary = 1, .junk_padding = 1}};
  round_trip(&src, &sh, 5);
  table_src_free(&src);
  free(rows);
}

static void read_skips_empty_partitions_of_every_kind(void) {
  /* rows only in partitions 1, 4 and 8; the others are zero bytes, a
   * schema and an end-of-stream marker, a schema alone, or 0-row batches */
  struct table_src src = table_random(&small_schema, 50, 200, 29);
  static const int64_t rows[9] = {0, 20, 0, 0, 10, 0, 0, 0, 20};
  const int empties[4] = {ZERO_BYTES, STREAM, STREAM_NOEOS, ZERO_BYTES};
  for (int k = 0; k < 4; k++) {
    check_context("empty partitions as %d", empties[k]);
    struct shape sh = {.n_parts = 9, .part_rows = rows, .max_batches = 3, .framing = STREAM,
                       .empty_framing = empties[k]};
    round_trip(&src, &sh, 6 + (uint64_t)k);
  }
  table_src_free(&src);
}

static void read_ipc_file_format_partitions(void) {
  uint64_t rng = 40;
  int64_t total;
  int64_t *rows = random_rows(20, 30, 100, &rng, &total);
  struct table_src src = table_random(&every_schema, total, 150, 41);
  /* files with rows; empty partitions as plain streams */
  struct shape sh = {.n_parts = 20, .part_rows = rows, .max_batches = 3, .framing = FILE_FORMAT,
                     .empty_framing = STREAM, .enc = {.vary = 1, .junk_padding = 1}};
  round_trip(&src, &sh, 42);
  sh.empty_framing = FILE_FORMAT;
  round_trip(&src, &sh, 43);
  table_src_free(&src);
  free(rows);
}

static void read_string_offsets_not_starting_at_zero(void) {
  static const struct iw_field f[] = {
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
      {.type = FUNNEL_TYPE_BINARY, .name = "b", .nullable = 0},
      {.type = FUNNEL_TYPE_LARGE_UTF8, .name = "ls", .nullable = 1},
      {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lb", .nullable = 1}};
  static const struct iw_schema s = {4, f, 0};
  struct table_src src = table_random(&s, 120, 200, 30);
  static const int64_t rows[5] = {1, 40, 0, 39, 40};
  const int64_t bases[3] = {1, 1000, 100003};
  for (int k = 0; k < 3; k++) {
    check_context("offset base %lld", (long long)bases[k]);
    struct shape sh = {.n_parts = 5, .part_rows = rows, .max_batches = 3, .framing = STREAM,
                       .empty_framing = STREAM, .enc = {.offset_base = bases[k], .vary = k == 2}};
    round_trip(&src, &sh, 9 + (uint64_t)k);
  }
  table_src_free(&src);
}

static void concat_validity_unaligned_boundaries(void) {
  static const struct iw_field f[] = {
      {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
      {.type = FUNNEL_TYPE_BOOL, .name = "b_nn", .nullable = 0},
      {.type = FUNNEL_TYPE_INT32, .name = "i", .nullable = 1},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1}};
  static const struct iw_schema s = {4, f, 0};
  /* partitions of 1, 2, ..., 17 rows: every boundary at every bit offset */
  int64_t rows[17], total = 0;
  for (int i = 0; i < 17; i++) total += rows[i] = i + 1;
  struct table_src src = table_random(&s, total, 400, 31);
  struct shape sh = {.n_parts = 17, .part_rows = rows, .max_batches = 1, .framing = STREAM,
                     .enc = {.junk_padding = 1}};
  round_trip(&src, &sh, 12);
  table_src_free(&src);
  /* for each size 1..17: nine partitions of that size, batches cut inside */
  for (int k = 1; k <= 17; k++) {
    check_context("nine partitions of %d rows", k);
    int64_t r9[9];
    for (int i = 0; i < 9; i++) r9[i] = k;
    struct table_src t = table_random(&s, 9 * k, 400, 100 + (uint64_t)k);
    struct shape s9 = {.n_parts = 9, .part_rows = r9, .max_batches = 3, .framing = STREAM,
                       .enc = {.junk_padding = 1, .vary = 1}};
    round_trip(&t, &s9, 13 + (uint64_t)k);
    table_src_free(&t);
  }
  /* a single null among valid rows at every position of 1..17 rows */
  for (int n = 1; n <= 17; n++)
    for (int at = 0; at < n; at++) {
      check_context("%d rows, null at %d", n, at);
      struct table_src t = table_random(&s, n, 0, 200 + (uint64_t)n);
      for (int c = 0; c < 4; c++)
        if (f[c].nullable) t.cols[c].valid[at] = 0;
      int64_t r2[2] = {at, n - at};
      struct shape s2 = {.n_parts = 2, .part_rows = r2, .max_batches = 1, .framing = STREAM,
                         .empty_framing = ZERO_BYTES, .enc = {.junk_padding = 1}};
      round_trip(&t, &s2, 40 + (uint64_t)at);
      table_src_free(&t);
    }
}

static void read_without_nulls_has_empty_validity(void) {
  /* all-ones bitmaps in some partitions, none in others: null_count 0 */
  struct table_src src = table_random(&every_schema, 90, 0, 32);
  static const int64_t rows[3] = {30, 30, 30};
  struct shape sh = {.n_parts = 3, .part_rows = rows, .max_batches = 2, .framing = STREAM,
                     .enc = {.vary = 1, .junk_padding = 1}};
  round_trip(&src, &sh, 50);
  table_src_free(&src);
}

/* The first k rows of every column, copied back by ranges: validity and
 * offsets first, then the string bytes the offsets cover, as a look at a
 * large table's head does. */
static void copy_ranges_gives_the_first_rows(void) {
  struct table_src src = table_random(&every_schema, 300, 200, 36);
  static const int64_t rows[3] = {100, 150, 50};
  struct shape sh = {.n_parts = 3, .part_rows = rows, .max_batches = 2, .framing = STREAM};
  struct parts ps = make_parts(&src, &sh, 53);
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  const int n = every_schema.n_fields;
  if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) {
    static const int64_t ks[] = {0, 1, 7, 8, 9, 101, 300};
    for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
      const int64_t k = ks[ki];
      bool ok = true;
      struct funnel_host_range *r = calloc(3 * (size_t)n, sizeof(*r));
      uint8_t **host = calloc(3 * (size_t)n, sizeof(*host));
      size_t nr = 0;
      for (int c = 0; c < n; c++) { /* pass 1: validity, offsets, fixed-width data */
        const struct iw_field *f = &every_schema.fields[c];
        const int ow = iw_offset_width(f), w = iw_value_width(f);
        struct funnel_column col;
        funnel_table_column(t, c, &col, NULL);
        const int64_t len[3] = {col.null_count > 0 ? (k + 7) / 8 : 0, ow ? (k + 1) * ow : 0,
                                ow ? 0 : f->type == FUNNEL_TYPE_BOOL ? (k + 7) / 8 : k * w};
        for (int b = 0; b < 3; b++) {
          host[3 * c + b] = malloc((size_t)len[b] + 1);
          r[nr++] = (struct funnel_host_range){c, b, 0, len[b], host[3 * c + b]};
        }
      }
      if (!CHECK_OK(funnel_table_copy_ranges_to_host(t, r, nr, &err), &err)) ok = false;
      nr = 0;
      for (int c = 0; c < n && ok; c++) { /* pass 2: the bytes of k strings */
        const int ow = iw_offset_width(&every_schema.fields[c]);
        if (!ow) continue;
        int64_t end = 0;
        if (ow == 4) {
          int32_t v;
          memcpy(&v, host[3 * c + 1] + 4 * k, 4);
          end = v;
        } else {
          memcpy(&end, host[3 * c + 1] + 8 * k, 8);
        }
        free(host[3 * c + 2]);
        host[3 * c + 2] = malloc((size_t)end + 1);
        r[nr++] = (struct funnel_host_range){c, 2, 0, end, host[3 * c + 2]};
      }
      if (ok && CHECK_OK(funnel_table_copy_ranges_to_host(t, r, nr, &err), &err)) {
        for (int c = 0; c < n; c++) {
          const struct iw_col *col = &src.cols[c];
          const struct iw_field *f = &col->field;
          const int ow = iw_offset_width(f), w = iw_value_width(f);
          check_context("k %lld column %d '%s'", (long long)k, c, f->name);
          struct funnel_column fc;
          funnel_table_column(t, c, &fc, NULL);
          for (int64_t i = 0; i < k && fc.null_count > 0; i++)
            if (!CHECK_EQ_I64(table_bit(host[3 * c], i), col->valid[i])) break;
          if (ow) {
            for (int64_t i = 0; i <= k; i++) {
              int64_t got = 0;
              if (ow == 4) {
                int32_t v;
                memcpy(&v, host[3 * c + 1] + 4 * i, 4);
                got = v;
              } else {
                memcpy(&got, host[3 * c + 1] + 8 * i, 8);
              }
              if (!CHECK_EQ_I64(got, iw_col_start(col, i))) break;
            }
            CHECK_MEM(host[3 * c + 2], col->chars, iw_col_start(col, k));
          } else if (f->type == FUNNEL_TYPE_BOOL) {
            for (int64_t i = 0; i < k; i++)
              if (!CHECK_EQ_I64(table_bit(host[3 * c + 2], i), col->values[i])) break;
          } else {
            CHECK_MEM(host[3 * c + 2], col->values, k * w);
          }
        }
        check_context("%s", "");
      }
      for (size_t i = 0; i < 3 * (size_t)n; i++) free(host[i]);
      free(host);
      free(r);
    }
    /* outside a buffer: an error naming it, nothing copied */
    uint8_t byte = 0x5a;
    struct funnel_host_range bad[2] = {{0, 2, 0, 1, &byte}, {19, 1, 1, 100000, &byte}};
    CHECK_STATUS(funnel_table_copy_ranges_to_host(t, bad, 2, &err), FUNNEL_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK(strstr(err.message, "range 1: column 19, buffer 1") != NULL);
    CHECK_EQ_I64(err.column, 19);
    CHECK_EQ_I64(byte, 0x5a);
    /* no such column, no such buffer kind: said so, not "outside" */
    bad[1].column = n;
    CHECK_STATUS(funnel_table_copy_ranges_to_host(t, bad, 2, &err), FUNNEL_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK(strstr(err.message, "range 1: the table has no column") != NULL);
    bad[1] = (struct funnel_host_range){0, 7, 0, 1, &byte};
    CHECK_STATUS(funnel_table_copy_ranges_to_host(t, bad, 2, &err), FUNNEL_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK(strstr(err.message, "range 1: column 0: buffer 7 is no buffer kind") != NULL);
    CHECK_EQ_I64(byte, 0x5a);
    funnel_table_free(t);
  }
  funnel_reader_free(rd);
  parts_free(&ps);
  table_src_free(&src);
}

static void read_with_reader_schema_and_bare_batches(void) {
  uint64_t rng = 33;
  int64_t total;
  int64_t *rows = random_rows(30, 25, 200, &rng, &total);
  struct table_src src = table_random(&every_schema, total, 150, 34);
  struct shape sh = {.n_parts = 30, .part_rows = rows, .max_batches = 3, .framing = BARE,
                     .empty_framing = ZERO_BYTES, .enc = {.vary = 1, .junk_padding = 1}};
  round_trip(&src, &sh, 51);
  /* bare and full partitions mixed */
  struct shape mixed = sh;
  mixed.empty_framing = STREAM;
  round_trip(&src, &mixed, 52);
  table_src_free(&src);
  free(rows);
}

static void read_with_reader_schema_all_partitions_empty(void) {
  struct iw_buf s = schema_bytes(&every_schema);
  struct funnel_reader *rd = reader_new(s.data, s.len);
  struct table_src src = table_random(&every_schema, 0, 0, 35);
  for (int n = 0; n <= 3; n++) {
    check_context("%d empty partitions", n);
    struct parts ps = {(size_t)n, calloc((size_t)n + 1, sizeof(struct funnel_partition)), 0};
    for (int i = 0; i < n; i++) ps.p[i].data = iw_dup("", 0);
    struct funnel_table *t = NULL;
    struct funnel_error err;
    if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) {
      CHECK_EQ_I64(funnel_table_num_rows(t), 0);
      CHECK_OK(funnel_table_wait(t, &err), &err);
      check_stats(t, &ps);
      table_check_read(t, &src);
      size_t len = 0;
      const void *ipc = funnel_table_schema_ipc(t, &len);
      if (CHECK_EQ_I64(len, s.len)) CHECK_MEM(ipc, s.data, len);
      funnel_table_free(t);
    }
    parts_free(&ps);
  }
  table_src_free(&src);
  funnel_reader_free(rd);
  iw_buf_free(&s);
}

static void read_on_caller_stream(void) {
  uintptr_t stream = 0;
  struct funnel_error err;
  if (!CHECK_OK(funnel_device_stream_create(device(), &stream, &err), &err)) return;
  CHECK(stream != 0);
  struct table_src src = table_random(&every_schema, 200, 100, 36);
  static const int64_t rows[4] = {50, 50, 0, 100};
  struct shape sh = {.n_parts = 4, .part_rows = rows, .max_batches = 2, .framing = STREAM,
                     .empty_framing = ZERO_BYTES};
  struct funnel_reader *rd = reader_new(NULL, 0);
  for (int i = 0; i < 3; i++) {
    struct parts ps = make_parts(&src, &sh, 60 + (uint64_t)i);
    read_and_check(rd, &src, &ps, stream);
  }
  /* a table still in flight when the stream is destroyed: destroying it
   * completes the work first */
  struct parts ps = make_parts(&src, &sh, 63);
  struct funnel_table *t = NULL;
  if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, stream, &t, &err), &err)) {
    CHECK_OK(funnel_stream_destroy(stream, NULL), NULL);
    stream = 0;
    CHECK_EQ_I64(funnel_table_is_ready(t), 1);
    CHECK_OK(funnel_table_wait(t, &err), &err);
    table_check_read(t, &src);
    funnel_table_free(t);
  }
  parts_free(&ps);
  if (stream) CHECK_OK(funnel_stream_destroy(stream, NULL), NULL);
  CHECK_STATUS(funnel_device_stream_create(NULL, &stream, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  funnel_reader_free(rd);
  table_src_free(&src);
}

/* The schema the table reports is the partitions' Schema message. */
static void check_schema_ipc(struct funnel_table *t, const struct iw_schema *schema) {
  struct iw_buf s = schema_bytes(schema);
  size_t len = 0;
  const void *ipc = funnel_table_schema_ipc(t, &len);
  if (CHECK_EQ_I64(len, s.len)) CHECK_MEM(ipc, s.data, len);
  iw_buf_free(&s);
}

static void table_outlives_reader_and_wait_is_idempotent(void) {
  struct table_src src = table_random(&small_schema, 100, 100, 37);
  static const int64_t rows[3] = {40, 20, 40};
  struct shape sh = {.n_parts = 3, .part_rows = rows, .max_batches = 2, .framing = STREAM};
  struct parts ps = make_parts(&src, &sh, 70);
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_table *t = NULL;
  struct funnel_error err;
  if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) {
    funnel_reader_free(rd); /* tables it made stay valid */
    rd = NULL;
    CHECK_OK(funnel_table_wait(t, &err), &err);
    CHECK_OK(funnel_table_wait(t, &err), &err);
    parts_free(&ps);
    table_check_read(t, &src);
    table_check_read(t, &src); /* copy back twice */
    struct funnel_column col;
    CHECK_STATUS(funnel_table_column(t, 3, &col, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK_STATUS(funnel_table_column(t, -1, &col, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK_STATUS(funnel_table_column(t, 0, NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
    check_schema_ipc(t, &small_schema);
    funnel_table_free(t);
  }
  parts_free(&ps);
  funnel_reader_free(rd);
  table_src_free(&src);
}

/* A reader without a schema reads by the device path with the schema its
 * first such read found (funnel__dpath_wanted's `seen`) when a read's
 * first partition opens with that Schema message byte for byte: reads of
 * it again, of another schema between, and a table that outlives the
 * reader and the schema it kept; bare batches still want a schema. */
static void read_by_a_schema_the_reader_has_seen(void) {
  struct table_src a = table_random(&small_schema, 60, 100, 41);
  struct iw_field f[3] = {small_fields[0], small_fields[1], small_fields[2]};
  f[2].type = FUNNEL_TYPE_INT8; /* the same names, column 2 another type */
  struct iw_schema other = {3, f, 0};
  struct table_src b = table_random(&other, 60, 100, 42);
  static const int64_t rows[4] = {20, 0, 25, 15};
  struct shape sh = {.n_parts = 4, .part_rows = rows, .max_batches = 1, .framing = STREAM,
                     .empty_framing = ZERO_BYTES};
  struct funnel_reader *rd = reader_new(NULL, 0);
  struct funnel_error err;
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, FUNNEL_PARSE_DEVICE, &err), &err);
  /* a, then a again (by the schema seen), then b, then a */
  const struct table_src *order[4] = {&a, &a, &b, &a};
  for (int i = 0; i < 4; i++) {
    struct parts ps = make_parts(order[i], &sh, 50 + (uint64_t)i);
    read_and_check_on(rd, order[i], &ps, 0, 1);
  }
  /* bare batches: no schema of their own, whatever the reader has seen */
  struct shape bare = sh;
  bare.framing = BARE;
  struct parts pb = make_parts(&a, &bare, 60);
  struct funnel_table *t = NULL;
  CHECK_STATUS(funnel_reader_read_async(rd, pb.p, pb.n, 0, &t, &err), FUNNEL_ERR_NO_SCHEMA, &err);
  CHECK(t == NULL);
  parts_free(&pb);
  /* a table read by the schema seen outlives the reader */
  struct parts ps = make_parts(&a, &sh, 61);
  if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) {
    funnel_reader_free(rd);
    rd = NULL;
    CHECK_OK(funnel_table_wait(t, &err), &err);
    struct funnel_read_stats st;
    if (CHECK_OK(funnel_table_stats(t, &st, &err), &err)) CHECK(check_on_device(&st));
    table_check_read(t, &a);
    check_schema_ipc(t, &small_schema);
    funnel_table_free(t);
  }
  parts_free(&ps);
  funnel_reader_free(rd);
  table_src_free(&a);
  table_src_free(&b);
}

/* A table freed without a wait: free waits for the work itself. */
static void table_free_without_wait(void) {
  struct table_src src = table_random(&every_schema, 400, 100, 38);
  static const int64_t rows[4] = {100, 100, 100, 100};
  struct shape sh = {.n_parts = 4, .part_rows = rows, .max_batches = 2, .framing = STREAM};
  struct funnel_reader *rd = reader_new(NULL, 0);
  for (int i = 0; i < 20; i++) {
    struct parts ps = make_parts(&src, &sh, 80 + (uint64_t)i);
    struct funnel_table *t = NULL;
    struct funnel_error err;
    if (CHECK_OK(funnel_reader_read_async(rd, ps.p, ps.n, 0, &t, &err), &err)) funnel_table_free(t);
    parts_free(&ps); /* after the free, which waited */
  }
  funnel_reader_free(rd);
  table_src_free(&src);
}

struct thread_arg {
  struct funnel_reader *rd;
  const struct table_src *src;
  uint64_t seed;
};

static void *reading_thread(void *p) {
  struct thread_arg *a = p;
  uint64_t rng = a->seed;
  for (int i = 0; i < 15; i++) {
    int64_t rows[8];
    int n = 1 + (int)check_rand_below(&rng, 8);
    for (int k = 0; k < n; k++) rows[k] = 0;
    /* every read covers the whole table, cut differently */
    for (int64_t r = 0; r < a->src->rows; r++) rows[check_rand_below(&rng, (uint64_t)n)]++;
    struct shape sh = {.n_parts = n, .part_rows = rows, .max_batches = 2, .framing = STREAM,
                       .empty_framing = ZERO_BYTES};
    struct parts ps = make_parts(a->src, &sh, check_rand(&rng));
    read_and_check(a->rd, a->src, &ps, 0);
  }
  return NULL;
}

/* Reads from four threads on one reader (ordered on its stream) and from
 * four more on a reader each, all at once. */
static void concurrent_reads_on_one_reader(void) {
  struct table_src src = table_random(&small_schema, 150, 150, 39);
  struct funnel_reader *shared = reader_new(NULL, 0);
  struct funnel_reader *own[4];
  pthread_t th[8];
  struct thread_arg args[8];
  for (int i = 0; i < 8; i++) {
    own[i % 4] = i < 4 ? reader_new(NULL, 0) : own[i % 4];
    args[i] = (struct thread_arg){i < 4 ? shared : own[i % 4], &src, 90 + (uint64_t)i};
    CHECK(pthread_create(&th[i], NULL, reading_thread, &args[i]) == 0);
  }
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) funnel_reader_free(own[i]);
  funnel_reader_free(shared);
  table_src_free(&src);
}

static void *first_read_thread(void *p) {
  struct thread_arg *a = p;
  static const int64_t rows[3] = {10, 0, 20};
  struct shape sh = {.n_parts = 3, .part_rows = rows, .max_batches = 1, .framing = STREAM,
                     .empty_framing = ZERO_BYTES};
  struct parts ps = make_parts(a->src, &sh, a->seed);
  read_and_check_on(a->rd, a->src, &ps, 0, 1);
  return NULL;
}

/* Four threads make a fresh reader's first reads at once, each of which
 * may set the schema the reader keeps (reader.c, remember_schema); then
 * the reader goes while none of its tables is left. Ten rounds. */
static void first_reads_race_for_the_seen_schema(void) {
  struct table_src src = table_random(&small_schema, 30, 100, 43);
  for (int round = 0; round < 10; round++) {
    struct funnel_reader *rd = reader_new(NULL, 0);
    struct funnel_error err;
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, FUNNEL_PARSE_DEVICE, &err), &err);
    pthread_t th[4];
    struct thread_arg args[4];
    for (int i = 0; i < 4; i++) {
      args[i] = (struct thread_arg){rd, &src, 100 + 4 * (uint64_t)round + (uint64_t)i};
      CHECK(pthread_create(&th[i], NULL, first_read_thread, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    funnel_reader_free(rd);
  }
  table_src_free(&src);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(device_open_cuda_without_gpu_is_no_device),
      CHECK_TEST(device_open_auto_falls_back_to_cpu),
      CHECK_TEST(device_open_rejects_bad_arguments),
      CHECK_TEST(reader_create_rejects_bad_schema),
      CHECK_TEST(read_rejects_invalid_arguments),
      CHECK_TEST(read_rejects_missing_schema),
      CHECK_TEST(read_rejects_schema_mismatch),
      CHECK_TEST(read_rejects_malformed_partition_and_names_it),
      CHECK_TEST(read_names_the_first_of_many_bad_partitions),
      CHECK_TEST(read_rejects_utf8_over_int32_offsets),
      CHECK_TEST(read_device_parse_fails_as_host_parse),
      CHECK_TEST(read_densest_output_on_the_device),
      CHECK_TEST(read_long_fixed_width_pieces_at_every_alignment),
      CHECK_TEST(read_3000_partitions_on_the_device),
      CHECK_TEST(read_9000_partitions_on_the_device),
      CHECK_TEST(read_auto_takes_the_device_path_by_count_and_size),
      CHECK_TEST(read_every_type_one_partition),
      CHECK_TEST(read_every_type_two_partitions),
      CHECK_TEST(read_every_type_200_partitions),
      CHECK_TEST(read_1000_partitions),
      CHECK_TEST(read_partitions_of_several_batches_with_empty_ones),
      CHECK_TEST(read_skips_empty_partitions_of_every_kind),
      CHECK_TEST(read_ipc_file_format_partitions),
      CHECK_TEST(read_string_offsets_not_starting_at_zero),
      CHECK_TEST(concat_validity_unaligned_boundaries),
      CHECK_TEST(read_without_nulls_has_empty_validity),
      CHECK_TEST(copy_ranges_gives_the_first_rows),
      CHECK_TEST(read_with_reader_schema_and_bare_batches),
      CHECK_TEST(read_with_reader_schema_all_partitions_empty),
      CHECK_TEST(read_on_caller_stream),
      CHECK_TEST(table_outlives_reader_and_wait_is_idempotent),
      CHECK_TEST(read_by_a_schema_the_reader_has_seen),
      CHECK_TEST(table_free_without_wait),
      CHECK_TEST(concurrent_reads_on_one_reader),
      CHECK_TEST(first_reads_race_for_the_seen_schema),
  };
  int rc = CHECK_MAIN(argc, argv, tests);
  funnel_device_close(the_device);
  return rc;
}
