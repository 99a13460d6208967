/* check.c: the native tests' harness (see check.h). */
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* After this many printed failures the rest are only counted, so a broken
 * loop of 20000 cases stays readable. */
#define MAX_PRINTED 40

/* atomic: tests that read from several threads check from each of them */
static atomic_long failures;
static _Thread_local char context[256]; /* per thread: tests read on several */

long check_failures(void) { return failures; }

void check_context(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(context, sizeof(context), fmt, ap);
  va_end(ap);
}

static void vfail(const char *file, int line, const char *fmt, va_list ap) {
  long n = ++failures;
  if (n > MAX_PRINTED) {
    if (n == MAX_PRINTED + 1) fprintf(stderr, "  (further failures are counted, not printed)\n");
    return;
  }
  fprintf(stderr, "  %s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  if (context[0]) fprintf(stderr, "  [%s]", context);
  fputc('\n', stderr);
}

void check_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(file, line, fmt, ap);
  va_end(ap);
}

int check_true_at(const char *file, int line, const char *expr, int ok) {
  if (!ok) check_fail(file, line, "CHECK(%s) failed", expr);
  return ok;
}

int check_eq_i64_at(const char *file, int line, const char *a_expr, const char *b_expr,
                    int64_t a, int64_t b) {
  if (a == b) return 1;
  check_fail(file, line, "%s == %s failed: %lld != %lld", a_expr, b_expr, (long long)a,
             (long long)b);
  return 0;
}

int check_eq_str_at(const char *file, int line, const char *a_expr, const char *b_expr,
                    const char *a, const char *b) {
  if (a != NULL && b != NULL && strcmp(a, b) == 0) return 1;
  check_fail(file, line, "%s == %s failed: \"%s\" != \"%s\"", a_expr, b_expr,
             a ? a : "(null)", b ? b : "(null)");
  return 0;
}

int check_mem_at(const char *file, int line, const char *a_expr, const char *b_expr,
                 const void *a, const void *b, int64_t n) {
  const uint8_t *x = a, *y = b;
  for (int64_t i = 0; i < n; i++)
    if (x[i] != y[i]) {
      check_fail(file, line, "%s == %s failed: %lld bytes differ first at byte %lld: 0x%02x != 0x%02x",
                 a_expr, b_expr, (long long)n, (long long)i, x[i], y[i]);
      return 0;
    }
  return 1;
}

int check_status_at(const char *file, int line, const char *expr, int st, int expected,
                    const struct funnel_error *err) {
  if (st != expected) {
    check_fail(file, line, "%s is %s, expected %s: \"%s\"", expr, funnel_code_name(st),
               funnel_code_name(expected), err ? err->message : "(no error struct)");
    return 0;
  }
  if (expected == FUNNEL_OK || err == NULL) return 1;
  if (err->code != expected) {
    check_fail(file, line, "%s: error.code is %s, expected %s", expr, funnel_code_name(err->code),
               funnel_code_name(expected));
    return 0;
  }
  if (err->message[0] == '\0') {
    check_fail(file, line, "%s: %s with an empty message", expr, funnel_code_name(expected));
    return 0;
  }
  return 1;
}

uint64_t check_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t check_rand_below(uint64_t *state, uint64_t n) { return check_rand(state) % n; }

int check_main(int argc, char **argv, const struct check_test *tests, size_t count) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int ran = 0, failed = 0;
  for (size_t i = 0; i < count; i++) {
    if (filter != NULL && strstr(tests[i].name, filter) == NULL) continue;
    long before = failures;
    context[0] = '\0';
    fprintf(stderr, "[ RUN  ] %s\n", tests[i].name);
    tests[i].fn();
    ran++;
    if (failures != before) {
      failed++;
      fprintf(stderr, "[ FAIL ] %s (%ld failed checks)\n", tests[i].name, failures - before);
    } else {
      fprintf(stderr, "[   OK ] %s\n", tests[i].name);
    }
  }
  fprintf(stderr, "%d tests, %d failed, %ld failed checks\n", ran, failed, check_failures());
  if (ran == 0) {
    fprintf(stderr, "no test matches '%s'\n", filter ? filter : "");
    return 2;
  }
  return check_failures() != 0;
}

const char *check_backend(void) {
  const char *k = getenv("FUNNEL_TEST_BACKEND");
  return k != NULL && *k ? k : "cpu";
}

int check_device_open(struct funnel_device **out, struct funnel_error *err) {
  int st = funnel_device_open(check_backend(), out, err);
  /* "cuda:1" opens a device of the backend "cuda" */
  const size_t name = strcspn(check_backend(), ":");
  if (st == FUNNEL_OK && strcmp(check_backend(), "auto") != 0 &&
      (strlen(funnel_device_backend(*out)) != name ||
       strncmp(funnel_device_backend(*out), check_backend(), name) != 0)) {
    check_fail(__FILE__, __LINE__, "asked for backend %s, got %s", check_backend(),
               funnel_device_backend(*out));
  }
  return st;
}

int check_on_device(const struct funnel_read_stats *s) {
  return s->device_parsed > 0 && s->device_left == 0;
}

void check_read_invariants_at(const char *file, int line, const struct funnel_read_stats *s) {
  check_eq_i64_at(file, line, "device_calls_plan", "0", s->device_calls_plan, 0);
  if (check_on_device(s)) {
    /* compressed (LZ4 bodies): a first pass and the decoder's launch;
     * when it waited for the first pass (decode_waits 1, or 2 after a
     * guess of the decoded bytes that fell short), the args and summary
     * uploaded again, and after a short guess the launches after the first
     * pass again */
    const int z = s->compressed_partitions > 0;
    const int64_t waits = z ? s->decode_waits : 0;
    check_true_at(file, line, "decode_waits 0 to 2 (0 uncompressed)",
                  waits >= 0 && waits <= 2 && (z || s->decode_waits == 0));
    check_true_at(file, line, "h2d_copies <= partitions + 1 (+ 2 when it waited to decode)",
                  s->h2d_copies <= s->partitions + 1 + (waits > 0 ? 2 : 0));
    /* a parse a part when it overlapped the copies (compressed: the
     * first pass's, and a decoder a part) */
    const int64_t parses = s->overlap_parts > 1 ? s->overlap_parts : 1;
    const int64_t decoders = z && s->overlap_parts > 1 ? s->overlap_parts : 0;
    check_true_at(file, line,
                  "concat_launches <= 2 + the parse's parts (+ 2 compressed and a decoder a "
                  "part, + 4 after a short guess)",
                  s->concat_launches <= 2 + parses + decoders + (z ? 2 : 0) + (waits == 2 ? 4 : 0));
    check_eq_i64_at(file, line, "syncs_in_read", "1 + decode_waits", s->syncs_in_read, 1 + waits);
    check_eq_i64_at(file, line, "segments", "0", s->segments, 0);
    check_true_at(file, line, "no host decoding on the device path",
                  s->decode_ns == 0 && s->decoded_pinned == 0);
    return;
  }
  /* the host path; after a device-path attempt that left partitions to
   * it, with that attempt's copies, its parse, scan and concat (which
   * copied nothing), and its two waits (the sums, then its work) */
  const int attempt = s->device_parsed > 0;
  /* an attempt at LZ4 bodies: its first pass and decoder too (a decoder a
   * part when it decoded while it copied), and when it went in one go and
   * found the gate shut (decode_waits 2), the launches after the first
   * pass; its waits for the first pass, at most decode_waits more */
  const int64_t waits = attempt ? s->decode_waits : 0;
  const int lz4_attempt = attempt && s->compressed_partitions > 0;
  const int64_t attempt_launches =
      2 + (s->overlap_parts > 1 ? s->overlap_parts : 1) +
      (lz4_attempt ? 2 + (waits == 2 ? 4 : 0) + (s->overlap_parts > 1 ? s->overlap_parts : 0) : 0);
  const int64_t decoder = s->device_decoded > 0; /* its launch and its wait */
  /* the device's decoder may read pinned partitions' frames where they
   * lie: a run of each such partition more */
  check_true_at(file, line,
                "h2d_copies <= partitions + 1 (+ an attempt's partitions + 1, + the compressed "
                "partitions the device decodes in place)",
                s->h2d_copies <= (s->partitions + 1) * (attempt ? 2 : 1) +
                                     (decoder ? s->compressed_partitions : 0) +
                                     (waits > 0 ? 2 : 0));
  check_true_at(file, line,
                "concat_launches <= column_sets (+ an attempt's 2 + its parse's parts, + the decoder)",
                s->concat_launches <= s->column_sets + (attempt ? attempt_launches : 0) + decoder);
  check_eq_i64_at(file, line, "device_calls_parse", "0", s->device_calls_parse, 0);
  /* compressed partitions after an uncompressed first one: the early
   * copies made before parsing are waited for and dropped */
  const int64_t dropped =
      s->compressed_partitions > 0 && s->syncs_in_read == (attempt ? 3 : 1) + decoder;
  const int64_t syncs = (attempt ? 2 : 0) + dropped + decoder;
  if (s->syncs_in_read < syncs || s->syncs_in_read > syncs + waits)
    check_eq_i64_at(file, line, "syncs_in_read",
                    "0 (2 after an attempt, and its decode_waits at most; 1 more to drop early "
                    "copies, 1 for the device's decoder)",
                    s->syncs_in_read, syncs);
}

/* ------------------------------------------------------- the CUDA driver */

/* The few entry points the checks use, by their ABI names (cuda.h maps the
 * API names to these); no CUDA header: the tests build without one. */
static struct {
  int (*init)(unsigned);
  int (*count)(int *);
  int (*get)(int *, int);
  int (*can_access_peer)(int *, int, int);
  int (*pointer_attribute)(void *, int, unsigned long long);
  int (*primary_state)(int, unsigned *, int *);
  int (*primary_retain)(void **, int);
  int (*primary_release)(int);
  int (*push)(void *);
  int (*pop)(void **);
  int ok;
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return;
  *(void **)&cu.init = dlsym(lib, "cuInit");
  *(void **)&cu.count = dlsym(lib, "cuDeviceGetCount");
  *(void **)&cu.get = dlsym(lib, "cuDeviceGet");
  *(void **)&cu.can_access_peer = dlsym(lib, "cuDeviceCanAccessPeer");
  *(void **)&cu.pointer_attribute = dlsym(lib, "cuPointerGetAttribute");
  *(void **)&cu.primary_state = dlsym(lib, "cuDevicePrimaryCtxGetState");
  *(void **)&cu.primary_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&cu.primary_release = dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
  *(void **)&cu.push = dlsym(lib, "cuCtxPushCurrent_v2");
  *(void **)&cu.pop = dlsym(lib, "cuCtxPopCurrent_v2");
  cu.ok = cu.init && cu.count && cu.get && cu.can_access_peer && cu.pointer_attribute &&
          cu.primary_state && cu.primary_retain && cu.primary_release && cu.push && cu.pop &&
          cu.init(0) == 0;
}

int check_cuda_devices(void) {
  pthread_once(&cu_once, cu_load);
  int n = 0;
  return cu.ok && cu.count(&n) == 0 ? n : 0;
}

int check_cuda_peer(int from, int to) {
  int a, b, can = 0;
  if (check_cuda_devices() <= (from > to ? from : to)) return -1;
  if (cu.get(&a, from) != 0 || cu.get(&b, to) != 0 || cu.can_access_peer(&can, a, b) != 0)
    return -1;
  return can != 0;
}

int check_cuda_pointer_device(uint64_t ptr) {
  enum { DEVICE_ORDINAL = 9 }; /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
  const int n = check_cuda_devices();
  int ordinal = -1;
  if (n == 0) return -1;
  if (cu.pointer_attribute(&ordinal, DEVICE_ORDINAL, ptr) == 0) return ordinal;
  /* the driver may want a current context: the primary context of a
   * device that has one already (funnel's), never a new one */
  for (int i = 0; i < n; i++) {
    int dev, active = 0;
    unsigned flags;
    void *ctx = NULL, *popped = NULL;
    if (cu.get(&dev, i) != 0 || cu.primary_state(dev, &flags, &active) != 0 || !active ||
        cu.primary_retain(&ctx, dev) != 0)
      continue;
    int r = cu.push(ctx);
    if (r == 0) {
      r = cu.pointer_attribute(&ordinal, DEVICE_ORDINAL, ptr);
      cu.pop(&popped);
    }
    cu.primary_release(dev);
    if (r == 0) return ordinal;
  }
  return -1;
}
