/* workers.c: the shared host threads (workers.h).
 *
 * Each worker sleeps on a semaphore of its own. A loop posts the
 * semaphores of as many workers as it has tasks beyond one, runs tasks
 * itself, then takes back every post no worker has taken yet and waits
 * only for the workers that did take one. Nothing a worker does on waking
 * goes through a lock: with one mutex and one condition variable
 * (the design before), the workers woken by a broadcast took the mutex
 * one after the other, each behind the last one's wake-up, and a loop of
 * 16 tiny tasks cost 170 us in the median on the H100 host's 16 cores
 * (bench/RESULTS.md, 2026-11-24). A worker spins a little after a loop
 * before it sleeps, so that the next loop of the same read (the rounds of
 * a staging, the passes of a plan) finds it awake. */
#define _POSIX_C_SOURCE 200809L
#include "workers.h"

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tuning.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

static struct {
  pthread_once_t once;
  pthread_mutex_t busy; /* held by the caller whose loop runs */
  int threads;          /* workers started */
  sem_t wake[FUNNEL__HOST_THREADS_LIMIT];
  /* the loop that runs: written by its caller before the posts (a post
   * and the wait that takes it order them) */
  funnel__task_fn fn;
  void *ctx;
  int64_t n;
  _Atomic int64_t next; /* the next index to claim */
  _Atomic int inside;   /* workers posted whose post is not yet taken back or done */
} pool = {.once = PTHREAD_ONCE_INIT, .busy = PTHREAD_MUTEX_INITIALIZER};

/* Claims and runs indices until none is left. */
static void drain(funnel__task_fn fn, void *ctx, int64_t n) {
  for (;;) {
    const int64_t i = atomic_fetch_add_explicit(&pool.next, 1, memory_order_relaxed);
    if (i >= n) return;
    fn(ctx, i);
  }
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Takes worker w's post: polling for FUNNEL__WORKER_SPIN_NS after its
 * last loop, then asleep. */
static void await_post(sem_t *s) {
  const int64_t until = now_ns() + FUNNEL__WORKER_SPIN_NS;
  for (int i = 0;; i++) {
    if (sem_trywait(s) == 0) return;
    CPU_RELAX();
    if ((i & 63) == 63 && now_ns() > until) break;
  }
  while (sem_wait(s) != 0) {
  } /* EINTR: wait again */
}

static void *worker(void *arg) {
  sem_t *s = arg;
  for (;;) {
    await_post(s);
    drain(pool.fn, pool.ctx, pool.n);
    atomic_fetch_sub_explicit(&pool.inside, 1, memory_order_release);
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
    sem_t *s = &pool.wake[pool.threads];
    if (sem_init(s, 0, 0) != 0) break;
    pthread_t t;
    if (pthread_create(&t, &attr, worker, s) != 0) {
      sem_destroy(s);
      break;
    }
    pool.threads++;
  }
  pthread_attr_destroy(&attr);
}

int funnel__host_threads(void) {
  pthread_once(&pool.once, start);
  return pool.threads + 1;
}

int64_t funnel__pass_parts(size_t count) {
  const size_t by_size = count / FUNNEL__PASS_PART;
  if (by_size < 2) return 1;
  const int64_t threads = funnel__host_threads();
  int64_t n = by_size < (size_t)threads ? (int64_t)by_size : threads;
  return n < FUNNEL__PASS_PARTS_MAX ? n : FUNNEL__PASS_PARTS_MAX;
}

void funnel__parallel_for(int64_t n, funnel__task_fn fn, void *ctx) {
  if (n <= 0) return;
  pthread_once(&pool.once, start);
  if (n == 1 || pool.threads == 0 || pthread_mutex_trylock(&pool.busy) != 0) {
    for (int64_t i = 0; i < n; i++) fn(ctx, i); /* alone */
    return;
  }
  /* the last loop's workers are all out of it (its caller waited) */
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  atomic_store_explicit(&pool.next, 0, memory_order_relaxed);
  const int posted = n - 1 < pool.threads ? (int)(n - 1) : pool.threads;
  atomic_store_explicit(&pool.inside, posted, memory_order_relaxed);
  for (int w = 0; w < posted; w++) sem_post(&pool.wake[w]); /* releases the fields above */

  drain(fn, ctx, n);

  /* a post no worker has taken is taken back: that worker never saw this
   * loop; the others leave it when their last task returns */
  for (int w = 0; w < posted; w++)
    if (sem_trywait(&pool.wake[w]) == 0)
      atomic_fetch_sub_explicit(&pool.inside, 1, memory_order_relaxed);
  for (int i = 0; atomic_load_explicit(&pool.inside, memory_order_acquire) > 0; i++) {
    if (i < 4096)
      CPU_RELAX();
    else
      sched_yield(); /* a worker's task is long, or the worker is off its core */
  }
  pthread_mutex_unlock(&pool.busy);
}
