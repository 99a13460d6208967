/* test_misuse.c: what funnel does when a caller breaks the rules of
 * funnel.h (a stream that is none, a pinned block freed wrong), or races
 * calls that funnel.h says may race (a free against the calls on its
 * object): a clear error, or a wait, never a crash or a free under work.
 *
 * On the cpu backend streams are worker threads and FUNNEL_CPU_STREAM_DELAY_US
 * makes their work start late, so the races are real; a read hook
 * (funnel__set_read_hook) holds reads inside funnel_reader_read_async while
 * a test frees what they use. The rows come from the loop that wrote them. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "device.h"
#include "ipc_writer.h"
#include "tables.h"
#include "read.h"
#include "stream.h"
#include "table.h"

enum { P = 4, ROWS = 3000, DELAY_US = 20000 };

static int64_t value(int p, int64_t i, int salt) { return table_salted_value(p, i, salt); }

/* Partition p of a read salted `salt`, in malloc'd memory. */
static struct funnel_partition partition(int p, int salt) {
  return table_salted_partition(p, ROWS, salt);
}

static void partitions(struct funnel_partition *parts, int salt) {
  for (int p = 0; p < P; p++) parts[p] = partition(p, salt);
}

static void partitions_free(struct funnel_partition *parts) {
  for (int p = 0; p < P; p++) free((void *)parts[p].data);
}

/* Copies the table back and compares it with the rows of salt `salt`. */
static void check_rows(struct funnel_table *t, int salt) {
  struct funnel_error err;
  int64_t *got = malloc((size_t)P * ROWS * 8);
  struct funnel_host_column host = {NULL, NULL, got};
  if (CHECK_OK(funnel_table_copy_to_host(t, &host, &err), &err) &&
      CHECK_EQ_I64(funnel_table_num_rows(t), (int64_t)P * ROWS))
    for (int64_t k = 0; k < (int64_t)P * ROWS; k++)
      if (!CHECK_EQ_I64(got[k], value((int)(k / ROWS), k % ROWS, salt))) break;
  free(got);
}

/* A device whose streams run `delay_us` late (cpu backend). */
static struct funnel_device *slow_device(int delay_us) {
  char delay[32];
  snprintf(delay, sizeof(delay), "%d", delay_us);
  setenv("FUNNEL_CPU_STREAM_DELAY_US", delay, 1);
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) dev = NULL;
  unsetenv("FUNNEL_CPU_STREAM_DELAY_US");
  return dev;
}

static int on_cpu(void) { return strcmp(check_backend(), "cpu") == 0; }

static void sleep_ms(int ms) {
  const struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&d, NULL);
}

/* ----------------------------------------------------------- a read hook */

/* Holds every read at the hook until opened. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int entered;
  int open;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void gate_hold(void) {
  pthread_mutex_lock(&gate.mu);
  gate.entered++;
  pthread_cond_broadcast(&gate.cv);
  while (!gate.open) pthread_cond_wait(&gate.cv, &gate.mu);
  pthread_mutex_unlock(&gate.mu);
}

static void gate_close(void) {
  gate.entered = gate.open = 0;
  funnel__set_read_hook(gate_hold);
}

static void gate_wait_entered(int n) {
  pthread_mutex_lock(&gate.mu);
  while (gate.entered < n) pthread_cond_wait(&gate.cv, &gate.mu);
  pthread_mutex_unlock(&gate.mu);
}

static void gate_open(void) {
  pthread_mutex_lock(&gate.mu);
  gate.open = 1;
  pthread_cond_broadcast(&gate.cv);
  pthread_mutex_unlock(&gate.mu);
  funnel__set_read_hook(NULL);
}

/* A read on its own thread. */
struct reading {
  pthread_t thread;
  struct funnel_reader *rd;
  struct funnel_partition parts[P];
  uintptr_t stream;
  struct funnel_table *t;
  int st;
  struct funnel_error err;
};

static void *read_thread(void *arg) {
  struct reading *r = arg;
  r->st = funnel_reader_read_async(r->rd, r->parts, P, r->stream, &r->t, &r->err);
  return NULL;
}

/* A call that may block, on its own thread; `done` once it returned. */
struct blocking {
  pthread_t thread;
  uintptr_t stream;            /* funnel_stream_destroy */
  struct funnel_reader *rd;    /* funnel_reader_free */
  int st;
  _Atomic int done;
};

static void *destroy_thread(void *arg) {
  struct blocking *b = arg;
  b->st = funnel_stream_destroy(b->stream, NULL);
  atomic_store(&b->done, 1);
  return NULL;
}

static void *reader_free_thread(void *arg) {
  struct blocking *b = arg;
  funnel_reader_free(b->rd);
  atomic_store(&b->done, 1);
  return NULL;
}

/* -------------------------------------------------------------- backends */

/* A backend filled for another layout of the vtable is refused, naming the
 * backend and both versions. */
static void backend_of_another_vtable_version_is_refused(void) {
  struct funnel_backend be;
  struct funnel_error err;
  if (!CHECK_OK(funnel__cpu_backend_init(&be, &err), &err)) return;
  CHECK_OK(funnel__backend_check(&be, &err), &err);
  be.version = FUNNEL_BACKEND_VERSION + 40;
  CHECK_STATUS(funnel__backend_check(&be, &err), FUNNEL_ERR_UNSUPPORTED, &err);
  char want[128];
  snprintf(want, sizeof(want), "backend cpu fills vtable version %d; this funnel knows version %d",
           FUNNEL_BACKEND_VERSION + 40, FUNNEL_BACKEND_VERSION);
  CHECK_EQ_STR(err.message, want);
  funnel__dev_release(&be);
}

static void direct_max_bytes_option_is_checked(void) {
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    CHECK_STATUS(funnel_reader_set_option(rd, FUNNEL_OPTION_DIRECT_MAX_BYTES, -1, &err),
                 FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DIRECT_MAX_BYTES, 0, &err), &err);
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DIRECT_MAX_BYTES, INT64_MAX, &err), &err);
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
}

/* --------------------------------------------------------------- streams */

/* A number that is no stream handle, a pointer among them, is refused by
 * name; nothing is read. */
static void read_refuses_a_stream_that_is_none(void) {
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct funnel_partition parts[P];
  partitions(parts, 1);
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    struct funnel_table *t = NULL;
    CHECK_STATUS(funnel_reader_read_async(rd, parts, P, 0x1234, &t, &err),
                 FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK_EQ_STR(err.message, "stream 4660 is not a live stream of this device "
                              "(funnel_device_stream_create/wrap)");
    CHECK(t == NULL);
    CHECK_STATUS(funnel_reader_read_async(rd, parts, P, (uintptr_t)&err, &t, &err),
                 FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK(t == NULL);
    CHECK_STATUS(funnel_stream_destroy(0x1234, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "stream 4660 is not a live stream") != NULL);
    CHECK_STATUS(funnel_stream_destroy(0, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  }
  partitions_free(parts);
  funnel_reader_free(rd);
  funnel_device_close(dev);
}

/* A stream reads until destroyed; then reads on it, and destroying it
 * again, are refused by name. */
static void destroyed_stream_is_refused(void) {
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct funnel_partition parts[P];
  partitions(parts, 2);
  uintptr_t s = 0;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err) &&
      CHECK_OK(funnel_device_stream_create(dev, &s, &err), &err)) {
    struct funnel_table *t = NULL;
    if (CHECK_OK(funnel_reader_read_async(rd, parts, P, s, &t, &err), &err)) check_rows(t, 2);
    funnel_table_free(t);
    CHECK_OK(funnel_stream_destroy(s, &err), &err);
    t = NULL;
    CHECK_STATUS(funnel_reader_read_async(rd, parts, P, s, &t, &err),
                 FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK(t == NULL);
    CHECK_STATUS(funnel_stream_destroy(s, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
    char want[64];
    snprintf(want, sizeof(want), "stream %llu is not a live stream", (unsigned long long)s);
    if (!CHECK(strstr(err.message, want) != NULL)) printf("  message: %s\n", err.message);
  }
  partitions_free(parts);
  funnel_reader_free(rd);
  funnel_device_close(dev);
}

/* Handles are never given twice: a new stream does not revive an old
 * handle. */
static void stream_handles_are_never_reused(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  uintptr_t a = 0, b = 0;
  if (CHECK_OK(funnel_device_stream_create(dev, &a, &err), &err)) {
    CHECK_OK(funnel_stream_destroy(a, &err), &err);
    if (CHECK_OK(funnel_device_stream_create(dev, &b, &err), &err)) {
      CHECK(b != a && b != 0);
      CHECK_STATUS(funnel_stream_destroy(a, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
      CHECK_OK(funnel_stream_destroy(b, &err), &err);
    }
  }
  funnel_device_close(dev);
}

static void stream_of_another_device_is_refused(void) {
  struct funnel_device *dev = NULL, *other = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct funnel_partition parts[P];
  partitions(parts, 3);
  uintptr_t s = 0;
  if (CHECK_OK(check_device_open(&other, &err), &err) &&
      CHECK_OK(funnel_device_stream_create(other, &s, &err), &err) &&
      CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    struct funnel_table *t = NULL;
    CHECK_STATUS(funnel_reader_read_async(rd, parts, P, s, &t, &err),
                 FUNNEL_ERR_INVALID_ARGUMENT, &err);
    char want[64];
    snprintf(want, sizeof(want), "stream %llu belongs to another device", (unsigned long long)s);
    CHECK_EQ_STR(err.message, want);
    CHECK(t == NULL);
  }
  if (s != 0) CHECK_OK(funnel_stream_destroy(s, &err), &err);
  partitions_free(parts);
  funnel_reader_free(rd);
  funnel_device_close(other);
  funnel_device_close(dev);
}

/* cpu: nothing to wrap. cuda: a stream the caller made reads through its
 * handle, and outlives the handle. */
static void wrap_lends_a_native_stream(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  uintptr_t h = 0;
  if (on_cpu()) {
    CHECK_STATUS(funnel_device_stream_wrap(dev, 1234, &h, &err), FUNNEL_ERR_UNSUPPORTED, &err);
    CHECK(strstr(err.message, "the cpu backend has no native streams") != NULL);
    CHECK(h == 0);
    funnel_device_close(dev);
    return;
  }
  struct funnel_reader *rd = NULL;
  struct funnel_partition parts[P];
  partitions(parts, 4);
  void *native = NULL;
  if (CHECK_OK(funnel__dev_stream_create(&dev->be, &native, &err), &err) &&
      CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    for (int round = 0; round < 2; round++) { /* the native stream lives on */
      struct funnel_table *t = NULL;
      if (CHECK_OK(funnel_device_stream_wrap(dev, (uintptr_t)native, &h, &err), &err) &&
          CHECK_OK(funnel_reader_read_async(rd, parts, P, h, &t, &err), &err))
        check_rows(t, 4);
      funnel_table_free(t);
      CHECK_OK(funnel_stream_destroy(h, &err), &err);
    }
  }
  funnel_reader_free(rd);
  funnel__dev_stream_destroy(&dev->be, native);
  partitions_free(parts);
  funnel_device_close(dev);
}

/* A stream holds its device: it can be destroyed after the device was
 * closed, and then nothing of either is left. */
static void stream_destroyed_after_device_close(void) {
  const struct funnel__live live0 = funnel__live_now();
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  uintptr_t s = 0;
  const int made = CHECK_OK(funnel_device_stream_create(dev, &s, &err), &err);
  funnel_device_close(dev);
  if (made) {
    CHECK(funnel__live_now().streams > live0.streams); /* the device waits for its stream */
    CHECK_OK(funnel_stream_destroy(s, &err), &err);
  }
  CHECK_EQ_I64(funnel__live_now().streams, live0.streams);
  CHECK_EQ_I64(funnel__live_now().host_allocs, live0.host_allocs);
}

/* A stream destroyed while a read enqueues on it goes only once that read
 * returned, which succeeds. */
static void stream_destroy_waits_for_a_read_using_it(void) {
  struct funnel_device *dev = slow_device(2000);
  struct reading r = {0};
  struct funnel_error err;
  if (dev == NULL || !CHECK_OK(funnel_reader_create(dev, NULL, 0, &r.rd, &err), &err) ||
      !CHECK_OK(funnel_device_stream_create(dev, &r.stream, &err), &err)) {
    funnel_reader_free(r.rd);
    funnel_device_close(dev);
    return;
  }
  partitions(r.parts, 5);
  gate_close();
  pthread_create(&r.thread, NULL, read_thread, &r);
  gate_wait_entered(1);
  CHECK_EQ_I64(funnel__stream_users(r.stream), 1);
  struct blocking d = {.stream = r.stream};
  pthread_create(&d.thread, NULL, destroy_thread, &d);
  sleep_ms(50);
  CHECK(!atomic_load(&d.done)); /* the read holds it */
  gate_open();
  pthread_join(r.thread, NULL);
  pthread_join(d.thread, NULL);
  CHECK_OK(r.st, &r.err);
  CHECK_OK(d.st, NULL);
  if (r.t != NULL) check_rows(r.t, 5);
  funnel_table_free(r.t);
  partitions_free(r.parts);
  funnel_reader_free(r.rd);
  funnel_device_close(dev);
}

/* --------------------------------------------------------- pinned blocks */

/* A free names what is wrong and frees nothing: a wrong size, a pointer
 * that starts no block, a block freed already. */
static void pinned_free_checks_pointer_and_size(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  uint8_t *a = NULL;
  if (CHECK_OK(funnel_device_pinned_alloc(dev, 1000, (void **)&a, &err), &err)) {
    const int64_t in_use = funnel_device_pinned_in_use(dev);
    CHECK_STATUS(funnel_device_pinned_free(dev, a, 999, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
    if (!CHECK(strstr(err.message, "allocated with 1000 bytes, not 999") != NULL))
      printf("  message: %s\n", err.message);
    CHECK_STATUS(funnel_device_pinned_free(dev, a + 64, 936, &err), FUNNEL_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK(strstr(err.message, "is not the start of a live pinned block") != NULL);
    void *heap = malloc(64);
    CHECK_STATUS(funnel_device_pinned_free(dev, heap, 64, &err), FUNNEL_ERR_INVALID_ARGUMENT,
                 &err);
    free(heap);
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), in_use);
    memset(a, 0x11, 1000); /* still the caller's */
    CHECK_OK(funnel_device_pinned_free(dev, a, 1000, &err), &err);
    CHECK_STATUS(funnel_device_pinned_free(dev, a, 1000, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "freed already") != NULL);
  }
  CHECK_OK(funnel_device_pinned_free(dev, NULL, 0, &err), &err);
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* A block outstanding keeps its device, its pool mapped: it is written
 * after the close, then freed, and the device goes with it. */
static void device_close_waits_for_pinned_blocks(void) {
  const struct funnel__live live0 = funnel__live_now();
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  uint8_t *a = NULL, *b = NULL;
  const int ok = CHECK_OK(funnel_device_pinned_alloc(dev, 4096, (void **)&a, &err), &err) &&
                 CHECK_OK(funnel_device_pinned_alloc(dev, 100, (void **)&b, &err), &err);
  funnel_device_close(dev);
  if (ok) {
    memset(a, 0x5A, 4096);
    memset(b, 0xA5, 100);
    CHECK(a[4095] == 0x5A && b[99] == 0xA5);
    CHECK_OK(funnel_device_pinned_free(dev, a, 4096, &err), &err);
    CHECK(funnel__live_now().host_allocs > live0.host_allocs); /* b holds the pool */
    CHECK_OK(funnel_device_pinned_free(dev, b, 100, &err), &err);
  }
  CHECK_EQ_I64(funnel__live_now().host_allocs, live0.host_allocs);
  CHECK_EQ_I64(funnel__live_now().streams, live0.streams);
}

/* The partitions of P reads laid back to back in one new pinned block. */
static uint8_t *pinned_copy(struct funnel_device *dev, const struct funnel_partition *parts,
                            struct funnel_partition *out, size_t *size) {
  *size = 0;
  for (int p = 0; p < P; p++) *size += (parts[p].length + 63) / 64 * 64;
  uint8_t *block = NULL;
  struct funnel_error err;
  if (!CHECK_OK(funnel_device_pinned_alloc(dev, *size, (void **)&block, &err), &err)) return NULL;
  size_t at = 0;
  for (int p = 0; p < P; p++) {
    memcpy(block + at, parts[p].data, parts[p].length);
    out[p] = (struct funnel_partition){block + at, parts[p].length};
    at += (parts[p].length + 63) / 64 * 64;
  }
  return block;
}

/* A pinned block freed right after a read of it, on the same thread, before
 * any wait: the free waits for the read's work, then the block is handed
 * out again and scribbled on; the table holds the rows as written. */
static void pinned_free_waits_for_the_read_of_its_block(void) {
  struct funnel_device *dev = slow_device(DELAY_US);
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev == NULL || !CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    funnel_device_close(dev);
    return;
  }
  static const int modes[] = {FUNNEL_TRANSFER_COPY, FUNNEL_TRANSFER_DIRECT, FUNNEL_TRANSFER_AUTO};
  for (int m = 0; m < 3; m++) {
    check_context("transfer mode %d", modes[m]);
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TRANSFER, modes[m], &err), &err);
    struct funnel_partition src[P], parts[P];
    partitions(src, 20 + m);
    size_t size = 0;
    uint8_t *block = pinned_copy(dev, src, parts, &size);
    struct funnel_table *t = NULL;
    if (block != NULL && CHECK_OK(funnel_reader_read_async(rd, parts, P, 0, &t, &err), &err)) {
      if (on_cpu()) CHECK(!funnel_table_is_ready(t)); /* the device is slow */
      CHECK_OK(funnel_device_pinned_free(dev, block, size, &err), &err);
      CHECK(funnel_table_is_ready(t));
      uint8_t *again = NULL; /* the same bytes of the pool, most likely */
      if (CHECK_OK(funnel_device_pinned_alloc(dev, size, (void **)&again, &err), &err)) {
        memset(again, 0xEF, size);
        CHECK_OK(funnel_device_pinned_free(dev, again, size, &err), &err);
      }
      check_rows(t, 20 + m);
    } else if (block != NULL) {
      CHECK_OK(funnel_device_pinned_free(dev, block, size, &err), &err);
    }
    funnel_table_free(t);
    partitions_free(src);
  }
  check_context("%s", "");
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_reader_free(rd);
  funnel_device_close(dev);
}

/* A read that fails (a partition is not Arrow) holds no block: the free
 * does not wait, and succeeds. */
static void failed_read_holds_no_pinned_block(void) {
  struct funnel_device *dev = slow_device(DELAY_US);
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev == NULL || !CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    funnel_device_close(dev);
    return;
  }
  struct funnel_partition src[P], parts[P];
  partitions(src, 30);
  size_t size = 0;
  uint8_t *block = pinned_copy(dev, src, parts, &size);
  if (block != NULL) {
    memset((void *)parts[P - 1].data, 0x42, 16); /* not a message */
    struct funnel_table *t = NULL;
    CHECK_STATUS(funnel_reader_read_async(rd, parts, P, 0, &t, &err), FUNNEL_ERR_MALFORMED, &err);
    CHECK(t == NULL);
    CHECK_OK(funnel_device_pinned_free(dev, block, size, &err), &err);
  }
  partitions_free(src);
  funnel_reader_free(rd);
  funnel_device_close(dev);
}

/* ---------------------------------------------------------------- tables */

struct copying {
  pthread_t thread;
  struct funnel_table *t;
  int64_t *got;
  int st;
  struct funnel_error err;
  _Atomic int done;
};

static void *copy_thread(void *arg) {
  struct copying *c = arg;
  struct funnel_host_column host = {NULL, NULL, c->got};
  c->st = funnel_table_copy_to_host(c->t, &host, &c->err);
  atomic_store(&c->done, 1);
  return NULL;
}

/* A table freed on one thread while another copies it back: the free waits
 * for the copy, which is whole. Again and again, with the copy in flight. */
static void table_free_waits_for_a_copy_back(void) {
  struct funnel_device *dev = slow_device(3000);
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev == NULL || !CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    funnel_device_close(dev);
    return;
  }
  struct funnel_partition parts[P];
  partitions(parts, 40);
  const int rounds = getenv("FUNNEL_TEST_QUICK") != NULL ? 10 : 40;
  int raced = 0;
  for (int round = 0; round < rounds; round++) {
    struct copying c = {.got = calloc((size_t)P * ROWS, 8)};
    if (!CHECK_OK(funnel_reader_read_async(rd, parts, P, 0, &c.t, &err), &err) ||
        !CHECK_OK(funnel_table_wait(c.t, &err), &err)) {
      funnel_table_free(c.t);
      free(c.got);
      break;
    }
    pthread_create(&c.thread, NULL, copy_thread, &c);
    while (funnel__table_calls_in_flight(c.t) == 0 && !atomic_load(&c.done)) {
    }
    const int in_flight = !atomic_load(&c.done);
    funnel_table_free(c.t);
    raced += in_flight;
    /* the free waited for the copy: every row is back already */
    for (int64_t k = 0; k < (int64_t)P * ROWS; k++)
      if (!CHECK_EQ_I64(c.got[k], value((int)(k / ROWS), k % ROWS, 40))) break;
    pthread_join(c.thread, NULL);
    CHECK_OK(c.st, &c.err);
    free(c.got);
  }
  CHECK(raced > rounds / 2);
  partitions_free(parts);
  funnel_reader_free(rd);
  funnel_device_close(dev);
}

/* --------------------------------------------------------------- readers */

/* A reader freed while reads on other threads enqueue: the free waits for
 * them, they succeed, and their tables outlive the reader. */
static void reader_free_waits_for_reads_in_flight(void) {
  struct funnel_device *dev = slow_device(2000);
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev == NULL || !CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    funnel_device_close(dev);
    return;
  }
  enum { N = 3 };
  struct reading r[N];
  memset(r, 0, sizeof(r));
  gate_close();
  for (int k = 0; k < N; k++) {
    r[k].rd = rd;
    partitions(r[k].parts, 50 + k);
    pthread_create(&r[k].thread, NULL, read_thread, &r[k]);
  }
  gate_wait_entered(N);
  CHECK_EQ_I64(funnel__reader_reads_in_flight(rd), N);
  struct blocking f = {.rd = rd};
  pthread_create(&f.thread, NULL, reader_free_thread, &f);
  sleep_ms(50);
  CHECK(!atomic_load(&f.done)); /* the reads hold it */
  gate_open();
  for (int k = 0; k < N; k++) pthread_join(r[k].thread, NULL);
  pthread_join(f.thread, NULL);
  for (int k = 0; k < N; k++) {
    if (CHECK_OK(r[k].st, &r[k].err)) check_rows(r[k].t, 50 + k);
    funnel_table_free(r[k].t);
    partitions_free(r[k].parts);
  }
  funnel_device_close(dev);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(backend_of_another_vtable_version_is_refused),
      CHECK_TEST(direct_max_bytes_option_is_checked),
      CHECK_TEST(read_refuses_a_stream_that_is_none),
      CHECK_TEST(destroyed_stream_is_refused),
      CHECK_TEST(stream_handles_are_never_reused),
      CHECK_TEST(stream_of_another_device_is_refused),
      CHECK_TEST(wrap_lends_a_native_stream),
      CHECK_TEST(stream_destroyed_after_device_close),
      CHECK_TEST(stream_destroy_waits_for_a_read_using_it),
      CHECK_TEST(pinned_free_checks_pointer_and_size),
      CHECK_TEST(device_close_waits_for_pinned_blocks),
      CHECK_TEST(pinned_free_waits_for_the_read_of_its_block),
      CHECK_TEST(failed_read_holds_no_pinned_block),
      CHECK_TEST(table_free_waits_for_a_copy_back),
      CHECK_TEST(reader_free_waits_for_reads_in_flight),
  };
  return CHECK_MAIN(argc, argv, tests);
}
