/* pool.c: the pinned host pool (pool.h). */
#include <stdlib.h>
#include <string.h>

#include "pool.h"

struct funnel__pool_block {
  struct funnel__pool_block *next;
  int64_t offset, size;
};

void funnel__pool_init(struct funnel__pool *pool, struct funnel_backend *be, int64_t size) {
  memset(pool, 0, sizeof(*pool));
  pthread_mutex_init(&pool->mu, NULL);
  pool->be = be;
  /* the size aligned up, without passing INT64_MAX (FUNNEL_PINNED_POOL_BYTES
   * may ask for anything) */
  const int64_t most = INT64_MAX / FUNNEL__ALIGN * FUNNEL__ALIGN;
  pool->size = size > most ? most : funnel__align_up(size, FUNNEL__ALIGN);
}

void funnel__pool_release(struct funnel__pool *pool) {
  struct funnel__pool_block *b = pool->free_list;
  while (b != NULL) {
    struct funnel__pool_block *next = b->next;
    free(b);
    b = next;
  }
  if (pool->base != NULL) funnel__dev_host_free(pool->be, pool->base);
  pthread_mutex_destroy(&pool->mu);
  memset(pool, 0, sizeof(*pool));
}

/* The one pinned allocation; the caller holds the lock. */
static bool ensure(struct funnel__pool *pool) {
  if (pool->base != NULL) return true;
  if (pool->failed || pool->size == 0) return false;
  void *p = NULL;
  struct funnel__pool_block *all = malloc(sizeof(*all));
  if (all == NULL || funnel__dev_host_alloc(pool->be, (size_t)pool->size, &p, NULL) != FUNNEL_OK) {
    free(all);
    pool->failed = 1;
    return false;
  }
  pool->base = p;
  uint64_t dev = 0;
  if (pool->be->host_device_address != NULL &&
      funnel__dev_host_device_address(pool->be, p, &dev, NULL) == FUNNEL_OK)
    pool->device_base = dev;
  all->next = NULL;
  all->offset = 0;
  all->size = pool->size;
  pool->free_list = all;
  return true;
}

void *funnel__pool_alloc(struct funnel__pool *pool, int64_t size) {
  if (funnel__fault_hit(FUNNEL__FAULT_PINNED)) return NULL;
  if (size <= 0) size = 1;
  /* more than the whole pool never fits, and could not be aligned up */
  if (size > pool->size) return NULL;
  size = funnel__align_up(size, FUNNEL__ALIGN);
  void *out = NULL;
  pthread_mutex_lock(&pool->mu);
  if (ensure(pool)) {
    struct funnel__pool_block **link = &pool->free_list;
    for (struct funnel__pool_block *b = *link; b != NULL; link = &b->next, b = b->next) {
      if (b->size < size) continue;
      out = pool->base + b->offset;
      b->offset += size;
      b->size -= size;
      if (b->size == 0) {
        *link = b->next;
        free(b);
      }
      pool->in_use += size;
      break;
    }
  }
  pthread_mutex_unlock(&pool->mu);
  return out;
}

void funnel__pool_free(struct funnel__pool *pool, void *ptr, int64_t size) {
  if (ptr == NULL) return;
  if (size <= 0) size = 1;
  size = funnel__align_up(size, FUNNEL__ALIGN);
  const int64_t offset = (uint8_t *)ptr - pool->base;
  pthread_mutex_lock(&pool->mu);
  pool->in_use -= size;
  struct funnel__pool_block *prev = NULL, *next = pool->free_list;
  while (next != NULL && next->offset < offset) {
    prev = next;
    next = next->next;
  }
  if (prev != NULL && prev->offset + prev->size == offset) {
    prev->size += size; /* grow the block before */
    if (next != NULL && prev->offset + prev->size == next->offset) {
      prev->size += next->size;
      prev->next = next->next;
      free(next);
    }
  } else if (next != NULL && offset + size == next->offset) {
    next->offset = offset; /* grow the block after */
    next->size += size;
  } else {
    struct funnel__pool_block *b = malloc(sizeof(*b));
    if (b != NULL) { /* without memory for the node the block is lost, not corrupted */
      b->offset = offset;
      b->size = size;
      b->next = next;
      if (prev != NULL) prev->next = b; else pool->free_list = b;
    }
  }
  pthread_mutex_unlock(&pool->mu);
}

int64_t funnel__pool_in_use(struct funnel__pool *pool) {
  pthread_mutex_lock(&pool->mu);
  const int64_t n = pool->in_use;
  pthread_mutex_unlock(&pool->mu);
  return n;
}

bool funnel__pool_contains(struct funnel__pool *pool, const void *ptr, int64_t size) {
  return funnel__span_contains(funnel__pool_span(pool), ptr, size);
}

struct funnel__pool_span funnel__pool_span(struct funnel__pool *pool) {
  pthread_mutex_lock(&pool->mu);
  const struct funnel__pool_span s = {pool->base, pool->base != NULL ? pool->size : 0};
  pthread_mutex_unlock(&pool->mu);
  return s;
}

uint64_t funnel__pool_device_address(struct funnel__pool *pool, const void *ptr) {
  pthread_mutex_lock(&pool->mu);
  const uint64_t dev = pool->device_base;
  const uint8_t *base = pool->base;
  pthread_mutex_unlock(&pool->mu);
  return dev != 0 ? dev + (uint64_t)((const uint8_t *)ptr - base) : 0;
}
