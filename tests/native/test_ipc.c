/* test_ipc.c: sharing a table with another process (funnel.h, "sharing").
 *
 * Every test exports a table here and runs this executable again as the
 * importer (a real second process: POSIX shared memory on the cpu backend,
 * CUDA IPC on cuda), which rebuilds the source rows from the same seed,
 * imports the descriptor from a file, copies the table back and compares
 * it with the rows. Covered: the data (validity masks, string slices at
 * offsets into one allocation), the exporter waiting for its importers,
 * an importer that dies holding the table, a withdrawn export, opening in
 * the exporting process, on another device or backend, and bytes that are
 * not a descriptor. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "device.h" /* funnel__cuda_ordinal */
#include "ipc_writer.h"
#include "tables.h"

extern char **environ;

static const struct iw_field FIELDS[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "k", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
    {.type = FUNNEL_TYPE_FLOAT64, .name = "x", .nullable = 0},
    {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lb", .nullable = 1},
    {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .nullable = 1, .precision = 20, .scale = 2},
};
enum { N_FIELDS = sizeof(FIELDS) / sizeof(FIELDS[0]), ROWS = 30011, PARTS = 9 };
static const struct iw_schema SCHEMA = {N_FIELDS, FIELDS, 0};

/* ---------------------------------------------------------- the importer */

/* Copies an imported table back and compares it with the rows of `seed`. */
static void check_imported(struct funnel_table *t, uint64_t seed) {
  struct table_src src = table_random(&SCHEMA, ROWS, 200, seed);
  struct funnel_error err;
  CHECK_EQ_I64(funnel_table_num_rows(t), ROWS);
  if (CHECK_EQ_I64(funnel_table_num_columns(t), N_FIELDS)) {
    struct funnel_column cols[N_FIELDS];
    struct funnel_host_column host[N_FIELDS];
    for (int c = 0; c < N_FIELDS; c++) {
      CHECK_OK(funnel_table_column(t, c, &cols[c], &err), &err);
      host[c].validity = malloc((size_t)cols[c].validity.size + 1);
      host[c].offsets = malloc((size_t)cols[c].offsets.size + 1);
      host[c].data = malloc((size_t)cols[c].data.size + 1);
    }
    if (CHECK_OK(funnel_table_copy_to_host(t, host, &err), &err))
      for (int c = 0; c < N_FIELDS; c++) {
        check_context("imported column %d", c);
        check_column(&cols[c], &src.cols[c], ROWS, host[c].validity, host[c].offsets,
                     host[c].data);
      }
    check_context("%s", "");
    for (int c = 0; c < N_FIELDS; c++) {
      free(host[c].validity);
      free(host[c].offsets);
      free(host[c].data);
    }
  }
  table_src_free(&src);
}

static uint8_t *read_file(const char *path, size_t *length) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)n + 1);
  *length = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void touch(const char *path) {
  FILE *f = fopen(path, "w");
  if (f != NULL) fclose(f);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* The importer: `test_ipc --import MODE SEED DIR`. Exits with the import's
 * funnel code when it fails (after printing its message), 100 when a
 * check failed, 0 otherwise. MODE: verify (import, compare, close), hold
 * (import, touch DIR/ready, wait for DIR/go, compare, close), die (import,
 * touch DIR/ready, be killed holding it). */
static int importer(const char *mode, uint64_t seed, const char *dir) {
  char path[512];
  snprintf(path, sizeof(path), "%s/descriptor", dir);
  size_t length = 0;
  uint8_t *descriptor = read_file(path, &length);
  struct funnel_device *dev = NULL;
  struct funnel_table *t = NULL;
  struct funnel_error err;
  /* FUNNEL_TEST_IMPORT_ON: another device than the exporter's (a GPU of
   * its own); peer: the exporter's ordinal, where the buffers must stay */
  const char *on = getenv("FUNNEL_TEST_IMPORT_ON");
  const int peer = strcmp(mode, "peer") == 0 ? atoi(getenv("FUNNEL_TEST_SHARED_ON")) : -1;
  if (descriptor == NULL || (on != NULL ? funnel_device_open(on, &dev, &err)
                                        : check_device_open(&dev, &err)) != FUNNEL_OK)
    return 99;
  const struct funnel__live live0 = funnel__live_now();
  const int st = funnel_table_import(dev, descriptor, length, &t, &err);
  free(descriptor);
  if (st != FUNNEL_OK) {
    printf("importer: %s: %s\n", funnel_code_name(st), err.message);
    if (peer >= 0) { /* no peer access: the message names both devices */
      char from[64];
      snprintf(from, sizeof(from), "(cuda:%d in this process)", peer);
      CHECK(strstr(err.message, from) != NULL && strstr(err.message, on) != NULL &&
            strstr(err.message, "no peer access") != NULL);
    }
    CHECK(funnel__live_now().allocs == live0.allocs && funnel__live_now().events == live0.events);
    funnel_device_close(dev);
    return check_failures() ? 100 : st;
  }
  snprintf(path, sizeof(path), "%s/ready", dir);
  if (strcmp(mode, "verify") != 0) touch(path);
  if (strcmp(mode, "die") == 0) raise(SIGKILL);
  if (strcmp(mode, "hold") == 0) {
    snprintf(path, sizeof(path), "%s/go", dir);
    for (int i = 0; i < 60000 && !exists(path); i++) sleep_ms(1);
  }
  CHECK_OK(funnel_table_wait(t, &err), &err);
  if (peer >= 0) {
    /* read in place through peer access: the bytes stay on the exporter's
     * GPU, but the driver gives an IPC mapping the ordinal of the context
     * that opened it (measured on two H200s joined by NVLink, 2026-11-24),
     * so the attribute names this process's device; check_imported below
     * shows the bytes read are the exporter's */
    struct funnel_column col;
    CHECK_OK(funnel_table_column(t, 0, &col, &err), &err);
    CHECK_EQ_I64(check_cuda_pointer_device(col.data.address), funnel__cuda_ordinal(on));
  }
  check_imported(t, seed);
  /* read only: it is not shared again from here */
  struct funnel_share *again = NULL;
  CHECK_STATUS(funnel_table_share(t, &again, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  funnel_table_free(t);
  CHECK(funnel__live_now().allocs == live0.allocs && funnel__live_now().events == live0.events);
  funnel_device_close(dev);
  return check_failures() ? 100 : 0;
}

/* ---------------------------------------------------------- the exporter */

static char self_path[512];

struct shared {
  struct funnel_device *dev;
  struct funnel_reader *rd;
  struct funnel_table *t;
  struct funnel_share *ex;
  struct table_src src;
  struct funnel_partition *p;
  char dir[256];
  /* what the export itself made: allocations, device-to-device copies */
  int64_t export_allocs, export_copies;
};

/* The exporter's device when not FUNNEL_TEST_BACKEND's */
static const char *export_on;

/* Reads the rows of `seed` (with FUNNEL_OPTION_SHAREABLE set to
 * `shareable`) and shares the table; the descriptor goes to DIR/descriptor. */
static bool share_with(struct shared *s, uint64_t seed, int shareable) {
  struct funnel_error err;
  memset(s, 0, sizeof(*s));
  s->src = table_random(&SCHEMA, ROWS, 200, seed);
  s->p = table_partitions(&s->src, PARTS);
  snprintf(s->dir, sizeof(s->dir), "%s", "/tmp/funnel-test-ipc-XXXXXX");
  if (!CHECK(mkdtemp(s->dir) != NULL)) return false;
  if (!CHECK_OK(export_on != NULL ? funnel_device_open(export_on, &s->dev, &err)
                                   : check_device_open(&s->dev, &err),
                &err) ||
      !CHECK_OK(funnel_reader_create(s->dev, NULL, 0, &s->rd, &err), &err) ||
      !CHECK_OK(funnel_reader_set_option(s->rd, FUNNEL_OPTION_SHAREABLE, shareable, &err), &err) ||
      !CHECK_OK(funnel_reader_read_async(s->rd, s->p, PARTS, 0, &s->t, &err), &err) ||
      !CHECK_OK(funnel_table_wait(s->t, &err), &err))
    return false;
  const int64_t allocs0 = funnel__live_now().allocs, copies0 = funnel__calls_now().d2d_copies;
  if (!CHECK_OK(funnel_table_share(s->t, &s->ex, &err), &err)) return false;
  s->export_allocs = funnel__live_now().allocs - allocs0;
  s->export_copies = funnel__calls_now().d2d_copies - copies0;
  size_t length = 0;
  const void *d = funnel_share_descriptor(s->ex, &length);
  char path[512];
  snprintf(path, sizeof(path), "%s/descriptor", s->dir);
  FILE *f = fopen(path, "wb");
  if (!CHECK(f != NULL)) return false;
  fwrite(d, 1, length, f);
  fclose(f);
  return true;
}

static bool share(struct shared *s, uint64_t seed) { return share_with(s, seed, 0); }

static void unshare(struct shared *s) {
  struct funnel_error err;
  if (s->ex != NULL) CHECK_OK(funnel_share_close(s->ex, 10000, &err), &err);
  funnel_table_free(s->t);
  funnel_reader_free(s->rd);
  funnel_device_close(s->dev);
  if (s->p != NULL) table_partitions_free(s->p, PARTS);
  table_src_free(&s->src);
  const char *names[] = {"descriptor", "ready", "go", "bad"};
  char path[512];
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", s->dir, names[i]);
    unlink(path);
  }
  rmdir(s->dir);
}

/* Starts the importer in a process of its own, with this environment and
 * `extra` (NULL-terminated "NAME=value"s; NULL: none). */
static pid_t spawn_importer_with(const char *mode, uint64_t seed, const char *dir,
                                 char *const *extra) {
  char seed_text[32];
  snprintf(seed_text, sizeof(seed_text), "%llu", (unsigned long long)seed);
  char *argv[] = {self_path, "--import", (char *)mode, seed_text, (char *)dir, NULL};
  size_t n = 0, k = 0;
  while (environ[n] != NULL) n++;
  while (extra != NULL && extra[k] != NULL) k++;
  char **env = calloc(n + k + 1, sizeof(*env));
  memcpy(env, environ, n * sizeof(*env));
  if (k > 0) memcpy(env + n, extra, k * sizeof(*env));
  pid_t pid = -1;
  const int st = posix_spawn(&pid, self_path, NULL, NULL, argv, env);
  free(env);
  return CHECK_EQ_I64(st, 0) ? pid : -1;
}

static pid_t spawn_importer(const char *mode, uint64_t seed, const char *dir) {
  return spawn_importer_with(mode, seed, dir, NULL);
}

/* The importer's exit code (-signal when killed). */
static int wait_importer(pid_t pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1000;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

static bool wait_ready(const char *dir) {
  char path[512];
  snprintf(path, sizeof(path), "%s/ready", dir);
  for (int i = 0; i < 60000; i++) {
    if (exists(path)) return true;
    sleep_ms(1);
  }
  return CHECK(!"the importer never got ready");
}

/* ------------------------------------------------------------------ tests */

static void another_process_reads_the_shared_table(void) {
  struct shared s;
  if (share(&s, 21)) {
    CHECK_EQ_I64(s.export_allocs, 1); /* a copy: the read's memory is funnel's pool */
    CHECK_EQ_I64(s.export_copies, 1);
    /* the owner's table may go: the export holds its own copy */
    funnel_table_free(s.t);
    s.t = NULL;
    CHECK_EQ_I64(wait_importer(spawn_importer("verify", 21, s.dir)), 0);
    CHECK_EQ_I64(funnel_share_importers(s.ex), 0);
  }
  unshare(&s);
}

/* A table read with FUNNEL_OPTION_SHAREABLE is shared as it is: the export
 * allocates and copies nothing, holds the table past the owner's free, and
 * the table's memory goes when the export is closed. */
static void shareable_table_is_shared_without_a_copy(void) {
  struct shared s;
  struct funnel_error err;
  if (share_with(&s, 29, 1)) {
    CHECK_EQ_I64(s.export_allocs, 0);
    CHECK_EQ_I64(s.export_copies, 0);
    funnel_table_free(s.t);
    s.t = NULL;
    CHECK_EQ_I64(wait_importer(spawn_importer("verify", 29, s.dir)), 0);
    const int64_t allocs = funnel__live_now().allocs;
    CHECK_OK(funnel_share_close(s.ex, 0, &err), &err);
    s.ex = NULL;
    CHECK_EQ_I64(funnel__live_now().allocs, allocs - 1); /* the table's memory */
  }
  unshare(&s);
}

static void two_importers_at_once(void) {
  struct shared s;
  if (share(&s, 22)) {
    pid_t a = spawn_importer("verify", 22, s.dir), b = spawn_importer("verify", 22, s.dir);
    CHECK_EQ_I64(wait_importer(a), 0);
    CHECK_EQ_I64(wait_importer(b), 0);
  }
  unshare(&s);
}

/* close waits for a live importer; it times out while one holds it. */
static void close_waits_for_the_importer(void) {
  struct shared s;
  struct funnel_error err;
  if (share(&s, 23)) {
    pid_t pid = spawn_importer("hold", 23, s.dir);
    if (wait_ready(s.dir)) {
      CHECK_EQ_I64(funnel_share_importers(s.ex), 1);
      CHECK_STATUS(funnel_share_close(s.ex, 50, &err), FUNNEL_ERR_IN_USE, &err);
      char pid_text[32];
      snprintf(pid_text, sizeof(pid_text), "pid %d", (int)pid);
      CHECK(strstr(err.message, pid_text) != NULL);
      /* withdrawn: a new importer is refused, the holder goes on */
      CHECK_EQ_I64(wait_importer(spawn_importer("verify", 23, s.dir)), FUNNEL_ERR_IN_USE);
      char go[512];
      snprintf(go, sizeof(go), "%s/go", s.dir);
      touch(go);
      CHECK_OK(funnel_share_close(s.ex, -1, &err), &err); /* returns once the holder closed */
      s.ex = NULL;
    }
    CHECK_EQ_I64(wait_importer(pid), 0);
  }
  unshare(&s);
}

/* An importer killed while it holds the table is noticed and reclaimed. */
static void dead_importer_is_reclaimed(void) {
  struct shared s;
  struct funnel_error err;
  if (share(&s, 24)) {
    pid_t pid = spawn_importer("die", 24, s.dir);
    CHECK_EQ_I64(wait_importer(pid), -SIGKILL);
    CHECK_EQ_I64(funnel_share_importers(s.ex), 0);
    CHECK_OK(funnel_share_close(s.ex, 0, &err), &err);
    s.ex = NULL;
  }
  unshare(&s);
}

static void import_in_the_exporting_process_fails(void) {
  struct shared s;
  struct funnel_error err;
  if (share(&s, 25)) {
    size_t length = 0;
    const void *d = funnel_share_descriptor(s.ex, &length);
    struct funnel_table *t = NULL;
    CHECK_STATUS(funnel_table_import(s.dev, d, length, &t, &err), FUNNEL_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK(strstr(err.message, "shared by this process") != NULL);
    CHECK(t == NULL);
  }
  unshare(&s);
}

/* A descriptor changed at `offset` (`n` bytes of `with`) or cut to
 * `length`, imported by another process, fails with `code` and a message
 * holding `says`. */
static void import_altered(struct shared *s, size_t offset, const void *with, size_t n,
                           size_t length, int code, const char *says) {
  size_t full = 0;
  const uint8_t *d = funnel_share_descriptor(s->ex, &full);
  uint8_t *b = malloc(full);
  memcpy(b, d, full);
  if (n > 0) memcpy(b + offset, with, n);
  char path[512];
  snprintf(path, sizeof(path), "%s/descriptor", s->dir);
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, length ? length : full, f);
  fclose(f);
  free(b);
  /* in-process the same checks come first, with the message to look at */
  struct funnel_table *t = NULL;
  struct funnel_error err;
  uint8_t *bytes = read_file(path, &full);
  CHECK_STATUS(funnel_table_import(s->dev, bytes, full, &t, &err), code, &err);
  if (!CHECK(strstr(err.message, says) != NULL)) printf("  message: %s\n", err.message);
  free(bytes);
  CHECK_EQ_I64(wait_importer(spawn_importer("verify", 0, s->dir)), code);
}

static void import_rejects_other_devices_and_bad_bytes(void) {
  struct shared s;
  if (share(&s, 26)) {
    const uint8_t other_uuid[16] = {0xde, 0xad, 0xbe, 0xef};
    import_altered(&s, 16, other_uuid, 16, 0, FUNNEL_ERR_INVALID_ARGUMENT,
                   "the table was shared from device deadbeef");
    const uint32_t other_backend = strncmp(check_backend(), "cuda", 4) == 0 ? 1 : 2;
    import_altered(&s, 12, &other_backend, 4, 0, FUNNEL_ERR_INVALID_ARGUMENT, "backend");
    import_altered(&s, 0, "NOTFUNNL", 8, 0, FUNNEL_ERR_MALFORMED, "bad magic at byte 0");
    import_altered(&s, 0, NULL, 0, 100, FUNNEL_ERR_MALFORMED, "truncated at byte");
    const uint32_t version = 7;
    import_altered(&s, 8, &version, 4, 0, FUNNEL_ERR_UNSUPPORTED, "version 7");
    /* the first column's validity claims bytes past its allocation (a
     * column: null count, length, then three buffers of allocation,
     * padding, offset and length) */
    size_t full = 0;
    funnel_share_descriptor(s.ex, &full);
    const int64_t huge = INT64_C(1) << 40;
    import_altered(&s, full - (size_t)N_FIELDS * 88 + 16 + 8, &huge, 8, 0, FUNNEL_ERR_MALFORMED,
                   "column 0 ('k'), buffer 0");
    /* and a length other than the table's rows */
    const int64_t rows_plus_one = ROWS + 1;
    import_altered(&s, full - (size_t)N_FIELDS * 88 + 8, &rows_plus_one, 8, 0, FUNNEL_ERR_MALFORMED,
                   "column 0 ('k'): null count");
  }
  unshare(&s);
}

/* A table shared from one GPU and opened on another (each process on its
 * own, as Spark's executors are): read in place when the importer's GPU
 * has peer access to the exporter's, which the driver is asked here, else
 * refused naming both devices. Needs FUNNEL_TEST_BACKEND=cuda and two
 * GPUs; SKIPPED otherwise. */
static void another_gpu_reads_it_in_place_or_is_told_why(void) {
  if (strncmp(check_backend(), "cuda", 4) != 0 || check_cuda_devices() < 2) {
    printf("    SKIPPED: needs FUNNEL_TEST_BACKEND=cuda and two CUDA devices (%d here)\n",
           check_cuda_devices());
    return;
  }
  for (int from = 0; from < 2; from++) {
    char kind[24], import_on[48], shared_on[40];
    snprintf(kind, sizeof(kind), "cuda:%d", from);
    snprintf(import_on, sizeof(import_on), "FUNNEL_TEST_IMPORT_ON=cuda:%d", 1 - from);
    snprintf(shared_on, sizeof(shared_on), "FUNNEL_TEST_SHARED_ON=%d", from);
    char *extra[] = {import_on, shared_on, NULL};
    const int peer = check_cuda_peer(1 - from, from);
    printf("    cuda:%d -> cuda:%d: the driver says peer access %s\n", from, 1 - from,
           peer == 1 ? "yes" : "no");
    struct shared s;
    export_on = kind;
    for (int shareable = 0; shareable < 2; shareable++) {
      if (share_with(&s, 40 + (uint64_t)shareable, shareable))
        CHECK_EQ_I64(wait_importer(spawn_importer_with("peer", 40 + (uint64_t)shareable, s.dir,
                                                       extra)),
                     peer == 1 ? 0 : FUNNEL_ERR_INVALID_ARGUMENT);
      unshare(&s);
    }
    export_on = NULL;
  }
}

/* Once closed, the descriptor opens nothing: the control block is gone. */
static void import_after_close_fails(void) {
  struct shared s;
  struct funnel_error err;
  if (share(&s, 28)) {
    CHECK_OK(funnel_share_close(s.ex, 0, &err), &err);
    s.ex = NULL;
    CHECK_EQ_I64(wait_importer(spawn_importer("verify", 28, s.dir)), FUNNEL_ERR_IN_USE);
  }
  unshare(&s);
}

/* Nothing of an export is left once it is closed. */
static void export_and_close_leave_nothing(void) {
  const struct funnel__live live0 = funnel__live_now();
  struct shared s;
  if (share(&s, 27)) {
    CHECK(funnel__live_now().allocs > live0.allocs);
  }
  unshare(&s);
  CHECK(funnel__live_now().allocs == live0.allocs && funnel__live_now().events == live0.events);
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--import") == 0)
    return importer(argv[2], strtoull(argv[3], NULL, 10), argv[4]);
  ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
  if (n <= 0) return 2;
  self_path[n] = '\0';
  static const struct check_test tests[] = {
      CHECK_TEST(another_process_reads_the_shared_table),
      CHECK_TEST(shareable_table_is_shared_without_a_copy),
      CHECK_TEST(two_importers_at_once),
      CHECK_TEST(close_waits_for_the_importer),
      CHECK_TEST(dead_importer_is_reclaimed),
      CHECK_TEST(import_in_the_exporting_process_fails),
      CHECK_TEST(import_rejects_other_devices_and_bad_bytes),
      CHECK_TEST(another_gpu_reads_it_in_place_or_is_told_why),
      CHECK_TEST(import_after_close_fails),
      CHECK_TEST(export_and_close_leave_nothing),
  };
  return CHECK_MAIN(argc, argv, tests);
}
