/* dpath_cpu.h: the device path's stages run by the cpu backend. */
#ifndef FUNNEL_DPATH_CPU_H
#define FUNNEL_DPATH_CPU_H

#include <stdint.h>

struct funnel__dp_args;

/* Runs stage `stage` (enum funnel__dp_stage, with FUNNEL_DP_STAGE_GATED
 * for a gated pass's) over n items, as dpath.h says of each: the parse
 * over partitions [first, first + n), the others from the first (first
 * 0). */
void funnel__dp_run_cpu(int stage, struct funnel__dp_args *a, int64_t first, int64_t n, int64_t m);

#endif
