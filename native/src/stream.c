/* stream.c: the streams callers hand to reads, as validated handles
 * (stream.h, funnel.h "streams"). A process-wide registry maps each
 * handle, a number never given twice, to its stream: a read looks its
 * stream up there and keeps it alive while it enqueues, so a handle that
 * is wrong, destroyed or another device's is an error, never a crash. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "stream.h"

struct funnel__stream {
  uint64_t id;
  struct funnel_device *dev; /* a reference: the stream may outlive the caller's */
  void *native;              /* the backend's stream */
  bool owned;                /* made by funnel (destroyed with it), else the caller's */
  int64_t users;             /* reads using it now */
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t idle;           /* a stream's last user is done */
  uint64_t last_id;              /* the last handle given */
  struct funnel__stream **live;  /* by rising id */
  size_t n, cap;
} registry = {.mu = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

/* The index of stream `id` in the registry, or -1; the caller holds mu. */
static ptrdiff_t find(uint64_t id) {
  size_t lo = 0, hi = registry.n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (registry.live[mid]->id < id) lo = mid + 1; else hi = mid;
  }
  return lo < registry.n && registry.live[lo]->id == id ? (ptrdiff_t)lo : -1;
}

static int add(struct funnel_device *dev, void *native, bool owned, uintptr_t *out,
               struct funnel_error *error) {
  struct funnel__stream *s = calloc(1, sizeof(*s));
  if (s == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  pthread_mutex_lock(&registry.mu);
  if (registry.n == registry.cap) {
    const size_t cap = registry.cap ? 2 * registry.cap : 16;
    struct funnel__stream **live = realloc(registry.live, cap * sizeof(*live));
    if (live == NULL) {
      pthread_mutex_unlock(&registry.mu);
      free(s);
      return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    }
    registry.live = live;
    registry.cap = cap;
  }
  *s = (struct funnel__stream){++registry.last_id, funnel__device_ref(dev), native, owned, 0};
  registry.live[registry.n++] = s; /* ids rise: the order holds */
  *out = (uintptr_t)s->id;
  pthread_mutex_unlock(&registry.mu);
  return FUNNEL_OK;
}

funnel_status funnel_device_stream_create(struct funnel_device *dev, uintptr_t *out,
                                          struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(dev != NULL && out != NULL, "funnel_device_stream_create: NULL argument");
  void *native = NULL;
  FUNNEL_RETURN_NOT_OK(funnel__dev_stream_create(&dev->be, &native, error));
  const int st = add(dev, native, true, out, error);
  if (st != FUNNEL_OK) funnel__dev_stream_destroy(&dev->be, native);
  return st;
}

funnel_status funnel_device_stream_wrap(struct funnel_device *dev, uintptr_t native_stream,
                                        uintptr_t *out, struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(dev != NULL && out != NULL, "funnel_device_stream_wrap: NULL argument");
  if (!dev->be.native_streams)
    return FUNNEL_ERR(error, FUNNEL_ERR_UNSUPPORTED,
                      "funnel_device_stream_wrap: the %s backend has no native streams to wrap; "
                      "make one with funnel_device_stream_create",
                      dev->be.name);
  return add(dev, (void *)native_stream, false, out, error);
}

funnel_status funnel_stream_destroy(uintptr_t stream, struct funnel_error *error) {
  funnel__error_clear(error);
  pthread_mutex_lock(&registry.mu);
  const ptrdiff_t at = find((uint64_t)stream);
  if (at < 0) {
    pthread_mutex_unlock(&registry.mu);
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "funnel_stream_destroy: stream %llu is not a live stream (destroyed "
                      "already, or not made by funnel_device_stream_create/wrap)",
                      (unsigned long long)stream);
  }
  struct funnel__stream *s = registry.live[at];
  for (size_t i = (size_t)at; i + 1 < registry.n; i++) registry.live[i] = registry.live[i + 1];
  registry.n--;
  /* no read finds it now; those that did are done enqueueing before it goes */
  while (s->users > 0) pthread_cond_wait(&registry.idle, &registry.mu);
  pthread_mutex_unlock(&registry.mu);
  if (s->owned) funnel__dev_stream_destroy(&s->dev->be, s->native); /* completes its work */
  funnel__device_unref(s->dev);
  free(s);
  return FUNNEL_OK;
}

int funnel__stream_acquire(uintptr_t stream, const struct funnel_device *dev,
                           struct funnel__stream **out, struct funnel_error *error) {
  pthread_mutex_lock(&registry.mu);
  const ptrdiff_t at = find((uint64_t)stream);
  struct funnel__stream *s = at >= 0 ? registry.live[at] : NULL;
  const bool foreign = s != NULL && s->dev != dev;
  if (s != NULL && !foreign) s->users++;
  pthread_mutex_unlock(&registry.mu);
  if (s == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "stream %llu is not a live stream of this device "
                      "(funnel_device_stream_create/wrap)",
                      (unsigned long long)stream);
  if (foreign)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "stream %llu belongs to another device", (unsigned long long)stream);
  *out = s;
  return FUNNEL_OK;
}

void *funnel__stream_native(const struct funnel__stream *s) { return s->native; }

void funnel__stream_release(struct funnel__stream *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&registry.mu);
  if (--s->users == 0) pthread_cond_broadcast(&registry.idle);
  pthread_mutex_unlock(&registry.mu);
}

int64_t funnel__stream_users(uintptr_t stream) {
  pthread_mutex_lock(&registry.mu);
  const ptrdiff_t at = find((uint64_t)stream);
  const int64_t n = at >= 0 ? registry.live[at]->users : -1;
  pthread_mutex_unlock(&registry.mu);
  return n;
}
