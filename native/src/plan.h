/* plan.h: from parsed partitions to sizes and the segment table. Host only:
 * nothing here knows a backend, so planning cannot make a device call. */
#ifndef FUNNEL_PLAN_H
#define FUNNEL_PLAN_H

#include "format.h"
#include "segment.h"

/* Where one output column's buffers go, as byte offsets within the read's
 * output allocation (-1 when absent), and their meaningful sizes. */
struct funnel__out_column {
  int64_t length; /* rows: the table's for a top-level column, a child's its own */
  int64_t null_count;
  int64_t validity, validity_size;
  int64_t offsets, offsets_size;
  int64_t data, data_size;
};

struct funnel__check_job;

struct funnel__plan {
  const struct funnel__schema *schema;
  const struct funnel__partition *parts;
  int64_t n_parts;
  int64_t rows;
  int64_t batches;
  struct funnel__out_column *columns; /* schema->n_fields */
  int64_t out_size;       /* bytes of the output allocation */
  int64_t max_segments;   /* room to reserve for the segment table */
  int64_t chunk_bytes;    /* pieces larger than this are cut into segments this size */
  /* the batches whose pieces funnel__plan_check_pieces checks */
  const struct funnel__check_job *check_jobs;
  int64_t n_check_jobs, check_work;
  /* the device path (dread.c): the caller's partitions, not parsed (parts
   * is NULL); every non-empty one goes up and the device parses it */
  const struct funnel_partition *raw;
};

/* Checks every partition's schema against `schema` (the reader's, or when
 * NULL the first partition's that has one), binds every batch (so the first
 * and last offset of every string piece are in bounds), sums null counts
 * and string bytes, lays out the output and the scratch. `parts` have been
 * through funnel__partition_parse. Pieces of more than `chunk_bytes` bytes
 * are cut into segments of that size (<= 0: FUNNEL__SEGMENT_CHUNK_BYTES; at
 * most FUNNEL__SEGMENT_CHUNK_MAX). The interior string offsets are left to
 * funnel__plan_check_pieces. */
int funnel__plan_build(const struct funnel__schema *schema,
                       struct funnel__partition *parts, int64_t n_parts,
                       int64_t chunk_bytes, struct funnel__arena *arena,
                       struct funnel__plan *out, struct funnel_error *error);

/* Lays the output out, column after column at 64-byte boundaries:
 * cols[c] (whose length and null_count are set) gets its buffers' offsets
 * and sizes from them and chars[c], its string bytes (a list's: its
 * child's rows); *size is the allocation's. The read's limits (32-bit
 * offsets, output size) are checked here. */
int funnel__plan_layout(const struct funnel__schema *schema, struct funnel__out_column *cols,
                        const int64_t *chars, int64_t *size, struct funnel_error *error);

/* Checks what grows with the rows in every planned piece (funnel__piece_check:
 * interior string offsets rising, null counts equal to the zero bits of a
 * validity buffer that has bytes), on the shared host threads when there
 * are many; the error is the first bad piece's in partition order. Host
 * memory only: a read runs it while its copies are in flight, since the
 * kernel only adds a constant to each offset, copies validity bits as they
 * are, and reads no data by either. */
int funnel__plan_check_pieces(const struct funnel__plan *plan, struct funnel_error *error);

/* Writes the segment table into `out` (room for plan->max_segments; NULL
 * only counts) and returns the number of segments; never writes past the
 * room, and a count over it is a bug the caller reports. in_base[p] is the device address at
 * which partition p's bytes start (a copy, or the pinned host bytes
 * themselves); out_base the output allocation's. */
int64_t funnel__plan_segments(const struct funnel__plan *plan, const uint64_t *in_base,
                              uint64_t out_base, struct funnel__segment *out);

#endif
