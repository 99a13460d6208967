/* stream.h: the streams callers make or lend (funnel.h, "streams"), as
 * handles a read looks up; stream.c. */
#ifndef FUNNEL_STREAM_H
#define FUNNEL_STREAM_H

#include "device.h"

struct funnel__stream;

/* The live stream `stream` of `dev`, for a read to enqueue on: it stays
 * alive (funnel_stream_destroy waits) until funnel__stream_release.
 * FUNNEL_ERR_INVALID_ARGUMENT naming the handle when no live stream has it,
 * or it belongs to another device. */
int funnel__stream_acquire(uintptr_t stream, const struct funnel_device *dev,
                           struct funnel__stream **out, struct funnel_error *error);
/* The backend's stream. */
void *funnel__stream_native(const struct funnel__stream *s);
/* NULL is a no-op. */
void funnel__stream_release(struct funnel__stream *s);

/* Tests only: the reads using stream `stream` now; -1 when it is not live. */
int64_t funnel__stream_users(uintptr_t stream);

#endif
