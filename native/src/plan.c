/* plan.c: schema checks, exclusive scans, output layout, segment table. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "workers.h"

/* A batch whose pieces are still to check (funnel__piece_check: interior
 * string offsets, null counts against validity bits). */
struct funnel__check_job {
  int64_t part, batch;
};

struct piece_checks {
  const struct funnel__schema *schema;
  const struct funnel__partition *parts;
  const struct funnel__check_job *jobs;
  int64_t per_task; /* jobs per task */
  int64_t n_jobs;
  _Atomic int64_t first_bad; /* the lowest failing job, or n_jobs */
};

/* The first failing piece of a job's batch, with its error; or FUNNEL_OK. */
static int check_batch(const struct funnel__schema *schema, const struct funnel__partition *parts,
                       const struct funnel__check_job *j, struct funnel_error *error) {
  const struct funnel__partition *part = &parts[j->part];
  for (int c = 0; c < schema->n_fields; c++)
    FUNNEL_RETURN_NOT_OK(
        funnel__piece_check(schema, part, &part->batches[j->batch], c, j->part, error));
  return FUNNEL_OK;
}

static void check_task(void *ctx, int64_t task) {
  struct piece_checks *c = ctx;
  const int64_t end = (task + 1) * c->per_task < c->n_jobs ? (task + 1) * c->per_task : c->n_jobs;
  for (int64_t k = task * c->per_task; k < end; k++) {
    if (k >= atomic_load(&c->first_bad)) return; /* a lower one failed already */
    if (check_batch(c->schema, c->parts, &c->jobs[k], NULL) != FUNNEL_OK) {
      int64_t seen = atomic_load(&c->first_bad);
      while (k < seen && !atomic_compare_exchange_weak(&c->first_bad, &seen, k)) {
      }
      return;
    }
  }
}

int funnel__plan_check_pieces(const struct funnel__plan *plan, struct funnel_error *error) {
  const int64_t n_jobs = plan->n_check_jobs;
  if (n_jobs == 0) return FUNNEL_OK;
  struct piece_checks c = {
      .schema = plan->schema, .parts = plan->parts, .jobs = plan->check_jobs, .n_jobs = n_jobs};
  atomic_init(&c.first_bad, n_jobs);
  int64_t tasks = plan->check_work / FUNNEL__CHECK_TASK + 1;
  if (tasks > n_jobs) tasks = n_jobs;
  c.per_task = (n_jobs + tasks - 1) / tasks;
  funnel__parallel_for((n_jobs + c.per_task - 1) / c.per_task, check_task, &c);
  const int64_t bad = atomic_load(&c.first_bad);
  /* the error of the first bad piece in partition order, as a serial check gives */
  return bad == n_jobs ? FUNNEL_OK : check_batch(plan->schema, plan->parts, &c.jobs[bad], error);
}

static int64_t bitmap_bytes(int64_t rows) { return (rows + 7) / 8; }

static int pick_schema(const struct funnel__schema **schema, struct funnel__partition *parts,
                       int64_t n_parts, struct funnel_error *error) {
  for (int64_t p = 0; p < n_parts && *schema == NULL; p++) {
    if (parts[p].schema != NULL) *schema = parts[p].schema;
    else if (parts[p].n_batches > 0)
      return funnel__error_set(error, FUNNEL_ERR_NO_SCHEMA, p, -1, parts[p].batches[0].message_offset,
                               "partition %lld: RecordBatch before any Schema, and the reader "
                               "was given no schema", (long long)p);
  }
  if (*schema == NULL)
    return funnel__error_set(error, FUNNEL_ERR_NO_SCHEMA, -1, -1, -1,
                             "no schema: none of the %lld partitions holds a Schema message and "
                             "the reader was given no schema", (long long)n_parts);
  return FUNNEL_OK;
}

/* What the scan of every batch gathers. */
struct scan {
  const struct funnel__schema *schema;
  char source[64]; /* where the schema came from, for messages */
  struct funnel__out_column *cols;
  int64_t *chars;  /* string bytes per column */
  int n_var;       /* string columns */
  int64_t rows, batches, pieces;
  struct funnel__check_job *jobs;
  int64_t n_jobs, jobs_cap, check_work;
  int64_t check_per_row; /* bytes funnel__piece_check reads per row of a batch */
};

static int scan_init(struct scan *k, const struct funnel__schema *schema, bool from_reader,
                     const struct funnel__partition *parts, int64_t n_parts,
                     struct funnel__arena *arena, struct funnel_error *error) {
  memset(k, 0, sizeof(*k));
  k->schema = schema;
  snprintf(k->source, sizeof(k->source), "the reader's schema");
  for (int64_t p = 0; !from_reader && p < n_parts; p++)
    if (parts[p].schema == schema) {
      snprintf(k->source, sizeof(k->source), "partition %lld's", (long long)p);
      break;
    }
  const size_t n_cols = (size_t)(schema->n_fields ? schema->n_fields : 1);
  k->cols = funnel__arena_calloc(arena, n_cols, sizeof(*k->cols));
  k->chars = funnel__arena_calloc(arena, n_cols, sizeof(int64_t));
  if (k->cols == NULL || k->chars == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  for (int c = 0; c < schema->n_fields; c++) {
    k->n_var += schema->fields[c].offset_width != 0;
    k->check_per_row += schema->fields[c].offset_width + 1; /* offsets, and a validity bit */
  }
  return FUNNEL_OK;
}

/* A partition's own schema must equal the one the read uses. */
static int check_schema(const struct scan *k, const struct funnel__partition *part, int64_t p,
                        struct funnel_error *error) {
  if (part->schema == NULL || part->schema == k->schema) return FUNNEL_OK;
  char why[256];
  const int at = funnel__schema_diff(k->schema, part->schema, why, sizeof(why));
  if (at < 0) return FUNNEL_OK;
  return funnel__error_set(error, FUNNEL_ERR_SCHEMA_MISMATCH, p, at, part->schema_offset,
                           "partition %lld: schema differs from %s: %s", (long long)p, k->source,
                           why);
}

/* The batch joins the pieces to check later, while the copies fly. */
static int add_check_job(struct scan *k, int64_t p, int64_t b, int64_t rows,
                         struct funnel__arena *arena, struct funnel_error *error) {
  if (k->n_jobs == k->jobs_cap) {
    const int64_t cap = k->jobs_cap ? 2 * k->jobs_cap : 64;
    struct funnel__check_job *nj = funnel__arena_alloc(arena, (size_t)cap * sizeof(*nj));
    if (nj == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    if (k->n_jobs) memcpy(nj, k->jobs, (size_t)k->n_jobs * sizeof(*nj));
    k->jobs = nj;
    k->jobs_cap = cap;
  }
  k->jobs[k->n_jobs++] = (struct funnel__check_job){p, b};
  k->check_work += rows * k->check_per_row;
  return FUNNEL_OK;
}

/* Binds batch b of partition p and adds it to the totals. */
static int scan_batch(struct scan *k, struct funnel__partition *part, int64_t p, int64_t b,
                      struct funnel__arena *arena, struct funnel_error *error) {
  struct funnel__batch *batch = &part->batches[b];
  FUNNEL_RETURN_NOT_OK(funnel__batch_bind_ends(k->schema, part, batch, p, arena, error));
  k->batches++;
  if (batch->rows == 0) return FUNNEL_OK;
  k->pieces += k->schema->n_fields;
  if (batch->checked != k->schema) /* not already, as it was parsed */
    FUNNEL_RETURN_NOT_OK(add_check_job(k, p, b, batch->rows, arena, error));
  for (int c = 0; c < k->schema->n_fields; c++) {
    const struct funnel__piece *pc = &batch->pieces[c];
    /* a nested column's child may have rows without bytes (a struct of
     * nothing, a fixed_size_list of it): its rows are bounded here */
    if (funnel__add_overflows(k->cols[c].length, pc->length, &k->cols[c].length) ||
        k->cols[c].length > FUNNEL__MAX_ROWS)
      return funnel__error_set(error, FUNNEL_ERR_LIMIT, p, c, batch->message_offset,
                               "partition %lld: column %d '%s' would have more than %lld rows",
                               (long long)p, c, k->schema->fields[c].path,
                               (long long)FUNNEL__MAX_ROWS);
    k->cols[c].null_count += pc->null_count;
    k->chars[c] += pc->last_offset - pc->first_offset;
  }
  if (funnel__add_overflows(k->rows, batch->rows, &k->rows) || k->rows > FUNNEL__MAX_ROWS)
    return funnel__error_set(error, FUNNEL_ERR_LIMIT, p, -1, batch->message_offset,
                             "partition %lld: the table would have more than %lld rows",
                             (long long)p, (long long)FUNNEL__MAX_ROWS);
  return FUNNEL_OK;
}

/* Lays out column c's buffers in the output, after *size bytes. */
static int layout_column(const struct funnel__field *f, int c, struct funnel__out_column *oc,
                         int64_t chars, int64_t *size, struct funnel_error *error) {
  const int64_t rows = oc->length;
  oc->validity = oc->offsets = oc->data = -1;
  if (oc->null_count > 0) {
    oc->validity_size = bitmap_bytes(rows);
    oc->validity = funnel__carve(size, oc->validity_size);
  }
  if (f->offset_width != 0 && f->nested != FUNNEL__NESTED_NONE) {
    if (f->offset_width == 4 && chars > INT32_MAX)
      return funnel__error_set(error, FUNNEL_ERR_LIMIT, -1, c, -1,
                               "column %d '%s': %lld values of %s overflow its 32-bit offsets%s",
                               c, f->path, (long long)chars, funnel_type_name(f->type_id),
                               f->type_id == FUNNEL_TYPE_LIST ? "; write it as large_list" : "");
    oc->offsets_size = (rows + 1) * f->offset_width;
    oc->offsets = funnel__carve(size, oc->offsets_size);
  } else if (f->nested != FUNNEL__NESTED_NONE) {
    /* a struct or fixed_size_list: its validity only */
  } else if (f->offset_width != 0) {
    if (f->offset_width == 4 && chars > INT32_MAX)
      return funnel__error_set(error, FUNNEL_ERR_LIMIT, -1, c, -1,
                               "column %d '%s': %lld bytes of %s data overflow its 32-bit "
                               "offsets; write the column as %s",
                               c, f->path, (long long)chars, funnel_type_name(f->type_id),
                               f->type_id == FUNNEL_TYPE_UTF8 ? "large_utf8" : "large_binary");
    oc->offsets_size = (rows + 1) * f->offset_width;
    oc->offsets = funnel__carve(size, oc->offsets_size);
    oc->data_size = chars;
  } else if (f->type_id == FUNNEL_TYPE_BOOL) {
    oc->data_size = bitmap_bytes(rows);
  } else if (funnel__mul_overflows(rows, f->byte_width, &oc->data_size)) {
    return funnel__error_set(error, FUNNEL_ERR_LIMIT, -1, c, -1,
                             "column %d '%s': %lld rows overflow", c, f->path, (long long)rows);
  }
  if (f->nested == FUNNEL__NESTED_NONE) oc->data = funnel__carve(size, oc->data_size);
  if (*size > FUNNEL__MAX_OUTPUT_BYTES)
    return funnel__error_set(error, FUNNEL_ERR_LIMIT, -1, c, -1,
                             "column %d '%s': the table of %lld rows would need more than "
                             "%lld bytes of device memory",
                             c, f->path, (long long)rows, (long long)FUNNEL__MAX_OUTPUT_BYTES);
  return FUNNEL_OK;
}

int funnel__plan_layout(const struct funnel__schema *schema, struct funnel__out_column *cols,
                        const int64_t *chars, int64_t *size, struct funnel_error *error) {
  *size = 0;
  for (int c = 0; c < schema->n_fields; c++)
    FUNNEL_RETURN_NOT_OK(layout_column(&schema->fields[c], c, &cols[c], chars[c], size, error));
  return FUNNEL_OK;
}

/* Room for the segment table without walking it: at most three segments a
 * piece (validity, offsets, data) and three a column (padding bits twice,
 * the last offset), plus one per cut. emit cuts a piece of b output bytes
 * into chunks of at least chunk_bytes - 7 bytes (offsets go by whole
 * values of up to 8 bytes), so at most b / (chunk_bytes - 7) times, and
 * the pieces' bytes sum to at most out_size. An empty read counts exactly,
 * so that one with nothing to write (no string column) enqueues nothing. */
static int64_t segment_room(const struct funnel__plan *plan, int64_t pieces) {
  if (plan->rows == 0 || plan->schema->n_fields == 0)
    return funnel__plan_segments(plan, NULL, 0, NULL);
  const int64_t least_chunk = plan->chunk_bytes > 8 ? plan->chunk_bytes - 7 : 1;
  return 3 * pieces + 3 * (int64_t)plan->schema->n_fields + plan->out_size / least_chunk + 1;
}

/* The scan on the host threads, FUNNEL__PLAN_TASK partitions a task, for
 * the common read: every partition's schema is the read's (or none) and
 * every batch was bound and checked as it was parsed. Each task sums its
 * batches, pieces, rows, null counts and string bytes; a task that meets
 * anything else gives up, and the read is scanned by the loop (binding,
 * checks and errors in partition order). */
struct scan_tasks {
  const struct scan *k;
  const struct funnel__partition *parts;
  int64_t n_parts;
  int n_cols;
  int64_t *sums; /* per task: clean, batches, pieces, rows, then nulls, chars and rows per column */
};

#define SCAN_SUMS(n_cols) (4 + 3 * (int64_t)(n_cols))

static void scan_task(void *ctx, int64_t t) {
  const struct scan_tasks *s = ctx;
  const struct funnel__schema *schema = s->k->schema;
  const int n_cols = s->n_cols;
  int64_t *sum = s->sums + t * SCAN_SUMS(n_cols);
  int64_t *nulls = sum + 4, *chars = nulls + n_cols, *lengths = chars + n_cols;
  const int64_t p1 = s->n_parts - t * FUNNEL__PLAN_TASK < FUNNEL__PLAN_TASK
                         ? s->n_parts : (t + 1) * FUNNEL__PLAN_TASK;
  for (int64_t p = t * FUNNEL__PLAN_TASK; p < p1; p++) {
    const struct funnel__partition *part = &s->parts[p];
    if (part->schema != NULL && part->schema != schema) return; /* sum[0] stays 0 */
    for (int64_t b = 0; b < part->n_batches; b++) {
      const struct funnel__batch *batch = &part->batches[b];
      if (batch->bound != schema) return;
      sum[1]++;
      if (batch->rows == 0) continue;
      if (batch->checked != schema || funnel__add_overflows(sum[3], batch->rows, &sum[3])) return;
      sum[2] += n_cols;
      for (int c = 0; c < n_cols; c++) {
        nulls[c] += batch->pieces[c].null_count;
        /* a list's child rows may come without bytes: an overflow, the loop's to report */
        if (funnel__add_overflows(chars[c], batch->pieces[c].last_offset -
                                                batch->pieces[c].first_offset, &chars[c]))
          return;
        /* a nested column's child: its own rows */
        if (funnel__add_overflows(lengths[c], batch->pieces[c].length, &lengths[c])) return;
      }
    }
  }
  sum[0] = 1;
}

/* Whether the scan on the host threads filled `k` (else it is untouched). */
static bool scan_parallel(struct scan *k, const struct funnel__partition *parts, int64_t n_parts) {
  const int n_cols = k->schema->n_fields;
  if (n_parts <= FUNNEL__PLAN_TASK || n_parts * n_cols < FUNNEL__PLAN_PARALLEL_MIN) return false;
  const int64_t tasks = (n_parts + FUNNEL__PLAN_TASK - 1) / FUNNEL__PLAN_TASK;
  struct scan_tasks s = {.k = k, .parts = parts, .n_parts = n_parts, .n_cols = n_cols,
                         .sums = calloc((size_t)(tasks * SCAN_SUMS(n_cols)), sizeof(int64_t))};
  if (s.sums == NULL) return false;
  funnel__parallel_for(tasks, scan_task, &s);
  bool clean = true;
  int64_t batches = 0, pieces = 0, rows = 0;
  for (int64_t t = 0; t < tasks && clean; t++) {
    const int64_t *sum = s.sums + t * SCAN_SUMS(n_cols);
    clean = sum[0] == 1 && !funnel__add_overflows(rows, sum[3], &rows) && rows <= FUNNEL__MAX_ROWS;
    batches += sum[1];
    pieces += sum[2];
  }
  if (clean) {
    k->batches = batches;
    k->pieces = pieces;
    k->rows = rows;
    for (int64_t t = 0; t < tasks && clean; t++) {
      const int64_t *nulls = s.sums + t * SCAN_SUMS(n_cols) + 4, *chars = nulls + n_cols,
                    *lengths = chars + n_cols;
      for (int c = 0; c < n_cols; c++) {
        k->cols[c].null_count += nulls[c];
        k->chars[c] += chars[c];
        clean &= !funnel__add_overflows(k->cols[c].length, lengths[c], &k->cols[c].length) &&
                 k->cols[c].length <= FUNNEL__MAX_ROWS;
      }
    }
    if (!clean) { /* the loop scans again and says which column */
      for (int c = 0; c < n_cols; c++) {
        k->cols[c].null_count = k->cols[c].length = 0;
        k->chars[c] = 0;
      }
      k->batches = k->pieces = k->rows = 0;
    }
  }
  free(s.sums);
  return clean;
}

int funnel__plan_build(const struct funnel__schema *schema, struct funnel__partition *parts,
                       int64_t n_parts, int64_t chunk_bytes, struct funnel__arena *arena,
                       struct funnel__plan *out, struct funnel_error *error) {
  memset(out, 0, sizeof(*out));
  const bool from_reader = schema != NULL;
  FUNNEL_RETURN_NOT_OK(pick_schema(&schema, parts, n_parts, error));
  struct scan k;
  FUNNEL_RETURN_NOT_OK(scan_init(&k, schema, from_reader, parts, n_parts, arena, error));
  const bool scanned = scan_parallel(&k, parts, n_parts);
  for (int64_t p = 0; p < n_parts && !scanned; p++) {
    FUNNEL_RETURN_NOT_OK(check_schema(&k, &parts[p], p, error));
    for (int64_t b = 0; b < parts[p].n_batches; b++)
      FUNNEL_RETURN_NOT_OK(scan_batch(&k, &parts[p], p, b, arena, error));
  }
  int64_t size = 0;
  FUNNEL_RETURN_NOT_OK(funnel__plan_layout(schema, k.cols, k.chars, &size, error));
  out->schema = schema;
  out->parts = parts;
  out->n_parts = n_parts;
  out->rows = k.rows;
  out->batches = k.batches;
  out->columns = k.cols;
  out->out_size = size;
  /* interior offsets and null counts are checked later
   * (funnel__plan_check_pieces), while the copies run */
  out->check_jobs = k.jobs;
  out->n_check_jobs = k.n_jobs;
  out->check_work = k.check_work;
  out->chunk_bytes = chunk_bytes <= 0 ? FUNNEL__SEGMENT_CHUNK_BYTES
                     : chunk_bytes < FUNNEL__SEGMENT_CHUNK_MAX ? chunk_bytes
                                                               : FUNNEL__SEGMENT_CHUNK_MAX;
  out->max_segments = segment_room(out, k.pieces);
  return FUNNEL_OK;
}

/* Where plan_segments writes: the table (NULL: nowhere) and its room. */
struct sink {
  struct funnel__segment *out;
  int64_t cap;
  int64_t unit; /* cut pieces into chunks of about this many output bytes */
};

/* Appends `s`, of `count` bytes, bits or values (its own count field is
 * not read: a piece may count more than it holds), to the sink, cut into
 * chunks of about sink->unit bytes of output; returns the new count. Never
 * writes past the room: a count over it tells the caller. */
static inline int64_t emit(const struct sink *k, int64_t n, struct funnel__segment s,
                           int64_t count) {
  const int64_t unit = k->unit;
  int64_t chunk;
  switch (s.kind) {
    case FUNNEL_SEG_BYTES: chunk = unit; break;
    case FUNNEL_SEG_OFFSETS32: chunk = unit / 4 > 0 ? unit / 4 : 1; break;
    case FUNNEL_SEG_OFFSETS64: chunk = unit / 8 > 0 ? unit / 8 : 1; break;
    case FUNNEL_SEG_BITS:
    case FUNNEL_SEG_ONES:
    case FUNNEL_SEG_ZEROS: chunk = unit * 8 + 1; break; /* cuts at any bit, not only at bytes */
    default: chunk = 1; break; /* puts: one value */
  }
  if (count <= chunk) {
    s.count = (uint32_t)count;
    if (k->out != NULL && n < k->cap) k->out[n] = s;
    return n + 1;
  }
  const int64_t width = s.kind == FUNNEL_SEG_OFFSETS32 ? 4 : s.kind == FUNNEL_SEG_OFFSETS64 ? 8 : 1;
  const int bits = s.kind == FUNNEL_SEG_BITS || s.kind == FUNNEL_SEG_ONES || s.kind == FUNNEL_SEG_ZEROS;
  for (int64_t done = 0; done < count; done += chunk, n++) {
    if (k->out == NULL || n >= k->cap) continue;
    struct funnel__segment c = s;
    c.count = (uint32_t)(count - done < chunk ? count - done : chunk);
    if (bits) {
      const uint64_t from = s.src_bit + (uint64_t)done;
      c.src = s.src ? s.src + from / 8 : 0;
      c.src_bit = (uint16_t)(from % 8);
      c.dst_bit = s.dst_bit + (uint64_t)done;
    } else {
      c.src = s.src + (uint64_t)(done * width);
      c.dst = s.dst + (uint64_t)(done * width);
    }
    k->out[n] = c;
  }
  return n;
}

/* Where one output column goes, and how far it has been written. */
struct column_out {
  const struct funnel__field *f;
  const struct funnel__out_column *oc;
  uint64_t validity, offsets, data; /* device addresses */
  int64_t row, char_base;           /* rows and string bytes written so far */
};

/* The segments of one piece whose partition's bytes start at `in`. */
static int64_t emit_piece(const struct sink *k, int64_t n, struct column_out *o,
                          const struct funnel__piece *pc, uint64_t in) {
  const struct funnel__field *f = o->f;
  const int64_t len = pc->length, row = o->row, start = pc->start;
  if (o->oc->null_count > 0)
    n = emit(k, n, (struct funnel__segment){
        .kind = pc->validity >= 0 ? FUNNEL_SEG_BITS : FUNNEL_SEG_ONES,
        .src = pc->validity >= 0 ? in + (uint64_t)(pc->validity + start / 8) : 0,
        .src_bit = (uint16_t)(start % 8), .dst = o->validity, .dst_bit = (uint64_t)row}, len);
  if (f->offset_width != 0) {
    /* string bytes, or a list's child rows: offsets rebased the same way */
    n = emit(k, n, (struct funnel__segment){
        .kind = f->offset_width == 4 ? FUNNEL_SEG_OFFSETS32 : FUNNEL_SEG_OFFSETS64,
        .src = in + (uint64_t)(pc->offsets + start * f->offset_width),
        .dst = o->offsets + (uint64_t)(row * f->offset_width),
        .value = o->char_base - pc->first_offset}, len);
    const int64_t bytes = pc->last_offset - pc->first_offset;
    if (bytes > 0 && f->nested == FUNNEL__NESTED_NONE)
      n = emit(k, n, (struct funnel__segment){
          .kind = FUNNEL_SEG_BYTES, .src = in + (uint64_t)(pc->data + pc->first_offset),
          .dst = o->data + (uint64_t)o->char_base}, bytes);
    o->char_base += bytes;
  } else if (f->nested != FUNNEL__NESTED_NONE) {
    /* a struct or fixed_size_list: its validity only */
  } else if (f->type_id == FUNNEL_TYPE_BOOL) {
    n = emit(k, n, (struct funnel__segment){.kind = FUNNEL_SEG_BITS,
                                            .src = in + (uint64_t)(pc->data + start / 8),
                                            .src_bit = (uint16_t)(start % 8),
                                            .dst = o->data, .dst_bit = (uint64_t)row}, len);
  } else if (f->byte_width > 0) {
    n = emit(k, n, (struct funnel__segment){
        .kind = FUNNEL_SEG_BYTES, .src = in + (uint64_t)(pc->data + start * f->byte_width),
        .dst = o->data + (uint64_t)(row * f->byte_width)}, len * f->byte_width);
  }
  o->row += len;
  return n;
}

/* After a column's last piece: padding bits cleared, the final offset. */
static int64_t emit_column_end(const struct sink *k, int64_t n, const struct column_out *o,
                               int64_t rows) {
  const struct funnel__field *f = o->f;
  const int64_t pad = o->oc->validity_size * 8 - rows; /* bits after the last row */
  if (o->oc->null_count > 0 && pad > 0)
    n = emit(k, n, (struct funnel__segment){.kind = FUNNEL_SEG_ZEROS, .dst = o->validity,
                                            .dst_bit = (uint64_t)rows}, pad);
  if (f->type_id == FUNNEL_TYPE_BOOL && o->oc->data_size * 8 > rows)
    n = emit(k, n, (struct funnel__segment){.kind = FUNNEL_SEG_ZEROS, .dst = o->data,
                                            .dst_bit = (uint64_t)rows},
             o->oc->data_size * 8 - rows);
  if (f->offset_width != 0)
    n = emit(k, n, (struct funnel__segment){
        .kind = f->offset_width == 4 ? FUNNEL_SEG_PUT32 : FUNNEL_SEG_PUT64,
        .dst = o->offsets + (uint64_t)(rows * f->offset_width), .value = o->char_base}, 0);
  return n;
}

/* Columns whose segments one pass over the partitions writes: the pass
 * goes partition by partition (each partition's pieces lie together in
 * host memory; a pass per column would reach into every partition once
 * per column, a cache miss each at thousands of partitions). */
#define SEGMENT_PASS_COLUMNS 64

/* One pass: columns [c0, c0 + m), each from its state in o. */
struct seg_pass {
  const struct funnel__plan *plan;
  const uint64_t *in_base;
  struct sink k;
  int c0, m;
  struct column_out o[SEGMENT_PASS_COLUMNS];
};

/* The segments of partitions [p0, p1) of the pass, the n-th segment on,
 * from the columns' state in o (advanced past them); returns the count. */
static int64_t emit_parts(const struct seg_pass *g, const struct sink *k, struct column_out *o,
                          int64_t p0, int64_t p1, int64_t n) {
  for (int64_t p = p0; p < p1; p++) {
    const struct funnel__partition *part = &g->plan->parts[p];
    const uint64_t in = g->in_base != NULL ? g->in_base[p] : 0;
    for (int64_t b = 0; b < part->n_batches; b++) {
      const struct funnel__piece *pieces = part->batches[b].pieces + g->c0;
      if (part->batches[b].rows == 0) continue; /* every piece is empty */
      for (int j = 0; j < g->m; j++)
        if (pieces[j].length > 0) n = emit_piece(k, n, &o[j], &pieces[j], in);
    }
  }
  return n;
}

/* A pass on the host threads, FUNNEL__PLAN_TASK partitions a task, in
 * two rounds: each task counts its segments, rows and string bytes; after
 * an exclusive scan of those, each writes its segments from where the
 * tasks before it end. Segments do not depend on where their piece lands
 * but for the addresses and the rebase, so the count is exact. */
struct seg_tasks {
  const struct seg_pass *g;
  bool write;      /* the second round */
  int64_t *count;  /* per task: its segments, then the index of its first */
  int64_t *rows;   /* per task and column: its rows, then the row it starts at (a nested
                      column's children have rows of their own) */
  int64_t *chars;  /* per task and column: its string bytes, then where they start */
};

static void seg_task(void *ctx, int64_t t) {
  const struct seg_tasks *s = ctx;
  const struct seg_pass *g = s->g;
  const int64_t p0 = t * FUNNEL__PLAN_TASK;
  const int64_t p1 = g->plan->n_parts - p0 < FUNNEL__PLAN_TASK ? g->plan->n_parts
                                                                  : p0 + FUNNEL__PLAN_TASK;
  struct column_out o[SEGMENT_PASS_COLUMNS];
  for (int j = 0; j < g->m; j++) {
    o[j] = g->o[j];
    o[j].row = s->write ? s->rows[t * g->m + j] : 0;
    o[j].char_base = s->write ? s->chars[t * g->m + j] : 0;
  }
  if (s->write) {
    emit_parts(g, &g->k, o, p0, p1, s->count[t]);
    return;
  }
  const struct sink count_only = {NULL, 0, g->k.unit};
  s->count[t] = emit_parts(g, &count_only, o, p0, p1, 0);
  for (int j = 0; j < g->m; j++) {
    s->rows[t * g->m + j] = o[j].row;
    s->chars[t * g->m + j] = o[j].char_base;
  }
}

/* The pass on the host threads, from the n-th segment on; returns the
 * count, or -1 (nothing written) when out of host memory. */
static int64_t emit_parallel(struct seg_pass *g, int64_t n) {
  const int64_t tasks = (g->plan->n_parts + FUNNEL__PLAN_TASK - 1) / FUNNEL__PLAN_TASK;
  struct seg_tasks s = {.g = g,
                        .count = malloc((size_t)tasks * sizeof(int64_t)),
                        .rows = malloc((size_t)(tasks * g->m) * sizeof(int64_t)),
                        .chars = malloc((size_t)(tasks * g->m) * sizeof(int64_t))};
  if (s.count == NULL || s.rows == NULL || s.chars == NULL) {
    n = -1;
  } else {
    funnel__parallel_for(tasks, seg_task, &s);
    int64_t rows[SEGMENT_PASS_COLUMNS] = {0}, chars[SEGMENT_PASS_COLUMNS] = {0};
    for (int64_t t = 0; t < tasks; t++) {
      const int64_t c = s.count[t];
      s.count[t] = n;
      n += c;
      for (int j = 0; j < g->m; j++) {
        const int64_t r = s.rows[t * g->m + j], ch = s.chars[t * g->m + j];
        s.rows[t * g->m + j] = rows[j];
        s.chars[t * g->m + j] = chars[j];
        rows[j] += r;
        chars[j] += ch;
      }
    }
    s.write = true;
    funnel__parallel_for(tasks, seg_task, &s);
    for (int j = 0; j < g->m; j++) {
      g->o[j].row = rows[j];
      g->o[j].char_base = chars[j];
    }
  }
  free(s.count);
  free(s.rows);
  free(s.chars);
  return n;
}

int64_t funnel__plan_segments(const struct funnel__plan *plan, const uint64_t *in_base,
                              uint64_t out_base, struct funnel__segment *out) {
  const int n_cols = plan->schema->n_fields;
  int64_t n = 0;
  for (int c0 = 0; c0 < n_cols; c0 += SEGMENT_PASS_COLUMNS) {
    struct seg_pass g = {.plan = plan, .in_base = in_base,
                         .k = {out, plan->max_segments, plan->chunk_bytes}, .c0 = c0,
                         .m = n_cols - c0 < SEGMENT_PASS_COLUMNS ? n_cols - c0 : SEGMENT_PASS_COLUMNS};
    for (int j = 0; j < g.m; j++) {
      const struct funnel__out_column *oc = &plan->columns[c0 + j];
      g.o[j] = (struct column_out){.f = &plan->schema->fields[c0 + j], .oc = oc,
                                   .validity = out_base + (uint64_t)oc->validity,
                                   .offsets = out_base + (uint64_t)oc->offsets,
                                   .data = out_base + (uint64_t)oc->data};
    }
    int64_t done = -1; /* written in parallel: the count */
    if (out != NULL && plan->n_parts > FUNNEL__PLAN_TASK &&
        plan->n_parts * g.m >= FUNNEL__PLAN_PARALLEL_MIN)
      done = emit_parallel(&g, n);
    n = done >= 0 ? done : emit_parts(&g, &g.k, g.o, 0, plan->n_parts, n);
    for (int j = 0; j < g.m; j++) n = emit_column_end(&g.k, n, &g.o[j], g.o[j].oc->length);
  }
  return n;
}
