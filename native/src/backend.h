/* backend.h: the device backend vtable (cpu, cuda) and the thin wrappers
 * through which everything else calls it.
 *
 * Shape after SQLite's VFS: a version, a name, function pointers, private
 * data. Only the funnel__dev_* wrappers below call through the pointers;
 * they count every call (so the per-read stats are counted, not assumed)
 * and supply defaults for empty slots. Device addresses are uint64_t. */
#ifndef FUNNEL_BACKEND_H
#define FUNNEL_BACKEND_H

#include "internal.h"
#include "segment.h"

/* The layout of struct funnel_backend that this funnel was built with;
 * funnel_device_open refuses a backend that fills another. 2: the fields
 * of what differs between backends (arrow_device_type ...); 3:
 * native_streams; 4: launch_dpath; 5: event_pool; 6: peer; 7: stream_wait,
 * and launch_dpath's first item; 8: a gated pass (the LZ4 stage's gate,
 * FUNNEL_DP_STAGE_GATED); 9: the ZSTD stage (FUNNEL_DP_STAGE_ZSTD); 10: its
 * gate, as the LZ4 stage's (the device path's ZSTD bodies); 11: the LZ4
 * stage in ways (FUNNEL_DP_STAGE_LZ4_WAYS). */
#define FUNNEL_BACKEND_VERSION 11

/* An opaque handle by which another process opens shared memory or an
 * event (the size of CUipcMemHandle and CUipcEventHandle). */
struct funnel__ipc_handle {
  uint8_t bytes[64];
};

/* The sharing descriptor's backend field (funnel.h, "sharing") */
#define FUNNEL__IPC_BACKEND_CPU 1
#define FUNNEL__IPC_BACKEND_CUDA 2

struct funnel_backend {
  int version;
  const char *name;
  void *private_data;
  /* copies from pageable memory are slow: stage them in pinned memory */
  int stage_pageable;
  /* the Arrow C Device Data Interface's device_id (cuda: the ordinal;
   * cpu: -1) and device_type (ARROW_DEVICE_CPU: a consumer has no event
   * to wait on, so an export waits for the read first) */
  int64_t device_id;
  int32_t arrow_device_type;
  /* the pinned pool's size unless FUNNEL_PINNED_POOL_BYTES says */
  int64_t default_pinned_pool_bytes;
  /* the sharing descriptor's backend field (ipc.c: 1 cpu, 2 cuda); 0: the
   * backend cannot share tables */
  uint32_t ipc_backend_id;
  /* what device_uuid identifies, for messages ("the host's boot id");
   * NULL: the device itself */
  const char *uuid_note;
  /* 1: a stream is the driver's own handle (a CUstream), which a caller
   * may lend to reads (funnel_device_stream_wrap); 0: streams are funnel's
   * alone (cpu: worker threads) */
  int native_streams;
  /* the device's multiprocessors (cuda: its SMs), for estimates of how
   * many warps run at once; 0: unknown */
  int multiprocessors;

  /* device memory, ordered on `stream`: usable by work enqueued there
   * after the call, and by any stream once that work has completed */
  int (*alloc)(struct funnel_backend *be, size_t size, void *stream, uint64_t *out,
               struct funnel_error *error);
  /* frees, ordered on `stream`, memory no enqueued work still uses */
  void (*free)(struct funnel_backend *be, uint64_t ptr, void *stream);
  /* page-locked host memory (cpu: ordinary aligned memory) */
  int (*host_alloc)(struct funnel_backend *be, size_t size, void **out,
                    struct funnel_error *error);
  void (*host_free)(struct funnel_backend *be, void *ptr);
  /* optional: the device address at which kernels read host_alloc memory
   * (cuda with unified addressing: the host address itself) */
  int (*host_device_address)(struct funnel_backend *be, void *host, uint64_t *out,
                             struct funnel_error *error);

  int (*stream_create)(struct funnel_backend *be, void **out,
                       struct funnel_error *error);
  void (*stream_destroy)(struct funnel_backend *be, void *stream);
  /* work enqueued on `stream` after the call waits for the completion of
   * `event`'s last record before it (cuda: cuStreamWaitEvent) */
  int (*stream_wait)(struct funnel_backend *be, void *stream, void *event,
                     struct funnel_error *error);

  /* `src` must stay valid until an event recorded after it completes */
  int (*copy_h2d_async)(struct funnel_backend *be, uint64_t dst, const void *src,
                        size_t size, void *stream, struct funnel_error *error);
  int (*copy_d2h_async)(struct funnel_backend *be, void *dst, uint64_t src,
                        size_t size, void *stream, struct funnel_error *error);
  /* optional: `n` host-to-device copies in one call (cuda: cuMemcpyBatchAsync
   * where the driver has it); NULL: the wrapper makes one call per copy */
  int (*copy_h2d_batch_async)(struct funnel_backend *be, const uint64_t *dst,
                              const void *const *src, const size_t *size, size_t n,
                              void *stream, struct funnel_error *error);
  int (*copy_d2d_async)(struct funnel_backend *be, uint64_t dst, uint64_t src, size_t size,
                        void *stream, struct funnel_error *error);
  /* runs the `count` segments at device address `segments` */
  int (*launch_concat)(struct funnel_backend *be, uint64_t segments, int64_t count,
                       void *stream, struct funnel_error *error);
  /* runs stage `stage` of the device path (dpath.h, enum funnel__dp_stage;
   * with FUNNEL_DP_STAGE_NESTED for a read with nested columns, and a
   * concat with FUNNEL_DP_STAGE_VAR for a flat one with string columns)
   * over items [first, first + n) with m as the stage says, its struct
   * funnel__dp_args at device address `args`; or, FUNNEL_DP_STAGE_LZ4
   * (lz4dec.h), decodes the n struct funnel__lz4_job at `args` into the
   * buffers at m, unless `first` is the args of a gated pass whose gate is
   * shut (dpath.h, funnel__dp_shut; first 0: no gate), and
   * FUNNEL_DP_STAGE_LZ4_WAYS alike, a job of frames in ways; or,
   * FUNNEL_DP_STAGE_ZSTD (zstddec.h), decodes them all, ZSTD ones among
   * them, with the same gate */
  int (*launch_dpath)(struct funnel_backend *be, int stage, uint64_t args, int64_t first,
                      int64_t n, int64_t m, void *stream, struct funnel_error *error);

  int (*event_create)(struct funnel_backend *be, void **out, struct funnel_error *error);
  /* an event that can be timed with event_elapsed_ns (cuda: without
   * CU_EVENT_DISABLE_TIMING, a little dearer to record) */
  int (*event_create_timed)(struct funnel_backend *be, void **out, struct funnel_error *error);
  /* device time between the completions of two timed events' last records */
  int (*event_elapsed_ns)(struct funnel_backend *be, void *start, void *end, int64_t *ns,
                          struct funnel_error *error);
  int (*event_record)(struct funnel_backend *be, void *event, void *stream,
                      struct funnel_error *error);
  /* *done = 1 when everything before the last record has completed */
  int (*event_query)(struct funnel_backend *be, void *event, int *done,
                     struct funnel_error *error);
  int (*event_wait)(struct funnel_backend *be, void *event, struct funnel_error *error);
  void (*event_destroy)(struct funnel_backend *be, void *event);

  /* Sharing with other processes (ipc.c). Memory another process opens by
   * a handle (cuda: cuMemAlloc + cuIpcGetMemHandle; cpu: a POSIX shared
   * memory object, named in the handle); the opener sees it read only. */
  int (*shared_alloc)(struct funnel_backend *be, size_t size, uint64_t *out,
                      struct funnel__ipc_handle *handle, struct funnel_error *error);
  void (*shared_free)(struct funnel_backend *be, uint64_t ptr, size_t size,
                      const struct funnel__ipc_handle *handle);
  int (*shared_open)(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                     size_t size, uint64_t *out, struct funnel_error *error);
  void (*shared_close)(struct funnel_backend *be, uint64_t ptr, size_t size);
  /* optional: an event another process may wait on (cuda:
   * CU_EVENT_INTERPROCESS); NULL: the exporter waits instead */
  int (*ipc_event_create)(struct funnel_backend *be, void **out,
                          struct funnel__ipc_handle *handle, struct funnel_error *error);
  int (*ipc_event_open)(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                        void **out, struct funnel_error *error);
  /* the device's UUID (cpu: the host's boot id) */
  int (*device_uuid)(struct funnel_backend *be, uint8_t uuid[16], struct funnel_error *error);
  /* optional: the ordinal this process knows the device `uuid` by (-1: it
   * does not see it) and whether this device may map that one's memory
   * (peer access: a table shared from there is read in place); NULL: only
   * tables of this device itself can be opened */
  int (*peer)(struct funnel_backend *be, const uint8_t uuid[16], int *ordinal, int *can_access,
              struct funnel_error *error);

  void (*release)(struct funnel_backend *be);

  /* Not the backend's: a caller's allocator (funnel_device_open_with_allocator),
   * set by device.c once the backend is filled; NULL: the backend's alloc and
   * free. Owned by the wrappers (backend.c), freed by funnel__dev_release. */
  struct funnel__user_alloc *user_alloc;
  /* Not the backend's either: plain events given back
   * (funnel__dev_event_give), for the next take; set by device.c
   * (funnel__dev_pool_events), freed by funnel__dev_release. */
  struct funnel__event_pool *event_pool;
};

/* The backends. Each fills `be` or returns an error (cuda:
 * FUNNEL_ERR_NO_DEVICE when there is no driver or device, or no device of
 * that ordinal). cuda_backend_open takes a device ordinal, or -1 for the
 * device of the calling thread's current context, else device 0;
 * cuda_backend_init is cuda_backend_open(be, -1, error). */
int funnel__cpu_backend_init(struct funnel_backend *be, struct funnel_error *error);
int funnel__cuda_backend_init(struct funnel_backend *be, struct funnel_error *error);
int funnel__cuda_backend_open(struct funnel_backend *be, int ordinal, struct funnel_error *error);

/* FUNNEL_OK when `be` was filled for this funnel's vtable layout; else
 * FUNNEL_ERR_UNSUPPORTED naming the backend and both versions. */
int funnel__backend_check(const struct funnel_backend *be, struct funnel_error *error);

/* Calls made through the wrappers by the calling thread, so a read can
 * count what it did by taking the difference around each phase. */
struct funnel__calls {
  int64_t calls;
  int64_t allocs;
  int64_t host_allocs;
  int64_t h2d_copies;
  int64_t bytes_h2d;
  int64_t d2h_copies;
  int64_t bytes_d2h;
  int64_t h2d_batches; /* batched copy calls (their copies are in h2d_copies) */
  int64_t d2d_copies;
  int64_t launches;
  int64_t syncs; /* event waits */
};
struct funnel__calls funnel__calls_now(void);

/* Objects made through the wrappers and not yet freed, over every thread:
 * a test's way to see that nothing leaked. */
struct funnel__live {
  int64_t allocs;      /* device allocations */
  int64_t host_allocs; /* pinned host allocations */
  int64_t events;
  int64_t streams;
};
struct funnel__live funnel__live_now(void);

/* Fault injection, for tests: after funnel__fault_arm(kind, k), the k-th
 * call of that kind (counted over every thread) fails with an error whose
 * message names the step and says it was injected; k <= 0 disarms.
 * Event waits and queries are never failed: a read that cannot wait for
 * its work cannot free it. */
enum funnel__fault_kind {
  FUNNEL__FAULT_ALLOC,  /* device allocations */
  FUNNEL__FAULT_PINNED, /* pinned host allocations and pinned pool blocks */
  FUNNEL__FAULT_COPY,   /* copies of every direction */
  FUNNEL__FAULT_LAUNCH, /* kernel launches */
  FUNNEL__FAULT_EVENT,  /* event creation and record */
  FUNNEL__N_FAULTS
};
void funnel__fault_arm(int kind, int64_t k);
/* calls of the kind made since it was armed */
int64_t funnel__fault_calls(int kind);
/* true when this call of the kind is the armed one (the wrappers and the
 * pinned pool ask) */
bool funnel__fault_hit(int kind);

/* Makes funnel__dev_alloc and funnel__dev_free go through `allocator` (the
 * caller's, copied) instead of the backend's pool, for the backend's life. */
int funnel__dev_use_allocator(struct funnel_backend *be, const struct funnel_allocator *allocator,
                              struct funnel_error *error);
int funnel__dev_alloc(struct funnel_backend *be, size_t size, void *stream, uint64_t *out,
                      struct funnel_error *error);
void funnel__dev_free(struct funnel_backend *be, uint64_t ptr, void *stream);
int funnel__dev_host_alloc(struct funnel_backend *be, size_t size, void **out,
                           struct funnel_error *error);
void funnel__dev_host_free(struct funnel_backend *be, void *ptr);
int funnel__dev_host_device_address(struct funnel_backend *be, void *host, uint64_t *out,
                                    struct funnel_error *error);
int funnel__dev_stream_create(struct funnel_backend *be, void **out,
                              struct funnel_error *error);
void funnel__dev_stream_destroy(struct funnel_backend *be, void *stream);
/* Never failed by fault injection, as event waits: a read that cannot
 * order its work cannot free it. */
int funnel__dev_stream_wait(struct funnel_backend *be, void *stream, void *event,
                            struct funnel_error *error);
int funnel__dev_copy_h2d_async(struct funnel_backend *be, uint64_t dst, const void *src,
                               size_t size, void *stream, struct funnel_error *error);
int funnel__dev_copy_d2h_async(struct funnel_backend *be, void *dst, uint64_t src,
                               size_t size, void *stream, struct funnel_error *error);
/* `n` copies: one batched call when the backend has one, else one each */
int funnel__dev_copy_h2d_batch_async(struct funnel_backend *be, const uint64_t *dst,
                                     const void *const *src, const size_t *size, size_t n,
                                     void *stream, struct funnel_error *error);
int funnel__dev_copy_d2d_async(struct funnel_backend *be, uint64_t dst, uint64_t src,
                               size_t size, void *stream, struct funnel_error *error);
int funnel__dev_launch_concat(struct funnel_backend *be, uint64_t segments, int64_t count,
                              void *stream, struct funnel_error *error);
int funnel__dev_launch_dpath(struct funnel_backend *be, int stage, uint64_t args, int64_t n,
                             int64_t m, void *stream, struct funnel_error *error);
/* the items [first, first + n) of a stage (dpath.h: the parse of some of
 * a read's partitions) */
int funnel__dev_launch_dpath_from(struct funnel_backend *be, int stage, uint64_t args,
                                  int64_t first, int64_t n, int64_t m, void *stream,
                                  struct funnel_error *error);
int funnel__dev_event_create(struct funnel_backend *be, void **out,
                             struct funnel_error *error);
/* A plain event as funnel__dev_event_create makes one, taken from the
 * events given back when there is one; funnel__dev_event_give keeps it for
 * the next take (destroys it when the pool is full, or has none). To a
 * caller a take is a create and a give a destroy: both are counted so
 * (live events, fault injection), though neither need call the backend.
 * Why: on cuda, creating and destroying an event cost 0.1 to 0.6 us on a
 * thread alone, and took most of a read's 0.8 ms with 16 reads at once
 * (bench/RESULTS.md, --concurrent). A given event may still be pending
 * (a backend must allow a record on another stream then); a read records
 * its events before anyone waits on them, but for a read that failed,
 * whose release may wait on the event's last record, another read's. */
int funnel__dev_event_take(struct funnel_backend *be, void **out, struct funnel_error *error);
void funnel__dev_event_give(struct funnel_backend *be, void *event);
/* Gives `be` its pool of events (device.c, once the backend is filled). */
int funnel__dev_pool_events(struct funnel_backend *be, struct funnel_error *error);
int funnel__dev_event_create_timed(struct funnel_backend *be, void **out,
                                   struct funnel_error *error);
int funnel__dev_event_elapsed_ns(struct funnel_backend *be, void *start, void *end,
                                 int64_t *ns, struct funnel_error *error);
int funnel__dev_event_record(struct funnel_backend *be, void *event, void *stream,
                             struct funnel_error *error);
int funnel__dev_event_query(struct funnel_backend *be, void *event, int *done,
                            struct funnel_error *error);
int funnel__dev_event_wait(struct funnel_backend *be, void *event,
                           struct funnel_error *error);
void funnel__dev_event_destroy(struct funnel_backend *be, void *event);
/* sharing: counted in live allocs (memory) and events, like the others */
int funnel__dev_shared_alloc(struct funnel_backend *be, size_t size, uint64_t *out,
                             struct funnel__ipc_handle *handle, struct funnel_error *error);
void funnel__dev_shared_free(struct funnel_backend *be, uint64_t ptr, size_t size,
                             const struct funnel__ipc_handle *handle);
int funnel__dev_shared_open(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                            size_t size, uint64_t *out, struct funnel_error *error);
void funnel__dev_shared_close(struct funnel_backend *be, uint64_t ptr, size_t size);
int funnel__dev_ipc_event_create(struct funnel_backend *be, void **out,
                                 struct funnel__ipc_handle *handle, struct funnel_error *error);
int funnel__dev_ipc_event_open(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                               void **out, struct funnel_error *error);

/* whether the backend can share tables with other processes */
bool funnel__dev_can_share(const struct funnel_backend *be);
int funnel__dev_peer(struct funnel_backend *be, const uint8_t uuid[16], int *ordinal,
                     int *can_access, struct funnel_error *error);
int funnel__dev_device_uuid(struct funnel_backend *be, uint8_t uuid[16],
                            struct funnel_error *error);
/* releases the backend itself (after everything made from it) */
void funnel__dev_release(struct funnel_backend *be);

/* The partition-map concat, as the cpu backend runs it: every segment in
 * order. The reference for every other backend's kernel. */
void funnel__concat_segments(const struct funnel__segment *segments, int64_t count);

#endif
