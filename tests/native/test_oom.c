/* test_oom.c: device out of memory (issue 5, item 4). With the device all
 * but full, a read fails with FUNNEL_ERR_DEVICE_OUT_OF_MEMORY, a code of its
 * own that a plugin can catch to spill and retry; nothing is left allocated;
 * once the memory is free again, the next read on the same reader is right.
 * It needs a device whose memory can be filled: on the cpu backend, where
 * "device memory" is the host's, it says so and skips (test_faults injects
 * the same error there). The rows come from the loop that wrote them. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "device.h" /* funnel__cuda_ordinal */
#include "ipc_writer.h"

static const struct iw_field FIELDS[] = {{.type = FUNNEL_TYPE_INT64, .name = "v", .nullable = 0}};
static const struct iw_schema SCHEMA = {1, FIELDS, 0};
enum { P = 64, ROWS = 131072 }; /* 64 MiB of values */

static struct funnel_partition partition(int p) {
  int64_t *v = malloc((size_t)ROWS * 8);
  for (int64_t i = 0; i < ROWS; i++) v[i] = (int64_t)p * ROWS + i;
  struct iw_column c = {.length = ROWS, .data = v, .data_length = (int64_t)ROWS * 8};
  struct iw_buf b = {0};
  iw_schema_message(&b, &SCHEMA, NULL, NULL);
  iw_batch_message(&b, &SCHEMA, ROWS, &c, NULL, NULL);
  iw_eos(&b, NULL);
  free(v);
  return (struct funnel_partition){b.data, b.len};
}

static int read_and_check(struct funnel_reader *rd, const struct funnel_partition *parts,
                          struct funnel_error *err) {
  struct funnel_table *t = NULL;
  int st = funnel_reader_read_async(rd, parts, P, 0, &t, err);
  if (st != FUNNEL_OK) return st;
  int64_t *got = malloc((size_t)P * ROWS * 8);
  struct funnel_host_column host = {NULL, NULL, got};
  st = funnel_table_copy_to_host(t, &host, err);
  if (st == FUNNEL_OK)
    for (int64_t r = 0; r < (int64_t)P * ROWS; r++)
      if (!CHECK_EQ_I64(got[r], r)) break;
  free(got);
  funnel_table_free(t);
  return st;
}

/* Another instance of the device's backend, which takes memory until the
 * device refuses, in ever smaller pieces. */
struct hog {
  struct funnel_backend be;
  void *stream;
  uint64_t *ptrs;
  int64_t n, cap, bytes;
};

static void hog_fill(struct hog *h) {
  struct funnel_error err;
  for (int64_t piece = (int64_t)1 << 30; piece >= (int64_t)4 << 20; piece /= 4) {
    for (;;) {
      uint64_t p = 0;
      if (funnel__dev_alloc(&h->be, (size_t)piece, h->stream, &p, &err) != FUNNEL_OK) break;
      if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->ptrs = realloc(h->ptrs, (size_t)h->cap * sizeof(uint64_t));
      }
      h->ptrs[h->n++] = p;
      h->bytes += piece;
    }
  }
}

static void hog_free(struct hog *h) {
  for (int64_t i = 0; i < h->n; i++) funnel__dev_free(&h->be, h->ptrs[i], h->stream);
  free(h->ptrs);
  funnel__dev_stream_destroy(&h->be, h->stream);
  h->be.release(&h->be); /* its memory pool goes, and the memory with it */
}

static void read_on_a_full_device_fails_as_out_of_memory_and_recovers(void) {
  if (strcmp(check_backend(), "cpu") == 0) {
    printf("    SKIPPED: needs a device whose memory can be filled (FUNNEL_TEST_BACKEND=cuda); on "
           "the cpu backend test_faults injects this error\n");
    return;
  }
  if (getenv("FUNNEL_TEST_QUICK") != NULL) {
    printf("    SKIPPED: FUNNEL_TEST_QUICK (under compute-sanitizer, which needs device memory of "
           "its own)\n");
    return;
  }
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct funnel_partition parts[P];
  for (int p = 0; p < P; p++) parts[p] = partition(p);
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err) &&
      CHECK_OK(read_and_check(rd, parts, &err), &err)) {
    const struct funnel__live live0 = funnel__live_now();
    struct hog h;
    memset(&h, 0, sizeof(h));
    /* the device the tests run on (cuda:N), not the first one */
    const int ordinal = funnel__cuda_ordinal(check_backend());
    if (CHECK_OK(funnel__cuda_backend_open(&h.be, ordinal >= 0 ? ordinal : 0, &err), &err) &&
        CHECK_OK(funnel__dev_stream_create(&h.be, &h.stream, &err), &err)) {
      hog_fill(&h);
      printf("    the device refused more after %.1f GiB\n", (double)h.bytes / (1 << 30));
      const struct funnel__live full = funnel__live_now();
      const int st = read_and_check(rd, parts, &err);
      CHECK_STATUS(st, FUNNEL_ERR_DEVICE_OUT_OF_MEMORY, &err);
      printf("    read on the full device: %s: %s\n", funnel_code_name(st), err.message);
      CHECK_EQ_I64(funnel__live_now().allocs, full.allocs); /* the read left nothing */
      CHECK_EQ_I64(funnel__live_now().events, full.events);
      hog_free(&h);
      CHECK_EQ_I64(funnel__live_now().allocs, live0.allocs);
      CHECK_OK(read_and_check(rd, parts, &err), &err); /* memory back: the reader goes on */
    }
  }
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_reader_free(rd);
  for (int p = 0; p < P; p++) free((void *)parts[p].data);
  funnel_device_close(dev);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(read_on_a_full_device_fails_as_out_of_memory_and_recovers),
  };
  return CHECK_MAIN(argc, argv, tests);
}
