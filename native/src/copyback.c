/* copyback.c: a table's buffers back to host memory (funnel.h,
 * funnel_table_copy_to_host and funnel_table_copy_ranges_to_host): every
 * size is known from the plan, so the copies go in one pass on the
 * device's stream, and the call waits for them. */
#include <stdlib.h>

#include "table.h"
#include "work.h"

/* One copy: device address, size, host destination. */
struct d2h {
  uint64_t src;
  int64_t size;
  void *dst;
};

/* Enqueues the `n` copies and waits for them: the caller's buffers may be
 * released only once every copy into them is known complete. */
static int copy_back(struct funnel_table *t, const struct d2h *copies, size_t n,
                     struct funnel_error *error) {
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, &t->dev->be, t->dev->stream, NULL, error));
  int st = FUNNEL_OK;
  for (size_t i = 0; i < n && st == FUNNEL_OK; i++) {
    if (copies[i].dst == NULL || copies[i].src == 0 || copies[i].size == 0) continue;
    st = funnel__work_enqueued(&w, funnel__dev_copy_d2h_async(w.be, copies[i].dst, copies[i].src,
                                                              (size_t)copies[i].size, w.stream,
                                                              error));
  }
  /* the copies write the caller's memory and read the table's, which
   * outlives this call: nothing of ours to forget if they cannot be
   * waited for */
  st = funnel__work_finish(&w, st, true, NULL, error);
  funnel__work_end(&w);
  return st;
}

/* Every buffer of every column to `columns`. */
static int copy_columns(struct funnel_table *t, const struct funnel_host_column *columns,
                        struct funnel_error *error) {
  FUNNEL_RETURN_NOT_OK(funnel_table_wait(t, error));
  const int n = t->plan.schema->n_fields;
  struct d2h *copies = calloc(3 * (size_t)n + 1, sizeof(*copies));
  if (copies == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  for (int c = 0; c < n; c++) {
    void *const dst[3] = {columns[c].validity, columns[c].offsets, columns[c].data};
    for (int k = FUNNEL_BUFFER_VALIDITY; k <= FUNNEL_BUFFER_DATA; k++) {
      struct d2h *d = &copies[3 * c + k];
      d->src = funnel__table_buffer(t, c, (enum funnel_buffer_kind)k, &d->size);
      d->dst = dst[k];
    }
  }
  const int st = copy_back(t, copies, 3 * (size_t)n, error);
  free(copies);
  return st;
}

funnel_status funnel_table_copy_to_host(struct funnel_table *t,
                                        const struct funnel_host_column *columns,
                                        struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(t != NULL && columns != NULL, "funnel_table_copy_to_host: NULL argument");
  funnel__table_enter(t); /* funnel_table_free waits for the copies */
  const int st = copy_columns(t, columns, error);
  funnel__table_leave(t);
  return st;
}

/* The copy of range `i`, or FUNNEL_ERR_INVALID_ARGUMENT naming it when it
 * names no buffer or lies outside its buffer. */
static int range_copy(const struct funnel_table *t, const struct funnel_host_range *r, size_t i,
                      struct d2h *out, struct funnel_error *error) {
  int64_t size = 0, end;
  const int32_t n_columns = t->plan.schema->n_fields;
  if (r->column < 0 || r->column >= n_columns)
    return funnel__error_set(error, FUNNEL_ERR_INVALID_ARGUMENT, -1, -1, -1,
                             "range %zu: the table has no column %d (it has %d, nested ones "
                             "included)",
                             i, r->column, n_columns);
  if (r->buffer < FUNNEL_BUFFER_VALIDITY || r->buffer > FUNNEL_BUFFER_DATA)
    return funnel__error_set(error, FUNNEL_ERR_INVALID_ARGUMENT, -1, r->column, -1,
                             "range %zu: column %d: buffer %d is no buffer kind (validity 0, "
                             "offsets 1, data 2)",
                             i, r->column, r->buffer);
  const uint64_t base =
      funnel__table_buffer(t, r->column, (enum funnel_buffer_kind)r->buffer, &size);
  if (r->offset < 0 || r->length < 0 || (r->length > 0 && r->dst == NULL) ||
      funnel__add_overflows(r->offset, r->length, &end) || end > size)
    return funnel__error_set(error, FUNNEL_ERR_INVALID_ARGUMENT, -1, r->column, -1,
                             "range %zu: column %d, buffer %d, bytes [%lld, +%lld) is outside "
                             "the buffer (%lld bytes)",
                             i, r->column, r->buffer, (long long)r->offset, (long long)r->length,
                             (long long)size);
  *out = (struct d2h){base + (uint64_t)r->offset, r->length, r->dst};
  return FUNNEL_OK;
}

/* The ranges, checked first: nothing is copied when one is outside. */
static int copy_ranges(struct funnel_table *t, const struct funnel_host_range *ranges,
                       size_t count, struct funnel_error *error) {
  struct d2h *copies = calloc(count + 1, sizeof(*copies));
  if (copies == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  int st = FUNNEL_OK;
  for (size_t i = 0; i < count && st == FUNNEL_OK; i++)
    st = range_copy(t, &ranges[i], i, &copies[i], error);
  if (st == FUNNEL_OK) st = funnel_table_wait(t, error);
  if (st == FUNNEL_OK) st = copy_back(t, copies, count, error);
  free(copies);
  return st;
}

funnel_status funnel_table_copy_ranges_to_host(struct funnel_table *t,
                                               const struct funnel_host_range *ranges,
                                               size_t count, struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(t != NULL && (ranges != NULL || count == 0),
                   "funnel_table_copy_ranges_to_host: NULL argument");
  funnel__table_enter(t); /* funnel_table_free waits for the copies */
  const int st = copy_ranges(t, ranges, count, error);
  funnel__table_leave(t);
  return st;
}
