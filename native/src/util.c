/* util.c: errors, the arena, the clock. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

int funnel__error_set(struct funnel_error *error, int code, int64_t partition,
                      int64_t column, int64_t offset, const char *fmt, ...) {
  if (error != NULL) {
    error->code = code;
    error->partition = partition;
    error->column = column;
    error->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error->message, sizeof(error->message), fmt, ap);
    va_end(ap);
  }
  return code;
}

void funnel__error_clear(struct funnel_error *error) {
  if (error == NULL) return;
  error->code = FUNNEL_OK;
  error->partition = error->column = error->offset = -1;
  error->message[0] = '\0';
}

const char *funnel_code_name(int code) {
  switch (code) {
    case FUNNEL_OK: return "FUNNEL_OK";
    case FUNNEL_ERR_INVALID_ARGUMENT: return "FUNNEL_ERR_INVALID_ARGUMENT";
    case FUNNEL_ERR_MALFORMED: return "FUNNEL_ERR_MALFORMED";
    case FUNNEL_ERR_UNSUPPORTED: return "FUNNEL_ERR_UNSUPPORTED";
    case FUNNEL_ERR_SCHEMA_MISMATCH: return "FUNNEL_ERR_SCHEMA_MISMATCH";
    case FUNNEL_ERR_NO_SCHEMA: return "FUNNEL_ERR_NO_SCHEMA";
    case FUNNEL_ERR_LIMIT: return "FUNNEL_ERR_LIMIT";
    case FUNNEL_ERR_HOST_OUT_OF_MEMORY: return "FUNNEL_ERR_HOST_OUT_OF_MEMORY";
    case FUNNEL_ERR_DEVICE_OUT_OF_MEMORY: return "FUNNEL_ERR_DEVICE_OUT_OF_MEMORY";
    case FUNNEL_ERR_DEVICE: return "FUNNEL_ERR_DEVICE";
    case FUNNEL_ERR_NO_DEVICE: return "FUNNEL_ERR_NO_DEVICE";
    case FUNNEL_ERR_IN_USE: return "FUNNEL_ERR_IN_USE";
    case FUNNEL_ERR_FATAL: return "FUNNEL_ERR_FATAL";
    default: return "FUNNEL_ERR_UNKNOWN";
  }
}

int64_t funnel__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct funnel__arena_block {
  struct funnel__arena_block *next;
  size_t used, capacity;
  max_align_t data[];
};

#define ARENA_BLOCK (64 * 1024)

void *funnel__arena_alloc(struct funnel__arena *arena, size_t size) {
  size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  struct funnel__arena_block *b = arena->head;
  if (b == NULL || b->capacity - b->used < size) {
    size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
    b = malloc(sizeof(*b) + cap);
    if (b == NULL) return NULL;
    b->used = 0;
    b->capacity = cap;
    b->next = arena->head;
    arena->head = b;
  }
  void *p = (char *)b->data + b->used;
  b->used += size;
  return p;
}

void *funnel__arena_calloc(struct funnel__arena *arena, size_t n, size_t size) {
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  void *p = funnel__arena_alloc(arena, n * size);
  if (p != NULL) memset(p, 0, n * size);
  return p;
}

void funnel__arena_splice(struct funnel__arena *into, struct funnel__arena *from) {
  struct funnel__arena_block *b = from->head;
  if (b == NULL) return;
  while (b->next != NULL) b = b->next;
  b->next = into->head;
  into->head = from->head;
  from->head = NULL;
}

void funnel__arena_free(struct funnel__arena *arena) {
  struct funnel__arena_block *b = arena->head;
  while (b != NULL) {
    struct funnel__arena_block *next = b->next;
    free(b);
    b = next;
  }
  arena->head = NULL;
}

void funnel__inflight_init(struct funnel__inflight *f) {
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->idle, NULL);
  f->n = 0;
}

void funnel__inflight_destroy(struct funnel__inflight *f) {
  pthread_cond_destroy(&f->idle);
  pthread_mutex_destroy(&f->mu);
}

void funnel__inflight_enter(struct funnel__inflight *f) {
  pthread_mutex_lock(&f->mu);
  f->n++;
  pthread_mutex_unlock(&f->mu);
}

void funnel__inflight_leave(struct funnel__inflight *f) {
  pthread_mutex_lock(&f->mu);
  if (--f->n == 0) pthread_cond_broadcast(&f->idle);
  pthread_mutex_unlock(&f->mu);
}

void funnel__inflight_wait_idle(struct funnel__inflight *f) {
  pthread_mutex_lock(&f->mu);
  while (f->n > 0) pthread_cond_wait(&f->idle, &f->mu);
  pthread_mutex_unlock(&f->mu);
}

int64_t funnel__inflight_count(struct funnel__inflight *f) {
  pthread_mutex_lock(&f->mu);
  const int64_t n = f->n;
  pthread_mutex_unlock(&f->mu);
  return n;
}
