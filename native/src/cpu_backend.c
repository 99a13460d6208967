/* cpu_backend.c: the reference backend. "Device memory" is aligned host
 * memory; a stream is a worker thread draining a FIFO, so copies and
 * launches really run after the call that enqueued them returns, and a
 * caller that frees a source too early is caught (by ASan, by wrong
 * output). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "dpath.h" /* FUNNEL_DP_STAGE_NESTED */
#include "lz4dec.h"
#include "zstddec.h"
#include "dpath_cpu.h"

enum task_kind { TASK_COPY, TASK_CONCAT, TASK_DPATH, TASK_SIGNAL, TASK_WAIT, TASK_STOP };

struct event {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t recorded; /* records made */
  int64_t done;     /* records completed: the highest of them */
  int64_t pending;  /* signal and wait tasks not yet run, on any stream (a
                       pooled event may be recorded on another stream before
                       the last record's signal has run) */
  int64_t done_ns;  /* when the last one completed (funnel__now_ns) */
};

struct task {
  struct task *next;
  enum task_kind kind;
  void *dst;
  const void *src;
  size_t size;
  int64_t count;
  int64_t count2; /* TASK_DPATH: m */
  int64_t first;  /* TASK_DPATH: the first item */
  int stage;      /* TASK_DPATH */
  struct event *event;
  int64_t seq;    /* TASK_SIGNAL: the record it completes; TASK_WAIT: it waits for */
};

/* the backend's private data */
struct cpu {
  int64_t delay_ns; /* FUNNEL_CPU_STREAM_DELAY_US, read when the device opens */
};

struct stream {
  int64_t delay_ns; /* before each copy and launch (FUNNEL_CPU_STREAM_DELAY_US) */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct task *head, *tail;
};

static void *worker(void *arg) {
  struct stream *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (s->head == NULL) pthread_cond_wait(&s->cv, &s->mu);
    struct task *t = s->head;
    s->head = t->next;
    if (s->head == NULL) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);

    enum task_kind kind = t->kind;
    if (s->delay_ns > 0 && (kind == TASK_COPY || kind == TASK_CONCAT || kind == TASK_DPATH)) {
      /* a slow device, for the tests of the async contract: a caller that
       * frees memory the work still uses is caught (ASan, wrong output) */
      const struct timespec d = {(time_t)(s->delay_ns / 1000000000), (long)(s->delay_ns % 1000000000)};
      nanosleep(&d, NULL);
    }
    switch (kind) {
      case TASK_COPY:
        memcpy(t->dst, t->src, t->size);
        break;
      case TASK_CONCAT:
        funnel__concat_segments(t->src, t->count);
        break;
      case TASK_DPATH:
        if (t->stage == FUNNEL_DP_STAGE_LZ4 || t->stage == FUNNEL_DP_STAGE_LZ4_WAYS ||
            t->stage == FUNNEL_DP_STAGE_ZSTD) {
          /* first: a gated pass's args (dpath.h), as the kernels take it */
          const struct funnel__dp_args *gate = (const struct funnel__dp_args *)(uintptr_t)t->first;
          if (gate != NULL && funnel__dp_shut(gate)) break;
          /* in ways where the stage says (the ZSTD kernel's LZ4 jobs a warp
           * each, in one way) */
          funnel__lz4_run_jobs(t->dst, t->count, (uint64_t)t->count2,
                               t->stage == FUNNEL_DP_STAGE_LZ4_WAYS ? FUNNEL__LZ4_CPU_WAYS : 1);
          /* every job, as the ZSTD kernel runs them */
          if (t->stage == FUNNEL_DP_STAGE_ZSTD)
            funnel__zstd_run_jobs(t->dst, t->count, (uint64_t)t->count2);
          break;
        }
        /* one compilation of the stages runs every read alike */
        funnel__dp_run_cpu(t->stage & ~(FUNNEL_DP_STAGE_NESTED | FUNNEL_DP_STAGE_VAR), t->dst,
                           t->first, t->count, t->count2);
        break;
      case TASK_SIGNAL:
        pthread_mutex_lock(&t->event->mu);
        if (t->seq > t->event->done) t->event->done = t->seq;
        t->event->pending--;
        t->event->done_ns = funnel__now_ns();
        pthread_cond_broadcast(&t->event->cv);
        pthread_mutex_unlock(&t->event->mu);
        break;
      case TASK_WAIT: /* another stream's record; its signal task runs there */
        pthread_mutex_lock(&t->event->mu);
        while (t->event->done < t->seq) pthread_cond_wait(&t->event->cv, &t->event->mu);
        t->event->pending--;
        pthread_cond_broadcast(&t->event->cv);
        pthread_mutex_unlock(&t->event->mu);
        break;
      case TASK_STOP:
        break;
    }
    free(t);
    if (kind == TASK_STOP) return NULL;
  }
}

static int enqueue(struct stream *s, struct task *t, struct funnel_error *error) {
  if (s == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "cpu backend: no stream");
  struct task *copy = malloc(sizeof(*copy));
  if (copy == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream task");
  *copy = *t;
  copy->next = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->tail) s->tail->next = copy; else s->head = copy;
  s->tail = copy;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return FUNNEL_OK;
}

static int cpu_alloc(struct funnel_backend *be, size_t size, void *stream, uint64_t *out,
                     struct funnel_error *error) {
  (void)be;
  (void)stream;
  size_t rounded = (size + FUNNEL__ALIGN - 1) / FUNNEL__ALIGN * FUNNEL__ALIGN;
  void *p = aligned_alloc(FUNNEL__ALIGN, rounded ? rounded : FUNNEL__ALIGN);
  if (p == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE_OUT_OF_MEMORY,
                      "cpu backend: cannot allocate %zu bytes of device memory", size);
  *out = (uint64_t)(uintptr_t)p;
  return FUNNEL_OK;
}

static void cpu_free(struct funnel_backend *be, uint64_t ptr, void *stream) {
  (void)be;
  (void)stream; /* callers free only memory no queued work uses */
  free((void *)(uintptr_t)ptr);
}

static int cpu_host_alloc(struct funnel_backend *be, size_t size, void **out,
                          struct funnel_error *error) {
  (void)be;
  size_t rounded = (size + FUNNEL__ALIGN - 1) / FUNNEL__ALIGN * FUNNEL__ALIGN;
  void *p = aligned_alloc(FUNNEL__ALIGN, rounded ? rounded : FUNNEL__ALIGN);
  if (p == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY,
                      "cpu backend: cannot allocate %zu bytes of pinned memory", size);
  *out = p;
  return FUNNEL_OK;
}

static void cpu_host_free(struct funnel_backend *be, void *ptr) {
  (void)be;
  free(ptr);
}

static int cpu_host_device_address(struct funnel_backend *be, void *host, uint64_t *out,
                                   struct funnel_error *error) {
  (void)be;
  (void)error;
  *out = (uint64_t)(uintptr_t)host; /* the "device" is this process */
  return FUNNEL_OK;
}

static int cpu_stream_create(struct funnel_backend *be, void **out, struct funnel_error *error) {
  struct stream *s = calloc(1, sizeof(*s));
  if (s == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "cpu backend: out of host memory");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->delay_ns = ((const struct cpu *)be->private_data)->delay_ns;
  if (pthread_create(&s->thread, NULL, worker, s) != 0) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE, "cpu backend: cannot start a stream thread");
  }
  *out = s;
  return FUNNEL_OK;
}

static void cpu_stream_destroy(struct funnel_backend *be, void *stream) {
  (void)be;
  struct stream *s = stream;
  struct task stop = {.kind = TASK_STOP};
  /* the work already queued finishes first; if the stop task cannot be
   * allocated the thread is left running rather than freed under it */
  if (enqueue(s, &stop, NULL) != FUNNEL_OK) return;
  pthread_join(s->thread, NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static int cpu_copy_h2d(struct funnel_backend *be, uint64_t dst, const void *src, size_t size,
                        void *stream, struct funnel_error *error) {
  (void)be;
  struct task t = {.kind = TASK_COPY, .dst = (void *)(uintptr_t)dst, .src = src, .size = size};
  return enqueue(stream, &t, error);
}

static int cpu_copy_d2h(struct funnel_backend *be, void *dst, uint64_t src, size_t size,
                        void *stream, struct funnel_error *error) {
  (void)be;
  struct task t = {.kind = TASK_COPY, .dst = dst, .src = (const void *)(uintptr_t)src, .size = size};
  return enqueue(stream, &t, error);
}

static int cpu_copy_d2d(struct funnel_backend *be, uint64_t dst, uint64_t src, size_t size,
                        void *stream, struct funnel_error *error) {
  (void)be;
  struct task t = {.kind = TASK_COPY, .dst = (void *)(uintptr_t)dst,
                   .src = (const void *)(uintptr_t)src, .size = size};
  return enqueue(stream, &t, error);
}

static int cpu_launch(struct funnel_backend *be, uint64_t segments, int64_t count, void *stream,
                      struct funnel_error *error) {
  (void)be;
  struct task t = {.kind = TASK_CONCAT, .src = (const void *)(uintptr_t)segments, .count = count};
  return enqueue(stream, &t, error);
}

static int cpu_launch_dpath(struct funnel_backend *be, int stage, uint64_t args, int64_t first,
                            int64_t n, int64_t m, void *stream, struct funnel_error *error) {
  (void)be;
  /* the stages write their args (the layout) */
  struct task t = {.kind = TASK_DPATH, .stage = stage, .dst = (void *)(uintptr_t)args,
                   .first = first, .count = n, .count2 = m};
  return enqueue(stream, &t, error);
}

/* The wait holds the event as a pending signal does, so the event is not
 * destroyed under it. A record whose signal task was never enqueued is
 * taken back (cpu_event_record), so the last record made is one that
 * completes. */
static int cpu_stream_wait(struct funnel_backend *be, void *stream, void *event,
                           struct funnel_error *error) {
  (void)be;
  struct event *e = event;
  pthread_mutex_lock(&e->mu);
  const int64_t seq = e->recorded;
  e->pending++;
  pthread_mutex_unlock(&e->mu);
  struct task t = {.kind = TASK_WAIT, .event = e, .seq = seq};
  const int st = enqueue(stream, &t, error);
  if (st != FUNNEL_OK) {
    pthread_mutex_lock(&e->mu);
    e->pending--;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
  }
  return st;
}

static int cpu_event_create(struct funnel_backend *be, void **out, struct funnel_error *error) {
  (void)be;
  struct event *e = calloc(1, sizeof(*e));
  if (e == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "cpu backend: out of host memory");
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  *out = e;
  return FUNNEL_OK;
}

static int cpu_event_record(struct funnel_backend *be, void *event, void *stream,
                            struct funnel_error *error) {
  (void)be;
  struct event *e = event;
  pthread_mutex_lock(&e->mu);
  int64_t seq = ++e->recorded;
  e->pending++;
  pthread_mutex_unlock(&e->mu);
  struct task t = {.kind = TASK_SIGNAL, .event = e, .seq = seq};
  int st = enqueue(stream, &t, error);
  if (st != FUNNEL_OK) {
    pthread_mutex_lock(&e->mu);
    e->recorded--; /* nothing will complete this record */
    e->pending--;
    pthread_mutex_unlock(&e->mu);
  }
  return st;
}

static int cpu_event_query(struct funnel_backend *be, void *event, int *done,
                           struct funnel_error *error) {
  (void)be;
  (void)error;
  struct event *e = event;
  pthread_mutex_lock(&e->mu);
  *done = e->done >= e->recorded;
  pthread_mutex_unlock(&e->mu);
  return FUNNEL_OK;
}

static int cpu_event_wait(struct funnel_backend *be, void *event, struct funnel_error *error) {
  (void)be;
  (void)error;
  struct event *e = event;
  pthread_mutex_lock(&e->mu);
  int64_t target = e->recorded;
  while (e->done < target) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
  return FUNNEL_OK;
}

static int cpu_event_elapsed(struct funnel_backend *be, void *start, void *end, int64_t *ns,
                             struct funnel_error *error) {
  (void)be;
  struct event *a = start, *b = end;
  pthread_mutex_lock(&a->mu);
  const int a_done = a->recorded > 0 && a->done >= a->recorded;
  const int64_t ta = a->done_ns;
  pthread_mutex_unlock(&a->mu);
  pthread_mutex_lock(&b->mu);
  const int b_done = b->recorded > 0 && b->done >= b->recorded;
  const int64_t tb = b->done_ns;
  pthread_mutex_unlock(&b->mu);
  if (!a_done || !b_done)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "cpu backend: event_elapsed_ns on an event not recorded or not complete");
  *ns = tb - ta;
  return FUNNEL_OK;
}

static void cpu_event_destroy(struct funnel_backend *be, void *event) {
  (void)be;
  struct event *e = event;
  /* no signal task may still point at the event, on any stream */
  pthread_mutex_lock(&e->mu);
  while (e->pending > 0) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

/* Shared memory: a POSIX shared memory object per allocation, its name in
 * the handle. The exporter maps it read-write and unlinks it when freed;
 * an importer maps it read only. */
static _Atomic int64_t shm_sequence;

static int cpu_shared_alloc(struct funnel_backend *be, size_t size, uint64_t *out,
                            struct funnel__ipc_handle *handle, struct funnel_error *error) {
  (void)be;
  memset(handle, 0, sizeof(*handle));
  snprintf((char *)handle->bytes, sizeof(handle->bytes), "/funnel-%ld-%lld-%lld", (long)getpid(),
           (long long)atomic_fetch_add(&shm_sequence, 1), (long long)funnel__now_ns());
  const char *name = (const char *)handle->bytes;
  const size_t bytes = size ? size : 1;
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE, "cpu backend: shm_open(%s): %s", name,
                      strerror(errno));
  if (ftruncate(fd, (off_t)bytes) != 0) {
    const int e = errno;
    close(fd);
    shm_unlink(name);
    return FUNNEL_ERR(error, e == ENOSPC || e == ENOMEM || e == EFBIG ? FUNNEL_ERR_DEVICE_OUT_OF_MEMORY
                                                                      : FUNNEL_ERR_DEVICE,
                      "cpu backend: cannot size shared memory %s to %zu bytes: %s", name, bytes,
                      strerror(e));
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name);
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE_OUT_OF_MEMORY,
                      "cpu backend: cannot map %zu bytes of shared memory %s: %s", bytes, name,
                      strerror(e));
  }
  *out = (uint64_t)(uintptr_t)p;
  return FUNNEL_OK;
}

static void cpu_shared_free(struct funnel_backend *be, uint64_t ptr, size_t size,
                            const struct funnel__ipc_handle *handle) {
  (void)be;
  munmap((void *)(uintptr_t)ptr, size ? size : 1);
  shm_unlink((const char *)handle->bytes);
}

static int cpu_shared_open(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                           size_t size, uint64_t *out, struct funnel_error *error) {
  (void)be;
  char name[sizeof(handle->bytes) + 1];
  memcpy(name, handle->bytes, sizeof(handle->bytes));
  name[sizeof(handle->bytes)] = '\0';
  const size_t bytes = size ? size : 1;
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0)
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE, "cpu backend: cannot open shared memory %s: %s",
                      name, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < bytes) {
    close(fd);
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE,
                      "cpu backend: shared memory %s holds %lld bytes, the descriptor says %zu",
                      name, (long long)st.st_size, bytes);
  }
  void *p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE, "cpu backend: cannot map shared memory %s: %s",
                      name, strerror(e));
  *out = (uint64_t)(uintptr_t)p;
  return FUNNEL_OK;
}

static void cpu_shared_close(struct funnel_backend *be, uint64_t ptr, size_t size) {
  (void)be;
  munmap((void *)(uintptr_t)ptr, size ? size : 1);
}

/* The host's boot id: processes of one boot of one host share cpu tables. */
static int cpu_device_uuid(struct funnel_backend *be, uint8_t uuid[16], struct funnel_error *error) {
  (void)be;
  memset(uuid, 0, 16);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  char text[64] = {0};
  const bool read = f != NULL && fgets(text, sizeof(text), f) != NULL;
  if (f != NULL) fclose(f);
  if (!read)
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE, "cpu backend: cannot read the host's boot id");
  int n = 0;
  for (const char *c = text; *c && n < 32; c++) {
    int v = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
    if (v < 0) continue;
    uuid[n / 2] = (uint8_t)(uuid[n / 2] << 4 | v);
    n++;
  }
  return FUNNEL_OK;
}

static void cpu_release(struct funnel_backend *be) {
  free(be->private_data);
  be->private_data = NULL;
  be->release = NULL;
}

int funnel__cpu_backend_init(struct funnel_backend *be, struct funnel_error *error) {
  memset(be, 0, sizeof(*be));
  struct cpu *cpu = calloc(1, sizeof(*cpu));
  if (cpu == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  const char *delay = getenv("FUNNEL_CPU_STREAM_DELAY_US"); /* tests only */
  if (delay != NULL && *delay) cpu->delay_ns = 1000 * (int64_t)atoll(delay);
  be->private_data = cpu;
  be->version = FUNNEL_BACKEND_VERSION;
  be->name = "cpu";
  be->arrow_device_type = ARROW_DEVICE_CPU;
  be->default_pinned_pool_bytes = FUNNEL__POOL_BYTES_CPU;
  be->ipc_backend_id = FUNNEL__IPC_BACKEND_CPU;
  be->uuid_note = "the host's boot id";
  be->alloc = cpu_alloc;
  be->free = cpu_free;
  be->host_alloc = cpu_host_alloc;
  be->host_free = cpu_host_free;
  be->host_device_address = cpu_host_device_address;
  be->stream_create = cpu_stream_create;
  be->stream_destroy = cpu_stream_destroy;
  be->copy_h2d_async = cpu_copy_h2d;
  be->copy_d2h_async = cpu_copy_d2h;
  be->copy_d2d_async = cpu_copy_d2d;
  be->launch_concat = cpu_launch;
  be->launch_dpath = cpu_launch_dpath;
  be->stream_wait = cpu_stream_wait;
  be->event_create = cpu_event_create;
  be->event_record = cpu_event_record;
  be->event_query = cpu_event_query;
  be->event_wait = cpu_event_wait;
  be->event_elapsed_ns = cpu_event_elapsed;
  be->event_destroy = cpu_event_destroy;
  be->shared_alloc = cpu_shared_alloc;
  be->shared_free = cpu_shared_free;
  be->shared_open = cpu_shared_open;
  be->shared_close = cpu_shared_close;
  be->device_uuid = cpu_device_uuid;
  be->device_id = -1;
  be->release = cpu_release;
  return FUNNEL_OK;
}
