/* test_format.c: the Arrow IPC parser (funnel__partition_parse,
 * funnel__schema_parse) and the binding of batches to a schema
 * (funnel__plan_build), on partitions written by ipc_writer.c.
 *
 * Error cases first: every rejection must carry the specific code, the
 * partition (and column where one is at fault) and a message. Then the
 * valid inputs: every supported type, legacy framing, several streams. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "format.h"
#include "ipc_writer.h"
#include "plan.h"

/* The partition index the tests parse as, so errors must name it. */
#define INDEX 7

static const struct iw_field small_fields[] = {
    {.type = FUNNEL_TYPE_INT32, .name = "id", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 0},
};
static const struct iw_schema small_schema = {3, small_fields, 0};

/* A table of `rows` random rows of small_schema. */
static void small_cols(struct iw_col cols[3], int64_t rows, uint64_t seed) {
  uint64_t rng = seed;
  for (int i = 0; i < 3; i++) iw_col_random(&cols[i], &small_fields[i], rows, 250, &rng);
}

static void free_cols(struct iw_col *cols, int n) {
  for (int i = 0; i < n; i++) iw_col_free(&cols[i]);
}

/* Schema, one batch per entry of batch_rows, EOS. boundaries (may be NULL)
 * gets the end of every message: schema, batches, EOS. */
static void small_stream(struct iw_buf *out, const struct iw_col cols[3], const int64_t *batch_rows,
                         int n_batches, const struct iw_options *o, size_t *boundaries) {
  iw_schema_message(out, &small_schema, o, NULL);
  if (boundaries) boundaries[0] = out->len;
  int64_t r = 0;
  for (int b = 0; b < n_batches; b++) {
    iw_batch_from_cols(out, &small_schema, cols, r, r + batch_rows[b], NULL, o);
    r += batch_rows[b];
    if (boundaries) boundaries[1 + b] = out->len;
  }
  iw_eos(out, o);
  if (boundaries) boundaries[1 + n_batches] = out->len;
}

/* ------------------------------------------------------------ the parser */

struct parsed {
  uint8_t *copy; /* exactly the partition's bytes, so ASan sees overreads */
  struct funnel__arena arena;
  struct funnel__partition part;
  struct funnel__partition parts[INDEX + 1]; /* the plan's partitions: ours at INDEX */
  struct funnel__plan plan;
};

/* The plans' segment chunk size (0: the default). */
static int64_t chunk_bytes;

/* Parses `bytes` as partition INDEX, then (when that works and
 * `plan` is set) builds a plan, which binds every batch. */
static int parse(struct parsed *p, const uint8_t *bytes, size_t len, int plan,
                 struct funnel_error *err) {
  memset(p, 0, sizeof(*p));
  p->copy = iw_dup(bytes, len);
  memset(err, 0, sizeof(*err));
  err->partition = err->column = err->offset = -2; /* so "left unset" shows */
  int st = funnel__partition_parse(p->copy, (int64_t)len, INDEX, &p->arena, &p->part, err);
  if (st == FUNNEL_OK && plan) {
    /* the plan names partitions by their index in its array */
    p->parts[INDEX] = p->part;
    st = funnel__plan_build(NULL, p->parts, INDEX + 1, chunk_bytes, &p->arena, &p->plan, err);
    if (st == FUNNEL_OK) st = funnel__plan_check_pieces(&p->plan, err);
    p->part = p->parts[INDEX];
  }
  return st;
}

static void parsed_free(struct parsed *p) {
  funnel__arena_free(&p->arena);
  free(p->copy);
}

/* `bytes` is rejected with `code`; the error names partition INDEX and
 * column `column` (-1: none). */
static void expect_rejected_at(const char *file, int line, const uint8_t *bytes, size_t len,
                               int code, int64_t column) {
  struct parsed p;
  struct funnel_error err;
  int st = parse(&p, bytes, len, 1, &err);
  if (check_status_at(file, line, "parse", st, code, &err)) {
    check_eq_i64_at(file, line, "error.partition", "INDEX", err.partition, INDEX);
    check_eq_i64_at(file, line, "error.column", "column", err.column, column);
    check_true_at(file, line, "strstr(message, \"partition 7\")", strstr(err.message, "partition 7") != NULL);
  }
  parsed_free(&p);
}
#define EXPECT_REJECTED(bytes, len, code, column) \
  expect_rejected_at(__FILE__, __LINE__, (bytes), (len), (code), (column))

static void put64_at(uint8_t *p, int64_t v) { memcpy(p, &v, 8); }
static void put32_at(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }
static int64_t get64_at(const uint8_t *p) { int64_t v; memcpy(&v, p, 8); return v; }
static uint32_t get32_at(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* ------------------------------------------------------------- rejections */

static void parse_rejects_truncated_partition_at_every_length(void) {
  struct iw_col cols[3];
  small_cols(cols, 30, 1);
  const int64_t rows[2] = {13, 17};
  size_t bounds[4];
  struct iw_buf b = {0};
  small_stream(&b, cols, rows, 2, NULL, bounds);
  for (size_t len = 0; len < b.len; len++) {
    check_context("truncated to %zu of %zu bytes", len, b.len);
    int at_boundary = len == 0;
    for (int k = 0; k < 4; k++) at_boundary |= len == bounds[k];
    struct parsed p;
    struct funnel_error err;
    int st = parse(&p, b.data, len, len > 0, &err);
    if (at_boundary) {
      /* a stream may end after any message: fewer batches, not an error */
      CHECK_OK(st, &err);
      int64_t want = len >= bounds[2] ? 2 : len >= bounds[1] ? 1 : 0;
      CHECK_EQ_I64(p.part.n_batches, want);
    } else if (CHECK_STATUS(st, FUNNEL_ERR_MALFORMED, &err)) {
      CHECK_EQ_I64(err.partition, INDEX);
      CHECK(err.offset >= 0 && err.offset <= (int64_t)len);
      CHECK(strstr(err.message, "partition 7") != NULL);
    }
    parsed_free(&p);
  }
  iw_buf_free(&b);
  free_cols(cols, 3);
}

static void parse_rejects_corrupt_flatbuffer(void) {
  /* schema, then a batch of two rows: id int32, s utf8, b bool */
  struct iw_buf b = {0};
  struct iw_layout sl, bl;
  iw_schema_message(&b, &small_schema, NULL, &sl);
  const size_t schema_end = b.len;
  static const int32_t ids[2] = {1, 2};
  static const int32_t offs[3] = {0, 1, 3};
  static const uint8_t bits[1] = {0x2};
  struct iw_column ic[3] = {
      {.length = 2, .data = ids, .data_length = 8},
      {.length = 2, .offsets = offs, .offsets_length = 12, .data = "abc", .data_length = 3},
      {.length = 2, .data = bits, .data_length = 1}};
  iw_batch_message(&b, &small_schema, 2, ic, NULL, &bl);
  CHECK_EQ_I64(bl.message, schema_end);
  struct parsed p;
  struct funnel_error err;
  if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err)) CHECK_EQ_I64(p.part.rows, 2);
  parsed_free(&p);

  uint8_t *c = iw_dup(b.data, b.len);
  const size_t message_table = sl.metadata + get32_at(b.data + sl.metadata);
  struct { const char *what; size_t at; int bytes; int64_t value; int64_t column; } cases[] = {
      {"root uoffset past the metadata", sl.metadata, 4, (int64_t)sl.metadata_length, -1},
      {"root uoffset to the last byte", sl.metadata, 4, (int64_t)sl.metadata_length - 1, -1},
      {"Message vtable before the metadata", message_table, 4, 0x7FFFFFF0, -1},
      {"Message vtable after the metadata", message_table, 4, -0x10000, -1},
      {"Message vtable of odd length", message_table - (size_t)(int32_t)get32_at(b.data + message_table), 2, 7, -1},
      {"Message vtable longer than the metadata", message_table - (size_t)(int32_t)get32_at(b.data + message_table), 2, 0x7FF0, -1},
      {"Message table longer than the metadata", message_table - (size_t)(int32_t)get32_at(b.data + message_table) + 2, 2, 0xFFF0, -1},
      {"fields vector longer than the metadata", sl.fields, 4, 0x10000000, -1},
      {"fields vector of 2^32-1 entries", sl.fields, 4, -1, -1},
      {"nodes vector longer than the metadata", bl.nodes - 4, 4, 1000000, -1},
      {"buffers vector longer than the metadata", bl.buffers - 4, 4, 0x7FFFFFFF, -1},
      {"RecordBatch vtable past the metadata", bl.header, 4, -(int64_t)bl.metadata_length, -1},
      {"Schema vtable past the metadata", sl.header, 4, -(int64_t)sl.metadata_length, -1},
      {"metadata length past the end", bl.message + 4, 4, (int64_t)(b.len - bl.message), -1},
      {"negative metadata length", bl.message + 4, 4, -16, -1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_context("%s", cases[i].what);
    memcpy(c, b.data, b.len);
    if (cases[i].bytes == 4) put32_at(c + cases[i].at, (int32_t)cases[i].value);
    else { uint16_t v = (uint16_t)cases[i].value; memcpy(c + cases[i].at, &v, 2); }
    EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, cases[i].column);
  }
  /* a field's name string running past the metadata */
  check_context("field name past the metadata");
  memcpy(c, b.data, b.len);
  {
    size_t field0 = sl.fields + 4 + get32_at(b.data + sl.fields + 4);
    size_t vt = field0 - (size_t)(int32_t)get32_at(b.data + field0);
    uint16_t name_off;
    memcpy(&name_off, b.data + vt + 4, 2);
    size_t name_ref = field0 + name_off;
    size_t name = name_ref + get32_at(b.data + name_ref);
    put32_at(c + name, 0x00FFFFFF);
  }
  EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, 0);
  free(c);
  iw_buf_free(&b);
}

/* A partition of small_schema: schema, one batch of two rows, EOS; `bl`
 * gets the batch's layout. */
static void two_row_partition(struct iw_buf *b, struct iw_layout *bl, const struct iw_options *o) {
  static const int32_t ids[2] = {1, 2};
  static const int32_t offs[3] = {0, 1, 3};
  static const uint8_t valid[1] = {0x1};
  static const uint8_t bits[1] = {0x2};
  struct iw_column ic[3] = {
      {.length = 2, .null_count = 1, .validity = valid, .validity_length = 1, .data = ids, .data_length = 8},
      {.length = 2, .offsets = offs, .offsets_length = 12, .data = "abc", .data_length = 3},
      {.length = 2, .data = bits, .data_length = 1}};
  iw_schema_message(b, &small_schema, o, NULL);
  iw_batch_message(b, &small_schema, 2, ic, o, bl);
  iw_eos(b, o);
}

static void parse_rejects_body_shorter_than_body_length(void) {
  struct iw_buf b = {0};
  struct iw_layout bl;
  two_row_partition(&b, &bl, NULL);
  uint8_t *c = iw_dup(b.data, b.len);
  /* past the end of the partition (the EOS is 8 bytes) */
  put64_at(c + bl.body_length_field, (int64_t)bl.body_length + 16);
  EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, -1);
  put64_at(c + bl.body_length_field, INT64_MAX);
  EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, -1);
  put64_at(c + bl.body_length_field, -8);
  EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, -1);
  /* the body cut short: the partition ends inside it */
  EXPECT_REJECTED(b.data, bl.body + bl.body_length - 1, FUNNEL_ERR_MALFORMED, -1);
  free(c);
  iw_buf_free(&b);
}

static void parse_rejects_buffer_outside_body(void) {
  struct iw_buf b = {0};
  struct iw_layout bl;
  two_row_partition(&b, &bl, NULL);
  const int64_t body = (int64_t)bl.body_length;
  struct { int64_t offset, length; } cases[] = {
      {body, 1}, {body - 4, 8}, {0, body + 1}, {-8, 8}, {0, -1}, {INT64_MAX, 8},
      {8, INT64_MAX}, {INT64_MIN, 0}, {body + 8, 0}};
  uint8_t *c = iw_dup(b.data, b.len);
  for (int k = 0; k < 7; k++) /* every one of the 7 buffers */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      check_context("buffer %d at %lld, %lld bytes", k, (long long)cases[i].offset,
                    (long long)cases[i].length);
      memcpy(c, b.data, b.len);
      put64_at(c + bl.buffers + 16 * (size_t)k, cases[i].offset);
      put64_at(c + bl.buffers + 16 * (size_t)k + 8, cases[i].length);
      EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, -1);
    }
  free(c);
  iw_buf_free(&b);
}

/* Batches that parse but do not fit the schema: caught when bound. */
static void bind_rejects_batch_that_contradicts_schema(void) {
  struct iw_buf b = {0};
  struct iw_layout bl;
  two_row_partition(&b, &bl, NULL);
  uint8_t *c = iw_dup(b.data, b.len);
  const size_t nodes = bl.nodes, bufs = bl.buffers;
  /* buffers: 0 id validity, 1 id data, 2 s validity, 3 s offsets, 4 s data,
   * 5 b validity, 6 b data */
  struct { const char *what; size_t at; int64_t value; int64_t column; int code; } cases[] = {
      {"node length differs from the batch length", nodes, 3, 0, FUNNEL_ERR_MALFORMED},
      {"node length of the last column", nodes + 32, 1, 2, FUNNEL_ERR_MALFORMED},
      {"null count over the length", nodes + 8, 3, 0, FUNNEL_ERR_MALFORMED},
      {"negative null count", nodes + 16 + 8, -1, 1, FUNNEL_ERR_MALFORMED},
      {"nulls without a validity buffer", nodes + 16 + 8, 1, 1, FUNNEL_ERR_MALFORMED},
      {"validity buffer too short", bufs + 8, 0, 0, FUNNEL_ERR_MALFORMED},
      {"null count 0, the validity bits hold a null", nodes + 8, 0, 0, FUNNEL_ERR_MALFORMED},
      {"null count of every row, the validity bits hold a valid row", nodes + 8, 2, 0,
       FUNNEL_ERR_MALFORMED},
      {"int32 data too short", bufs + 16 + 8, 7, 0, FUNNEL_ERR_MALFORMED},
      {"offsets buffer too short", bufs + 48 + 8, 11, 1, FUNNEL_ERR_MALFORMED},
      {"string data shorter than the last offset", bufs + 64 + 8, 2, 1, FUNNEL_ERR_MALFORMED},
      {"bool data empty", bufs + 96 + 8, 0, 2, FUNNEL_ERR_MALFORMED},
      {"batch length differs from every node", bl.length_field, 5, 0, FUNNEL_ERR_MALFORMED},
      {"negative batch length", bl.length_field, -2, -1, FUNNEL_ERR_MALFORMED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_context("%s", cases[i].what);
    memcpy(c, b.data, b.len);
    put64_at(c + cases[i].at, cases[i].value);
    EXPECT_REJECTED(c, b.len, cases[i].code, cases[i].column);
  }
  /* string offsets: they live in the body */
  const size_t offs = bl.body + (size_t)get64_at(b.data + bufs + 48);
  struct { const char *what; int32_t first, last; } oc[] = {
      {"negative first offset", -1, 3}, {"last offset before the first", 2, 1},
      {"last offset past the data", 0, 4}, {"last offset INT32_MAX", 0, INT32_MAX},
      {"first offset INT32_MIN", INT32_MIN, 3}};
  for (size_t i = 0; i < sizeof(oc) / sizeof(oc[0]); i++) {
    check_context("%s", oc[i].what);
    memcpy(c, b.data, b.len);
    put32_at(c + offs, oc[i].first);
    put32_at(c + offs + 8, oc[i].last);
    EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, 1);
  }
  free(c);
  iw_buf_free(&b);

  /* node and buffer counts that do not match the schema */
  check_context("a batch of the wrong shape");
  static const struct iw_field two[] = {{.type = FUNNEL_TYPE_INT32, .name = "id", .nullable = 1},
                                        {.type = FUNNEL_TYPE_INT32, .name = "s", .nullable = 1}};
  static const struct iw_schema wrong = {2, two, 0};
  static const int32_t v[2] = {1, 2};
  struct iw_column ic[2] = {{.length = 2, .data = v, .data_length = 8},
                            {.length = 2, .data = v, .data_length = 8}};
  struct iw_buf w = {0};
  iw_schema_message(&w, &small_schema, NULL, NULL);
  iw_batch_message(&w, &wrong, 2, ic, NULL, NULL);
  EXPECT_REJECTED(w.data, w.len, FUNNEL_ERR_MALFORMED, -1);
  iw_buf_free(&w);
  /* three nodes but one buffer too few: string column written as int32 */
  static const struct iw_field three[] = {{.type = FUNNEL_TYPE_INT32, .name = "id", .nullable = 1},
                                          {.type = FUNNEL_TYPE_INT32, .name = "s", .nullable = 1},
                                          {.type = FUNNEL_TYPE_BOOL, .name = "b"}};
  static const struct iw_schema wrong3 = {3, three, 0};
  struct iw_column ic3[3] = {{.length = 2, .data = v, .data_length = 8},
                             {.length = 2, .data = v, .data_length = 8},
                             {.length = 2, .data = v, .data_length = 1}};
  iw_schema_message(&w, &small_schema, NULL, NULL);
  iw_batch_message(&w, &wrong3, 2, ic3, NULL, NULL);
  EXPECT_REJECTED(w.data, w.len, FUNNEL_ERR_MALFORMED, -1);
  iw_buf_free(&w);
}

/* Writes a schema whose column 2 is `bad` after two good columns. */
static void schema_with(struct iw_buf *b, struct iw_field bad, const struct iw_options *o) {
  struct iw_field f[3] = {{.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
                          {.type = FUNNEL_TYPE_UTF8, .name = "b", .nullable = 1}, bad};
  struct iw_schema s = {3, f, 0};
  iw_schema_message(b, &s, o, NULL);
  iw_eos(b, o);
}

static void parse_rejects_unsupported_types(void) {
  struct { const char *what; struct iw_field f; int code; } cases[] = {
      {"list view", {.type = IW_TYPE_RAW, .name = "x", .raw_tag = 25}, FUNNEL_ERR_UNSUPPORTED},
      {"union", {.type = IW_TYPE_RAW, .name = "u", .raw_tag = 14}, FUNNEL_ERR_UNSUPPORTED},
      {"run-end encoded", {.type = IW_TYPE_RAW, .name = "r", .raw_tag = 22}, FUNNEL_ERR_UNSUPPORTED},
      {"utf8 view", {.type = IW_TYPE_UTF8_VIEW, .name = "v"}, FUNNEL_ERR_UNSUPPORTED},
      {"dictionary int32", {.type = FUNNEL_TYPE_INT32, .name = "d", .dictionary = 1}, FUNNEL_ERR_UNSUPPORTED},
      {"dictionary utf8", {.type = FUNNEL_TYPE_UTF8, .name = "d", .dictionary = 1}, FUNNEL_ERR_UNSUPPORTED},
      {"decimal256", {.type = IW_TYPE_DECIMAL256, .name = "d", .precision = 60, .scale = 2}, FUNNEL_ERR_UNSUPPORTED},
      {"float16", {.type = IW_TYPE_FLOAT16, .name = "h"}, FUNNEL_ERR_UNSUPPORTED},
      {"time", {.type = IW_TYPE_RAW, .name = "t", .raw_tag = IW_TAG_TIME}, FUNNEL_ERR_UNSUPPORTED},
      {"null type", {.type = IW_TYPE_RAW, .name = "n", .raw_tag = 1}, FUNNEL_ERR_UNSUPPORTED},
      {"large list view", {.type = IW_TYPE_RAW, .name = "x", .raw_tag = 26}, FUNNEL_ERR_UNSUPPORTED},
      {"type tag NONE", {.type = IW_TYPE_RAW, .name = "x", .raw_tag = 0}, FUNNEL_ERR_MALFORMED},
      {"unknown type tag", {.type = IW_TYPE_RAW, .name = "x", .raw_tag = 99}, FUNNEL_ERR_MALFORMED},
      {"int of 24 bits", {.type = IW_TYPE_RAW, .name = "x", .raw_tag = IW_TAG_INT}, FUNNEL_ERR_MALFORMED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_context("%s", cases[i].what);
    struct iw_buf b = {0};
    schema_with(&b, cases[i].f, NULL);
    EXPECT_REJECTED(b.data, b.len, cases[i].code, 2);
    /* the reader's schema: no partition, same column */
    struct funnel__arena arena = {0};
    struct funnel__schema s;
    struct funnel_error err;
    if (CHECK_STATUS(funnel__schema_parse(b.data, (int64_t)b.len, &arena, &s, &err), cases[i].code, &err)) {
      CHECK_EQ_I64(err.partition, -1);
      CHECK_EQ_I64(err.column, 2);
    }
    funnel__arena_free(&arena);
    iw_buf_free(&b);
  }
}

/* A header that says compressed over buffers that are not: each buffer's
 * first 8 bytes are taken for its uncompressed length, which the two-row
 * partition's buffers (at most 8 bytes of values) make too large for what
 * follows, or too short for a prefix. */
static void parse_rejects_compressed_body(void) {
  for (int codec = 1; codec <= 2; codec++) {
    check_context("codec %d", codec - 1);
    struct iw_options o = {.compression = codec, .header_only = 1};
    struct iw_buf b = {0};
    struct iw_layout bl;
    two_row_partition(&b, &bl, &o);
    EXPECT_REJECTED(b.data, b.len, FUNNEL_ERR_MALFORMED, 0); /* its 1-byte validity */
    iw_buf_free(&b);
  }
}

static void parse_rejects_garbage_bytes(void) {
  uint64_t rng = 3;
  for (int n = 1; n <= 200; n++) {
    check_context("%d random bytes", n);
    uint8_t *g = malloc((size_t)n);
    for (int i = 0; i < n; i++) g[i] = (uint8_t)check_rand(&rng);
    g[0] |= 0x80; /* a negative or huge length, not an end-of-stream marker */
    EXPECT_REJECTED(g, (size_t)n, FUNNEL_ERR_MALFORMED, -1);
    memset(g, 0xFF, (size_t)n); /* continuation marker, then length -1 */
    EXPECT_REJECTED(g, (size_t)n, FUNNEL_ERR_MALFORMED, -1);
    free(g);
  }
  static const char text[] = "this is not an Arrow IPC stream, just text\n";
  EXPECT_REJECTED((const uint8_t *)text, sizeof(text) - 1, FUNNEL_ERR_MALFORMED, -1);
  /* a plausible length followed by zeros: the Message root points at itself */
  uint8_t z[64] = {0xFF, 0xFF, 0xFF, 0xFF, 48, 0, 0, 0};
  EXPECT_REJECTED(z, sizeof(z), FUNNEL_ERR_MALFORMED, -1);
}

static void parse_rejects_metadata_version_other_than_v4_or_v5(void) {
  /* MetadataVersion: V1 = 0 ... V5 = 4; funnel reads V4 and V5. Past V5
   * Arrow defines none, and Arrow Java's stream reader throws on them. */
  static const int versions[] = {1, 2, 3, 4, 5, 6, 4096, INT16_MAX, -2, INT16_MIN};
  for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
    const int v = versions[i];
    check_context("metadata version %d", v);
    struct iw_options o = {.version = v};
    struct iw_buf b = {0};
    struct iw_layout bl;
    two_row_partition(&b, &bl, &o);
    struct parsed p;
    struct funnel_error err;
    int st = parse(&p, b.data, b.len, 1, &err);
    if (v == 3 || v == 4) {
      CHECK_OK(st, &err);
    } else if (CHECK_STATUS(st, FUNNEL_ERR_UNSUPPORTED, &err)) {
      CHECK_EQ_I64(err.partition, INDEX);
      CHECK_EQ_I64(err.offset, 0); /* the Schema message, first */
    }
    parsed_free(&p);
    iw_buf_free(&b);
  }
  /* V1 (0), a negative version and one past V5 in the batch only: its
   * offset is named */
  struct iw_buf b = {0};
  struct iw_layout bl;
  two_row_partition(&b, &bl, NULL);
  uint8_t *c = iw_dup(b.data, b.len);
  const int16_t batch_versions[3] = {0, -1, 5};
  for (int i = 0; i < 3; i++) {
    check_context("batch version %d", batch_versions[i]);
    memcpy(c + bl.version_field, &batch_versions[i], 2);
    EXPECT_REJECTED(c, b.len, FUNNEL_ERR_UNSUPPORTED, -1);
    struct parsed p;
    struct funnel_error err;
    if (CHECK_STATUS(parse(&p, c, b.len, 0, &err), FUNNEL_ERR_UNSUPPORTED, &err))
      CHECK_EQ_I64(err.offset, (int64_t)bl.message);
    parsed_free(&p);
  }
  free(c);
  iw_buf_free(&b);
}

/* ------------------------------------------------ what Arrow Java reads */

/* Where the flatbuffer string `s` (its length prefix, then its bytes)
 * first lies in `b`; fails the test when nowhere. */
static size_t string_at(const struct iw_buf *b, const char *s) {
  const size_t n = strlen(s);
  for (size_t at = 0; at + 4 + n <= b->len; at++)
    if (get32_at(b->data + at) == n && memcmp(b->data + at + 4, s, n) == 0) return at + 4;
  check_fail(__FILE__, __LINE__, "string \"%s\" is not in the partition", s);
  return 0;
}

/* `b` is rejected with `code`, naming column `column` and byte `offset`
 * of partition INDEX, and the message says `says`; as the reader's schema
 * too (no partition). */
static void expect_rejected_at_byte(const char *file, int line, const struct iw_buf *b, int code,
                                    int64_t column, int64_t offset, const char *says) {
  struct parsed p;
  struct funnel_error err;
  if (check_status_at(file, line, "parse", parse(&p, b->data, b->len, 1, &err), code, &err)) {
    check_eq_i64_at(file, line, "error.partition", "INDEX", err.partition, INDEX);
    check_eq_i64_at(file, line, "error.column", "column", err.column, column);
    check_eq_i64_at(file, line, "error.offset", "offset", err.offset, offset);
    if (!check_true_at(file, line, "strstr(message, says)", strstr(err.message, says) != NULL))
      fprintf(stderr, "    message: %s\n    expected it to say: %s\n", err.message, says);
  }
  parsed_free(&p);
  struct funnel__arena arena = {0};
  struct funnel__schema s;
  if (check_status_at(file, line, "schema_parse", funnel__schema_parse(b->data, (int64_t)b->len, &arena, &s, &err),
                      code, &err)) {
    check_eq_i64_at(file, line, "error.partition", "-1", err.partition, -1);
    check_eq_i64_at(file, line, "error.column", "column", err.column, column);
  }
  funnel__arena_free(&arena);
}
#define EXPECT_REJECTED_AT_BYTE(b, code, column, offset, says) \
  expect_rejected_at_byte(__FILE__, __LINE__, (b), (code), (column), (offset), (says))

/* Arrow Java's reader throws on a string of a schema that is not UTF-8
 * (flatbuffers' strict decoder); funnel rejects it first, naming the byte. */
static void parse_rejects_field_name_that_is_not_utf8(void) {
  struct { const char *what, *name; size_t bad; } cases[] = {
      {"lone continuation byte", "a\x80", 1},
      {"byte 0xff", "\xff" "b", 0},
      {"overlong NUL", "x\xc0\x80", 1},
      {"overlong, 3 bytes", "\xe0\x80\xaf", 0},
      {"surrogate half", "ab\xed\xa0\x80", 2},
      {"past U+10FFFF", "\xf4\x90\x80\x80", 0},
      {"lead byte 0xf5", "\xf5\x80\x80\x80", 0},
      {"sequence cut short by the end", "z\xe4\xb8", 1},
      {"sequence cut short by ASCII", "\xc3" "a", 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_context("%s", cases[i].what);
    struct iw_buf b = {0};
    schema_with(&b, (struct iw_field){.type = FUNNEL_TYPE_INT32, .name = cases[i].name, .nullable = 1},
                NULL);
    EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_MALFORMED, 2, (int64_t)(string_at(&b, cases[i].name) + cases[i].bad),
                            "column 2 name is not valid UTF-8");
    iw_buf_free(&b);
  }
  /* the edges of what is valid */
  static const char *const good[] = {"\xc3\xa9t\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87", "\xf0\x9f\x98\x80",
                                     "\xf4\x8f\xbf\xbf", "\xef\xbf\xbf", "\xed\x9f\xbf", "\xc2\x80",
                                     "\xe0\xa0\x80", "\xf0\x90\x80\x80", "tab\there"};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    check_context("valid name %zu", i);
    struct iw_buf b = {0};
    schema_with(&b, (struct iw_field){.type = FUNNEL_TYPE_INT32, .name = good[i], .nullable = 1}, NULL);
    struct parsed p;
    struct funnel_error err;
    if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err)) CHECK_EQ_STR(p.part.schema->fields[2].name, good[i]);
    parsed_free(&p);
    iw_buf_free(&b);
  }
}

/* funnel carries names and timezones as C strings (the Device Data
 * Interface's too): one with a NUL would be cut short, and two that
 * differ after it compared equal. */
static void parse_rejects_nul_in_name_or_timezone(void) {
  struct iw_buf b = {0};
  schema_with(&b, (struct iw_field){.type = FUNNEL_TYPE_INT32, .name = "nul\x01here", .nullable = 1}, NULL);
  size_t at = string_at(&b, "nul\x01here") + 3;
  b.data[at] = 0;
  EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_UNSUPPORTED, 2, (int64_t)at, "column 2 name holds a NUL byte");
  iw_buf_free(&b);
  schema_with(&b, (struct iw_field){.type = FUNNEL_TYPE_TIMESTAMP, .name = "t", .nullable = 1,
                                    .time_unit = FUNNEL_TIME_MICROSECOND, .timezone = "UTC\x01x"}, NULL);
  at = string_at(&b, "UTC\x01x") + 3;
  b.data[at] = 0;
  EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_UNSUPPORTED, 2, (int64_t)at, "column 2 timezone holds a NUL byte");
  iw_buf_free(&b);
}

static void parse_rejects_timezone_that_is_not_utf8(void) {
  struct iw_buf b = {0};
  schema_with(&b, (struct iw_field){.type = FUNNEL_TYPE_TIMESTAMP, .name = "t", .nullable = 1,
                                    .time_unit = FUNNEL_TIME_SECOND, .timezone = "Europe/Par\xeds"}, NULL);
  EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_MALFORMED, 2, (int64_t)(string_at(&b, "Europe/Par\xeds") + 10),
                          "column 2 timezone is not valid UTF-8");
  iw_buf_free(&b);
}

/* funnel keeps no custom_metadata but hands it on in the schema message,
 * which Arrow Java reads: every key and value must be there and UTF-8. */
static void parse_checks_custom_metadata_as_arrow_java_reads_it(void) {
  static const struct iw_kv good[] = {{"origin", "spark"}, {"", ""}, {"k\xc3\xa9", "\xe6\x96\x87"}};
  static const struct iw_kv bad_key[] = {{"origin", "spark"}, {"k\xff", "v"}};
  static const struct iw_kv bad_value[] = {{"kkkk", "caf\xc3"}};
  struct iw_field f[3] = {{.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
                          {.type = FUNNEL_TYPE_UTF8, .name = "b", .nullable = 1, .n_metadata = 3, .metadata = good},
                          {.type = FUNNEL_TYPE_INT32, .name = "c", .nullable = 1}};
  struct iw_schema s = {3, f, 0};
  struct iw_options o = {.n_metadata = 3, .metadata = good};
  struct iw_buf b = {0};
  struct parsed p;
  struct funnel_error err;
  check_context("valid metadata on the schema and a field");
  iw_schema_message(&b, &s, &o, NULL);
  iw_eos(&b, NULL);
  CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err);
  parsed_free(&p);
  iw_buf_free(&b);

  check_context("schema metadata key not UTF-8");
  o.metadata = bad_key;
  o.n_metadata = 2;
  iw_schema_message(&b, &s, &o, NULL);
  EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_MALFORMED, -1, (int64_t)(string_at(&b, "k\xff") + 1),
                          "schema metadata key 1 is not valid UTF-8");
  iw_buf_free(&b);

  check_context("field metadata value not UTF-8");
  f[2].metadata = bad_value;
  f[2].n_metadata = 1;
  iw_schema_message(&b, &s, NULL, NULL);
  EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_MALFORMED, 2, (int64_t)(string_at(&b, "caf\xc3") + 3),
                          "column 2 metadata value 0 is not valid UTF-8");
  iw_buf_free(&b);

  check_context("field metadata key past the metadata");
  static const struct iw_kv far[] = {{"far", "away"}};
  f[2].metadata = far;
  iw_schema_message(&b, &s, NULL, NULL);
  put32_at(b.data + string_at(&b, "far") - 4, 0x7FFFFFF0);
  EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_MALFORMED, 2, 0, "corrupt custom_metadata of column 2");
  iw_buf_free(&b);
}

/* Arrow Java divides by the width of a fixed_size_binary (toArrow threw
 * ArithmeticException); Arrow C++ reads decimal128 of precision 1 to 38
 * only. */
static void parse_rejects_type_parameters_arrow_cannot_read(void) {
  struct { const char *what; struct iw_field f; int code; const char *says; } cases[] = {
      {"fixed_size_binary(0)", {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "z", .byte_width = 0},
       FUNNEL_ERR_UNSUPPORTED, "fixed_size_binary(0) is not supported"},
      {"fixed_size_binary(-3)", {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "z", .byte_width = -3},
       FUNNEL_ERR_MALFORMED, "byte width -3"},
      {"decimal128 precision 0", {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .precision = 0, .scale = 0},
       FUNNEL_ERR_MALFORMED, "precision 0"},
      {"decimal128 precision 39", {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .precision = 39, .scale = 2},
       FUNNEL_ERR_MALFORMED, "precision 39"},
      {"decimal128 precision -5", {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .precision = -5, .scale = 2},
       FUNNEL_ERR_MALFORMED, "precision -5"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_context("%s", cases[i].what);
    struct iw_buf b = {0};
    schema_with(&b, cases[i].f, NULL);
    EXPECT_REJECTED_AT_BYTE(&b, cases[i].code, 2, 0, cases[i].says);
    iw_buf_free(&b);
  }
  static const struct { int precision, scale; } ok[] = {{1, 0}, {38, 38}, {10, -2}};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    check_context("decimal128(%d, %d)", ok[i].precision, ok[i].scale);
    struct iw_buf b = {0};
    schema_with(&b, (struct iw_field){.type = FUNNEL_TYPE_DECIMAL128, .name = "d",
                                      .precision = ok[i].precision, .scale = ok[i].scale}, NULL);
    struct parsed p;
    struct funnel_error err;
    CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err);
    parsed_free(&p);
    iw_buf_free(&b);
  }
}

/* A field without its type table: Arrow Java reads the table's fields
 * without looking (a NullPointerException), Arrow C++ refuses it. */
static void parse_rejects_field_without_type_table(void) {
  static const struct iw_field types[] = {
      {.type = FUNNEL_TYPE_TIMESTAMP, .name = "t", .time_unit = FUNNEL_TIME_SECOND},
      {.type = FUNNEL_TYPE_DATE64, .name = "d"},
      {.type = FUNNEL_TYPE_DECIMAL128, .name = "x", .precision = 10, .scale = 2},
      {.type = FUNNEL_TYPE_UTF8, .name = "s"}};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
    check_context("%s", types[i].name);
    struct iw_field f[3] = {{.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
                            {.type = FUNNEL_TYPE_UTF8, .name = "b", .nullable = 1}, types[i]};
    struct iw_schema s = {3, f, 0};
    struct iw_buf b = {0};
    struct iw_layout l;
    iw_schema_message(&b, &s, NULL, &l);
    iw_eos(&b, NULL);
    const size_t ref = l.fields + 4 + 4 * 2; /* column 2's uoffset */
    const size_t field = ref + get32_at(b.data + ref);
    const size_t vtable = field - (size_t)(int32_t)get32_at(b.data + field);
    b.data[vtable + 4 + 2 * 3] = b.data[vtable + 4 + 2 * 3 + 1] = 0; /* slot 3: type */
    EXPECT_REJECTED_AT_BYTE(&b, FUNNEL_ERR_MALFORMED, 2, 0, "field has no type table");
    iw_buf_free(&b);
  }
}

/* Arrow Java reads a vtable's entries as int16: one of 0x8000 bytes or more
 * reads as negative, every field absent, where funnel read them. */
static void parse_rejects_vtable_arrow_java_reads_as_negative(void) {
  char *name = malloc(40001);
  memset(name, 'n', 40000);
  name[40000] = '\0';
  struct iw_field f[1] = {{.type = FUNNEL_TYPE_INT64, .name = name, .nullable = 1}};
  struct iw_schema s = {1, f, 0};
  struct iw_buf b = {0};
  struct iw_layout l;
  iw_schema_message(&b, &s, NULL, &l);
  iw_eos(&b, NULL);
  struct parsed p;
  struct funnel_error err;
  CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err); /* as written */
  parsed_free(&p);
  const size_t table = l.metadata + get32_at(b.data + l.metadata); /* the Message table */
  const size_t vtable = table - (size_t)(int32_t)get32_at(b.data + table);
  const uint16_t big = 0x8000;
  memcpy(b.data + vtable, &big, 2);
  EXPECT_REJECTED(b.data, b.len, FUNNEL_ERR_MALFORMED, -1);
  iw_buf_free(&b);
  free(name);
}

/* Arrow Java reads a validity buffer that has bytes whatever the null count
 * says (Arrow C++ drops it when the count is 0): a count the bits
 * contradict is refused, naming the buffer. */
static void bind_rejects_null_count_the_validity_bits_contradict(void) {
  struct iw_buf b = {0};
  struct iw_layout bl;
  two_row_partition(&b, &bl, NULL);
  const int64_t validity = (int64_t)bl.body + get64_at(b.data + bl.buffers); /* id's, 1 null */
  for (int64_t count = 0; count <= 2; count += 2) {
    check_context("null count %lld", (long long)count);
    uint8_t *c = iw_dup(b.data, b.len);
    put64_at(c + bl.nodes + 8, count);
    struct parsed p;
    struct funnel_error err;
    if (CHECK_STATUS(parse(&p, c, b.len, 1, &err), FUNNEL_ERR_MALFORMED, &err)) {
      CHECK_EQ_I64(err.column, 0);
      CHECK_EQ_I64(err.offset, validity);
      CHECK(strstr(err.message, "holds 1 nulls") != NULL);
    }
    parsed_free(&p);
    free(c);
  }
  iw_buf_free(&b);
  /* agreeing counts: an all-valid bitmap with a count of 0 (Arrow Java
   * writes those), junk in the padding bits, and 9 rows over 2 bytes */
  static const struct iw_field f[] = {{.type = FUNNEL_TYPE_INT8, .name = "x", .nullable = 1}};
  static const struct iw_schema s = {1, f, 0};
  static const uint8_t v[9] = {0};
  struct { int64_t rows, nulls; uint8_t bits[2]; } ok[] = {
      {2, 0, {0x03, 0}}, {2, 1, {0xFD, 0xFF}}, {9, 2, {0x7E, 0x01}}, {9, 0, {0xFF, 0xFF}}};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    check_context("%lld rows, %lld nulls", (long long)ok[i].rows, (long long)ok[i].nulls);
    struct iw_column col = {.length = ok[i].rows, .null_count = ok[i].nulls, .validity = ok[i].bits,
                            .validity_length = 2, .data = v, .data_length = ok[i].rows};
    iw_schema_message(&b, &s, NULL, NULL);
    iw_batch_message(&b, &s, ok[i].rows, &col, NULL, NULL);
    struct parsed p;
    struct funnel_error err;
    if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err))
      CHECK_EQ_I64(p.plan.columns[0].null_count, ok[i].nulls);
    parsed_free(&p);
    iw_buf_free(&b);
  }
}

static void parse_rejects_big_endian(void) {
  struct iw_schema s = small_schema;
  s.big_endian = 1;
  struct iw_buf b = {0};
  iw_schema_message(&b, &s, NULL, NULL);
  EXPECT_REJECTED(b.data, b.len, FUNNEL_ERR_UNSUPPORTED, -1);
  iw_buf_free(&b);
}

static void parse_rejects_other_message_types(void) {
  struct iw_buf b = {0};
  struct iw_layout dl;
  iw_schema_message(&b, &small_schema, NULL, NULL);
  iw_dictionary_message(&b, NULL, &dl);
  EXPECT_REJECTED(b.data, b.len, FUNNEL_ERR_UNSUPPORTED, -1);
  struct { int header_type, code; } cases[] = {
      {4, FUNNEL_ERR_UNSUPPORTED}, {5, FUNNEL_ERR_UNSUPPORTED}, /* Tensor, SparseTensor */
      {0, FUNNEL_ERR_MALFORMED}, {6, FUNNEL_ERR_MALFORMED}, {255, FUNNEL_ERR_MALFORMED}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_context("header type %d", cases[i].header_type);
    b.data[dl.header_type_field] = (uint8_t)cases[i].header_type;
    EXPECT_REJECTED(b.data, b.len, cases[i].code, -1);
  }
  iw_buf_free(&b);
}

static void parse_rejects_second_differing_schema(void) {
  struct iw_col cols[3];
  small_cols(cols, 8, 4);
  const int64_t rows[1] = {8};
  struct iw_buf b = {0};
  small_stream(&b, cols, rows, 1, NULL, NULL);
  /* a second stream whose column 1 is large_utf8 */
  struct iw_field f[3] = {small_fields[0], small_fields[1], small_fields[2]};
  f[1].type = FUNNEL_TYPE_LARGE_UTF8;
  struct iw_schema other = {3, f, 0};
  iw_schema_message(&b, &other, NULL, NULL);
  iw_eos(&b, NULL);
  struct parsed p;
  struct funnel_error err;
  if (CHECK_STATUS(parse(&p, b.data, b.len, 1, &err), FUNNEL_ERR_SCHEMA_MISMATCH, &err)) {
    CHECK_EQ_I64(err.partition, INDEX);
    CHECK(strstr(err.message, "large_utf8") != NULL);
  }
  parsed_free(&p);
  iw_buf_free(&b);
  free_cols(cols, 3);
}

static void parse_rejects_row_count_overflow(void) {
  /* two batches that claim 2^62 rows each: a LIMIT, whether funnel caps a
   * batch's rows or only their sum */
  struct iw_buf b = {0};
  struct iw_layout l1, l2;
  static const struct iw_field one[] = {{.type = FUNNEL_TYPE_INT32, .name = "x"}};
  static const struct iw_schema s = {1, one, 0};
  static const int32_t v[1] = {5};
  struct iw_column ic[1] = {{.length = 1, .data = v, .data_length = 4}};
  iw_schema_message(&b, &s, NULL, NULL);
  iw_batch_message(&b, &s, 1, ic, NULL, &l1);
  iw_batch_message(&b, &s, 1, ic, NULL, &l2);
  put64_at(b.data + l1.length_field, INT64_C(1) << 62);
  put64_at(b.data + l2.length_field, INT64_C(1) << 62);
  EXPECT_REJECTED(b.data, b.len, FUNNEL_ERR_LIMIT, -1);
  /* one batch claims 1000 rows: binding finds the data too short */
  put64_at(b.data + l1.length_field, 1000);
  put64_at(b.data + l2.length_field, 1);
  put64_at(b.data + l1.nodes, 1000);
  EXPECT_REJECTED(b.data, b.len, FUNNEL_ERR_MALFORMED, 0);
  iw_buf_free(&b);
}

static void schema_parse_rejects_non_schema_first_message(void) {
  struct iw_buf b = {0};
  struct iw_layout bl;
  two_row_partition(&b, &bl, NULL);
  struct funnel__arena arena = {0};
  struct funnel__schema s;
  struct funnel_error err;
  /* the batch alone */
  if (CHECK_STATUS(funnel__schema_parse(b.data + bl.message, (int64_t)(b.len - bl.message), &arena, &s, &err),
                   FUNNEL_ERR_INVALID_ARGUMENT, &err))
    CHECK(strstr(err.message, "RecordBatch") != NULL);
  /* the end-of-stream marker alone */
  CHECK_STATUS(funnel__schema_parse(b.data + b.len - 8, 8, &arena, &s, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  /* truncated */
  if (CHECK_STATUS(funnel__schema_parse(b.data, 20, &arena, &s, &err), FUNNEL_ERR_MALFORMED, &err)) {
    CHECK_EQ_I64(err.partition, -1);
    CHECK(strstr(err.message, "reader schema") != NULL);
  }
  CHECK_STATUS(funnel__schema_parse(b.data, 0, &arena, &s, &err), FUNNEL_ERR_MALFORMED, &err);
  /* the whole stream is fine: only its first message is read */
  if (CHECK_OK(funnel__schema_parse(b.data, (int64_t)b.len, &arena, &s, &err), &err)) {
    CHECK_EQ_I64(s.n_fields, 3);
    CHECK_EQ_I64(s.ipc_length, (int64_t)bl.message);
    CHECK_MEM(s.ipc, b.data, bl.message);
  }
  funnel__arena_free(&arena);
  iw_buf_free(&b);
}

/* ------------------------------------------------------------ valid input */

struct want_field {
  struct iw_field f;
  int type_id, byte_width, offset_width, n_buffers;
  const char *type_string;
};

/* Every supported type, with what funnel must make of it (written out by
 * hand, not derived from funnel). */
static const struct want_field every_type[] = {
    {{.type = FUNNEL_TYPE_INT8, .name = "i8", .nullable = 1}, FUNNEL_TYPE_INT8, 1, 0, 2, "int8"},
    {{.type = FUNNEL_TYPE_INT16, .name = "i16", .nullable = 1}, FUNNEL_TYPE_INT16, 2, 0, 2, "int16"},
    {{.type = FUNNEL_TYPE_INT32, .name = "i32", .nullable = 0}, FUNNEL_TYPE_INT32, 4, 0, 2, "int32"},
    {{.type = FUNNEL_TYPE_INT64, .name = "i64", .nullable = 1}, FUNNEL_TYPE_INT64, 8, 0, 2, "int64"},
    {{.type = FUNNEL_TYPE_UINT8, .name = "u8", .nullable = 1}, FUNNEL_TYPE_UINT8, 1, 0, 2, "uint8"},
    {{.type = FUNNEL_TYPE_UINT16, .name = "u16", .nullable = 1}, FUNNEL_TYPE_UINT16, 2, 0, 2, "uint16"},
    {{.type = FUNNEL_TYPE_UINT32, .name = "u32", .nullable = 1}, FUNNEL_TYPE_UINT32, 4, 0, 2, "uint32"},
    {{.type = FUNNEL_TYPE_UINT64, .name = "u64", .nullable = 1}, FUNNEL_TYPE_UINT64, 8, 0, 2, "uint64"},
    {{.type = FUNNEL_TYPE_FLOAT32, .name = "f32", .nullable = 1}, FUNNEL_TYPE_FLOAT32, 4, 0, 2, "float32"},
    {{.type = FUNNEL_TYPE_FLOAT64, .name = "f64", .nullable = 1}, FUNNEL_TYPE_FLOAT64, 8, 0, 2, "float64"},
    {{.type = FUNNEL_TYPE_BOOL, .name = "flag", .nullable = 1}, FUNNEL_TYPE_BOOL, 0, 0, 2, "bool"},
    {{.type = FUNNEL_TYPE_DATE32, .name = "d32", .nullable = 1}, FUNNEL_TYPE_DATE32, 4, 0, 2, "date32"},
    {{.type = FUNNEL_TYPE_DATE64, .name = "d64", .nullable = 1}, FUNNEL_TYPE_DATE64, 8, 0, 2, "date64"},
    {{.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_s", .nullable = 1, .time_unit = FUNNEL_TIME_SECOND},
     FUNNEL_TYPE_TIMESTAMP, 8, 0, 2, "timestamp[s]"},
    {{.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_ms", .nullable = 1, .time_unit = FUNNEL_TIME_MILLISECOND, .timezone = "UTC"},
     FUNNEL_TYPE_TIMESTAMP, 8, 0, 2, "timestamp[ms, tz=UTC]"},
    {{.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_us", .nullable = 1, .time_unit = FUNNEL_TIME_MICROSECOND, .timezone = "America/New_York"},
     FUNNEL_TYPE_TIMESTAMP, 8, 0, 2, "timestamp[us, tz=America/New_York]"},
    {{.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_ns", .nullable = 1, .time_unit = FUNNEL_TIME_NANOSECOND},
     FUNNEL_TYPE_TIMESTAMP, 8, 0, 2, "timestamp[ns]"},
    {{.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_ns_tz", .nullable = 1, .time_unit = FUNNEL_TIME_NANOSECOND, .timezone = "+05:30"},
     FUNNEL_TYPE_TIMESTAMP, 8, 0, 2, "timestamp[ns, tz=+05:30]"},
    {{.type = FUNNEL_TYPE_DECIMAL128, .name = "dec", .nullable = 1, .precision = 38, .scale = 10},
     FUNNEL_TYPE_DECIMAL128, 16, 0, 2, "decimal128(38, 10)"},
    {{.type = FUNNEL_TYPE_UTF8, .name = "str", .nullable = 1}, FUNNEL_TYPE_UTF8, 0, 4, 3, "utf8"},
    {{.type = FUNNEL_TYPE_BINARY, .name = "bin", .nullable = 1}, FUNNEL_TYPE_BINARY, 0, 4, 3, "binary"},
    {{.type = FUNNEL_TYPE_LARGE_UTF8, .name = "lstr", .nullable = 1}, FUNNEL_TYPE_LARGE_UTF8, 0, 8, 3, "large_utf8"},
    {{.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lbin", .nullable = 0}, FUNNEL_TYPE_LARGE_BINARY, 0, 8, 3, "large_binary"},
    {{.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "fsb", .nullable = 1, .byte_width = 7},
     FUNNEL_TYPE_FIXED_SIZE_BINARY, 7, 0, 2, "fixed_size_binary[7]"},
    {{.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "", .nullable = 1, .byte_width = 1},
     FUNNEL_TYPE_FIXED_SIZE_BINARY, 1, 0, 2, "fixed_size_binary[1]"},
};
#define N_EVERY ((int)(sizeof(every_type) / sizeof(every_type[0])))

static void check_fields(const struct funnel__schema *s) {
  if (!CHECK_EQ_I64(s->n_fields, N_EVERY)) return;
  for (int i = 0; i < N_EVERY; i++) {
    const struct want_field *w = &every_type[i];
    const struct funnel__field *f = &s->fields[i];
    check_context("column %d '%s'", i, w->f.name);
    CHECK_EQ_STR(f->name, w->f.name);
    CHECK_EQ_I64(f->type_id, w->type_id);
    CHECK_EQ_I64(f->nullable, w->f.nullable);
    CHECK_EQ_I64(f->byte_width, w->byte_width);
    CHECK_EQ_I64(f->offset_width, w->offset_width);
    CHECK_EQ_I64(f->n_buffers, w->n_buffers);
    if (w->type_id == FUNNEL_TYPE_TIMESTAMP) {
      CHECK_EQ_I64(f->time_unit, w->f.time_unit);
      CHECK_EQ_STR(f->timezone, w->f.timezone ? w->f.timezone : "");
    }
    if (w->type_id == FUNNEL_TYPE_DECIMAL128) {
      CHECK_EQ_I64(f->precision, w->f.precision);
      CHECK_EQ_I64(f->scale, w->f.scale);
    }
    char buf[96];
    funnel__field_type_string(f, buf, sizeof(buf));
    CHECK_EQ_STR(buf, w->type_string);
  }
  check_context("%s", "");
}

static void parse_accepts_every_supported_type(void) {
  struct iw_field fields[N_EVERY];
  for (int i = 0; i < N_EVERY; i++) fields[i] = every_type[i].f;
  struct iw_schema s = {N_EVERY, fields, 0};
  struct iw_col cols[N_EVERY];
  uint64_t rng = 5;
  for (int i = 0; i < N_EVERY; i++) iw_col_random(&cols[i], &fields[i], 41, 200, &rng);
  for (int legacy = 0; legacy <= 1; legacy++) {
    check_context("legacy %d", legacy);
    struct iw_options o = {.legacy = legacy};
    struct iw_buf b = {0};
    iw_schema_message(&b, &s, &o, NULL);
    iw_batch_from_cols(&b, &s, cols, 0, 20, NULL, &o);
    iw_batch_from_cols(&b, &s, cols, 20, 20, NULL, &o);
    iw_batch_from_cols(&b, &s, cols, 20, 41, NULL, &o);
    iw_eos(&b, &o);
    struct parsed p;
    struct funnel_error err;
    if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err)) {
      CHECK(p.part.schema != NULL);
      CHECK_EQ_I64(p.part.schema_offset, 0);
      CHECK_EQ_I64(p.part.n_batches, 3);
      CHECK_EQ_I64(p.part.rows, 41);
      if (p.part.schema) check_fields(p.part.schema);
      CHECK_EQ_I64(p.plan.rows, 41);
      for (int i = 0; i < N_EVERY; i++) {
        int64_t nulls = 0;
        for (int r = 0; r < 41; r++) nulls += !cols[i].valid[r];
        CHECK_EQ_I64(p.plan.columns[i].null_count, nulls);
        CHECK_EQ_I64(p.part.batches[0].pieces[i].length, 20);
        CHECK_EQ_I64(p.part.batches[1].pieces[i].length, 0);
      }
    }
    parsed_free(&p);
    /* the reader's schema takes the same fields */
    struct funnel__arena arena = {0};
    struct funnel__schema rs;
    if (CHECK_OK(funnel__schema_parse(b.data, (int64_t)b.len, &arena, &rs, &err), &err)) check_fields(&rs);
    funnel__arena_free(&arena);
    iw_buf_free(&b);
  }
  free_cols(cols, N_EVERY);
}

static void parse_accepts_legacy_framing(void) {
  struct iw_col cols[3];
  small_cols(cols, 25, 6);
  const int64_t rows[3] = {10, 0, 15};
  struct iw_options o = {.legacy = 1};
  struct iw_buf b = {0};
  small_stream(&b, cols, rows, 3, &o, NULL);
  CHECK_EQ_I64(get32_at(b.data) == 0xFFFFFFFFu, 0);
  struct parsed p;
  struct funnel_error err;
  if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err)) {
    CHECK_EQ_I64(p.part.n_batches, 3);
    CHECK_EQ_I64(p.part.rows, 25);
  }
  parsed_free(&p);
  /* legacy and current framing mixed, message by message */
  struct iw_buf m = {0};
  struct iw_options cur = {0};
  iw_schema_message(&m, &small_schema, &o, NULL);
  iw_batch_from_cols(&m, &small_schema, cols, 0, 10, NULL, &cur);
  iw_batch_from_cols(&m, &small_schema, cols, 10, 25, NULL, &o);
  iw_eos(&m, &o);
  if (CHECK_OK(parse(&p, m.data, m.len, 1, &err), &err)) CHECK_EQ_I64(p.part.rows, 25);
  parsed_free(&p);
  iw_buf_free(&m);
  iw_buf_free(&b);
  free_cols(cols, 3);
}

static void parse_accepts_several_streams_in_one_partition(void) {
  struct iw_col cols[3];
  small_cols(cols, 40, 7);
  struct iw_buf b = {0};
  const int64_t r1[2] = {5, 6}, r2[1] = {7};
  small_stream(&b, cols, r1, 2, NULL, NULL);
  small_stream(&b, cols, r2, 1, NULL, NULL);
  /* a third stream without its end-of-stream marker */
  iw_schema_message(&b, &small_schema, NULL, NULL);
  iw_batch_from_cols(&b, &small_schema, cols, 0, 9, NULL, NULL);
  struct parsed p;
  struct funnel_error err;
  if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err)) {
    CHECK_EQ_I64(p.part.n_batches, 4);
    CHECK_EQ_I64(p.part.rows, 5 + 6 + 7 + 9);
    CHECK_EQ_I64(p.part.schema_offset, 0);
    CHECK_EQ_I64(p.plan.rows, 27);
  }
  parsed_free(&p);
  /* end-of-stream markers only, and an empty partition */
  struct iw_buf e = {0};
  iw_eos(&e, NULL);
  iw_eos(&e, NULL);
  if (CHECK_OK(parse(&p, e.data, e.len, 0, &err), &err)) {
    CHECK_EQ_I64(p.part.n_batches, 0);
    CHECK(p.part.schema == NULL);
  }
  parsed_free(&p);
  if (CHECK_OK(parse(&p, e.data, 0, 0, &err), &err)) CHECK_EQ_I64(p.part.n_batches, 0);
  parsed_free(&p);
  iw_buf_free(&e);
  iw_buf_free(&b);
  free_cols(cols, 3);
}

/* small_schema as an IPC file: magic, stream, footer, magic */
static void small_file(struct iw_buf *b, const struct iw_col cols[3], const int64_t *batch_rows, int n) {
  struct iw_layout l[8];
  struct iw_encode e = {0};
  iw_file_begin(b);
  iw_schema_message(b, &small_schema, NULL, NULL);
  int64_t r = 0;
  for (int k = 0; k < n; k++) {
    e.layout = &l[k];
    iw_batch_from_cols(b, &small_schema, cols, r, r + batch_rows[k], &e, NULL);
    r += batch_rows[k];
  }
  iw_eos(b, NULL);
  iw_file_end(b, &small_schema, l, n);
}

static void parse_accepts_ipc_file_format(void) {
  struct iw_col cols[3];
  small_cols(cols, 30, 8);
  const int64_t rows[3] = {12, 0, 18};
  struct iw_buf b = {0};
  small_file(&b, cols, rows, 3);
  struct parsed p;
  struct funnel_error err;
  if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err)) {
    CHECK(p.part.schema != NULL);
    CHECK_EQ_I64(p.part.schema_offset, 8);
    CHECK_EQ_I64(p.part.n_batches, 3);
    CHECK_EQ_I64(p.part.rows, 30);
    CHECK_EQ_I64(p.plan.rows, 30);
  }
  parsed_free(&p);
  iw_buf_free(&b);
  free_cols(cols, 3);
}

static void parse_rejects_truncated_ipc_file(void) {
  struct iw_col cols[3];
  small_cols(cols, 9, 9);
  const int64_t rows[1] = {9};
  struct iw_buf b = {0};
  small_file(&b, cols, rows, 1);
  /* every cut loses the trailing magic (or, under 8 bytes, the leading
   * one, and "ARRO" reads as an impossible metadata length) */
  for (size_t len = 1; len < b.len; len++) {
    check_context("file truncated to %zu of %zu bytes", len, b.len);
    EXPECT_REJECTED(b.data, len, FUNNEL_ERR_MALFORMED, -1);
  }
  /* the footer's length pointing before the stream, or negative */
  uint8_t *c = iw_dup(b.data, b.len);
  const int32_t sizes[] = {-1, (int32_t)b.len, (int32_t)b.len - 17, INT32_MAX};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    check_context("footer length %d", sizes[i]);
    memcpy(c, b.data, b.len);
    put32_at(c + b.len - 10, sizes[i]);
    EXPECT_REJECTED(c, b.len, FUNNEL_ERR_MALFORMED, -1);
  }
  free(c);
  iw_buf_free(&b);
  free_cols(cols, 3);
}

/* The room the plan reserves for the segment table, counted without the
 * walk, holds every table the walk writes, whatever the cut size: every
 * type, a 0-row batch, bits cut anywhere. */
static void plan_segment_room_holds_every_chunk_size(void) {
  struct iw_field fields[N_EVERY];
  for (int i = 0; i < N_EVERY; i++) fields[i] = every_type[i].f;
  struct iw_schema s = {N_EVERY, fields, 0};
  struct iw_col cols[N_EVERY];
  uint64_t rng = 11;
  for (int i = 0; i < N_EVERY; i++) iw_col_random(&cols[i], &fields[i], 3000, 300, &rng);
  struct iw_buf b = {0};
  iw_schema_message(&b, &s, NULL, NULL);
  iw_batch_from_cols(&b, &s, cols, 0, 1999, NULL, NULL);
  iw_batch_from_cols(&b, &s, cols, 1999, 1999, NULL, NULL);
  iw_batch_from_cols(&b, &s, cols, 1999, 3000, NULL, NULL);
  iw_eos(&b, NULL);
  static const int64_t extra[] = {1021, 4093, 4096, 65536, 1 << 20};
  for (int k = 0; k < 300 + 5; k++) {
    chunk_bytes = k < 300 ? k + 1 : extra[k - 300];
    check_context("chunk %lld", (long long)chunk_bytes);
    struct parsed p;
    struct funnel_error err;
    if (CHECK_OK(parse(&p, b.data, b.len, 1, &err), &err)) {
      const int64_t walked = funnel__plan_segments(&p.plan, NULL, 0, NULL);
      if (!CHECK(walked <= p.plan.max_segments)) k = 1000;
    }
    parsed_free(&p);
  }
  chunk_bytes = 0;
  check_context("%s", "");
  iw_buf_free(&b);
  free_cols(cols, N_EVERY);
}

static void schema_diff_names_first_differing_column(void) {
  struct iw_field f[4] = {
      {.type = FUNNEL_TYPE_TIMESTAMP, .name = "t", .nullable = 1, .time_unit = 2, .timezone = "UTC"},
      {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .nullable = 1, .precision = 10, .scale = 2},
      {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "f", .nullable = 1, .byte_width = 4},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1}};
  struct iw_schema base = {4, f, 0};
  struct iw_buf b = {0};
  iw_schema_message(&b, &base, NULL, NULL);
  struct funnel__arena arena = {0};
  struct funnel__schema a, x;
  struct funnel_error err;
  CHECK_OK(funnel__schema_parse(b.data, (int64_t)b.len, &arena, &a, &err), &err);
  CHECK_EQ_I64(funnel__schema_diff(&a, &a, NULL, 0), -1);
  struct { const char *what; int column; struct iw_field change; int n_fields; } cases[] = {
      {"timezone", 0, {.type = FUNNEL_TYPE_TIMESTAMP, .name = "t", .nullable = 1, .time_unit = 2, .timezone = "UTC+1"}, 4},
      {"no timezone", 0, {.type = FUNNEL_TYPE_TIMESTAMP, .name = "t", .nullable = 1, .time_unit = 2}, 4},
      {"unit", 0, {.type = FUNNEL_TYPE_TIMESTAMP, .name = "t", .nullable = 1, .time_unit = 3, .timezone = "UTC"}, 4},
      {"scale", 1, {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .nullable = 1, .precision = 10, .scale = 3}, 4},
      {"precision", 1, {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .nullable = 1, .precision = 11, .scale = 2}, 4},
      {"byte width", 2, {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "f", .nullable = 1, .byte_width = 5}, 4},
      {"name", 3, {.type = FUNNEL_TYPE_UTF8, .name = "S", .nullable = 1}, 4},
      {"nullability", 3, {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 0}, 4},
      {"type", 3, {.type = FUNNEL_TYPE_BINARY, .name = "s", .nullable = 1}, 4},
      {"one column fewer", 3, {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1}, 3},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_context("%s", cases[i].what);
    struct iw_field g[4] = {f[0], f[1], f[2], f[3]};
    g[cases[i].column] = cases[i].change;
    struct iw_schema other = {cases[i].n_fields, g, 0};
    struct iw_buf ob = {0};
    iw_schema_message(&ob, &other, NULL, NULL);
    if (CHECK_OK(funnel__schema_parse(ob.data, (int64_t)ob.len, &arena, &x, &err), &err)) {
      char why[256] = "";
      CHECK_EQ_I64(funnel__schema_diff(&a, &x, why, sizeof(why)), cases[i].column);
      CHECK(why[0] != '\0');
      CHECK_EQ_I64(funnel__schema_diff(&x, &a, NULL, 0), cases[i].column);
    }
    iw_buf_free(&ob);
  }
  funnel__arena_free(&arena);
  iw_buf_free(&b);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(parse_rejects_truncated_partition_at_every_length),
      CHECK_TEST(parse_rejects_corrupt_flatbuffer),
      CHECK_TEST(parse_rejects_body_shorter_than_body_length),
      CHECK_TEST(parse_rejects_buffer_outside_body),
      CHECK_TEST(bind_rejects_batch_that_contradicts_schema),
      CHECK_TEST(parse_rejects_unsupported_types),
      CHECK_TEST(parse_rejects_compressed_body),
      CHECK_TEST(parse_rejects_garbage_bytes),
      CHECK_TEST(parse_rejects_metadata_version_other_than_v4_or_v5),
      CHECK_TEST(parse_rejects_field_name_that_is_not_utf8),
      CHECK_TEST(parse_rejects_nul_in_name_or_timezone),
      CHECK_TEST(parse_rejects_timezone_that_is_not_utf8),
      CHECK_TEST(parse_checks_custom_metadata_as_arrow_java_reads_it),
      CHECK_TEST(parse_rejects_type_parameters_arrow_cannot_read),
      CHECK_TEST(parse_rejects_field_without_type_table),
      CHECK_TEST(parse_rejects_vtable_arrow_java_reads_as_negative),
      CHECK_TEST(bind_rejects_null_count_the_validity_bits_contradict),
      CHECK_TEST(parse_rejects_big_endian),
      CHECK_TEST(parse_rejects_other_message_types),
      CHECK_TEST(parse_rejects_second_differing_schema),
      CHECK_TEST(parse_rejects_row_count_overflow),
      CHECK_TEST(schema_parse_rejects_non_schema_first_message),
      CHECK_TEST(parse_accepts_every_supported_type),
      CHECK_TEST(parse_accepts_legacy_framing),
      CHECK_TEST(parse_accepts_several_streams_in_one_partition),
      CHECK_TEST(parse_accepts_ipc_file_format),
      CHECK_TEST(parse_rejects_truncated_ipc_file),
      CHECK_TEST(plan_segment_room_holds_every_chunk_size),
      CHECK_TEST(schema_diff_names_first_differing_column),
  };
  return CHECK_MAIN(argc, argv, tests);
}
