/* segment.h: the segment table, built on the host by the plan and run by the
 * concat kernel of each backend (the cpu loop, the cuda kernel). Plain C
 * that nvcc compiles too.
 *
 * One segment moves one piece (one column of one record batch) of one
 * buffer kind into its place in the output. Segments of one launch write
 * disjoint byte ranges, except bit segments, which write disjoint BIT
 * ranges and may share a byte (or word) with a neighbour: a bit segment
 * must change only the bits of its range. */
#ifndef FUNNEL_SEGMENT_H
#define FUNNEL_SEGMENT_H

#include <stdint.h>

enum funnel__segment_kind {
  /* copy `count` bytes from src to dst */
  FUNNEL_SEG_BYTES = 0,
  /* copy `count` bits from src (starting at bit `src_bit`) to the bit
   * buffer at dst, starting at bit `dst_bit` */
  FUNNEL_SEG_BITS = 1,
  /* set `count` bits of the bit buffer at dst, from bit `dst_bit`, to 1
   * (a piece without a validity buffer: all valid) */
  FUNNEL_SEG_ONES = 2,
  /* clear `count` bits at dst from bit `dst_bit` (padding after the last
   * row, so the output is deterministic) */
  FUNNEL_SEG_ZEROS = 3,
  /* dst[k] = src[k] + value for k < count, 32-bit offsets (value is the
   * rebase: output char base minus the piece's first offset) */
  FUNNEL_SEG_OFFSETS32 = 4,
  /* the same with 64-bit offsets */
  FUNNEL_SEG_OFFSETS64 = 5,
  /* store `value` as one 32-bit integer at dst (the final offset) */
  FUNNEL_SEG_PUT32 = 6,
  /* store `value` as one 64-bit integer at dst */
  FUNNEL_SEG_PUT64 = 7
};

/* 32 bytes: a read of many small partitions writes and uploads several
 * segments a partition and column, about as many bytes as the data. */
struct funnel__segment {
  uint64_t src;     /* device address of the source, 0 when none */
  uint64_t dst;     /* device address of the destination */
  union {           /* by kind */
    uint64_t dst_bit; /* first output bit (bit kinds) */
    int64_t value;    /* rebase (offsets) or stored value (put) */
  };
  /* bytes, bits or values, by kind: the plan cuts pieces into segments of
   * at most FUNNEL__SEGMENT_CHUNK_MAX bytes, 8 times as many bits */
  uint32_t count;
  uint16_t kind;    /* enum funnel__segment_kind */
  uint16_t src_bit; /* first source bit (FUNNEL_SEG_BITS), 0 to 7 */
};

/* the host writes what each kernel reads: one layout for gcc and nvcc */
#ifdef __cplusplus
static_assert(sizeof(struct funnel__segment) == 32, "a segment is 32 bytes");
#else
_Static_assert(sizeof(struct funnel__segment) == 32, "a segment is 32 bytes");
#endif

#endif
