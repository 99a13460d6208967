/* backend.c: the only callers of the backend vtable. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend.h"

int funnel__backend_check(const struct funnel_backend *be, struct funnel_error *error) {
  if (be->version == FUNNEL_BACKEND_VERSION) return FUNNEL_OK;
  return FUNNEL_ERR(error, FUNNEL_ERR_UNSUPPORTED,
                    "backend %s fills vtable version %d; this funnel knows version %d",
                    be->name ? be->name : "(unnamed)", be->version, FUNNEL_BACKEND_VERSION);
}

static _Thread_local struct funnel__calls calls;

struct funnel__calls funnel__calls_now(void) { return calls; }

/* What is alive, over every thread: allocations, events and streams made
 * through the wrappers and not yet freed. */
static _Atomic int64_t live_allocs, live_host_allocs, live_events, live_streams;

struct funnel__live funnel__live_now(void) {
  return (struct funnel__live){atomic_load(&live_allocs), atomic_load(&live_host_allocs),
                               atomic_load(&live_events), atomic_load(&live_streams)};
}

/* Fault injection: the armed call of each kind fails, counted over every
 * thread from the arming. One relaxed load per call when nothing is armed. */
static _Atomic int64_t fault_at[FUNNEL__N_FAULTS], fault_seen[FUNNEL__N_FAULTS];

void funnel__fault_arm(int kind, int64_t k) {
  if (kind < 0 || kind >= FUNNEL__N_FAULTS) return;
  atomic_store(&fault_seen[kind], 0);
  atomic_store(&fault_at[kind], k > 0 ? k : 0);
}

int64_t funnel__fault_calls(int kind) {
  return kind >= 0 && kind < FUNNEL__N_FAULTS ? atomic_load(&fault_seen[kind]) : 0;
}

bool funnel__fault_hit(int kind) {
  if (atomic_load_explicit(&fault_at[kind], memory_order_relaxed) == 0) return false;
  const int64_t n = atomic_fetch_add(&fault_seen[kind], 1) + 1;
  return n == atomic_load(&fault_at[kind]);
}

#define INJECT(kind, code, step)                                                      \
  if (funnel__fault_hit(kind))                                                         \
  return FUNNEL_ERR(error, code, "[%s] injected fault (FUNNEL__FAULT_" #kind ")", step)

#define MISSING(be, slot) \
  FUNNEL_ERR(error, FUNNEL_ERR_DEVICE, "backend %s has no %s", (be)->name, slot)

/* A caller's allocator and the sizes of what it handed out (its deallocate
 * takes the size, as RMM's does; funnel's frees do not carry it). A device
 * holds a few allocations per live table: a list searched from its end. */
struct funnel__user_alloc {
  struct funnel_allocator a;
  pthread_mutex_t lock;
  struct {
    uint64_t ptr;
    size_t size;
  } *live;
  size_t n, cap;
};

int funnel__dev_use_allocator(struct funnel_backend *be, const struct funnel_allocator *allocator,
                              struct funnel_error *error) {
  struct funnel__user_alloc *u = calloc(1, sizeof(*u));
  if (u == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  u->a = *allocator;
  pthread_mutex_init(&u->lock, NULL);
  be->user_alloc = u;
  return FUNNEL_OK;
}

static int user_alloc(struct funnel__user_alloc *u, size_t size, void *stream, uint64_t *out,
                      struct funnel_error *error) {
  uint64_t p = 0;
  const size_t asked = size ? size : 1;
  const int r = u->a.allocate(u->a.context, asked, stream, &p);
  if (r != 0 || p == 0)
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE_OUT_OF_MEMORY,
                      "the caller's allocator gave no memory for %zu bytes (it returned %d)",
                      asked, r);
  /* the room and the entry in one critical section: calls at once (reads
   * on several threads) each find room for their own entry */
  pthread_mutex_lock(&u->lock);
  bool room = u->n < u->cap;
  if (!room) {
    const size_t cap = u->cap ? 2 * u->cap : 16;
    void *grown = realloc(u->live, cap * sizeof(*u->live));
    if (grown != NULL) {
      u->live = grown;
      u->cap = cap;
      room = true;
    }
  }
  if (room) {
    u->live[u->n].ptr = p;
    u->live[u->n].size = asked;
    u->n++;
  }
  pthread_mutex_unlock(&u->lock);
  if (!room) {
    u->a.deallocate(u->a.context, p, asked, stream);
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  }
  *out = p;
  return FUNNEL_OK;
}

static void user_free(struct funnel__user_alloc *u, uint64_t ptr, void *stream) {
  size_t size = 0;
  pthread_mutex_lock(&u->lock);
  for (size_t i = u->n; i-- > 0;) {
    if (u->live[i].ptr == ptr) {
      size = u->live[i].size;
      u->live[i] = u->live[--u->n];
      break;
    }
  }
  pthread_mutex_unlock(&u->lock);
  u->a.deallocate(u->a.context, ptr, size, stream);
}

int funnel__dev_alloc(struct funnel_backend *be, size_t size, void *stream, uint64_t *out,
                      struct funnel_error *error) {
  INJECT(FUNNEL__FAULT_ALLOC, FUNNEL_ERR_DEVICE_OUT_OF_MEMORY, "device allocation");
  calls.calls++;
  calls.allocs++;
  const int st = be->user_alloc != NULL ? user_alloc(be->user_alloc, size, stream, out, error)
                                        : be->alloc(be, size, stream, out, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_allocs, 1);
  return st;
}

void funnel__dev_free(struct funnel_backend *be, uint64_t ptr, void *stream) {
  if (ptr == 0) return;
  calls.calls++;
  atomic_fetch_sub(&live_allocs, 1);
  if (be->user_alloc != NULL)
    user_free(be->user_alloc, ptr, stream);
  else
    be->free(be, ptr, stream);
}

int funnel__dev_host_alloc(struct funnel_backend *be, size_t size, void **out,
                           struct funnel_error *error) {
  if (be->host_alloc == NULL) return MISSING(be, "host_alloc");
  INJECT(FUNNEL__FAULT_PINNED, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "pinned host allocation");
  calls.calls++;
  calls.host_allocs++;
  const int st = be->host_alloc(be, size, out, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_host_allocs, 1);
  return st;
}

void funnel__dev_host_free(struct funnel_backend *be, void *ptr) {
  if (ptr == NULL || be->host_free == NULL) return;
  calls.calls++;
  atomic_fetch_sub(&live_host_allocs, 1);
  be->host_free(be, ptr);
}

int funnel__dev_host_device_address(struct funnel_backend *be, void *host, uint64_t *out,
                                    struct funnel_error *error) {
  if (be->host_device_address == NULL) return MISSING(be, "host_device_address");
  calls.calls++;
  return be->host_device_address(be, host, out, error);
}

int funnel__dev_stream_create(struct funnel_backend *be, void **out,
                              struct funnel_error *error) {
  calls.calls++;
  const int st = be->stream_create(be, out, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_streams, 1);
  return st;
}

void funnel__dev_stream_destroy(struct funnel_backend *be, void *stream) {
  if (stream == NULL) return;
  calls.calls++;
  atomic_fetch_sub(&live_streams, 1);
  be->stream_destroy(be, stream);
}

int funnel__dev_stream_wait(struct funnel_backend *be, void *stream, void *event,
                            struct funnel_error *error) {
  if (be->stream_wait == NULL) return MISSING(be, "stream_wait");
  calls.calls++;
  return be->stream_wait(be, stream, event, error);
}

int funnel__dev_copy_h2d_async(struct funnel_backend *be, uint64_t dst, const void *src,
                               size_t size, void *stream, struct funnel_error *error) {
  INJECT(FUNNEL__FAULT_COPY, FUNNEL_ERR_DEVICE, "host-to-device copy");
  calls.calls++;
  calls.h2d_copies++;
  calls.bytes_h2d += (int64_t)size;
  return be->copy_h2d_async(be, dst, src, size, stream, error);
}

int funnel__dev_copy_d2h_async(struct funnel_backend *be, void *dst, uint64_t src,
                               size_t size, void *stream, struct funnel_error *error) {
  INJECT(FUNNEL__FAULT_COPY, FUNNEL_ERR_DEVICE, "device-to-host copy");
  calls.calls++;
  calls.d2h_copies++;
  calls.bytes_d2h += (int64_t)size;
  return be->copy_d2h_async(be, dst, src, size, stream, error);
}

int funnel__dev_copy_h2d_batch_async(struct funnel_backend *be, const uint64_t *dst,
                                     const void *const *src, const size_t *size, size_t n,
                                     void *stream, struct funnel_error *error) {
  if (n == 0) return FUNNEL_OK;
  if (be->copy_h2d_batch_async == NULL) {
    for (size_t i = 0; i < n; i++)
      FUNNEL_RETURN_NOT_OK(funnel__dev_copy_h2d_async(be, dst[i], src[i], size[i], stream, error));
    return FUNNEL_OK;
  }
  INJECT(FUNNEL__FAULT_COPY, FUNNEL_ERR_DEVICE, "batched host-to-device copy");
  calls.calls++;
  calls.h2d_batches++;
  calls.h2d_copies += (int64_t)n;
  for (size_t i = 0; i < n; i++) calls.bytes_h2d += (int64_t)size[i];
  return be->copy_h2d_batch_async(be, dst, src, size, n, stream, error);
}

int funnel__dev_copy_d2d_async(struct funnel_backend *be, uint64_t dst, uint64_t src,
                               size_t size, void *stream, struct funnel_error *error) {
  if (be->copy_d2d_async == NULL) return MISSING(be, "copy_d2d_async");
  INJECT(FUNNEL__FAULT_COPY, FUNNEL_ERR_DEVICE, "device-to-device copy");
  calls.calls++;
  calls.d2d_copies++;
  return be->copy_d2d_async(be, dst, src, size, stream, error);
}

int funnel__dev_launch_concat(struct funnel_backend *be, uint64_t segments, int64_t count,
                              void *stream, struct funnel_error *error) {
  INJECT(FUNNEL__FAULT_LAUNCH, FUNNEL_ERR_DEVICE, "concat launch");
  calls.calls++;
  calls.launches++;
  return be->launch_concat(be, segments, count, stream, error);
}

int funnel__dev_launch_dpath_from(struct funnel_backend *be, int stage, uint64_t args,
                                  int64_t first, int64_t n, int64_t m, void *stream,
                                  struct funnel_error *error) {
  if (be->launch_dpath == NULL) return MISSING(be, "launch_dpath");
  INJECT(FUNNEL__FAULT_LAUNCH, FUNNEL_ERR_DEVICE, "device-path launch");
  calls.calls++;
  calls.launches++;
  return be->launch_dpath(be, stage, args, first, n, m, stream, error);
}

int funnel__dev_launch_dpath(struct funnel_backend *be, int stage, uint64_t args, int64_t n,
                             int64_t m, void *stream, struct funnel_error *error) {
  return funnel__dev_launch_dpath_from(be, stage, args, 0, n, m, stream, error);
}

int funnel__dev_event_create(struct funnel_backend *be, void **out,
                             struct funnel_error *error) {
  INJECT(FUNNEL__FAULT_EVENT, FUNNEL_ERR_DEVICE, "event creation");
  calls.calls++;
  const int st = be->event_create(be, out, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_events, 1);
  return st;
}

int funnel__dev_event_create_timed(struct funnel_backend *be, void **out,
                                   struct funnel_error *error) {
  if (be->event_create_timed == NULL) return funnel__dev_event_create(be, out, error);
  INJECT(FUNNEL__FAULT_EVENT, FUNNEL_ERR_DEVICE, "event creation");
  calls.calls++;
  const int st = be->event_create_timed(be, out, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_events, 1);
  return st;
}

int funnel__dev_event_elapsed_ns(struct funnel_backend *be, void *start, void *end,
                                 int64_t *ns, struct funnel_error *error) {
  if (be->event_elapsed_ns == NULL) return MISSING(be, "event_elapsed_ns");
  calls.calls++;
  return be->event_elapsed_ns(be, start, end, ns, error);
}

int funnel__dev_event_record(struct funnel_backend *be, void *event, void *stream,
                             struct funnel_error *error) {
  INJECT(FUNNEL__FAULT_EVENT, FUNNEL_ERR_DEVICE, "event record");
  calls.calls++;
  return be->event_record(be, event, stream, error);
}

int funnel__dev_event_query(struct funnel_backend *be, void *event, int *done,
                            struct funnel_error *error) {
  calls.calls++;
  return be->event_query(be, event, done, error);
}

int funnel__dev_event_wait(struct funnel_backend *be, void *event,
                           struct funnel_error *error) {
  calls.calls++;
  calls.syncs++;
  return be->event_wait(be, event, error);
}

void funnel__dev_event_destroy(struct funnel_backend *be, void *event) {
  if (event == NULL) return;
  calls.calls++;
  atomic_fetch_sub(&live_events, 1);
  be->event_destroy(be, event);
}

/* Plain events given back, for the next take: as many as reads in flight
 * need (a table holds two), at most EVENT_POOL. */
#define EVENT_POOL 256
struct funnel__event_pool {
  pthread_mutex_t lock;
  int n;
  void *events[EVENT_POOL];
};

int funnel__dev_pool_events(struct funnel_backend *be, struct funnel_error *error) {
  struct funnel__event_pool *p = calloc(1, sizeof(*p));
  if (p == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  pthread_mutex_init(&p->lock, NULL);
  be->event_pool = p;
  return FUNNEL_OK;
}

int funnel__dev_event_take(struct funnel_backend *be, void **out, struct funnel_error *error) {
  INJECT(FUNNEL__FAULT_EVENT, FUNNEL_ERR_DEVICE, "event creation");
  struct funnel__event_pool *p = be->event_pool;
  void *event = NULL;
  if (p != NULL) {
    pthread_mutex_lock(&p->lock);
    if (p->n > 0) event = p->events[--p->n];
    pthread_mutex_unlock(&p->lock);
  }
  if (event == NULL) { /* as funnel__dev_event_create, injected once above */
    calls.calls++;
    const int st = be->event_create(be, &event, error);
    if (st != FUNNEL_OK) return st;
  }
  atomic_fetch_add(&live_events, 1);
  *out = event;
  return FUNNEL_OK;
}

void funnel__dev_event_give(struct funnel_backend *be, void *event) {
  struct funnel__event_pool *p = be->event_pool;
  if (event == NULL) return;
  if (p != NULL) {
    pthread_mutex_lock(&p->lock);
    const bool kept = p->n < EVENT_POOL;
    if (kept) p->events[p->n++] = event;
    pthread_mutex_unlock(&p->lock);
    if (kept) {
      atomic_fetch_sub(&live_events, 1);
      return;
    }
  }
  funnel__dev_event_destroy(be, event);
}

int funnel__dev_shared_alloc(struct funnel_backend *be, size_t size, uint64_t *out,
                             struct funnel__ipc_handle *handle, struct funnel_error *error) {
  if (be->shared_alloc == NULL) return MISSING(be, "shared_alloc");
  INJECT(FUNNEL__FAULT_ALLOC, FUNNEL_ERR_DEVICE_OUT_OF_MEMORY, "shared device allocation");
  calls.calls++;
  calls.allocs++;
  const int st = be->shared_alloc(be, size, out, handle, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_allocs, 1);
  return st;
}

void funnel__dev_shared_free(struct funnel_backend *be, uint64_t ptr, size_t size,
                             const struct funnel__ipc_handle *handle) {
  if (ptr == 0 || be->shared_free == NULL) return;
  calls.calls++;
  atomic_fetch_sub(&live_allocs, 1);
  be->shared_free(be, ptr, size, handle);
}

int funnel__dev_shared_open(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                            size_t size, uint64_t *out, struct funnel_error *error) {
  if (be->shared_open == NULL) return MISSING(be, "shared_open");
  calls.calls++;
  const int st = be->shared_open(be, handle, size, out, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_allocs, 1);
  return st;
}

void funnel__dev_shared_close(struct funnel_backend *be, uint64_t ptr, size_t size) {
  if (ptr == 0 || be->shared_close == NULL) return;
  calls.calls++;
  atomic_fetch_sub(&live_allocs, 1);
  be->shared_close(be, ptr, size);
}

int funnel__dev_ipc_event_create(struct funnel_backend *be, void **out,
                                 struct funnel__ipc_handle *handle, struct funnel_error *error) {
  if (be->ipc_event_create == NULL) return MISSING(be, "ipc_event_create");
  INJECT(FUNNEL__FAULT_EVENT, FUNNEL_ERR_DEVICE, "interprocess event creation");
  calls.calls++;
  const int st = be->ipc_event_create(be, out, handle, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_events, 1);
  return st;
}

int funnel__dev_ipc_event_open(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                               void **out, struct funnel_error *error) {
  if (be->ipc_event_open == NULL) return MISSING(be, "ipc_event_open");
  calls.calls++;
  const int st = be->ipc_event_open(be, handle, out, error);
  if (st == FUNNEL_OK) atomic_fetch_add(&live_events, 1);
  return st;
}

bool funnel__dev_can_share(const struct funnel_backend *be) {
  return be->ipc_backend_id != 0 && be->shared_alloc != NULL && be->shared_open != NULL &&
         be->device_uuid != NULL;
}

int funnel__dev_device_uuid(struct funnel_backend *be, uint8_t uuid[16],
                            struct funnel_error *error) {
  if (be->device_uuid == NULL) return MISSING(be, "device_uuid");
  calls.calls++;
  return be->device_uuid(be, uuid, error);
}

int funnel__dev_peer(struct funnel_backend *be, const uint8_t uuid[16], int *ordinal,
                     int *can_access, struct funnel_error *error) {
  *ordinal = -1;
  *can_access = 0;
  if (be->peer == NULL) return FUNNEL_OK;
  calls.calls++;
  return be->peer(be, uuid, ordinal, can_access, error);
}

void funnel__dev_release(struct funnel_backend *be) {
  struct funnel__user_alloc *u = be->user_alloc;
  struct funnel__event_pool *p = be->event_pool;
  if (p != NULL) { /* its events are no longer counted live */
    for (int k = 0; k < p->n; k++) be->event_destroy(be, p->events[k]);
    pthread_mutex_destroy(&p->lock);
    free(p);
    be->event_pool = NULL;
  }
  if (be->release != NULL) be->release(be);
  if (u != NULL) {
    pthread_mutex_destroy(&u->lock);
    free(u->live);
    free(u);
  }
}
