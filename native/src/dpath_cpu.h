/* dpath_cpu.h: the device path's stages run by the cpu backend. */
#ifndef FUNNEL_DPATH_CPU_H
#define FUNNEL_DPATH_CPU_H

#include <stdint.h>

struct funnel__dp_args;

/* Runs stage `stage` (enum funnel__dp_stage) over n items, as dpath.h
 * says of each. */
void funnel__dp_run_cpu(int stage, struct funnel__dp_args *a, int64_t n, int64_t m);

#endif
