/* device.h: the device: its backend, its own stream, its pinned pool, and
 * the configuration the environment gave when it opened.
 *
 * A device is freed with its last reference: funnel_device_close drops the
 * caller's; every reader, table, stream and caller pinned block holds one,
 * so a table handed to a consumer through the Device Data Interface may
 * outlive the device handle its owner closed, and a pinned block stays
 * mapped until it is freed. */
#ifndef FUNNEL_DEVICE_H
#define FUNNEL_DEVICE_H

#include <stdatomic.h>

#include "backend.h"
#include "pinned.h"
#include "pool.h"

/* The environment's overrides, read once, when the device opens. */
struct funnel__config {
  int64_t pinned_pool_bytes;   /* FUNNEL_PINNED_POOL_BYTES, else the backend's default */
  int stage_pageable;          /* FUNNEL_STAGE_PAGEABLE (1 or 0: force, for tests), else
                                  the backend's */
  int64_t direct_max_bytes;    /* FUNNEL_DIRECT_MAX_BYTES, else FUNNEL__DIRECT_MAX_DEFAULT:
                                  each reader's FUNNEL_OPTION_DIRECT_MAX_BYTES to start with */
  int64_t segment_chunk_bytes; /* FUNNEL_SEGMENT_CHUNK_BYTES, else FUNNEL__SEGMENT_CHUNK_BYTES */
  /* FUNNEL_OVERLAP_MIN_BYTES and FUNNEL_OVERLAP_MIN_PARTS, else tuning.h's:
   * the least a read of the device path parses while it is copied */
  int64_t overlap_min_bytes, overlap_min_parts;
  /* FUNNEL_ZOVERLAP_MIN_BYTES, else tuning.h's: the least a read of compressed
   * bodies on the device path decodes while it is copied */
  int64_t zoverlap_min_bytes;
  int zoverlap_parts; /* FUNNEL_ZOVERLAP_PARTS, else tuning.h's: its parts (2 to 8) */
  /* FUNNEL_LZ4_LARGE_DEVICE=0 (for A/Bs and tests): AUTO leaves LZ4 reads
   * of partitions over FUNNEL__DPATH_MAX_AVG on average to the host path;
   * else (the default) it reads them by the device path where that decodes
   * them while copied or stages them, but for reads of few partitions
   * whose frames the host path splits (dread.c; tuning.h,
   * FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS) */
  bool lz4_large_device;
  /* FUNNEL__STAGE_TASK and FUNNEL__STAGE_ROUND_MIN, or FUNNEL_STAGE_TASK_BYTES
   * and FUNNEL_STAGE_ROUND_BYTES */
  int64_t stage_task_bytes, stage_round_bytes;
  /* FUNNEL_BATCH_COPY=1: a read may put its copies in one batched call.
   * Off by default: on an H100 with driver 580.159.04, a cuMemcpyBatchAsync
   * of thousands of host-to-device copies of mixed sizes failed now and
   * then with a sticky CUDA_ERROR_LAUNCH_FAILED, which leaves the process
   * unable to use the device (bench/RESULTS.md, 2026-11-23; test_pool's
   * copy_mode_many_runs_of_mixed_sizes). One cuMemcpyHtoDAsync per run
   * costs ~2 us of host time each, and only reads of partitions that lie
   * far apart in pinned memory make many runs. */
  bool batch_copy;
  /* FUNNEL_PARSE=host|device: each reader's FUNNEL_OPTION_PARSE to start
   * with (enum funnel_parse), else AUTO */
  int parse;
  /* FUNNEL_DECODE: the readers' FUNNEL_OPTION_DECODE default (enum
   * funnel_decode) */
  int decode;
};

/* The device ordinal of "cuda:N" (0 <= N <= INT_MAX, decimal digits only),
 * -1 for "cuda", -2 for anything else. */
int funnel__cuda_ordinal(const char *kind);

struct funnel_device {
  _Atomic int64_t refs;
  struct funnel_backend be;
  struct funnel__config config;
  void *stream; /* the device's own: copies back, and frees after a read's work */
  struct funnel__pool pool;
  /* the decoded bytes a KiB of partitions of the device's last read of
   * compressed bodies by the device path, by codec (FUNNEL__CODEC_LZ4_FRAME,
   * FUNNEL__CODEC_ZSTD; 0: none yet), for the next one's guess (dread.c) */
  _Atomic int64_t per_k[2];
  /* ... and by codec, 1 when that read held no frame (every buffer raw or
   * empty); 0 before any, or when it held one: so a small read in one go
   * launches no decoder when the partition its template was made from
   * holds none either (dread.c, arm_one_go) */
  _Atomic int64_t last_raw[2];
};

struct funnel_device *funnel__device_ref(struct funnel_device *dev);
void funnel__device_unref(struct funnel_device *dev);

#endif
