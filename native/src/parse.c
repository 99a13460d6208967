/* parse.c: a read's first phase: every partition's IPC headers parsed into
 * views (format.c does one partition), on the shared host threads when
 * there are many, in tasks of consecutive partitions, each with an arena
 * of its own. Host only. */
#include <stdlib.h>

#include "read.h"
#include "workers.h"

struct parse_job {
  const struct funnel_partition *parts;
  const struct funnel__schema *known;
  struct funnel__partition *pv;
  int64_t first, count;         /* the partitions of the parallel part */
  int64_t per_task;             /* partitions a task */
  struct funnel__arena *arenas; /* one a task */
  struct funnel_error *errors;  /* one a task */
  int64_t *bad;                 /* a task's failing partition, or -1 */
};

static int parse_one(const struct funnel_partition *part, size_t i,
                     const struct funnel__schema *known, struct funnel__arena *arena,
                     struct funnel__partition *out, struct funnel_error *error) {
  if (part->length == 0) return FUNNEL_OK;
  if (part->data == NULL || part->length > INT64_MAX)
    return funnel__error_set(error, FUNNEL_ERR_INVALID_ARGUMENT, (int64_t)i, -1, -1,
                             "partition %zu: NULL data with length %zu", i, part->length);
  return funnel__partition_parse_known(part->data, (int64_t)part->length, (int64_t)i, known,
                                       arena, out, error);
}

static void parse_task(void *ctx, int64_t task) {
  struct parse_job *j = ctx;
  const int64_t end = j->first + j->count;
  const int64_t lo = j->first + task * j->per_task;
  const int64_t hi = lo + j->per_task < end ? lo + j->per_task : end;
  j->bad[task] = -1;
  for (int64_t i = lo; i < hi; i++)
    if (parse_one(&j->parts[i], (size_t)i, j->known, &j->arenas[task], &j->pv[i],
                  &j->errors[task]) != FUNNEL_OK) {
      j->bad[task] = i;
      return;
    }
}

/* Partitions [first, first + n) on the host threads; their arenas join
 * t->arena. */
static int parse_parallel(const struct funnel_partition *parts, int64_t first, int64_t n,
                          const struct funnel__schema *known, struct funnel_table *t,
                          struct funnel__partition *pv, struct funnel_error *error) {
  /* at most FUNNEL__PARSE_TASKS_MAX tasks: each has an arena, whose
   * first block a few partitions would leave mostly unused */
  int64_t per_task = (n + FUNNEL__PARSE_TASKS_MAX - 1) / FUNNEL__PARSE_TASKS_MAX;
  if (per_task < FUNNEL__PARSE_TASK) per_task = FUNNEL__PARSE_TASK;
  const int64_t tasks = (n + per_task - 1) / per_task;
  struct parse_job j = {.parts = parts, .known = known, .pv = pv, .first = first, .count = n,
                        .per_task = per_task,
                        .arenas = calloc((size_t)tasks, sizeof(struct funnel__arena)),
                        .errors = calloc((size_t)tasks, sizeof(struct funnel_error)),
                        .bad = calloc((size_t)tasks, sizeof(int64_t))};
  int st = FUNNEL_OK;
  if (j.arenas == NULL || j.errors == NULL || j.bad == NULL) {
    st = FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  } else {
    funnel__parallel_for(tasks, parse_task, &j);
    for (int64_t k = 0; k < tasks; k++) {
      funnel__arena_splice(&t->arena, &j.arenas[k]);
      if (st == FUNNEL_OK && j.bad[k] >= 0) {
        st = j.errors[k].code;
        if (error != NULL) *error = j.errors[k];
      }
    }
  }
  free(j.arenas);
  free(j.errors);
  free(j.bad);
  return st;
}

int funnel__parse_all(const struct funnel_partition *parts, size_t count,
                      const struct funnel__schema *known, struct funnel_table *t,
                      struct funnel__partition **out, struct funnel_error *error) {
  struct funnel__partition *pv = funnel__arena_calloc(&t->arena, count ? count : 1, sizeof(*pv));
  if (pv == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  /* without the reader's schema, the first partition that has one gives it
   * (the others repeat it, which parse_known then checks with a memcmp) */
  size_t i = 0;
  for (; i < count && (known == NULL || count - i < FUNNEL__PARSE_PARALLEL_MIN); i++) {
    FUNNEL_RETURN_NOT_OK(parse_one(&parts[i], i, known, &t->arena, &pv[i], error));
    if (known == NULL && parts[i].length > 0 && (known = pv[i].schema) != NULL)
      funnel__partition_bind(known, &pv[i], (int64_t)i, &t->arena); /* as the others are */
  }
  if (i < count)
    FUNNEL_RETURN_NOT_OK(parse_parallel(parts, (int64_t)i, (int64_t)(count - i), known, t, pv,
                                        error));
  *out = pv;
  return FUNNEL_OK;
}
