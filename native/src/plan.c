/* plan.c: schema checks, exclusive scans, output layout, segment table. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "workers.h"

/* A string column of one batch whose interior offsets are still to check. */
struct funnel__offsets_job {
  int64_t part, batch;
  int col;
};

struct offsets_check {
  const struct funnel__schema *schema;
  const struct funnel__partition *parts;
  const struct funnel__offsets_job *jobs;
  int64_t per_task; /* jobs per task */
  int64_t n_jobs;
  _Atomic int64_t first_bad; /* the lowest failing job, or n_jobs */
};

static void check_offsets_task(void *ctx, int64_t task) {
  struct offsets_check *c = ctx;
  const int64_t end = (task + 1) * c->per_task < c->n_jobs ? (task + 1) * c->per_task : c->n_jobs;
  for (int64_t k = task * c->per_task; k < end; k++) {
    if (k >= atomic_load(&c->first_bad)) return; /* a lower one failed already */
    const struct funnel__offsets_job *j = &c->jobs[k];
    const struct funnel__partition *part = &c->parts[j->part];
    if (funnel__piece_check_offsets(c->schema, part, &part->batches[j->batch], j->col, j->part,
                                    NULL) != FUNNEL_OK) {
      int64_t seen = atomic_load(&c->first_bad);
      while (k < seen && !atomic_compare_exchange_weak(&c->first_bad, &seen, k)) {
      }
      return;
    }
  }
}

/* Checks every interior string offset, on the shared host threads when
 * there are many; the error is the one of the first bad piece in
 * partition order, as a serial check would give. */
static int check_all_offsets(const struct funnel__schema *schema,
                             const struct funnel__partition *parts, const struct funnel__offsets_job *jobs,
                             int64_t n_jobs, int64_t n_offsets, struct funnel_error *error) {
  if (n_jobs == 0) return FUNNEL_OK;
  struct offsets_check c = {.schema = schema, .parts = parts, .jobs = jobs, .n_jobs = n_jobs};
  atomic_init(&c.first_bad, n_jobs);
  /* tasks of ~256 Ki offsets: below that a thread costs more than it saves */
  const int64_t per_offsets = (int64_t)1 << 18;
  int64_t tasks = n_offsets / per_offsets + 1;
  if (tasks > n_jobs) tasks = n_jobs;
  c.per_task = (n_jobs + tasks - 1) / tasks;
  funnel__parallel_for((n_jobs + c.per_task - 1) / c.per_task, check_offsets_task, &c);
  const int64_t bad = atomic_load(&c.first_bad);
  if (bad == n_jobs) return FUNNEL_OK;
  const struct funnel__offsets_job *j = &jobs[bad];
  return funnel__piece_check_offsets(schema, &parts[j->part], &parts[j->part].batches[j->batch],
                                     j->col, j->part, error);
}

int funnel__plan_check_offsets(const struct funnel__plan *plan, struct funnel_error *error) {
  return check_all_offsets(plan->schema, plan->parts, plan->offset_jobs, plan->n_offset_jobs,
                           plan->n_offsets, error);
}

static int64_t bitmap_bytes(int64_t rows) { return (rows + 7) / 8; }

/* Reserves `size` bytes at a 64-byte boundary of a layout; returns the
 * offset. */
static int64_t carve(int64_t *cursor, int64_t size) {
  int64_t at = *cursor;
  *cursor = funnel__align_up(at + size, FUNNEL__ALIGN);
  return at;
}

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

int funnel__plan_build(const struct funnel__schema *schema, struct funnel__partition *parts,
                       int64_t n_parts, struct funnel__arena *arena, struct funnel__plan *out,
                       struct funnel_error *error) {
  memset(out, 0, sizeof(*out));
  const bool from_reader = schema != NULL;
  FUNNEL_RETURN_NOT_OK(pick_schema(&schema, parts, n_parts, error));
  char source[64] = "the reader's schema";
  for (int64_t p = 0; !from_reader && p < n_parts; p++)
    if (parts[p].schema == schema) {
      snprintf(source, sizeof(source), "partition %lld's", (long long)p);
      break;
    }
  const int n_cols = schema->n_fields;
  struct funnel__out_column *cols = funnel__arena_calloc(arena, (size_t)(n_cols ? n_cols : 1), sizeof(*cols));
  int64_t *chars = funnel__arena_calloc(arena, (size_t)(n_cols ? n_cols : 1), sizeof(int64_t));
  if (cols == NULL || chars == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");

  int64_t rows = 0, batches = 0, pieces = 0;
  int n_var = 0;
  for (int c = 0; c < n_cols; c++) n_var += schema->fields[c].offset_width != 0;
  int64_t n_jobs = 0, jobs_cap = 0, n_offsets = 0;
  struct funnel__offsets_job *jobs = NULL;
  for (int64_t p = 0; p < n_parts; p++) {
    struct funnel__partition *part = &parts[p];
    if (part->schema != NULL && part->schema != schema) {
      char why[256];
      int at = funnel__schema_diff(schema, part->schema, why, sizeof(why));
      if (at >= 0)
        return funnel__error_set(error, FUNNEL_ERR_SCHEMA_MISMATCH, p, at, part->schema_offset,
                                 "partition %lld: schema differs from %s: %s", (long long)p,
                                 source, why);
    }
    for (int64_t b = 0; b < part->n_batches; b++) {
      struct funnel__batch *batch = &part->batches[b];
      FUNNEL_RETURN_NOT_OK(funnel__batch_bind_ends(schema, part, batch, p, arena, error));
      batches++;
      if (batch->rows == 0) continue;
      pieces += n_cols;
      if (n_var > 0 && n_jobs + n_var > jobs_cap) {
        const int64_t cap = jobs_cap ? 2 * jobs_cap : 64 + n_var;
        struct funnel__offsets_job *nj = funnel__arena_alloc(arena, (size_t)cap * sizeof(*nj));
        if (nj == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
        if (n_jobs) memcpy(nj, jobs, (size_t)n_jobs * sizeof(*nj));
        jobs = nj;
        jobs_cap = cap;
      }
      for (int c = 0; c < n_cols && n_var > 0; c++)
        if (schema->fields[c].offset_width != 0) {
          jobs[n_jobs++] = (struct funnel__offsets_job){p, b, c};
          n_offsets += batch->rows;
        }
      for (int c = 0; c < n_cols; c++) {
        const struct funnel__piece *pc = &batch->pieces[c];
        cols[c].null_count += pc->null_count;
        chars[c] += pc->last_offset - pc->first_offset;
      }
      if (funnel__add_overflows(rows, batch->rows, &rows) || rows > FUNNEL__MAX_ROWS)
        return funnel__error_set(error, FUNNEL_ERR_LIMIT, p, -1, batch->message_offset,
                                 "partition %lld: the table would have more than %lld rows",
                                 (long long)p, (long long)FUNNEL__MAX_ROWS);
    }
  }

  /* the interior offsets are checked later (funnel__plan_check_offsets),
   * while the copies run */
  out->offset_jobs = jobs;
  out->n_offset_jobs = n_jobs;
  out->n_offsets = n_offsets;

  int64_t size = 0;
  for (int c = 0; c < n_cols; c++) {
    const struct funnel__field *f = &schema->fields[c];
    struct funnel__out_column *oc = &cols[c];
    oc->validity = oc->offsets = oc->data = -1;
    if (oc->null_count > 0) {
      oc->validity_size = bitmap_bytes(rows);
      oc->validity = carve(&size, oc->validity_size);
    }
    if (f->offset_width != 0) {
      if (f->offset_width == 4 && chars[c] > INT32_MAX)
        return funnel__error_set(error, FUNNEL_ERR_LIMIT, -1, c, -1,
                                 "column %d '%s': %lld bytes of %s data overflow its 32-bit "
                                 "offsets; write the column as %s",
                                 c, f->name, (long long)chars[c], funnel_type_name(f->type_id),
                                 f->type_id == FUNNEL_TYPE_UTF8 ? "large_utf8" : "large_binary");
      oc->offsets_size = (rows + 1) * f->offset_width;
      oc->offsets = carve(&size, oc->offsets_size);
      oc->data_size = chars[c];
    } else if (f->type_id == FUNNEL_TYPE_BOOL) {
      oc->data_size = bitmap_bytes(rows);
    } else if (funnel__mul_overflows(rows, f->byte_width, &oc->data_size)) {
      return funnel__error_set(error, FUNNEL_ERR_LIMIT, -1, c, -1,
                               "column %d '%s': %lld rows overflow", c, f->name, (long long)rows);
    }
    oc->data = carve(&size, oc->data_size);
    if (size > FUNNEL__MAX_OUTPUT_BYTES)
      return funnel__error_set(error, FUNNEL_ERR_LIMIT, -1, c, -1,
                               "column %d '%s': the table of %lld rows would need more than "
                               "%lld bytes of device memory",
                               c, f->name, (long long)rows, (long long)FUNNEL__MAX_OUTPUT_BYTES);
  }

  out->schema = schema;
  out->parts = parts;
  out->n_parts = n_parts;
  out->rows = rows;
  out->batches = batches;
  out->columns = cols;
  out->out_size = size;
  /* Large pieces are cut so that one launch spreads them over many blocks
   * of the kernel (a block runs a segment); a cut changes nothing else.
   * 64 KiB, as measured on the H100 (bench/RESULTS.md, 2026-11-23): 2 x 10
   * x 1M int64 ran its kernel in 0.139 ms (84% of a d2d copy of the result)
   * against 0.145 at 256 KiB and 0.284 at 1 MiB, where 150 blocks could not
   * fill 132 SMs. FUNNEL_SEGMENT_CHUNK_BYTES changes the size, for tests of
   * the cuts and for the benchmark. */
  const char *chunk = getenv("FUNNEL_SEGMENT_CHUNK_BYTES");
  out->chunk_bytes = chunk != NULL && atoll(chunk) > 0 ? atoll(chunk) : (int64_t)64 << 10;
  /* Room for the table without walking it: at most three segments a piece
   * (validity, offsets, data) and three a column (padding bits twice, the
   * last offset), plus one per cut. emit cuts a piece of b output bytes
   * into chunks of at least chunk_bytes - 7 bytes (offsets go by whole
   * values of up to 8 bytes), so at most b / (chunk_bytes - 7) times, and
   * the pieces' bytes sum to at most out_size. */
  const int64_t least_chunk = out->chunk_bytes > 8 ? out->chunk_bytes - 7 : 1;
  out->max_segments = 3 * pieces + 3 * (int64_t)n_cols + size / least_chunk + 1;
  /* an empty read counts exactly, so that one with nothing to write (no
   * string column) enqueues nothing at all */
  if (rows == 0 || n_cols == 0) out->max_segments = funnel__plan_segments(out, NULL, 0, NULL);
  return FUNNEL_OK;
}

/* Where plan_segments writes: the table (NULL: nowhere) and its room. */
struct sink {
  struct funnel__segment *out;
  int64_t cap;
  int64_t unit; /* cut pieces into chunks of about this many output bytes */
};

/* Appends `s` to the sink, cut into chunks of about sink->unit bytes of
 * output; returns the new count. Never writes past the room: a count over
 * it tells the caller. */
static inline int64_t emit(const struct sink *k, int64_t n, const struct funnel__segment *s) {
  const int64_t unit = k->unit;
  int64_t chunk;
  switch (s->kind) {
    case FUNNEL_SEG_BYTES: chunk = unit; break;
    case FUNNEL_SEG_OFFSETS32: chunk = unit / 4 > 0 ? unit / 4 : 1; break;
    case FUNNEL_SEG_OFFSETS64: chunk = unit / 8 > 0 ? unit / 8 : 1; break;
    case FUNNEL_SEG_BITS:
    case FUNNEL_SEG_ONES:
    case FUNNEL_SEG_ZEROS: chunk = unit * 8 + 1; break; /* cuts at any bit, not only at bytes */
    default: chunk = INT64_MAX; break;
  }
  const int64_t count = (int64_t)s->count;
  if (count <= chunk) {
    if (k->out != NULL && n < k->cap) k->out[n] = *s;
    return n + 1;
  }
  const int64_t width = s->kind == FUNNEL_SEG_OFFSETS32 ? 4 : s->kind == FUNNEL_SEG_OFFSETS64 ? 8 : 1;
  const int bits = s->kind == FUNNEL_SEG_BITS || s->kind == FUNNEL_SEG_ONES || s->kind == FUNNEL_SEG_ZEROS;
  for (int64_t done = 0; done < count; done += chunk, n++) {
    if (k->out == NULL || n >= k->cap) continue;
    struct funnel__segment c = *s;
    c.count = (uint64_t)(count - done < chunk ? count - done : chunk);
    if (bits) {
      const uint64_t from = s->src_bit + (uint64_t)done;
      c.src = s->src ? s->src + from / 8 : 0;
      c.src_bit = (uint32_t)(from % 8);
      c.dst_bit = s->dst_bit + (uint64_t)done;
    } else {
      c.src = s->src + (uint64_t)(done * width);
      c.dst = s->dst + (uint64_t)(done * width);
    }
    k->out[n] = c;
  }
  return n;
}

int64_t funnel__plan_segments(const struct funnel__plan *plan, const uint64_t *in_base,
                              uint64_t out_base, struct funnel__segment *out) {
  const struct sink k = {out, plan->max_segments, plan->chunk_bytes};
  int64_t n = 0;
  const int64_t rows = plan->rows;
  for (int c = 0; c < plan->schema->n_fields; c++) {
    const struct funnel__field *f = &plan->schema->fields[c];
    const struct funnel__out_column *oc = &plan->columns[c];
    const uint64_t validity = out_base + (uint64_t)oc->validity;
    const uint64_t offsets = out_base + (uint64_t)oc->offsets;
    const uint64_t data = out_base + (uint64_t)oc->data;
    int64_t row = 0, char_base = 0;
    for (int64_t p = 0; p < plan->n_parts; p++) {
      const struct funnel__partition *part = &plan->parts[p];
      const uint64_t in = in_base != NULL ? in_base[p] : 0;
      for (int64_t b = 0; b < part->n_batches; b++) {
        const struct funnel__piece *pc = &part->batches[b].pieces[c];
        const int64_t len = pc->length;
        if (len == 0) continue;
        if (oc->null_count > 0) {
          struct funnel__segment s = {.dst = validity, .count = (uint64_t)len,
                                      .dst_bit = (uint64_t)row};
          if (pc->validity >= 0) {
            s.kind = FUNNEL_SEG_BITS;
            s.src = in + (uint64_t)pc->validity;
          } else {
            s.kind = FUNNEL_SEG_ONES;
          }
          n = emit(&k, n, &s);
        }
        if (f->offset_width != 0) {
          n = emit(&k, n, &(struct funnel__segment){
              .kind = f->offset_width == 4 ? FUNNEL_SEG_OFFSETS32 : FUNNEL_SEG_OFFSETS64,
              .src = in + (uint64_t)pc->offsets,
              .dst = offsets + (uint64_t)(row * f->offset_width),
              .count = (uint64_t)len,
              .value = char_base - pc->first_offset});
          int64_t bytes = pc->last_offset - pc->first_offset;
          if (bytes > 0)
            n = emit(&k, n, &(struct funnel__segment){.kind = FUNNEL_SEG_BYTES,
                                                .src = in + (uint64_t)(pc->data + pc->first_offset),
                                                .dst = data + (uint64_t)char_base,
                                                .count = (uint64_t)bytes});
          char_base += bytes;
        } else if (f->type_id == FUNNEL_TYPE_BOOL) {
          n = emit(&k, n, &(struct funnel__segment){.kind = FUNNEL_SEG_BITS,
                                              .src = in + (uint64_t)pc->data,
                                              .dst = data,
                                              .dst_bit = (uint64_t)row,
                                              .count = (uint64_t)len});
        } else if (f->byte_width > 0) {
          n = emit(&k, n, &(struct funnel__segment){.kind = FUNNEL_SEG_BYTES,
                                              .src = in + (uint64_t)pc->data,
                                              .dst = data + (uint64_t)(row * f->byte_width),
                                              .count = (uint64_t)(len * f->byte_width)});
        }
        row += len;
      }
    }
    const int64_t pad = oc->validity_size * 8 - rows; /* bits after the last row */
    if (oc->null_count > 0 && pad > 0)
      n = emit(&k, n, &(struct funnel__segment){.kind = FUNNEL_SEG_ZEROS, .dst = validity,
                                          .dst_bit = (uint64_t)rows, .count = (uint64_t)pad});
    if (f->type_id == FUNNEL_TYPE_BOOL && oc->data_size * 8 > rows)
      n = emit(&k, n, &(struct funnel__segment){.kind = FUNNEL_SEG_ZEROS, .dst = data,
                                          .dst_bit = (uint64_t)rows,
                                          .count = (uint64_t)(oc->data_size * 8 - rows)});
    if (f->offset_width != 0)
      n = emit(&k, n, &(struct funnel__segment){
          .kind = f->offset_width == 4 ? FUNNEL_SEG_PUT32 : FUNNEL_SEG_PUT64,
          .dst = offsets + (uint64_t)(rows * f->offset_width),
          .value = char_base});
  }
  return n;
}
