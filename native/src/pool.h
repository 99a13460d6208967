/* pool.h: the pinned host pool of a device: one page-locked allocation,
 * made once (the first time a read or a caller needs it; cuMemHostAlloc
 * costs ~130 ms per 256 MiB) and carved by a first-fit free list. It
 * stages pageable partitions and segment tables, and backs the buffers
 * callers allocate to fetch partitions straight into pinned memory. */
#ifndef FUNNEL_POOL_H
#define FUNNEL_POOL_H

#include <pthread.h>

#include "backend.h"

struct funnel__pool {
  pthread_mutex_t mu;
  struct funnel_backend *be;
  uint8_t *base;           /* NULL until first use */
  uint64_t device_base;    /* where kernels read `base`; 0: they cannot */
  int64_t size;
  int64_t in_use;
  int failed;              /* the one allocation failed: do not retry per read */
  struct funnel__pool_block *free_list; /* sorted by offset, coalesced */
};

void funnel__pool_init(struct funnel__pool *pool, struct funnel_backend *be, int64_t size);
void funnel__pool_release(struct funnel__pool *pool);

/* A block of at least `size` bytes, 64-byte aligned, or NULL when the pool
 * cannot hold it (the caller then falls back; a NULL is not an error). */
void *funnel__pool_alloc(struct funnel__pool *pool, int64_t size);
void funnel__pool_free(struct funnel__pool *pool, void *ptr, int64_t size);

/* Bytes of the pool in use (caller blocks and staging). */
int64_t funnel__pool_in_use(struct funnel__pool *pool);

/* Whether [ptr, ptr + size) lies inside the pool: memory the device reads
 * without staging. */
bool funnel__pool_contains(struct funnel__pool *pool, const void *ptr, int64_t size);

/* The pool's memory as it is now, for a read to test many partitions
 * against without taking the pool's lock for each (the pool's memory is
 * allocated once and kept until the device closes). */
struct funnel__pool_span {
  const uint8_t *base;
  int64_t size;
};
struct funnel__pool_span funnel__pool_span(struct funnel__pool *pool);
static inline bool funnel__span_contains(struct funnel__pool_span s, const void *ptr, int64_t size) {
  const uint8_t *p = ptr;
  return s.base != NULL && p >= s.base && size <= s.size && p - s.base <= s.size - size;
}

/* The device address of pool memory at `ptr` for kernels to read in place,
 * or 0 when the backend cannot map it. */
uint64_t funnel__pool_device_address(struct funnel__pool *pool, const void *ptr);

#endif
