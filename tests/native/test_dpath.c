/* test_dpath.c: the device path's parser (dpath.h) run as the cpu backend
 * runs the kernels' code, on partitions of the tests' own writer: the
 * read's template (funnel__dp_template_of) must take every partition that
 * matches it, and only those, and must find in them exactly what the full
 * walk of each message finds (rows, pieces, null counts, string bytes, the
 * output's layout) or refuse what the walk refuses. The walk itself is
 * held to the host parser by test_parity and the fuzz harness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dpath.h"
#include "dpath_cpu.h"
#include "format.h"
#include "internal.h"
#include "ipc_writer.h"
#include "read.h"
#include "workers.h"
#include "tables.h"
#include "zstddec.h"

#define MAX_PARTS 64
#define OUT_BYTES (1 << 20)

/* What a run of the parse (and the scan and layout) found. */
struct dp_result {
  struct funnel__dp_summary s;
  int64_t sums[64];                 /* null counts, then string bytes */
  int64_t rows[MAX_PARTS + 1];      /* first rows, scanned */
  struct funnel__dp_piece pieces[MAX_PARTS * 32];
  struct funnel__dp_column cols[32];
  int64_t tmpl_length;              /* the template's bytes (0: none) */
  uint8_t out[OUT_BYTES];           /* the output, from offset 0 */
};

/* The read's schema: the first partition's, as a read takes it. */
static const struct funnel__schema *schema_of(const struct funnel_partition *p,
                                              struct funnel__arena *arena) {
  struct funnel__partition pv;
  struct funnel_error err;
  CHECK_OK(funnel__partition_parse_known(p->data, (int64_t)p->length, 0, NULL, arena, &pv, &err),
           &err);
  return pv.schema;
}

/* Where a run of the parse (run, z_read) keeps what it finds: the
 * caller's arrays (columns, pieces, rows, chars of n_var * (n + 1), the
 * summary and OUT_BYTES of output), the inputs, bit buffers, and the
 * template (dp_args_of allocates it, the caller frees it). */
struct dp_tables {
  struct funnel__dp_input inputs[MAX_PARTS];
  struct funnel__dp_column *cols;
  struct funnel__dp_piece *pieces;
  int64_t *rows, *chars;
  struct funnel__dp_summary *s;
  struct funnel__dp_bitbuf bits[64];
  uint8_t *out, *tmpl;
};

/* The args of a parse of `n` partitions with `schema` into `x` (the
 * schema's columns into x->cols), with the template a read finds in them
 * when `with_template`, else none (the parse walks every message); of the
 * first pass of a read of `codec` bodies (0 LZ4, 1 ZSTD; -1: a plain
 * read), its jobs in `jobs`. */
static struct funnel__dp_args dp_args_of(const struct funnel_partition *parts, int n,
                                         const struct funnel__schema *schema, bool with_template,
                                         int codec, struct funnel__lz4_job *jobs,
                                         struct dp_tables *x) {
  const int n_cols = schema->n_fields;
  if (n > MAX_PARTS || n_cols > 32) check_fail(__FILE__, __LINE__, "test too large");
  int n_var, n_buffers;
  funnel__dp_columns_of(schema, x->cols, &n_var, &n_buffers);
  for (int p = 0; p < n; p++)
    x->inputs[p] = (struct funnel__dp_input){(uint64_t)(uintptr_t)parts[p].data,
                                             (int64_t)parts[p].length};
  x->s->first_left = n;
  x->tmpl = calloc((size_t)funnel__dp_template_max(schema->ipc_length, n_cols, n_buffers), 1);
  if (x->tmpl == NULL) abort();
  struct funnel__dp_args a = {
      .inputs = (uint64_t)(uintptr_t)x->inputs, .columns = (uint64_t)(uintptr_t)x->cols,
      .schema = (uint64_t)(uintptr_t)schema->ipc, .pieces = (uint64_t)(uintptr_t)x->pieces,
      .rows = (uint64_t)(uintptr_t)x->rows, .chars = (uint64_t)(uintptr_t)x->chars,
      .summary = (uint64_t)(uintptr_t)x->s, .bitbufs = (uint64_t)(uintptr_t)x->bits,
      .out = (uint64_t)(uintptr_t)x->out, .out_capacity = OUT_BYTES, .n_parts = n,
      .schema_length = schema->ipc_length, .max_rows = FUNNEL__MAX_ROWS, .n_cols = n_cols,
      .n_var = n_var, .n_buffers = n_buffers, .tmpl_bytes = (uint64_t)(uintptr_t)x->tmpl};
  if (codec >= 0) { /* before the template, whose batch is then one of this codec */
    a.zmode = FUNNEL_DP_UNPACK;
    a.zcodec = codec;
    a.zjobs = (uint64_t)(uintptr_t)jobs;
  }
  for (int p = 0; p < n && with_template; p++)
    if (parts[p].length > 0 &&
        funnel__dp_template_of(&a, schema->ipc, parts[p].data, (int64_t)parts[p].length, x->tmpl))
      break;
  return a;
}

/* Parses `n` partitions with `schema`, with the template a read finds in
 * them when `with_template`, else walking every message. */
static void run(const struct funnel_partition *parts, int n, const struct funnel__schema *schema,
                int with_template, struct dp_result *r) {
  const int n_cols = schema->n_fields;
  memset(r, 0, sizeof(*r));
  static struct dp_tables x;
  x.cols = r->cols;
  x.pieces = r->pieces;
  x.rows = r->rows;
  x.chars = calloc((size_t)(32 * (n + 1) + 1), sizeof(int64_t)); /* n_var <= 32 columns */
  x.s = calloc(1, sizeof(*x.s) + 64 * sizeof(int64_t));
  x.out = calloc(OUT_BYTES, 1);
  if (x.chars == NULL || x.s == NULL || x.out == NULL) abort();
  struct funnel__dp_args a = dp_args_of(parts, n, schema, with_template != 0, -1, NULL, &x);
  const int64_t n_var = a.n_var;
  struct funnel__dp_summary *s = x.s;
  uint8_t *out = x.out;
  r->tmpl_length = a.tmpl.length;
  funnel__dp_run_cpu(FUNNEL_DP_PARSE, &a, 0, n, 1); /* one lane */
  if (!FUNNEL__DP_PARSE_SCANS(n, 0, n)) funnel__dp_run_cpu(FUNNEL_DP_SCAN, &a, 0, 1 + n_var, n);
  funnel__dp_run_cpu(FUNNEL_DP_CONCAT, &a, 0, n * n_cols + n_cols, 1);
  memcpy(r->out, out, OUT_BYTES);
  /* the columns' output addresses, from the output's start */
  for (int c = 0; c < n_cols; c++) {
    struct funnel__dp_column *col = &r->cols[c];
    col->validity = col->validity ? col->validity - a.out : 0;
    col->offsets = col->offsets ? col->offsets - a.out : 0;
    col->data -= a.out;
  }
  r->s = *s;
  memcpy(r->sums, s + 1, (size_t)(n_cols + n_var) * sizeof(int64_t));
  free(x.tmpl);
  free(out);
  free(s);
  free(x.chars);
}

/* The read's schema (partition `from`'s), and the parse of the n
 * partitions with the template (t) and walking every one (w). */
static const struct funnel__schema *run_both(const struct funnel_partition *parts, int n, int from,
                                             struct funnel__arena *arena, struct dp_result *t,
                                             struct dp_result *w) {
  const struct funnel__schema *schema = schema_of(&parts[from], arena);
  run(parts, n, schema, 1, t);
  run(parts, n, schema, 0, w);
  return schema;
}

/* The template's run found what the walk's found. */
static void check_same(const struct dp_result *t, const struct dp_result *w, int n, int n_cols) {
  CHECK_EQ_I64(t->s.left, w->s.left);
  CHECK_EQ_I64(t->s.first_left, w->s.first_left);
  if (w->s.left > 0) return; /* what a left read's tables hold is not used */
  CHECK_EQ_I64(t->s.rows, w->s.rows);
  CHECK_EQ_I64(t->s.batches, w->s.batches);
  CHECK_EQ_I64(t->s.laid_out, w->s.laid_out);
  CHECK_EQ_I64(t->s.out_size, w->s.out_size);
  CHECK_MEM(t->sums, w->sums, sizeof(t->sums));
  CHECK_MEM(t->rows, w->rows, (n + 1) * sizeof(int64_t));
  CHECK_MEM(t->pieces, w->pieces, (size_t)(n * n_cols) * sizeof(struct funnel__dp_piece));
  CHECK_MEM(t->cols, w->cols, (size_t)n_cols * sizeof(struct funnel__dp_column));
  CHECK_MEM(t->out, w->out, t->s.out_size);
}

/* Partitions of one writer and one schema, every type funnel reads, with
 * nulls: the template takes them all, and finds what the walk finds. */
static void template_reads_one_writers_partitions(void) {
  struct table_src src = table_random(&every_schema, 40 * 16, 100, 7);
  struct funnel_partition *parts = table_partitions(&src, 40);
  struct funnel__arena arena = {0};
  static struct dp_result t, w;
  const struct funnel__schema *schema = run_both(parts, 40, 0, &arena, &t, &w);
  CHECK(t.tmpl_length > 0);
  CHECK_EQ_I64(t.s.templated, 40);
  CHECK_EQ_I64(w.s.templated, 0);
  CHECK_EQ_I64(w.s.left, 0);
  CHECK_EQ_I64(w.s.rows, 40 * 16);
  CHECK_EQ_I64(t.s.laid_out, 1);
  check_same(&t, &w, 40, schema->n_fields);
  funnel__arena_free(&arena);
  table_partitions_free(parts, 40);
  table_src_free(&src);
}

/* The schema, rows [r0, r1) as one batch (written with `o`), then `eos`
 * end-of-stream markers; a bare batch without `with_schema`. */
static struct funnel_partition write_partition(const struct table_src *src, int64_t r0, int64_t r1,
                                               int with_schema, int eos,
                                               const struct iw_options *o,
                                               struct iw_layout *layout) {
  struct iw_buf b = {0};
  if (with_schema) iw_schema_message(&b, src->schema, NULL, NULL);
  const struct iw_encode e = {.layout = layout};
  iw_batch_from_cols(&b, src->schema, src->cols, r0, r1, &e, o);
  for (int k = 0; k < eos; k++) iw_eos(&b, o);
  struct funnel_partition p = {iw_dup(b.data, b.len), b.len};
  iw_buf_free(&b);
  return p;
}

/* Partitions the walk takes but whose bytes differ from the template's
 * outside the values (a bare batch, two end-of-stream markers, an older
 * metadata version): the walk reads them, the template the others (no
 * rows, no end marker: values and tail differ only), and together they
 * find what the walk alone finds. */
static void template_leaves_other_layouts_to_the_walk(void) {
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
      {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
  };
  static const struct iw_schema sch = {3, fields, 0};
  struct table_src src = table_random(&sch, 80, 200, 11);
  const struct iw_options v4 = {.version = 3};
  struct funnel_partition parts[8];
  parts[0] = write_partition(&src, 0, 10, 1, 1, NULL, NULL);
  parts[1] = write_partition(&src, 10, 20, 0, 1, NULL, NULL); /* bare batch */
  parts[2] = write_partition(&src, 20, 30, 1, 2, NULL, NULL); /* two end markers */
  parts[3] = write_partition(&src, 30, 40, 1, 1, &v4, NULL);  /* a V4 batch */
  parts[4] = write_partition(&src, 40, 40, 1, 1, NULL, NULL); /* no rows */
  parts[5] = write_partition(&src, 40, 50, 1, 0, NULL, NULL); /* no end marker */
  parts[6] = write_partition(&src, 50, 80, 1, 1, NULL, NULL);
  parts[7] = (struct funnel_partition){NULL, 0};              /* empty */
  struct funnel__arena arena = {0};
  static struct dp_result t, w;
  run_both(parts, 8, 0, &arena, &t, &w);
  CHECK_EQ_I64(w.s.first_left, 8);
  CHECK_EQ_I64(w.s.left, 0);
  CHECK_EQ_I64(w.s.rows, 80);
  CHECK(t.tmpl_length > 0);
  /* partitions 0, 4, 5 and 6: the rest differ outside the values */
  CHECK_EQ_I64(t.s.templated, 4);
  check_same(&t, &w, 8, 3);
  for (int p = 0; p < 7; p++) free((void *)parts[p].data);
  funnel__arena_free(&arena);
  table_src_free(&src);
}

/* A partition that matches the template but whose values the host would
 * refuse: the template refuses it too, as the walk does (the same
 * partition left to the host); the short parse (funnel__dp_parse_short)
 * leaves it to the template's general path, which refuses it. */
static void template_checks_the_values(void) {
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_INT32, .name = "a", .nullable = 1},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
  };
  static const struct iw_schema sch = {2, fields, 0};
  struct table_src src = table_random(&sch, 64, 300, 5);
  enum {
    ROWS_NEG,
    NULLS_OVER,
    NULLS_CONTRADICTED,
    BUFFER_PAST_BODY,
    BODY_PAST_END,
    OFFSET_FALLS,
    LAST_OFFSET_PAST_BYTES,
    CASES
  };
  static const char *const names[CASES] = {"rows -1",
                                           "null count over length",
                                           "a null count its bits contradict",
                                           "buffer past body",
                                           "body past end",
                                           "offsets fall",
                                           "last offset past the string bytes"};
  for (int k = 0; k < CASES; k++) {
    check_context("%s", names[k]);
    struct funnel_partition parts[4];
    struct iw_layout lay;
    for (int p = 0; p < 4; p++)
      parts[p] = write_partition(&src, 16 * p, 16 * p + 16, 1, 1, NULL, p == 2 ? &lay : NULL);
    uint8_t *b = (uint8_t *)parts[2].data;
    switch (k) {
      case ROWS_NEG: memset(b + lay.length_field, 0xFF, 8); break;
      case NULLS_OVER: b[lay.nodes + 8] = 17; break; /* node 0's null count */
      case NULLS_CONTRADICTED: /* one more or one fewer than its bits hold */
        b[lay.nodes + 8] = b[lay.nodes + 8] < 16 ? b[lay.nodes + 8] + 1 : 15;
        break;
      case BUFFER_PAST_BODY: b[lay.buffers + 8 + 3] = 0x10; break; /* buffer 0's length */
      case BODY_PAST_END: b[lay.body_length_field + 2] = 1; break;
      case OFFSET_FALLS: {
        /* column s's offsets: buffer 3 {offset, length} */
        const int64_t at = (int64_t)lay.body + (int64_t)funnel__ld64(b + lay.buffers + 16 * 3);
        memcpy(b + at + 4, "\xFF\xFF\xFF\x7F", 4);
        break;
      }
      case LAST_OFFSET_PAST_BYTES: { /* still rising, past buffer 4's bytes */
        const int64_t at = (int64_t)lay.body + (int64_t)funnel__ld64(b + lay.buffers + 16 * 3);
        memcpy(b + at + 4 * 16, "\xF0\xFF\xFF\x7F", 4);
        break;
      }
    }
    struct funnel__arena arena = {0};
    static struct dp_result t, w;
    run_both(parts, 4, 0, &arena, &t, &w);
    CHECK(t.tmpl_length > 0);
    CHECK_EQ_I64(w.s.left, 1);
    CHECK_EQ_I64(w.s.first_left, 2);
    check_same(&t, &w, 4, 2);
    /* the template did read the other three */
    CHECK_EQ_I64(t.s.templated, 3);
    for (int p = 0; p < 4; p++) free((void *)parts[p].data);
    funnel__arena_free(&arena);
  }
  check_context("%s", "");
  table_src_free(&src);
}

/* No template from a partition that does not start with the read's
 * schema: the next one gives it, as a read tries the first few. */
static void template_from_a_partition_that_gives_one(void) {
  static const struct iw_field f = {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 0};
  static const struct iw_schema sch = {1, &f, 0};
  struct table_src src = table_random(&sch, 30, 0, 3);
  struct funnel_partition parts[3];
  parts[0] = write_partition(&src, 0, 10, 0, 1, NULL, NULL); /* bare */
  parts[1] = write_partition(&src, 10, 15, 0, 2, NULL, NULL); /* bare */
  parts[2] = write_partition(&src, 10, 30, 1, 1, NULL, NULL);
  struct funnel__arena arena = {0};
  static struct dp_result t, w;
  const struct funnel__schema *schema = run_both(parts, 3, 2, &arena, &t, &w);
  CHECK(t.tmpl_length > 0);
  CHECK_EQ_I64(t.s.templated, 1);
  check_same(&t, &w, 3, 1);
  run(parts, 2, schema, 1, &t); /* neither of the first two gives one */
  CHECK_EQ_I64(t.tmpl_length, 0);
  CHECK_EQ_I64(t.s.templated, 0);
  CHECK_EQ_I64(t.s.left, 0);
  for (int p = 0; p < 3; p++) free((void *)parts[p].data);
  funnel__arena_free(&arena);
  table_src_free(&src);
}

/* Partition rows [r0, r1) with its Message vtable laying the version over
 * bytes 1 and 2 of bodyLength, and a zeroed body of `body_length` bytes
 * (its buffers lie at its start): a hostile writer's flatbuffer. */
static struct funnel_partition version_over_body_length(const struct table_src *src, int64_t r0,
                                                        int64_t r1, int64_t body_length) {
  struct iw_layout lay;
  struct funnel_partition p = write_partition(src, r0, r1, 1, 0, NULL, &lay);
  uint8_t *b = calloc(lay.body + (size_t)body_length, 1);
  memcpy(b, p.data, p.length);
  free((void *)p.data);
  uint8_t *m = b + lay.metadata;
  const uint32_t table = funnel__ld32(m);
  const int64_t vtable = (int64_t)table - (int32_t)funnel__ld32(m + table);
  const uint16_t version_at = (uint16_t)(lay.body_length_field - lay.metadata - table + 1);
  memcpy(m + vtable + 4, &version_at, 2); /* slot 0: Message.version */
  memcpy(b + lay.body_length_field, &body_length, 8);
  return (struct funnel_partition){b, lay.body + (size_t)body_length};
}

/* A first partition whose values lie over its structure gives no
 * template: one whose mask hid the version would take a later partition
 * of version 5 (0x508's second byte), which the walk refuses. */
static void template_refuses_values_over_structure(void) {
  static const struct iw_field f = {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 0};
  static const struct iw_schema sch = {1, &f, 0};
  struct table_src src = table_random(&sch, 20, 0, 3);
  struct funnel_partition parts[2];
  parts[0] = version_over_body_length(&src, 0, 10, 0x408); /* version 4: V5 */
  parts[1] = version_over_body_length(&src, 10, 20, 0x508);
  struct funnel__arena arena = {0};
  static struct dp_result t, w;
  run_both(parts, 2, 0, &arena, &t, &w);
  CHECK_EQ_I64(w.s.left, 1);
  CHECK_EQ_I64(w.s.first_left, 1);
  CHECK_EQ_I64(t.tmpl_length, 0);
  check_same(&t, &w, 2, 1);
  for (int p = 0; p < 2; p++) free((void *)parts[p].data);
  funnel__arena_free(&arena);
  table_src_free(&src);
}

/* What one plain pass over the partitions says (read.h, struct
 * funnel__parts_scan), written here apart from transfer.c's. */
static struct funnel__parts_scan scan_by_loop(const struct funnel_partition *parts, size_t n) {
  struct funnel__parts_scan s = {.first = -1, .back_to_back = true};
  uintptr_t end = 0;
  for (size_t i = 0; i < n; i++) {
    const uintptr_t at = (uintptr_t)parts[i].data;
    const int64_t len = (int64_t)parts[i].length;
    if (len == 0) {
      s.empty++;
    } else if (at == 0) {
      s.bad = true;
    } else {
      s.bytes += len;
      s.aligned += (len + FUNNEL__ALIGN - 1) / FUNNEL__ALIGN * FUNNEL__ALIGN;
      if (s.first < 0) {
        s.first = (int64_t)i;
        s.lo = at;
        s.hi = at + (uintptr_t)len;
      } else {
        if (at < end || at - end >= FUNNEL__MERGE_GAP) s.back_to_back = false;
        if (at < s.lo) s.lo = at;
        if (at + (uintptr_t)len > s.hi) s.hi = at + (uintptr_t)len;
      }
      end = at + (uintptr_t)len;
    }
  }
  return s;
}

/* A read of many partitions passes over them in parts on the host
 * threads (workers.h); joined, the parts say what one pass says, whatever
 * happens where a part ends: a gap of FUNNEL__MERGE_GAP bytes, one a byte
 * shorter, a partition out of order, empty partitions (a whole part of
 * them), one with no data. */
static void scan_in_parts_says_what_one_pass_says(void) {
  const size_t n = 20000;
  const int64_t parts_n = funnel__pass_parts(n);
  printf("scan: %lld parts of %zu partitions\n", (long long)parts_n, n);
  struct funnel_partition *parts = calloc(n, sizeof(*parts));
  uint8_t *block = malloc(n * 200 + 64 * 1024);
  /* where parts of 2 to 16 begin, and one partition on either side */
  size_t marks[3 * 15 * 2];
  int n_marks = 0;
  for (int64_t k = 2; k <= 16; k++)
    for (int64_t i = 1; i < k && n_marks + 3 <= (int)(sizeof(marks) / sizeof(marks[0])); i += k / 2) {
      const size_t b = funnel__pass_from(n, k, i);
      marks[n_marks++] = b - 1;
      marks[n_marks++] = b;
      marks[n_marks++] = b + 1;
    }
  for (int twist = 0; twist < 7; twist++) {
    for (int m = 0; m < n_marks; m++) {
      uint64_t rng = 7 + (uint64_t)twist * 1000 + (uint64_t)m;
      size_t at = 0;
      for (size_t i = 0; i < n; i++) {
        const size_t len = 1 + check_rand_below(&rng, 150);
        const bool here = i == marks[m];
        if (twist == 1 && here) at += FUNNEL__MERGE_GAP;      /* no longer one run */
        if (twist == 2 && here) at += FUNNEL__MERGE_GAP - 1;  /* still one run */
        parts[i] = (struct funnel_partition){block + at, len};
        at += len;
        if (twist == 3 && here && i > 0) { /* before the one before it */
          parts[i].data = (const uint8_t *)parts[i - 1].data - 1;
        }
        if (twist == 4 && i >= marks[m] && i < marks[m] + 3000) parts[i].length = 0;
        if (twist == 5 && here) parts[i].data = NULL;
        if (twist == 6 && (here || i == 0)) parts[i].length = 0;
      }
      const struct funnel__parts_scan w = scan_by_loop(parts, n);
      struct funnel__parts_scan g;
      funnel__scan_parts(parts, n, &g);
      check_context("twist %d at partition %zu", twist, marks[m]);
      CHECK_EQ_I64(g.bytes, w.bytes);
      CHECK_EQ_I64(g.aligned, w.aligned);
      CHECK_EQ_I64(g.empty, w.empty);
      CHECK_EQ_I64(g.first, w.first);
      CHECK_EQ_I64((int64_t)g.bad, (int64_t)w.bad);
      if (!w.bad) {
        CHECK_EQ_I64((int64_t)(g.lo - (uintptr_t)block), (int64_t)(w.lo - (uintptr_t)block));
        CHECK_EQ_I64((int64_t)(g.hi - (uintptr_t)block), (int64_t)(w.hi - (uintptr_t)block));
        CHECK_EQ_I64((int64_t)g.back_to_back, (int64_t)w.back_to_back);
      }
      check_context("%s", "");
    }
  }
  free(block);
  free(parts);
}

/* A fixed-width column's sizes (funnel__dp_sizes, which multiplies in
 * 128 bits) against the bound written as a division: the same answer for
 * rows, widths and capacities at and past where rows * width overflows. */
static void column_sizes_bound_as_a_division(void) {
  static const int64_t rows[] = {0, 1, 7, 1 << 20, (int64_t)1 << 40, INT64_MAX / 64,
                                 INT64_MAX / 2, INT64_MAX - 7};
  static const int32_t widths[] = {0, 1, 4, 8, 16, 32, 64, 1024, INT32_MAX};
  static const int64_t caps[] = {0, 100, (int64_t)1 << 30, (int64_t)1 << 62, INT64_MAX};
  for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
      for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        const struct funnel__dp_column col = {
            .kind = FUNNEL_DP_FIXED, .width = widths[w], .var = -1};
        int64_t size[3];
        int bits;
        const bool ok = funnel__dp_sizes(&col, rows[r], 0, 0, caps[c], size, &bits);
        const bool want = widths[w] == 0 || rows[r] <= caps[c] / widths[w];
        check_context("rows %lld, width %d, capacity %lld", (long long)rows[r], widths[w],
                      (long long)caps[c]);
        CHECK(ok == want);
        if (ok) CHECK_EQ_I64(size[2], rows[r] * widths[w]);
      }
  check_context("%s", "");
  /* 32-bit offsets: at most INT32_MAX string bytes */
  const struct funnel__dp_column s32 = {.kind = FUNNEL_DP_VAR32, .var = 0};
  int64_t size[3];
  int bits;
  CHECK(funnel__dp_sizes(&s32, 10, 2, INT32_MAX, INT64_MAX, size, &bits));
  CHECK_EQ_I64(size[0], 2);
  CHECK_EQ_I64(size[1], 44);
  CHECK_EQ_I64(size[2], INT32_MAX);
  CHECK_EQ_I64(bits, 1);
  CHECK(!funnel__dp_sizes(&s32, 10, 0, (int64_t)INT32_MAX + 1, INT64_MAX, size, &bits));
}

/* What the two passes of a compressed read found: the first pass's summary
 * and jobs, the second's summary, sums, rows, pieces, string bytes and
 * output (laid: the second pass ran). */
struct z_result {
  struct funnel__dp_summary s1, s2;
  int64_t sums[64];
  int64_t rows[MAX_PARTS + 1];
  int64_t chars[32 * (MAX_PARTS + 1)];
  struct funnel__dp_piece pieces[MAX_PARTS * 32];
  struct funnel__lz4_job jobs[MAX_PARTS * 96];
  bool laid;
  _Alignas(64) uint8_t out[OUT_BYTES]; /* as the device's allocations are */
};

enum { Z_ROOM = 4 << 20 };

/* A pass over every partition: the short parse first (as the kernels and
 * the cpu backend try it) or the general one alone; then, unless it is a
 * first pass, the scan and the layout. */
static void z_pass(struct funnel__dp_args *a, int64_t n, bool short_first, int64_t *took) {
  uint64_t stage[FUNNEL__DP_STAGE_BYTES / 8];
  for (int64_t p = 0; p < n; p++) {
    if (short_first && funnel__dp_parse_short(a, p, 0, 1, (uint8_t *)stage, sizeof(stage))) {
      (*took)++;
      continue;
    }
    funnel__dp_parse(a, p, 0, 1, (uint8_t *)stage, sizeof(stage));
  }
  if (a->zmode != FUNNEL_DP_UNPACK) funnel__dp_run_cpu(FUNNEL_DP_SCAN, a, 0, 1 + a->n_var, n);
}

/* Both passes of a read of `codec` bodies (0 LZ4, 1 ZSTD) as the device
 * path makes them, the decoder run between them on the host. */
static void z_read(const struct funnel_partition *parts, int n, const struct funnel__schema *schema,
                   int codec, bool short_first, uint8_t *zroom, struct z_result *r,
                   int64_t *took) {
  memset(r, 0, sizeof(*r));
  memset(r->chars, 0x5a, sizeof(r->chars));
  memset(r->jobs, 0xab, sizeof(r->jobs));
  memset(zroom, 0, Z_ROOM);
  const int n_cols = schema->n_fields;
  const size_t summary_bytes = sizeof(struct funnel__dp_summary) + sizeof(r->sums);
  static struct dp_tables x;
  struct funnel__dp_column cols[32];
  x.cols = cols;
  x.pieces = r->pieces;
  x.rows = r->rows;
  x.chars = r->chars;
  x.s = calloc(1, summary_bytes);
  x.out = r->out;
  if (x.s == NULL) abort();
  struct funnel__dp_args a = dp_args_of(parts, n, schema, true, codec, r->jobs, &x);
  struct funnel__dp_summary *s = x.s;
  const int64_t n_var = a.n_var, n_buffers = a.n_buffers;
  z_pass(&a, n, short_first, &took[0]);
  r->s1 = *s;
  if (s->left == 0 && s->zbytes <= Z_ROOM) {
    funnel__lz4_run_jobs(r->jobs, (int64_t)n * n_buffers, (uint64_t)(uintptr_t)zroom, 1);
    funnel__zstd_run_jobs(r->jobs, (int64_t)n * n_buffers, (uint64_t)(uintptr_t)zroom);
    a.zmode = FUNNEL_DP_DECODED;
    a.zscratch = (uint64_t)(uintptr_t)zroom;
    memset(s, 0, summary_bytes);
    s->first_left = n;
    z_pass(&a, n, short_first, &took[1]);
    funnel__dp_run_cpu(FUNNEL_DP_CONCAT, &a, 0, (int64_t)n * n_cols + n_cols, 1);
    r->s2 = *s;
    memcpy(r->sums, s + 1, (size_t)(n_cols + n_var) * sizeof(int64_t));
    r->laid = true;
  }
  free(x.tmpl);
  free(s);
}

/* One of the partition's 64-bit values a template masks out (its body's
 * length, rows, a field node's, a buffer's place), or a body's prefix (a
 * buffer's decoded length), changed to one a reader might meet. */
static void z_mutate(uint8_t *d, int64_t len, const struct funnel__dp_template *t, int n_cols,
                     int n_buffers, uint64_t *rng) {
  int64_t at;
  const int what = (int)(check_rand(rng) % 5);
  if (what == 0) at = t->body_length;
  else if (what == 1) at = t->rows;
  else if (what == 2) /* a node's length or null count */
    at = t->nodes + 16 * (int64_t)(check_rand(rng) % (uint64_t)n_cols) +
         8 * (int64_t)(check_rand(rng) % 2);
  else if (what == 3) /* a buffer's offset or length */
    at = t->buffers + 16 * (int64_t)(check_rand(rng) % (uint64_t)n_buffers) +
         8 * (int64_t)(check_rand(rng) % 2);
  else {
    const int64_t k = (int64_t)(check_rand(rng) % (uint64_t)n_buffers);
    int64_t off, n;
    memcpy(&off, d + t->buffers + 16 * k, 8);
    memcpy(&n, d + t->buffers + 16 * k + 8, 8);
    at = t->length + off;
    if (n < 8 || at < 0 || at + 8 > len) return;
  }
  int64_t v;
  memcpy(&v, d + at, 8);
  static const int64_t deltas[] = {1, -1, 8, -8, 100};
  switch (check_rand(rng) % 5) {
    case 0: v += deltas[check_rand(rng) % 5]; break;
    case 1: v = -1; break;
    case 2: v = 0; break;
    case 3: v = (int64_t)1 << 40; break;
    default: v = 129; break;
  }
  memcpy(d + at, &v, 8);
}

/* The short parse (funnel__dp_parse_short) takes the partitions of a
 * compressed read in both passes: it must make the first pass's jobs and
 * counts and the second pass's rows, pieces and sums exactly as the
 * general parse does, and refuse what it refuses, on partitions of every
 * type written with LZ4 and ZSTD as Arrow Java, Arrow C++ and the funnel
 * shuffle write them (raw buffers among them), of 1 to 200 rows (the short
 * parse binds at most FUNNEL__DP_FAST_ROWS in a second pass), some left
 * plain, some without an end-of-stream marker, and some with a value the
 * template masks out or a buffer's prefix changed. */
static void short_parse_of_compressed_reads_matches_the_general_one(void) {
  static const struct iw_options writings[] = {
      {.compression = 1, .lz4_style = IW_LZ4_JAVA, .raw_fallback = 1, .empty_prefix = 1},
      {.compression = 1, .lz4_style = IW_LZ4_CPP, .raw_fallback = 1},
      {.compression = 1, .lz4_style = IW_LZ4_SPARK},
      {.compression = 2, .raw_fallback = 1, .empty_prefix = 1, .zstd_level = 3},
      {.compression = 2},
  };
  static const int64_t ROWS[] = {1, 10, 100, 128, 129, 200};
  static struct z_result with_short, general;
  uint8_t *zroom = malloc(Z_ROOM);
  if (zroom == NULL) abort();
  uint64_t rng = 58;
  int64_t took[2] = {0, 0}, unused[2] = {0, 0}, refused = 0;
  for (int w = 0; w < (int)(sizeof(writings) / sizeof(writings[0])); w++)
    for (int shape = 0; shape < (int)(sizeof(ROWS) / sizeof(ROWS[0])); shape++)
      for (int k = 0; k < 24; k++) {
        const int n = 4 + (int)(check_rand(&rng) % 28);
        const int64_t rows = ROWS[shape];
        check_context("writing %d, %d partitions of %lld rows, case %d", w, n, (long long)rows, k);
        struct table_src src = table_random(&every_schema, rows * n, (int)(check_rand(&rng) % 300),
                                            check_rand(&rng));
        if (k % 2) table_make_compressible(&src);
        struct funnel_partition parts[MAX_PARTS];
        for (int i = 0; i < n; i++) {
          const bool plain = k % 6 == 3 && i % 3 == 1;
          struct iw_buf b = {0};
          iw_schema_message(&b, src.schema, plain ? NULL : &writings[w], NULL);
          iw_batch_from_cols(&b, src.schema, src.cols, rows * i, rows * (i + 1), NULL,
                             plain ? NULL : &writings[w]);
          if (!(k % 5 == 2 && i == 2)) iw_eos(&b, plain ? NULL : &writings[w]);
          parts[i] = (struct funnel_partition){iw_dup(b.data, b.len), b.len};
          iw_buf_free(&b);
        }
        struct funnel__arena arena = {0};
        const struct funnel__schema *schema = schema_of(&parts[0], &arena);
        struct funnel__dp_column cols[32];
        int n_var = 0, n_buffers = 0;
        funnel__dp_columns_of(schema, cols, &n_var, &n_buffers);
        if (k >= 12) { /* a partition but the first changed where the template masks */
          struct funnel__dp_args ta = {.schema_length = schema->ipc_length,
                                       .n_cols = schema->n_fields, .n_var = n_var,
                                       .n_buffers = n_buffers, .zmode = FUNNEL_DP_UNPACK,
                                       .max_rows = FUNNEL__MAX_ROWS};
          uint8_t *tmpl = calloc((size_t)funnel__dp_template_max(schema->ipc_length,
                                                                 schema->n_fields, n_buffers), 1);
          if (tmpl != NULL && funnel__dp_template_of(&ta, schema->ipc, parts[0].data,
                                                     (int64_t)parts[0].length, tmpl)) {
            const int p = 1 + (int)(check_rand(&rng) % (uint64_t)(n - 1));
            if ((int64_t)parts[p].length >= ta.tmpl.length)
              z_mutate((uint8_t *)parts[p].data, (int64_t)parts[p].length, &ta.tmpl,
                       schema->n_fields, n_buffers, &rng);
          }
          free(tmpl);
        }
        const int codec = writings[w].compression == 2 ? 1 : 0;
        z_read(parts, n, schema, codec, true, zroom, &with_short, took);
        z_read(parts, n, schema, codec, false, zroom, &general, unused);
        const struct z_result *x = &with_short, *y = &general;
        CHECK_EQ_I64(x->s1.left, y->s1.left);
        CHECK_EQ_I64(x->s1.first_left, y->s1.first_left);
        CHECK_EQ_I64(x->s1.zbytes, y->s1.zbytes);
        CHECK_EQ_I64(x->s1.zparts, y->s1.zparts);
        CHECK_EQ_I64(x->s1.zin, y->s1.zin);
        CHECK_EQ_I64(x->s1.zout, y->s1.zout);
        CHECK_EQ_I64(x->s1.zframes, y->s1.zframes);
        CHECK_EQ_I64(x->s1.zframe_bytes, y->s1.zframe_bytes);
        refused += y->s1.left > 0;
        if (y->s1.left == 0)
          CHECK_MEM(x->jobs, y->jobs, sizeof(x->jobs[0]) * (size_t)(n * n_buffers));
        CHECK_EQ_I64(x->laid, y->laid);
        if (x->laid && y->laid) {
          CHECK_EQ_I64(x->s2.left, y->s2.left);
          CHECK_EQ_I64(x->s2.first_left, y->s2.first_left);
          CHECK_EQ_I64(x->s2.batches, y->s2.batches);
          CHECK_EQ_I64(x->s2.templated, y->s2.templated);
          CHECK_EQ_I64(x->s2.rows, y->s2.rows);
          CHECK_EQ_I64(x->s2.laid_out, y->s2.laid_out);
          CHECK_EQ_I64(x->s2.out_size, y->s2.out_size);
          if (y->s2.left == 0) {
            CHECK_MEM(x->sums, y->sums, sizeof(x->sums));
            CHECK_MEM(x->rows, y->rows, sizeof(int64_t) * (size_t)(n + 1));
            CHECK_MEM(x->chars, y->chars, sizeof(int64_t) * (size_t)(n_var * (n + 1)));
            CHECK_MEM(x->pieces, y->pieces, sizeof(x->pieces[0]) * (size_t)(n * schema->n_fields));
            if (x->s2.out_size == y->s2.out_size && y->s2.laid_out)
              CHECK_MEM(x->out, y->out, y->s2.out_size);
          }
        }
        for (int i = 0; i < n; i++) free((void *)parts[i].data);
        funnel__arena_free(&arena);
        table_src_free(&src);
      }
  check_context("%s", "");
  printf("  the short parse took %lld first-pass and %lld second-pass partitions; %lld reads "
         "refused\n", (long long)took[0], (long long)took[1], (long long)refused);
  /* the comparison meant something: both passes' short paths ran, and
   * the changed values made the parse refuse some reads */
  CHECK(took[0] > 1000);
  CHECK(took[1] > 1000);
  CHECK(refused > 10);
  free(zroom);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(template_reads_one_writers_partitions),
      CHECK_TEST(template_leaves_other_layouts_to_the_walk),
      CHECK_TEST(template_checks_the_values),
      CHECK_TEST(template_from_a_partition_that_gives_one),
      CHECK_TEST(template_refuses_values_over_structure),
      CHECK_TEST(scan_in_parts_says_what_one_pass_says),
      CHECK_TEST(column_sizes_bound_as_a_division),
      CHECK_TEST(short_parse_of_compressed_reads_matches_the_general_one),
  };
  return CHECK_MAIN(argc, argv, tests);
}
