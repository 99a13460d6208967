/* table.h: the device, reader and table objects, shared by reader.c (reads),
 * export.c (the Arrow C Device Data Interface) and ipc.c (sharing a table
 * with another process).
 *
 * Lifetimes: a device is freed with its last reference (funnel_device_close
 * drops the caller's; every reader and table holds one), so a table handed
 * to a consumer through the Device Data Interface may outlive the device
 * handle its owner closed. A table likewise is freed with its last
 * reference (funnel_table_free drops the caller's; every exported
 * ArrowArray holds one until its release callback runs). */
#ifndef FUNNEL_TABLE_H
#define FUNNEL_TABLE_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend.h"
#include "plan.h"
#include "pool.h"

struct funnel_device {
  _Atomic int64_t refs;
  struct funnel_backend be;
  void *stream; /* for copies back to the host */
  struct funnel__pool pool;
  int stage_pageable;
};

struct funnel_device *funnel__device_ref(struct funnel_device *dev);
void funnel__device_unref(struct funnel_device *dev);

/* pinned pool blocks a read holds until its work has completed */
struct staged {
  void *ptr;
  int64_t size;
};

/* The reader's schema, shared by the reader and every table it made (a
 * table may outlive its reader): freed with the last reference. */
struct shared_schema {
  _Atomic int64_t refs;
  struct funnel__arena arena;
  struct funnel__schema schema;
};

struct funnel_reader {
  struct funnel_device *dev;
  void *stream;
  struct shared_schema *schema; /* NULL when not given */
  int transfer;                  /* enum funnel_transfer */
  int time_kernel;
  int shareable;                 /* FUNNEL_OPTION_SHAREABLE */
};

struct funnel__import; /* ipc.c: what an imported table maps */

struct funnel_table {
  _Atomic int64_t refs;
  struct funnel_device *dev;
  struct shared_schema *schema; /* the reader's, when it had one */
  struct funnel__arena arena; /* schema, partitions, plan, host segments */
  struct funnel__plan plan;
  uint64_t out;     /* device: the columns' buffers */
  bool out_shared;  /* `out` is shareable memory (FUNNEL_OPTION_SHAREABLE) */
  struct funnel__ipc_handle out_handle; /* and its handle */
  uint64_t scratch; /* device: partition copies and the segment table */
  uint64_t seg_scratch; /* device: the segment table, when it has its own */
  int64_t *early_in; /* per partition, where its early copy lies in scratch
                        (-1: none); NULL when the read made no early copy */
  void *event;      /* NULL when nothing was enqueued; kept until the table
                       is freed (an export may point a consumer at it) */
  void *ev_start, *ev_end; /* around the launch, when the kernel is timed */
  pthread_mutex_t mu;
  int done;         /* the event has completed and scratch is freed */
  struct staged *staged;
  int64_t n_staged;
  struct funnel_read_stats stats;
  /* an imported table (funnel_table_import): its buffers lie in memory
   * another process exported, at these addresses (3 per column: validity,
   * offsets, data; 0 when absent), read only; NULL for a table funnel read */
  struct funnel__import *import;
  const uint64_t *import_addr;
};

struct funnel_table *funnel__table_ref(struct funnel_table *t);
void funnel__table_unref(struct funnel_table *t);

/* The address of buffer `k` (0 validity, 1 offsets, 2 data) of column `c`,
 * and its size; 0 and 0 when the column has none. */
uint64_t funnel__table_buffer(const struct funnel_table *t, int c, int k, int64_t *size);

/* ipc.c: unmaps what an imported table maps and tells the exporter. */
void funnel__import_release(struct funnel_table *t);

#endif
