/* test_regressions.c: minimal reproductions of bugs that the other tests
 * (test_fuzz above all) found in native/src, each stating the behaviour
 * funnel.h promises; they failed before the fix and guard it since.
 *
 * The inputs that once crashed run in a child process, so one crash does
 * not hide the other reports: the parent checks that the child exited 0
 * (the input was handled as promised), and reports a signal (a crash, or a
 * sanitizer abort) or a nonzero exit (wrong answer, or ASan's report). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "format.h"
#include "funnel.h"
#include "ipc_writer.h"

/* Runs fn in a child; fn returns 0 when funnel behaved as promised. */
static void isolated_at(const char *file, int line, const char *name, int (*fn)(void)) {
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    check_fail(file, line, "%s: fork failed", name);
    return;
  }
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    check_fail(file, line, "%s: crashed with signal %d (%s)", name, WTERMSIG(status),
               WTERMSIG(status) == 6 ? "abort: a sanitizer's report is above" : "segfault or similar");
  else if (WEXITSTATUS(status) != 0)
    check_fail(file, line, "%s: exit status %d (wrong answer, or a sanitizer's report above)", name,
               WEXITSTATUS(status));
}
#define ISOLATED(fn) isolated_at(__FILE__, __LINE__, #fn, fn)

/* Reads `parts` on a fresh cpu device; 0 when the read fails with `code`
 * naming `partition` and `column` (ANY_COLUMN: any). */
#define ANY_COLUMN (-2)
static int read_expecting(const struct funnel_partition *parts, size_t n, int code, int64_t partition,
                          int64_t column) {
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_table *t = NULL;
  struct funnel_error err;
  if (check_device_open(&dev, &err) != FUNNEL_OK || funnel_reader_create(dev, NULL, 0, &rd, &err) != FUNNEL_OK)
    return 2;
  int st = funnel_reader_read_async(rd, parts, n, 0, &t, &err);
  int wrong = 0;
  if (st == FUNNEL_OK) {
    fprintf(stderr, "    read accepted the input (%lld rows); expected %s\n", (long long)funnel_table_num_rows(t),
            funnel_code_name(code));
    funnel_table_wait(t, NULL); /* runs the concat: where the damage shows */
    funnel_table_free(t);
    wrong = 1;
  } else {
    fprintf(stderr, "    read failed: %s (partition %lld, column %lld): %s\n", funnel_code_name(st),
            (long long)err.partition, (long long)err.column, err.message);
    wrong = st != code || err.partition != partition || (column != ANY_COLUMN && err.column != column);
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
  return wrong;
}

static void put64(uint8_t *p, int64_t v) { memcpy(p, &v, 8); }

/* ---------------------------------------------------------------------
 * Bug 1: only the first and last string offsets of a piece are checked
 * (format.c, funnel__batch_bind). A middle offset that runs backwards or
 * past the data buffer is accepted, and the table handed to the consumer
 * has offsets that point outside its data buffer. */
static int utf8_offsets_past_data(void) {
  static const struct iw_field f[] = {{.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 0}};
  static const struct iw_schema s = {1, f, 0};
  static const int32_t offs[3] = {0, 1000, 3}; /* row 0 claims 1000 bytes of a 3-byte buffer */
  struct iw_column c = {.length = 2, .offsets = offs, .offsets_length = 12, .data = "abc", .data_length = 3};
  struct iw_buf b = {0};
  iw_schema_message(&b, &s, NULL, NULL);
  iw_batch_message(&b, &s, 2, &c, NULL, NULL);
  struct funnel_partition p = {iw_dup(b.data, b.len), b.len};
  int rc = read_expecting(&p, 1, FUNNEL_ERR_MALFORMED, 0, 0);
  free((void *)p.data);
  iw_buf_free(&b);
  return rc;
}

static void read_rejects_utf8_offsets_past_data(void) { ISOLATED(utf8_offsets_past_data); }

/* The same for large_binary, where the rebase of the bad offset
 * (concat_cpu.c, FUNNEL_SEG_OFFSETS64: v += s->value) is a signed overflow:
 * UBSan aborts the read, found by test_fuzz. */
static int large_offsets_overflow_rebase(void) {
  static const struct iw_field f[] = {{.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lb", .nullable = 0}};
  static const struct iw_schema s = {1, f, 0};
  static const int64_t good[2] = {0, 3}, bad[3] = {0, INT64_MAX - 1, 2};
  struct iw_column c0 = {.length = 1, .offsets = good, .offsets_length = 16, .data = "abc", .data_length = 3};
  struct iw_column c1 = {.length = 2, .offsets = bad, .offsets_length = 24, .data = "de", .data_length = 2};
  struct iw_buf b0 = {0}, b1 = {0};
  iw_schema_message(&b0, &s, NULL, NULL);
  iw_batch_message(&b0, &s, 1, &c0, NULL, NULL);
  iw_schema_message(&b1, &s, NULL, NULL);
  iw_batch_message(&b1, &s, 2, &c1, NULL, NULL);
  /* partition 1's pieces are rebased by +3: INT64_MAX - 1 + 3 overflows */
  struct funnel_partition p[2] = {{iw_dup(b0.data, b0.len), b0.len}, {iw_dup(b1.data, b1.len), b1.len}};
  int rc = read_expecting(p, 2, FUNNEL_ERR_MALFORMED, 1, 0);
  free((void *)p[0].data);
  free((void *)p[1].data);
  iw_buf_free(&b0);
  iw_buf_free(&b1);
  return rc;
}

static void read_rejects_large_offsets_that_overflow_rebase(void) { ISOLATED(large_offsets_overflow_rebase); }

/* ---------------------------------------------------------------------
 * Bug 2: a batch length within 7 of INT64_MAX overflows the bitmap size
 * (format.c funnel__batch_bind: (p->length + 7) / 8, and p->length + 1 for
 * offsets; plan.c bitmap_bytes). For a bool column the wrapped, negative
 * size passes the data buffer check with an empty buffer; the plan's output
 * size goes negative, nothing is allocated, and the concat writes 2^63 bits
 * at address ~0. */
static int bool_batch_of_int64_max_rows(void) {
  static const struct iw_field f[] = {{.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 0}};
  static const struct iw_schema s = {1, f, 0};
  struct iw_column c = {.length = 1, .data = "\1", .data_length = 1};
  struct iw_buf b = {0};
  struct iw_layout l;
  iw_schema_message(&b, &s, NULL, NULL);
  iw_batch_message(&b, &s, 1, &c, NULL, &l);
  put64(b.data + l.length_field, INT64_MAX);
  put64(b.data + l.nodes, INT64_MAX);
  struct funnel_partition p = {iw_dup(b.data, b.len), b.len};
  /* MALFORMED (the data buffer cannot hold the rows) or LIMIT would do */
  int rc = read_expecting(&p, 1, FUNNEL_ERR_MALFORMED, 0, ANY_COLUMN) &&
           read_expecting(&p, 1, FUNNEL_ERR_LIMIT, 0, ANY_COLUMN);
  free((void *)p.data);
  iw_buf_free(&b);
  return rc;
}

static void read_rejects_bool_batch_of_int64_max_rows(void) { ISOLATED(bool_batch_of_int64_max_rows); }

/* ---------------------------------------------------------------------
 * Found by the libFuzzer run of 2026-11-23 (tests/fuzz/RESULTS.md): rows of
 * a fixed_size_binary(0) column take no bytes, so a batch of a few hundred
 * bytes may claim 2^57 rows; with one null in another batch the table needs
 * a 2^54-byte validity bitmap, and the read failed allocating its segment
 * table on the host (FUNNEL_ERR_HOST_OUT_OF_MEMORY, which a plugin would
 * take for "spill and retry"). It became a limit, naming the column; since
 * fixed_size_binary(0) is refused with the schema (Arrow Java cannot hold
 * it), the read fails there, before any batch. */
static int zero_width_column_of_2_57_rows(void) {
  static const struct iw_field f[] = {
      {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "z", .nullable = 1, .byte_width = 0}};
  static const struct iw_schema s = {1, f, 0};
  struct iw_column none = {.length = 1, .data = "", .data_length = 0};
  struct iw_column one_null = {.length = 1, .null_count = 1, .validity = "\0", .validity_length = 1,
                               .data = "", .data_length = 0};
  struct iw_buf b = {0};
  struct iw_layout l;
  iw_schema_message(&b, &s, NULL, NULL);
  iw_batch_message(&b, &s, 1, &none, NULL, &l);
  put64(b.data + l.length_field, FUNNEL__MAX_ROWS - 1);
  put64(b.data + l.nodes, FUNNEL__MAX_ROWS - 1);
  iw_batch_message(&b, &s, 1, &one_null, NULL, NULL);
  iw_eos(&b, NULL);
  struct funnel_partition p = {iw_dup(b.data, b.len), b.len};
  int rc = read_expecting(&p, 1, FUNNEL_ERR_UNSUPPORTED, 0, 0);
  free((void *)p.data);
  iw_buf_free(&b);
  return rc;
}

static void read_rejects_zero_width_column_of_2_57_rows(void) {
  ISOLATED(zero_width_column_of_2_57_rows);
}

/* ---------------------------------------------------------------------
 * Bug 3: a flatbuffer table whose vtable would start before the metadata
 * reads as an empty table instead of an error (format.c fb_table_at: the
 * `vt < 0` branch returns without setting r->bad). A corrupt Schema table
 * becomes a schema of 0 columns, and the read succeeds. */
static int schema_vtable_before_metadata(void) {
  static const struct iw_field f[] = {{.type = FUNNEL_TYPE_INT32, .name = "x", .nullable = 1}};
  static const struct iw_schema s = {1, f, 0};
  struct iw_buf b = {0};
  struct iw_layout l;
  iw_schema_message(&b, &s, NULL, &l);
  iw_eos(&b, NULL);
  int32_t soffset = 0x7FFFFFF0; /* vtable = table - soffset < 0 */
  memcpy(b.data + l.header, &soffset, 4);
  struct funnel_partition p = {iw_dup(b.data, b.len), b.len};
  int rc = read_expecting(&p, 1, FUNNEL_ERR_MALFORMED, 0, -1);
  free((void *)p.data);
  iw_buf_free(&b);
  return rc;
}

static void read_rejects_schema_vtable_before_metadata(void) { ISOLATED(schema_vtable_before_metadata); }

/* ---------------------------------------------------------------------
 * Bug 4: funnel_read_stats.batches is documented as "RecordBatch messages
 * read" but plan.c counts only batches with rows: a 0-row batch is read
 * and not counted. */
static void stats_count_zero_row_batches(void) {
  static const struct iw_field f[] = {{.type = FUNNEL_TYPE_INT32, .name = "x", .nullable = 0}};
  static const struct iw_schema s = {1, f, 0};
  static const int32_t v[3] = {1, 2, 3};
  struct iw_column full = {.length = 3, .data = v, .data_length = 12}, empty = {.length = 0};
  struct iw_buf b = {0};
  iw_schema_message(&b, &s, NULL, NULL);
  iw_batch_message(&b, &s, 3, &full, NULL, NULL);
  iw_batch_message(&b, &s, 0, &empty, NULL, NULL);
  iw_batch_message(&b, &s, 3, &full, NULL, NULL);
  struct funnel_partition p = {iw_dup(b.data, b.len), b.len};
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_table *t = NULL;
  struct funnel_error err;
  CHECK_OK(check_device_open(&dev, &err), &err);
  CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err);
  if (CHECK_OK(funnel_reader_read_async(rd, &p, 1, 0, &t, &err), &err)) {
    struct funnel_read_stats st;
    CHECK_OK(funnel_table_wait(t, &err), &err);
    CHECK_OK(funnel_table_stats(t, &st, &err), &err);
    CHECK_EQ_I64(st.rows, 6);
    CHECK_EQ_I64(st.batches, 3);
    funnel_table_free(t);
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
  free((void *)p.data);
  iw_buf_free(&b);
}

/* ---------------------------------------------------------------------
 * Bug 5: two differing Schema messages in one partition give
 * FUNNEL_ERR_SCHEMA_MISMATCH with error.column -1, though the first
 * differing column is known (format.c funnel__partition_parse ignores the
 * index funnel__schema_diff returns); funnel.h promises the column where
 * known, and a mismatch between partitions does set it. */
static void partition_schema_mismatch_names_column(void) {
  struct iw_field f[2] = {{.type = FUNNEL_TYPE_INT32, .name = "a", .nullable = 1},
                          {.type = FUNNEL_TYPE_UTF8, .name = "b", .nullable = 1}};
  struct iw_schema s1 = {2, f, 0};
  struct iw_buf b = {0};
  iw_schema_message(&b, &s1, NULL, NULL);
  iw_eos(&b, NULL);
  f[1].type = FUNNEL_TYPE_BINARY;
  iw_schema_message(&b, &s1, NULL, NULL);
  iw_eos(&b, NULL);
  uint8_t *copy = iw_dup(b.data, b.len);
  struct funnel__arena arena = {0};
  struct funnel__partition part;
  struct funnel_error err;
  if (CHECK_STATUS(funnel__partition_parse(copy, (int64_t)b.len, 4, &arena, &part, &err),
                   FUNNEL_ERR_SCHEMA_MISMATCH, &err)) {
    CHECK_EQ_I64(err.partition, 4);
    CHECK_EQ_I64(err.column, 1);
  }
  funnel__arena_free(&arena);
  free(copy);
  iw_buf_free(&b);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(read_rejects_utf8_offsets_past_data),
      CHECK_TEST(read_rejects_large_offsets_that_overflow_rebase),
      CHECK_TEST(read_rejects_bool_batch_of_int64_max_rows),
      CHECK_TEST(read_rejects_schema_vtable_before_metadata),
      CHECK_TEST(read_rejects_zero_width_column_of_2_57_rows),
      CHECK_TEST(stats_count_zero_row_batches),
      CHECK_TEST(partition_schema_mismatch_names_column),
  };
  return CHECK_MAIN(argc, argv, tests);
}
