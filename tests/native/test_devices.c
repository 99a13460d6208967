/* test_devices.c: several GPUs in one process, as an embedder with one
 * executor a GPU would have them. A thread per CUDA device this process
 * sees, each with a device of its own ("cuda:N"), all reading at the same
 * time: from pageable and from pinned partitions (the pinned ones in that
 * device's own pool), parsed on the host and on the device. Every table
 * is checked three ways: its rows against the source's, every buffer on
 * its own GPU (the driver's pointer attribute, asked here and not of
 * funnel), and the Arrow export's device_id the ordinal.
 *
 * Needs FUNNEL_TEST_BACKEND=cuda (or cuda:N: every device is read anyway);
 * on one GPU it checks that one's reads, and says so; without one it says
 * SKIPPED and checks nothing. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tables.h"

enum { ROWS = 20011, MAX_DEVICES = 16, ROUNDS = 6 };

static const struct iw_field FIELDS[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "k", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
    {.type = FUNNEL_TYPE_INT32, .name = "i", .nullable = 0},
    {.type = FUNNEL_TYPE_DECIMAL128, .name = "d", .nullable = 1, .precision = 20, .scale = 2},
};
enum { N_FIELDS = sizeof(FIELDS) / sizeof(FIELDS[0]) };
static const struct iw_schema SCHEMA = {N_FIELDS, FIELDS, 0};

struct device_run {
  int ordinal;
  int parts;
  int64_t reads; /* tables checked */
};

/* Copies `t` back, compares it with `src`, and checks where its buffers are. */
static void check_table(struct funnel_table *t, const struct table_src *src, int ordinal) {
  struct funnel_error err;
  if (!CHECK_EQ_I64(funnel_table_num_rows(t), src->rows) ||
      !CHECK_EQ_I64(funnel_table_num_columns(t), N_FIELDS))
    return;
  struct funnel_column cols[N_FIELDS];
  struct funnel_host_column host[N_FIELDS];
  for (int c = 0; c < N_FIELDS; c++) {
    CHECK_OK(funnel_table_column(t, c, &cols[c], &err), &err);
    const struct funnel_buffer *b[3] = {&cols[c].validity, &cols[c].offsets, &cols[c].data};
    for (int k = 0; k < 3; k++)
      if (b[k]->size > 0) {
        check_context("cuda:%d column %d buffer %d at 0x%llx", ordinal, c, k,
                      (unsigned long long)b[k]->address);
        CHECK_EQ_I64(check_cuda_pointer_device(b[k]->address), ordinal);
      }
    host[c].validity = malloc((size_t)cols[c].validity.size + 1);
    host[c].offsets = malloc((size_t)cols[c].offsets.size + 1);
    host[c].data = malloc((size_t)cols[c].data.size + 1);
  }
  check_context("cuda:%d", ordinal);
  if (CHECK_OK(funnel_table_copy_to_host(t, host, &err), &err))
    for (int c = 0; c < N_FIELDS; c++)
      check_column(&cols[c], &src->cols[c], src->rows, host[c].validity, host[c].offsets,
                   host[c].data);
  struct ArrowDeviceArray array;
  if (CHECK_OK(funnel_table_export_device(t, &array, NULL, &err), &err)) {
    CHECK_EQ_I64(array.device_id, ordinal);
    CHECK_EQ_I64(array.device_type, ARROW_DEVICE_CUDA);
    array.array.release(&array.array);
  }
  for (int c = 0; c < N_FIELDS; c++) {
    free(host[c].validity);
    free(host[c].offsets);
    free(host[c].data);
  }
  check_context("%s", "");
}

/* One device's thread: ROUNDS x {pageable, pinned} x {host, device parse}. */
static void *read_on(void *arg) {
  struct device_run *run = arg;
  char kind[32];
  snprintf(kind, sizeof(kind), "cuda:%d", run->ordinal);
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  struct table_src src = table_random(&SCHEMA, ROWS, 150, 1000 + (uint64_t)run->ordinal);
  struct funnel_partition *pageable = table_partitions(&src, run->parts);
  struct funnel_partition *pinned = calloc((size_t)run->parts, sizeof(*pinned));
  void *block = NULL;
  size_t total = 0;
  for (int p = 0; p < run->parts; p++) total += pageable[p].length;
  if (!CHECK_OK(funnel_device_open(kind, &dev, &err), &err)) goto out;
  CHECK_EQ_STR(funnel_device_backend(dev), "cuda");
  if (!CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err) ||
      !CHECK_OK(funnel_device_pinned_alloc(dev, total, &block, &err), &err))
    goto out;
  for (size_t p = 0, at = 0; p < (size_t)run->parts; at += pageable[p].length, p++) {
    memcpy((uint8_t *)block + at, pageable[p].data, pageable[p].length);
    pinned[p] = (struct funnel_partition){(uint8_t *)block + at, pageable[p].length};
  }
  for (int round = 0; round < ROUNDS; round++)
    for (int source = 0; source < 2; source++)
      for (int parse = FUNNEL_PARSE_HOST; parse <= FUNNEL_PARSE_DEVICE; parse++) {
        struct funnel_table *t = NULL;
        check_context("cuda:%d round %d %s parse %d", run->ordinal, round,
                      source ? "pinned" : "pageable", parse);
        if (!CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse, &err), &err) ||
            !CHECK_OK(funnel_reader_read_async(rd, source ? pinned : pageable, run->parts, 0,
                                               &t, &err),
                      &err))
          continue;
        if (CHECK_OK(funnel_table_wait(t, &err), &err)) {
          check_table(t, &src, run->ordinal);
          run->reads++;
        }
        funnel_table_free(t);
      }
out:
  check_context("%s", "");
  if (block != NULL) CHECK_OK(funnel_device_pinned_free(dev, block, total, &err), &err);
  funnel_reader_free(rd);
  funnel_device_close(dev);
  free(pinned);
  table_partitions_free(pageable, run->parts);
  table_src_free(&src);
  return NULL;
}

/* The devices this run can test, or 0 (having said why). */
static int devices_under_test(void) {
  const int n = check_cuda_devices();
  if (strncmp(check_backend(), "cuda", 4) != 0 || n < 1) {
    printf("    SKIPPED: needs FUNNEL_TEST_BACKEND=cuda and a CUDA device (backend %s, %d "
           "devices)\n", check_backend(), n);
    return 0;
  }
  if (n == 1) printf("    one CUDA device: its reads are checked, not several GPUs at once\n");
  return n < MAX_DEVICES ? n : MAX_DEVICES;
}

/* A thread a device, each reading partitions of `parts`, all at once. */
static void read_on_every_device(int parts) {
  const int n = devices_under_test();
  struct device_run runs[MAX_DEVICES];
  pthread_t threads[MAX_DEVICES];
  for (int d = 0; d < n; d++) {
    runs[d] = (struct device_run){.ordinal = d, .parts = parts};
    CHECK_EQ_I64(pthread_create(&threads[d], NULL, read_on, &runs[d]), 0);
  }
  for (int d = 0; d < n; d++) {
    pthread_join(threads[d], NULL);
    CHECK_EQ_I64(runs[d].reads, ROUNDS * 4);
  }
  if (n > 0) printf("    %d devices, %d reads of %d partitions each, at once\n", n, ROUNDS * 4, parts);
}

/* 300 partitions of ~67 rows: Spark's shape, the device path's under AUTO */
static void every_device_reads_onto_itself_at_once(void) { read_on_every_device(300); }

/* 7 partitions of ~2,900 rows: the host path's shape */
static void large_partitions_too(void) { read_on_every_device(7); }

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(every_device_reads_onto_itself_at_once),
      CHECK_TEST(large_partitions_too),
  };
  return CHECK_MAIN(argc, argv, tests);
}
