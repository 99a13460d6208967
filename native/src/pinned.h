/* pinned.h: the pinned blocks callers allocate from a device's pool
 * (funnel_device_pinned_alloc), tracked so that a free is checked, and a
 * block that a read's work may still read is not given back under it;
 * pinned.c. Each live block holds a reference to its device. One registry
 * for the process, not one a device: a read on one device of partitions in
 * another device's block holds that block too. */
#ifndef FUNNEL_PINNED_H
#define FUNNEL_PINNED_H

#include <pthread.h>

#include "internal.h"

struct funnel_table;
struct funnel__pinned_block;

/* The blocks one table holds. */
struct funnel__pinned_held {
  struct funnel__pinned_block **blocks;
  int64_t n, cap;
  bool reading; /* the read that took them has not returned yet */
};

/* For a read making `t`: holds every live block that a partition lies in,
 * until funnel__pinned_unhold. Takes the lock once; when the range the
 * partitions span, [lo, hi), lies in one block, holds it without a look
 * at each partition; else looks a block up only when a partition is not in
 * the block of the one before. FUNNEL_ERR_HOST_OUT_OF_MEMORY when the
 * bookkeeping cannot grow. */
int funnel__pinned_hold(struct funnel_table *t, const struct funnel_partition *parts,
                        size_t count, uintptr_t lo, uintptr_t hi, struct funnel_error *error);
/* The read that made `t` returned it: a free of a block it holds may now
 * wait for its work. */
void funnel__pinned_read_done(struct funnel_table *t);
/* The table's work is over (waited for, or it is released): lets go of
 * its blocks. */
void funnel__pinned_unhold(struct funnel_table *t);

#endif
