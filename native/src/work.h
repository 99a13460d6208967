/* work.h: "enqueue, then settle or abandon", the one way funnel enqueues
 * work that memory must outlive (a read's copies and launch, copies back,
 * the copy a share makes).
 *
 *   struct funnel__work w;
 *   FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, be, stream, NULL, error));
 *   int st = funnel__work_enqueued(&w, funnel__dev_copy_d2h_async(...));
 *   bool abandoned;
 *   st = funnel__work_finish(&w, st, true, &abandoned, error);
 *   if (abandoned) ... forget (leak) what the work touches, never free it
 *   funnel__work_end(&w);
 *
 * The event exists before anything is enqueued, so whatever fails next the
 * work can be waited for: after a failure, the event is recorded after the
 * work (once more, if the record is what failed) and waited for. Only if
 * even that fails is the work abandoned: a leak is safe, a free is not. */
#ifndef FUNNEL_WORK_H
#define FUNNEL_WORK_H

#include "backend.h"

struct funnel__work {
  struct funnel_backend *be;
  void *stream;
  void *event;    /* recorded after the work */
  bool own_event; /* taken by funnel__work_begin, given back by funnel__work_end */
  bool enqueued;  /* something was enqueued: it must complete before what it
                     touches is freed */
};

/* Begins work on `stream`. `event` (may be NULL) is where the caller keeps
 * the event to record after it (a table's): used when *event is set, else
 * taken there (funnel__dev_event_take) and left to the caller. NULL: the
 * work takes its own, which funnel__work_end gives back. */
int funnel__work_begin(struct funnel__work *w, struct funnel_backend *be, void *stream,
                       void **event, struct funnel_error *error);

/* Notes the status of one enqueue; returns it. */
static inline int funnel__work_enqueued(struct funnel__work *w, int st) {
  w->enqueued |= st == FUNNEL_OK;
  return st;
}

/* Ends the enqueues, `st` being their status. On success records the event
 * after the work, and with `wait` waits for it. On any failure (st, the
 * record, the wait) waits for what was enqueued: *abandoned (may be NULL)
 * is then true when even that failed, and the caller must forget the memory
 * the work touches. Returns st, or the failure of the record or the wait. */
int funnel__work_finish(struct funnel__work *w, int st, bool wait, bool *abandoned,
                        struct funnel_error *error);

/* Gives back the event funnel__work_begin took for itself (not a caller's). */
void funnel__work_end(struct funnel__work *w);

#endif
