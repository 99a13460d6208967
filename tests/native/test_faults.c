/* test_faults.c: injected faults (issue 5, item 3). For each kind of
 * backend call (device allocation, pinned allocation, copy, launch, event)
 * and every k that a read reaches, the k-th call of that kind fails: the
 * read (or the copy back) returns an error that names the step, nothing is
 * left allocated (device memory, pinned memory, events, streams: counted by
 * the wrappers), and the next read on the same reader is right; the
 * same with the partitions' bodies LZ4 compressed (decoded on the device:
 * by the device path's two passes, or the host path's decoder). The rows
 * come from the writer (iw_col), never from funnel. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "ipc_writer.h"

static const struct iw_field FIELDS[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "v", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 0},
};
static const struct iw_schema SCHEMA = {3, FIELDS, 0};
enum { N_COLS = 3, P_FEW = 24, P_MAX = 320, ROWS = 40 };
/* the partitions a read takes: P_FEW, or for a device path that parses
 * while it copies (overlapped_parse_faults_fail_cleanly) more than a tile */
static int P = P_FEW;
/* a read of LZ4 bodies back to back in the pinned pool decodes while it
 * copies, whatever its size (FUNNEL_ZOVERLAP_MIN_BYTES) */
static int zoverlap = 0;

static const char *const KIND_NAMES[FUNNEL__N_FAULTS] = {"ALLOC", "PINNED", "COPY", "LAUNCH",
                                                        "EVENT"};

/* The table of every partition, and each partition's stream bytes. */
struct input {
  struct iw_col cols[N_COLS];
  struct iw_buf bytes[P_MAX];
};

/* `lz4`: every buffer an LZ4 frame, as the funnel shuffle writes them (no
 * raw buffers: each is a job of the device's decoder). */
static void input_make(struct input *in, uint64_t seed, int lz4) {
  uint64_t rng = seed;
  for (int c = 0; c < N_COLS; c++) iw_col_random(&in->cols[c], &FIELDS[c], (int64_t)P * ROWS, 150, &rng);
  static const struct iw_options frames = {.compression = 1, .lz4_style = IW_LZ4_SPARK};
  const struct iw_options *o = lz4 ? &frames : NULL;
  for (int p = 0; p < P; p++) {
    memset(&in->bytes[p], 0, sizeof(in->bytes[p]));
    iw_schema_message(&in->bytes[p], &SCHEMA, o, NULL);
    iw_batch_from_cols(&in->bytes[p], &SCHEMA, in->cols, (int64_t)p * ROWS, (int64_t)(p + 1) * ROWS,
                       NULL, o);
    iw_eos(&in->bytes[p], o);
  }
}

static void input_free(struct input *in) {
  for (int c = 0; c < N_COLS; c++) iw_col_free(&in->cols[c]);
  for (int p = 0; p < P; p++) iw_buf_free(&in->bytes[p]);
}

/* The ways a read moves its bytes: all pinned and back to back (copied
 * before planning), pinned far apart and pageable mixed (staged, one copy
 * a run), pinned read in place by the kernel, and all pageable (staged
 * into one block, round by round). */
enum { ALL_PINNED, MIXED_STAGED, DIRECT, ALL_PAGEABLE, N_LAYOUTS };
static const char *const LAYOUT_NAMES[N_LAYOUTS] = {"all pinned", "pinned and pageable, staged",
                                                    "direct", "all pageable, staged"};

struct layout {
  struct funnel_partition parts[P_MAX];
  uint8_t *block;
  size_t block_size;
  int transfer;
};

static int layout_make(struct funnel_device *dev, const struct input *in, int kind,
                       struct layout *l) {
  memset(l, 0, sizeof(*l));
  /* the many partitions of an overlapped parse lie back to back (8-byte
   * aligned), so they go up as one copy of their span, in parts */
  const int packed = P > P_FEW;
  const size_t stride = kind == MIXED_STAGED ? (size_t)96 << 10 : 4096;
  l->block_size = stride * P;
  struct funnel_error err;
  if (!CHECK_OK(funnel_device_pinned_alloc(dev, l->block_size, (void **)&l->block, &err), &err))
    return 0;
  for (int p = 0; p < P; p++) {
    CHECK(in->bytes[p].len <= stride);
    const int pageable = (kind == MIXED_STAGED && p % 3 == 1) || kind == ALL_PAGEABLE;
    if (pageable) {
      l->parts[p] = (struct funnel_partition){in->bytes[p].data, in->bytes[p].len};
    } else {
      uint8_t *at = packed ? (p == 0 ? l->block
                                     : (uint8_t *)l->parts[p - 1].data +
                                           (l->parts[p - 1].length + 7) / 8 * 8)
                           : l->block + stride * (size_t)p;
      memcpy(at, in->bytes[p].data, in->bytes[p].len);
      l->parts[p] = (struct funnel_partition){at, in->bytes[p].len};
    }
  }
  l->transfer = kind == DIRECT ? FUNNEL_TRANSFER_DIRECT : FUNNEL_TRANSFER_COPY;
  return 1;
}

static int bit(const uint8_t *p, int64_t i) { return (p[i >> 3] >> (i & 7)) & 1; }

/* Copies the table back and compares it with the rows written; returns the
 * status of the copy (which may be an injected fault). */
static int copy_back_and_check(struct funnel_table *t, const struct input *in, int check,
                               struct funnel_error *err) {
  struct funnel_column c[N_COLS];
  struct funnel_host_column host[N_COLS];
  memset(host, 0, sizeof(host));
  for (int k = 0; k < N_COLS; k++) {
    if (!CHECK_OK(funnel_table_column(t, k, &c[k], err), err)) return err->code;
    host[k].validity = c[k].validity.size ? malloc((size_t)c[k].validity.size) : NULL;
    host[k].offsets = c[k].offsets.size ? malloc((size_t)c[k].offsets.size) : NULL;
    host[k].data = c[k].data.size ? malloc((size_t)c[k].data.size) : NULL;
  }
  const int st = funnel_table_copy_to_host(t, host, err);
  const int64_t rows = (int64_t)P * ROWS;
  if (st == FUNNEL_OK && check && CHECK_EQ_I64(funnel_table_num_rows(t), rows)) {
    const struct iw_col *v = &in->cols[0], *s = &in->cols[1], *b = &in->cols[2];
    for (int64_t r = 0; r < rows; r++) {
      const int valid = host[0].validity ? bit(host[0].validity, r) : 1;
      if (!CHECK_EQ_I64(valid, v->valid[r])) break;
      int64_t x, y;
      memcpy(&x, (uint8_t *)host[0].data + 8 * r, 8);
      memcpy(&y, v->values + 8 * r, 8);
      if (valid && !CHECK_EQ_I64(x, y)) break;
      if (!CHECK_EQ_I64(bit(host[2].data, r), b->values[r])) break;
    }
    const int32_t *off = host[1].offsets;
    for (int64_t r = 0; r < rows; r++) {
      const int64_t len = s->ends[r] - iw_col_start(s, r);
      if (!CHECK_EQ_I64(off[r + 1] - off[r], len)) break;
      if (!CHECK_MEM((uint8_t *)host[1].data + off[r], s->chars + iw_col_start(s, r), len)) break;
    }
  }
  for (int k = 0; k < N_COLS; k++) {
    free(host[k].validity);
    free(host[k].offsets);
    free(host[k].data);
  }
  return st;
}

static int same_live(struct funnel__live a, struct funnel__live b) {
  return a.allocs == b.allocs && a.host_allocs == b.host_allocs && a.events == b.events &&
         a.streams == b.streams;
}

/* Every k of every kind, for one layout and one parse (FUNNEL_OPTION_PARSE:
 * AUTO reads these few partitions by the host path, DEVICE by the device
 * path), of plain or `lz4` partitions (decoded on the device); counts what
 * was injected. */
static void faults_in_layout(int layout_kind, int parse, int lz4, int64_t injected[FUNNEL__N_FAULTS],
                             int64_t survived[FUNNEL__N_FAULTS]) {
  if (layout_kind == MIXED_STAGED || layout_kind == ALL_PAGEABLE)
    setenv("FUNNEL_STAGE_PAGEABLE", "1", 1);
  const int overlap = P > FUNNEL__DPATH_THREADS; /* parsed while copied, whatever the size */
  if (overlap) {
    setenv("FUNNEL_OVERLAP_MIN_BYTES", "1", 1);
    setenv("FUNNEL_OVERLAP_MIN_PARTS", "0", 1);
    /* staged in rounds of a few pages, each round's part parsed while the
     * next is staged */
    setenv("FUNNEL_STAGE_TASK_BYTES", "4096", 1);
    setenv("FUNNEL_STAGE_ROUND_BYTES", "16384", 1);
  }
  if (zoverlap) setenv("FUNNEL_ZOVERLAP_MIN_BYTES", "1", 1);
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  const int opened = CHECK_OK(check_device_open(&dev, &err), &err);
  unsetenv("FUNNEL_ZOVERLAP_MIN_BYTES");
  unsetenv("FUNNEL_STAGE_PAGEABLE");
  unsetenv("FUNNEL_OVERLAP_MIN_BYTES");
  unsetenv("FUNNEL_OVERLAP_MIN_PARTS");
  unsetenv("FUNNEL_STAGE_TASK_BYTES");
  unsetenv("FUNNEL_STAGE_ROUND_BYTES");
  if (!opened) return;
  struct input in;
  input_make(&in, 100 + (uint64_t)layout_kind, lz4);
  struct layout l;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err) &&
      layout_make(dev, &in, layout_kind, &l)) {
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TRANSFER, l.transfer, &err), &err);
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse, &err), &err);
    if (lz4) CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, FUNNEL_DECODE_DEVICE, &err), &err);
    /* warm: the pinned pool exists and the first read made its own calls */
    struct funnel_table *t = NULL;
    if (CHECK_OK(funnel_reader_read_async(rd, l.parts, P, 0, &t, &err), &err)) {
      CHECK_OK(copy_back_and_check(t, &in, 1, &err), &err);
      /* DEVICE: the device path reads them whole, LZ4 bodies decoded there */
      struct funnel_read_stats s;
      if (parse == FUNNEL_PARSE_DEVICE && CHECK_OK(funnel_table_stats(t, &s, &err), &err)) {
        CHECK(check_on_device(&s));
        CHECK_EQ_I64(s.compressed_partitions, lz4 ? P : 0);
        if (overlap) CHECK(s.overlap_parts > 1);
        /* decoded while copied: 4 parts, each one's unpack and decode,
         * then the second pass and the concat */
        if (zoverlap) {
          CHECK_EQ_I64(s.overlap_parts, 4);
          CHECK_EQ_I64(s.concat_launches, 2 * 4 + 2);
        }
      }
      funnel_table_free(t);
    }
    const struct funnel__live live0 = funnel__live_now();
    const int64_t pinned0 = funnel_device_pinned_in_use(dev);
    for (int kind = 0; kind < FUNNEL__N_FAULTS; kind++) {
      for (int64_t k = 1; k < 10000; k++) {
        check_context("%s, %s path, %s, fault %s at call %lld", LAYOUT_NAMES[layout_kind],
                      parse == FUNNEL_PARSE_DEVICE ? "device" : "host", lz4 ? "lz4" : "plain",
                      KIND_NAMES[kind], (long long)k);
        t = NULL;
        funnel__fault_arm(kind, k);
        int st = funnel_reader_read_async(rd, l.parts, P, 0, &t, &err);
        if (st == FUNNEL_OK) st = copy_back_and_check(t, &in, 1, &err);
        const int hit = funnel__fault_calls(kind) >= k;
        funnel__fault_arm(kind, 0);
        if (hit) injected[kind]++;
        if (st != FUNNEL_OK) {
          CHECK(hit);
          CHECK(strstr(err.message, "injected fault") != NULL || kind == FUNNEL__FAULT_PINNED);
          CHECK(err.message[0] == '[' || kind == FUNNEL__FAULT_PINNED); /* names the step */
        } else if (hit) {
          survived[kind]++; /* a fault the read worked around (a full pinned pool) */
        }
        funnel_table_free(t);
        if (!CHECK(same_live(funnel__live_now(), live0))) {
          const struct funnel__live now = funnel__live_now();
          check_fail(__FILE__, __LINE__,
                     "left alive: %lld allocations, %lld pinned, %lld events, %lld streams",
                     (long long)(now.allocs - live0.allocs),
                     (long long)(now.host_allocs - live0.host_allocs),
                     (long long)(now.events - live0.events),
                     (long long)(now.streams - live0.streams));
          k = 10000;
        }
        CHECK_EQ_I64(funnel_device_pinned_in_use(dev), pinned0);
        /* the reader goes on */
        t = NULL;
        if (CHECK_OK(funnel_reader_read_async(rd, l.parts, P, 0, &t, &err), &err))
          CHECK_OK(copy_back_and_check(t, &in, 1, &err), &err);
        funnel_table_free(t);
        if (!hit) break; /* this read makes fewer than k calls of the kind */
      }
    }
    check_context("%s", "");
    CHECK_OK(funnel_device_pinned_free(dev, l.block, l.block_size, NULL), NULL);
  }
  funnel_reader_free(rd);
  input_free(&in);
  funnel_device_close(dev);
}

static void every_fault_a_read_reaches_fails_cleanly(void) {
  int64_t injected[FUNNEL__N_FAULTS] = {0}, survived[FUNNEL__N_FAULTS] = {0};
  for (int l = 0; l < N_LAYOUTS; l++)
    for (int lz4 = 0; lz4 <= 1; lz4++) {
      faults_in_layout(l, FUNNEL_PARSE_AUTO, lz4, injected, survived);
      faults_in_layout(l, FUNNEL_PARSE_DEVICE, lz4, injected, survived);
    }
  int64_t total = 0;
  for (int k = 0; k < FUNNEL__N_FAULTS; k++) {
    printf("    %-6s %lld faults injected (%lld worked around)\n", KIND_NAMES[k],
           (long long)injected[k], (long long)survived[k]);
    total += injected[k];
    /* every kind is reached by some read */
    CHECK(injected[k] > 0);
  }
  printf("    %lld faults injected in all, each reported or worked around, nothing left alive\n",
         (long long)total);
  /* the device path's LZ4 reads: without room for their decoded buffers or
   * output, the host path reads them */
  CHECK(survived[FUNNEL__FAULT_ALLOC] > 0);
}

/* The same for a read of the device path that parses its partitions while
 * they are copied (a second stream, an event a part), pinned ones or
 * staged ones: every fault on the way fails the read cleanly, or is
 * worked around, and leaves nothing. */
static void overlapped_parse_faults_fail_cleanly(void) {
  int64_t injected[FUNNEL__N_FAULTS] = {0}, survived[FUNNEL__N_FAULTS] = {0};
  P = P_MAX;
  faults_in_layout(ALL_PINNED, FUNNEL_PARSE_DEVICE, 0, injected, survived);
  faults_in_layout(ALL_PAGEABLE, FUNNEL_PARSE_DEVICE, 0, injected, survived);
  P = P_FEW;
  for (int k = 0; k < FUNNEL__N_FAULTS; k++)
    printf("    %-6s %lld faults injected (%lld worked around)\n", KIND_NAMES[k],
           (long long)injected[k], (long long)survived[k]);
  CHECK(injected[FUNNEL__FAULT_EVENT] > 0 && injected[FUNNEL__FAULT_LAUNCH] > 0 &&
        injected[FUNNEL__FAULT_COPY] > 0);
}

/* The same for a read of LZ4 bodies that decodes while it copies (copied
 * in parts, each unpacked on the second stream and decoded on a stream of
 * its own into room allocated before the first pass, dread.c): every
 * fault on the way fails the read cleanly, or is worked around (no room:
 * the decoder runs after the wait, or the host path reads it), and leaves
 * nothing, streams included. */
static void compressed_reads_decoded_while_copied_fail_cleanly(void) {
  int64_t injected[FUNNEL__N_FAULTS] = {0}, survived[FUNNEL__N_FAULTS] = {0};
  P = P_MAX;
  zoverlap = 1;
  faults_in_layout(ALL_PINNED, FUNNEL_PARSE_DEVICE, 1, injected, survived);
  zoverlap = 0;
  P = P_FEW;
  for (int k = 0; k < FUNNEL__N_FAULTS; k++)
    printf("    %-6s %lld faults injected (%lld worked around)\n", KIND_NAMES[k],
           (long long)injected[k], (long long)survived[k]);
  CHECK(injected[FUNNEL__FAULT_EVENT] > 0 && injected[FUNNEL__FAULT_LAUNCH] > 0 &&
        injected[FUNNEL__FAULT_COPY] > 0 && injected[FUNNEL__FAULT_ALLOC] > 0);
}

/* A fault armed far beyond what a read does is never hit, and a disarmed
 * kind costs nothing: the same read as without injection. */
static void unreached_fault_changes_nothing(void) {
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct input in;
  input_make(&in, 7, 0);
  struct funnel_partition parts[P_MAX];
  for (int p = 0; p < P; p++) parts[p] = (struct funnel_partition){in.bytes[p].data, in.bytes[p].len};
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    funnel__fault_arm(FUNNEL__FAULT_COPY, 1000000);
    struct funnel_table *t = NULL;
    if (CHECK_OK(funnel_reader_read_async(rd, parts, P, 0, &t, &err), &err))
      CHECK_OK(copy_back_and_check(t, &in, 1, &err), &err);
    CHECK(funnel__fault_calls(FUNNEL__FAULT_COPY) > 0);
    funnel__fault_arm(FUNNEL__FAULT_COPY, 0);
    funnel_table_free(t);
  }
  funnel_reader_free(rd);
  input_free(&in);
  funnel_device_close(dev);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(every_fault_a_read_reaches_fails_cleanly),
      CHECK_TEST(overlapped_parse_faults_fail_cleanly),
      CHECK_TEST(compressed_reads_decoded_while_copied_fail_cleanly),
      CHECK_TEST(unreached_fault_changes_nothing),
  };
  return CHECK_MAIN(argc, argv, tests);
}
