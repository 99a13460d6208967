/* read.h: the phases of a read, one file each, which reader.c
 * (funnel_reader_read_async) runs in order:
 *
 *   transfer.c  early copies: pinned partitions go up before parsing
 *   parse.c     IPC headers -> partition views (host threads when many)
 *   plan.c      schema checks, sizes, output layout (plan.h)
 *   transfer.c  how every partition reaches the device: runs, staging
 *   submit.c    allocations, copies, segment table, launch, event
 *
 * or, for many small partitions, the device path (dread.c, dpath.h):
 * transfer.c's copies, then the parse, the layout and the concat on the
 * device, enqueued at once.
 *
 * Only transfer.c, submit.c and dread.c call the backend. */
#ifndef FUNNEL_READ_H
#define FUNNEL_READ_H

#include "table.h"
#include "work.h"

/* What a reader's options ask of a read (funnel_reader_set_option). */
struct funnel__read_options {
  int transfer;             /* enum funnel_transfer */
  int time_kernel;          /* FUNNEL_OPTION_TIME_KERNEL */
  int shareable;            /* FUNNEL_OPTION_SHAREABLE */
  int64_t direct_max_bytes; /* FUNNEL_OPTION_DIRECT_MAX_BYTES */
  int parse;                /* FUNNEL_OPTION_PARSE */
  int decode;               /* FUNNEL_OPTION_DECODE */
};

/* Tests only: a function every read calls once it is in flight (counted
 * by its reader, its stream looked up), e.g. to hold reads there while a
 * test frees what they use; NULL: none. */
typedef void (*funnel__read_hook_fn)(void);
void funnel__set_read_hook(funnel__read_hook_fn hook);
/* Tests only: the reads in progress on `reader`. */
int64_t funnel__reader_reads_in_flight(struct funnel_reader *reader);

/* ---------------------------------------------------------------- parse.c */

/* Parses every partition into views allocated in t->arena; the error, if any, is the first bad partition's
 * in partition order, as one thread going through them would find.
 * *compressed: whether a partition has compressed batches (then
 * funnel__decode_all before the plan). */
int funnel__parse_all(const struct funnel_partition *parts, size_t count,
                      const struct funnel__schema *known, struct funnel_table *t,
                      struct funnel__partition **out, bool *compressed,
                      struct funnel_error *error);

struct funnel__parts_scan;

/* Decodes the compressed partitions among pv (image_length > 0) into one
 * block, the pinned pool's when it has room (so they go up like pinned
 * partitions, in place of the bytes given), held by t until its work is
 * over: in tasks of about FUNNEL__DECODE_TASK decoded bytes or fewer on
 * the host threads (small partitions share a task, a large batch is split
 * by its buffers; parse.c, decode_task_bytes). The device's share
 * (FUNNEL_OPTION_DECODE) is laid out first: its frames are copied into
 * the block after the host's images, or, when every partition holding
 * them lies in the pinned pool, left where they lie (t->dd.in_source:
 * those partitions go up as runs of their own). The error, if any, is the
 * first in partition order. `schema` (may be NULL) names columns in errors
 * and binds what it decodes, as funnel__partition_parse_known does. Fills
 * the read's decode stats. */
int funnel__decode_all(struct funnel_table *t, struct funnel__partition *pv, size_t count,
                       const struct funnel__schema *schema, int decode,
                       struct funnel_error *error);
/* Whether the device's decoding of `bytes` of a codec's values, `jobs` of
 * them the longest `longest` bytes and `zbytes` of frames up the link,
 * looks faster than the host threads' (FUNNEL_DECODE_AUTO; parse.c). */
bool funnel__device_pays(const struct funnel_backend *be, int codec, int64_t bytes,
                         int64_t zbytes, int64_t jobs, int64_t longest);

/* Whether the host path's decoding on the device would split the long
 * buffers of values of a read like partition `pv` (parsed under `schema`)
 * into blocks, a job each (funnel__lz4_split), where the device path
 * decodes each buffer whole: 1 when its first LZ4 frame of values is of
 * independent blocks of at most FUNNEL__LZ4_SPLIT_BLOCK_MAX (lz4-java's
 * 64 KiB, as the funnel shuffle writes them), 0 when it is of others
 * (Arrow Java's 4 MiB, Arrow C++'s linked ones), -1 when the partition
 * holds no such frame (no batch, no rows, raw buffers): one writer writes
 * a read's frames alike. */
int funnel__lz4_blocks_split(const struct funnel__partition *pv,
                             const struct funnel__schema *schema);

/* A read that decodes buffers on the device (t->dd): launches the decoder
 * after the block's copy, copies its statuses back and waits for them; a
 * buffer the device could not decode is decoded on the host (the error,
 * if it has one, is the host's) and sent up in its place. Before the
 * concat's launch (submit.c). */
int funnel__dd_run(struct funnel_table *t, void *stream, struct funnel_error *error);

/* The codec of the first RecordBatch of the first few non-empty partitions
 * that have one (a glance at its header, no checks kept; FUNNEL__CODEC_NONE
 * when there is none): a compressed read decodes before its values go up,
 * on the host path or, LZ4 bodies, on the device path (dread.c). */
int funnel__first_codec(const struct funnel_partition *parts, size_t count,
                        const struct funnel__parts_scan *scan);

/* ------------------------------------------------------------- transfer.c */

/* One host-to-device copy: a run of partitions back to back in pinned
 * memory (or one pageable partition, copied by the driver). */
struct funnel__run {
  const uint8_t *src;
  int64_t length;
  int64_t scratch; /* offset in the scratch allocation */
  bool pinned;
};

/* Pageable partitions to copy into the pinned staging block, in tasks of
 * the plan's task_bytes: a task copies that many bytes of the copies
 * taken one after the other, so small partitions share a task. */
struct funnel__stage_copy {
  uint8_t *dst;
  const uint8_t *src;
  int64_t length;
  int64_t first_byte; /* bytes of the copies before this one */
};

struct funnel__stage_plan {
  struct funnel__stage_copy *copies;
  int64_t n;
  int64_t bytes;  /* of every copy */
  int64_t tasks;  /* task_bytes each (the last fewer), in the order of the bytes */
  int64_t first;  /* the first task of the range that runs */
  uint8_t *block; /* the pinned block the pageable partitions go to, or NULL */
  int64_t block_size;
  /* a task's bytes and the least a round stages (the device's config:
   * FUNNEL__STAGE_TASK, FUNNEL__STAGE_ROUND_MIN) */
  int64_t task_bytes, round_bytes;
};

/* What one pass over the caller's partitions finds, before anything is
 * done per partition: what the early copy, the pinned blocks' holds and
 * the choice of path decide from. */
struct funnel__parts_scan {
  int64_t bytes; /* of the non-empty partitions */
  int64_t aligned; /* the same, each rounded up to FUNNEL__ALIGN: staged back to back */
  int64_t empty; /* zero-length partitions (empty shuffle blocks) */
  int64_t first; /* the first non-empty partition; -1 when none is */
  uintptr_t lo, hi; /* the address range the non-empty partitions span */
  bool back_to_back; /* they follow each other in that order, each less
                        than FUNNEL__MERGE_GAP after the one before: one run */
  bool bad; /* a non-empty partition has no data, or its length (or the
               sum) is over INT64_MAX / 2: the host path names it */
};
void funnel__scan_parts(const struct funnel_partition *parts, size_t count,
                        struct funnel__parts_scan *out);
/* A read of FUNNEL__GUESS_MIN_PARTS partitions or more: what the pass
 * would say if they lay back to back and in order, from the first and last
 * non-empty ones (within 64 of either end) and a few pairs of neighbours
 * between, so that the copy of their span starts before the pass
 * (tuning.h). False when the read is smaller, the ends say nothing or a
 * pair lies apart. The bytes guessed are the span's, at least the
 * partitions' when the guess holds. */
bool funnel__guess_scan(const struct funnel_partition *parts, size_t count,
                        struct funnel__parts_scan *out);
/* Whether the pass (`scan`) says what the guess said: the same span and
 * first partition, back to back, nothing bad. */
bool funnel__guess_held(const struct funnel__parts_scan *guess,
                        const struct funnel__parts_scan *scan);
/* Whether a read of the device path of `count` partitions spanning
 * `scan`'s range is large enough to parse while it copies (the device's
 * config: FUNNEL_OVERLAP_MIN_BYTES and _PARTS; tuning.h) and the backend
 * can order a second stream after the first. */
bool funnel__overlap_fits(const struct funnel_device *dev, size_t count,
                          const struct funnel__parts_scan *scan);
/* ... and the parts a read of compressed bodies so decodes in while it
 * copies: 0 unless it is large enough (FUNNEL_ZOVERLAP_MIN_BYTES; tuning.h)
 * and its partitions lie back to back in the pinned pool, copied in parts;
 * else FUNNEL_ZOVERLAP_PARTS, or fewer where the read has few partitions
 * (at least 2): a stream each */
int funnel__zoverlap_parts(struct funnel_device *dev, size_t count,
                           const struct funnel__parts_scan *scan);
/* Whether every partition of the read (scanned as `scan`) lies outside
 * the pinned pool, the device stages such bytes (FUNNEL_STAGE_PAGEABLE,
 * the cuda backend's default) and the pool is large enough for them all
 * (or will be, when it is made on its first use): the read then goes up
 * from one pinned block the host threads stage it into, round by round
 * (transfer.c; when the pool has no such room left, a block a partition,
 * or none) */
bool funnel__stages_all(struct funnel_device *dev, const struct funnel_partition *parts,
                        size_t count, const struct funnel__parts_scan *scan);
/* A guess that did not hold: the early copies made from it are freed with
 * the read's inputs (after its work, which follows them on the stream),
 * and what was decided from it is forgotten, so the read begins again
 * from the pass. */
int funnel__drop_guess(struct funnel_table *t, struct funnel_error *error);

/* How every partition of a read reaches the device. */
struct funnel__transfer {
  uint64_t *in_base;   /* per partition: the device address its bytes start at (the device
                          path: NULL unless partitions are read in place) */
  int64_t *in_scratch; /* per partition: offset of its bytes in scratch, or -1;
                          NULL on the device path when the early copy
                          mirrors their span: */
  uintptr_t mirror;    /* then a partition's bytes lie at scratch + (data - mirror) */
  struct funnel__run *runs;
  int64_t n_runs;
  int64_t scratch_size; /* bytes of scratch the runs take */
  bool direct;          /* pinned partitions are read in place by the kernel */
  bool early;           /* the partitions went up before parsing */
  struct funnel__stage_plan staging;
  /* when set, called after each staging round's copies are enqueued with
   * the bytes of the staging block sent so far (the device path parses
   * those partitions while the next round is staged) */
  int (*on_round)(void *ctx, int64_t sent, struct funnel_error *error);
  void *round_ctx;
};

/* The rounds a staging plan's block is staged in (transfer.c). */
int64_t funnel__stage_rounds(const struct funnel__stage_plan *sp);
/* `n` bytes from `src` to `dst` (pinned), copied as a read stages its
 * pageable partitions: in FUNNEL__STAGE_TASK tasks on the host threads, with
 * stores that bypass the cache. funnel_bench's host_stage: what the host's
 * memory lets staging alone reach, beside the reads that stage. */
void funnel__stage_bytes(uint8_t *dst, const uint8_t *src, int64_t n);

/* Before parsing: when every partition lies in the pinned pool, enqueues
 * their copies at once, so they fly while the host parses and plans
 * (unless `transfer` is DIRECT), and records t->event after them. When
 * the partitions fill the range they span (`scan`) but for small gaps, that
 * range goes up in one copy, enqueued before anything is done per
 * partition (t->early_base); else a copy a run of them (t->early_in).
 * Their allocation sets t->reserve bytes aside after them (t->reserved). */
int funnel__early_copies(struct funnel_table *t, const struct funnel_partition *parts,
                         size_t count, const struct funnel__parts_scan *scan, int transfer,
                         void *stream, struct funnel_error *error);

/* The early copies, when the read's partitions turn out to need decoding
 * (a compressed partition after an uncompressed first one): waits for
 * them and frees their allocation; the transfer's layout then places the
 * decoded images. */
int funnel__drop_early(struct funnel_table *t, struct funnel_error *error);

/* Whether the read's partitions went up before parsing. */
static inline bool funnel__early(const struct funnel_table *t) {
  return t->early_in != NULL || t->early_base != 0;
}

/* Decides how each planned partition reaches the device (read in place,
 * copied, staged through the pinned pool) and lays out the runs. Host
 * only; holds the staging blocks it takes in t->staged. */
int funnel__layout_transfer(struct funnel_table *t, const struct funnel__read_options *o,
                            struct funnel__transfer *out, struct funnel_error *error);

/* Enqueues the copies of the runs (staging rounds included), noted in `w`. */
int funnel__enqueue_transfer(struct funnel_table *t, struct funnel__transfer *tr,
                             struct funnel__work *w, struct funnel_error *error);

/* --------------------------------------------------------------- submit.c */

/* Enqueues the copies, the segment table and the launch, and records
 * t->event. On failure after something was enqueued, waits for it (or
 * abandons the memory it touches), so the caller can release the table. */
int funnel__submit(struct funnel_table *t, const struct funnel__read_options *o, void *stream,
                   struct funnel_error *error);

/* The output allocation, `size` bytes (t->out_bytes; shareable when asked). */
int funnel__alloc_out(struct funnel_table *t, const struct funnel__read_options *o, int64_t size,
                      void *stream, struct funnel_error *error);

/* ---------------------------------------------------------------- dread.c */

/* Whether the read goes by the device path (FUNNEL_OPTION_PARSE; under
 * AUTO, many small partitions), with which schema: the reader's
 * (`known`), or the first non-empty partition's, parsed here unless it
 * opens with `seen`'s Schema message byte for byte (a schema an earlier
 * read of a reader without one found: then `seen` itself); and the
 * partitions' bytes, for funnel__dpath_parse. `codec`: funnel__first_codec's;
 * a compressed read goes by it when its bodies are LZ4 frames and the
 * device may decode them (FUNNEL_OPTION_DECODE: not HOST; under AUTO, on a
 * device backend). */
bool funnel__dpath_wanted(struct funnel_table *t, const struct funnel__read_options *o,
                          const struct funnel_partition *parts, size_t count,
                          const struct funnel__parts_scan *scan, int codec,
                          const struct funnel__schema *known,
                          const struct funnel__schema *seen,
                          const struct funnel__schema **schema);

/* Bytes a read by the device path sets aside after its partitions' copies
 * in one device allocation, for its tables and output (t->reserve), or 0
 * when it allocates them on their own: a read larger than
 * FUNNEL__ONE_BLOCK_MAX_BYTES, or a shareable output. A read of
 * `compressed` bodies sets them aside only when it guesses that it holds
 * no frame (funnel__dpath_guess_raw): it then parses once, its buffers
 * read where they lie, and its output is bounded as a plain read's. */
int64_t funnel__dpath_reserve(const struct funnel__read_options *o, size_t count, int64_t bytes,
                              bool compressed, const struct funnel__schema *schema);

/* Whether a small read of `codec` bodies guesses that every buffer it
 * holds is raw or empty (no frame): the device's last read of the codec
 * held none (dread.c, learn_decoded; the read's one pass, arm_one_go). */
bool funnel__dpath_guess_raw(const struct funnel_device *dev, int codec);

/* The device path: places the partitions (transfer.c), allocates the
 * output from an upper bound of its size, enqueues the parse, the layout,
 * the concat and records t->event, and waits for the parse's sums. A read
 * of LZ4 bodies (`codec`) first unpacks them (dpath.h) and waits for the
 * decoded buffers' size, then allocates those and the output and decodes
 * before the parse. *out is
 * the attempt for funnel__dpath_plan, or NULL when the device left
 * partitions to the host: the table then holds nothing of the attempt
 * (device work, memory) but the early copies, and the caller reads it by
 * the host path. `bytes`: the partitions' (funnel__parts_scan). The
 * tables and output take t->reserve bytes of scratch's allocation when
 * funnel__dpath_reserve set them aside (t->out_block). */
struct funnel__dpath;
int funnel__dpath_parse(struct funnel_table *t, const struct funnel__read_options *o,
                        const struct funnel_partition *parts, size_t count, int64_t bytes,
                        int codec, const struct funnel__schema *schema, void *stream,
                        struct funnel__dpath **out, struct funnel_error *error);

/* The table's plan from the sums: what the device laid out, laid out again
 * on the host (funnel__plan_layout), which must agree. Enqueues nothing. */
int funnel__dpath_plan(struct funnel_table *t, struct funnel__dpath *d, struct funnel_error *error);

#endif
