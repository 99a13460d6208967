/* workers.c: the shared host threads (workers.h). */
#define _POSIX_C_SOURCE 200809L
#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "tuning.h"

static struct {
  pthread_once_t once;
  pthread_mutex_t busy; /* held by the caller whose loop runs */
  pthread_mutex_t mu;   /* guards the fields below and the condition */
  pthread_cond_t cv;
  int threads;          /* workers started */
  uint64_t generation;  /* bumped for each loop */
  funnel__task_fn fn;
  void *ctx;
  int64_t n;
  _Atomic int64_t next;     /* the next index to claim */
  _Atomic int64_t finished; /* calls returned */
  int active;               /* workers inside the current loop */
} pool = {.once = PTHREAD_ONCE_INIT,
          .busy = PTHREAD_MUTEX_INITIALIZER,
          .mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER};

/* Claims and runs indices until none is left. */
static void drain(funnel__task_fn fn, void *ctx, int64_t n) {
  for (;;) {
    const int64_t i = atomic_fetch_add(&pool.next, 1);
    if (i >= n) return;
    fn(ctx, i);
    atomic_fetch_add(&pool.finished, 1);
  }
}

static void *worker(void *arg) {
  (void)arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (pool.generation == seen || pool.fn == NULL) {
      seen = pool.fn == NULL ? pool.generation : seen;
      pthread_cond_wait(&pool.cv, &pool.mu);
    }
    seen = pool.generation;
    funnel__task_fn fn = pool.fn;
    void *ctx = pool.ctx;
    const int64_t n = pool.n;
    pool.active++;
    pthread_mutex_unlock(&pool.mu);
    drain(fn, ctx, n);
    pthread_mutex_lock(&pool.mu);
    pool.active--;
    pthread_cond_broadcast(&pool.cv);
  }
  return NULL;
}

static void start(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int want = FUNNEL__HOST_THREADS_MAX;
  if (cores < want) want = cores > 0 ? (int)cores : 1;
  const char *env = getenv("FUNNEL_HOST_THREADS");
  if (env != NULL && *env) want = atoi(env);
  if (want > FUNNEL__HOST_THREADS_LIMIT) want = FUNNEL__HOST_THREADS_LIMIT;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < want - 1; i++) {
    pthread_t t;
    if (pthread_create(&t, &attr, worker, NULL) != 0) break;
    pool.threads++;
  }
  pthread_attr_destroy(&attr);
}

void funnel__parallel_for(int64_t n, funnel__task_fn fn, void *ctx) {
  if (n <= 0) return;
  pthread_once(&pool.once, start);
  if (n == 1 || pool.threads == 0 || pthread_mutex_trylock(&pool.busy) != 0) {
    for (int64_t i = 0; i < n; i++) fn(ctx, i); /* alone */
    return;
  }
  pthread_mutex_lock(&pool.mu);
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  atomic_store(&pool.next, 0);
  atomic_store(&pool.finished, 0);
  pool.generation++;
  pthread_cond_broadcast(&pool.cv);
  pthread_mutex_unlock(&pool.mu);

  drain(fn, ctx, n);

  /* every call returned and no worker still holds this loop */
  pthread_mutex_lock(&pool.mu);
  while (atomic_load(&pool.finished) < n || pool.active > 0) pthread_cond_wait(&pool.cv, &pool.mu);
  pool.fn = NULL;
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool.busy);
}
