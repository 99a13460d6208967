/* test_parity.c: the device under test (FUNNEL_TEST_BACKEND, default cpu)
 * against the cpu backend, byte for byte, on random tables: every type,
 * nulls, 1 to 1000 partitions, several batches, empty blocks. On a host
 * without a GPU both sides are cpu and the test checks determinism only;
 * on the GPU host ci/gpu-test sets FUNNEL_TEST_BACKEND=cuda. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ipc_writer.h"

static const struct iw_field FIELDS[] = {
    {.type = FUNNEL_TYPE_INT8, .name = "i8", .nullable = 1},
    {.type = FUNNEL_TYPE_INT16, .name = "i16", .nullable = 1},
    {.type = FUNNEL_TYPE_INT32, .name = "i32", .nullable = 0},
    {.type = FUNNEL_TYPE_INT64, .name = "i64", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT8, .name = "u8", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT16, .name = "u16", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT32, .name = "u32", .nullable = 1},
    {.type = FUNNEL_TYPE_UINT64, .name = "u64", .nullable = 1},
    {.type = FUNNEL_TYPE_FLOAT32, .name = "f32", .nullable = 1},
    {.type = FUNNEL_TYPE_FLOAT64, .name = "f64", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b_not_null", .nullable = 0},
    {.type = FUNNEL_TYPE_DATE32, .name = "d32", .nullable = 1},
    {.type = FUNNEL_TYPE_DATE64, .name = "d64", .nullable = 1},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts", .nullable = 1, .time_unit = FUNNEL_TIME_MICROSECOND,
     .timezone = "UTC"},
    {.type = FUNNEL_TYPE_DECIMAL128, .name = "dec", .nullable = 1, .precision = 30, .scale = 4},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BINARY, .name = "bin", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_UTF8, .name = "ls", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lbin", .nullable = 1},
    {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "fsb", .nullable = 1, .byte_width = 7},
};
#define N_FIELDS ((int)(sizeof(FIELDS) / sizeof(FIELDS[0])))

struct result {
  struct funnel_table *table;
  void *bufs[N_FIELDS][3];
  struct funnel_column cols[N_FIELDS];
};

/* `parse`: FUNNEL_OPTION_PARSE; with FUNNEL_PARSE_DEVICE the read must
 * have gone by the device path (`on_device`: 1), or been left to the host
 * by it (0). */
static int read_all(struct funnel_device *dev, const struct funnel_partition *parts, size_t n,
                    int transfer, int parse, int on_device, struct result *r) {
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  memset(r, 0, sizeof(*r));
  if (!CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) return 0;
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TRANSFER, transfer, &err), &err);
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse, &err), &err);
  int ok = CHECK_OK(funnel_reader_read_async(rd, parts, n, 0, &r->table, &err), &err);
  funnel_reader_free(rd); /* the table outlives its reader */
  if (!ok) return 0;
  struct funnel_read_stats s;
  CHECK_OK(funnel_table_stats(r->table, &s, &err), &err);
  CHECK_READ_INVARIANTS(&s);
  int64_t empty = 0;
  for (size_t p = 0; p < n; p++) empty += parts[p].length == 0;
  CHECK_EQ_I64(s.empty_partitions, empty);
  if (parse == FUNNEL_PARSE_DEVICE) {
    CHECK_EQ_I64(s.device_parsed, (int64_t)n);
    CHECK_EQ_I64(check_on_device(&s), on_device);
  } else if (parse == FUNNEL_PARSE_HOST) {
    CHECK_EQ_I64(s.device_parsed, 0);
  }
  struct funnel_host_column host[N_FIELDS];
  for (int c = 0; c < N_FIELDS; c++) {
    CHECK_OK(funnel_table_column(r->table, c, &r->cols[c], &err), &err);
    const struct funnel_buffer *b[3] = {&r->cols[c].validity, &r->cols[c].offsets, &r->cols[c].data};
    for (int k = 0; k < 3; k++) r->bufs[c][k] = b[k]->size > 0 ? malloc((size_t)b[k]->size) : NULL;
    host[c].validity = r->bufs[c][0];
    host[c].offsets = r->bufs[c][1];
    host[c].data = r->bufs[c][2];
  }
  return CHECK_OK(funnel_table_copy_to_host(r->table, host, &err), &err);
}

static void result_free(struct result *r) {
  for (int c = 0; c < N_FIELDS; c++)
    for (int k = 0; k < 3; k++) free(r->bufs[c][k]);
  funnel_table_free(r->table);
}

/* `chunk`: when not NULL, the device under test was opened to cut pieces
 * into segments of that many bytes (FUNNEL_SEGMENT_CHUNK_BYTES), the cpu
 * side does not (for the messages).
 * `transfer` >= 0: the device under test reads the partitions from one
 * pinned block, back to back at 8-byte boundaries, with that transfer mode
 * (-1: from where they were written, pageable memory).
 * `parse`: the device under test's FUNNEL_OPTION_PARSE (the cpu side
 * parses on the host); partitions hold 1 to `max_batches` batches. */
struct parity_shape {
  int n_parts, max_rows, max_batches;
  int parse, on_device; /* read_all's */
  /* the device path must parse in parts while the partitions are copied
   * (a pinned `transfer`, or staged pageable partitions); with the
   * partitions around the middle, where the first part ends, empty */
  int overlap;
  /* a pinned `transfer` whose partitions do not all lie back to back
   * between the first and the last, as a read of many guesses they do
   * (reader.c, from them and a few pairs of neighbours): 1, one a third of
   * the way in (not one of those pairs) lies in pageable memory; 2, 4 KiB
   * of the block lie unused before it */
  int twist;
};

static void parity_case(struct funnel_device *cpu, struct funnel_device *dut, uint64_t *rng,
                        struct parity_shape sh, const char *chunk, int transfer) {
  const int n_parts = sh.n_parts, max_rows = sh.max_rows;
  const struct iw_schema schema = {.n_fields = N_FIELDS, .fields = FIELDS};
  struct funnel_partition *parts = calloc((size_t)n_parts, sizeof(*parts));
  struct iw_buf *bufs = calloc((size_t)n_parts, sizeof(*bufs));
  for (int p = 0; p < n_parts; p++) {
    if (check_rand_below(rng, 10) == 0) continue; /* an empty shuffle block */
    if (sh.overlap && p >= n_parts / 2 - 40 && p < n_parts / 2 + 40) continue;
    int64_t rows = (int64_t)check_rand_below(rng, (uint64_t)max_rows + 1);
    struct iw_col cols[N_FIELDS];
    for (int c = 0; c < N_FIELDS; c++) iw_col_random(&cols[c], &FIELDS[c], rows, 150, rng);
    iw_schema_message(&bufs[p], &schema, NULL, NULL);
    struct iw_encode e = {.rng = rng, .junk_padding = 1, .vary = 1};
    int64_t r0 = 0; /* one to three batches */
    int batches = 1 + (int)check_rand_below(rng, (uint64_t)sh.max_batches);
    for (int b = 0; b < batches; b++) {
      int64_t r1 = b == batches - 1 ? rows : r0 + (int64_t)check_rand_below(rng, (uint64_t)(rows - r0) + 1);
      iw_batch_from_cols(&bufs[p], &schema, cols, r0, r1, &e, NULL);
      r0 = r1;
    }
    if (check_rand_below(rng, 2)) iw_eos(&bufs[p], NULL);
    for (int c = 0; c < N_FIELDS; c++) iw_col_free(&cols[c]);
    parts[p].data = bufs[p].data;
    parts[p].length = bufs[p].len;
  }
  if (parts[0].length == 0) { /* the first partition carries the schema */
    iw_schema_message(&bufs[0], &schema, NULL, NULL);
    parts[0].data = bufs[0].data;
    parts[0].length = bufs[0].len;
  }
  struct funnel_partition *dut_parts = parts;
  uint8_t *block = NULL;
  size_t block_size = 0;
  if (transfer >= 0) {
    for (int p = 0; p < n_parts; p++) block_size += (parts[p].length + 7) / 8 * 8;
    block_size += sh.twist == 2 ? 4096 : 0;
    struct funnel_error err;
    if (!CHECK_OK(funnel_device_pinned_alloc(dut, block_size, (void **)&block, &err), &err))
      transfer = -1;
  }
  if (transfer >= 0) {
    dut_parts = calloc((size_t)n_parts, sizeof(*dut_parts));
    size_t at = 0;
    for (int p = 0; p < n_parts; p++) {
      if (sh.twist == 1 && p == n_parts / 3 + 5 && parts[p].length > 0) {
        dut_parts[p] = parts[p]; /* where it was written */
        continue;
      }
      if (sh.twist == 2 && p == n_parts / 3 + 5) at += 4096;
      if (parts[p].length > 0) memcpy(block + at, parts[p].data, parts[p].length);
      dut_parts[p] = (struct funnel_partition){block + at, parts[p].length};
      at += (parts[p].length + 7) / 8 * 8;
    }
  }
  struct result want, got;
  int ok = read_all(cpu, parts, (size_t)n_parts, FUNNEL_TRANSFER_AUTO, FUNNEL_PARSE_HOST, 0, &want);
  ok = ok && read_all(dut, dut_parts, (size_t)n_parts, transfer >= 0 ? transfer : FUNNEL_TRANSFER_AUTO,
                      sh.parse, sh.on_device, &got);
  if (ok && sh.overlap) {
    struct funnel_read_stats s;
    struct funnel_error err;
    CHECK_OK(funnel_table_stats(got.table, &s, &err), &err);
    check_context("%d partitions, transfer %d: parsed in parts while copied", n_parts, transfer);
    CHECK(s.overlap_parts > 1);
    check_context("%s", "");
  }
  if (ok) {
    CHECK_EQ_I64(funnel_table_num_rows(got.table), funnel_table_num_rows(want.table));
    for (int c = 0; c < N_FIELDS; c++) {
      check_context("%d partitions, column %d (%s), chunk %s, parse %d, transfer %d", n_parts, c,
                    FIELDS[c].name, chunk != NULL ? chunk : "default", sh.parse, transfer);
      CHECK_EQ_I64(got.cols[c].null_count, want.cols[c].null_count);
      CHECK_EQ_I64(got.cols[c].validity.size, want.cols[c].validity.size);
      CHECK_EQ_I64(got.cols[c].offsets.size, want.cols[c].offsets.size);
      CHECK_EQ_I64(got.cols[c].data.size, want.cols[c].data.size);
      if (got.cols[c].validity.size == want.cols[c].validity.size)
        CHECK_MEM(got.bufs[c][0], want.bufs[c][0], want.cols[c].validity.size);
      if (got.cols[c].offsets.size == want.cols[c].offsets.size)
        CHECK_MEM(got.bufs[c][1], want.bufs[c][1], want.cols[c].offsets.size);
      if (got.cols[c].data.size == want.cols[c].data.size)
        CHECK_MEM(got.bufs[c][2], want.bufs[c][2], want.cols[c].data.size);
    }
    check_context("%s", "");
  }
  result_free(&want);
  result_free(&got);
  if (block != NULL) {
    CHECK_OK(funnel_device_pinned_free(dut, block, block_size, NULL), NULL);
    free(dut_parts);
  }
  for (int p = 0; p < n_parts; p++) iw_buf_free(&bufs[p]);
  free(bufs);
  free(parts);
}

static void parity_random_tables_every_type(void) {
  struct funnel_device *cpu = NULL, *dut = NULL;
  struct funnel_error err;
  if (!CHECK_OK(funnel_device_open("cpu", &cpu, &err), &err)) return;
  if (!CHECK_OK(check_device_open(&dut, &err), &err)) {
    funnel_device_close(cpu);
    return;
  }
  printf("parity: cpu against %s\n", funnel_device_backend(dut));
  const int quick = getenv("FUNNEL_TEST_QUICK") != NULL;
  uint64_t rng = 20261122;
  static const int shapes[][2] = {{1, 1}, {1, 70}, {2, 33}, {7, 300}, {200, 40},
                                  {1000, 9}, {3, 5000}, {64, 1}};
  const int rounds = quick ? 1 : 4;
  for (int round = 0; round < rounds; round++)
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
      /* from pageable memory, then from pinned: copied (merged), read in place */
      parity_case(cpu, dut, &rng,
                  (struct parity_shape){shapes[i][0], shapes[i][1], 3, FUNNEL_PARSE_AUTO, 0, 0, 0}, NULL,
                  (int)((round + i) % 3) - 1);
  /* pieces cut into many small segments, at odd byte and bit positions,
   * by a device opened with FUNNEL_SEGMENT_CHUNK_BYTES set */
  static const char *const chunks[] = {"1", "37", "4096"};
  for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
    struct funnel_device *cut = NULL;
    setenv("FUNNEL_SEGMENT_CHUNK_BYTES", chunks[k], 1);
    const int opened = CHECK_OK(check_device_open(&cut, &err), &err);
    unsetenv("FUNNEL_SEGMENT_CHUNK_BYTES");
    if (!opened) break;
    parity_case(cpu, cut, &rng, (struct parity_shape){3, 5000, 3, FUNNEL_PARSE_HOST, 0, 0, 0}, chunks[k],
                (int)k - 1);
    parity_case(cpu, cut, &rng, (struct parity_shape){200, 40, 3, FUNNEL_PARSE_HOST, 0, 0, 0},
                chunks[k], 2 - (int)k);
    funnel_device_close(cut);
  }
  funnel_device_close(dut);
  funnel_device_close(cpu);
}

/* The device path (FUNNEL_PARSE_DEVICE) against the host path on the cpu
 * backend: partitions of one batch (or none), every type, nulls, empty
 * blocks, 1 to 50,000 partitions, from pageable memory and from pinned
 * memory copied and read in place; then partitions of several batches,
 * which the device path leaves to the host. */
static void parity_device_path_every_type(void) {
  struct funnel_device *cpu = NULL, *dut = NULL;
  struct funnel_error err;
  if (!CHECK_OK(funnel_device_open("cpu", &cpu, &err), &err)) return;
  if (!CHECK_OK(check_device_open(&dut, &err), &err)) {
    funnel_device_close(cpu);
    return;
  }
  const int quick = getenv("FUNNEL_TEST_QUICK") != NULL;
  uint64_t rng = 20261123;
  static const int shapes[][2] = {{1, 1},   {1, 70},  {2, 33},   {7, 300}, {200, 40},
                                  {1000, 9}, {3, 5000}, {64, 1}, {129, 0}};
  for (int round = 0; round < (quick ? 1 : 3); round++)
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
      parity_case(cpu, dut, &rng,
                  (struct parity_shape){shapes[i][0], shapes[i][1], 1, FUNNEL_PARSE_DEVICE, 1, 0, 0}, NULL,
                  (int)((round + i) % 4) - 1);
  parity_case(cpu, dut, &rng, (struct parity_shape){quick ? 5000 : 50000, 2, 1, FUNNEL_PARSE_DEVICE, 1, 0, 0},
              NULL, -1); /* more than the pinned pool holds */
  /* pageable, staged into one block (as cuda does, and the cpu backend
   * when asked): laid out, and the device's table written, in parts on the
   * host threads (workers.h); then parsed in parts, each once the round
   * of staging that completes it is copied (dread.c) */
  struct funnel_device *staging = NULL;
  setenv("FUNNEL_STAGE_PAGEABLE", "1", 1);
  if (CHECK_OK(check_device_open(&staging, &err), &err)) {
    parity_case(cpu, staging, &rng, (struct parity_shape){9000, 3, 1, FUNNEL_PARSE_DEVICE, 1, 1, 0},
                NULL, -1);
    funnel_device_close(staging);
  }
  unsetenv("FUNNEL_STAGE_PAGEABLE");
  /* parsed in parts while the later parts are copied, by a device opened
   * to do so from reads of any size: from one pinned block, with a run of
   * empty partitions where the first part ends; then partitions of
   * several batches, which the device leaves to the host after it copied
   * them all */
  struct funnel_device *ov = NULL;
  setenv("FUNNEL_OVERLAP_MIN_BYTES", "1", 1);
  setenv("FUNNEL_OVERLAP_MIN_PARTS", "0", 1);
  const int opened = CHECK_OK(check_device_open(&ov, &err), &err);
  unsetenv("FUNNEL_OVERLAP_MIN_BYTES");
  unsetenv("FUNNEL_OVERLAP_MIN_PARTS");
  for (int round = 0; round < (quick ? 1 : 2) && opened; round++) {
    parity_case(cpu, ov, &rng,
                (struct parity_shape){2100 + 700 * round, 12, 1, FUNNEL_PARSE_DEVICE, 1, 1, 0},
                NULL, round == 0 ? FUNNEL_TRANSFER_COPY : FUNNEL_TRANSFER_AUTO);
    parity_case(cpu, ov, &rng,
                (struct parity_shape){1500 + 800 * round, 12, 3, FUNNEL_PARSE_DEVICE, 0, 1, 0},
                NULL, FUNNEL_TRANSFER_COPY);
  }
  /* a read of many partitions copies the span of its first and last
   * before it looks at the others: one elsewhere, or a gap, and it begins
   * again from its pass over them (each way, by both paths) */
  for (int twist = 1; twist <= 2 && opened; twist++) {
    parity_case(cpu, ov, &rng,
                (struct parity_shape){2500, 12, 1, FUNNEL_PARSE_DEVICE, 1, 0, twist}, NULL,
                FUNNEL_TRANSFER_COPY);
    parity_case(cpu, ov, &rng, (struct parity_shape){2500, 12, 1, FUNNEL_PARSE_HOST, 0, 0, twist},
                NULL, FUNNEL_TRANSFER_COPY);
  }
  funnel_device_close(ov);
  /* several batches: left to the host, the same table */
  parity_case(cpu, dut, &rng, (struct parity_shape){300, 20, 3, FUNNEL_PARSE_DEVICE, 0, 0, 0}, NULL, -1);
  parity_case(cpu, dut, &rng, (struct parity_shape){300, 20, 3, FUNNEL_PARSE_DEVICE, 0, 0, 0}, NULL,
              FUNNEL_TRANSFER_COPY);
  funnel_device_close(dut);
  funnel_device_close(cpu);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {CHECK_TEST(parity_random_tables_every_type),
                                            CHECK_TEST(parity_device_path_every_type)};
  return CHECK_MAIN(argc, argv, tests);
}
