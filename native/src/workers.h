/* workers.h: a few host threads shared by every read of the process, for
 * the host work that scales with the bytes (checking string offsets,
 * staging pageable partitions) or with many partitions (the passes over
 * them).
 *
 * One loop at a time runs on the workers; a caller that finds them busy
 * (another read on another thread) runs its loop alone, so no read ever
 * waits for another. FUNNEL_HOST_THREADS sets the number of threads that
 * run a loop, the caller included (default: the cores, at most 16; 1 turns
 * the workers off). */
#ifndef FUNNEL_WORKERS_H
#define FUNNEL_WORKERS_H

#include <stddef.h>
#include <stdint.h>

typedef void (*funnel__task_fn)(void *ctx, int64_t i);

/* Runs fn(ctx, i) for every i in [0, n), on the calling thread and the
 * workers, and returns when every call has returned. */
void funnel__parallel_for(int64_t n, funnel__task_fn fn, void *ctx);

/* The threads a parallel_for runs on when the pool is free: the workers
 * and the caller. */
int funnel__host_threads(void);

/* A pass over a read's partitions (one loop a partition: the scan of
 * their addresses, staging's layout, the device path's table) runs in
 * parts on the host threads when there are many: about FUNNEL__PASS_PART
 * partitions a part (tuning.h), at most a part a thread and
 * FUNNEL__PASS_PARTS_MAX; 1 when the pass is too short to share. Part i
 * of n holds partitions [funnel__pass_from(count, n, i),
 * funnel__pass_from(count, n, i + 1)). */
#define FUNNEL__PASS_PARTS_MAX 64
int64_t funnel__pass_parts(size_t count);
static inline size_t funnel__pass_from(size_t count, int64_t n, int64_t i) {
  /* count * i / n, without its overflow */
  const size_t q = count / (size_t)n, r = count % (size_t)n;
  return q * (size_t)i + r * (size_t)i / (size_t)n;
}

#endif
