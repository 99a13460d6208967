/* pinned.c: the pinned blocks callers allocate (pinned.h, funnel.h
 * "pinned blocks"): each is checked when freed, holds its device, and is
 * held by the tables whose work may read it; a free waits for that work
 * (driving it itself: it waits on the tables' events), so the device never
 * reads a block given back and handed out again. */
#include <stdlib.h>
#include <string.h>

#include "table.h"

struct funnel__pinned_block {
  struct funnel_device *dev; /* whose pool it is of */
  uint8_t *ptr;
  int64_t size;   /* as allocated */
  int64_t extent; /* the bytes the pool gave it */
  bool freeing;   /* a free waits for its holders */
  struct funnel_table **holders; /* tables whose work may read it */
  int64_t n_holders, cap_holders;
};

#define OUT_OF_MEMORY(error) FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory")

/* The live caller blocks of every device, by address (the pools never
 * overlap): a read holds the blocks its partitions lie in whichever
 * device's pool they are of. (One a device, a read on device A of a block
 * of device B held nothing, and B's free gave the block back under the
 * read's work: a hostile test of the Java API, 2026-11-29.) */
static struct funnel__pinned {
  pthread_mutex_t mu;
  pthread_cond_t changed;               /* a read that holds blocks ended */
  struct funnel__pinned_block **blocks; /* by address */
  int64_t n, cap;
} registry = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0};

/* Room for one more of the `n` elements of `size` bytes at `a` (room for
 * *cap): `a` itself, or a bigger copy; NULL when out of memory (`a` stays). */
static void *room_for_one(void *a, int64_t n, int64_t *cap, size_t size) {
  if (n < *cap) return a;
  const int64_t want = *cap ? 2 * *cap : 8;
  void *bigger = realloc(a, (size_t)want * size);
  if (bigger != NULL) *cap = want;
  return bigger;
}

/* The index of the last block that starts at or before `at`, or -1; the
 * caller holds the lock. */
static int64_t floor_block(const struct funnel__pinned *p, uintptr_t at) {
  int64_t lo = 0, hi = p->n; /* the first block starting after `at` */
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if ((uintptr_t)p->blocks[mid]->ptr <= at) lo = mid + 1; else hi = mid;
  }
  return lo - 1;
}

/* ---------------------------------------------------------------- callers */

funnel_status funnel_device_pinned_alloc(struct funnel_device *dev, size_t size, void **out,
                                         struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(dev != NULL && out != NULL, "funnel_device_pinned_alloc: NULL argument");
  FUNNEL_CHECK_ARG(size <= INT64_MAX, "funnel_device_pinned_alloc: size too large");
  struct funnel__pinned *p = &registry;
  struct funnel__pinned_block *b = calloc(1, sizeof(*b));
  if (b == NULL) return OUT_OF_MEMORY(error);
  b->dev = dev;
  b->size = (int64_t)size;
  b->ptr = funnel__pool_alloc(&dev->pool, b->size);
  if (b->ptr == NULL) {
    free(b);
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY,
                      "the pinned pool (%lld bytes, %lld in use) cannot hold %zu more bytes",
                      (long long)dev->pool.size, (long long)funnel__pool_in_use(&dev->pool), size);
  }
  /* aligned up once the pool holds it: no larger than the pool */
  b->extent = funnel__align_up(size > 0 ? b->size : 1, FUNNEL__ALIGN);
  pthread_mutex_lock(&p->mu);
  struct funnel__pinned_block **blocks = room_for_one(p->blocks, p->n, &p->cap, sizeof(*blocks));
  const bool room = blocks != NULL;
  if (room) {
    p->blocks = blocks;
    const int64_t at = floor_block(p, (uintptr_t)b->ptr) + 1;
    memmove(&p->blocks[at + 1], &p->blocks[at], (size_t)(p->n - at) * sizeof(*p->blocks));
    p->blocks[at] = b;
    p->n++;
  }
  pthread_mutex_unlock(&p->mu);
  if (!room) {
    funnel__pool_free(&dev->pool, b->ptr, b->size);
    free(b);
    return OUT_OF_MEMORY(error);
  }
  funnel__device_ref(dev); /* the pool stays while the block lives */
  *out = b->ptr;
  return FUNNEL_OK;
}

/* Finds the live block of `dev` that starts at `ptr`, allocated with
 * `size` bytes, and marks it as being freed; the caller holds the lock. */
static int find_for_free(struct funnel__pinned *p, const struct funnel_device *dev,
                         const void *ptr, size_t size, struct funnel__pinned_block **out,
                         struct funnel_error *error) {
  const int64_t at = floor_block(p, (uintptr_t)ptr);
  struct funnel__pinned_block *b = at >= 0 ? p->blocks[at] : NULL;
  if (b == NULL || b->ptr != ptr || b->freeing || b->dev != dev)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "funnel_device_pinned_free: %p is not the start of a live pinned block of "
                      "this device (never allocated, or freed already)",
                      ptr);
  if ((size_t)b->size != size)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "funnel_device_pinned_free: the pinned block at %p was allocated with %lld "
                      "bytes, not %zu",
                      ptr, (long long)b->size, size);
  b->freeing = true;
  *out = b;
  return FUNNEL_OK;
}

/* Waits, with the lock held and given up around each wait, until no table
 * holds `b`: for each holder, until its read has returned, then for its
 * work (funnel_table_wait lets go of the block). */
static int wait_for_holders(struct funnel__pinned *p, struct funnel__pinned_block *b,
                            struct funnel_error *error) {
  while (b->n_holders > 0) {
    struct funnel_table *t = b->holders[b->n_holders - 1];
    if (t->held.reading) {
      pthread_cond_wait(&p->changed, &p->mu);
      continue;
    }
    funnel__table_ref(t);
    pthread_mutex_unlock(&p->mu);
    const int st = funnel_table_wait(t, error);
    funnel__table_unref(t);
    pthread_mutex_lock(&p->mu);
    if (st != FUNNEL_OK) return st;
  }
  return FUNNEL_OK;
}

funnel_status funnel_device_pinned_free(struct funnel_device *dev, void *ptr, size_t size,
                                        struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(dev != NULL, "funnel_device_pinned_free: dev is NULL");
  if (ptr == NULL) return FUNNEL_OK;
  struct funnel__pinned *p = &registry;
  struct funnel__pinned_block *b = NULL;
  pthread_mutex_lock(&p->mu);
  int st = find_for_free(p, dev, ptr, size, &b, error);
  if (st == FUNNEL_OK) st = wait_for_holders(p, b, error);
  if (st == FUNNEL_OK) {
    const int64_t at = floor_block(p, (uintptr_t)ptr);
    memmove(&p->blocks[at], &p->blocks[at + 1], (size_t)(p->n - at - 1) * sizeof(*p->blocks));
    p->n--;
  } else if (b != NULL) {
    b->freeing = false; /* its work could not be waited for: it stays */
  }
  pthread_mutex_unlock(&p->mu);
  if (st != FUNNEL_OK) return st;
  free(b->holders);
  free(b);
  funnel__pool_free(&dev->pool, ptr, (int64_t)size);
  funnel__device_unref(dev); /* the last block of a closed device closes it */
  return FUNNEL_OK;
}

int64_t funnel_device_pinned_in_use(struct funnel_device *dev) {
  return dev != NULL ? funnel__pool_in_use(&dev->pool) : 0;
}

/* ------------------------------------------------------------------ reads */

/* `t` holds `b`, once. */
static int hold_block(struct funnel__pinned_block *b, struct funnel_table *t,
                      struct funnel_error *error) {
  if (b->n_holders > 0 && b->holders[b->n_holders - 1] == t) return FUNNEL_OK;
  struct funnel__pinned_held *h = &t->held;
  struct funnel_table **holders =
      room_for_one(b->holders, b->n_holders, &b->cap_holders, sizeof(*holders));
  if (holders != NULL) b->holders = holders;
  struct funnel__pinned_block **held = room_for_one(h->blocks, h->n, &h->cap, sizeof(*held));
  if (held != NULL) h->blocks = held;
  if (holders == NULL || held == NULL) return OUT_OF_MEMORY(error);
  b->holders[b->n_holders++] = t;
  h->blocks[h->n++] = b;
  return FUNNEL_OK;
}

/* `t` holds every block that bytes [at, at + len) overlap; *last is the
 * block `at` lies in, or NULL. */
static int hold_range(struct funnel__pinned *p, struct funnel_table *t, uintptr_t at, size_t len,
                      struct funnel__pinned_block **last, struct funnel_error *error) {
  int64_t i = floor_block(p, at);
  *last = NULL;
  if (i < 0) i = 0;
  for (; i < p->n && (uintptr_t)p->blocks[i]->ptr < at + len; i++) {
    struct funnel__pinned_block *b = p->blocks[i];
    if ((uintptr_t)b->ptr + (uint64_t)b->extent <= at) continue; /* ends before */
    FUNNEL_RETURN_NOT_OK(hold_block(b, t, error));
    if ((uintptr_t)b->ptr <= at) *last = b;
  }
  return FUNNEL_OK;
}

int funnel__pinned_hold(struct funnel_table *t, const struct funnel_partition *parts,
                        size_t count, uintptr_t lo, uintptr_t hi, struct funnel_error *error) {
  struct funnel__pinned *p = &registry;
  int st = FUNNEL_OK;
  pthread_mutex_lock(&p->mu);
  const int64_t first = lo < hi ? floor_block(p, lo) : -1;
  struct funnel__pinned_block *span = first >= 0 ? p->blocks[first] : NULL;
  if (span != NULL && hi - (uintptr_t)span->ptr <= (uint64_t)span->extent) {
    st = hold_block(span, t, error); /* every partition lies in it */
    count = 0;
  }
  struct funnel__pinned_block *last = NULL;
  for (size_t i = 0; i < count && p->n > 0 && st == FUNNEL_OK; i++) {
    const uintptr_t at = (uintptr_t)parts[i].data;
    const size_t len = parts[i].length;
    if (len == 0 || at == 0 || len > UINTPTR_MAX - at) continue; /* parse says what is wrong */
    if (last != NULL && at >= (uintptr_t)last->ptr &&
        at + len <= (uintptr_t)last->ptr + (uint64_t)last->extent)
      continue; /* in the block of the partition before */
    st = hold_range(p, t, at, len, &last, error);
  }
  t->held.reading = t->held.n > 0;
  pthread_mutex_unlock(&p->mu);
  return st;
}

void funnel__pinned_read_done(struct funnel_table *t) {
  struct funnel__pinned *p = &registry;
  if (t->held.n == 0) return;
  pthread_mutex_lock(&p->mu);
  t->held.reading = false;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->mu);
}

void funnel__pinned_unhold(struct funnel_table *t) {
  struct funnel__pinned *p = &registry;
  struct funnel__pinned_held *h = &t->held;
  if (h->n == 0) return;
  pthread_mutex_lock(&p->mu);
  for (int64_t i = 0; i < h->n; i++) {
    struct funnel__pinned_block *b = h->blocks[i];
    for (int64_t k = b->n_holders - 1; k >= 0; k--)
      if (b->holders[k] == t) {
        b->holders[k] = b->holders[--b->n_holders];
        break;
      }
  }
  free(h->blocks);
  *h = (struct funnel__pinned_held){0};
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->mu);
}
