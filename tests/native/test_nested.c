/* test_nested.c: nested columns (list, large_list, fixed_size_list,
 * struct, map, and lists of lists) read from many partitions into one
 * table.
 *
 * Each partition's batches are random trees of rows, written with the
 * tests' own IPC writer in the shape real writers give them: list offsets
 * that do not start at 0 (a sliced writer's), child rows before and after
 * the ones referenced, nulls at every level, empty lists, empty batches and
 * partitions. The expected answer is each row rendered as text
 * ("[1, null]", "{a: 1, b: \"x\"}", "{k: 1}") straight from the buffers the
 * test wrote; the answer is the same rendering of the table funnel copied
 * back. The renderer is this file's, written from the Arrow format's
 * layout and sharing nothing with funnel. Then the malformed inputs the
 * format allows a writer to get wrong, each refused with the column's path
 * and its partition. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ipc_writer.h"

/* -------------------------------------------------------------- schema */

static const struct iw_field L_ITEM[] = {{.type = FUNNEL_TYPE_INT64, .name = "item", .nullable = 1}};
static const struct iw_field S_KIDS[] = {{.type = FUNNEL_TYPE_INT32, .name = "a", .nullable = 1},
                                         {.type = FUNNEL_TYPE_UTF8, .name = "b", .nullable = 1}};
static const struct iw_field M_KV[] = {{.type = FUNNEL_TYPE_UTF8, .name = "key", .nullable = 0},
                                       {.type = FUNNEL_TYPE_INT64, .name = "value", .nullable = 1}};
static const struct iw_field M_ENTRIES[] = {
    {.type = FUNNEL_TYPE_STRUCT, .name = "entries", .nullable = 0, .n_children = 2, .children = M_KV}};
static const struct iw_field F_ITEM[] = {{.type = FUNNEL_TYPE_INT16, .name = "item", .nullable = 1}};
static const struct iw_field LL_INNER_ITEM[] = {{.type = FUNNEL_TYPE_UTF8, .name = "item", .nullable = 1}};
static const struct iw_field LL_ITEM[] = {
    {.type = FUNNEL_TYPE_LIST, .name = "item", .nullable = 1, .n_children = 1, .children = LL_INNER_ITEM}};
static const struct iw_field LB_ITEM[] = {{.type = FUNNEL_TYPE_BOOL, .name = "item", .nullable = 1}};
static const struct iw_field FIELDS[] = {
    {.type = FUNNEL_TYPE_LIST, .name = "l", .nullable = 1, .n_children = 1, .children = L_ITEM},
    {.type = FUNNEL_TYPE_STRUCT, .name = "s", .nullable = 1, .n_children = 2, .children = S_KIDS},
    {.type = FUNNEL_TYPE_MAP, .name = "m", .nullable = 1, .n_children = 1, .children = M_ENTRIES},
    {.type = FUNNEL_TYPE_FIXED_SIZE_LIST, .name = "f", .nullable = 1, .n_children = 1,
     .children = F_ITEM, .list_size = 3},
    {.type = FUNNEL_TYPE_LIST, .name = "ll", .nullable = 1, .n_children = 1, .children = LL_ITEM},
    {.type = FUNNEL_TYPE_LARGE_LIST, .name = "lb", .nullable = 1, .n_children = 1, .children = LB_ITEM},
    {.type = FUNNEL_TYPE_INT64, .name = "x", .nullable = 1},
};
static const struct iw_schema SCHEMA = {7, FIELDS, 0};
enum { MAX_NODES = 32 };

/* ---------------------------------------------------------------- views */

/* One node of a table in Arrow's layout: what the renderer reads. */
struct vnode {
  const struct iw_field *f;
  const uint8_t *valid;   /* bits; NULL: every row valid */
  const uint8_t *off;     /* lists and strings */
  const uint8_t *data;
  int child;              /* index of the first child */
  int next;               /* index after the subtree */
};

static int width_of(int type) {
  switch (type) {
    case FUNNEL_TYPE_INT16: return 2;
    case FUNNEL_TYPE_INT32: return 4;
    case FUNNEL_TYPE_INT64: return 8;
    default: return 0;
  }
}
static int offset_width_of(int type) {
  return type == FUNNEL_TYPE_LARGE_LIST ? 8
         : type == FUNNEL_TYPE_LIST || type == FUNNEL_TYPE_MAP || type == FUNNEL_TYPE_UTF8 ? 4
                                                                                          : 0;
}
static int bit(const uint8_t *b, int64_t i) { return b == NULL || ((b[i >> 3] >> (i & 7)) & 1); }
static int64_t off_at(const uint8_t *o, int w, int64_t i) {
  if (w == 4) {
    int32_t v;
    memcpy(&v, o + 4 * i, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, o + 8 * i, 8);
  return v;
}

/* Child indices: the nodes are depth first. */
static void link_nodes(struct vnode *v, int n) {
  for (int i = n - 1; i >= 0; i--) {
    v[i].child = i + 1;
    int next = i + 1;
    for (int k = 0; k < v[i].f->n_children; k++) next = v[next].next;
    v[i].next = next;
  }
}

struct text {
  char *s;
  size_t len, cap;
};
static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (t->len + (size_t)n + 1 > t->cap) {
    t->cap = 2 * (t->len + (size_t)n + 1);
    t->s = realloc(t->s, t->cap);
    if (t->s == NULL) abort();
  }
  memcpy(t->s + t->len, tmp, (size_t)n + 1);
  t->len += (size_t)n;
}

static void render(const struct vnode *v, int i, int64_t row, struct text *t) {
  const struct vnode *n = &v[i];
  if (!bit(n->valid, row)) {
    put(t, "null");
    return;
  }
  const int type = n->f->type, ow = offset_width_of(type);
  switch (type) {
    case FUNNEL_TYPE_INT16: {
      int16_t x;
      memcpy(&x, n->data + 2 * row, 2);
      put(t, "%d", x);
      return;
    }
    case FUNNEL_TYPE_INT32: {
      int32_t x;
      memcpy(&x, n->data + 4 * row, 4);
      put(t, "%d", x);
      return;
    }
    case FUNNEL_TYPE_INT64: {
      int64_t x;
      memcpy(&x, n->data + 8 * row, 8);
      put(t, "%lld", (long long)x);
      return;
    }
    case FUNNEL_TYPE_BOOL: put(t, "%s", bit(n->data, row) ? "true" : "false"); return;
    case FUNNEL_TYPE_UTF8: {
      const int64_t a = off_at(n->off, ow, row), b = off_at(n->off, ow, row + 1);
      put(t, "\"%.*s\"", (int)(b - a), (const char *)n->data + a);
      return;
    }
    case FUNNEL_TYPE_LIST:
    case FUNNEL_TYPE_LARGE_LIST:
    case FUNNEL_TYPE_FIXED_SIZE_LIST: {
      const int64_t a = type == FUNNEL_TYPE_FIXED_SIZE_LIST ? row * n->f->list_size : off_at(n->off, ow, row);
      const int64_t b = type == FUNNEL_TYPE_FIXED_SIZE_LIST ? a + n->f->list_size : off_at(n->off, ow, row + 1);
      put(t, "[");
      for (int64_t k = a; k < b; k++) {
        if (k > a) put(t, ", ");
        render(v, n->child, k, t);
      }
      put(t, "]");
      return;
    }
    case FUNNEL_TYPE_STRUCT: {
      put(t, "{");
      for (int k = 0, c = n->child; k < n->f->n_children; k++, c = v[c].next) {
        put(t, "%s%s: ", k ? ", " : "", v[c].f->name);
        render(v, c, row, t);
      }
      put(t, "}");
      return;
    }
    case FUNNEL_TYPE_MAP: {
      const int e = n->child, key = v[e].child, value = v[key].next;
      const int64_t a = off_at(n->off, ow, row), b = off_at(n->off, ow, row + 1);
      put(t, "{");
      for (int64_t k = a; k < b; k++) {
        if (k > a) put(t, ", ");
        render(v, key, k, t);
        put(t, ": ");
        render(v, value, k, t);
      }
      put(t, "}");
      return;
    }
    default: put(t, "?"); return;
  }
}

/* Row `row` of every top-level column, rendered. */
static void render_row(const struct vnode *v, int n_top, int64_t row, struct text *t) {
  for (int c = 0, i = 0; c < n_top; c++, i = v[i].next) {
    put(t, "%s%s=", c ? "; " : "", v[i].f->name);
    render(v, i, row, t);
  }
  put(t, "\n");
}

/* ------------------------------------------------------- random batches */

/* One node of one batch, as written. */
struct wnode {
  int64_t length, null_count;
  struct iw_buf valid, off, data;
};

static void put_off(struct iw_buf *b, int w, int64_t v) {
  if (w == 4) {
    int32_t x = (int32_t)v;
    iw_buf_append(b, &x, 4);
  } else {
    iw_buf_append(b, &v, 8);
  }
}

/* Writes node i's `rows` rows and its children's into w[]; returns the
 * index after its subtree. */
static int gen(const struct iw_field *const *node, int i, int64_t rows, struct wnode *w,
               uint64_t *rng, int never_null) {
  const struct iw_field *f = node[i];
  struct wnode *n = &w[i];
  n->length = rows;
  const int nullable = f->nullable && !never_null;
  const int nulls_ok = nullable && check_rand_below(rng, 4) != 0;
  uint8_t byte = 0;
  for (int64_t r = 0; r < rows; r++) {
    const int valid = !nulls_ok || check_rand_below(rng, 5) != 0;
    n->null_count += !valid;
    byte |= (uint8_t)(valid << (r & 7));
    if ((r & 7) == 7 || r == rows - 1) {
      iw_buf_append(&n->valid, &byte, 1);
      byte = 0;
    }
  }
  const int type = f->type, ow = offset_width_of(type);
  if (width_of(type) > 0) {
    for (int64_t r = 0; r < rows; r++) {
      const int64_t x = (int64_t)check_rand_below(rng, 2000) - 1000;
      iw_buf_append(&n->data, &x, (size_t)width_of(type));
    }
    return i + 1;
  }
  if (type == FUNNEL_TYPE_BOOL) {
    byte = 0;
    for (int64_t r = 0; r < rows; r++) {
      byte |= (uint8_t)(check_rand_below(rng, 2) << (r & 7));
      if ((r & 7) == 7 || r == rows - 1) {
        iw_buf_append(&n->data, &byte, 1);
        byte = 0;
      }
    }
    return i + 1;
  }
  if (type == FUNNEL_TYPE_UTF8) {
    int64_t at = (int64_t)check_rand_below(rng, 4); /* junk before the first string */
    for (int64_t k = 0; k < at; k++) iw_buf_append(&n->data, "#", 1);
    put_off(&n->off, ow, at);
    for (int64_t r = 0; r < rows; r++) {
      const int64_t len = (int64_t)check_rand_below(rng, 6);
      for (int64_t k = 0; k < len; k++) {
        const char c = (char)('a' + check_rand_below(rng, 26));
        iw_buf_append(&n->data, &c, 1);
      }
      at += len;
      put_off(&n->off, ow, at);
    }
    return i + 1;
  }
  if (type == FUNNEL_TYPE_FIXED_SIZE_LIST)
    return gen(node, i + 1, rows * f->list_size, w, rng, 0);
  if (type == FUNNEL_TYPE_STRUCT) {
    int next = i + 1;
    for (int k = 0; k < f->n_children; k++) {
      /* a map's key is never null */
      const int key = never_null && k == 0;
      next = gen(node, next, rows, w, rng, key);
    }
    return next;
  }
  /* a list or a map: child rows before the first referenced (a sliced
   * writer's offsets) and after the last */
  const int64_t base = (int64_t)check_rand_below(rng, 3);
  int64_t at = base;
  put_off(&n->off, ow, at);
  for (int64_t r = 0; r < rows; r++) {
    at += (int64_t)check_rand_below(rng, 4);
    put_off(&n->off, ow, at);
  }
  const int64_t child_rows = at + (int64_t)check_rand_below(rng, 3);
  return gen(node, i + 1, child_rows, w, rng, type == FUNNEL_TYPE_MAP);
}

/* The view of a batch as written. */
static void view_of_batch(const struct iw_field *const *node, int n_nodes, const struct wnode *w,
                          struct vnode *v) {
  for (int i = 0; i < n_nodes; i++)
    v[i] = (struct vnode){.f = node[i], .valid = w[i].valid.data, .off = w[i].off.data,
                          .data = w[i].data.data};
  link_nodes(v, n_nodes);
}

static void batch_columns(int n_nodes, const struct wnode *w, struct iw_column *cols) {
  for (int i = 0; i < n_nodes; i++) {
    /* no validity buffer when nothing is null, now and then */
    const int with_valid = w[i].null_count > 0 || (w[i].length % 2 == 1);
    cols[i] = (struct iw_column){
        .length = w[i].length, .null_count = w[i].null_count,
        .validity = with_valid ? w[i].valid.data : NULL,
        .validity_length = with_valid ? (int64_t)w[i].valid.len : 0,
        .offsets = w[i].off.data, .offsets_length = (int64_t)w[i].off.len,
        .data = w[i].data.data, .data_length = (int64_t)w[i].data.len};
  }
}

static void free_batch(int n_nodes, struct wnode *w) {
  for (int i = 0; i < n_nodes; i++) {
    iw_buf_free(&w[i].valid);
    iw_buf_free(&w[i].off);
    iw_buf_free(&w[i].data);
  }
}

/* ------------------------------------------------------------- the read */

/* Reads `parts` (the headers parsed as `parse` says: enum funnel_parse)
 * and renders the table's rows; FUNNEL_OK or the read's status (err
 * filled). A read of the device's parse must have been the device's. */
/* The last read of the device's parse: its concat_launches and decode_waits. */
static int64_t last_device_launches, last_device_waits;

static int read_and_render_parsed(struct funnel_device *dev, const struct funnel_partition *parts,
                                  size_t n_parts, const struct iw_schema *schema,
                                  const struct iw_field *const *node, int n_nodes, int parse,
                                  int expect_device, struct text *out, struct funnel_error *err) {
  struct funnel_reader *rd = NULL;
  int st = funnel_reader_create(dev, NULL, 0, &rd, err);
  if (st == FUNNEL_OK) st = funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse, err);
  /* the device parse decodes LZ4 bodies there too (on the cpu backend AUTO
   * leaves them to the host threads) */
  if (st == FUNNEL_OK && parse == FUNNEL_PARSE_DEVICE)
    st = funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, FUNNEL_DECODE_DEVICE, err);
  struct funnel_table *t = NULL;
  if (st == FUNNEL_OK) st = funnel_reader_read_async(rd, parts, n_parts, 0, &t, err);
  if (st == FUNNEL_OK) st = funnel_table_wait(t, err);
  if (st != FUNNEL_OK) {
    funnel_table_free(t);
    funnel_reader_free(rd);
    return st;
  }
  struct funnel_read_stats stats;
  if (CHECK_OK(funnel_table_stats(t, &stats, err), err) && parse == FUNNEL_PARSE_DEVICE &&
      expect_device && stats.rows > 0 && !check_on_device(&stats))
    check_fail(__FILE__, __LINE__, "the device parse left %lld of %lld partitions to the host",
               (long long)stats.device_left, (long long)stats.device_parsed);
  if (parse == FUNNEL_PARSE_DEVICE) {
    last_device_launches = stats.concat_launches;
    last_device_waits = stats.decode_waits;
  }
  CHECK_EQ_I64(funnel_table_num_columns(t), n_nodes);
  struct funnel_column col[MAX_NODES];
  struct funnel_host_column host[MAX_NODES];
  struct vnode v[MAX_NODES];
  for (int i = 0; i < n_nodes; i++) {
    CHECK_OK(funnel_table_column(t, i, &col[i], err), err);
    host[i] = (struct funnel_host_column){
        .validity = col[i].validity.size ? malloc((size_t)col[i].validity.size) : NULL,
        .offsets = col[i].offsets.size ? malloc((size_t)col[i].offsets.size) : NULL,
        .data = col[i].data.size ? malloc((size_t)col[i].data.size) : NULL};
  }
  CHECK_OK(funnel_table_copy_to_host(t, host, err), err);
  for (int i = 0; i < n_nodes; i++) {
    v[i] = (struct vnode){.f = node[i], .valid = col[i].null_count > 0 ? host[i].validity : NULL,
                          .off = host[i].offsets, .data = host[i].data};
    CHECK_EQ_STR(col[i].name, node[i]->name);
    CHECK_EQ_I64(col[i].type_id, node[i]->type);
    CHECK_EQ_I64(col[i].n_children, node[i]->n_children);
  }
  link_nodes(v, n_nodes);
  const int64_t rows = funnel_table_num_rows(t);
  for (int i = 0; i < n_nodes; i++) {
    /* the tree: a child's parent, and the table's rows on top */
    for (int k = 0, c = v[i].child; k < node[i]->n_children; k++, c = v[c].next)
      CHECK_EQ_I64(col[c].parent, i);
    /* the null count: the zero bits of the validity copied back */
    int64_t zeros = 0;
    for (int64_t r = 0; r < col[i].length; r++) zeros += !bit(v[i].valid, r);
    CHECK_EQ_I64(zeros, col[i].null_count);
  }
  for (int c = 0, i = 0; c < schema->n_fields; c++, i = v[i].next) {
    CHECK_EQ_I64(col[i].parent, -1);
    CHECK_EQ_I64(col[i].length, rows);
  }
  for (int64_t r = 0; r < rows; r++) render_row(v, schema->n_fields, r, out);
  for (int i = 0; i < n_nodes; i++) {
    free(host[i].validity);
    free(host[i].offsets);
    free(host[i].data);
  }
  funnel_table_free(t);
  funnel_reader_free(rd);
  return FUNNEL_OK;
}

/* Writes `n_parts` partitions of random batches of `schema` (0 to 2 batches
 * a partition, up to max_rows rows each), reads them and compares every
 * row, rendered, with what was written. */
/* Both parses of `parts`, each rendered into `out` (FUNNEL_OK, or the first
 * failing status; the device's must fail as the host's does).
 * `expect_device`: the device parse must keep every partition (each holds
 * at most one batch: the device leaves more to the host). */
static int read_and_render_both(struct funnel_device *dev, const struct funnel_partition *parts,
                                size_t n_parts, const struct iw_schema *schema,
                                const struct iw_field *const *node, int n_nodes, int expect_device,
                                struct text *out, struct funnel_error *err) {
  const int st = read_and_render_parsed(dev, parts, n_parts, schema, node, n_nodes,
                                        FUNNEL_PARSE_HOST, 0, out, err);
  struct text dev_out = {0};
  struct funnel_error dev_err;
  const int dst = read_and_render_parsed(dev, parts, n_parts, schema, node, n_nodes,
                                         FUNNEL_PARSE_DEVICE, expect_device, &dev_out, &dev_err);
  CHECK_EQ_I64(dst, st);
  if (st == FUNNEL_OK && dst == FUNNEL_OK)
    CHECK_EQ_STR(dev_out.s ? dev_out.s : "", out->s ? out->s : "");
  if (st != FUNNEL_OK && dst == st) {
    CHECK_EQ_I64(dev_err.partition, err->partition);
    CHECK_EQ_I64(dev_err.column, err->column);
  }
  free(dev_out.s);
  return st;
}

static int read_and_render_schema(struct funnel_device *dev, const struct funnel_partition *parts,
                                  size_t n_parts, const struct iw_schema *schema,
                                  const struct iw_field *const *node, int n_nodes,
                                  struct text *out, struct funnel_error *err) {
  return read_and_render_both(dev, parts, n_parts, schema, node, n_nodes, 1, out, err);
}

/* `o`: how the batches are written (NULL: uncompressed). */
static void reads_as_written(struct funnel_device *dev, const struct iw_schema *schema,
                             size_t n_parts, int max_rows, int max_batches, uint64_t *rng,
                             const struct iw_options *o) {
  const struct iw_field *node[MAX_NODES];
  const int n_nodes = iw_schema_nodes(schema, node, MAX_NODES);
  struct iw_buf *bufs = calloc(n_parts, sizeof(*bufs));
  struct funnel_partition *parts = calloc(n_parts, sizeof(*parts));
  struct text want = {0}, got = {0};
  int most = 0; /* batches in a partition */
  for (size_t p = 0; p < n_parts; p++) {
    /* 0: a schema alone; the device parse takes partitions of one */
    const int batches = (int)check_rand_below(rng, (uint64_t)max_batches + 1);
    most = batches > most ? batches : most;
    iw_schema_message(&bufs[p], schema, o, NULL);
    for (int b = 0; b < batches; b++) {
      struct wnode w[MAX_NODES];
      memset(w, 0, sizeof(w));
      const int64_t rows = (int64_t)check_rand_below(rng, (uint64_t)max_rows + 1);
      for (int c = 0, i = 0; c < schema->n_fields; c++) i = gen(node, i, rows, w, rng, 0);
      struct iw_column cols[MAX_NODES];
      batch_columns(n_nodes, w, cols);
      iw_batch_message(&bufs[p], schema, rows, cols, o, NULL);
      struct vnode v[MAX_NODES];
      view_of_batch(node, n_nodes, w, v);
      for (int64_t r = 0; r < rows; r++) render_row(v, schema->n_fields, r, &want);
      free_batch(n_nodes, w);
    }
    iw_eos(&bufs[p], o);
    parts[p] = (struct funnel_partition){bufs[p].data, bufs[p].len};
  }
  struct funnel_error err;
  /* the device path takes partitions of one batch, uncompressed or LZ4 */
  const int on_device = most <= 1 && (o == NULL || o->compression != 2);
  if (CHECK_OK(read_and_render_both(dev, parts, n_parts, schema, node, n_nodes, on_device, &got,
                                    &err), &err))
    CHECK_EQ_STR(got.s ? got.s : "", want.s ? want.s : "");
  free(want.s);
  free(got.s);
  for (size_t p = 0; p < n_parts; p++) iw_buf_free(&bufs[p]);
  free(bufs);
  free(parts);
}

static void nested_rows_read_as_written(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  CHECK_EQ_I64(iw_schema_nodes(&SCHEMA, NULL, 0), 17);
  uint64_t rng = 42;
  for (int round = 0; round < 12; round++) {
    /* the last: enough pieces for the plan's passes on the host threads */
    const size_t n_parts = round < 4 ? (size_t)(1 + round) : round < 10 ? 40 : round < 11 ? 300 : 1100;
    check_context("round %d, %zu partitions", round, n_parts);
    reads_as_written(dev, &SCHEMA, n_parts, round < 10 ? 8 : 29, round % 2 ? 2 : 1, &rng, NULL);
  }
  check_context("%s", "");
  funnel_device_close(dev);
}

/* The same rows with their bodies compressed, as Arrow Java and Arrow C++
 * write them (LZ4 frames of each kind, ZSTD). */
static void compressed_nested_rows_read_as_written(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  static const struct iw_options O[] = {
      {.compression = 1, .lz4_style = IW_LZ4_JAVA, .raw_fallback = 1, .empty_prefix = 1},
      {.compression = 1, .lz4_style = IW_LZ4_CPP},
      {.compression = 2, .raw_fallback = 1, .empty_prefix = 1},
  };
  uint64_t rng = 4242;
  for (int round = 0; round < 9; round++) {
    const size_t n_parts = round % 3 == 0 ? 1 : round % 3 == 1 ? 40 : 300;
    check_context("round %d, %zu partitions, writing %d", round, n_parts, round % 3);
    reads_as_written(dev, &SCHEMA, n_parts, 20, round % 2 ? 2 : 1, &rng, &O[round / 3]);
  }
  check_context("%s", "");
  funnel_device_close(dev);
}

/* Nested partitions of a row or none, in LZ4 as Arrow Java writes them
 * (every buffer raw: a frame of so few bytes would be longer), read by
 * the device's parse on one device, 40 partitions a read: the first read
 * makes two passes and launches the decoder (L launches); each read after
 * it parses once (dread.c, arm_one_go: L - 2 launches, no wait), its rows
 * those written and those the host path reads. */
static void raw_nested_reads_parse_once(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  static const struct iw_options java = {.compression = 1, .lz4_style = IW_LZ4_JAVA,
                                         .raw_fallback = 1, .empty_prefix = 1};
  uint64_t rng = 4343;
  int64_t launches = -1; /* L */
  for (int round = 0; round < 6; round++) {
    check_context("round %d", round);
    reads_as_written(dev, &SCHEMA, 40, 1, 1, &rng, &java);
    if (round == 0) launches = last_device_launches;
    CHECK_EQ_I64(last_device_launches, launches - (round > 0 ? 2 : 0));
    CHECK_EQ_I64(last_device_waits, 0);
  }
  check_context("%s", "");
  funnel_device_close(dev);
}

/* A random field at `depth` (1 at the top) into *f, its children (and
 * theirs) allocated; *budget counts the nodes left. */
static void random_field(struct iw_field *f, const char *name, int depth, int *budget,
                         uint64_t *rng) {
  static const int leaves[] = {FUNNEL_TYPE_INT16, FUNNEL_TYPE_INT32, FUNNEL_TYPE_INT64,
                               FUNNEL_TYPE_BOOL, FUNNEL_TYPE_UTF8};
  static const int nested[] = {FUNNEL_TYPE_LIST, FUNNEL_TYPE_LARGE_LIST,
                               FUNNEL_TYPE_FIXED_SIZE_LIST, FUNNEL_TYPE_STRUCT, FUNNEL_TYPE_MAP};
  memset(f, 0, sizeof(*f));
  f->name = name;
  f->nullable = check_rand_below(rng, 5) != 0;
  (*budget)--;
  /* a nested type needs room for its children: 3 nodes for a map */
  if (depth >= 4 || *budget < 4 || check_rand_below(rng, 3) == 0) {
    f->type = leaves[check_rand_below(rng, 5)];
    return;
  }
  f->type = nested[check_rand_below(rng, 5)];
  if (f->type == FUNNEL_TYPE_MAP) {
    struct iw_field *entries = calloc(1, sizeof(*entries));
    struct iw_field *kv = calloc(2, sizeof(*kv));
    *entries = (struct iw_field){.type = FUNNEL_TYPE_STRUCT, .name = "entries", .n_children = 2,
                                 .children = kv};
    *budget -= 2;
    kv[0] = (struct iw_field){.type = check_rand_below(rng, 2) ? FUNNEL_TYPE_UTF8 : FUNNEL_TYPE_INT32,
                              .name = "key"};
    random_field(&kv[1], "value", depth + 2, budget, rng);
    f->n_children = 1;
    f->children = entries;
    return;
  }
  static const char *const names[] = {"a", "b", "c"};
  const int n = f->type == FUNNEL_TYPE_STRUCT ? 1 + (int)check_rand_below(rng, 3) : 1;
  struct iw_field *kids = calloc((size_t)n, sizeof(*kids));
  for (int k = 0; k < n; k++)
    random_field(&kids[k], f->type == FUNNEL_TYPE_STRUCT ? names[k] : "item", depth + 1, budget,
                 rng);
  f->n_children = n;
  f->children = kids;
  if (f->type == FUNNEL_TYPE_FIXED_SIZE_LIST) f->list_size = 1 + (int)check_rand_below(rng, 3);
}

static int field_depth(const struct iw_field *f) {
  int d = 0;
  for (int k = 0; k < f->n_children; k++) {
    const int c = field_depth(&f->children[k]);
    d = c > d ? c : d;
  }
  return 1 + d;
}

static void free_field(struct iw_field *f) {
  for (int k = 0; k < f->n_children; k++) free_field((struct iw_field *)&f->children[k]);
  free((void *)f->children);
}

/* Random schemas of one to four columns, nested up to four deep, every
 * type at every level, each from 1 to 300 partitions. */
static void random_schemas_nested_four_deep_read_as_written(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  static const char *const top[] = {"c0", "c1", "c2", "c3"};
  uint64_t rng = 99;
  int deepest = 0;
  for (int k = 0; k < 60; k++) {
    struct iw_field fields[4];
    const int n = 1 + (int)check_rand_below(&rng, 4);
    int budget = MAX_NODES;
    for (int c = 0; c < n; c++) random_field(&fields[c], top[c], 1, &budget, &rng);
    const struct iw_schema schema = {n, fields, 0};
    const struct iw_field *node[MAX_NODES];
    const int n_nodes = iw_schema_nodes(&schema, node, MAX_NODES);
    for (int c = 0; c < n; c++) {
      const int d = field_depth(&fields[c]);
      deepest = d > deepest ? d : deepest;
    }
    const size_t n_parts = k % 3 == 0 ? 1 : k % 3 == 1 ? 7 : 300;
    check_context("schema %d (%d nodes), %zu partitions", k, n_nodes, n_parts);
    /* every fourth with its bodies compressed (ZSTD) */
    static const struct iw_options zstd = {.compression = 2, .empty_prefix = 1};
    if (n_nodes <= MAX_NODES)
      reads_as_written(dev, &schema, n_parts, 12, k % 2 ? 2 : 1, &rng, k % 4 == 3 ? &zstd : NULL);
    for (int c = 0; c < n; c++) free_field(&fields[c]);
  }
  check_context("%s", "");
  CHECK(deepest >= 4); /* the draws reached four levels */
  funnel_device_close(dev);
}

/* --------------------------------------------------------------- export */

static const char *format_for(const struct iw_field *f) {
  switch (f->type) {
    case FUNNEL_TYPE_INT16: return "s";
    case FUNNEL_TYPE_INT32: return "i";
    case FUNNEL_TYPE_INT64: return "l";
    case FUNNEL_TYPE_BOOL: return "b";
    case FUNNEL_TYPE_UTF8: return "u";
    case FUNNEL_TYPE_LIST: return "+l";
    case FUNNEL_TYPE_LARGE_LIST: return "+L";
    case FUNNEL_TYPE_STRUCT: return "+s";
    case FUNNEL_TYPE_MAP: return "+m";
    case FUNNEL_TYPE_FIXED_SIZE_LIST: return f->list_size == 3 ? "+w:3" : "+w:?";
    default: return "?";
  }
}

/* Node i of the export (array a, schema s) against column i of the table
 * and field f of the test's schema; returns the index after its subtree. */
static int check_exported(struct funnel_table *t, int i, const struct ArrowArray *a,
                          const struct ArrowSchema *s, const struct iw_field *f) {
  struct funnel_column col;
  struct funnel_error err;
  if (!CHECK_OK(funnel_table_column(t, i, &col, &err), &err)) return i + 1;
  check_context("exported column %d '%s'", i, col.path);
  CHECK_EQ_STR(s->format, format_for(f));
  CHECK_EQ_STR(s->name, f->name);
  CHECK_EQ_I64(a->length, col.length);
  CHECK_EQ_I64(a->null_count, col.null_count);
  CHECK_EQ_I64(a->n_children, f->n_children);
  CHECK_EQ_I64(s->n_children, f->n_children);
  /* validity, then offsets for strings and lists, then data but for nested */
  const int nested = f->n_children > 0;
  const int has_off = f->type == FUNNEL_TYPE_UTF8 || f->type == FUNNEL_TYPE_LIST ||
                      f->type == FUNNEL_TYPE_LARGE_LIST || f->type == FUNNEL_TYPE_MAP;
  CHECK_EQ_I64(a->n_buffers, 1 + has_off + !nested);
  if (a->n_buffers >= 1) CHECK_EQ_I64((uint64_t)(uintptr_t)a->buffers[0], col.validity.address);
  if (has_off && a->n_buffers >= 2)
    CHECK_EQ_I64((uint64_t)(uintptr_t)a->buffers[1], col.offsets.address);
  if (!nested && a->n_buffers == 1 + has_off + 1)
    CHECK_EQ_I64((uint64_t)(uintptr_t)a->buffers[a->n_buffers - 1], col.data.address);
  int next = i + 1;
  for (int k = 0; k < f->n_children && k < a->n_children && k < s->n_children; k++)
    next = check_exported(t, next, a->children[k], s->children[k], &f->children[k]);
  return next;
}

static void nested_export_is_the_table_tree(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  const struct iw_field *node[MAX_NODES];
  const int n_nodes = iw_schema_nodes(&SCHEMA, node, MAX_NODES);
  uint64_t rng = 7;
  struct iw_buf bufs[3] = {{0}, {0}, {0}};
  struct funnel_partition parts[3];
  for (int p = 0; p < 3; p++) {
    struct wnode w[MAX_NODES];
    memset(w, 0, sizeof(w));
    const int64_t rows = 5 + p;
    for (int c = 0, i = 0; c < SCHEMA.n_fields; c++) i = gen(node, i, rows, w, &rng, 0);
    struct iw_column cols[MAX_NODES];
    batch_columns(n_nodes, w, cols);
    iw_schema_message(&bufs[p], &SCHEMA, NULL, NULL);
    iw_batch_message(&bufs[p], &SCHEMA, rows, cols, NULL, NULL);
    iw_eos(&bufs[p], NULL);
    free_batch(n_nodes, w);
    parts[p] = (struct funnel_partition){bufs[p].data, bufs[p].len};
  }
  struct funnel_reader *rd = NULL;
  struct funnel_table *t = NULL;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err) &&
      CHECK_OK(funnel_reader_read_async(rd, parts, 3, 0, &t, &err), &err) &&
      CHECK_OK(funnel_table_wait(t, &err), &err)) {
    struct ArrowDeviceArray a;
    struct ArrowSchema s;
    if (CHECK_OK(funnel_table_export_device(t, &a, &s, &err), &err)) {
      CHECK_EQ_I64(a.array.length, 18);
      CHECK_EQ_I64(a.array.n_children, SCHEMA.n_fields);
      CHECK_EQ_STR(s.format, "+s");
      for (int c = 0, i = 0; c < SCHEMA.n_fields && c < a.array.n_children; c++)
        i = check_exported(t, i, a.array.children[c], s.children[c], &FIELDS[c]);
      check_context("%s", "");
      /* a consumer moves a nested column out, releases the rest, then it */
      struct ArrowArray moved = *a.array.children[4];
      a.array.children[4]->release = NULL;
      funnel_table_free(t);
      t = NULL;
      a.array.release(&a.array);
      s.release(&s);
      CHECK_EQ_I64(moved.n_children, 1);
      CHECK_EQ_I64(moved.children[0]->n_children, 1);
      CHECK(moved.children[0]->children[0]->release != NULL);
      moved.release(&moved);
      CHECK(moved.release == NULL);
    }
  }
  funnel_table_free(t);
  funnel_reader_free(rd);
  for (int p = 0; p < 3; p++) iw_buf_free(&bufs[p]);
  funnel_device_close(dev);
}

/* ------------------------------------------------------------ bad input */

static const struct iw_field BAD_L[] = {{.type = FUNNEL_TYPE_INT64, .name = "item", .nullable = 1}};
static const struct iw_field BAD_S[] = {{.type = FUNNEL_TYPE_INT32, .name = "a", .nullable = 1}};
static const struct iw_field BAD_F[] = {{.type = FUNNEL_TYPE_INT16, .name = "item", .nullable = 1}};
static const struct iw_field BAD_FIELDS[] = {
    {.type = FUNNEL_TYPE_LIST, .name = "l", .nullable = 1, .n_children = 1, .children = BAD_L},
    {.type = FUNNEL_TYPE_STRUCT, .name = "s", .nullable = 1, .n_children = 1, .children = BAD_S},
    {.type = FUNNEL_TYPE_MAP, .name = "m", .nullable = 1, .n_children = 1, .children = M_ENTRIES},
    {.type = FUNNEL_TYPE_FIXED_SIZE_LIST, .name = "f", .nullable = 1, .n_children = 1,
     .children = BAD_F, .list_size = 2},
};
static const struct iw_schema BAD_SCHEMA = {4, BAD_FIELDS, 0};

/* Two rows of every column, right unless `bad` says which to spoil. */
static void bad_partition(struct iw_buf *b, int bad) {
  static const int32_t l_off[] = {0, 2, 3}, l_off_bad[] = {0, 3, 2}, m_off[] = {0, 1, 2},
                       k_off[] = {0, 1, 2};
  static const int64_t l_item[] = {1, 2, 3}, m_value[] = {5, 6};
  static const int32_t s_a[] = {7, 8, 9};
  static const int16_t f_item[] = {1, 2, 3, 4};
  static const uint8_t one_null = 0x2; /* row 0 null, row 1 valid */
  struct iw_column c[10] = {
      {.length = 2, .offsets = bad == 2 ? l_off_bad : l_off, .offsets_length = 12},
      {.length = bad == 1 ? 2 : bad == 6 ? (int64_t)1 << 62 : 3, .data = l_item, .data_length = 24},
      {.length = 2},
      {.length = bad == 4 ? 3 : 2, .data = s_a, .data_length = 12},
      {.length = 2, .offsets = m_off, .offsets_length = 12},
      {.length = 2},
      {.length = 2, .null_count = bad == 3 ? 1 : 0, .validity = bad == 3 ? &one_null : NULL,
       .validity_length = bad == 3 ? 1 : 0, .offsets = k_off, .offsets_length = 12,
       .data = "ab", .data_length = 2},
      {.length = 2, .data = m_value, .data_length = 16},
      {.length = 2},
      {.length = bad == 5 ? 3 : 4, .data = f_item, .data_length = 8},
  };
  iw_schema_message(b, &BAD_SCHEMA, NULL, NULL);
  iw_batch_message(b, &BAD_SCHEMA, 2, c, NULL, NULL);
  iw_eos(b, NULL);
}

static void malformed_nested_columns_are_named(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  const struct iw_field *node[MAX_NODES];
  const int n_nodes = iw_schema_nodes(&BAD_SCHEMA, node, MAX_NODES);
  static const struct {
    const char *what;
    int column;
    const char *path;
    int code;
  } cases[] = {
      {"right", -1, "", FUNNEL_OK},
      {"a child shorter than its list's offsets say", 1, "'l.item'", FUNNEL_ERR_MALFORMED},
      {"list offsets out of order", 0, "'l'", FUNNEL_ERR_MALFORMED},
      {"a map with a null key", 6, "'m.entries.key'", FUNNEL_ERR_MALFORMED},
      {"a struct child of the wrong length", 3, "'s.a'", FUNNEL_ERR_MALFORMED},
      {"a fixed_size_list whose child does not hold 2 x rows", 9, "'f.item'", FUNNEL_ERR_MALFORMED},
      /* the fuzz harness found its multiplications overflowing */
      {"a child of 2^62 rows", 1, "'l.item'", FUNNEL_ERR_LIMIT},
  };
  for (int k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
    check_context("%s", cases[k].what);
    struct iw_buf good = {0}, bad = {0};
    bad_partition(&good, 0);
    bad_partition(&bad, k);
    const struct funnel_partition parts[2] = {{good.data, good.len}, {bad.data, bad.len}};
    struct text got = {0};
    const int st = read_and_render_schema(dev, parts, 2, &BAD_SCHEMA, node, n_nodes, &got, &err);
    if (cases[k].column < 0) {
      CHECK_OK(st, &err);
      CHECK_EQ_STR(got.s ? got.s : "",
                   "l=[1, 2]; s={a: 7}; m={\"a\": 5}; f=[1, 2]\n"
                   "l=[3]; s={a: 8}; m={\"b\": 6}; f=[3, 4]\n"
                   "l=[1, 2]; s={a: 7}; m={\"a\": 5}; f=[1, 2]\n"
                   "l=[3]; s={a: 8}; m={\"b\": 6}; f=[3, 4]\n");
    } else if (CHECK_STATUS(st, cases[k].code, &err)) {
      CHECK_EQ_I64(err.partition, 1);
      CHECK_EQ_I64(err.column, cases[k].column);
      if (strstr(err.message, cases[k].path) == NULL)
        check_fail(__FILE__, __LINE__, "the message does not name %s: %s", cases[k].path,
                   err.message);
    }
    free(got.s);
    iw_buf_free(&good);
    iw_buf_free(&bad);
  }
  check_context("%s", "");
  funnel_device_close(dev);
}

/* Rows without bytes: a fixed_size_list of empty structs holds 2^56 child
 * rows in a body of nothing (the most a read takes: 2^57 - 1). One partition of them reads (a table whose
 * buffers are all absent); two would give the child more rows than a read
 * takes, refused naming it, not overflowed. */
static void rows_without_bytes_are_bounded(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  static const struct iw_field empty[] = {{.type = FUNNEL_TYPE_STRUCT, .name = "s", .nullable = 1}};
  static const struct iw_field fields[] = {{.type = FUNNEL_TYPE_FIXED_SIZE_LIST, .name = "f",
                                            .nullable = 1, .n_children = 1, .children = empty,
                                            .list_size = 1 << 28}};
  static const struct iw_schema schema = {1, fields, 0};
  const int64_t rows = (int64_t)1 << 28;
  const struct iw_column cols[2] = {{.length = rows}, {.length = rows << 28}};
  struct iw_buf b = {0};
  iw_schema_message(&b, &schema, NULL, NULL);
  iw_batch_message(&b, &schema, rows, cols, NULL, NULL);
  iw_eos(&b, NULL);
  const struct funnel_partition parts[2] = {{b.data, b.len}, {b.data, b.len}};
  struct funnel_reader *rd = NULL;
  struct funnel_table *t = NULL;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    if (CHECK_OK(funnel_reader_read_async(rd, parts, 1, 0, &t, &err), &err) &&
        CHECK_OK(funnel_table_wait(t, &err), &err)) {
      struct funnel_column c;
      CHECK_EQ_I64(funnel_table_num_rows(t), rows);
      if (CHECK_OK(funnel_table_column(t, 1, &c, &err), &err)) {
        CHECK_EQ_I64(c.length, rows << 28);
        CHECK_EQ_I64(c.validity.size + c.offsets.size + c.data.size, 0);
      }
    }
    funnel_table_free(t);
    t = NULL;
    if (CHECK_STATUS(funnel_reader_read_async(rd, parts, 2, 0, &t, &err), FUNNEL_ERR_LIMIT, &err)) {
      CHECK_EQ_I64(err.partition, 1);
      CHECK_EQ_I64(err.column, 1);
      CHECK(strstr(err.message, "'f.s'") != NULL);
    }
    funnel_table_free(t);
  }
  funnel_reader_free(rd);
  iw_buf_free(&b);
  funnel_device_close(dev);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  static const struct check_test tests[] = {
      CHECK_TEST(nested_rows_read_as_written),
      CHECK_TEST(compressed_nested_rows_read_as_written),
      CHECK_TEST(raw_nested_reads_parse_once),
      CHECK_TEST(random_schemas_nested_four_deep_read_as_written),
      CHECK_TEST(nested_export_is_the_table_tree),
      CHECK_TEST(malformed_nested_columns_are_named),
      CHECK_TEST(rows_without_bytes_are_bounded),
  };
  return CHECK_MAIN(argc, argv, tests);
}
