/* submit.c: a read's last phase, the only one that allocates on the device:
 * the output and scratch allocations, the partitions' copies (transfer.c),
 * the segment table, the concat launch and the table's event. */
#include <stdlib.h>
#include <string.h>

#include "flatbuf.h"
#include "lz4dec.h"
#include "zstddec.h"
#include "read.h"

/* The segment table: in pinned memory when the pool has room, where the
 * kernel reads it when it reads the partitions there too or they went up
 * early; else it goes up with the partitions. */
struct segment_table {
  struct funnel__segment *host;
  int64_t bytes;
  bool pinned;        /* in the pinned pool */
  bool in_place;      /* the kernel reads it in pinned memory */
  int64_t scratch_at; /* its offset in scratch when it goes up with the partitions, or -1 */
  uint64_t device;    /* where the kernel reads it */
};

static int segment_table_host(struct funnel_table *t, struct segment_table *s,
                              struct funnel_error *error) {
  s->bytes = t->plan.max_segments * (int64_t)sizeof(struct funnel__segment);
  s->host = funnel__pool_alloc(&t->dev->pool, s->bytes);
  s->pinned = s->host != NULL;
  if (s->pinned) funnel__table_hold_staged(t, s->host, s->bytes);
  else s->host = funnel__arena_alloc(&t->arena, (size_t)s->bytes);
  if (s->host == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  return FUNNEL_OK;
}

/* Where the kernel reads the segment table, once the transfer is laid out. */
static void segment_table_place(struct funnel_table *t, struct funnel__transfer *tr,
                                struct segment_table *s) {
  s->in_place = s->pinned && (tr->direct || (tr->early && funnel__pool_device_address(
                                                              &t->dev->pool, s->host) != 0));
  s->scratch_at = -1;
  if (!s->in_place && !tr->early) {
    s->scratch_at = tr->scratch_size;
    tr->scratch_size += s->bytes;
  }
}

int funnel__alloc_out(struct funnel_table *t, const struct funnel__read_options *o, int64_t size,
                      void *stream, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  int st = FUNNEL_OK;
  if (size > 0 && o->shareable) {
    st = funnel__dev_shared_alloc(be, (size_t)size, &t->out, &t->out_handle, error);
    t->out_shared = st == FUNNEL_OK;
  } else if (size > 0) {
    st = funnel__dev_alloc(be, (size_t)size, stream, &t->out, error);
  }
  if (st == FUNNEL_OK) t->out_bytes = size;
  return st;
}

/* The output, the scratch the runs (and the segment table) go to, and
 * after early copies the segment table's own allocation. */
static int alloc_device(struct funnel_table *t, const struct funnel__read_options *o,
                        const struct funnel__transfer *tr, const struct segment_table *s,
                        void *stream, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  int st = funnel__alloc_out(t, o, t->plan.out_size, stream, error);
  if (st == FUNNEL_OK && tr->scratch_size > 0)
    st = funnel__dev_alloc(be, (size_t)tr->scratch_size, stream, &t->scratch, error);
  if (st == FUNNEL_OK && tr->early && !s->in_place)
    st = funnel__dev_alloc(be, (size_t)s->bytes, stream, &t->seg_scratch, error);
  return st;
}

/* The device decoder's jobs (t->dd), in the block, now that scratch's
 * address is known. */
static void write_dd_jobs(struct funnel_table *t) {
  struct funnel__lz4_job *jobs = t->dd.jobs;
  const uint64_t base = t->scratch + (uint64_t)t->dd.at;
  for (int64_t k = 0; k < t->dd.n; k++) {
    const int64_t *w = &t->dd.where[3 * k];
    const struct funnel__partition *part = &t->plan.parts[w[0]];
    const struct funnel__batch *b = &part->batches[w[1]];
    const int64_t off = (int64_t)funnel__ld64(b->sbuffers + 16 * w[2]);
    const int64_t n = (int64_t)funnel__ld64(b->sbuffers + 16 * w[2] + 8) - 8;
    const int64_t want = (int64_t)funnel__ld64(b->dbuffers + 16 * w[2] + 8);
    const uint64_t src = t->dd.in_source
                             ? t->scratch + (uint64_t)(t->dd.src_at[w[0]] + t->dd.src[k])
                             : base + (uint64_t)t->dd.src[k];
    const uint64_t dst = base + (uint64_t)t->dd.dst[k];
    struct funnel__lz4_job *out = &jobs[t->dd.first_job[k]];
    const int64_t cap = t->dd.first_job[k + 1] - t->dd.first_job[k];
    /* its blocks a job, as dd_layout counted them, or its frames whole */
    if (b->codec == FUNNEL__CODEC_LZ4_FRAME &&
        funnel__lz4_split(part->source + b->sbody + off + 8, n, want, src, dst, out, cap) == cap)
      continue;
    *out = (struct funnel__lz4_job){
        .src = src, .src_length = n, .dst = dst, .dst_length = want,
        .kind = b->codec == FUNNEL__CODEC_ZSTD ? FUNNEL__ZSTD_FRAMES : FUNNEL__LZ4_FRAMES,
        .status = -1};
  }
}

int funnel__dd_run(struct funnel_table *t, void *stream, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  const int64_t n_jobs = t->dd.first_job[t->dd.n];
  const uint64_t jobs = t->scratch + (uint64_t)(t->dd.at + t->dd.jobs_at);
  const size_t bytes = (size_t)n_jobs * sizeof(struct funnel__lz4_job);
  struct funnel__lz4_job *host = t->dd.jobs;
  /* one launch: the ZSTD decoder's runs LZ4 jobs too */
  const int stage = (t->dd.codecs & (1 << FUNNEL__CODEC_ZSTD)) ? FUNNEL_DP_STAGE_ZSTD
                                                                : FUNNEL_DP_STAGE_LZ4;
  int st = funnel__dev_launch_dpath(be, stage, jobs, n_jobs, 0, stream, error);
  if (st == FUNNEL_OK) st = funnel__dev_copy_d2h_async(be, host, jobs, bytes, stream, error);
  if (st == FUNNEL_OK && t->ev_sums == NULL) st = funnel__dev_event_take(be, &t->ev_sums, error);
  if (st == FUNNEL_OK) st = funnel__dev_event_record(be, t->ev_sums, stream, error);
  if (st == FUNNEL_OK) st = funnel__dev_event_wait(be, t->ev_sums, error);
  if (st != FUNNEL_OK) return st;
  /* a buffer any of whose jobs the device could not decode, the host
   * decodes: its error, or the bytes, sent up in place */
  struct funnel__decoder dec = {0};
  for (int64_t k = 0; k < t->dd.n && st == FUNNEL_OK; k++) {
    const int64_t *w = &t->dd.where[3 * k];
    const struct funnel__partition *part = &t->plan.parts[w[0]];
    const struct funnel__batch *b = &part->batches[w[1]];
    const int64_t want = (int64_t)funnel__ld64(b->dbuffers + 16 * w[2] + 8);
    bool ok = true;
    for (int64_t j = t->dd.first_job[k]; j < t->dd.first_job[k + 1]; j++)
      ok &= host[j].status == FUNNEL__LZ4_OK;
    if (ok) {
      t->stats.device_decoded++;
      t->stats.bytes_device_decoded += want;
      continue;
    }
    uint8_t *tmp = malloc((size_t)want);
    if (tmp == NULL) {
      st = FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
      break;
    }
    st = funnel__buffer_decode(t->plan.schema, part, b, w[0], (int32_t)w[2], tmp, &dec, error);
    const uint64_t at = t->scratch + (uint64_t)(t->dd.at + t->dd.dst[k]);
    if (st == FUNNEL_OK)
      st = funnel__dev_copy_h2d_async(be, at, tmp, (size_t)want, stream, error);
    if (st == FUNNEL_OK) st = funnel__dev_event_record(be, t->ev_sums, stream, error);
    if (st == FUNNEL_OK) st = funnel__dev_event_wait(be, t->ev_sums, error);
    free(tmp);
  }
  funnel__decoder_free(&dec);
  return st;
}

/* Writes the segment table, now that every address is known. */
static int write_segments(struct funnel_table *t, struct funnel__transfer *tr,
                          struct segment_table *s, struct funnel_error *error) {
  const struct funnel__plan *plan = &t->plan;
  if (t->dd.n > 0) write_dd_jobs(t);
  for (int64_t p = 0; p < plan->n_parts; p++)
    if (tr->in_scratch[p] >= 0) tr->in_base[p] = t->scratch + (uint64_t)tr->in_scratch[p];
  const int64_t n_segs = funnel__plan_segments(plan, tr->in_base, t->out, s->host);
  t->stats.segments = n_segs;
  if (n_segs > plan->max_segments)
    return FUNNEL_ERR(error, FUNNEL_ERR_LIMIT, "internal error: %lld segments, room for %lld",
                      (long long)n_segs, (long long)plan->max_segments);
  s->device = s->in_place ? funnel__pool_device_address(&t->dev->pool, s->host)
              : tr->early ? t->seg_scratch
                          : t->scratch + (uint64_t)s->scratch_at;
  return FUNNEL_OK;
}

/* The copies, the segment table's, the launch (between timing events when
 * asked), each noted in `w`. */
static int enqueue_all(struct funnel_table *t, const struct funnel__read_options *o,
                       struct funnel__transfer *tr, const struct segment_table *s,
                       struct funnel__work *w, struct funnel_error *error) {
  struct funnel_backend *be = w->be;
  int st = tr->early ? FUNNEL_OK : funnel__enqueue_transfer(t, tr, w, error);
  if (st == FUNNEL_OK && t->dd.n > 0) st = funnel__work_enqueued(w, funnel__dd_run(t, w->stream, error));
  if (st == FUNNEL_OK && !s->in_place)
    st = funnel__work_enqueued(w, funnel__dev_copy_h2d_async(be, s->device, s->host,
                                                             (size_t)s->bytes, w->stream, error));
  if (st == FUNNEL_OK && o->time_kernel) {
    st = funnel__dev_event_create_timed(be, &t->ev_start, error);
    if (st == FUNNEL_OK) st = funnel__dev_event_create_timed(be, &t->ev_end, error);
    if (st == FUNNEL_OK)
      st = funnel__work_enqueued(w, funnel__dev_event_record(be, t->ev_start, w->stream, error));
  }
  const int64_t n_segs = t->stats.segments;
  if (st == FUNNEL_OK)
    st = funnel__work_enqueued(w, funnel__dev_launch_concat(be, s->device, n_segs, w->stream,
                                                            error));
  if (st == FUNNEL_OK && t->ev_end != NULL)
    st = funnel__dev_event_record(be, t->ev_end, w->stream, error);
  return st;
}

int funnel__submit(struct funnel_table *t, const struct funnel__read_options *o, void *stream,
                   struct funnel_error *error) {
  /* written as blocks are taken (t->n_staged), so not cleared */
  t->staged = funnel__arena_alloc(&t->arena, ((size_t)t->plan.n_parts + 2) * sizeof(*t->staged));
  if (t->staged == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  if (t->plan.max_segments == 0) return FUNNEL_OK; /* no columns: nothing to run */
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, &t->dev->be, stream, &t->event, error));
  w.enqueued = funnel__early(t); /* the early copies are in flight */
  struct funnel__transfer tr = {0};
  struct segment_table s = {0};
  int st = segment_table_host(t, &s, error);
  if (st == FUNNEL_OK) st = funnel__layout_transfer(t, o, &tr, error);
  if (st == FUNNEL_OK) segment_table_place(t, &tr, &s);
  if (st == FUNNEL_OK) st = alloc_device(t, o, &tr, &s, stream, error);
  if (st == FUNNEL_OK) st = write_segments(t, &tr, &s, error);
  if (st == FUNNEL_OK) st = enqueue_all(t, o, &tr, &s, &w, error);
  bool abandoned;
  st = funnel__work_finish(&w, st, false, &abandoned, error);
  if (abandoned) funnel__table_abandon(t);
  return st;
}
