/* table.c: a table's life (table.h) and the public calls on a table that
 * enqueue nothing (funnel.h, "table"). */
#include <stdlib.h>
#include <string.h>

#include "table.h"

struct funnel__shared_schema *funnel__shared_schema_ref(struct funnel__shared_schema *s) {
  if (s != NULL) atomic_fetch_add(&s->refs, 1);
  return s;
}

void funnel__shared_schema_unref(struct funnel__shared_schema *s) {
  if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1) {
    funnel__arena_free(&s->arena);
    free(s);
  }
}

struct funnel_table *funnel__table_new(struct funnel_device *dev, struct funnel_error *error) {
  struct funnel_table *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    return NULL;
  }
  atomic_init(&t->refs, 1);
  t->dev = funnel__device_ref(dev);
  pthread_mutex_init(&t->mu, NULL);
  funnel__inflight_init(&t->calls);
  t->stats.kernel_ns = -1;
  return t;
}

void funnel__table_hold_staged(struct funnel_table *t, void *ptr, int64_t size) {
  t->staged[t->n_staged++] = (struct funnel__staged){ptr, size};
}

static void release_staged(struct funnel_table *t) {
  for (int64_t i = 0; i < t->n_staged; i++)
    funnel__pool_free(&t->dev->pool, t->staged[i].ptr, t->staged[i].size);
  t->n_staged = 0;
}

void funnel__table_abandon(struct funnel_table *t) {
  t->scratch = t->seg_scratch = t->dp_scratch = t->zscratch = t->out = t->reserved = 0;
  t->guess_scratch = t->out_block = 0;
  t->n_staged = 0;
  t->decoded = (struct funnel__staged){NULL, 0};
}

/* The decoded images, once nothing reads them. */
static void release_decoded(struct funnel_table *t) {
  if (t->decoded.ptr == NULL) return;
  if (t->decoded_malloced) free(t->decoded.ptr);
  else funnel__pool_free(&t->dev->pool, t->decoded.ptr, t->decoded.size);
  t->decoded = (struct funnel__staged){NULL, 0};
}

/* Whether device address `at` lies in t->out_block (from its base to the
 * output, which lies last): an allocation made apart never does. */
static bool in_out_block(const struct funnel_table *t, uint64_t at) {
  return t->out_block != 0 && at >= t->out_block && at <= t->out;
}

/* Whether device address `at` is the room set aside after the
 * partitions' copies in scratch's allocation (t->reserved: by the early
 * copies, or by the device path when it made that allocation; scratch's
 * own address when the partitions have no copy there, read in place):
 * a handle there other than scratch itself goes with scratch, never
 * alone. */
static bool in_reserved(const struct funnel_table *t, uint64_t at) {
  return at != 0 && at == t->reserved;
}

/* Frees an input's allocation, unless it goes with the output or, for a
 * handle other than scratch, with scratch. */
static void free_input(struct funnel_table *t, uint64_t *at) {
  if (in_out_block(t, *at) || (at != &t->scratch && in_reserved(t, *at))) return;
  funnel__dev_free(&t->dev->be, *at, t->dev->stream);
  *at = 0;
}

/* Frees what holds the read's inputs on the device, once its work is over:
 * on the device's own stream (the read's may be gone with its reader). */
static void release_inputs(struct funnel_table *t) {
  free_input(t, &t->seg_scratch);
  free_input(t, &t->zscratch);
  free_input(t, &t->guess_scratch);
  free_input(t, &t->scratch);
  free_input(t, &t->dp_scratch);
  if (t->scratch == 0) {
    if (in_reserved(t, t->dp_scratch)) t->dp_scratch = 0; /* gone with scratch */
    t->reserved = 0;
  }
  release_staged(t);
  release_decoded(t);
}

void funnel__table_forget_out_room(struct funnel_table *t) {
  if (t->out_block == 0) return;
  if (t->dp_scratch != t->out_block && in_out_block(t, t->dp_scratch) &&
      !in_reserved(t, t->dp_scratch))
    t->dp_scratch = 0;
  if (in_out_block(t, t->zscratch)) t->zscratch = 0;
  t->out = 0;
  t->out_bytes = 0;
  t->out_block = 0;
}

static void release_out(struct funnel_table *t) {
  struct funnel_backend *be = &t->dev->be;
  if (t->out_block != 0) { /* the output and the inputs in its allocation go */
    funnel__dev_free(be, t->out_block, t->dev->stream);
    uint64_t *in[] = {&t->scratch, &t->dp_scratch, &t->zscratch, &t->reserved};
    for (size_t k = 0; k < sizeof(in) / sizeof(in[0]); k++)
      if (in_out_block(t, *in[k])) *in[k] = 0;
    t->out = t->out_block = 0;
    t->out_bytes = 0;
    return;
  }
  if (t->out_shared)
    funnel__dev_shared_free(be, t->out, (size_t)t->out_bytes, &t->out_handle);
  else
    funnel__dev_free(be, t->out, t->dev->stream);
  t->out = 0;
  t->out_bytes = 0;
  t->out_shared = false;
}

void funnel__table_drop_attempt(struct funnel_table *t, bool keep_early) {
  struct funnel_backend *be = &t->dev->be;
  /* the host path allocates its own output: the attempt's room in an
   * out_block stays, unused, until the allocation goes (as scratch, the
   * early copies', or dp_scratch, below) */
  funnel__table_forget_out_room(t);
  if (!in_reserved(t, t->dp_scratch)) funnel__dev_free(be, t->dp_scratch, t->dev->stream);
  funnel__dev_free(be, t->zscratch, t->dev->stream);
  t->dp_scratch = t->zscratch = 0;
  release_out(t);
  /* the host path times its own launch */
  funnel__dev_event_destroy(be, t->ev_start);
  funnel__dev_event_destroy(be, t->ev_end);
  t->ev_start = t->ev_end = NULL;
  release_staged(t);
  /* where the partitions are read from is the host path's to say */
  t->stats.staged_partitions = t->stats.bytes_staged = 0;
  t->stats.direct_partitions = t->stats.bytes_direct = 0;
  if (keep_early) return;
  funnel__dev_free(be, t->scratch, t->dev->stream);
  t->scratch = t->reserved = 0;
  t->early_in = NULL;
  t->early_base = 0;
}

static void table_release(struct funnel_table *t) {
  struct funnel_backend *be = &t->dev->be;
  if (t->event != NULL) {
    funnel__dev_event_wait(be, t->event, NULL);
    /* an imported table's is the exporter's, opened here: never another
     * read's (found in review) */
    if (t->import != NULL) funnel__dev_event_destroy(be, t->event);
    else funnel__dev_event_give(be, t->event);
  }
  funnel__dev_event_destroy(be, t->ev_start);
  funnel__dev_event_destroy(be, t->ev_end);
  funnel__dev_event_give(be, t->ev_sums);
  for (int j = 0; t->overlap_ev != NULL && j < t->n_overlap_ev; j++)
    funnel__dev_event_give(be, t->overlap_ev[j]);
  release_inputs(t);
  funnel__pinned_unhold(t);
  release_out(t);
  if (t->release_import != NULL) t->release_import(t);
  funnel__inflight_destroy(&t->calls);
  pthread_mutex_destroy(&t->mu);
  funnel__arena_free(&t->arena);
  funnel__shared_schema_unref(t->schema);
  funnel__shared_schema_unref(t->seen);
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

struct funnel_table *funnel__table_enter(struct funnel_table *t) {
  funnel__table_ref(t);
  funnel__inflight_enter(&t->calls);
  return t;
}

void funnel__table_leave(struct funnel_table *t) {
  funnel__inflight_leave(&t->calls);
  funnel__table_unref(t);
}

int64_t funnel__table_calls_in_flight(struct funnel_table *t) {
  return funnel__inflight_count(&t->calls);
}

/* Waits for the read's work, then lets go of what only the work needed:
 * its inputs on the device, the staging blocks, the caller blocks. */
static int wait_done(struct funnel_table *t, struct funnel_error *error) {
  pthread_mutex_lock(&t->mu);
  int st = FUNNEL_OK;
  if (!t->done) {
    struct funnel_backend *be = &t->dev->be;
    if (t->event != NULL) st = funnel__dev_event_wait(be, t->event, error);
    if (st == FUNNEL_OK && t->ev_end != NULL &&
        funnel__dev_event_elapsed_ns(be, t->ev_start, t->ev_end, &t->stats.kernel_ns, NULL) !=
            FUNNEL_OK)
      t->stats.kernel_ns = -1;
    if (st == FUNNEL_OK) {
      release_inputs(t);
      funnel__pinned_unhold(t);
      t->done = 1;
    }
  }
  pthread_mutex_unlock(&t->mu);
  return st;
}

funnel_status funnel_table_wait(struct funnel_table *t, struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(t != NULL, "funnel_table_wait: table is NULL");
  funnel__table_enter(t);
  const int st = wait_done(t, error);
  funnel__table_leave(t);
  return st;
}

int funnel_table_is_ready(struct funnel_table *t) {
  if (t == NULL) return 0;
  if (t->event == NULL) return 1; /* set by the read, fixed until the table is freed */
  funnel__table_enter(t);
  int done = 0;
  /* another thread may hold the lock for a whole wait: never block on it;
   * the event itself answers from any thread */
  if (pthread_mutex_trylock(&t->mu) == 0) {
    done = t->done;
    pthread_mutex_unlock(&t->mu);
  }
  if (!done && funnel__dev_event_query(&t->dev->be, t->event, &done, NULL) != FUNNEL_OK) done = 0;
  funnel__table_leave(t);
  return done;
}

int64_t funnel_table_num_rows(const struct funnel_table *t) { return t ? t->plan.rows : 0; }

int funnel_table_num_columns(const struct funnel_table *t) {
  return t ? t->plan.schema->n_fields : 0;
}

uint64_t funnel__table_buffer(const struct funnel_table *t, int c, enum funnel_buffer_kind kind,
                              int64_t *size) {
  const struct funnel__out_column *oc = &t->plan.columns[c];
  int64_t offset = oc->data, n = oc->data_size;
  if (kind == FUNNEL_BUFFER_VALIDITY) {
    offset = oc->validity;
    n = oc->validity_size;
  } else if (kind == FUNNEL_BUFFER_OFFSETS) {
    offset = oc->offsets;
    n = oc->offsets_size;
  }
  const uint64_t address = t->import_addr != NULL ? t->import_addr[3 * c + (int)kind]
                           : offset >= 0 && t->out != 0 ? t->out + (uint64_t)offset
                                                         : 0;
  *size = address != 0 ? n : 0;
  return address;
}

static struct funnel_buffer buffer_at(const struct funnel_table *t, int c,
                                      enum funnel_buffer_kind kind) {
  struct funnel_buffer b;
  b.address = funnel__table_buffer(t, c, kind, &b.size);
  return b;
}

funnel_status funnel_table_column(const struct funnel_table *t, int index,
                                  struct funnel_column *out, struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(t != NULL && out != NULL, "funnel_table_column: NULL argument");
  if (index < 0 || index >= t->plan.schema->n_fields)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "column %d out of range [0, %d)", index,
                      t->plan.schema->n_fields);
  const struct funnel__field *f = &t->plan.schema->fields[index];
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
  out->length = t->plan.columns[index].length;
  out->null_count = t->plan.columns[index].null_count;
  out->parent = f->parent;
  out->n_children = f->n_children;
  out->list_size = f->list_size;
  out->keys_sorted = f->keys_sorted;
  out->path = f->path;
  out->validity = buffer_at(t, index, FUNNEL_BUFFER_VALIDITY);
  out->offsets = buffer_at(t, index, FUNNEL_BUFFER_OFFSETS);
  out->data = buffer_at(t, index, FUNNEL_BUFFER_DATA);
  return FUNNEL_OK;
}

const void *funnel_table_schema_ipc(const struct funnel_table *t, size_t *length) {
  if (t == NULL) return NULL;
  if (length != NULL) *length = (size_t)t->plan.schema->ipc_length;
  return t->plan.schema->ipc;
}

funnel_status funnel_table_stats(const struct funnel_table *t, struct funnel_read_stats *out,
                                 struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(t != NULL && out != NULL, "funnel_table_stats: NULL argument");
  *out = t->stats;
  return FUNNEL_OK;
}

void funnel_table_free(struct funnel_table *t) {
  if (t == NULL) return;
  /* the caller may release the partitions on return, also when an export
   * keeps the table: its work must be over, and so must the calls other
   * threads are making on it (copies back above all) */
  funnel_table_wait(t, NULL);
  funnel__inflight_wait_idle(&t->calls);
  funnel__table_unref(t);
}
