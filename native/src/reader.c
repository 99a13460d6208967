/* reader.c: a reader (funnel.h, "reader"), and a read: its phases run in
 * order (read.h), each timed and its device calls counted for the stats. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "read.h"
#include "stream.h"

struct funnel_reader {
  struct funnel_device *dev;
  void *stream;
  /* the device path's parse while its partitions are copied (dread.c): a
   * second stream, made by the first read that parses so, shared by the
   * reads after it (their parts queue there as their copies queue on the
   * one copy engine) */
  _Atomic(void *) aux;
  /* ... and a read of compressed bodies' streams for its parts' decoding
   * (up to the device's zoverlap_parts; tuning.h), made alike as reads
   * need them */
  _Atomic(void *) zaux[FUNNEL__ZOVERLAP_MAX_PARTS];
  struct funnel__shared_schema *schema; /* NULL when not given */
  /* without one: the schema the first read by the device path found in
   * its first partition, set once; the next reads' first partitions,
   * which usually repeat its Schema message, are not parsed for it
   * (funnel__dpath_wanted) */
  _Atomic(struct funnel__shared_schema *) seen;
  struct funnel__read_options options;
  struct funnel__inflight reads; /* which funnel_reader_free waits for */
};

static _Atomic(funnel__read_hook_fn) read_hook;

void funnel__set_read_hook(funnel__read_hook_fn hook) { atomic_store(&read_hook, hook); }

static int parse_schema(const void *bytes, size_t length, struct funnel__shared_schema **out,
                        struct funnel_error *error) {
  struct funnel__shared_schema *s = calloc(1, sizeof(*s));
  if (s == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  atomic_init(&s->refs, 1);
  const int st = funnel__schema_parse(bytes, (int64_t)length, &s->arena, &s->schema, error);
  if (st != FUNNEL_OK) {
    funnel__shared_schema_unref(s);
    return st;
  }
  *out = s;
  return FUNNEL_OK;
}

funnel_status funnel_reader_create(struct funnel_device *dev, const void *schema,
                                   size_t schema_length, struct funnel_reader **out,
                                   struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(dev != NULL && out != NULL, "funnel_reader_create: dev and out must not be NULL");
  FUNNEL_CHECK_ARG(schema != NULL || schema_length == 0,
                   "funnel_reader_create: schema is NULL but its length is not 0");
  FUNNEL_CHECK_ARG(schema_length <= INT64_MAX, "funnel_reader_create: schema length too large");
  struct funnel_reader *r = calloc(1, sizeof(*r));
  if (r == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  r->dev = funnel__device_ref(dev);
  r->options.direct_max_bytes = dev->config.direct_max_bytes;
  r->options.parse = dev->config.parse;
  r->options.decode = dev->config.decode;
  funnel__inflight_init(&r->reads);
  int st = FUNNEL_OK;
  if (schema_length > 0) st = parse_schema(schema, schema_length, &r->schema, error);
  if (st == FUNNEL_OK) st = funnel__dev_stream_create(&dev->be, &r->stream, error);
  if (st != FUNNEL_OK) {
    funnel_reader_free(r);
    return st;
  }
  *out = r;
  return FUNNEL_OK;
}

void funnel_reader_free(struct funnel_reader *reader) {
  if (reader == NULL) return;
  /* the reads other threads are making enqueue on the stream */
  funnel__inflight_wait_idle(&reader->reads);
  /* completes the work queued on the stream: tables in flight stay valid */
  funnel__dev_stream_destroy(&reader->dev->be, reader->stream);
  funnel__dev_stream_destroy(&reader->dev->be, atomic_load(&reader->aux));
  for (int k = 0; k < FUNNEL__ZOVERLAP_MAX_PARTS; k++)
    funnel__dev_stream_destroy(&reader->dev->be, atomic_load(&reader->zaux[k]));
  funnel__shared_schema_unref(reader->schema);
  funnel__shared_schema_unref(atomic_load(&reader->seen));
  funnel__device_unref(reader->dev);
  funnel__inflight_destroy(&reader->reads);
  free(reader);
}

int64_t funnel__reader_reads_in_flight(struct funnel_reader *reader) {
  return funnel__inflight_count(&reader->reads);
}

static int check_flag(int64_t value, const char *option, struct funnel_error *error) {
  if (value == 0 || value == 1) return FUNNEL_OK;
  return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "%s: %lld is not 0 or 1", option,
                    (long long)value);
}

funnel_status funnel_reader_set_option(struct funnel_reader *reader, int option, int64_t value,
                                       struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(reader != NULL, "funnel_reader_set_option: reader is NULL");
  struct funnel__read_options *o = &reader->options;
  switch (option) {
    case FUNNEL_OPTION_TRANSFER:
      if (value != FUNNEL_TRANSFER_AUTO && value != FUNNEL_TRANSFER_COPY &&
          value != FUNNEL_TRANSFER_DIRECT)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "FUNNEL_OPTION_TRANSFER: %lld is not AUTO (0), COPY (1) or DIRECT (2)",
                          (long long)value);
      o->transfer = (int)value;
      return FUNNEL_OK;
    case FUNNEL_OPTION_TIME_KERNEL:
      FUNNEL_RETURN_NOT_OK(check_flag(value, "FUNNEL_OPTION_TIME_KERNEL", error));
      o->time_kernel = (int)value;
      return FUNNEL_OK;
    case FUNNEL_OPTION_SHAREABLE:
      FUNNEL_RETURN_NOT_OK(check_flag(value, "FUNNEL_OPTION_SHAREABLE", error));
      if (value == 1 && !funnel__dev_can_share(&reader->dev->be))
        return FUNNEL_ERR(error, FUNNEL_ERR_UNSUPPORTED, "the %s backend cannot share tables",
                          reader->dev->be.name);
      o->shareable = (int)value;
      return FUNNEL_OK;
    case FUNNEL_OPTION_DIRECT_MAX_BYTES:
      if (value < 0)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "FUNNEL_OPTION_DIRECT_MAX_BYTES: %lld is negative", (long long)value);
      o->direct_max_bytes = value;
      return FUNNEL_OK;
    case FUNNEL_OPTION_PARSE:
      if (value != FUNNEL_PARSE_AUTO && value != FUNNEL_PARSE_HOST && value != FUNNEL_PARSE_DEVICE)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "FUNNEL_OPTION_PARSE: %lld is not AUTO (0), HOST (1) or DEVICE (2)",
                          (long long)value);
      o->parse = (int)value;
      return FUNNEL_OK;
    case FUNNEL_OPTION_DECODE:
      if (value != FUNNEL_DECODE_AUTO && value != FUNNEL_DECODE_HOST && value != FUNNEL_DECODE_DEVICE)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "FUNNEL_OPTION_DECODE: %lld is not AUTO (0), HOST (1) or DEVICE (2)",
                          (long long)value);
      o->decode = (int)value;
      return FUNNEL_OK;
    default:
      return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                        "funnel_reader_set_option: unknown option %d", option);
  }
}

/* ------------------------------------------------------------------- read */

/* The clock and the device calls of this thread when a phase ended. */
struct mark {
  struct funnel__calls calls;
  int64_t ns;
};

static struct mark mark_now(void) { return (struct mark){funnel__calls_now(), funnel__now_ns()}; }

/* The stats of a read whose phases ended at `m`: early copies [0, 1),
 * parse [1, 2), plan [2, 3), submit [3, 4). */
static void count_stats(struct funnel_table *t, const struct mark m[5]) {
  struct funnel_read_stats *s = &t->stats;
  const struct funnel__plan *plan = &t->plan;
  const struct funnel__calls *c0 = &m[0].calls, *c4 = &m[4].calls;
  s->batches = plan->batches;
  s->rows = plan->rows;
  s->columns = plan->schema->n_fields;
  s->column_sets = m[4].calls.launches - m[3].calls.launches > 0 ? 1 : 0;
  /* the early copies are part of submitting, made before parsing */
  s->h2d_copies = c4->h2d_copies - c0->h2d_copies;
  s->bytes_h2d = c4->bytes_h2d - c0->bytes_h2d;
  s->concat_launches = c4->launches - c0->launches;
  s->device_allocs = c4->allocs - c0->allocs;
  s->pinned_allocs = c4->host_allocs - c0->host_allocs;
  s->syncs_in_read = c4->syncs - c0->syncs;
  s->device_calls_parse = m[2].calls.calls - m[1].calls.calls;
  s->device_calls_plan = m[3].calls.calls - m[2].calls.calls;
  s->device_calls_submit = (c4->calls - m[3].calls.calls) + (m[1].calls.calls - c0->calls);
  for (int c = 0; c < plan->schema->n_fields; c++)
    s->bytes_out += plan->columns[c].validity_size + plan->columns[c].offsets_size +
                    plan->columns[c].data_size;
  s->parse_ns = m[2].ns - m[1].ns;
  s->plan_ns = m[3].ns - m[2].ns;
  s->submit_ns = (m[4].ns - m[3].ns) + (m[1].ns - m[0].ns);
}

/* The reader's second stream, made the first time a read parses while it
 * copies; NULL when it cannot be made (the read then parses after its
 * copies). */
static void *reader_stream(struct funnel_reader *reader, _Atomic(void *) *slot) {
  struct funnel_backend *be = &reader->dev->be;
  void *aux = atomic_load(slot);
  if (aux != NULL) return aux;
  struct funnel_error e;
  if (funnel__dev_stream_create(be, &aux, &e) != FUNNEL_OK) return NULL;
  void *none = NULL;
  if (atomic_compare_exchange_strong(slot, &none, aux)) return aux;
  funnel__dev_stream_destroy(be, aux); /* another read made it first */
  return none;
}

static void *reader_aux(struct funnel_reader *reader) { return reader_stream(reader, &reader->aux); }

/* A read of compressed bodies that decodes while it copies in n parts: the
 * parse's stream and a decoding stream a part, all or none. */
static void reader_zaux(struct funnel_reader *reader, struct funnel_table *t, int n) {
  void *aux = reader_aux(reader);
  for (int k = 0; k < n; k++) {
    t->zaux[k] = aux != NULL ? reader_stream(reader, &reader->zaux[k]) : NULL;
    if (t->zaux[k] == NULL) {
      memset(t->zaux, 0, sizeof(t->zaux));
      return;
    }
  }
  t->n_zaux = n;
  t->aux = aux;
}

/* A read by the device path of a reader without a schema, which read
 * with `schema`: the table holds the reader's seen schema when that is
 * it (the table may outlive the reader), and the reader takes a copy of
 * it when it has seen none (one parse, its first read's). */
static void remember_schema(struct funnel_reader *reader, struct funnel_table *t,
                            struct funnel__shared_schema *seen,
                            const struct funnel__schema *schema) {
  if (seen != NULL) {
    if (schema == &seen->schema && t->seen == NULL) t->seen = funnel__shared_schema_ref(seen);
    return;
  }
  struct funnel__shared_schema *s = NULL;
  struct funnel_error e;
  if (parse_schema(schema->ipc, (size_t)schema->ipc_length, &s, &e) != FUNNEL_OK) return;
  struct funnel__shared_schema *none = NULL;
  if (!atomic_compare_exchange_strong(&reader->seen, &none, s)) funnel__shared_schema_unref(s);
}

/* What a read decides before it parses, from `scan` (a pass over the
 * partitions, or the guess of one): the caller's pinned blocks it holds
 * until its work is over, the codec of the first batch, the device path
 * (`on_device`: the schema it reads, else NULL), and the early copies. */
static int begin_read(struct funnel_table *t, struct funnel_reader *reader,
                      const struct funnel_partition *parts, size_t count,
                      const struct funnel__parts_scan *scan, const struct funnel__schema *schema,
                      void *stream, int *codec, bool *want,
                      const struct funnel__schema **on_device, struct funnel_error *error) {
  const struct funnel__read_options *o = &reader->options;
  int st = funnel__pinned_hold(t, parts, count, scan->bad ? 0 : scan->lo,
                               scan->bad ? 0 : scan->hi, error);
  /* the device path: everything enqueued, then the wait for the parse's
   * sums, and the plan from them; or, when the device leaves partitions
   * to the host, the host path after it. Chosen before the early copies,
   * whose allocation then holds the attempt's tables and output too.
   * Compressed partitions go up as they are by the device path (LZ4 and
   * ZSTD bodies, which it decodes); else the host path decodes them after
   * parsing, and they go up decoded: no early copies */
  *on_device = NULL;
  *codec = st == FUNNEL_OK ? funnel__first_codec(parts, count, scan) : FUNNEL__CODEC_NONE;
  const bool compressed = *codec != FUNNEL__CODEC_NONE;
  struct funnel__shared_schema *seen = atomic_load(&reader->seen);
  *want = st == FUNNEL_OK && funnel__dpath_wanted(t, o, parts, count, scan, *codec, schema,
                                                  seen != NULL ? &seen->schema : NULL, on_device);
  if (*want && schema == NULL) remember_schema(reader, t, seen, *on_device);
  /* a read of compressed bodies that decodes while it copies (its
   * partitions back to back in the pinned pool, which the early copies
   * then copy in parts; not DIRECT, which copies none early): its streams */
  const int zparts = *want && compressed && o->transfer != FUNNEL_TRANSFER_DIRECT
                         ? funnel__zoverlap_parts(t->dev, count, scan)
                         : 0;
  if (zparts > 0) reader_zaux(reader, t, zparts);
  /* the tables and output in the early copies' allocation: a plain read's,
   * or a small compressed one's that guesses it holds no frame */
  if (*want && (!compressed || (zparts == 0 && funnel__dpath_guess_raw(t->dev, *codec))))
    t->reserve = funnel__dpath_reserve(o, count, scan->bytes, compressed, *on_device);
  /* a read that may parse while it copies: the early copies say whether
   * it does (their span back to back in the pinned pool) */
  if (*want && !compressed && funnel__overlap_fits(t->dev, count, scan))
    t->aux = reader_aux(reader);
  if (st == FUNNEL_OK && (!compressed || *want))
    st = funnel__early_copies(t, parts, count, scan, o->transfer, stream, error);
  return st;
}

/* A read on `stream` (the backend's). */
static int read_partitions(struct funnel_reader *reader, const struct funnel_partition *parts,
                           size_t count, void *stream, struct funnel_table **out,
                           struct funnel_error *error) {
  struct funnel_table *t = funnel__table_new(reader->dev, error);
  if (t == NULL) return FUNNEL_ERR_HOST_OUT_OF_MEMORY;
  t->stats.partitions = (int64_t)count;
  t->schema = funnel__shared_schema_ref(reader->schema); /* the table may outlive the reader */
  const struct funnel__schema *schema = t->schema ? &t->schema->schema : NULL;
  const struct funnel__read_options *o = &reader->options;

  struct mark m[5];
  int64_t decode_calls = 0;
  m[0] = mark_now();
  /* one pass over the partitions before anything is done for each; but a
   * read of many partitions guesses the pass from its first and last
   * partitions, so that their copy goes up while the pass runs, and the
   * pass then says whether the guess held (transfer.c) */
  struct funnel__parts_scan scan, guess;
  const bool guessed = funnel__guess_scan(parts, count, &guess);
  if (!guessed) funnel__scan_parts(parts, count, &scan);
  const struct funnel__schema *on_device = NULL;
  struct funnel__dpath *d = NULL;
  int codec;
  bool want;
  int st = begin_read(t, reader, parts, count, guessed ? &guess : &scan, schema, stream, &codec,
                      &want, &on_device, error);
  if (guessed) {
    funnel__scan_parts(parts, count, &scan);
    /* they do not lie as their ends said: the copies go, and the read
     * begins again from the pass */
    if (st == FUNNEL_OK && !funnel__guess_held(&guess, &scan)) {
      st = funnel__drop_guess(t, error);
      if (st == FUNNEL_OK)
        st = begin_read(t, reader, parts, count, &scan, schema, stream, &codec, &want, &on_device,
                        error);
    }
  }
  t->stats.empty_partitions = scan.empty;
  if (!scan.bad && scan.first >= 0) {
    t->parts_lo = scan.lo;
    t->parts_hi = scan.hi;
    t->parts_aligned = scan.aligned;
  }
  m[1] = mark_now();
  if (want && st == FUNNEL_OK)
    st = funnel__dpath_parse(t, o, parts, count, scan.bytes, codec, on_device, stream, &d, error);
  if (d != NULL) {
    m[2] = mark_now();
    if (st == FUNNEL_OK) st = funnel__dpath_plan(t, d, error);
    m[3] = mark_now();
  } else {
    if (on_device != NULL) m[1] = mark_now(); /* the attempt counts as submitting */
    struct funnel__partition *pv = NULL;
    bool decode = false;
    if (st == FUNNEL_OK) st = funnel__parse_all(parts, count, schema, t, &pv, &decode, error);
    if (decode && st == FUNNEL_OK) {
      /* what decoding asks of the device counts as submitting's: dropping
       * early copies of compressed bytes, and the pinned pool (made the
       * first time a read needs it) the images go up from */
      const struct mark d0 = mark_now();
      st = funnel__drop_early(t, error);
      if (st == FUNNEL_OK) st = funnel__decode_all(t, pv, count, schema, o->decode, error);
      decode_calls = mark_now().calls.calls - d0.calls.calls;
    }
    m[2] = mark_now();
    if (st == FUNNEL_OK)
      st = funnel__plan_build(schema, pv, (int64_t)count, t->dev->config.segment_chunk_bytes,
                              &t->arena, &t->plan, error);
    if (st != FUNNEL_OK && decode) funnel__decoded_error(pv, (int64_t)count, error);
    m[3] = mark_now();
    if (st == FUNNEL_OK) st = funnel__submit(t, o, stream, error);
    /* while the copies run: a bad offset or null count fails the read, whose release
     * waits for what it enqueued before freeing anything */
    if (st == FUNNEL_OK) st = funnel__plan_check_pieces(&t->plan, error);
    if (st != FUNNEL_OK && decode) funnel__decoded_error(pv, (int64_t)count, error);
  }
  m[4] = mark_now();
  if (st != FUNNEL_OK) {
    funnel__table_unref(t);
    return st;
  }
  count_stats(t, m);
  t->stats.device_calls_parse -= decode_calls;
  t->stats.device_calls_submit += decode_calls;
  funnel__pinned_read_done(t);
  *out = t;
  return FUNNEL_OK;
}

funnel_status funnel_reader_read_async(struct funnel_reader *reader,
                                       const struct funnel_partition *parts, size_t count,
                                       uintptr_t stream, struct funnel_table **out,
                                       struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(reader != NULL && out != NULL,
                   "funnel_reader_read_async: reader and out must not be NULL");
  FUNNEL_CHECK_ARG(parts != NULL || count == 0, "funnel_reader_read_async: parts is NULL");
  funnel__inflight_enter(&reader->reads);
  struct funnel__stream *s = NULL;
  int st = stream != 0 ? funnel__stream_acquire(stream, reader->dev, &s, error) : FUNNEL_OK;
  const funnel__read_hook_fn hook = atomic_load_explicit(&read_hook, memory_order_relaxed);
  if (hook != NULL) hook();
  void *native = s != NULL ? funnel__stream_native(s) : reader->stream;
  if (st == FUNNEL_OK) st = read_partitions(reader, parts, count, native, out, error);
  funnel__stream_release(s);
  funnel__inflight_leave(&reader->reads);
  return st;
}
