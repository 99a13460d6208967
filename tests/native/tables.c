/* tables.c: see tables.h. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tables.h"

const struct iw_field table_every_type[] = {
    {.type = FUNNEL_TYPE_INT8, .name = "i8", .nullable = 1},
    {.type = FUNNEL_TYPE_INT16, .name = "i16", .nullable = 1},
    {.type = FUNNEL_TYPE_INT32, .name = "i32", .nullable = 0},
    {.type = FUNNEL_TYPE_INT64, .name = "i64", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT8, .name = "u8", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT16, .name = "u16", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT32, .name = "u32", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT64, .name = "u64", .nullable = 1},
    {.type = FUNNEL_TYPE_FLOAT32, .name = "f32", .nullable = 1},
    {.type = FUNNEL_TYPE_FLOAT64, .name = "f64", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "flag", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "flag_nn", .nullable = 0},
    {.type = FUNNEL_TYPE_DATE32, .name = "d32", .nullable = 1},
    {.type = FUNNEL_TYPE_DATE64, .name = "d64", .nullable = 1},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_s", .nullable = 1, .time_unit = FUNNEL_TIME_SECOND},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_ms", .nullable = 1, .time_unit = FUNNEL_TIME_MILLISECOND, .timezone = "UTC"},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_us", .nullable = 1, .time_unit = FUNNEL_TIME_MICROSECOND, .timezone = "Europe/Paris"},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_ns", .nullable = 1, .time_unit = FUNNEL_TIME_NANOSECOND},
    {.type = FUNNEL_TYPE_DECIMAL128, .name = "dec", .nullable = 1, .precision = 38, .scale = 9},
    {.type = FUNNEL_TYPE_UTF8, .name = "str", .nullable = 1},
    {.type = FUNNEL_TYPE_BINARY, .name = "bin", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_UTF8, .name = "lstr", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lbin", .nullable = 0},
    {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "fsb", .nullable = 1, .byte_width = 5},
};
const struct iw_schema every_schema = {
    (int)(sizeof(table_every_type) / sizeof(table_every_type[0])), table_every_type, 0};

static const struct iw_field long_fixed_fields[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "a"},
    {.type = FUNNEL_TYPE_FLOAT64, .name = "f", .nullable = 1},
    {.type = FUNNEL_TYPE_INT32, .name = "i"},
    {.type = FUNNEL_TYPE_INT64, .name = "b", .nullable = 1},
};
const struct iw_schema long_fixed_schema = {4, long_fixed_fields, 0};

struct table_src table_random(const struct iw_schema *s, int64_t rows, int null_permille,
                                     uint64_t seed) {
  struct table_src t = {s, calloc((size_t)s->n_fields, sizeof(struct iw_col)), rows};
  uint64_t rng = seed;
  for (int i = 0; i < s->n_fields; i++) iw_col_random(&t.cols[i], &s->fields[i], rows, null_permille, &rng);
  return t;
}

void table_make_compressible(struct table_src *t) {
  for (int i = 0; i < t->schema->n_fields; i++) {
    struct iw_col *c = &t->cols[i];
    const int w = iw_value_width(&c->field);
    if (c->values != NULL) {
      const int step = w > 0 ? w : 1; /* bool: a byte a row */
      for (int64_t r = 5; r < t->rows; r++)
        memcpy(c->values + r * step, c->values + (r % 5) * step, (size_t)step);
    }
    if (c->chars != NULL && t->rows > 0)
      for (int64_t k = 0; k < c->ends[t->rows - 1]; k++) c->chars[k] = (uint8_t)('a' + k % 3);
  }
}

void table_src_free(struct table_src *t) {
  for (int i = 0; i < t->schema->n_fields; i++) iw_col_free(&t->cols[i]);
  free(t->cols);
}

int table_bit(const uint8_t *p, int64_t i) { return (p[i >> 3] >> (i & 7)) & 1; }

/* The column read back must be the plain concatenation of t's rows. */
void check_column(const struct funnel_column *col, const struct iw_col *c, int64_t rows,
                         const uint8_t *validity, const uint8_t *offsets, const uint8_t *data) {
  const struct iw_field *f = &c->field;
  CHECK_EQ_STR(col->name, f->name);
  CHECK_EQ_I64(col->type_id, f->type);
  CHECK_EQ_I64(col->nullable, f->nullable);
  CHECK_EQ_I64(col->length, rows);
  if (f->type == FUNNEL_TYPE_TIMESTAMP) {
    CHECK_EQ_I64(col->time_unit, f->time_unit);
    CHECK_EQ_STR(col->timezone, f->timezone ? f->timezone : "");
  }
  if (f->type == FUNNEL_TYPE_DECIMAL128) {
    CHECK_EQ_I64(col->decimal_precision, f->precision);
    CHECK_EQ_I64(col->decimal_scale, f->scale);
  }
  int64_t nulls = 0;
  for (int64_t r = 0; r < rows; r++) nulls += !c->valid[r];
  CHECK_EQ_I64(col->null_count, nulls);
  const int64_t bitmap = (rows + 7) / 8;
  if (CHECK_EQ_I64(col->validity.size, nulls > 0 ? bitmap : 0) && nulls > 0) {
    int64_t bad = -1;
    for (int64_t r = 0; r < rows && bad < 0; r++)
      if (table_bit(validity, r) != c->valid[r]) bad = r;
    CHECK_EQ_I64(bad, -1);
    for (int64_t r = rows; r < bitmap * 8; r++) CHECK_EQ_I64(table_bit(validity, r), 0);
  }
  const int ow = iw_offset_width(f);
  CHECK_EQ_I64(col->offset_width, ow);
  if (ow) {
    CHECK_EQ_I64(col->byte_width, 0);
    const int64_t chars = rows ? c->ends[rows - 1] : 0;
    if (CHECK_EQ_I64(col->offsets.size, (rows + 1) * ow)) {
      int64_t bad = -1;
      for (int64_t r = 0; r <= rows && bad < 0; r++) {
        int64_t want = iw_col_start(c, r), got;
        if (ow == 4) {
          int32_t v;
          memcpy(&v, offsets + 4 * r, 4);
          got = v;
        } else {
          memcpy(&got, offsets + 8 * r, 8);
        }
        if (got != want) bad = r;
      }
      CHECK_EQ_I64(bad, -1);
    }
    if (CHECK_EQ_I64(col->data.size, chars)) CHECK_MEM(data, c->chars, chars);
  } else if (f->type == FUNNEL_TYPE_BOOL) {
    CHECK_EQ_I64(col->byte_width, 0);
    if (CHECK_EQ_I64(col->data.size, bitmap)) {
      int64_t bad = -1;
      for (int64_t r = 0; r < rows && bad < 0; r++)
        if (table_bit(data, r) != c->values[r]) bad = r;
      CHECK_EQ_I64(bad, -1);
      for (int64_t r = rows; r < bitmap * 8; r++) CHECK_EQ_I64(table_bit(data, r), 0);
    }
  } else {
    const int w = iw_value_width(f);
    CHECK_EQ_I64(col->byte_width, w);
    CHECK_EQ_I64(col->offsets.size, 0);
    if (CHECK_EQ_I64(col->data.size, rows * w)) CHECK_MEM(data, c->values, rows * w);
  }
}


struct funnel_partition *table_partitions(const struct table_src *t, int n_parts) {
  struct funnel_partition *p = calloc((size_t)n_parts + 1, sizeof(*p));
  for (int i = 0; i < n_parts; i++) {
    const int64_t r0 = t->rows * i / n_parts, r1 = t->rows * (i + 1) / n_parts;
    struct iw_buf b = {0};
    iw_schema_message(&b, t->schema, NULL, NULL);
    iw_batch_from_cols(&b, t->schema, t->cols, r0, r1, NULL, NULL);
    iw_eos(&b, NULL);
    p[i].data = iw_dup(b.data, b.len);
    p[i].length = b.len;
    iw_buf_free(&b);
  }
  return p;
}

void table_partitions_free(struct funnel_partition *p, int n_parts) {
  for (int i = 0; i < n_parts; i++) free((void *)p[i].data);
  free(p);
}

int64_t table_salted_value(int p, int64_t i, int salt) {
  return (int64_t)salt * 1000003 + p * 100000 + i;
}

struct funnel_partition table_salted_partition(int p, int64_t rows, int salt) {
  static const struct iw_field field = {.type = FUNNEL_TYPE_INT64, .name = "v", .nullable = 0};
  static const struct iw_schema schema = {1, &field, 0};
  int64_t *v = malloc((size_t)rows * 8);
  for (int64_t i = 0; i < rows; i++) v[i] = table_salted_value(p, i, salt);
  struct iw_column c = {.length = rows, .data = v, .data_length = rows * 8};
  struct iw_buf b = {0};
  iw_schema_message(&b, &schema, NULL, NULL);
  iw_batch_message(&b, &schema, rows, &c, NULL, NULL);
  iw_eos(&b, NULL);
  free(v);
  return (struct funnel_partition){b.data, b.len};
}

void table_check_read(struct funnel_table *t, const struct table_src *src) {
  struct funnel_error err;
  const int n = src->schema->n_fields;
  CHECK_EQ_I64(funnel_table_num_rows(t), src->rows);
  if (!CHECK_EQ_I64(funnel_table_num_columns(t), n)) return;
  struct funnel_column *cols = calloc((size_t)n, sizeof(*cols));
  struct funnel_host_column *host = calloc((size_t)n, sizeof(*host));
  for (int i = 0; i < n; i++) {
    CHECK_OK(funnel_table_column(t, i, &cols[i], &err), &err);
    /* exactly the advertised sizes, so ASan catches a longer copy */
    host[i].validity = malloc((size_t)cols[i].validity.size + !cols[i].validity.size);
    host[i].offsets = malloc((size_t)cols[i].offsets.size + !cols[i].offsets.size);
    host[i].data = malloc((size_t)cols[i].data.size + !cols[i].data.size);
  }
  if (CHECK_OK(funnel_table_copy_to_host(t, host, &err), &err))
    for (int i = 0; i < n; i++) {
      check_context("column %d '%s'", i, src->schema->fields[i].name);
      check_column(&cols[i], &src->cols[i], src->rows, host[i].validity, host[i].offsets, host[i].data);
    }
  check_context("%s", "");
  for (int i = 0; i < n; i++) {
    free(host[i].validity);
    free(host[i].offsets);
    free(host[i].data);
  }
  free(host);
  free(cols);
}

