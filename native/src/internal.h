/* internal.h: what every file of native/src shares: errors, checked
 * arithmetic, a bump arena. Cross-file internals are named funnel__x. */
#ifndef FUNNEL_INTERNAL_H
#define FUNNEL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "funnel.h"
#include "tuning.h"

/* Rows in one batch, and in one table: far beyond any real input, and small
 * enough that sizes derived from a row count (bitmaps, offsets, 16-byte
 * values) cannot overflow int64. */
#define FUNNEL__MAX_ROWS (INT64_MAX / 64)
/* The most bytes a table's buffers may take together: 64 TiB, far past any
 * device, so that headers claiming absurd sizes (rows of a zero-width
 * column take no bytes of input) fail as a limit, not as an allocation. */
#define FUNNEL__MAX_OUTPUT_BYTES ((int64_t)1 << 46)

/* Fills `error` (which may be NULL) and returns `code`. `partition`,
 * `column`, `offset` are -1 when not known. */
__attribute__((format(printf, 6, 7)))
int funnel__error_set(struct funnel_error *error, int code, int64_t partition,
                      int64_t column, int64_t offset, const char *fmt, ...);

/* Clears `error` to FUNNEL_OK. */
void funnel__error_clear(struct funnel_error *error);

#define FUNNEL_RETURN_NOT_OK(expr)        \
  do {                                    \
    int funnel__st = (expr);              \
    if (funnel__st != FUNNEL_OK) return funnel__st; \
  } while (0)

#define FUNNEL_ERR(error, code, ...) \
  funnel__error_set((error), (code), -1, -1, -1, __VA_ARGS__)

/* In a function whose error parameter is `error`: unless `cond`, returns
 * FUNNEL_ERR_INVALID_ARGUMENT with the message `what`. */
#define FUNNEL_CHECK_ARG(cond, what) \
  if (!(cond)) return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "%s", what)

static inline bool funnel__add_overflows(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out);
}
static inline bool funnel__mul_overflows(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static inline int64_t funnel__align_up(int64_t n, int64_t a) {
  return (n + a - 1) / a * a;
}
/* Reserves `size` bytes of a layout at a FUNNEL__ALIGN boundary: returns
 * where they start; *cursor moves past them. */
static inline int64_t funnel__carve(int64_t *cursor, int64_t size) {
  const int64_t at = *cursor;
  *cursor = funnel__align_up(at + size, FUNNEL__ALIGN);
  return at;
}

int64_t funnel__now_ns(void);

/* A bump allocator for one read's host bookkeeping: many small allocations,
 * one free. */
struct funnel__arena {
  struct funnel__arena_block *head;
};
void *funnel__arena_alloc(struct funnel__arena *arena, size_t size);
void *funnel__arena_calloc(struct funnel__arena *arena, size_t n, size_t size);
void funnel__arena_free(struct funnel__arena *arena);
/* Moves every block of `from` into `into` (freed with it); `from` is left
 * empty. New allocations from `into` go on in its own newest block. */
void funnel__arena_splice(struct funnel__arena *into, struct funnel__arena *from);

/* The calls in progress on an object (the reads of a reader, the calls on
 * a table), which freeing the object waits for. */
struct funnel__inflight {
  pthread_mutex_t mu;
  pthread_cond_t idle;
  int64_t n;
};
void funnel__inflight_init(struct funnel__inflight *f);
void funnel__inflight_destroy(struct funnel__inflight *f);
void funnel__inflight_enter(struct funnel__inflight *f);
void funnel__inflight_leave(struct funnel__inflight *f);
/* Returns once no call is in progress. */
void funnel__inflight_wait_idle(struct funnel__inflight *f);
int64_t funnel__inflight_count(struct funnel__inflight *f);

#endif
