/* dpath.h: the device path of a read. The partitions go up as raw bytes
 * with a table of (address, length); the device parses every partition's
 * IPC headers, sums rows, null counts and string bytes, lays the output
 * out from those sums, and concatenates from what it parsed, with no step
 * of the host between. The host does nothing per partition but place its
 * bytes. Plain C that nvcc compiles too: native/cuda/concat.cu runs the
 * parse and the concat a group of lanes a partition or a piece, the
 * cpu backend both one lane at a time, so both backends run the same
 * parser, layout and concat.
 *
 * The device parser is strict where the host parser (format.c) is
 * general: it takes a partition only when every message is a Schema
 * message byte for byte the read's, an end-of-stream marker, or a
 * RecordBatch (at most one a partition) that passes every check the host
 * parser and plan make (framing, flatbuffer bounds, metadata version,
 * buffers inside the body, field nodes and buffer counts against the
 * schema, buffer sizes, string offsets first, last and rising, null counts
 * against the validity bits). Anything else (an error, a schema written
 * differently, several batches, an IPC file, bodies of two codecs) leaves
 * the read to the host path, which reads the same bytes again and gives its own
 * answer or error. So a partition the device path takes is one the host
 * path takes, with the same table: test_parity and the fuzz harness hold
 * the two to that.
 *
 * A read of LZ4_FRAME or ZSTD bodies (args.zmode; one codec a read,
 * args.zcodec) makes two passes of the parse. The first (FUNNEL_DP_UNPACK)
 * reads every buffer's 8-byte prefix and makes it a job of the codec's
 * decoder (lz4dec.h, zstddec.h): a frame decodes into the read's
 * decoded buffers, at a place the pass reserves (summary.zbytes); raw bytes
 * (prefix -1) and empty buffers are read where they lie. The host then
 * allocates the decoded buffers and the output, the decoder runs, and the
 * second pass (FUNNEL_DP_DECODED) parses as a plain read does, each buffer
 * read where its job says. A buffer the host would refuse (a prefix that
 * no frame of its bytes can reach, too short for one) or that fails to
 * decode leaves its partition to the host path, which names what is wrong.
 * The decoders verify each frame's checksums as liblz4 and libzstd do
 * (every job here decodes whole frames).
 *
 * A small read of compressed bodies makes both passes in one go, with no wait
 * between: the host allocates the decoded buffers (args.zguess bytes, but
 * below) and the output from a guess before the first pass, and the second pass runs
 * on a second args (its own summary) gated by the first's summary
 * (args.gate, funnel__dp_shut): when the first pass left a partition or
 * its decoded buffers outgrow the guess, every stage after it does
 * nothing, and the host, seeing no summary come back, goes on as a read
 * of two passes does from the first pass's summary. Where neither the
 * device's last read of the codec nor the partition the template was made
 * from held a frame (every buffer raw, as one writer stores partitions of
 * a row or a few), the read guesses none does and makes one pass
 * (FUNNEL_DP_RAW), as a plain read does, with no decoder: each buffer
 * read after its prefix. A frame leaves its partition (summary.zframes),
 * and the host goes on as a read of two passes from its first pass.
 *
 * Most partitions of a read come from one writer and look alike but for
 * their values, so the parse first tries the read's template (struct
 * funnel__dp_template, built on the host from the first partition that
 * gives one, with the walk the parse makes): a partition whose bytes match
 * it under its mask is read at the template's positions and its values
 * checked as the walk checks them; any other is walked message by message.
 * test_dpath holds the two ways to one answer. */
#ifndef FUNNEL_DPATH_H
#define FUNNEL_DPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "flatbuf.h"
#include "lz4dec.h"
#include "tuning.h"

/* Whether a stage runs a read with nested columns (args.slices). The flat
 * kernels (concat.cu) compile this file with FUNNEL_DP_FLAT_ONLY, so that
 * the nested code is not in them (its registers and code slowed flat reads
 * 2 to 7%); the nested kernels are a second compilation of it. */
#undef FUNNEL_DP_NESTED
#if defined(FUNNEL_DP_FLAT_ONLY)
#define FUNNEL_DP_NESTED(a) 0
#else
#define FUNNEL_DP_NESTED(a) ((a)->slices != 0)
#endif
/* a launch's stage for a nested read: the nested kernels (cuda) */
#define FUNNEL_DP_STAGE_NESTED 8
/* a concat's for a flat read with string columns: the cuda kernel
 * compiled for more resident threads (dpath_kernels.cuh) */
#define FUNNEL_DP_STAGE_VAR 32
/* a parse's or a scan's of a gated pass (args.gate, funnel__dp_shut): the
 * cuda kernels read the gate only then, so that no other read's kernels
 * wait on that load before their first (in an A/B on the H200, reads of
 * 200 and 1,000 partitions 3% slower when every launch read it) */
#define FUNNEL_DP_STAGE_GATED 64

#if defined(__CUDACC__)
#define FUNNEL_DP static __device__ __forceinline__
/* a function with more than one caller, compiled once: the parse is
 * bound by fetching its instructions, a kernel running once per SM */
#define FUNNEL_DP_ONCE static __device__ __noinline__
#else
#define FUNNEL_DP static inline
#define FUNNEL_DP_ONCE static inline
#endif

/* how a column's values lie */
enum funnel__dp_kind {
  FUNNEL_DP_FIXED = 0, /* `width` bytes a value */
  FUNNEL_DP_BOOL = 1,  /* one bit a value */
  FUNNEL_DP_VAR32 = 2, /* 32-bit offsets and bytes */
  FUNNEL_DP_VAR64 = 3, /* 64-bit offsets and bytes */
  /* nested columns (a read whose args.slices is set) */
  FUNNEL_DP_LIST32 = 4, /* list, map: 32-bit offsets into the child's rows */
  FUNNEL_DP_LIST64 = 5, /* large_list */
  FUNNEL_DP_NEST = 6    /* struct, fixed_size_list: a validity only */
};

/* What the stages are (funnel_backend.launch_dpath). The stage that
 * completes the scan (the parse when it scans, else the scan) lays the
 * output out (funnel__dp_layout), so the concat follows with no host step
 * between. */
enum funnel__dp_stage {
  /* n partitions from the launch's first: parse each (funnel__dp_parse),
   * m lanes a partition (args.parse_lanes; the cuda kernel then sums the
   * tiles of the scan's arrays); when FUNNEL__DP_PARSE_SCANS(args.n_parts,
   * first, n) it parses them all, scans them too, and lays the output out.
   * Several launches may parse a read's partitions in parts (dread.c,
   * while they are copied), each from a multiple of the tile
   * (FUNNEL__DPATH_THREADS / m partitions). */
  FUNNEL_DP_PARSE = 0,
  /* n arrays (rows, then string bytes per string column) of m values:
   * exclusive scan of each, totals into the summary; then the layout */
  FUNNEL_DP_SCAN = 1,
  /* n items: every (partition, column) piece, then one per column
   * (funnel__dp_piece_copy), m lanes an item (1 to FUNNEL__DPATH_THREADS, a
   * power of two: a group of lanes in one block);
   * then every 32-bit word of the args' bit buffers (funnel__dp_bits_word);
   * nothing unless the layout laid the output out */
  FUNNEL_DP_CONCAT = 2
};

/* Whether a FUNNEL_DP_PARSE launch of `count` partitions from `first`
 * scans too, and no FUNNEL_DP_SCAN follows: it parses the whole read, of at
 * most FUNNEL__DP_PARSE_SCAN_MAX partitions (tuning.h), so its last block
 * to finish sees every partition's sums. A read parsed in parts (while it
 * is copied) is scanned after them. */
#define FUNNEL__DP_PARSE_SCANS(n_parts, first, count) \
  ((first) == 0 && (count) == (n_parts) && (n_parts) <= FUNNEL__DP_PARSE_SCAN_MAX)

/* Lanes a partition of the cuda parse of n partitions (tuning.h,
 * FUNNEL__DP_PARSE_THREADS): a warp for a few thousand, whose lanes
 * shorten a partition's chain of loads; fewer for more, so that the
 * groups fill the device. A block parses FUNNEL__DPATH_THREADS / lanes
 * partitions, the tile of its sums (the args' `tiles`), never more than a
 * tile of the scan (which a block's sum carries into the next ones). */
static inline int funnel__dp_parse_lanes(int64_t n_parts) {
  int lanes = 32;
  while (lanes > FUNNEL__DP_PARSE_MIN_LANES && n_parts > FUNNEL__DP_PARSE_THREADS / lanes) lanes /= 2;
  return lanes;
}

/* Bytes of a message's metadata the cuda parse copies to shared memory (a
 * warp's) before it walks the flatbuffer: walked there, its chain of
 * dependent loads costs tens of cycles a step, not a trip to memory. A
 * longer metadata is walked where it lies. */
#define FUNNEL__DP_STAGE_BYTES 2048

/* What a read's parse does (args.zmode). */
enum funnel__dp_zmode {
  FUNNEL_DP_PLAIN = 0,   /* uncompressed partitions: every buffer where it lies */
  FUNNEL_DP_UNPACK = 1,  /* compressed bodies, first pass: the buffers' jobs, nothing bound */
  FUNNEL_DP_DECODED = 2, /* compressed bodies, second pass: each buffer where its job put it */
  /* compressed bodies in one pass, as a plain read (a small read that
   * guesses it holds no frame): each buffer after its prefix, which must
   * say raw (-1) or empty (0); a frame leaves its partition, counted in
   * summary.zframes, and the read makes the two passes instead */
  FUNNEL_DP_RAW = 3
};

/* Words of each bit buffer: 32 rows a word. */
#define FUNNEL__DP_WORDS(rows) (((rows) + 31) / 32)

struct funnel__dp_column {
  int32_t kind;  /* enum funnel__dp_kind */
  int32_t width; /* FIXED: bytes a value */
  int32_t n_buffers;
  int32_t var;   /* index among the string and list columns, or -1 */
  int32_t buffer; /* its first buffer among a batch's */
  int32_t parent; /* -1: a top-level column */
  /* output buffers (written by funnel__dp_layout), 0 when absent */
  uint64_t validity, offsets, data;
  /* where the column's rows are counted: the table's rows (domain -1), or
   * the child rows of list column `var` == domain, times `mult` (the sizes
   * of the fixed_size_lists between) */
  int64_t mult;
  int32_t domain;
  int32_t list_size; /* NEST: a fixed_size_list's size, 0 for a struct */
  int32_t map_key;   /* 1: a map's keys, never null */
  int32_t pad;
};

/* A nested read's piece (args.slices): the rows of its node the table
 * takes, [start, start + length) of node_length (a list's child: the rows
 * its offsets reach). */
struct funnel__dp_slice {
  int64_t start, length, node_length;
};

/* One partition as the device sees it. */
struct funnel__dp_input {
  uint64_t addr;  /* where its bytes start, readable by the kernels */
  int64_t length; /* 0: an empty partition */
};

/* One column of one partition, as the parse found it: device addresses. */
struct funnel__dp_piece {
  uint64_t validity; /* 0: every row valid */
  uint64_t data;     /* FIXED, BOOL: the values; VAR: the first value's bytes */
  uint64_t offsets;  /* VAR: offsets[0] */
  int64_t first;     /* VAR: offsets[0]'s value */
  int64_t null_count;
};

/* A bit buffer of the output, made by FUNNEL_DP_CONCAT. */
struct funnel__dp_bitbuf {
  uint64_t dst;
  int32_t column;
  int32_t validity; /* 1: the column's validity, 0: its (bool) values */
};

/* What the parse and the scan found, copied back to the host: the header,
 * then null counts per column, then string bytes per string column. */
struct funnel__dp_summary {
  int64_t left;       /* partitions the parse left to the host (0: none) */
  int64_t first_left; /* the lowest of them (n_parts when none) */
  int64_t batches;
  int64_t rows;
  int64_t laid_out;   /* 1: funnel__dp_layout laid the output out, and the
                         concat runs; 0: the read goes to the host path */
  int64_t out_size;   /* the output's bytes, as laid out */
  int64_t blocks_done; /* the cuda scan's blocks that have finished */
  int64_t templated;  /* partitions read by the read's template */
  /* FUNNEL_DP_UNPACK: the decoded buffers' bytes (the frames', each 8-byte
   * aligned); and for the read's stats, the partitions with a compressed
   * batch, their buffers' bytes as given and as decoded, the frames and the
   * bytes those decode to (FUNNEL_DP_RAW: the same counts, and zframes
   * not 0 when it found a frame, which it leaves to the two passes) */
  int64_t zbytes, zparts, zin, zout, zframes, zframe_bytes;
  /* 1 in a summary the host uploads, so that the host's copy of it says
   * whether a stage sent it back (a gated pass whose gate was shut sends
   * nothing) */
  int64_t sent;
};

/* Where a template of n bytes has its mask, after its bytes (8-aligned). */
#define FUNNEL__DP_MASK_AT(n) (((n) + 7) / 8 * 8)

/* A message layout most partitions of a read share (one writer, one
 * schema): the bytes of the first partition that gives one, up to its
 * batch's body (the schema message, the batch message's prefix and
 * metadata), and where the batch's values lie among them. A partition
 * whose bytes match the template's everywhere but at those values has the
 * same flatbuffer, so the parse reads the values where the template says
 * instead of walking it (funnel__dp_template_of builds it with the walk
 * the parse makes). */
struct funnel__dp_template {
  int64_t length;      /* 0: no template */
  int64_t body_length; /* where Message.bodyLength lies (8 bytes) */
  int64_t rows;        /* RecordBatch.length (8 bytes) */
  int64_t nodes;       /* the field nodes, 16 bytes each */
  int64_t buffers;     /* the buffers, 16 bytes each */
  int64_t compressed;  /* 1: the batch's body is compressed (LZ4_FRAME) */
};

/* Everything a stage reads, in device memory. Addresses are uint64_t so
 * that the host and the device see one layout. */
struct funnel__dp_args {
  uint64_t inputs;  /* struct funnel__dp_input[n_parts] */
  uint64_t columns; /* struct funnel__dp_column[n_cols] */
  uint64_t schema;  /* the read's Schema message, schema_length bytes */
  uint64_t pieces;  /* struct funnel__dp_piece[n_parts * n_cols], partition major */
  uint64_t rows;    /* int64_t[n_parts + 1]: rows, scanned into first rows */
  uint64_t chars;   /* int64_t[n_var * (n_parts + 1)]: string bytes, scanned likewise */
  uint64_t summary; /* struct funnel__dp_summary, then int64_t[n_cols + n_var] */
  uint64_t bitbufs; /* struct funnel__dp_bitbuf[n_bitbufs]: up to 2 a column */
  uint64_t out;     /* the output allocation */
  int64_t out_capacity; /* its bytes */
  /* the cuda kernels' scan: per array (as `rows`, then `chars`) the sum of
   * each tile of FUNNEL__DPATH_THREADS / parse_lanes partitions, n_tiles a
   * row */
  uint64_t tiles;
  int64_t n_tiles;
  int64_t parse_lanes; /* funnel__dp_parse_lanes(n_parts) */
  int64_t n_parts;
  int64_t schema_length;
  int64_t max_rows;
  int64_t n_bitbufs; /* written by funnel__dp_layout */
  int32_t n_cols, n_var, n_buffers, pad;
  struct funnel__dp_template tmpl;
  /* the template's bytes (tmpl.length), then from FUNNEL__DP_MASK_AT of
   * that its mask: 0xFF where a partition's byte must equal the
   * template's, 0 at the values */
  uint64_t tmpl_bytes;
  /* where the host reads the summary: the stage that lays the output out
   * writes it there (mapped pinned memory, or the cpu backend's host
   * memory); 0 when the host copies it back itself */
  uint64_t summary_back;
  /* struct funnel__dp_slice[n_parts * n_cols] for a read with nested
   * columns, else 0 */
  uint64_t slices;
  /* a read of compressed bodies: enum funnel__dp_zmode, its jobs (struct
   * funnel__lz4_job[n_parts * n_buffers], partition major; dst an offset
   * in zscratch), and its decoded buffers (FUNNEL_DP_DECODED); zcodec its
   * bodies' codec (FUNNEL__CODEC_LZ4_FRAME 0, FUNNEL__CODEC_ZSTD 1): a
   * body of the other leaves its partition to the host path */
  int64_t zmode;
  int64_t zcodec;
  uint64_t zjobs;
  uint64_t zscratch;
  /* a second pass enqueued with the first (FUNNEL_DP_DECODED): the first
   * pass's summary, and the decoded buffers' room (zscratch's bytes); gate
   * 0 for any other stage (a read's one FUNNEL_DP_RAW pass too) */
  uint64_t gate;
  int64_t zguess;
};

/* Whether a stage of a gated pass does nothing (args.gate): the first pass
 * left partitions to the host, or its decoded buffers do not fit the room
 * made for them. The same for every lane of every stage of the pass. */
FUNNEL_DP bool funnel__dp_shut(const struct funnel__dp_args *a) {
  if (a->gate == 0) return false;
  const struct funnel__dp_summary *g = (const struct funnel__dp_summary *)(uintptr_t)a->gate;
#if defined(__CUDA_ARCH__)
  return g->left != 0 || g->zbytes > a->zguess;
#else
  /* a read that decodes while it copies checks its gate on one stream's
   * thread while a later part's parse adds to it on another (dread.c) */
  return __atomic_load_n(&g->left, __ATOMIC_RELAXED) != 0 ||
         __atomic_load_n(&g->zbytes, __ATOMIC_RELAXED) > a->zguess;
#endif
}

/* Buffer k of partition p's batch in a FUNNEL_DP_DECODED pass: where its
 * bytes lie and how many, as its job says; false when the decoder failed
 * it. */
FUNNEL_DP bool dp_decoded_buffer(const struct funnel__dp_args *a, int64_t p, int k,
                                 const uint8_t **at, int64_t *len) {
  const struct funnel__lz4_job *j =
      &((const struct funnel__lz4_job *)(uintptr_t)a->zjobs)[p * a->n_buffers + k];
  if (j->status != FUNNEL__LZ4_OK) return false;
  *at = (const uint8_t *)(uintptr_t)(j->kind == FUNNEL__LZ4_SKIP ? j->src : a->zscratch + j->dst);
  *len = j->dst_length;
  return true;
}

/* The bytes of the summary: its header, the null counts, the string bytes. */
FUNNEL_DP int64_t funnel__dp_summary_bytes(const struct funnel__dp_args *a) {
  return (int64_t)sizeof(struct funnel__dp_summary) + 8 * (int64_t)(a->n_cols + a->n_var);
}

/* ------------------------------------------------------------ lanes */

/* A stage's item is run by `lanes` lanes at once: a group of 1 to 32
 * lanes of a warp on the device (a power of two, the groups aligned in
 * the warp), one lane on the host. Every lane computes the same control
 * flow, splitting only the loops over rows and bytes. The parse's loops
 * are joined by these, which join the lanes of one group (with one lane
 * they are the identity). */
#if defined(__CUDA_ARCH__)
/* the calling lane's group */
FUNNEL_DP unsigned dp_group(int lanes) {
  return lanes >= 32 ? 0xFFFFFFFFu
                     : ((1u << lanes) - 1u) << ((threadIdx.x & 31u) & ~(unsigned)(lanes - 1));
}
FUNNEL_DP bool dp_all(bool v, int lanes) { return lanes == 1 ? v : __all_sync(dp_group(lanes), v); }
FUNNEL_DP int64_t dp_sum(int64_t v, int lanes) {
  const unsigned group = dp_group(lanes);
  for (int o = lanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(group, v, o);
  return v;
}
FUNNEL_DP uint32_t dp_or(uint32_t v, int lanes) {
  const unsigned group = dp_group(lanes);
  for (int o = lanes / 2; o > 0; o >>= 1) v |= __shfl_xor_sync(group, v, o);
  return v;
}
FUNNEL_DP void dp_add(int64_t *p, int64_t v) {
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
FUNNEL_DP int64_t dp_fetch_add(int64_t *p, int64_t v) {
  return (int64_t)atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
FUNNEL_DP void dp_min(int64_t *p, int64_t v) { atomicMin((long long *)p, (long long)v); }
/* the lanes' writes to shared memory seen by every lane */
FUNNEL_DP void dp_sync(int lanes) { if (lanes > 1) __syncwarp(dp_group(lanes)); }
#define DP_POPC64(x) __popcll(x)
/* a thread issues the loads of 8 iterations before it uses the first
 * (a small partition's few iterations run the rolled remainder, so its
 * parse fetches none of the unrolled copy) */
#define DP_UNROLL _Pragma("unroll 8")
#else
FUNNEL_DP bool dp_all(bool v, int lanes) { (void)lanes; return v; }
FUNNEL_DP int64_t dp_sum(int64_t v, int lanes) { (void)lanes; return v; }
FUNNEL_DP uint32_t dp_or(uint32_t v, int lanes) { (void)lanes; return v; }
/* the cpu backend runs a stage on its stream's one thread; its sums are
 * atomic all the same, as a part's decoding on another stream reads the
 * first pass's summary while a later part is parsed (funnel__dp_shut) */
FUNNEL_DP void dp_add(int64_t *p, int64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
FUNNEL_DP int64_t dp_fetch_add(int64_t *p, int64_t v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
FUNNEL_DP void dp_min(int64_t *p, int64_t v) { if (v < *p) *p = v; }
FUNNEL_DP void dp_sync(int lanes) { (void)lanes; }
#define DP_POPC64(x) __builtin_popcountll(x)
#define DP_UNROLL
#endif

/* ------------------------------------------------------------- parse */

/* A buffer of a compressed batch in a FUNNEL_DP_RAW pass (*at, *len: the
 * buffer with its prefix): its bytes after the prefix when that says raw
 * (-1), none when it says empty (0, and nothing after it); false for any
 * other, a frame (a positive prefix) added to summary.zframes (by every
 * lane that finds it: a mark, not a count), so that the host makes the
 * two passes. */
FUNNEL_DP bool dp_raw_buffer(const struct funnel__dp_args *a, const uint8_t **at, int64_t *len) {
  if (*len == 0) return true;
  const int64_t want = *len < 8 ? -2 : (int64_t)funnel__ld64(*at);
  if (want == -1 || (want == 0 && *len == 8)) {
    *at += 8;
    *len = want == 0 ? 0 : *len - 8;
    return true;
  }
  if (want > 0) dp_add(&((struct funnel__dp_summary *)(uintptr_t)a->summary)->zframes, 1);
  return false;
}

/* A compressed batch's buffers at `buf` in a FUNNEL_DP_RAW pass, counted
 * for the read's stats as dp_batch_unpack counts them: the partition, its
 * buffers' bytes, and those after their prefixes (what a raw or empty
 * buffer decodes to). Every lane of the group calls it; lane 0 adds. A
 * partition the pass then leaves is counted all the same: of a pass that
 * leaves one, the host reads only `left` and `zframes`. */
FUNNEL_DP void dp_count_raw(const struct funnel__dp_args *a, const uint8_t *buf, int lane,
                            int lanes) {
  int64_t in = 0, prefixes = 0;
  for (int32_t k = lane; k < a->n_buffers; k += lanes) {
    const int64_t len = (int64_t)funnel__ld64(buf + 16 * k + 8);
    in += len;
    prefixes += len > 0;
  }
  in = dp_sum(in, lanes);
  prefixes = dp_sum(prefixes, lanes);
  if (lane != 0) return;
  struct funnel__dp_summary *s = (struct funnel__dp_summary *)(uintptr_t)a->summary;
  dp_add(&s->zparts, 1);
  if (in > 0) dp_add(&s->zin, in);
  if (in > 8 * prefixes) dp_add(&s->zout, in - 8 * prefixes);
}

/* Whether n bytes at a and b are equal, the lanes taking 8 bytes each:
 * every load is independent of the others (no early exit), so a thread
 * has many in flight. */
FUNNEL_DP bool dp_equal(const uint8_t *a, const uint8_t *b, int64_t n, int lane, int lanes) {
  uint64_t diff = 0;
  const int64_t step = 8 * (int64_t)lanes;
  if ((((uintptr_t)a | (uintptr_t)b) & 7) == 0) {
    const int64_t words = n / 8;
    DP_UNROLL
    for (int64_t i = lane; i < words; i += lanes)
      diff |= *(const uint64_t *)(a + 8 * i) ^ *(const uint64_t *)(b + 8 * i);
    for (int64_t k = words * 8 + lane; k < n; k += lanes) diff |= (uint64_t)(a[k] ^ b[k]);
  } else {
    for (int64_t i = 8 * (int64_t)lane; i < n; i += step) {
      const int64_t end = i + 8 < n ? i + 8 : n;
      for (int64_t k = i; k < end; k++) diff |= (uint64_t)(a[k] ^ b[k]);
    }
  }
  return dp_all(diff == 0, lanes);
}

/* Zero bits among the first n bits at `bits`. */
FUNNEL_DP int64_t dp_zero_bits(const uint8_t *bits, int64_t n, int lane, int lanes) {
  int64_t ones = 0;
  const int64_t bytes = n / 8;
  DP_UNROLL
  for (int64_t i = lane; i < bytes; i += lanes) ones += DP_POPC64((uint64_t)bits[i]);
  if ((n & 7) && lane == 0) ones += DP_POPC64((uint64_t)(bits[bytes] & ((1u << (n & 7)) - 1u)));
  return n - dp_sum(ones, lanes);
}

/* Zero bits among bits [from, from + n) at `bits` (a nested child's part of
 * its node): a bit at a time, nested reads only. */
FUNNEL_DP int64_t dp_zero_bits_from(const uint8_t *bits, int64_t from, int64_t n, int lane,
                                    int lanes) {
  int64_t zeros = 0;
  for (int64_t k = lane; k < n; k += lanes)
    zeros += ((bits[(from + k) >> 3] >> ((from + k) & 7)) & 1) == 0;
  return dp_sum(zeros, lanes);
}

/* Whether the n + 1 offsets of `width` bytes at o never decrease. */
FUNNEL_DP bool dp_rising(const uint8_t *o, int64_t n, int width, int lane, int lanes) {
  bool ok = true; /* no early exit: the loads stay independent */
  if (width == 4) {
    DP_UNROLL
    for (int64_t k = 1 + lane; k <= n; k += lanes)
      ok &= (int32_t)funnel__ld32(o + 4 * k) >= (int32_t)funnel__ld32(o + 4 * (k - 1));
  } else {
    DP_UNROLL
    for (int64_t k = 1 + lane; k <= n; k += lanes)
      ok &= (int64_t)funnel__ld64(o + 8 * k) >= (int64_t)funnel__ld64(o + 8 * (k - 1));
  }
  return dp_all(ok, lanes);
}

/* Binds column c (`col`) of partition p's batch whose nodes and buffers
 * are at `node` and `buf` (the column's first buffer), body at `body` in
 * the partition (`raw`: a compressed body in a FUNNEL_DP_RAW pass, each
 * buffer after its prefix), as format.c's funnel__batch_bind_ends does; fills the
 * piece and its string bytes (a list's: its child rows); false for
 * anything the host would refuse. In a nested read (FUNNEL_DP_NESTED) a
 * child takes the part of its node its parent's rows reach (bound before
 * it: the columns are depth first), its nulls counted in that part; the
 * flat kernels compile none of that. */
FUNNEL_DP bool dp_bind(const struct funnel__dp_args *a, int64_t p, int c,
                       const struct funnel__dp_column *col, const uint8_t *bytes,
                       int64_t rows, const uint8_t *node, const uint8_t *buf, int64_t body,
                       bool raw, struct funnel__dp_piece *pc, int64_t *chars, int lane,
                       int lanes) {
  const bool nested = FUNNEL_DP_NESTED(a);
  const int64_t node_length = (int64_t)funnel__ld64(node), null_count = (int64_t)funnel__ld64(node + 8);
  int64_t start = 0, length = node_length;
  if (!nested || col->parent < 0) {
    if (length != rows || null_count < 0 || null_count > length) return false;
  } else {
    if (node_length < 0 || node_length > a->max_rows || null_count < 0 || null_count > node_length)
      return false;
    const struct funnel__dp_column *pcol =
        &((const struct funnel__dp_column *)(uintptr_t)a->columns)[col->parent];
    const struct funnel__dp_slice ps =
        ((const struct funnel__dp_slice *)(uintptr_t)a->slices)[p * a->n_cols + col->parent];
    if (pcol->kind == FUNNEL_DP_LIST32 || pcol->kind == FUNNEL_DP_LIST64) {
      start = (pc - c + col->parent)->first;
      length = ((const int64_t *)(uintptr_t)a->chars)[pcol->var * (a->n_parts + 1) + p];
    } else if (pcol->list_size > 0) {
      if (node_length % pcol->list_size != 0 || node_length / pcol->list_size != ps.node_length)
        return false;
      start = ps.start * pcol->list_size;
      length = ps.length * pcol->list_size;
    } else {
      if (node_length != ps.node_length) return false;
      start = ps.start;
      length = ps.length;
    }
    if (start < 0 || length < 0 || start > node_length - length) return false;
  }
  if (nested) /* every lane writes the same, as the pieces */
    ((struct funnel__dp_slice *)(uintptr_t)a->slices)[p * a->n_cols + c] =
        (struct funnel__dp_slice){start, length, node_length};
  const bool part = nested && length != node_length; /* a nested child's part of its node */
  /* the column's buffers: where they lie in the partition, or where a
   * compressed read's decoder put them (device addresses, which the
   * kernels read: the cpu backend's are the host's) */
  const uint8_t *at[3] = {bytes, bytes, bytes};
  int64_t len[3] = {0, 0, 0};
  for (int k = 0; k < col->n_buffers; k++) {
    if (a->zmode == FUNNEL_DP_DECODED) {
      if (!dp_decoded_buffer(a, p, col->buffer + k, &at[k], &len[k])) return false;
    } else {
      at[k] = bytes + body + (int64_t)funnel__ld64(buf + 16 * k);
      len[k] = (int64_t)funnel__ld64(buf + 16 * k + 8);
      if (raw && !dp_raw_buffer(a, &at[k], &len[k])) return false;
    }
  }
  const int64_t bitmap = (node_length + 7) / 8;
  int64_t nulls = null_count;
  pc->validity = 0;
  if (null_count > 0 || len[0] > 0) {
    if (len[0] < bitmap) return false;
    if (part) {
      nulls = len[0] > 0 ? dp_zero_bits_from(at[0], start, length, lane, lanes) : 0;
    } else if (len[0] > 0 && dp_zero_bits(at[0], length, lane, lanes) != null_count) {
      return false;
    }
    if (nulls > 0) pc->validity = (uint64_t)(uintptr_t)at[0];
  }
  if (nested && col->map_key && nulls > 0) return false;
  pc->null_count = nulls;
  if (chars != NULL) *chars = 0;
  pc->offsets = 0;
  pc->first = 0;
  if (nested && col->kind == FUNNEL_DP_NEST) {
    pc->data = 0;
    return true;
  }
  if (col->kind == FUNNEL_DP_FIXED || col->kind == FUNNEL_DP_BOOL) {
    int64_t need = bitmap;
    if (col->kind == FUNNEL_DP_FIXED) {
      /* a top-level column's rows are at most INT64_MAX / 64: only a wider
       * value can overflow; a nested child's node may be longer */
      if ((col->width > 64 || (nested && col->parent >= 0 && col->width > 0)) &&
          node_length > INT64_MAX / col->width)
        return false;
      need = node_length * col->width;
    }
    if (len[1] < need) return false;
    pc->data = (uint64_t)(uintptr_t)at[1];
    if (col->kind == FUNNEL_DP_FIXED) pc->data += (uint64_t)(start * col->width);
    return true;
  }
  const bool list = nested && (col->kind == FUNNEL_DP_LIST32 || col->kind == FUNNEL_DP_LIST64);
  const int w = col->kind == FUNNEL_DP_VAR32 || (nested && col->kind == FUNNEL_DP_LIST32) ? 4 : 8;
  pc->offsets = (uint64_t)(uintptr_t)at[1] + (uint64_t)(start * w);
  pc->data = list ? 0 : (uint64_t)(uintptr_t)at[2];
  if (node_length == 0) return true; /* the offsets buffer may be empty */
  if (node_length + 1 > INT64_MAX / w || len[1] < (node_length + 1) * w) return false;
  const uint8_t *o = at[1] + start * w;
  const int64_t first = w == 4 ? (int32_t)funnel__ld32(o) : (int64_t)funnel__ld64(o);
  const int64_t last = w == 4 ? (int32_t)funnel__ld32(o + 4 * length) : (int64_t)funnel__ld64(o + 8 * length);
  if (first < 0 || last < first || (!list && last > len[2])) return false;
  if (!dp_rising(o, length, w, lane, lanes)) return false;
  pc->first = first;
  if (!list) pc->data += (uint64_t)first;
  *chars = last - first;
  return true;
}

/* The values of a RecordBatch of `rows` rows whose field nodes and
 * buffers lie at `nodes` and `buf`, body at `body` in the partition
 * (`compressed`: a body of args.zcodec, a FUNNEL_DP_RAW pass reading its
 * buffers after their prefixes and counting them for the read's stats):
 * bound column by column into the partition's pieces. A batch of up to
 * FUNNEL__DP_LANE_COLUMN_ROWS rows gives each lane a column of its own
 * (the columns' chains of loads side by side, each lane's loops over rows
 * short); a longer one binds each column with all the lanes. */
FUNNEL_DP_ONCE bool dp_batch_values(const struct funnel__dp_args *a, int64_t p, int compressed,
                                    int64_t rows, const uint8_t *nodes, const uint8_t *buf,
                                    const uint8_t *bytes, int64_t body, int64_t body_length,
                                    struct funnel__dp_piece *pieces, int lane, int lanes) {
  if (rows < 0 || rows > a->max_rows) return false;
  const bool raw = compressed && a->zmode == FUNNEL_DP_RAW;
  bool ok = true; /* no early exit: the lanes join below */
  for (int32_t i = lane; i < a->n_buffers; i += lanes) {
    const int64_t off = (int64_t)funnel__ld64(buf + 16 * i), len = (int64_t)funnel__ld64(buf + 16 * i + 8);
    ok &= !(off < 0 || len < 0 || off > body_length || len > body_length - off);
  }
  if (!dp_all(ok, lanes)) return false;
  if (raw) dp_count_raw(a, buf, lane, lanes);
  const struct funnel__dp_column *cols = (const struct funnel__dp_column *)(uintptr_t)a->columns;
  int64_t *chars = (int64_t *)(uintptr_t)a->chars;
  /* a nested read binds a column after its parent: one at a time */
  const bool by_lane = lanes > 1 && rows <= FUNNEL__DP_LANE_COLUMN_ROWS && !FUNNEL_DP_NESTED(a);
  const int step = by_lane ? lanes : 1;
  for (int base = 0; base < a->n_cols; base += step) {
    const int c = base + (by_lane ? lane : 0);
    if (c < a->n_cols) {
      const struct funnel__dp_column *col = &cols[c];
      int64_t *ch = col->var >= 0 ? &chars[col->var * (a->n_parts + 1) + p] : NULL;
      ok &= dp_bind(a, p, c, col, bytes, rows, nodes + 16 * c, buf + 16 * col->buffer, body, raw,
                    &pieces[c], ch, by_lane ? 0 : lane, by_lane ? 1 : lanes);
    }
    if (!by_lane && !ok) return false;
  }
  dp_sync(lanes); /* the pieces each lane bound, seen by the others */
  return dp_all(ok, lanes);
}

/* A FUNNEL_DP_UNPACK pass over the batch whose buffers lie at `buf`, body
 * at `body` in the partition (`compressed`: a body of args.zcodec): each buffer
 * a job of partition p's in args.zjobs, the frames' places reserved in the
 * decoded buffers (8-byte aligned, summary.zbytes). Raw bytes (prefix -1),
 * an empty buffer and every buffer of an uncompressed body are SKIP jobs
 * where they lie. False for what the host refuses (a buffer outside the
 * body, too short for its prefix, a prefix below -1 or more than its
 * bytes can decode to) and for what this pass leaves to the host: a
 * prefix of 0 with a frame after it. Every lane reads the same; lane 0
 * reserves and writes the jobs. */
FUNNEL_DP_ONCE bool dp_batch_unpack(const struct funnel__dp_args *a, int64_t p, int compressed,
                                    const uint8_t *buf, const uint8_t *bytes, int64_t body,
                                    int64_t body_length, int lane) {
  int64_t need = 0, in = 0, out = 0, frames = 0, frame_bytes = 0;
  for (int32_t k = 0; k < a->n_buffers; k++) {
    const int64_t off = (int64_t)funnel__ld64(buf + 16 * k), len = (int64_t)funnel__ld64(buf + 16 * k + 8);
    if (off < 0 || len < 0 || off > body_length || len > body_length - off) return false;
    if (!compressed || len == 0) continue;
    if (len < 8) return false;
    const int64_t want = (int64_t)funnel__ld64(bytes + body + off);
    in += len;
    if (want == -1) {
      out += len - 8;
      continue;
    }
    if (want < -1 || (want == 0 && len > 8) || want > funnel__max_decoded(a->zcodec, len - 8))
      return false;
    need += (want + 7) / 8 * 8;
    out += want;
    frames += want > 0;
    frame_bytes += want;
  }
  if (lane != 0) return true;
  struct funnel__dp_summary *s = (struct funnel__dp_summary *)(uintptr_t)a->summary;
  int64_t at = need > 0 ? dp_fetch_add(&s->zbytes, need) : 0;
  if (compressed) {
    dp_add(&s->zparts, 1);
    if (in > 0) dp_add(&s->zin, in);
    if (out > 0) dp_add(&s->zout, out);
    if (frames > 0) dp_add(&s->zframes, frames);
    if (frame_bytes > 0) dp_add(&s->zframe_bytes, frame_bytes);
  }
  struct funnel__lz4_job *jobs = (struct funnel__lz4_job *)(uintptr_t)a->zjobs + p * a->n_buffers;
  for (int32_t k = 0; k < a->n_buffers; k++) {
    const int64_t off = (int64_t)funnel__ld64(buf + 16 * k), len = (int64_t)funnel__ld64(buf + 16 * k + 8);
    const uint64_t src = (uint64_t)(uintptr_t)(bytes + body + off);
    const int64_t want = compressed && len > 0 ? (int64_t)funnel__ld64(bytes + body + off) : -2;
    struct funnel__lz4_job j = {src, len, 0, len, FUNNEL__LZ4_SKIP, FUNNEL__LZ4_OK};
    if (want == -1) { /* raw: after the prefix */
      j.src += 8;
      j.src_length = j.dst_length = len - 8;
    } else if (want == 0) { /* empty: the prefix alone */
      j.src_length = j.dst_length = 0;
    } else if (want > 0) {
      j = (struct funnel__lz4_job){src + 8, len - 8, (uint64_t)at, want,
                                   a->zcodec == 0 ? FUNNEL__LZ4_FRAMES : FUNNEL__ZSTD_FRAMES, -1};
      at += (want + 7) / 8 * 8;
    }
    jobs[k] = j;
  }
  return true;
}

/* A batch's values (dp_batch_values), or in a FUNNEL_DP_UNPACK pass its
 * buffers' jobs (dp_batch_unpack). */
FUNNEL_DP bool dp_batch(const struct funnel__dp_args *a, int64_t p, int compressed, int64_t rows,
                        const uint8_t *nodes, const uint8_t *buf, const uint8_t *bytes,
                        int64_t body, int64_t body_length, struct funnel__dp_piece *pieces,
                        int lane, int lanes) {
  if (a->zmode == FUNNEL_DP_UNPACK) {
    if (rows < 0 || rows > a->max_rows) return false;
    return dp_batch_unpack(a, p, compressed, buf, bytes, body, body_length, lane);
  }
  return dp_batch_values(a, p, compressed, rows, nodes, buf, bytes, body, body_length, pieces, lane,
                         lanes);
}

/* The RecordBatch (header table `h`) of the message whose flatbuffer `r`
 * holds: its rows, and where its rows, field nodes and buffers lie in `r`
 * (any 0 when absent); *compressed when its body is; r->bad unless it is
 * one the parse can take (a node a column and the schema's buffers, no
 * compression but, in a read of compressed bodies (args.zmode), its codec
 * (args.zcodec) and the BUFFER method). */
FUNNEL_DP int64_t dp_batch_fields(const struct funnel__dp_args *a, struct funnel__fb *r,
                                  struct funnel__fb_table h, uint32_t *rows_at, uint32_t *nodes,
                                  uint32_t *buffers, int *compressed) {
  uint32_t n_nodes = 0, n_buffers = 0;
  *rows_at = funnel__fb_field(r, h, 0, 8);
  *nodes = funnel__fb_vector(r, h, 1, 16, &n_nodes);
  *buffers = funnel__fb_vector(r, h, 2, 16, &n_buffers);
  const uint32_t compression = funnel__fb_ref(r, h, 3);
  *compressed = compression != 0;
  if (compression != 0) {
    if (a->zmode == FUNNEL_DP_PLAIN) {
      r->bad = true;
    } else { /* the read's codec and method 0 (BUFFER), as the host reads them */
      const struct funnel__fb_table ct = funnel__fb_table_at(r, compression);
      if (funnel__fb_u8(r, ct, 0, 0) != a->zcodec || funnel__fb_u8(r, ct, 1, 0) != 0)
        r->bad = true;
    }
  }
  if ((int64_t)n_nodes != a->n_cols || (int64_t)n_buffers != a->n_buffers) r->bad = true;
  return *rows_at != 0 ? (int64_t)funnel__ld64(r->p + *rows_at) : 0;
}

/* Copies n bytes to `dst`, the lanes taking 8-byte words where the source
 * allows, and joins the lanes. */
FUNNEL_DP void dp_stage(uint8_t *dst, const uint8_t *src, int64_t n, int lane, int lanes) {
  if (((uintptr_t)src & 7) == 0) {
    const int64_t words = n / 8;
    DP_UNROLL
    for (int64_t i = lane; i < words; i += lanes) ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i];
    for (int64_t k = words * 8 + lane; k < n; k += lanes) dst[k] = src[k];
  } else {
    DP_UNROLL
    for (int64_t k = lane; k < n; k += lanes) dst[k] = src[k];
  }
  dp_sync(lanes);
}

/* Whether n bytes at `b` equal the template's `t` wherever its mask `m`
 * is set, the lanes taking 8 bytes each (t and m are 8-byte aligned). */
FUNNEL_DP bool dp_masked_equal(const uint8_t *b, const uint8_t *t, const uint8_t *m, int64_t n,
                               int lane, int lanes) {
  uint64_t diff = 0;
  const int64_t words = n / 8;
  if (((uintptr_t)b & 7) == 0) {
    for (int64_t i = lane; i < words; i += lanes)
      diff |= (((const uint64_t *)b)[i] ^ ((const uint64_t *)t)[i]) & ((const uint64_t *)m)[i];
  } else {
    for (int64_t i = lane; i < words; i += lanes)
      diff |= (funnel__ld64(b + 8 * i) ^ ((const uint64_t *)t)[i]) & ((const uint64_t *)m)[i];
  }
  for (int64_t k = words * 8 + lane; k < n; k += lanes) diff |= (uint64_t)((b[k] ^ t[k]) & m[k]);
  return dp_all(diff == 0, lanes);
}

/* Partition p by its template (a->tmpl), when its bytes match it: 1 if it
 * is taken (rows in *rows), 0 if it is one the host would refuse, -1 if it
 * does not match (the full walk decides). */
FUNNEL_DP int dp_parse_template(const struct funnel__dp_args *a, int64_t p, const uint8_t *bytes,
                                int64_t len, struct funnel__dp_piece *pieces, int64_t *rows,
                                int lane, int lanes) {
  const struct funnel__dp_template t = a->tmpl;
  if (t.length == 0 || len < t.length) return -1;
  const uint8_t *ref = (const uint8_t *)(uintptr_t)a->tmpl_bytes;
  if (!dp_masked_equal(bytes, ref, ref + FUNNEL__DP_MASK_AT(t.length), t.length, lane, lanes))
    return -1;
  const int64_t body = t.length, body_length = (int64_t)funnel__ld64(bytes + t.body_length);
  if (body_length < 0 || body_length > len - body) return 0;
  /* after the body, nothing or an end-of-stream marker; anything else
   * (another batch, another schema) is the full walk's */
  const int64_t end = body + body_length;
  if (end != len && !(len - end == 8 && funnel__ld32(bytes + end) == 0xFFFFFFFFu &&
                      funnel__ld32(bytes + end + 4) == 0))
    return -1;
  *rows = (int64_t)funnel__ld64(bytes + t.rows);
  return dp_batch(a, p, (int)t.compressed, *rows, bytes + t.nodes, bytes + t.buffers, bytes, body,
                  body_length, pieces, lane, lanes);
}

/* Column `col` of a batch of `rows` rows whose field node and buffers
 * (the column's first) are the 64-bit words at `node` and `buf`, its body
 * of body_length bytes at `body` (in the second pass of a compressed
 * read, the buffers where the decoder put them, dp_decoded_buffer): bound
 * into *pc as dp_bind binds a flat column, a lane alone, all but the
 * string offsets' rise (funnel__dp_parse_short checks that with every
 * lane); a string column's bytes in *chars. False for anything dp_bind refuses, and for a value
 * wider than 64 bytes (left to dp_bind, whose bound takes a division). */
FUNNEL_DP bool dp_fast_column(const struct funnel__dp_args *a, int64_t p,
                              const struct funnel__dp_column *col, const uint64_t *node,
                              const uint64_t *buf, const uint8_t *body, int64_t body_length,
                              bool raw, int64_t rows, struct funnel__dp_piece *pc,
                              int64_t *chars) {
  const int64_t null_count = (int64_t)node[1];
  if ((int64_t)node[0] != rows || null_count < 0 || null_count > rows) return false;
  const uint8_t *at[3] = {body, body, body};
  int64_t len[3] = {0, 0, 0};
  for (int k = 0; k < col->n_buffers; k++) {
    const int64_t off = (int64_t)buf[2 * k], n = (int64_t)buf[2 * k + 1];
    if (off < 0 || n < 0 || off > body_length || n > body_length - off) return false;
    at[k] = body + off;
    len[k] = n;
    /* a compressed read's second pass: where the decoder put it (the
     * first pass checked its place in the body, as above) */
    if (a->zmode == FUNNEL_DP_DECODED && !dp_decoded_buffer(a, p, col->buffer + k, &at[k], &len[k]))
      return false;
    if (raw && !dp_raw_buffer(a, &at[k], &len[k])) return false;
  }
  const int64_t bitmap = (rows + 7) / 8;
  pc->validity = 0;
  if (null_count > 0 || len[0] > 0) {
    if (len[0] < bitmap) return false;
    if (len[0] > 0 && dp_zero_bits(at[0], rows, 0, 1) != null_count) return false;
    if (null_count > 0) pc->validity = (uint64_t)(uintptr_t)at[0];
  }
  pc->null_count = null_count;
  pc->offsets = 0;
  pc->first = 0;
  if (col->kind == FUNNEL_DP_FIXED || col->kind == FUNNEL_DP_BOOL) {
    if (col->width > 64) return false;
    if (len[1] < (col->kind == FUNNEL_DP_FIXED ? rows * col->width : bitmap)) return false;
    pc->data = (uint64_t)(uintptr_t)at[1];
    return true;
  }
  const int w = col->kind == FUNNEL_DP_VAR32 ? 4 : 8;
  pc->offsets = (uint64_t)(uintptr_t)at[1];
  pc->data = (uint64_t)(uintptr_t)at[2];
  *chars = 0;
  if (rows == 0) return true; /* the offsets buffer may be empty */
  if (len[1] < (rows + 1) * w) return false;
  const int64_t first = w == 4 ? (int32_t)funnel__ld32(at[1]) : (int64_t)funnel__ld64(at[1]);
  const int64_t last = w == 4 ? (int32_t)funnel__ld32(at[1] + 4 * rows)
                              : (int64_t)funnel__ld64(at[1] + 8 * rows);
  if (first < 0 || last < first || last > len[2]) return false;
  pc->first = first;
  pc->data += (uint64_t)first;
  *chars = last - first;
  return true;
}

/* Partition p of a read of flat columns by the read's template, in short:
 * what funnel__dp_parse does for the partitions of one writer's small
 * batches, with a fraction of its instructions. True when it took the
 * partition (its rows, pieces, string bytes and null counts written, its
 * batch counted, as funnel__dp_parse would; in the first pass of a read of
 * compressed bodies, its buffers' jobs, dp_batch_unpack, whatever its rows;
 * in the second, its decoded buffers bound); false, having written nothing
 * funnel__dp_parse does not write again, when funnel__dp_parse is to read
 * it: no match, an unaligned partition or template, more than
 * FUNNEL__DP_FAST_ROWS rows (but in a first pass), or anything dp_bind or
 * dp_batch_unpack might refuse.
 * The cuda parse of a read of a few hundred partitions is bound by
 * fetching and issuing its instructions (ncu, H100, 200x4x1 mixed: 1,157
 * instructions a warp, 18 cycles each; 654 by this path, whole kernel
 * 21.5 -> 14.3 us); the kernels call this with a constant number of
 * lanes, so that its loops over words and rows have no division in them
 * and its code is short. The template's words are compared 8 bytes a lane
 * and kept in `stage` (8-byte aligned, or NULL: the fields are read where
 * they lie); then each lane binds columns of its own (dp_fast_column) and
 * the lanes check the string offsets together. */
FUNNEL_DP bool funnel__dp_parse_short(const struct funnel__dp_args *a, int64_t p, int lane,
                                      int lanes, uint8_t *stage, int64_t stage_bytes) {
  const struct funnel__dp_template t = a->tmpl;
  const struct funnel__dp_input in = ((const struct funnel__dp_input *)(uintptr_t)a->inputs)[p];
  const uint8_t *bytes = (const uint8_t *)(uintptr_t)in.addr;
  const int64_t T = t.length, len = in.length;
  const bool unpack = a->zmode == FUNNEL_DP_UNPACK;
  if (T == 0 || (t.compressed && a->zmode == FUNNEL_DP_PLAIN) || FUNNEL_DP_NESTED(a) || len < T ||
      (((uintptr_t)bytes | (uintptr_t)T | (uintptr_t)t.body_length | (uintptr_t)t.rows |
        (uintptr_t)t.nodes | (uintptr_t)t.buffers) & 7) != 0)
    return false;
  const uint64_t *b = (const uint64_t *)bytes;
  const uint64_t *ref = (const uint64_t *)(uintptr_t)a->tmpl_bytes;
  const uint64_t *mask = ref + FUNNEL__DP_MASK_AT(T) / 8;
  uint64_t *kept = stage != NULL && T <= stage_bytes ? (uint64_t *)stage : NULL;
  uint64_t diff = 0;
  DP_UNROLL
  for (int64_t i = lane; i < T / 8; i += lanes) {
    const uint64_t v = b[i];
    diff |= (v ^ ref[i]) & mask[i];
    if (kept != NULL) kept[i] = v;
  }
  if (!dp_all(diff == 0, lanes)) return false;
  dp_sync(lanes); /* the kept words seen by every lane */
  const uint64_t *h = kept != NULL ? kept : b;
  const int64_t body_length = (int64_t)h[t.body_length / 8], rows = (int64_t)h[t.rows / 8];
  if (body_length < 0 || body_length > len - T || rows < 0 || rows > a->max_rows ||
      (rows > FUNNEL__DP_FAST_ROWS && !unpack))
    return false;
  /* after the body, nothing or an end-of-stream marker (else the walk's) */
  const int64_t end = T + body_length;
  bool ok = end == len || (len - end == 8 && funnel__ld32(bytes + end) == 0xFFFFFFFFu &&
                           funnel__ld32(bytes + end + 4) == 0);
  /* a compressed read's first pass: the buffers' jobs and the bytes they
   * decode, as the template's general path makes and counts them (rows,
   * batches and null counts are the second pass's) */
  if (unpack)
    return ok && dp_batch_unpack(a, p, (int)t.compressed, (const uint8_t *)(h + t.buffers / 8),
                                 bytes, T, body_length, lane);
  const struct funnel__dp_column *cols = (const struct funnel__dp_column *)(uintptr_t)a->columns;
  struct funnel__dp_piece *pieces = (struct funnel__dp_piece *)(uintptr_t)a->pieces + p * a->n_cols;
  int64_t *chars = (int64_t *)(uintptr_t)a->chars + p;
  const bool raw = t.compressed && a->zmode == FUNNEL_DP_RAW;
  for (int c = lane; c < a->n_cols; c += lanes) {
    const struct funnel__dp_column *col = &cols[c];
    ok &= dp_fast_column(a, p, col, h + t.nodes / 8 + 2 * c, h + t.buffers / 8 + 2 * col->buffer,
                         bytes + T, body_length, raw, rows, &pieces[c],
                         col->var >= 0 ? &chars[col->var * (a->n_parts + 1)] : NULL);
  }
  if (!dp_all(ok, lanes)) return false;
  dp_sync(lanes); /* the pieces each lane bound, seen by the others */
  /* the string offsets never decrease: a column at a time, every lane */
  if (a->n_var > 0 && rows > 0)
    for (int c = 0; c < a->n_cols; c++) {
      const int32_t kind = cols[c].kind;
      if (kind != FUNNEL_DP_VAR32 && kind != FUNNEL_DP_VAR64) continue;
      if (!dp_rising((const uint8_t *)(uintptr_t)pieces[c].offsets, rows,
                     kind == FUNNEL_DP_VAR32 ? 4 : 8, lane, lanes))
        return false;
    }
  /* taken: as funnel__dp_parse ends a partition its template read */
  struct funnel__dp_summary *s = (struct funnel__dp_summary *)(uintptr_t)a->summary;
  int64_t *null_sum = (int64_t *)(s + 1);
  for (int c = lane; c < a->n_cols; c += lanes) /* the columns this lane bound */
    if (pieces[c].null_count != 0) dp_add(&null_sum[c], pieces[c].null_count);
  if (raw) dp_count_raw(a, (const uint8_t *)(h + t.buffers / 8), lane, lanes);
  if (lane == 0) {
    ((int64_t *)(uintptr_t)a->rows)[p] = rows;
    dp_add(&s->batches, 1);
    dp_add(&s->templated, 1);
  }
  return true;
}

/* The message at `pos` of a partition's `len` bytes: its metadata's
 * length, checked to lie in the partition (0: end of stream; -1: not a
 * message this parse reads). */
FUNNEL_DP int64_t dp_message(const uint8_t *bytes, int64_t len, int64_t pos) {
  /* a message with the continuation marker (the host reads the older
   * framing too) */
  if (len - pos < 8 || funnel__ld32(bytes + pos) != 0xFFFFFFFFu) return -1;
  const int32_t meta_len = (int32_t)funnel__ld32(bytes + pos + 4);
  return meta_len < 0 || meta_len > len - pos - 8 ? -1 : meta_len;
}

/* The Message table of metadata `r`, its header table in *h, and the
 * header's position (0 when absent); r->bad unless it is a V4 or V5
 * RecordBatch whose body lies inside the partition's `len` bytes. */
FUNNEL_DP uint32_t dp_batch_message(struct funnel__fb *r, int64_t body, int64_t len,
                                    struct funnel__fb_table *h, uint32_t *body_at) {
  struct funnel__fb_table msg = {0, 0, 0, 0};
  if (funnel__fb_in(r, 0, 4)) msg = funnel__fb_table_at(r, funnel__ld32(r->p));
  const int32_t version = funnel__fb_i16(r, msg, 0, 0);
  const uint32_t type = funnel__fb_u8(r, msg, 1, 0);
  const uint32_t header = funnel__fb_ref(r, msg, 2);
  *body_at = funnel__fb_field(r, msg, 3, 8);
  const int64_t body_length = *body_at != 0 ? (int64_t)funnel__ld64(r->p + *body_at) : 0;
  struct funnel__fb_table none = {0, 0, 0, 0};
  *h = none;
  if (!r->bad && header != 0) *h = funnel__fb_table_at(r, header);
  if (header == 0 || version < 3 || version > 4 || type != 3 || body_length < 0 ||
      body_length > len - body)
    r->bad = true;
  return header;
}

/* Parses partition p: its rows, pieces, string bytes; its null counts and
 * batch added to the summary, or the partition counted among those left
 * to the host. Every lane writes the same values. A partition that
 * matches the read's template is read by it; any other is walked message
 * by message, its metadata copied to `stage` (8-byte aligned,
 * `stage_bytes` long, or NULL) to be walked there. */
FUNNEL_DP_ONCE void funnel__dp_parse(const struct funnel__dp_args *a, int64_t p, int lane, int lanes,
                                uint8_t *stage, int64_t stage_bytes) {
  const struct funnel__dp_input in = ((const struct funnel__dp_input *)(uintptr_t)a->inputs)[p];
  const uint8_t *bytes = (const uint8_t *)(uintptr_t)in.addr;
  const uint8_t *schema = (const uint8_t *)(uintptr_t)a->schema;
  struct funnel__dp_piece *pieces = (struct funnel__dp_piece *)(uintptr_t)a->pieces + p * a->n_cols;
  const int64_t len = in.length, L = a->schema_length;
  int64_t *row_count = (int64_t *)(uintptr_t)a->rows;
  int64_t *char_count = (int64_t *)(uintptr_t)a->chars;
  /* a partition without a batch has no rows and no string bytes */
  if (lane == 0)
    for (int v = 0; v < a->n_var; v++) char_count[v * (a->n_parts + 1) + p] = 0;
  dp_sync(lanes); /* before a lane of a column writes its count */
  int64_t rows = 0, batches = 0, pos = 0;
  const int by_template = dp_parse_template(a, p, bytes, len, pieces, &rows, lane, lanes);
  /* an IPC file: the host reads its footer */
  bool ok = by_template >= 0 ? by_template == 1
            : !(len >= 8 && bytes[0] == 'A' && bytes[1] == 'R' && bytes[2] == 'R' &&
                bytes[3] == 'O' && bytes[4] == 'W' && bytes[5] == '1');
  if (by_template >= 0) batches = 1, pos = len;
  while (ok && pos < len) {
    if (len - pos >= L && dp_equal(bytes + pos, schema, L, lane, lanes)) {
      pos += L;
      continue;
    }
    const int64_t meta_len = dp_message(bytes, len, pos);
    if (meta_len == 0) { /* end of stream; another may follow */
      pos += 8;
      continue;
    }
    if (meta_len < 0 || batches > 0) {
      ok = false;
      break;
    }
    const uint8_t *meta = bytes + pos + 8;
    if (stage != NULL && meta_len <= stage_bytes) {
      dp_stage(stage, meta, meta_len, lane, lanes);
      meta = stage;
    }
    struct funnel__fb r = {meta, (uint32_t)meta_len, pos + 8, false};
    struct funnel__fb_table h;
    uint32_t body_at, rows_at, nodes, buffers;
    int compressed = 0;
    const int64_t body = pos + 8 + meta_len;
    dp_batch_message(&r, body, len, &h, &body_at);
    rows = r.bad ? 0 : dp_batch_fields(a, &r, h, &rows_at, &nodes, &buffers, &compressed);
    if (r.bad) {
      ok = false;
      break;
    }
    const int64_t body_length = body_at != 0 ? (int64_t)funnel__ld64(r.p + body_at) : 0;
    ok = dp_batch(a, p, compressed, rows, r.p + nodes, r.p + buffers, bytes, body, body_length,
                  pieces, lane, lanes);
    batches++;
    pos = body + body_length;
  }
  struct funnel__dp_summary *s = (struct funnel__dp_summary *)(uintptr_t)a->summary;
  int64_t *null_sum = (int64_t *)(s + 1);
  /* the null counts, a lane a column (each lane's own, when it bound them) */
  if (ok && rows > 0 && a->zmode != FUNNEL_DP_UNPACK)
    for (int c = lane; c < a->n_cols; c += lanes)
      if (pieces[c].null_count != 0) dp_add(&null_sum[c], pieces[c].null_count);
  if (lane != 0) return;
  if (!ok) {
    rows = 0;
    dp_add(&s->left, 1);
    dp_min(&s->first_left, p);
  }
  if (a->zmode == FUNNEL_DP_UNPACK) { /* the second pass counts */
    /* a partition without a batch: its jobs, which the decoder runs all
     * of, do nothing */
    struct funnel__lz4_job *jobs = (struct funnel__lz4_job *)(uintptr_t)a->zjobs + p * a->n_buffers;
    if (ok && batches == 0)
      for (int32_t k = 0; k < a->n_buffers; k++)
        jobs[k] = (struct funnel__lz4_job){0, 0, 0, 0, FUNNEL__LZ4_SKIP, FUNNEL__LZ4_OK};
    return;
  }
  row_count[p] = rows;
  if (ok && batches > 0) dp_add(&s->batches, batches);
  if (by_template == 1) dp_add(&s->templated, 1);
}

/* Whether [a0, a0 + an) and [b0, b0 + bn) share a byte. */
static inline bool dp_overlap(int64_t a0, int64_t an, int64_t b0, int64_t bn) {
  return a0 < b0 + bn && b0 < a0 + an;
}

/* Whether the batch's values (the bytes a template masks out) share a byte
 * with anything the walk reads as structure in metadata `r` (header table
 * `h`): the root offset, both tables' offsets to their vtables and the
 * vtables, the version, type and header fields, the offsets to the nodes
 * and buffers and their counts. A flatbuffer may lay its fields over each
 * other, and the first partition is input like any other: a template
 * whose mask hid, say, the version would let a later partition change it
 * unseen. */
static inline bool dp_values_hide_structure(const struct funnel__dp_args *a, struct funnel__fb *r,
                                            struct funnel__fb_table h, uint32_t body_at,
                                            uint32_t rows_at, uint32_t nodes, uint32_t buffers) {
  const struct funnel__fb_table msg = funnel__fb_table_at(r, funnel__ld32(r->p));
  const uint32_t compression = funnel__fb_ref(r, h, 3);
  const struct funnel__fb_table none = {0, 0, 0, 0};
  const struct funnel__fb_table ct = compression != 0 ? funnel__fb_table_at(r, compression) : none;
  const int64_t structure[][2] = {
      {0, 4},
      {msg.pos, 4},
      {msg.vt, msg.vt_len},
      {funnel__fb_field(r, msg, 0, 2), 2},
      {funnel__fb_field(r, msg, 1, 1), 1},
      {funnel__fb_field(r, msg, 2, 4), 4},
      {h.pos, 4},
      {h.vt, h.vt_len},
      {funnel__fb_field(r, h, 1, 4), 4},
      {funnel__fb_field(r, h, 2, 4), 4},
      {(int64_t)nodes - 4, 4},
      {(int64_t)buffers - 4, 4},
      /* the compression table: its offset, vtable, codec and method */
      {funnel__fb_field(r, h, 3, 4), 4},
      {ct.pos, 4},
      {ct.vt, ct.vt_len},
      {funnel__fb_field(r, ct, 0, 1), 1},
      {funnel__fb_field(r, ct, 1, 1), 1},
  };
  const int64_t values[][2] = {
      {body_at, 8}, {rows_at, 8}, {nodes, 16 * (int64_t)a->n_cols}, {buffers, 16 * (int64_t)a->n_buffers}};
  for (size_t i = 0; i < sizeof(structure) / sizeof(structure[0]); i++)
    for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++)
      if (dp_overlap(structure[i][0], structure[i][1], values[k][0], values[k][1])) return true;
  return r->bad;
}

/* Room for a read's template: its bytes and mask, for a schema message
 * then a batch's metadata of up to FUNNEL__DP_TEMPLATE_SLACK bytes besides
 * its field nodes and buffers. */
static inline int64_t funnel__dp_template_max(int64_t schema_length, int n_cols, int n_buffers) {
  return 2 * FUNNEL__DP_MASK_AT(schema_length + 8 + 16 * (int64_t)(n_cols + n_buffers) +
                                FUNNEL__DP_TEMPLATE_SLACK);
}

/* The read's template (a->tmpl) from partition bytes `bytes` (host
 * memory), walked as funnel__dp_parse walks them: a->tmpl gets the
 * positions, `ref` (funnel__dp_template_max bytes) the template's bytes
 * then its mask.
 * False, and no template, when this partition has none to give: it does
 * not start with the read's schema then a RecordBatch the parse takes, the
 * batch has 0 rows or an empty body (their fields left out of the
 * flatbuffer), or its bytes before the body take more than half of `max`.
 * A partition that matches the template then starts as this one: the
 * schema, then (not a second copy of the schema: the template differs from
 * it where a partition cannot) this batch's metadata, so the walk would
 * take the same steps through it. */
static inline bool funnel__dp_template_of(struct funnel__dp_args *a, const uint8_t *schema,
                                          const uint8_t *bytes, int64_t len, uint8_t *ref) {
  struct funnel__dp_template *t = &a->tmpl;
  const int64_t L = a->schema_length;
  const int64_t max = funnel__dp_template_max(L, a->n_cols, a->n_buffers);
  if (len < L || memcmp(bytes, schema, (size_t)L) != 0) return false;
  const int64_t meta_len = dp_message(bytes, len, L);
  if (meta_len <= 0) return false;
  struct funnel__fb r = {bytes + L + 8, (uint32_t)meta_len, L + 8, false};
  struct funnel__fb_table h;
  uint32_t body_at, rows_at, nodes, buffers;
  int compressed = 0;
  const int64_t body = L + 8 + meta_len;
  dp_batch_message(&r, body, len, &h, &body_at);
  if (!r.bad) dp_batch_fields(a, &r, h, &rows_at, &nodes, &buffers, &compressed);
  if (r.bad || body_at == 0 || rows_at == 0 || 2 * FUNNEL__DP_MASK_AT(body) > max) return false;
  if (dp_values_hide_structure(a, &r, h, body_at, rows_at, nodes, buffers)) return false;
  const int64_t at = L + 8; /* the metadata in the partition */
  *t = (struct funnel__dp_template){.length = body, .body_length = at + body_at,
                                    .rows = at + rows_at, .nodes = at + nodes,
                                    .buffers = at + buffers, .compressed = compressed};
  memcpy(ref, bytes, (size_t)body);
  uint8_t *mask = ref + FUNNEL__DP_MASK_AT(body);
  memset(mask, 0xFF, (size_t)body);
  memset(mask + t->body_length, 0, 8);
  memset(mask + t->rows, 0, 8);
  memset(mask + t->nodes, 0, 16 * (size_t)a->n_cols);
  memset(mask + t->buffers, 0, 16 * (size_t)a->n_buffers);
  /* the parse compares what follows the schema with the schema first: no
   * partition that matches the template may match the schema there */
  bool differs = false;
  for (int64_t i = L; i < body && i < 2 * L && !differs; i++)
    differs = ((bytes[i] ^ schema[i - L]) & mask[i]) != 0;
  if (!differs) t->length = 0;
  return differs;
}

/* ------------------------------------------------------------ layout */

/* The output is laid out as the host lays out a read's (plan.c,
 * layout_column; dread.c checks that the two agree): column after column,
 * each its validity (when it has nulls), its offsets (strings) and its
 * data, every buffer starting at a FUNNEL__ALIGN boundary. The cpu backend
 * places the columns one after the other (funnel__dp_layout); the kernels
 * give each column a thread and scan the columns' footprints. */

/* Whether the output can be laid out at all, once the scan's totals are in
 * the summary: no partition left to the host, not too many rows. */
FUNNEL_DP bool funnel__dp_layout_begin(const struct funnel__dp_args *a, int64_t *rows) {
  const struct funnel__dp_summary *s = (const struct funnel__dp_summary *)(uintptr_t)a->summary;
  *rows = s->rows;
  return s->left == 0 && *rows <= a->max_rows;
}

/* The output buffers of column `col` of `rows` rows, `nulls` of them null,
 * and (a string or list column) `chars` bytes or child rows: the bytes of
 * its validity, offsets and data (-1: absent), and how many bit buffers
 * the concat makes for it; false when an output of `capacity` bytes
 * cannot hold it (32-bit offsets that would overflow, a buffer larger
 * than the allocation). */
FUNNEL_DP bool funnel__dp_sizes(const struct funnel__dp_column *col, int64_t rows, int64_t nulls,
                                int64_t chars, int64_t capacity, int64_t size[3], int *bitbufs) {
  const int64_t bitmap = (rows + 7) / 8;
  size[0] = nulls > 0 ? bitmap : -1;
  size[1] = -1;
  *bitbufs = nulls > 0;
  if (col->kind == FUNNEL_DP_NEST) {
    size[2] = -1;
  } else if (col->kind == FUNNEL_DP_LIST32 || col->kind == FUNNEL_DP_LIST64) {
    if (col->kind == FUNNEL_DP_LIST32 && chars > INT32_MAX) return false;
    size[1] = (rows + 1) * (col->kind == FUNNEL_DP_LIST32 ? 4 : 8);
    size[2] = -1;
  } else if (col->kind == FUNNEL_DP_VAR32 || col->kind == FUNNEL_DP_VAR64) {
    const int64_t w = col->kind == FUNNEL_DP_VAR32 ? 4 : 8;
    if (w == 4 && chars > INT32_MAX) return false;
    size[1] = (rows + 1) * w;
    size[2] = chars;
  } else if (col->kind == FUNNEL_DP_BOOL) {
    size[2] = bitmap;
    *bitbufs += 1;
  } else {
    /* rows * width > capacity, without a division (a call of some 70
     * instructions on the device) or an overflow */
    if ((unsigned __int128)(uint64_t)rows * (uint32_t)col->width >
        (unsigned __int128)(uint64_t)capacity)
      return false;
    size[2] = rows * col->width;
  }
  for (int k = 0; k < 3; k++)
    if (size[k] > capacity) return false;
  return true;
}

/* Column c's output buffers (funnel__dp_sizes), once the scan's totals
 * are in the summary: in a nested read its rows are its domain's (the
 * table's, or a list's child rows) times its mult. */
FUNNEL_DP bool funnel__dp_column_sizes(const struct funnel__dp_args *a, int c, int64_t rows,
                                       int64_t size[3], int *bitbufs) {
  const struct funnel__dp_summary *s = (const struct funnel__dp_summary *)(uintptr_t)a->summary;
  const struct funnel__dp_column *col = &((const struct funnel__dp_column *)(uintptr_t)a->columns)[c];
  const int64_t *nulls = (const int64_t *)(s + 1), *chars = nulls + a->n_cols;
  if (FUNNEL_DP_NESTED(a)) {
    if (col->domain >= 0) rows = chars[col->domain]; /* a list's child */
    if (col->mult > 1 && rows > a->max_rows / col->mult) return false;
    rows *= col->mult > 1 ? col->mult : 1;
    if (rows > a->max_rows) return false;
  }
  return funnel__dp_sizes(col, rows, nulls[c], col->var >= 0 ? chars[col->var] : 0, a->out_capacity,
                          size, bitbufs);
}

/* The bytes column c's buffers take, each padded to FUNNEL__ALIGN. */
FUNNEL_DP int64_t funnel__dp_footprint(const int64_t size[3]) {
  int64_t bytes = 0;
  for (int k = 0; k < 3; k++)
    if (size[k] >= 0) bytes += (size[k] + FUNNEL__ALIGN - 1) / FUNNEL__ALIGN * FUNNEL__ALIGN;
  return bytes;
}

/* Places column c's buffers from output offset `at` (aligned) on: its
 * output addresses, and its bit buffers from entry `bit` on. */
FUNNEL_DP void funnel__dp_place_column(struct funnel__dp_args *a, int c, int64_t at,
                                       const int64_t size[3], int64_t bit) {
  struct funnel__dp_column *col = &((struct funnel__dp_column *)(uintptr_t)a->columns)[c];
  struct funnel__dp_bitbuf *bits = (struct funnel__dp_bitbuf *)(uintptr_t)a->bitbufs;
  uint64_t addr[3] = {0, 0, 0};
  for (int k = 0; k < 3; k++) {
    if (size[k] < 0) continue;
    addr[k] = a->out + (uint64_t)at;
    at += (size[k] + FUNNEL__ALIGN - 1) / FUNNEL__ALIGN * FUNNEL__ALIGN;
  }
  col->validity = addr[0];
  col->offsets = addr[1];
  col->data = addr[2];
  if (addr[0] != 0) bits[bit++] = (struct funnel__dp_bitbuf){addr[0], c, 1};
  if (col->kind == FUNNEL_DP_BOOL) bits[bit] = (struct funnel__dp_bitbuf){addr[2], c, 0};
}

/* Marks the output laid out: `size` bytes, `bitbufs` bit buffers. */
FUNNEL_DP void funnel__dp_layout_end(struct funnel__dp_args *a, int64_t size, int64_t bitbufs) {
  struct funnel__dp_summary *s = (struct funnel__dp_summary *)(uintptr_t)a->summary;
  a->n_bitbufs = bitbufs;
  s->out_size = size;
  s->laid_out = 1;
  if (a->gate != 0) { /* the first pass's counts, for the host's stats */
    const struct funnel__dp_summary *g = (const struct funnel__dp_summary *)(uintptr_t)a->gate;
    s->zbytes = g->zbytes;
    s->zparts = g->zparts;
    s->zin = g->zin;
    s->zout = g->zout;
    s->zframes = g->zframes;
    s->zframe_bytes = g->zframe_bytes;
  }
}

/* Lays the output out in a->out, one lane, column after column: the
 * columns' output addresses, the bit buffers the concat makes, and
 * summary.laid_out. Leaves it 0, and the concat copies nothing, when the
 * host path is to read: partitions left, too many rows, 32-bit string
 * offsets that would overflow, or an output larger than the allocation
 * made for it before the parse. */
FUNNEL_DP void funnel__dp_layout(struct funnel__dp_args *a) {
  int64_t rows, size = 0, nb = 0;
  if (!funnel__dp_layout_begin(a, &rows)) return;
  for (int c = 0; c < a->n_cols; c++) {
    int64_t sz[3];
    int bits;
    if (!funnel__dp_column_sizes(a, c, rows, sz, &bits)) return;
    funnel__dp_place_column(a, c, size, sz, nb);
    size += funnel__dp_footprint(sz);
    nb += bits;
    if (size > a->out_capacity) return;
  }
  funnel__dp_layout_end(a, size, nb);
}

/* Whether the concat runs: the layout laid the output out. */
FUNNEL_DP bool funnel__dp_laid_out(const struct funnel__dp_args *a) {
  return ((const struct funnel__dp_summary *)(uintptr_t)a->summary)->laid_out != 0;
}

/* ------------------------------------------------------------ concat */

/* Copies n bytes, the lanes writing 8-byte words of `dst`. When the two
 * ends differ in alignment (string bytes nearly always do: a piece's bytes
 * land at any offset of the output), each word is cut from the two aligned
 * source words it straddles; the first of those may begin before `src`
 * (never before the 8-byte boundary at or below it, so never outside an
 * allocation that `src` lies in), and the last word is copied byte by
 * byte, so nothing past src + n is read. (ncu, H100, the concat of
 * 200x4x100 strings: 42 us a byte at a time.) On the device, where the
 * words of both ends are 8-byte aligned, those of the output 16-byte
 * aligned, and at least `pairs_min` of them go, the lanes copy 16 bytes
 * each (tuning.h, FUNNEL__DP_COPY_PAIRS_MIN; INT64_MAX: never), reading
 * from the 16-byte boundary at or below the first source word: in the
 * same 16 bytes, so in its allocation, pool block or registered page,
 * each of which starts on such a boundary. */
FUNNEL_DP void dp_copy(uint8_t *dst, const uint8_t *src, int64_t n, int lane, int lanes,
                       int64_t pairs_min) {
  if (n <= 0) return;
  int64_t head = (int64_t)((8 - ((uintptr_t)dst & 7)) & 7);
  if (head > n) head = n;
  for (int64_t i = lane; i < head; i += lanes) dst[i] = src[i];
  const int64_t words = (n - head) / 8;
  uint64_t *dw = (uint64_t *)(dst + head);
  const uint8_t *s = src + head;
  const int shift = (int)((uintptr_t)s & 7);
  int64_t tail = head + words * 8; /* the bytes from here on go one by one */
  if (shift == 0) {
    const uint64_t *sw = (const uint64_t *)s;
    int64_t paired = 0; /* the words copied 16 bytes at a time */
#if defined(__CUDA_ARCH__)
    if (words >= pairs_min && ((uintptr_t)dw & 15) == 0) {
      ulonglong2 *dv = (ulonglong2 *)dw;
      if (((uintptr_t)sw & 15) == 0) {
        const ulonglong2 *sv = (const ulonglong2 *)sw;
        DP_UNROLL
        for (int64_t i = lane; i < words / 2; i += lanes) dv[i] = sv[i];
        paired = words / 2 * 2;
      } else {
        /* the source 8 bytes past a 16-byte boundary: each pair from the
         * halves of two aligned ones, from that boundary to its last word
         * (the 8 bytes before it are its partition's metadata or an
         * earlier buffer's) */
        const ulonglong2 *sv = (const ulonglong2 *)(sw - 1);
        DP_UNROLL
        for (int64_t i = lane; i < (words - 1) / 2; i += lanes) {
          const ulonglong2 x = sv[i], y = sv[i + 1];
          dv[i] = make_ulonglong2(x.y, y.x);
        }
        paired = (words - 1) / 2 * 2;
      }
    }
#else
    (void)pairs_min;
#endif
    DP_UNROLL
    for (int64_t i = paired + lane; i < words; i += lanes) dw[i] = sw[i];
  } else if (words > 0) {
    const uint64_t *sw = (const uint64_t *)(s - shift);
    const int lo = 8 * shift, hi = 64 - 8 * shift;
    DP_UNROLL
    for (int64_t i = lane; i < words - 1; i += lanes) dw[i] = sw[i] >> lo | sw[i + 1] << hi;
    tail -= 8;
  }
  for (int64_t i = tail + lane; i < n; i += lanes) dst[i] = src[i];
}

/* Item i of FUNNEL_DP_PIECES: piece (i / n_cols, i % n_cols) copied into
 * its place (fixed-width values, 16 bytes a lane from `pairs_min` words:
 * dp_copy; string offsets rebased and bytes), or,
 * past the pieces, column i - pieces' final string offset. Bit buffers are
 * funnel__dp_bits_word's. In a nested read a column's rows are its
 * domain's (the table's, or a list's child rows) times its mult, and a
 * list's offsets are rebased as a string column's, with no bytes (the flat
 * kernels compile none of that: FUNNEL_DP_NESTED). */
FUNNEL_DP void funnel__dp_piece_copy(const struct funnel__dp_args *a, int64_t i, int lane,
                                     int lanes, int64_t pairs_min) {
  const struct funnel__dp_column *cols = (const struct funnel__dp_column *)(uintptr_t)a->columns;
  const int64_t *first_row = (const int64_t *)(uintptr_t)a->rows;
  const int64_t *first_char = (const int64_t *)(uintptr_t)a->chars;
  const int64_t n_pieces = a->n_parts * a->n_cols;
  const bool nested = FUNNEL_DP_NESTED(a);
  if (i >= n_pieces) {
    const struct funnel__dp_column *col = &cols[i - n_pieces];
    if (col->var < 0 || lane != 0) return;
    const int64_t *dom = nested && col->domain >= 0 ? first_char + col->domain * (a->n_parts + 1)
                                                    : first_row;
    const int64_t total = dom[a->n_parts] * (nested ? col->mult : 1);
    const int64_t bytes = first_char[col->var * (a->n_parts + 1) + a->n_parts];
    if (col->kind == FUNNEL_DP_VAR32 || (nested && col->kind == FUNNEL_DP_LIST32))
      ((int32_t *)(uintptr_t)col->offsets)[total] = (int32_t)bytes;
    else ((int64_t *)(uintptr_t)col->offsets)[total] = bytes;
    return;
  }
  const int64_t p = i / a->n_cols;
  const int c = (int)(i % a->n_cols);
  /* the piece's source and its column's kind, width and output loaded
   * before its rows are checked, so that all go at once: a fixed-width
   * piece then waits on memory once before its bytes are read, not twice
   * (the kernel alone, H100, session 49: reads of fixed-width columns 1% to
   * 4% faster; string reads, whose offsets are loaded after, the same) */
  const struct funnel__dp_piece *pp = &((const struct funnel__dp_piece *)(uintptr_t)a->pieces)[i];
  const uint64_t data = pp->data;
  const struct funnel__dp_column *col = &cols[c];
  const int32_t kind = col->kind, width = col->width;
  const uint64_t dst = col->data;
  const int64_t *dom = nested && col->domain >= 0 ? first_char + col->domain * (a->n_parts + 1)
                                                  : first_row;
  const int64_t mult = nested ? col->mult : 1;
  const int64_t row = dom[p] * mult, rows = dom[p + 1] * mult - row;
  if (rows == 0 || kind == FUNNEL_DP_BOOL || (nested && kind == FUNNEL_DP_NEST)) return;
  if (kind == FUNNEL_DP_FIXED) {
    dp_copy((uint8_t *)(uintptr_t)dst + row * width, (const uint8_t *)(uintptr_t)data, rows * width,
            lane, lanes, pairs_min);
    return;
  }
  const int64_t *base = first_char + col->var * (a->n_parts + 1);
  const int64_t at = base[p], bytes = base[p + 1] - at, first = pp->first;
  const uint8_t *o = (const uint8_t *)(uintptr_t)pp->offsets;
  /* unsigned: wraps as the host path's rebase does */
  if (kind == FUNNEL_DP_VAR32 || (nested && kind == FUNNEL_DP_LIST32)) {
    uint32_t *out = (uint32_t *)(uintptr_t)col->offsets + row;
    const uint32_t delta = (uint32_t)(at - first);
    for (int64_t k = lane; k < rows; k += lanes) out[k] = funnel__ld32(o + 4 * k) + delta;
  } else {
    uint64_t *out = (uint64_t *)(uintptr_t)col->offsets + row;
    const uint64_t delta = (uint64_t)(at - first);
    for (int64_t k = lane; k < rows; k += lanes) out[k] = funnel__ld64(o + 8 * k) + delta;
  }
  if (!nested || kind == FUNNEL_DP_VAR32 || kind == FUNNEL_DP_VAR64)
    dp_copy((uint8_t *)(uintptr_t)dst + at, (const uint8_t *)(uintptr_t)data, bytes, lane, lanes,
            INT64_MAX);
}

/* n bits (n <= 32) from bit `bit` of `src`, reading only their bytes. */
FUNNEL_DP uint32_t dp_bits(const uint8_t *src, int64_t bit, int64_t n) {
  const uint8_t *p = src + (bit >> 3);
  const int shift = (int)(bit & 7);
  const int64_t bytes = (shift + n + 7) / 8;
  uint64_t v = 0;
  for (int64_t k = 0; k < bytes; k++) v |= (uint64_t)p[k] << (8 * k);
  v >>= shift;
  return (uint32_t)(n == 32 ? v : v & ((1ull << n) - 1));
}

/* Lanes a word of the bit buffers, 1 to 32 (a power of two): about one
 * a partition its 32 rows span, so that small partitions' bits are
 * gathered side by side, not one partition after another. Every thread
 * of a launch computes the same. */
FUNNEL_DP int funnel__dp_bit_lanes(int64_t n_parts, int64_t rows) {
  int lanes = 1;
  while (lanes < 32 && lanes * rows < 32 * n_parts) lanes *= 2;
  return lanes;
}

/* 32-bit word w of bit buffer b: the bits of rows [32w, 32w + 32) gathered
 * from the pieces that hold them (ones where a piece is all valid, zeros
 * past the last row), by `lanes` lanes (funnel__dp_bit_lanes), a partition
 * each; lane 0 writes the word. `per_row` is n_parts / rows (the rows'
 * total). The first partition is found from where it would lie if every
 * partition had as many rows (one round of loads when they do, as one
 * writer's mostly do), else by a binary search on the side it lies.
 * (ncu, H100, the concat of 200x4x1 mixed: 34 us with a lane a word, a
 * binary search and a partition after another; 7 us so. A search by
 * lanes that split the range was slower for 2 to 4 lanes than one lane's
 * binary search, and a division of 64-bit values in it, a call of some 70
 * instructions on the device, made 200x4x100 slower too.) */
/* The rows of the longest bit buffer: the table's, or in a nested read the
 * most any column has (a list's child rows). The concat runs this many
 * rows' words of every bit buffer; a shorter one skips the words past its
 * rows. */
FUNNEL_DP int64_t funnel__dp_bit_rows(const struct funnel__dp_args *a) {
  const int64_t n = a->n_parts, rows = ((const int64_t *)(uintptr_t)a->rows)[n];
  if (!FUNNEL_DP_NESTED(a)) return rows;
  const struct funnel__dp_column *cols = (const struct funnel__dp_column *)(uintptr_t)a->columns;
  const int64_t *chars = (const int64_t *)(uintptr_t)a->chars;
  int64_t most = rows;
  for (int c = 0; c < a->n_cols; c++) {
    const int64_t r = (cols[c].domain < 0 ? rows : chars[cols[c].domain * (n + 1) + n]) * cols[c].mult;
    most = r > most ? r : most;
  }
  return most;
}

FUNNEL_DP void funnel__dp_bits_word(const struct funnel__dp_args *a, int64_t b, int64_t w,
                                    double per_row, int lane, int lanes) {
  const struct funnel__dp_bitbuf bb = ((const struct funnel__dp_bitbuf *)(uintptr_t)a->bitbufs)[b];
  const struct funnel__dp_piece *pieces = (const struct funnel__dp_piece *)(uintptr_t)a->pieces;
  const int64_t n = a->n_parts;
  /* the rows of partitions [0, p) of this buffer's column: first_row[p],
   * in a nested read its domain's times its mult (the flat kernels compile
   * the table's rows only) */
  const bool nested = FUNNEL_DP_NESTED(a);
  const struct funnel__dp_column *col =
      nested ? &((const struct funnel__dp_column *)(uintptr_t)a->columns)[bb.column] : NULL;
  const int64_t *first_row = nested && col->domain >= 0
                                 ? (const int64_t *)(uintptr_t)a->chars + col->domain * (n + 1)
                                 : (const int64_t *)(uintptr_t)a->rows;
  const int64_t mult = nested ? col->mult : 1;
  const int64_t total = first_row[n] * mult;
  const int64_t r0 = 32 * w, end = r0 + 32 < total ? r0 + 32 : total;
  /* past a shorter buffer's rows: a longer one's word (funnel__dp_bit_rows) */
  if (nested && r0 >= total) return;
  /* the last partition that starts at or before row r0: first_row[lo] <= r0
   * (any guess g is checked: in a nested read per_row is the table's) */
  int64_t lo = 0, hi = n - 1, g = (int64_t)((double)r0 * per_row);
  g = g < 0 ? 0 : g > n - 1 ? n - 1 : g;
  const int64_t at_g = first_row[g] * mult, after_g = first_row[g + 1] * mult;
  if (at_g <= r0) {
    lo = g;
    if (after_g > r0) hi = g;
  } else {
    hi = g - 1; /* g > 0: first_row[0] is 0 */
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (first_row[mid] * mult <= r0) lo = mid; else hi = mid - 1;
  }
  const struct funnel__dp_slice *slices = (const struct funnel__dp_slice *)(uintptr_t)a->slices;
  uint32_t v = 0;
  for (int64_t base = lo;; base += lanes) {
    const int64_t p = base + lane;
    if (p < n) {
      const int64_t start = first_row[p] * mult, after = first_row[p + 1] * mult;
      const int64_t stop = after < end ? after : end;
      const int64_t from = start > r0 ? start : r0;
      if (from < stop) {
        const int64_t i = p * a->n_cols + bb.column;
        const struct funnel__dp_piece *pc = &pieces[i];
        const uint64_t src = bb.validity ? pc->validity : pc->data;
        const int64_t k = stop - from;
        /* a nested child's bits start at its slice's first row */
        const int64_t bit = (nested ? slices[i].start : 0) + (from - start);
        const uint32_t bits = src != 0 ? dp_bits((const uint8_t *)(uintptr_t)src, bit, k)
                                       : (uint32_t)(k == 32 ? 0xFFFFFFFFu : (1u << k) - 1u);
        v |= bits << (from - r0);
      }
    }
    /* the next round's first partition starts past the word: done */
    const int64_t next = base + lanes;
    if (next >= n || first_row[next] * mult >= end) break;
  }
  v = dp_or(v, lanes);
  if (lane == 0) ((uint32_t *)(uintptr_t)bb.dst)[w] = v;
}

#if !defined(__CUDACC__)
#include "format.h"

/* The device path's columns of `schema`, their output buffers 0: *n_var
 * of them strings, *n_buffers IPC buffers a batch. */
static inline void funnel__dp_columns_of(const struct funnel__schema *schema,
                                         struct funnel__dp_column *cols, int *n_var,
                                         int *n_buffers) {
  *n_var = 0;
  *n_buffers = 0;
  for (int c = 0; c < schema->n_fields; c++) {
    const struct funnel__field *f = &schema->fields[c];
    const bool list = f->nested == FUNNEL__NESTED_LIST;
    cols[c] = (struct funnel__dp_column){
        .kind = list && f->offset_width == 4   ? FUNNEL_DP_LIST32
                : list                         ? FUNNEL_DP_LIST64
                : f->nested != FUNNEL__NESTED_NONE ? FUNNEL_DP_NEST
                : f->offset_width == 4         ? FUNNEL_DP_VAR32
                : f->offset_width == 8         ? FUNNEL_DP_VAR64
                : f->type_id == FUNNEL_TYPE_BOOL ? FUNNEL_DP_BOOL : FUNNEL_DP_FIXED,
        .width = f->byte_width, .n_buffers = f->n_buffers,
        .var = f->offset_width ? (*n_var)++ : -1, .buffer = *n_buffers, .parent = f->parent,
        .mult = 1, .domain = -1, .list_size = f->list_size};
    if (f->parent >= 0) { /* the columns are depth first: the parent's are set */
      const struct funnel__dp_column *pc = &cols[f->parent];
      const struct funnel__field *pf = &schema->fields[f->parent];
      cols[c].domain = pf->nested == FUNNEL__NESTED_LIST ? pc->var : pc->domain;
      cols[c].mult = pf->nested == FUNNEL__NESTED_LIST ? 1
                     : pf->nested == FUNNEL__NESTED_FIXED ? pc->mult * pf->list_size
                                                          : pc->mult;
      cols[c].map_key = pf->parent >= 0 && schema->fields[pf->parent].type_id == FUNNEL_TYPE_MAP &&
                        c == f->parent + 1;
    }
    *n_buffers += f->n_buffers;
  }
}

/* Whether the device path reads `schema`'s nested columns: the product of
 * the fixed_size_list sizes above any column (up to a list, whose child
 * counts its own rows) fits its row count. */
static inline bool funnel__dp_nested_fits(const struct funnel__schema *schema) {
  for (int c = 0; c < schema->n_fields; c++) {
    int64_t m = 1;
    for (int k = c; schema->fields[k].parent >= 0; k = schema->fields[k].parent) {
      const struct funnel__field *pf = &schema->fields[schema->fields[k].parent];
      if (pf->nested == FUNNEL__NESTED_LIST) break;
      if (pf->nested == FUNNEL__NESTED_FIXED) {
        if (m > FUNNEL__MAX_ROWS / pf->list_size) return false;
        m *= pf->list_size;
      }
    }
  }
  return true;
}
#endif

#endif
