/* work.c: enqueue, then settle or abandon (work.h). */
#include "work.h"

int funnel__work_begin(struct funnel__work *w, struct funnel_backend *be, void *stream,
                       void **event, struct funnel_error *error) {
  *w = (struct funnel__work){.be = be, .stream = stream, .own_event = event == NULL};
  void **at = event != NULL ? event : &w->event;
  if (*at == NULL) FUNNEL_RETURN_NOT_OK(funnel__dev_event_take(be, at, error));
  w->event = *at;
  return FUNNEL_OK;
}

/* Records the event after what was enqueued and waits: true when nothing
 * enqueued can still run. */
static bool settle(struct funnel__work *w) {
  if (!w->enqueued) return true;
  struct funnel_error e;
  return funnel__dev_event_record(w->be, w->event, w->stream, &e) == FUNNEL_OK &&
         funnel__dev_event_wait(w->be, w->event, &e) == FUNNEL_OK;
}

int funnel__work_finish(struct funnel__work *w, int st, bool wait, bool *abandoned,
                        struct funnel_error *error) {
  if (st == FUNNEL_OK && w->enqueued) {
    st = funnel__dev_event_record(w->be, w->event, w->stream, error);
    if (st == FUNNEL_OK && wait) st = funnel__dev_event_wait(w->be, w->event, error);
  }
  const bool gone = st != FUNNEL_OK && !settle(w);
  if (abandoned != NULL) *abandoned = gone;
  return st;
}

void funnel__work_end(struct funnel__work *w) {
  if (w->own_event) funnel__dev_event_give(w->be, w->event);
  w->event = NULL;
}
