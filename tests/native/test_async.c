/* test_async.c: the async contract (funnel.h) against a slow device. On the
 * cpu backend FUNNEL_CPU_STREAM_DELAY_US makes every copy and launch start
 * late, so a free that did not wait for the work would show: ASan reports
 * the worker reading freed partitions, or the table holds garbage. On cuda
 * the variable does nothing and the tests still check the contract. The
 * rows come from the loop that wrote them. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ipc_writer.h"
#include "tables.h"

enum { P = 6, ROWS = 5000, DELAY_US = 20000 };

static int64_t value(int p, int64_t i, int salt) { return table_salted_value(p, i, salt); }

/* Partition p of a read salted `salt`, in malloc'd memory. */
static struct funnel_partition partition(int p, int salt) {
  return table_salted_partition(p, ROWS, salt);
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A device whose streams (its own and the readers') run late. */
static struct funnel_device *slow_device(void) {
  char delay[32];
  snprintf(delay, sizeof(delay), "%d", DELAY_US);
  setenv("FUNNEL_CPU_STREAM_DELAY_US", delay, 1);
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) dev = NULL;
  return dev;
}

static int on_cpu(void) { return strcmp(check_backend(), "cpu") == 0; }

/* Copies the table back and compares it with the rows of salt `salt`. */
static void check_rows(struct funnel_table *t, int salt) {
  struct funnel_error err;
  int64_t *got = malloc((size_t)P * ROWS * 8);
  struct funnel_host_column host = {NULL, NULL, got};
  if (CHECK_OK(funnel_table_copy_to_host(t, &host, &err), &err) &&
      CHECK_EQ_I64(funnel_table_num_rows(t), (int64_t)P * ROWS)) {
    for (int p = 0; p < P; p++)
      for (int64_t i = 0; i < ROWS; i++)
        if (!CHECK_EQ_I64(got[p * ROWS + i], value(p, i, salt))) {
          p = P;
          break;
        }
  }
  free(got);
}

/* Freeing a table whose work has not run yet waits for it: only then may
 * the partitions go (freed and their memory scribbled on at once). */
static void table_free_waits_for_work_not_yet_run(void) {
  struct funnel_device *dev = slow_device();
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev != NULL && CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    for (int round = 0; round < 3; round++) {
      struct funnel_partition parts[P];
      for (int p = 0; p < P; p++) parts[p] = partition(p, round);
      struct funnel_table *t = NULL;
      if (CHECK_OK(funnel_reader_read_async(rd, parts, P, 0, &t, &err), &err)) {
        if (on_cpu()) CHECK(!funnel_table_is_ready(t)); /* the work starts 20 ms late */
        const int64_t t0 = now_us();
        funnel_table_free(t);
        if (on_cpu()) CHECK(now_us() - t0 >= DELAY_US / 2); /* it waited */
      }
      for (int p = 0; p < P; p++) {
        memset((void *)parts[p].data, 0xAB, parts[p].length);
        free((void *)parts[p].data);
      }
    }
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
  unsetenv("FUNNEL_CPU_STREAM_DELAY_US");
}

/* Freeing a table that an export still holds waits for its work all the
 * same: the caller releases the partitions on return. (On the cpu backend
 * the export itself waits; on cuda it does not, and this is the wait.) */
static void table_free_waits_while_an_export_holds_it(void) {
  struct funnel_device *dev = slow_device();
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev != NULL && CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    struct funnel_partition parts[P];
    for (int p = 0; p < P; p++) parts[p] = partition(p, 3);
    struct funnel_table *t = NULL;
    struct ArrowDeviceArray d;
    if (CHECK_OK(funnel_reader_read_async(rd, parts, P, 0, &t, &err), &err) &&
        CHECK_OK(funnel_table_export_device(t, &d, NULL, &err), &err)) {
      funnel_table_free(t); /* the caller's handle; the export keeps the table */
      for (int p = 0; p < P; p++) {
        memset((void *)parts[p].data, 0xAB, parts[p].length);
        free((void *)parts[p].data);
        parts[p].data = NULL;
      }
      const struct ArrowArray *col = d.array.children[0];
      if (CHECK_EQ_I64(col->length, (int64_t)P * ROWS) && on_cpu()) { /* host memory */
        const int64_t *got = col->buffers[1];
        for (int p = 0; p < P; p++)
          for (int64_t i = 0; i < ROWS; i++)
            if (!CHECK_EQ_I64(got[p * ROWS + i], value(p, i, 3))) {
              p = P;
              break;
            }
      }
      d.array.release(&d.array);
    }
    for (int p = 0; p < P; p++) free((void *)parts[p].data);
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
  unsetenv("FUNNEL_CPU_STREAM_DELAY_US");
}

/* After funnel_table_wait the partitions may change or go: the table is
 * whole on the device, and copies back the rows as written. */
static void partitions_may_go_once_wait_returns(void) {
  struct funnel_device *dev = slow_device();
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev != NULL && CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    struct funnel_partition parts[P];
    for (int p = 0; p < P; p++) parts[p] = partition(p, 7);
    struct funnel_table *t = NULL;
    if (CHECK_OK(funnel_reader_read_async(rd, parts, P, 0, &t, &err), &err)) {
      CHECK_OK(funnel_table_wait(t, &err), &err);
      CHECK(funnel_table_is_ready(t));
      for (int p = 0; p < P; p++) {
        memset((void *)parts[p].data, 0xCD, parts[p].length);
        free((void *)parts[p].data);
        parts[p].data = NULL;
      }
      check_rows(t, 7);
      funnel_table_free(t);
    }
    for (int p = 0; p < P; p++) free((void *)parts[p].data);
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
  unsetenv("FUNNEL_CPU_STREAM_DELAY_US");
}

/* A reader freed while its reads are in flight lets them finish: the tables
 * it made stay valid and right. */
static void reader_freed_with_reads_in_flight(void) {
  struct funnel_device *dev = slow_device();
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  struct funnel_partition parts[2][P];
  struct funnel_table *t[2] = {NULL, NULL};
  if (dev != NULL && CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    for (int r = 0; r < 2; r++) {
      for (int p = 0; p < P; p++) parts[r][p] = partition(p, 10 + r);
      CHECK_OK(funnel_reader_read_async(rd, parts[r], P, 0, &t[r], &err), &err);
    }
    funnel_reader_free(rd);
    for (int r = 0; r < 2; r++) {
      if (t[r] != NULL) check_rows(t[r], 10 + r);
      funnel_table_free(t[r]);
      for (int p = 0; p < P; p++) free((void *)parts[r][p].data);
    }
  }
  funnel_device_close(dev);
  unsetenv("FUNNEL_CPU_STREAM_DELAY_US");
}

/* Pinned partitions: a pool block is given back, and handed out again and
 * overwritten, only after the table that read it was waited on or freed;
 * the next read of the new bytes is right, the first table too. */
static void pinned_blocks_reused_after_wait(void) {
  struct funnel_device *dev = slow_device();
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (dev != NULL && CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    for (int round = 0; round < 3; round++) {
      struct funnel_partition parts[P];
      void *blocks[P];
      for (int p = 0; p < P; p++) {
        struct funnel_partition b = partition(p, 20 + round);
        blocks[p] = NULL;
        if (CHECK_OK(funnel_device_pinned_alloc(dev, b.length, &blocks[p], &err), &err))
          memcpy(blocks[p], b.data, b.length);
        parts[p] = (struct funnel_partition){blocks[p], b.length};
        free((void *)b.data);
      }
      struct funnel_table *t = NULL;
      if (CHECK_OK(funnel_reader_read_async(rd, parts, P, 0, &t, &err), &err)) {
        CHECK_OK(funnel_table_wait(t, &err), &err);
        for (int p = 0; p < P; p++) {
          CHECK_OK(funnel_device_pinned_free(dev, blocks[p], parts[p].length, NULL), NULL);
          void *again = NULL; /* the same bytes of the pool, most likely */
          if (funnel_device_pinned_alloc(dev, parts[p].length, &again, &err) == FUNNEL_OK) {
            memset(again, 0xEF, parts[p].length);
            CHECK_OK(funnel_device_pinned_free(dev, again, parts[p].length, NULL), NULL);
          }
        }
        check_rows(t, 20 + round);
        funnel_table_free(t);
      }
    }
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
  unsetenv("FUNNEL_CPU_STREAM_DELAY_US");
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(table_free_waits_for_work_not_yet_run),
      CHECK_TEST(partitions_may_go_once_wait_returns),
      CHECK_TEST(table_free_waits_while_an_export_holds_it),
      CHECK_TEST(reader_freed_with_reads_in_flight),
      CHECK_TEST(pinned_blocks_reused_after_wait),
  };
  return CHECK_MAIN(argc, argv, tests);
}
