/* transfer.c: how a read's partition bytes reach the device: runs of
 * partitions back to back in pinned memory go up in one copy each,
 * pageable partitions are staged into the pinned pool by the host threads
 * in rounds (each round's bytes go up while the next is staged), small
 * pinned reads are read in place by the kernel, and reads of pinned
 * partitions only are copied before they are parsed (read.h). */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string.h>

#include "dpath.h"
#include "read.h"
#include "workers.h"

#define OUT_OF_MEMORY(error) FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory")

/* Lays partition bytes [src, src + len) out in the scratch allocation:
 * into the last run when both are pinned, `src` follows it within
 * FUNNEL__MERGE_GAP and the caller allows it (`may_merge`), else as a new
 * run. Returns the bytes' offset in scratch; *scratch is the size laid out. */
static int64_t add_run(struct funnel__run *runs, int64_t *nr, int64_t *scratch,
                       const uint8_t *src, int64_t len, bool pinned, bool may_merge) {
  struct funnel__run *last = *nr > 0 ? &runs[*nr - 1] : NULL;
  if (last != NULL && may_merge && last->pinned && pinned && src >= last->src + last->length &&
      src - (last->src + last->length) < FUNNEL__MERGE_GAP) {
    /* the gap is pool memory too, of the blocks both partitions lie in */
    last->length = src + len - last->src;
    *scratch = funnel__align_up(last->scratch + last->length, FUNNEL__ALIGN);
    return last->scratch + (src - last->src);
  }
  runs[(*nr)++] = (struct funnel__run){src, len, *scratch, pinned};
  const int64_t at = *scratch;
  *scratch = funnel__align_up(at + len, FUNNEL__ALIGN);
  return at;
}

/* ----------------------------------------------------------- early copies */

/* The pass over partitions [from, to): as funnel__scan_parts, and where
 * the first non-empty one starts and the last ends (*first_at, *end), to
 * join it to the pass over the partitions before. */
static void scan_range(const struct funnel_partition *parts, size_t from, size_t to,
                       struct funnel__parts_scan *out, uintptr_t *first_at, uintptr_t *last_end) {
  struct funnel__parts_scan s = {.first = -1, .back_to_back = true};
  uintptr_t end = 0; /* of the partition before */
  for (size_t i = from; i < to; i++) {
    const uintptr_t at = (uintptr_t)parts[i].data;
    const size_t len = parts[i].length;
    if (len == 0) {
      s.empty++;
      continue;
    }
    if (at == 0 || len > (size_t)(INT64_MAX / 2) - (size_t)s.bytes || len > UINTPTR_MAX - at) {
      s.bad = true;
      continue;
    }
    s.bytes += (int64_t)len;
    s.aligned += funnel__align_up((int64_t)len, FUNNEL__ALIGN);
    if (s.first < 0) {
      s.first = (int64_t)i;
      s.lo = at;
      s.hi = at + len;
    } else {
      s.back_to_back &= at >= end && at - end < (uintptr_t)FUNNEL__MERGE_GAP;
      s.lo = at < s.lo ? at : s.lo;
      s.hi = at + len > s.hi ? at + len : s.hi;
    }
    end = at + len;
  }
  *first_at = s.first >= 0 ? (uintptr_t)parts[s.first].data : 0;
  *last_end = end;
  *out = s;
}

/* A pass over many partitions runs in parts on the host threads, each
 * part a range of them (workers.h, funnel__pass_parts). */
struct scan_job {
  const struct funnel_partition *parts;
  size_t count;
  int64_t n;
  struct funnel__parts_scan *s;
  uintptr_t *first_at, *last_end;
};

static void scan_task(void *ctx, int64_t i) {
  const struct scan_job *j = ctx;
  scan_range(j->parts, funnel__pass_from(j->count, j->n, i), funnel__pass_from(j->count, j->n, i + 1),
             &j->s[i], &j->first_at[i], &j->last_end[i]);
}

void funnel__scan_parts(const struct funnel_partition *parts, size_t count,
                        struct funnel__parts_scan *out) {
  uintptr_t first_at, end;
  const int64_t n = funnel__pass_parts(count);
  if (n <= 1) {
    scan_range(parts, 0, count, out, &first_at, &end);
    return;
  }
  struct funnel__parts_scan s[FUNNEL__PASS_PARTS_MAX];
  uintptr_t at[FUNNEL__PASS_PARTS_MAX], ends[FUNNEL__PASS_PARTS_MAX];
  struct scan_job j = {parts, count, n, s, at, ends};
  funnel__parallel_for(n, scan_task, &j);
  /* the parts joined in order, as one pass would have seen them */
  struct funnel__parts_scan all = s[0];
  end = ends[0];
  for (int64_t i = 1; i < n; i++) {
    const struct funnel__parts_scan *p = &s[i];
    all.empty += p->empty;
    all.bad |= p->bad;
    if (p->first < 0) continue;
    if (p->bytes > INT64_MAX / 2 - all.bytes) all.bad = true;
    all.bytes += p->bytes;
    all.aligned += p->aligned;
    if (all.first < 0) {
      all.first = p->first;
      all.lo = p->lo;
      all.hi = p->hi;
      all.back_to_back = p->back_to_back;
    } else {
      all.back_to_back &= p->back_to_back && at[i] >= end &&
                          at[i] - end < (uintptr_t)FUNNEL__MERGE_GAP;
      all.lo = p->lo < all.lo ? p->lo : all.lo;
      all.hi = p->hi > all.hi ? p->hi : all.hi;
    }
    end = ends[i];
  }
  *out = all;
}

bool funnel__guess_scan(const struct funnel_partition *parts, size_t count,
                        struct funnel__parts_scan *out) {
  if (count < FUNNEL__GUESS_MIN_PARTS) return false;
  size_t f = 0, l = count - 1;
  while (f < 64 && parts[f].length == 0) f++;
  while (count - l <= 64 && parts[l].length == 0) l--;
  const uintptr_t lo = (uintptr_t)parts[f].data, at = (uintptr_t)parts[l].data;
  const size_t len = parts[l].length;
  if (parts[f].length == 0 || len == 0 || f >= l || lo == 0 || at < lo ||
      len > UINTPTR_MAX - at || at + len - lo > (uintptr_t)(INT64_MAX / 2))
    return false;
  /* a few pairs of neighbours on the way must follow each other, in
   * order, inside the span: partitions that lie apart (a block each, or
   * gaps) send the read to the pass at once, and their span, mostly gaps,
   * is not copied for nothing */
  uintptr_t before = lo;
  for (size_t k = 1; k <= FUNNEL__GUESS_SAMPLES; k++) {
    const size_t p = f + (l - f) * k / (FUNNEL__GUESS_SAMPLES + 1);
    if (p + 1 > l || parts[p].length == 0 || parts[p + 1].length == 0) continue;
    const uintptr_t a = (uintptr_t)parts[p].data, b = (uintptr_t)parts[p + 1].data;
    const size_t n = parts[p].length;
    const uintptr_t gap = (uintptr_t)FUNNEL__MERGE_GAP;
    if (a < before || n > at + len - a || b < a + n || b - (a + n) >= gap ||
        parts[p + 1].length > at + len - b)
      return false;
    before = b;
  }
  *out = (struct funnel__parts_scan){.bytes = (int64_t)(at + len - lo), .first = (int64_t)f,
                                     .lo = lo, .hi = at + len, .back_to_back = true};
  return true;
}

bool funnel__guess_held(const struct funnel__parts_scan *guess,
                        const struct funnel__parts_scan *scan) {
  return !scan->bad && scan->back_to_back && scan->first == guess->first &&
         scan->lo == guess->lo && scan->hi == guess->hi;
}

int funnel__drop_guess(struct funnel_table *t, struct funnel_error *error) {
  (void)error;
  /* the copies may still run: their memory goes with the read's inputs,
   * once its work is over (a wait here would cost the read a sync) */
  t->guess_scratch = t->scratch;
  t->scratch = t->reserved = 0;
  t->early_in = NULL;
  t->early_base = 0;
  t->reserve = 0;
  t->aux = NULL;
  memset(t->zaux, 0, sizeof(t->zaux));
  t->n_zaux = 0;
  t->n_overlap = t->n_overlap_ev = 0;
  t->overlap_part = t->overlap_byte = NULL;
  t->overlap_ev = NULL; /* none taken: the device path takes them */
  return FUNNEL_OK;
}

/* Whether the partitions lie as early_mirror copies them (funnel__early_copies):
 * back to back in the pinned pool, one copy of their span. A read of
 * compressed bodies decodes in parts only then (a pageable one is staged,
 * not copied in parts), so otherwise the streams funnel__zoverlap_parts
 * counts for it would be made, and kept by the reader, for nothing. */
static bool mirrored(struct funnel_device *dev, const struct funnel__parts_scan *scan) {
  return !scan->bad && scan->first >= 0 && scan->back_to_back &&
         funnel__span_contains(funnel__pool_span(&dev->pool), (const void *)scan->lo,
                               (int64_t)(scan->hi - scan->lo));
}

bool funnel__stages_all(struct funnel_device *dev, const struct funnel_partition *parts,
                        size_t count, const struct funnel__parts_scan *scan) {
  if (!dev->config.stage_pageable || scan->bad || scan->first < 0) return false;
  const struct funnel__pool_span span = funnel__pool_span(&dev->pool);
  /* a pool not yet made (on its first use) will be of the configured size */
  const int64_t room = span.base != NULL ? span.size : dev->config.pinned_pool_bytes;
  /* a guess (funnel__guess_scan) counts no aligned bytes: its span, back to back */
  const int64_t staged = scan->aligned > 0 ? scan->aligned : (int64_t)(scan->hi - scan->lo);
  if (staged > room) return false;
  const uintptr_t base = (uintptr_t)span.base, end = base + (uintptr_t)span.size;
  if (span.base == NULL || scan->hi <= base || scan->lo >= end) return true;
  /* partitions on both sides of the pool (malloc puts them where it will):
   * each of them outside it */
  for (size_t p = 0; p < count; p++)
    if (parts[p].length > 0 && funnel__span_contains(span, parts[p].data, 1)) return false;
  return true;
}

bool funnel__overlap_fits(const struct funnel_device *dev, size_t count,
                          const struct funnel__parts_scan *scan) {
  const struct funnel__config *c = &dev->config;
  const int64_t n = (int64_t)count;
  /* never a read of a block's partitions or fewer, whatever the config:
   * parsed in one launch, which scans them too, it has nothing to split */
  return dev->be.stream_wait != NULL && !scan->bad && n >= c->overlap_min_parts &&
         n > FUNNEL__DPATH_THREADS && (int64_t)(scan->hi - scan->lo) >= c->overlap_min_bytes;
}

/* Where the parts of a read of n partitions begin, `pieces` of them asked
 * (plan_overlap): part[0] = 0, then rising, part[m] = n; returns m, the
 * parts (part NULL: only counts them). A read that decodes while it
 * copies (z) goes in about equal parts, others in half, then `pieces`
 * pieces of the rest; each part from a multiple of the parse's tile (the
 * parse sums a tile a block), so a read of few partitions has fewer parts
 * than asked. */
static int overlap_bounds(int64_t n, bool z, int64_t pieces, int64_t *part) {
  const int64_t tile = FUNNEL__DPATH_THREADS / funnel__dp_parse_lanes(n);
  int m = 0;
  int64_t last = 0;
  if (part != NULL) part[0] = 0;
  for (int64_t j = z ? 1 : 0; j < pieces; j++) {
    const int64_t p = (z ? n * j / pieces : n / 2 + (n - n / 2) * j / pieces) / tile * tile;
    if (p <= last) continue;
    last = p;
    if (part != NULL) part[m + 1] = p;
    m++;
  }
  if (part != NULL) part[m + 1] = n;
  return m + 1;
}

int funnel__zoverlap_parts(struct funnel_device *dev, size_t count,
                           const struct funnel__parts_scan *scan) {
  if (dev->be.stream_wait == NULL || count < 2 ||
      (int64_t)(scan->hi - scan->lo) < dev->config.zoverlap_min_bytes || !mirrored(dev, scan))
    return 0;
  const int m = overlap_bounds((int64_t)count, true, dev->config.zoverlap_parts, NULL);
  return m >= 2 ? m : 0;
}

/* The parts of a read of the device path that it parses while the rest
 * is copied (table.h, t->n_overlap; tuning.h, FUNNEL__OVERLAP_*), when the
 * read has a second stream for it (t->aux, given when
 * funnel__overlap_fits): the first half of the partitions, then
 * OVERLAP_PIECES pieces of the rest, each part from a multiple of the
 * parse's tile (the parse sums a tile a block); a read of compressed
 * bodies that decodes while it copies (t->zaux), FUNNEL_ZOVERLAP_PARTS
 * parts of about as many partitions each, or fewer (overlap_bounds), a
 * stream of t->zaux each. A part's bytes start where
 * its first non-empty partition's do (their addresses rise: the span is
 * back to back), the first part's at 0, and the last part's end at the
 * span's. */
static int plan_overlap(struct funnel_table *t, const struct funnel_partition *parts,
                        size_t count, const struct funnel__parts_scan *scan,
                        struct funnel_error *error) {
  if (t->aux == NULL) return FUNNEL_OK; /* funnel__overlap_fits said no */
  const int64_t n = (int64_t)count, size = (int64_t)(scan->hi - scan->lo);
  const bool z = t->n_zaux > 0;
  const int64_t pieces = z ? t->dev->config.zoverlap_parts : FUNNEL__OVERLAP_PIECES;
  /* a part's bytes, then its end and the join of the stream its parse
   * runs on; a decoding read's, also each part's parse, and the join of
   * each of its decoding streams (dread.c) */
  const int64_t n_ev = z ? 3 * pieces + 1 : pieces + 2;
  int64_t *part = funnel__arena_alloc(&t->arena, (size_t)(pieces + 2) * sizeof(int64_t));
  int64_t *byte = funnel__arena_alloc(&t->arena, (size_t)(pieces + 2) * sizeof(int64_t));
  void **ev = funnel__arena_calloc(&t->arena, (size_t)n_ev, sizeof(void *));
  if (part == NULL || byte == NULL || ev == NULL) return OUT_OF_MEMORY(error);
  const int m = overlap_bounds(n, z, pieces, part);
  /* a decoding read's parts a stream each, as many as funnel__zoverlap_parts counted */
  if (m < 2 || (z && m != t->n_zaux)) return FUNNEL_OK;
  byte[0] = 0;
  byte[m] = size;
  for (int j = 1; j < m; j++) {
    int64_t p = part[j];
    while (p < n && parts[p].length == 0) p++;
    byte[j] = p < n ? (int64_t)((uintptr_t)parts[p].data - scan->lo) : size;
  }
  t->n_overlap = m;
  t->n_overlap_ev = (int)n_ev;
  t->overlap_part = part;
  t->overlap_byte = byte;
  t->overlap_ev = ev;
  return FUNNEL_OK;
}

/* One copy of the range the partitions span, when they lie back to back in
 * the pinned pool: a partition's bytes then lie in scratch where add_run
 * would have put them (data - lo), so nothing is written per partition.
 * When the parse overlaps the copy (plan_overlap), only its first part's
 * bytes go up here; the device path copies the rest (dread.c). */
static int early_mirror(struct funnel_table *t, const struct funnel_partition *parts,
                        size_t count, const struct funnel__parts_scan *scan, void *stream,
                        struct funnel_error *error) {
  FUNNEL_RETURN_NOT_OK(plan_overlap(t, parts, count, scan, error));
  struct funnel_backend *be = &t->dev->be;
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, be, stream, &t->event, error));
  const size_t size = (size_t)(scan->hi - scan->lo);
  /* the concat's aligned words may reach past the last byte, not past this */
  const int64_t room = funnel__align_up((int64_t)size, FUNNEL__ALIGN);
  int st = funnel__dev_alloc(be, (size_t)(room + t->reserve), stream, &t->scratch, error);
  if (st == FUNNEL_OK && t->reserve > 0) t->reserved = t->scratch + (uint64_t)room;
  const size_t first = t->n_overlap > 0 ? (size_t)t->overlap_byte[1] : size;
  if (st == FUNNEL_OK && first > 0)
    st = funnel__work_enqueued(
        &w, funnel__dev_copy_h2d_async(be, t->scratch, (const void *)scan->lo, first, stream,
                                       error));
  bool abandoned;
  st = funnel__work_finish(&w, st, false, &abandoned, error);
  if (abandoned) funnel__table_abandon(t);
  if (st == FUNNEL_OK) t->early_base = scan->lo;
  return st;
}

int funnel__early_copies(struct funnel_table *t, const struct funnel_partition *parts,
                         size_t count, const struct funnel__parts_scan *scan, int transfer,
                         void *stream, struct funnel_error *error) {
  if (transfer == FUNNEL_TRANSFER_DIRECT || scan->first < 0 || scan->bad) return FUNNEL_OK;
  const struct funnel__pool_span span = funnel__pool_span(&t->dev->pool);
  /* a read whose first partition is pageable allocates nothing here */
  const size_t first = (size_t)scan->first;
  if (!funnel__span_contains(span, parts[first].data, (int64_t)parts[first].length))
    return FUNNEL_OK;
  if (mirrored(t->dev, scan)) return early_mirror(t, parts, count, scan, stream, error);
  int64_t *in = funnel__arena_alloc(&t->arena, count * sizeof(int64_t));
  struct funnel__run *runs = funnel__arena_alloc(&t->arena, count * sizeof(*runs));
  if (in == NULL || runs == NULL) return OUT_OF_MEMORY(error);
  /* one pass: every non-empty partition in the pinned pool, laid out */
  int64_t nr = 0, scratch = 0;
  for (size_t i = 0; i < count; i++) {
    const struct funnel_partition *p = &parts[i];
    if (p->length == 0) {
      in[i] = -1;
      continue;
    }
    if (p->data == NULL || p->length > INT64_MAX ||
        !funnel__span_contains(span, p->data, (int64_t)p->length))
      return FUNNEL_OK; /* not all pinned: the transfer's layout decides */
    in[i] = add_run(runs, &nr, &scratch, p->data, (int64_t)p->length, true, true);
  }
  if (nr == 0) return FUNNEL_OK;
  struct funnel_backend *be = &t->dev->be;
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, be, stream, &t->event, error));
  const int64_t room = funnel__align_up(scratch, FUNNEL__ALIGN);
  int st = funnel__dev_alloc(be, (size_t)(room + t->reserve), stream, &t->scratch, error);
  if (st == FUNNEL_OK && t->reserve > 0) t->reserved = t->scratch + (uint64_t)room;
  for (int64_t r = 0; r < nr && st == FUNNEL_OK; r++)
    st = funnel__work_enqueued(
        &w, funnel__dev_copy_h2d_async(be, t->scratch + (uint64_t)runs[r].scratch, runs[r].src,
                                       (size_t)runs[r].length, stream, error));
  bool abandoned;
  st = funnel__work_finish(&w, st, false, &abandoned, error);
  if (abandoned) funnel__table_abandon(t);
  if (st == FUNNEL_OK) t->early_in = in;
  return st;
}

int funnel__drop_early(struct funnel_table *t, struct funnel_error *error) {
  if (!funnel__early(t)) return FUNNEL_OK;
  const int st = funnel__dev_event_wait(&t->dev->be, t->event, error);
  if (st != FUNNEL_OK) {
    funnel__table_abandon(t);
    return st;
  }
  funnel__table_drop_attempt(t, false);
  return FUNNEL_OK;
}

/* ---------------------------------------------------------------- staging */

/* memcpy with stores that bypass the cache where the processor has them
 * (x86-64): staged bytes are read next by the copy engine, not by this
 * thread, and a cached store first reads the line it writes, a third of the
 * memory traffic of a copy. The caller fences (stream_fence) before the
 * bytes are copied on. */
static void stream_copy(uint8_t *dst, const uint8_t *src, size_t n) {
#if defined(__SSE2__)
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > n) head = n;
  memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
    const __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    const __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
    const __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, n - i);
#else
  memcpy(dst, src, n);
#endif
}

static void stream_fence(void) {
#if defined(__SSE2__)
  _mm_sfence(); /* the streamed stores are visible before the copy is enqueued */
#endif
}

/* The staging copy that holds byte `pos` of the copies taken one after
 * the other. */
static const struct funnel__stage_copy *copy_of_byte(const struct funnel__stage_plan *sp,
                                                     int64_t pos) {
  int64_t lo = 0, hi = sp->n - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (sp->copies[mid].first_byte <= pos) lo = mid; else hi = mid - 1;
  }
  return &sp->copies[lo];
}

static void stage_task(void *ctx, int64_t i) {
  const struct funnel__stage_plan *sp = ctx;
  int64_t pos = (sp->first + i) * sp->task_bytes;
  const int64_t end = pos + sp->task_bytes < sp->bytes ? pos + sp->task_bytes : sp->bytes;
  for (const struct funnel__stage_copy *c = copy_of_byte(sp, pos); pos < end; c++) {
    const int64_t at = pos - c->first_byte;
    const int64_t len = c->length - at < end - pos ? c->length - at : end - pos;
    stream_copy(c->dst + at, c->src + at, (size_t)len);
    pos += len;
  }
  stream_fence();
}

/* Runs tasks [sp->first, sp->first + n): on the host threads, or on the
 * calling thread when the read stages too few bytes to pay for waking
 * them (FUNNEL__STAGE_INLINE_BYTES). */
static void stage_tasks(const struct funnel__stage_plan *sp, int64_t n) {
  if (sp->bytes > FUNNEL__STAGE_INLINE_BYTES) {
    funnel__parallel_for(n, stage_task, (void *)sp);
    return;
  }
  for (int64_t i = 0; i < n; i++) stage_task((void *)sp, i);
}

void funnel__stage_bytes(uint8_t *dst, const uint8_t *src, int64_t n) {
  if (n <= 0) return;
  struct funnel__stage_copy c = {.dst = dst, .src = src, .length = n, .first_byte = 0};
  const int64_t task = FUNNEL__STAGE_TASK;
  const struct funnel__stage_plan sp = {.copies = &c, .n = 1, .bytes = n,
                                        .tasks = (n + task - 1) / task, .task_bytes = task};
  stage_tasks(&sp, sp.tasks);
}

/* The end, in the staging block, of the bytes that tasks [0, end_task)
 * have written (the gaps between partitions come along in the copies). */
static const uint8_t *staged_upto(const struct funnel__stage_plan *sp, int64_t end_task) {
  if (end_task >= sp->tasks) return sp->block + sp->block_size;
  const int64_t pos = end_task * sp->task_bytes;
  const struct funnel__stage_copy *c = copy_of_byte(sp, pos);
  return c->dst + (pos - c->first_byte);
}

/* ----------------------------------------------------------------- layout */

/* A layout in the making. */
struct layout {
  struct funnel_table *t;
  struct funnel__transfer *tr;
  uint8_t *stage;        /* the staging block, or NULL */
  int64_t stage_bytes;   /* its size */
};

/* Partition p's bytes: the caller's on the device path (plan->raw), else
 * the parsed partition's. */
static const uint8_t *part_bytes(const struct funnel__plan *plan, int64_t p) {
  return plan->raw != NULL ? plan->raw[p].data : plan->parts[p].bytes;
}
static int64_t part_length(const struct funnel__plan *plan, int64_t p) {
  return plan->raw != NULL ? (int64_t)plan->raw[p].length : plan->parts[p].length;
}

/* Whether partition p goes to the device: when it has rows, or on the
 * device path when it has bytes (the device parses them). */
static bool carried(const struct funnel__plan *plan, int64_t p) {
  return plan->raw != NULL ? plan->raw[p].length > 0 : plan->parts[p].rows > 0;
}

/* Whether partition p's image lies in the block of a read the device
 * decodes part of, which goes up as one run (t->dd). */
static bool in_dd_block(const struct funnel_table *t, int64_t p) {
  return t->dd.n > 0 && t->plan.raw == NULL && t->plan.parts[p].decoded;
}

/* Which partitions lie in the pinned pool; the bytes of the others, as
 * staging lays them out. */
static bool *find_pinned(struct funnel_table *t, int64_t *pinned_bytes, int64_t *stage_bytes) {
  const struct funnel__plan *plan = &t->plan;
  const int64_t n = plan->n_parts;
  bool *pinned = funnel__arena_calloc(&t->arena, (size_t)(n ? n : 1), sizeof(bool));
  if (pinned == NULL) return NULL;
  *pinned_bytes = *stage_bytes = 0;
  const struct funnel__pool_span span = funnel__pool_span(&t->dev->pool);
  /* the device path's partitions (the caller's) all outside the pool, as
   * the pass over them says: all pageable, and no second pass (50,000
   * partitions took 0.1 to 0.17 ms through the loop below on the H100 host) */
  const uintptr_t base = (uintptr_t)span.base;
  if (plan->raw != NULL && t->parts_hi > t->parts_lo &&
      (span.base == NULL || t->parts_hi <= base || t->parts_lo >= base + (uintptr_t)span.size)) {
    *stage_bytes = t->parts_aligned;
    return pinned;
  }
  for (int64_t p = 0; p < n; p++) {
    if (!carried(plan, p) || in_dd_block(t, p)) continue;
    const int64_t len = part_length(plan, p);
    pinned[p] = funnel__span_contains(span, part_bytes(plan, p), len);
    if (pinned[p]) *pinned_bytes += len;
    else *stage_bytes += funnel__align_up(len, FUNNEL__ALIGN);
  }
  return pinned;
}

/* Where pageable bytes of `len` go: the staging block, else a pool block
 * of their own (held by the table), else NULL: the driver stages them. */
static uint8_t *stage_target(struct layout *l, int64_t len) {
  struct funnel__stage_plan *sp = &l->tr->staging;
  if (l->stage != NULL) {
    uint8_t *to = l->stage + sp->block_size;
    sp->block_size += funnel__align_up(len, FUNNEL__ALIGN);
    return to;
  }
  uint8_t *to = funnel__pool_alloc(&l->t->dev->pool, len);
  if (to != NULL) funnel__table_hold_staged(l->t, to, len);
  return to;
}

static bool in_stage_block(const struct layout *l, const uint8_t *p) {
  return l->stage != NULL && p >= l->stage && p < l->stage + l->stage_bytes;
}

/* Lays out partition p: read in place, or staged, and copied in a run. */
static void place(struct layout *l, int64_t p, bool pinned) {
  struct funnel_table *t = l->t;
  struct funnel__transfer *tr = l->tr;
  const uint8_t *src = part_bytes(&t->plan, p);
  const int64_t len = part_length(&t->plan, p);
  if (pinned && tr->direct) {
    tr->in_base[p] = funnel__pool_device_address(&t->dev->pool, src);
    t->stats.direct_partitions++;
    t->stats.bytes_direct += len;
    return;
  }
  uint8_t *to = !pinned && t->dev->config.stage_pageable ? stage_target(l, len) : NULL;
  if (to != NULL) {
    struct funnel__stage_plan *sp = &tr->staging;
    sp->copies[sp->n++] = (struct funnel__stage_copy){to, src, len, sp->bytes};
    sp->bytes += len;
    sp->tasks = (sp->bytes + sp->task_bytes - 1) / sp->task_bytes;
    t->stats.staged_partitions++;
    t->stats.bytes_staged += len;
    src = to;
    pinned = true;
  }
  /* a run lies wholly inside the staging block or wholly outside it:
   * enqueue_runs copies those outside at once, before the block is
   * staged, and those inside round by round as the block fills */
  const struct funnel__run *last = tr->n_runs > 0 ? &tr->runs[tr->n_runs - 1] : NULL;
  /* ... and never grows the decoded block's run into the region after it */
  const bool may_merge =
      last == NULL || (in_stage_block(l, src) == in_stage_block(l, last->src) &&
                       !(t->dd.n > 0 && last->src == (const uint8_t *)t->decoded.ptr));
  tr->in_scratch[p] =
      add_run(tr->runs, &tr->n_runs, &tr->scratch_size, src, len, pinned, may_merge);
}

/* stage_all's pass, in parts (workers.h): each part's copies, bytes and
 * bytes laid out counted first, then, from where the parts before it
 * end, its partitions placed. */
struct stage_all_job {
  struct funnel_table *t;
  struct funnel__transfer *tr;
  int64_t parts, base;
  /* a part's copies, bytes and block bytes, then where they start; and
   * where they end, and the end of its last partition's bytes (-1: none) */
  int64_t n[FUNNEL__PASS_PARTS_MAX], bytes[FUNNEL__PASS_PARTS_MAX], at[FUNNEL__PASS_PARTS_MAX];
  int64_t n_end[FUNNEL__PASS_PARTS_MAX], bytes_end[FUNNEL__PASS_PARTS_MAX];
  int64_t at_end[FUNNEL__PASS_PARTS_MAX], last[FUNNEL__PASS_PARTS_MAX];
};

static void stage_all_count(void *ctx, int64_t i) {
  struct stage_all_job *j = ctx;
  const struct funnel__plan *plan = &j->t->plan;
  const size_t count = (size_t)plan->n_parts;
  int64_t n = 0, bytes = 0, at = 0;
  for (size_t p = funnel__pass_from(count, j->parts, i); p < funnel__pass_from(count, j->parts, i + 1); p++) {
    if (in_dd_block(j->t, (int64_t)p) || !carried(plan, (int64_t)p)) continue;
    const int64_t len = part_length(plan, (int64_t)p);
    n++;
    bytes += len;
    at += funnel__align_up(len, FUNNEL__ALIGN);
  }
  j->n[i] = n;
  j->bytes[i] = bytes;
  j->at[i] = at;
}

static void stage_all_place(void *ctx, int64_t i) {
  struct stage_all_job *j = ctx;
  const struct funnel__plan *plan = &j->t->plan;
  struct funnel__transfer *tr = j->tr;
  struct funnel__stage_plan *sp = &tr->staging;
  const size_t count = (size_t)plan->n_parts;
  int64_t k = j->n[i], first_byte = j->bytes[i], at = j->at[i], last = -1;
  for (size_t p = funnel__pass_from(count, j->parts, i); p < funnel__pass_from(count, j->parts, i + 1); p++) {
    if (in_dd_block(j->t, (int64_t)p)) continue; /* laid out with the block */
    if (!carried(plan, (int64_t)p)) {
      tr->in_scratch[p] = -1;
      continue;
    }
    const int64_t len = part_length(plan, (int64_t)p);
    sp->copies[k++] = (struct funnel__stage_copy){sp->block + at, part_bytes(plan, (int64_t)p), len,
                                                  first_byte};
    first_byte += len;
    tr->in_scratch[p] = j->base + at;
    last = at + len;
    at += funnel__align_up(len, FUNNEL__ALIGN);
  }
  j->n_end[i] = k;
  j->bytes_end[i] = first_byte;
  j->at_end[i] = at;
  j->last[i] = last;
}

/* Every partition the read carries is pageable and staged into the one
 * block, back to back: the layout `place` would make, in one tight pass
 * (one run, a staging copy a partition), in parts on the host threads
 * when there are many partitions. 10,000 partitions took 0.24 ms through
 * `place` on the H100 host, 50,000 0.3 ms through this pass alone. */
static void stage_all(struct funnel_table *t, struct funnel__transfer *tr) {
  struct funnel__stage_plan *sp = &tr->staging;
  struct stage_all_job job, *j = &job;
  j->t = t;
  j->tr = tr;
  j->base = tr->scratch_size; /* after the decoded block's */
  j->parts = funnel__pass_parts((size_t)t->plan.n_parts);
  j->n[0] = sp->n;
  j->bytes[0] = sp->bytes;
  j->at[0] = 0;
  if (j->parts > 1) {
    funnel__parallel_for(j->parts, stage_all_count, j);
    int64_t n = sp->n, bytes = sp->bytes, at = 0;
    for (int64_t i = 0; i < j->parts; i++) { /* where each part starts */
      const int64_t pn = j->n[i], pb = j->bytes[i], pa = j->at[i];
      j->n[i] = n;
      j->bytes[i] = bytes;
      j->at[i] = at;
      n += pn;
      bytes += pb;
      at += pa;
    }
  }
  funnel__parallel_for(j->parts, stage_all_place, j);
  int64_t end = -1;
  for (int64_t i = j->parts - 1; i >= 0 && end < 0; i--) end = j->last[i];
  const int64_t added = j->n_end[j->parts - 1] - sp->n;
  sp->n = j->n_end[j->parts - 1];
  t->stats.bytes_staged += j->bytes_end[j->parts - 1] - sp->bytes;
  sp->bytes = j->bytes_end[j->parts - 1];
  sp->block_size = j->at_end[j->parts - 1];
  sp->tasks = (sp->bytes + sp->task_bytes - 1) / sp->task_bytes;
  t->stats.staged_partitions += added;
  if (end < 0) return;
  tr->runs[tr->n_runs++] = (struct funnel__run){sp->block, end, j->base, true};
  tr->scratch_size = funnel__align_up(j->base + end, FUNNEL__ALIGN);
}

/* The decoded block of a read the device decodes part of: one run of its
 * `up` bytes, the region the device decodes into after it, and each
 * decoded partition's bytes where its image lies in the block. */
static void place_dd_block(struct funnel_table *t, struct funnel__transfer *tr) {
  const struct funnel__plan *plan = &t->plan;
  tr->runs[tr->n_runs++] = (struct funnel__run){t->decoded.ptr, t->dd.up, 0, true};
  t->dd.at = 0;
  tr->scratch_size = funnel__align_up(t->dd.up + t->dd.region, FUNNEL__ALIGN);
  const uint8_t *block = t->decoded.ptr;
  for (int64_t p = 0; p < plan->n_parts; p++)
    if (in_dd_block(t, p)) tr->in_scratch[p] = plan->parts[p].bytes - block;
  if (!t->dd.in_source) return;
  /* the pinned partitions whose frames the device decodes where they lie,
   * in runs after the region (where[] lists their buffers in order) */
  for (int64_t k = 0, last = -1; k < t->dd.n; k++) {
    const int64_t p = t->dd.where[3 * k];
    if (p == last) continue;
    last = p;
    const struct funnel__partition *part = &plan->parts[p];
    /* never merged into the block's run, which the region follows */
    const bool may_merge = tr->runs[tr->n_runs - 1].src != (const uint8_t *)t->decoded.ptr;
    t->dd.src_at[p] = add_run(tr->runs, &tr->n_runs, &tr->scratch_size, part->source,
                              part->source_length, true, may_merge);
  }
}

int funnel__layout_transfer(struct funnel_table *t, const struct funnel__read_options *o,
                            struct funnel__transfer *out, struct funnel_error *error) {
  const int64_t n = t->plan.n_parts;
  const bool device_path = t->plan.raw != NULL;
  if (funnel__early(t) && device_path) {
    /* on their way (early copies), and the device path reads only where */
    *out = (struct funnel__transfer){
        .in_scratch = t->early_in, .mirror = t->early_base, .early = true};
    return FUNNEL_OK;
  }
  /* in_scratch and runs are written before they are read, every entry;
   * in_base is read for every partition by the host path's segments, and
   * on the device path only where a partition is read in place */
  struct funnel__transfer tr = {
      .in_scratch = funnel__arena_alloc(&t->arena, ((size_t)n + 1) * sizeof(int64_t)),
      /* a run a partition and the decoded block, and on the device's
       * decoding of frames where they lie a run a partition more */
      .runs = funnel__arena_alloc(&t->arena, (2 * (size_t)n + 1) * sizeof(struct funnel__run)),
      .early = funnel__early(t)};
  if (tr.in_scratch == NULL || tr.runs == NULL) return OUT_OF_MEMORY(error);
  if (t->dd.n > 0) place_dd_block(t, &tr); /* first: scratch offset 0 */
  if (!device_path &&
      (tr.in_base = funnel__arena_calloc(&t->arena, (size_t)n + 1, sizeof(uint64_t))) == NULL)
    return OUT_OF_MEMORY(error);
  if (tr.early) { /* the partitions are on their way (early copies) */
    if (t->early_in != NULL) {
      memcpy(tr.in_scratch, t->early_in, (size_t)n * sizeof(int64_t));
    } else {
      for (int64_t p = 0; p < n; p++)
        tr.in_scratch[p] = part_length(&t->plan, p) > 0
                               ? (int64_t)((uintptr_t)part_bytes(&t->plan, p) - t->early_base)
                               : -1;
    }
    *out = tr;
    return FUNNEL_OK;
  }
  int64_t pinned_bytes, stage_bytes;
  const bool *pinned = find_pinned(t, &pinned_bytes, &stage_bytes);
  tr.staging.copies = funnel__arena_alloc(&t->arena, ((size_t)n + 1) * sizeof(*tr.staging.copies));
  tr.staging.task_bytes = t->dev->config.stage_task_bytes;
  tr.staging.round_bytes = t->dev->config.stage_round_bytes;
  if (pinned == NULL || tr.staging.copies == NULL) return OUT_OF_MEMORY(error);
  struct funnel__pool *pool = &t->dev->pool;
  tr.direct = pinned_bytes > 0 && t->dd.n == 0 &&
              funnel__pool_device_address(pool, pool->base) != 0 &&
              (o->transfer == FUNNEL_TRANSFER_DIRECT ||
               (o->transfer == FUNNEL_TRANSFER_AUTO && pinned_bytes <= o->direct_max_bytes));
  if (tr.direct && tr.in_base == NULL &&
      (tr.in_base = funnel__arena_calloc(&t->arena, (size_t)n + 1, sizeof(uint64_t))) == NULL)
    return OUT_OF_MEMORY(error);
  /* pageable partitions are staged back to back in one pinned block, so
   * they go up in one copy; without room, one block each, or none */
  struct layout l = {.t = t, .tr = &tr};
  if (t->dev->config.stage_pageable && stage_bytes > 0 &&
      (l.stage = funnel__pool_alloc(pool, stage_bytes)) != NULL) {
    l.stage_bytes = stage_bytes;
    funnel__table_hold_staged(t, l.stage, stage_bytes);
  }
  tr.staging.block = l.stage;
  if (pinned_bytes == 0 && l.stage != NULL) {
    stage_all(t, &tr);
  } else {
    for (int64_t p = 0; p < n; p++) {
      if (in_dd_block(t, p)) continue;
      tr.in_scratch[p] = -1;
      if (carried(&t->plan, p)) place(&l, p, pinned[p]);
    }
  }
  *out = tr;
  return FUNNEL_OK;
}

/* ----------------------------------------------------------------- copies */

/* The tasks of a round of staging (tuning.h, FUNNEL__STAGE_ROUNDS). */
static int64_t round_tasks(const struct funnel__stage_plan *sp) {
  int64_t rounds = sp->block_size / sp->round_bytes;
  if (rounds > FUNNEL__STAGE_ROUNDS) rounds = FUNNEL__STAGE_ROUNDS;
  if (rounds < 1) rounds = 1;
  int64_t per_round = (sp->tasks + rounds - 1) / rounds;
  /* a round keeps every host thread busy: its tasks a multiple of them */
  const int64_t threads = sp->bytes > FUNNEL__STAGE_INLINE_BYTES ? funnel__host_threads() : 1;
  if (threads > 1) per_round = (per_round + threads - 1) / threads * threads;
  return per_round;
}

int64_t funnel__stage_rounds(const struct funnel__stage_plan *sp) {
  if (sp->tasks == 0) return 0;
  const int64_t per_round = round_tasks(sp);
  return (sp->tasks + per_round - 1) / per_round;
}

/* Staging proceeds round by round: the host threads stage the tasks of a
 * round, then the bytes of the runs that round completed go up. */
static int enqueue_staged_rounds(struct funnel_table *t, const struct funnel__transfer *tr,
                                 struct funnel__stage_plan *sp, struct funnel__work *w,
                                 struct funnel_error *error) {
  const uint8_t *lo = sp->block, *hi = sp->block + sp->block_size;
  const int64_t per_round = round_tasks(sp);
  int64_t r = 0; /* the next run to copy, of those in the block */
  const uint8_t *sent = lo;
  int st = FUNNEL_OK;
  for (int64_t first = 0; first < sp->tasks && st == FUNNEL_OK; first += per_round) {
    const int64_t end = first + per_round < sp->tasks ? first + per_round : sp->tasks;
    sp->first = first;
    stage_tasks(sp, end - first);
    const uint8_t *upto = staged_upto(sp, end);
    while (st == FUNNEL_OK && r < tr->n_runs && sent < upto) {
      const struct funnel__run *run = &tr->runs[r];
      if (run->src < lo || run->src >= hi || run->src + run->length <= sent) {
        r++;
        continue;
      }
      const uint8_t *from = run->src > sent ? run->src : sent;
      const uint8_t *to = run->src + run->length < upto ? run->src + run->length : upto;
      if (to > from)
        st = funnel__work_enqueued(
            w, funnel__dev_copy_h2d_async(w->be,
                                          t->scratch + (uint64_t)(run->scratch + (from - run->src)),
                                          from, (size_t)(to - from), w->stream, error));
      sent = to;
      if (to == run->src + run->length) r++;
    }
    if (st == FUNNEL_OK && tr->on_round != NULL) st = tr->on_round(tr->round_ctx, sent - lo, error);
  }
  return st;
}

/* Enqueues the copy of every run, one each; the runs out of the staging
 * block first, then, round by round as the host threads stage them, the
 * bytes of the runs in the staging block. */
static int enqueue_runs(struct funnel_table *t, struct funnel__transfer *tr,
                        struct funnel__work *w, struct funnel_error *error) {
  struct funnel__stage_plan *sp = &tr->staging;
  if (sp->tasks > 0 && sp->block == NULL) {
    /* no room for one block: the partitions were staged into blocks of
     * their own, which go up like any pinned partition once filled */
    sp->first = 0;
    stage_tasks(sp, sp->tasks);
    sp->tasks = 0;
  }
  const uint8_t *lo = sp->block, *hi = sp->block ? sp->block + sp->block_size : NULL;
  int st = FUNNEL_OK;
  for (int64_t i = 0; i < tr->n_runs && st == FUNNEL_OK; i++) {
    const struct funnel__run *run = &tr->runs[i];
    if (lo != NULL && run->src >= lo && run->src < hi) continue;
    st = funnel__work_enqueued(
        w, funnel__dev_copy_h2d_async(w->be, t->scratch + (uint64_t)run->scratch, run->src,
                                      (size_t)run->length, w->stream, error));
  }
  if (sp->tasks == 0 || st != FUNNEL_OK) return st;
  return enqueue_staged_rounds(t, tr, sp, w, error);
}

/* Every run in one batched call (FUNNEL_BATCH_COPY=1, device.h). */
static int enqueue_batch(struct funnel_table *t, const struct funnel__transfer *tr,
                         struct funnel__work *w, struct funnel_error *error) {
  const size_t n = (size_t)tr->n_runs;
  uint64_t *dst = funnel__arena_calloc(&t->arena, n, sizeof(uint64_t));
  const void **src = funnel__arena_calloc(&t->arena, n, sizeof(void *));
  size_t *len = funnel__arena_calloc(&t->arena, n, sizeof(size_t));
  if (dst == NULL || src == NULL || len == NULL) return OUT_OF_MEMORY(error);
  for (size_t i = 0; i < n; i++) {
    dst[i] = t->scratch + (uint64_t)tr->runs[i].scratch;
    src[i] = tr->runs[i].src;
    len[i] = (size_t)tr->runs[i].length;
  }
  return funnel__work_enqueued(w, funnel__dev_copy_h2d_batch_async(
                                      w->be, dst, (const void *const *)src, len, n, w->stream,
                                      error));
}

int funnel__enqueue_transfer(struct funnel_table *t, struct funnel__transfer *tr,
                             struct funnel__work *w, struct funnel_error *error) {
  bool all_pinned = true;
  for (int64_t i = 0; i < tr->n_runs && all_pinned; i++) all_pinned = tr->runs[i].pinned;
  if (all_pinned && tr->n_runs > 2 && w->be->copy_h2d_batch_async != NULL &&
      t->dev->config.batch_copy && tr->staging.tasks == 0)
    return enqueue_batch(t, tr, w, error);
  return enqueue_runs(t, tr, w, error);
}
