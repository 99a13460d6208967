/* table.h: the table, the one object a read makes (reader.c) and an import
 * maps (ipc.c). table.c is the one place a table is built
 * (funnel__table_new), referenced and released.
 *
 * A table is freed with its last reference: funnel_table_free drops the
 * caller's (once the calls in progress on it are over); every exported
 * ArrowArray holds one until its release callback runs, a share of the
 * table as it is holds one until closed, and a call in progress one. */
#ifndef FUNNEL_TABLE_H
#define FUNNEL_TABLE_H

#include <pthread.h>
#include <stdatomic.h>

#include "device.h"
#include "plan.h"

/* A pinned pool block a read holds until its work has completed. */
struct funnel__staged {
  void *ptr;
  int64_t size;
};

/* The reader's schema, shared by the reader and every table it made (a
 * table may outlive its reader): freed with the last reference. */
struct funnel__shared_schema {
  _Atomic int64_t refs;
  struct funnel__arena arena;
  struct funnel__schema schema;
};

struct funnel__shared_schema *funnel__shared_schema_ref(struct funnel__shared_schema *s);
void funnel__shared_schema_unref(struct funnel__shared_schema *s);

struct funnel__import; /* ipc.c: what an imported table maps */

struct funnel_table {
  _Atomic int64_t refs;
  struct funnel_device *dev;
  struct funnel__shared_schema *schema; /* the reader's, when it had one */
  struct funnel__shared_schema *seen;   /* the reader's seen one, when the read took it */
  struct funnel__arena arena; /* schema, partitions, plan, host segments */
  struct funnel__plan plan;
  uint64_t out;     /* device: the columns' buffers */
  int64_t out_bytes; /* the allocation's size: plan.out_size, or on the
                        device path an upper bound of it */
  bool out_shared;  /* `out` is shareable memory (FUNNEL_OPTION_SHAREABLE) */
  struct funnel__ipc_handle out_handle; /* and its handle */
  uint64_t scratch; /* device: partition copies and the segment table */
  uint64_t seg_scratch; /* device: the segment table, when it has its own */
  uint64_t dp_scratch;  /* device: the device path's tables (dread.c) */
  uint64_t zscratch;    /* device: its decoded buffers, in a read of LZ4 bodies */
  /* A small read of the device path makes one device allocation, scratch,
   * for its partitions, then its tables and output (dread.c,
   * funnel__dpath_reserve): */
  int64_t reserve;   /* bytes the early copies set aside after theirs (0: none) */
  uint64_t reserved; /* where those start, once set aside */
  /* The allocation that holds the output after some of the read's inputs,
   * freed with the output (0: the output is an allocation of its own):
   * scratch's, that small read's; or dp_scratch's, a small read of
   * compressed bodies in one go, its tables, decoded buffers (zscratch)
   * and output (dread.c, alloc_z_block). The output lies last in it. */
  uint64_t out_block;
  int64_t *early_in; /* per partition, where its early copy lies in scratch
                        (-1: none); NULL when the read made no early copy,
                        or when the copy mirrors the partitions' span: */
  uintptr_t early_base; /* then a partition's bytes lie at scratch + (data -
                           early_base); 0 when there is no such copy */
  /* The pass over the caller's partitions (reader.c): the range their
   * non-empty ones span and their bytes, each rounded up to FUNNEL__ALIGN
   * (as staging lays them out); hi == lo when there is no such pass. */
  uintptr_t parts_lo, parts_hi;
  int64_t parts_aligned;
  uint64_t guess_scratch; /* the early copies of a guess that did not hold
                             (funnel__drop_guess): freed with the inputs */
  void *event;      /* NULL when nothing was enqueued; kept until the table
                       is freed (an export may point a consumer at it) */
  void *ev_start, *ev_end; /* around the launch, when the kernel is timed */
  void *ev_sums;    /* the device path: after the copy back of the sums */
  /* The device path's parse of the partitions while they are copied
   * (dread.c; tuning.h, FUNNEL__OVERLAP_*): `aux`, the reader's second
   * stream, when a read may; then, set by the early copies, the read's
   * n_overlap parts: part j's partitions from overlap_part[j] and bytes
   * from overlap_byte[j] of the early copy (n_overlap + 1 each, the last
   * the ends), and the events after part j's bytes, then one after the
   * parses (overlap_ev, n_overlap + 1, NULL until taken). A read parsed
   * while it is staged (dread.c) sets them but overlap_byte (NULL).
   * A read of compressed bodies decodes while it is copied when it has
   * zaux, the reader's streams for its parts' decoding, n_zaux of them (a
   * part each: the device's zoverlap_parts, or fewer for a read of few
   * partitions, or none; transfer.c, funnel__zoverlap_parts); its
   * overlap_ev then has n_overlap_ev events (else n_overlap + 1). */
  void *aux;
  void *zaux[FUNNEL__ZOVERLAP_MAX_PARTS];
  int n_zaux;
  int n_overlap, n_overlap_ev;
  bool zdecoded; /* such a read's bodies were decoded while copied */
  int64_t *overlap_part, *overlap_byte;
  void **overlap_ev;
  pthread_mutex_t mu;
  int done;         /* the event has completed and the inputs are freed
                       (but those in out_block) */
  /* callers' calls on the table in progress (funnel__table_enter), which
   * funnel_table_free waits for */
  struct funnel__inflight calls;
  struct funnel__pinned_held held; /* caller pinned blocks its work reads */
  struct funnel__staged *staged;
  int64_t n_staged;
  /* the compressed partitions' decoded images (funnel__decode_all): a
   * pinned pool block, or host memory of its own (decoded_malloced) */
  struct funnel__staged decoded;
  bool decoded_malloced;
  /* the buffers the device decodes (FUNNEL_OPTION_DECODE): the block
   * holds the host-decoded images, then the device's buffers' frames, then
   * their jobs (struct funnel__lz4_job); these `up` bytes go up as one run
   * at scratch offset `at`, and the device decodes into the `region` bytes
   * right after them */
  struct {
    int64_t n;           /* buffers the device decodes */
    int64_t *first_job;  /* per buffer (and one past the last): its first job */
    void *jobs;          /* in the block: a buffer's frames, or its blocks one a job */
    int64_t jobs_at;     /* their offset in it */
    int64_t *src, *dst;  /* per job: its frames' offset in the block, and
                            where it decodes to (past `up`) */
    int64_t *where;      /* per job: partition, batch, buffer */
    int64_t up, region;
    int64_t at;          /* set by the transfer's layout */
    /* the frames read where they lie: when every partition holding them
     * lies in the pinned pool, those partitions go up as they are (runs of
     * their own, src_at: each one's scratch offset, set by the layout) and
     * src is a frame's offset in its partition, not in the block */
    bool in_source;
    int64_t *src_at;
    int codecs; /* a bit a codec the jobs decode (1 << enum funnel__codec) */
  } dd;
  struct funnel_read_stats stats;
  /* an imported table (funnel_table_import): its buffers lie in memory
   * another process exported, at these addresses (3 per column, by enum
   * funnel_buffer_kind; 0 when absent), read only; NULL for a table funnel
   * read. release_import unmaps them when the table goes. */
  struct funnel__import *import;
  const uint64_t *import_addr;
  void (*release_import)(struct funnel_table *t);
};

/* A new table of `dev`, empty, with one reference (the caller's); NULL
 * with FUNNEL_ERR_HOST_OUT_OF_MEMORY in `error`. */
struct funnel_table *funnel__table_new(struct funnel_device *dev, struct funnel_error *error);

/* A caller's call on the table begins: it holds the table (a reference)
 * and counts as in flight until funnel__table_leave, so funnel_table_free
 * waits for it. Returns t. */
struct funnel_table *funnel__table_enter(struct funnel_table *t);
void funnel__table_leave(struct funnel_table *t);
/* Tests only: the calls on the table in progress. */
int64_t funnel__table_calls_in_flight(struct funnel_table *t);

struct funnel_table *funnel__table_ref(struct funnel_table *t);
/* Drops a reference; the last waits for the table's work, then frees it. */
void funnel__table_unref(struct funnel_table *t);

/* The table holds pinned pool block [ptr, ptr + size) until its work has
 * completed (room for it was reserved in t->staged). */
void funnel__table_hold_staged(struct funnel_table *t, void *ptr, int64_t size);

/* A device-path attempt whose work has completed is given up (dread.c):
 * frees its device tables, its output, its staging blocks and, unless
 * `keep_early`, the partitions' copies, so the host path starts afresh. */
void funnel__table_drop_attempt(struct funnel_table *t, bool keep_early);
/* The output's room in t->out_block given up (a device-path attempt the
 * host path reads instead, or a read in one go whose gate shut): the
 * handles that lie in it but the allocation's base forgotten, out with
 * them; the allocation goes as the input it begins with (scratch or
 * dp_scratch). The tables in the room set aside in scratch's allocation
 * (dp_scratch at t->reserved) stay, for a read that goes on: they go with
 * scratch, and are never freed alone. */
void funnel__table_forget_out_room(struct funnel_table *t);

/* The work enqueued for the table could not be waited for: forgets (leaks)
 * every allocation it may still touch rather than free it. */
void funnel__table_abandon(struct funnel_table *t);

/* The address of buffer `kind` of column `c`, and its size; 0 and 0 when
 * the column has none. */
uint64_t funnel__table_buffer(const struct funnel_table *t, int c, enum funnel_buffer_kind kind,
                              int64_t *size);

#endif
