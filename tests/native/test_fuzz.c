/* test_fuzz.c: mutated partitions must be rejected cleanly or read
 * consistently, never crash or read out of bounds.
 *
 * A corpus of valid partitions (several types, nulls, strings, several
 * batches, legacy framing, bare batches) is mutated 20000 times with a
 * fixed seed: 1-4 flipped bytes, a truncation, an int32 or int64
 * overwritten with an extreme value (0, -1, INT_MAX, lengths near the
 * buffer's size), half the time inside a message's metadata. Each input
 * lives in its own malloc'd buffer of exactly its length, so ASan sees any
 * overread. Each is run through parse + plan (funnel__partition_parse and
 * funnel__plan_build, a fresh arena each time) and through the public read
 * (read_async, wait, copy_to_host, free); both must agree. A rejection
 * must carry a known code and a message naming a partition in range; an
 * accepted input must give a table whose buffers are self-consistent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "format.h"
#include "funnel.h"
#include "ipc_writer.h"
#include "plan.h"

#define ITERATIONS 20000

static const struct iw_field fields[] = {
    {.type = FUNNEL_TYPE_INT32, .name = "i32", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lb", .nullable = 1},
    {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "fsb", .nullable = 1, .byte_width = 3},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts", .nullable = 0, .time_unit = FUNNEL_TIME_MICROSECOND, .timezone = "UTC"},
    {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .nullable = 1, .precision = 20, .scale = 4},
};
static const struct iw_schema schema = {7, fields, 0};

struct region {
  size_t start, length;
};

struct input {
  struct iw_buf bytes;
  int bare;                 /* RecordBatch messages only: read with the schema */
  struct region meta[16];   /* metadata of each message, where mutations bite */
  int n_meta;
};

#define N_CORPUS 6
static struct input corpus[N_CORPUS];
static struct iw_buf schema_ipc;
static struct funnel_device *dev;
static struct funnel_reader *rd_plain, *rd_schema;

static void add_meta(struct input *in, const struct iw_layout *l) {
  if (in->n_meta < 16) in->meta[in->n_meta++] = (struct region){l->message, l->body - l->message};
}

static void build_corpus(void) {
  uint64_t rng = 1234;
  struct iw_col cols[7];
  const int64_t rows = 70;
  for (int i = 0; i < 7; i++) iw_col_random(&cols[i], &fields[i], rows, 250, &rng);
  struct iw_encode enc = {.rng = &rng, .vary = 1, .junk_padding = 1};
  const int64_t cuts[][4] = {{0, 70, 70, 70}, {0, 9, 9, 40}, {0, 1, 17, 33}, {5, 6, 30, 64},
                             {0, 0, 8, 8}, {0, 31, 32, 70}};
  for (int k = 0; k < N_CORPUS; k++) {
    struct input *in = &corpus[k];
    struct iw_options o = {.legacy = k == 3};
    struct iw_layout l;
    in->bare = k == 4;
    if (!in->bare) {
      iw_schema_message(&in->bytes, &schema, &o, &l);
      add_meta(in, &l);
    }
    for (int b = 0; b < 3; b++) {
      size_t at = in->bytes.len;
      iw_batch_from_cols(&in->bytes, &schema, cols, cuts[k][b], cuts[k][b + 1], &enc, &o);
      /* the message's metadata: prefix and flatbuffer, up to the body */
      uint32_t first;
      memcpy(&first, in->bytes.data + at, 4);
      size_t prefix = first == 0xFFFFFFFFu ? 8 : 4;
      uint32_t meta_len;
      memcpy(&meta_len, in->bytes.data + at + prefix - 4, 4);
      if (in->n_meta < 16) in->meta[in->n_meta++] = (struct region){at, prefix + meta_len};
    }
    if (k == 5) { /* a second stream in the same partition */
      iw_eos(&in->bytes, &o);
      iw_schema_message(&in->bytes, &schema, &o, &l);
      add_meta(in, &l);
      iw_batch_from_cols(&in->bytes, &schema, cols, 0, 12, &enc, &o);
    }
    if (!in->bare && k != 2) iw_eos(&in->bytes, &o);
  }
  for (int i = 0; i < 7; i++) iw_col_free(&cols[i]);
  iw_schema_message(&schema_ipc, &schema, NULL, NULL);
}

/* -------------------------------------------------------------- mutation */

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* A position to mutate: half the time inside some message's metadata. */
static size_t pick_at(const struct input *in, size_t len, size_t width, uint64_t *rng) {
  if (len < width) return SIZE_MAX;
  if (in->n_meta > 0 && check_rand_below(rng, 2)) {
    const struct region *r = &in->meta[check_rand_below(rng, (uint64_t)in->n_meta)];
    size_t at = r->start + (size_t)check_rand_below(rng, r->length);
    if (check_rand_below(rng, 4) != 0) at &= ~(size_t)(width - 1); /* mostly aligned */
    if (at + width <= len) return at;
  }
  return (size_t)check_rand_below(rng, len - width + 1);
}

/* A mutated copy of `in`, malloc'd with exactly its length. */
static uint8_t *mutate(const struct input *in, size_t *len_out, uint64_t *rng, char *what, size_t what_size) {
  size_t len = in->bytes.len;
  uint8_t *tmp = iw_dup(in->bytes.data, len);
  int ops = 1 + (check_rand_below(rng, 4) == 0);
  what[0] = '\0';
  for (int op = 0; op < ops; op++) {
    size_t used = strlen(what);
    int kind = (int)check_rand_below(rng, 10);
    if (kind < 3) {
      int flips = 1 + (int)check_rand_below(rng, 4);
      for (int f = 0; f < flips; f++) {
        size_t at = pick_at(in, len, 1, rng);
        if (at == SIZE_MAX) break;
        tmp[at] ^= (uint8_t)(1 + check_rand_below(rng, 255));
        snprintf(what + used, what_size - used, "flip@%zu ", at);
        used = strlen(what);
      }
    } else if (kind < 4) {
      len = len ? (size_t)check_rand_below(rng, len) : 0;
      snprintf(what + used, what_size - used, "truncate@%zu ", len);
    } else if (kind < 8) {
      const uint32_t extremes[] = {0, 0xFFFFFFFFu, 0x7FFFFFFFu, 0x80000000u, 1, 8,
                                   (uint32_t)len, (uint32_t)len - 1, (uint32_t)len + 1,
                                   (uint32_t)len - 8, (uint32_t)len + 8, 0x7FFFFFF8u, 0xFFFFFFF8u};
      size_t at = pick_at(in, len, 4, rng);
      if (at == SIZE_MAX) continue;
      uint32_t v = extremes[check_rand_below(rng, sizeof(extremes) / sizeof(extremes[0]))];
      put32(tmp + at, v);
      snprintf(what + used, what_size - used, "i32@%zu=%d ", at, (int)v);
    } else {
      const uint64_t extremes[] = {0, UINT64_MAX, INT64_MAX, (uint64_t)INT64_MIN, (uint64_t)INT64_MAX - 7,
                                   UINT32_MAX, (uint64_t)1 << 31, (uint64_t)1 << 32, len, len - 1, len + 1,
                                   (uint64_t)1 << 62};
      size_t at = pick_at(in, len, 8, rng);
      if (at == SIZE_MAX) continue;
      uint64_t v = extremes[check_rand_below(rng, sizeof(extremes) / sizeof(extremes[0]))];
      put64(tmp + at, v);
      snprintf(what + used, what_size - used, "i64@%zu=%lld ", at, (long long)v);
    }
  }
  uint8_t *out = iw_dup(tmp, len);
  free(tmp);
  *len_out = len;
  return out;
}

/* ------------------------------------------------------------------ runs */

static int known_rejection(int code) {
  return code == FUNNEL_ERR_MALFORMED || code == FUNNEL_ERR_UNSUPPORTED ||
         code == FUNNEL_ERR_SCHEMA_MISMATCH || code == FUNNEL_ERR_NO_SCHEMA || code == FUNNEL_ERR_LIMIT;
}

/* parse + plan through the internals, as a read does it */
static int internal_read(const struct funnel_partition *parts, size_t n, int with_schema,
                         struct funnel_error *err, int64_t *rows) {
  struct funnel__arena arena = {0};
  struct funnel__partition pv[2];
  memset(pv, 0, sizeof(pv));
  int st = FUNNEL_OK;
  for (size_t i = 0; i < n && st == FUNNEL_OK; i++)
    if (parts[i].length > 0)
      st = funnel__partition_parse(parts[i].data, (int64_t)parts[i].length, (int64_t)i, &arena, &pv[i], err);
  struct funnel__schema s, *sp = NULL;
  if (st == FUNNEL_OK && with_schema) {
    st = funnel__schema_parse(schema_ipc.data, (int64_t)schema_ipc.len, &arena, &s, err);
    sp = &s;
  }
  struct funnel__plan plan;
  if (st == FUNNEL_OK) st = funnel__plan_build(sp, pv, (int64_t)n, 0, &arena, &plan, err);
  if (st == FUNNEL_OK) st = funnel__plan_check_pieces(&plan, err);
  if (st == FUNNEL_OK) *rows = plan.rows;
  funnel__arena_free(&arena);
  return st;
}

static int bit(const uint8_t *p, int64_t i) { return (p[i >> 3] >> (i & 7)) & 1; }

/* The table of an accepted input: buffers of the advertised sizes that
 * agree with each other. */
static void check_accepted(struct funnel_table *t, int64_t rows) {
  struct funnel_error err;
  CHECK_EQ_I64(funnel_table_num_rows(t), rows);
  const int n = funnel_table_num_columns(t);
  if (!CHECK_EQ_I64(n, 7)) return;
  struct funnel_column cols[7];
  struct funnel_host_column host[7];
  for (int i = 0; i < n; i++) {
    CHECK_OK(funnel_table_column(t, i, &cols[i], &err), &err);
    host[i].validity = malloc((size_t)cols[i].validity.size + 1);
    host[i].offsets = malloc((size_t)cols[i].offsets.size + 1);
    host[i].data = malloc((size_t)cols[i].data.size + 1);
  }
  if (CHECK_OK(funnel_table_copy_to_host(t, host, &err), &err))
    for (int i = 0; i < n; i++) {
      const struct funnel_column *c = &cols[i];
      const uint8_t *v = host[i].validity, *o = host[i].offsets, *d = host[i].data;
      CHECK_EQ_I64(c->length, rows);
      CHECK(c->null_count >= 0 && c->null_count <= rows);
      CHECK_EQ_I64(c->validity.size, c->null_count > 0 ? (rows + 7) / 8 : 0);
      for (int64_t r = rows; r < c->validity.size * 8; r++) CHECK_EQ_I64(bit(v, r), 0);
      if (c->offset_width) {
        if (CHECK_EQ_I64(c->offsets.size, (rows + 1) * c->offset_width)) {
          int64_t first = 0, last = 0;
          if (c->offset_width == 4) {
            int32_t a, b;
            memcpy(&a, o, 4);
            memcpy(&b, o + 4 * rows, 4);
            first = a;
            last = b;
          } else {
            memcpy(&first, o, 8);
            memcpy(&last, o + 8 * rows, 8);
          }
          CHECK_EQ_I64(first, 0);
          CHECK_EQ_I64(last, c->data.size);
        }
      } else if (c->type_id == FUNNEL_TYPE_BOOL) {
        CHECK_EQ_I64(c->data.size, (rows + 7) / 8);
        for (int64_t r = rows; r < c->data.size * 8; r++) CHECK_EQ_I64(bit(d, r), 0);
      } else {
        CHECK_EQ_I64(c->data.size, rows * c->byte_width);
      }
    }
  for (int i = 0; i < n; i++) {
    free(host[i].validity);
    free(host[i].offsets);
    free(host[i].data);
  }
}

/* Returns the status both reads agreed on (or the public one). */
static int run_one(struct funnel_partition *parts, size_t n, int with_schema) {
  struct funnel_error ierr, perr;
  memset(&ierr, 0, sizeof(ierr));
  int64_t rows = -1;
  int ist = internal_read(parts, n, with_schema, &ierr, &rows);
  if (ist != FUNNEL_OK) {
    CHECK(known_rejection(ist));
    CHECK_EQ_I64(ierr.code, ist);
    CHECK(ierr.message[0] != '\0');
    CHECK(ierr.partition >= -1 && ierr.partition < (int64_t)n);
    CHECK(ierr.column >= -1 && ierr.column < 1000);
  }
  struct funnel_table *t = NULL;
  int pst = funnel_reader_read_async(with_schema ? rd_schema : rd_plain, parts, n, 0, &t, &perr);
  /* the public read parses and plans the same way */
  if (!CHECK_EQ_I64(pst, ist)) {
    check_fail(__FILE__, __LINE__, "internal: %s; public: %s", ierr.message, perr.message);
  } else if (pst != FUNNEL_OK) {
    CHECK_EQ_I64(perr.partition, ierr.partition);
    CHECK_EQ_I64(perr.column, ierr.column);
    CHECK(t == NULL);
  }
  if (pst == FUNNEL_OK) {
    CHECK_OK(funnel_table_wait(t, &perr), &perr);
    check_accepted(t, rows);
    funnel_table_free(t);
  }
  return pst;
}

static void fuzz_mutated_partitions(void) {
  /* FUNNEL_FUZZ_SEED and FUNNEL_FUZZ_ITERATIONS explore beyond the
   * fixed run */
  const char *env_seed = getenv("FUNNEL_FUZZ_SEED"), *env_iter = getenv("FUNNEL_FUZZ_ITERATIONS");
  uint64_t rng = env_seed ? strtoull(env_seed, NULL, 10) : 20260101;
  const int iterations = env_iter ? atoi(env_iter) : ITERATIONS;
  int accepted = 0, rejected = 0;
  /* FUNNEL_FUZZ_TRACE=1 prints every input before it runs, to find the one
   * a sanitizer stopped on */
  const int trace = getenv("FUNNEL_FUZZ_TRACE") != NULL;
  char what[256];
  for (int it = 0; it < iterations; it++) {
    const int k = (int)check_rand_below(&rng, N_CORPUS);
    const struct input *in = &corpus[k];
    size_t len;
    uint8_t *m = mutate(in, &len, &rng, what, sizeof(what));
    check_context("iteration %d, corpus %d: %s", it, k, what);
    if (trace) fprintf(stderr, "iteration %d, corpus %d: %s\n", it, k, what);
    /* alone, or second after an intact partition (which then gives the
     * schema to a bare one) */
    const int second = check_rand_below(&rng, 2);
    const struct input *first = &corpus[0];
    uint8_t *f = second ? iw_dup(first->bytes.data, first->bytes.len) : NULL;
    struct funnel_partition parts[2] = {{f, second ? first->bytes.len : 0}, {m, len}};
    int st = second ? run_one(parts, 2, 0) : run_one(parts + 1, 1, in->bare);
    accepted += st == FUNNEL_OK;
    rejected += st != FUNNEL_OK;
    free(f);
    free(m);
    if (check_failures() > 40) return; /* enough to go on */
  }
  check_context("%s", "");
  fprintf(stderr, "  %d mutated inputs accepted, %d rejected\n", accepted, rejected);
  CHECK(accepted > iterations / 20);
  CHECK(rejected > iterations / 2);
}

/* The corpus itself reads. */
static void fuzz_corpus_is_valid(void) {
  for (int k = 0; k < N_CORPUS; k++) {
    check_context("corpus %d", k);
    struct funnel_partition p = {iw_dup(corpus[k].bytes.data, corpus[k].bytes.len), corpus[k].bytes.len};
    struct funnel_error err;
    int64_t rows = -1;
    CHECK_OK(internal_read(&p, 1, corpus[k].bare, &err, &rows), &err);
    CHECK(rows > 0);
    run_one(&p, 1, corpus[k].bare);
    free((void *)p.data);
  }
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(fuzz_corpus_is_valid),
      CHECK_TEST(fuzz_mutated_partitions),
  };
  build_corpus();
  struct funnel_error err;
  if (check_device_open(&dev, &err) != FUNNEL_OK ||
      funnel_reader_create(dev, NULL, 0, &rd_plain, &err) != FUNNEL_OK ||
      funnel_reader_create(dev, schema_ipc.data, schema_ipc.len, &rd_schema, &err) != FUNNEL_OK) {
    fprintf(stderr, "setup: %s\n", err.message);
    return 1;
  }
  int rc = CHECK_MAIN(argc, argv, tests);
  funnel_reader_free(rd_plain);
  funnel_reader_free(rd_schema);
  funnel_device_close(dev);
  for (int k = 0; k < N_CORPUS; k++) iw_buf_free(&corpus[k].bytes);
  iw_buf_free(&schema_ipc);
  return rc;
}
