/* test_warp's host lane: lz4dec.h as the cpu backend compiles it (one
 * thread taking every lane's share), in a translation unit of its own:
 * test_warp.c compiles lz4dec.h as the device does, and one file cannot
 * hold both (the same names). */
#include <stddef.h> /* (lz4dec.h uses NULL) */

#include "lz4dec.h"

void warp_host_lz4_jobs(struct funnel__lz4_job *jobs, int64_t n, uint64_t base, unsigned ways);

/* Runs the n jobs as the cpu backend's stream does, their dst `base` more,
 * each in `ways` ways. */
void warp_host_lz4_jobs(struct funnel__lz4_job *jobs, int64_t n, uint64_t base, unsigned ways) {
  funnel__lz4_run_jobs(jobs, n, base, ways);
}
