/* export.c: a table through the Arrow C Device Data Interface.
 *
 * The exported struct array and each of its children hold a reference to
 * the table, so a consumer may keep (or move out) any of them past
 * funnel_table_free; the buffers are the table's own, not copies. The
 * schema is built from the table's columns and holds nothing of it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

/* ------------------------------------------------------------------ array */

/* A node of the exported tree: the struct array on top (the table), a
 * column, or a nested column's child. Each owns its children's structs,
 * so a consumer may move any array out and release the rest. */
struct node_private {
  struct funnel_table *table;
  const void *buffers[3];
  struct ArrowArray *kids;
  struct ArrowArray **kid_ptrs;
  int64_t n_kids;
  void *event; /* the top's: what sync_event points to */
};

static void release_node(struct ArrowArray *a) {
  if (a == NULL || a->release == NULL) return;
  struct node_private *p = a->private_data;
  /* children the consumer did not move out are released with their parent */
  for (int64_t i = 0; i < p->n_kids; i++)
    if (p->kids[i].release != NULL) p->kids[i].release(&p->kids[i]);
  free(p->kids);
  free(p->kid_ptrs);
  funnel__table_unref(p->table);
  free(p);
  a->release = NULL;
}

/* The index after column c's subtree (its next sibling's). */
static int subtree_end(const struct funnel__schema *s, int c) {
  int next = c + 1;
  for (int k = 0; k < s->fields[c].n_children; k++) next = subtree_end(s, next);
  return next;
}

/* buffers of column `c` in the order Arrow gives them for its type:
 * validity, then offsets (strings, lists), then data (all but nested) */
static int64_t node_buffers(const struct funnel_table *t, int c, const void **out) {
  const struct funnel__field *f = &t->plan.schema->fields[c];
  int64_t size, n = 0;
  out[n++] = (const void *)(uintptr_t)funnel__table_buffer(t, c, FUNNEL_BUFFER_VALIDITY, &size);
  if (f->offset_width > 0)
    out[n++] = (const void *)(uintptr_t)funnel__table_buffer(t, c, FUNNEL_BUFFER_OFFSETS, &size);
  if (f->nested == FUNNEL__NESTED_NONE)
    out[n++] = (const void *)(uintptr_t)funnel__table_buffer(t, c, FUNNEL_BUFFER_DATA, &size);
  return n;
}

/* Fills `out` with column c (c < 0: the struct array on top) and its
 * children, recursively. */
static int export_node(struct funnel_table *t, int c, struct ArrowArray *out,
                       struct funnel_error *error) {
  const struct funnel__schema *s = t->plan.schema;
  const int64_t n_kids = c < 0 ? s->n_top : s->fields[c].n_children;
  struct node_private *p = calloc(1, sizeof(*p));
  if (p != NULL && n_kids > 0) {
    p->kids = calloc((size_t)n_kids, sizeof(*p->kids));
    p->kid_ptrs = calloc((size_t)n_kids, sizeof(*p->kid_ptrs));
  }
  if (p == NULL || (n_kids > 0 && (p->kids == NULL || p->kid_ptrs == NULL))) {
    if (p != NULL) {
      free(p->kids);
      free(p->kid_ptrs);
    }
    free(p);
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  }
  p->table = funnel__table_ref(t);
  memset(out, 0, sizeof(*out));
  out->release = release_node;
  out->private_data = p;
  if (c < 0) {
    p->event = t->event;
    out->length = t->plan.rows;
    out->n_buffers = 1; /* a struct's validity: none, no row of it is null */
  } else {
    out->length = t->plan.columns[c].length;
    out->null_count = t->plan.columns[c].null_count;
    out->n_buffers = node_buffers(t, c, p->buffers);
  }
  out->buffers = p->buffers;
  out->n_children = n_kids;
  out->children = n_kids > 0 ? p->kid_ptrs : NULL;
  for (int64_t k = 0, kid = c + 1; k < n_kids; k++) {
    const int st = export_node(t, (int)kid, &p->kids[k], error);
    if (st != FUNNEL_OK) {
      release_node(out); /* and the children made so far */
      return st;
    }
    p->kid_ptrs[k] = &p->kids[k];
    p->n_kids = k + 1;
    kid = subtree_end(s, (int)kid);
  }
  p->n_kids = n_kids;
  return FUNNEL_OK;
}

/* ----------------------------------------------------------------- schema */

struct schema_private {
  char format[64];
  char *owned; /* a timestamp's format with its timezone, when long */
  struct ArrowSchema *children;
  struct ArrowSchema **child_ptrs;
  int64_t n_children;
};

static void release_schema(struct ArrowSchema *s) {
  if (s == NULL || s->release == NULL) return;
  struct schema_private *p = s->private_data;
  for (int64_t i = 0; i < p->n_children; i++)
    if (p->children[i].release != NULL) p->children[i].release(&p->children[i]);
  free(p->children);
  free(p->child_ptrs);
  free(p->owned);
  free((void *)s->name);
  free(p);
  s->release = NULL;
}

/* The C Data Interface's format string of a field. */
static int format_of(const struct funnel__field *f, struct schema_private *p,
                     struct funnel_error *error) {
  static const char *const simple[] = {
      [FUNNEL_TYPE_INT8] = "c",    [FUNNEL_TYPE_INT16] = "s",   [FUNNEL_TYPE_INT32] = "i",
      [FUNNEL_TYPE_INT64] = "l",   [FUNNEL_TYPE_UINT8] = "C",   [FUNNEL_TYPE_UINT16] = "S",
      [FUNNEL_TYPE_UINT32] = "I",  [FUNNEL_TYPE_UINT64] = "L",  [FUNNEL_TYPE_FLOAT32] = "f",
      [FUNNEL_TYPE_FLOAT64] = "g", [FUNNEL_TYPE_BOOL] = "b",    [FUNNEL_TYPE_DATE32] = "tdD",
      [FUNNEL_TYPE_DATE64] = "tdm", [FUNNEL_TYPE_UTF8] = "u",   [FUNNEL_TYPE_BINARY] = "z",
      [FUNNEL_TYPE_LARGE_UTF8] = "U", [FUNNEL_TYPE_LARGE_BINARY] = "Z"};
  switch (f->type_id) {
    case FUNNEL_TYPE_TIMESTAMP: {
      static const char units[] = {'s', 'm', 'u', 'n'};
      const size_t need = strlen(f->timezone) + 5;
      char *dst = p->format;
      if (need > sizeof(p->format)) {
        if ((p->owned = malloc(need)) == NULL)
          return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
        dst = p->owned;
      }
      snprintf(dst, need, "ts%c:%s", units[f->time_unit & 3], f->timezone);
      return FUNNEL_OK;
    }
    case FUNNEL_TYPE_DECIMAL128:
      snprintf(p->format, sizeof(p->format), "d:%d,%d", f->precision, f->scale);
      return FUNNEL_OK;
    case FUNNEL_TYPE_FIXED_SIZE_BINARY:
      snprintf(p->format, sizeof(p->format), "w:%d", f->byte_width);
      return FUNNEL_OK;
    case FUNNEL_TYPE_LIST: snprintf(p->format, sizeof(p->format), "+l"); return FUNNEL_OK;
    case FUNNEL_TYPE_LARGE_LIST: snprintf(p->format, sizeof(p->format), "+L"); return FUNNEL_OK;
    case FUNNEL_TYPE_STRUCT: snprintf(p->format, sizeof(p->format), "+s"); return FUNNEL_OK;
    case FUNNEL_TYPE_MAP: snprintf(p->format, sizeof(p->format), "+m"); return FUNNEL_OK;
    case FUNNEL_TYPE_FIXED_SIZE_LIST:
      snprintf(p->format, sizeof(p->format), "+w:%d", f->list_size);
      return FUNNEL_OK;
    default:
      if (f->type_id <= 0 || f->type_id >= (int)(sizeof(simple) / sizeof(simple[0])) ||
          simple[f->type_id] == NULL)
        return FUNNEL_ERR(error, FUNNEL_ERR_UNSUPPORTED, "no C Data Interface format for %s",
                          funnel_type_name(f->type_id));
      snprintf(p->format, sizeof(p->format), "%s", simple[f->type_id]);
      return FUNNEL_OK;
  }
}

static int export_field(const char *name, const struct funnel__field *f, struct ArrowSchema *out,
                        int64_t n_children, struct funnel_error *error) {
  struct schema_private *p = calloc(1, sizeof(*p));
  char *copy = p != NULL ? strdup(name) : NULL;
  if (p != NULL && n_children > 0) {
    p->children = calloc((size_t)n_children, sizeof(*p->children));
    p->child_ptrs = calloc((size_t)n_children, sizeof(*p->child_ptrs));
  }
  int st = p == NULL || copy == NULL || (n_children > 0 && (p->children == NULL ||
                                                           p->child_ptrs == NULL))
               ? FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory")
               : FUNNEL_OK;
  if (st == FUNNEL_OK) {
    if (f != NULL) st = format_of(f, p, error);
    else snprintf(p->format, sizeof(p->format), "+s");
  }
  if (st != FUNNEL_OK) {
    if (p != NULL) {
      free(p->children);
      free(p->child_ptrs);
      free(p->owned);
    }
    free(p);
    free(copy);
    return st;
  }
  memset(out, 0, sizeof(*out));
  out->format = p->owned != NULL ? p->owned : p->format;
  out->name = copy;
  out->flags = (f == NULL || f->nullable ? ARROW_FLAG_NULLABLE : 0) |
               (f != NULL && f->keys_sorted ? ARROW_FLAG_MAP_KEYS_SORTED : 0);
  out->n_children = n_children;
  out->children = p->child_ptrs;
  out->release = release_schema;
  out->private_data = p;
  return FUNNEL_OK;
}

/* The schema of column c (c < 0: the struct on top) and its children. */
static int export_node_schema(const struct funnel__schema *s, int c, struct ArrowSchema *out,
                              struct funnel_error *error) {
  const int n_kids = c < 0 ? s->n_top : s->fields[c].n_children;
  FUNNEL_RETURN_NOT_OK(export_field(c < 0 ? "" : s->fields[c].name, c < 0 ? NULL : &s->fields[c],
                                    out, n_kids, error));
  struct schema_private *p = out->private_data;
  for (int k = 0, kid = c + 1; k < n_kids; k++) {
    const int st = export_node_schema(s, kid, &p->children[k], error);
    if (st != FUNNEL_OK) {
      p->n_children = k; /* release what was made */
      out->release(out);
      return st;
    }
    p->child_ptrs[k] = &p->children[k];
    p->n_children = k + 1;
    kid = subtree_end(s, kid);
  }
  return FUNNEL_OK;
}

static int export_schema(const struct funnel_table *t, struct ArrowSchema *out,
                         struct funnel_error *error) {
  return export_node_schema(t->plan.schema, -1, out, error);
}

/* ----------------------------------------------------------------- export */

static int export_device(struct funnel_table *t, struct ArrowDeviceArray *array,
                         struct ArrowSchema *schema, struct funnel_error *error) {
  const struct funnel_backend *be = &t->dev->be;
  const bool cpu = be->arrow_device_type == ARROW_DEVICE_CPU;
  /* a CPU consumer has no event to wait on */
  if (cpu) FUNNEL_RETURN_NOT_OK(funnel_table_wait(t, error));
  struct ArrowSchema s;
  if (schema != NULL) FUNNEL_RETURN_NOT_OK(export_schema(t, &s, error));
  struct ArrowDeviceArray a;
  memset(&a, 0, sizeof(a));
  int st = export_node(t, -1, &a.array, error);
  if (st != FUNNEL_OK) {
    if (schema != NULL) s.release(&s);
    return st;
  }
  struct node_private *p = a.array.private_data;
  a.device_type = be->arrow_device_type;
  a.device_id = be->device_id;
  a.sync_event = !cpu && p->event != NULL && !funnel_table_is_ready(t) ? (void *)&p->event : NULL;
  *array = a;
  if (schema != NULL) *schema = s;
  return FUNNEL_OK;
}

funnel_status funnel_table_export_device(struct funnel_table *t, struct ArrowDeviceArray *array,
                                         struct ArrowSchema *schema, struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(t != NULL && array != NULL,
                   "funnel_table_export_device: table and array must not be NULL");
  funnel__table_enter(t);
  const int st = export_device(t, array, schema, error);
  funnel__table_leave(t);
  return st;
}
