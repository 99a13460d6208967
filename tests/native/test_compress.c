/* test_compress.c: partitions whose record batch bodies are compressed
 * (Arrow's BodyCompression: LZ4_FRAME or ZSTD, method BUFFER), read into
 * one table.
 *
 * The partitions are written by the tests' IPC writer, which compresses
 * each buffer with liblz4 and libzstd itself (ipc_writer.c loads them on
 * its own), the way each real writer does: Arrow Java's frames (4 MiB
 * independent blocks, a content checksum, an 8-byte 0 prefix on empty
 * buffers, raw buffers where compression does not pay) and Arrow C++'s
 * (64 KiB linked blocks, no checksum, empty buffers left empty). The
 * expected rows are the writer's source table (tables.c), never funnel's
 * reading. Then the bad inputs: corrupt frames, lengths that do not
 * match, decompression bombs, unknown codecs, and a host without the
 * library; each an error naming partition, column and offset, and nothing
 * held afterwards. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "device.h"
#include "dpath.h"
#include "ipc_writer.h"
#include "lz4dec.h"
#include "zstddec.h"
#include "tables.h"

/* How a case writes its partitions. */
struct writing {
  const char *name;
  struct iw_options o;
};

static const struct writing WRITINGS[] = {
    {"lz4 as Arrow Java", {.compression = 1, .lz4_style = IW_LZ4_JAVA, .raw_fallback = 1,
                           .empty_prefix = 1}},
    {"lz4 as Arrow C++", {.compression = 1, .lz4_style = IW_LZ4_CPP, .raw_fallback = 1}},
    {"lz4 as the funnel shuffle", {.compression = 1, .lz4_style = IW_LZ4_SPARK}},
    {"lz4, never raw", {.compression = 1, .lz4_style = IW_LZ4_JAVA}},
    {"zstd as Arrow Java", {.compression = 2, .raw_fallback = 1, .empty_prefix = 1,
                            .zstd_level = 3}},
    {"zstd, never raw", {.compression = 2}},
};
enum { N_WRITINGS = sizeof(WRITINGS) / sizeof(WRITINGS[0]) };

/* Rows [r0, r1) of `t` as one partition: a schema, `batches` batches, the
 * end of stream; written as `o` says (NULL: uncompressed). */
static struct iw_buf partition_of(const struct table_src *t, int64_t r0, int64_t r1, int batches,
                                  const struct iw_options *o) {
  struct iw_buf b = {0};
  iw_schema_message(&b, t->schema, o, NULL);
  for (int k = 0; k < batches; k++)
    iw_batch_from_cols(&b, t->schema, t->cols, r0 + (r1 - r0) * k / batches,
                       r0 + (r1 - r0) * (k + 1) / batches, NULL, o);
  iw_eos(&b, o);
  return b;
}

/* The partitions of a read: in malloc'd memory, or in the device's pinned
 * pool. */
struct parts {
  struct funnel_partition *p;
  int n;
  struct funnel_device *pinned_by; /* NULL: malloc'd */
};

static void parts_free(struct parts *ps) {
  for (int i = 0; i < ps->n; i++) {
    if (ps->p[i].length == 0) continue;
    if (ps->pinned_by != NULL)
      funnel_device_pinned_free(ps->pinned_by, (void *)ps->p[i].data, ps->p[i].length, NULL);
    else
      free((void *)ps->p[i].data);
  }
  free(ps->p);
}

/* A partition's bytes `b` (freed) placed in malloc'd memory, or in
 * `pinned`'s pool when not NULL. */
static struct funnel_partition place(struct iw_buf *b, struct funnel_device *pinned) {
  void *at = NULL;
  if (pinned != NULL) {
    struct funnel_error err;
    if (!CHECK_OK(funnel_device_pinned_alloc(pinned, b->len, &at, &err), &err)) abort();
    memcpy(at, b->data, b->len);
  } else {
    at = iw_dup(b->data, b->len);
  }
  const struct funnel_partition p = {at, b->len};
  iw_buf_free(b);
  return p;
}

/* `t` cut into n partitions; partition i written with writing
 * `plain_every` ... : compressed unless i % plain_every == plain_at. */
static struct parts cut(const struct table_src *t, int n, int batches, const struct iw_options *o,
                        int plain_every, struct funnel_device *pinned) {
  struct parts ps = {calloc((size_t)n, sizeof(struct funnel_partition)), n, pinned};
  for (int i = 0; i < n; i++) {
    const bool plain = plain_every > 0 && i % plain_every == 0;
    struct iw_buf b = partition_of(t, t->rows * i / n, t->rows * (i + 1) / n, batches,
                                   plain ? NULL : o);
    ps.p[i] = place(&b, pinned);
  }
  return ps;
}

/* `t`'s row 0 alone as partition 0, its other rows cut evenly into the
 * other n - 1 (in one go, a read whose template is made from a partition
 * of raw buffers, the others' frames found only by its parse). */
static struct parts row_then_cut(const struct table_src *t, int n, const struct iw_options *o,
                                 struct funnel_device *pinned) {
  struct parts ps = {calloc((size_t)n, sizeof(struct funnel_partition)), n, pinned};
  for (int i = 0; i < n; i++) {
    const int64_t r0 = i == 0 ? 0 : 1 + (t->rows - 1) * (int64_t)(i - 1) / (n - 1);
    const int64_t r1 = i == 0 ? 1 : 1 + (t->rows - 1) * (int64_t)i / (n - 1);
    struct iw_buf b = partition_of(t, r0, r1, 1, o);
    ps.p[i] = place(&b, pinned);
  }
  return ps;
}

/* Where the reads decode (FUNNEL_OPTION_DECODE), set by each test's loop,
 * the codec the partitions are written with when a loop says (0: it does
 * not), the buffers the device decoded in them, and the reads the device
 * path took whole (dpath.h: LZ4 and ZSTD bodies, decoded there). */
static int decode_where = FUNNEL_DECODE_AUTO;
static int parse_where = FUNNEL_PARSE_AUTO; /* FUNNEL_OPTION_PARSE */
static int write_codec;
static int64_t decoded_on_device, device_path_reads, zstd_decoded_on_device;
static int64_t last_decode_waits; /* the last read's stats.decode_waits */
static int64_t last_overlap_parts, last_launches; /* ... its overlap_parts, concat_launches */
static bool pool_small; /* the device's pool may not hold a read's decoded images */
static int64_t last_streams; /* ... and the streams its reader made for it */
static int64_t last_staged; /* ... its stats.staged_partitions */
static int64_t last_allocs; /* ... its stats.device_allocs */
static int64_t last_zin, last_zout; /* ... its stats.bytes_compressed and bytes_decoded */
static int transfer_where = FUNNEL_TRANSFER_AUTO; /* read_and_check's readers' transfer */
static int time_kernel; /* ... and FUNNEL_OPTION_TIME_KERNEL */

static void read_and_check(struct funnel_device *dev, struct parts *ps,
                           const struct table_src *src, int64_t compressed) {
  const bool first_plain = ps->n > 0 && compressed < ps->n;
  struct funnel_reader *rd = NULL;
  struct funnel_table *tb = NULL;
  struct funnel_error err;
  if (!CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) return;
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, decode_where, &err), &err);
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse_where, &err), &err);
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TRANSFER, transfer_where, &err), &err);
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TIME_KERNEL, time_kernel, &err), &err);
  const int64_t streams0 = funnel__live_now().streams;
  if (CHECK_OK(funnel_reader_read_async(rd, ps->p, (size_t)ps->n, 0, &tb, &err), &err)) {
    CHECK_OK(funnel_table_wait(tb, &err), &err);
    last_streams = funnel__live_now().streams - streams0;
    struct funnel_read_stats s;
    if (CHECK_OK(funnel_table_stats(tb, &s, &err), &err)) {
      CHECK_READ_INVARIANTS(&s);
      CHECK_EQ_I64(s.compressed_partitions, compressed);
      CHECK(compressed == 0 || s.bytes_decoded > 0);
      CHECK(compressed == 0 || src->rows == 0 || s.bytes_compressed > 0);
      CHECK(s.decode_ns >= 0 && s.decode_ns <= s.parse_ns);
      const bool whole = check_on_device(&s); /* the device path read it all */
      device_path_reads += whole;
      if (time_kernel && whole) CHECK(s.kernel_ns >= 0); /* its concat timed */
      last_decode_waits = s.decode_waits;
      last_overlap_parts = s.overlap_parts;
      last_staged = s.staged_partitions;
      last_allocs = s.device_allocs;
      last_launches = s.concat_launches;
      last_zin = s.bytes_compressed;
      last_zout = s.bytes_decoded;
      /* the pool has room for the host's images, unless a test made it small */
      if (compressed > 0 && !whole && !pool_small) CHECK_EQ_I64(s.decoded_pinned, 1);
      if (decode_where == FUNNEL_DECODE_HOST) CHECK_EQ_I64(s.device_decoded, 0);
      CHECK(s.bytes_device_decoded <= s.bytes_decoded);
      decoded_on_device += s.device_decoded;
      if (write_codec == 2) zstd_decoded_on_device += s.device_decoded;
      /* a compressed first partition keeps the read off the device path
       * unless the device may decode its bodies (LZ4 or ZSTD, a loop says
       * which); after an uncompressed one, the device leaves them all to
       * the host */
      if (!first_plain && (decode_where != FUNNEL_DECODE_DEVICE || write_codec == 0))
        CHECK_EQ_I64(s.device_parsed, 0);
      if (first_plain) CHECK(s.device_left > 0 || s.device_parsed == 0);
    }
    table_check_read(tb, src);
    funnel_table_free(tb);
  }
  funnel_reader_free(rd);
}

/* Every writing, every type, from 1 to 2,000 partitions, random and
 * compressible values, one and three batches a partition. */
static void compressed_partitions_read_as_written(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  static const int N_PARTS[] = {1, 7, 300, 2000};
  int k = 0;
  decoded_on_device = device_path_reads = zstd_decoded_on_device = 0;
  for (int w = 0; w < 2 * N_WRITINGS; w++)
    for (int np = 0; np < 4; np++, k++) {
      /* the second round: the device decodes the LZ4 values */
      decode_where = w < N_WRITINGS ? FUNNEL_DECODE_HOST : FUNNEL_DECODE_DEVICE;
      write_codec = WRITINGS[w % N_WRITINGS].o.compression;
      const int n = N_PARTS[np];
      const int64_t rows = n == 1 ? 3000 : (int64_t)n * (k % 3 == 0 ? 2 : 23);
      struct table_src src = table_random(&every_schema, rows, 120, 1000 + (uint64_t)k);
      if (k % 2 == 0) table_make_compressible(&src);
      const int batches = k % 4 == 1 ? 3 : 1;
      check_context("%s, %d partitions, %lld rows, %d batches each, %s values, decoded on the %s",
                    WRITINGS[w % N_WRITINGS].name, n, (long long)rows, batches,
                    k % 2 == 0 ? "compressible" : "random",
                    decode_where == FUNNEL_DECODE_HOST ? "host" : "device");
      struct parts ps = cut(&src, n, batches, &WRITINGS[w % N_WRITINGS].o, 0, NULL);
      const int64_t whole = device_path_reads;
      read_and_check(dev, &ps, &src, n);
      /* many LZ4 partitions of a batch each: the device path reads them
       * all, whatever the frames (a frame its decoder refused, its
       * checksums say, would send the read to the host path) */
      if (decode_where == FUNNEL_DECODE_DEVICE && write_codec == 1 && n >= 128 && batches == 1)
        CHECK_EQ_I64(device_path_reads - whole, 1);
      parts_free(&ps);
      table_src_free(&src);
    }
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  write_codec = 0;
  CHECK(decoded_on_device > 1000); /* the device's round decoded values */
  CHECK(zstd_decoded_on_device > 100); /* ZSTD ones too (zstddec.h) */
  /* its reads of many partitions of one batch each, by the device path */
  CHECK(device_path_reads >= 4);
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* The cuda concat copies fixed-width pieces of 48 words and more 16 bytes
 * a lane (dpath.h, dp_copy), their sources 16-byte aligned or 8 bytes
 * off: here from the device's decoded buffers (LZ4 and ZSTD values
 * decoded there) and from raw buffers, whose values follow their 8-byte
 * length in the partition, malloc'd and pinned. Partitions of 97 and 98
 * rows, so that the pieces start at both alignments in the output. The
 * cpu backend copies them by words. */
static void decoded_long_fixed_width_pieces_on_the_device(void) {
  static const struct writing writings[] = {
      {"lz4 as Arrow Java, compressible", {.compression = 1, .lz4_style = IW_LZ4_JAVA}},
      {"lz4 as the funnel shuffle, compressible", {.compression = 1, .lz4_style = IW_LZ4_SPARK}},
      {"zstd, compressible", {.compression = 2, .zstd_level = 3}},
      {"lz4 as Arrow Java, random (raw)", {.compression = 1, .lz4_style = IW_LZ4_JAVA,
                                           .raw_fallback = 1, .empty_prefix = 1}},
  };
  enum { PARTS = 64 };
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  decode_where = FUNNEL_DECODE_DEVICE;
  parse_where = FUNNEL_PARSE_DEVICE;
  for (int w = 0; w < (int)(sizeof(writings) / sizeof(writings[0])); w++)
    for (int pinned = 0; pinned < 2; pinned++) {
      write_codec = writings[w].o.compression;
      check_context("%s, %s", writings[w].name, pinned ? "pinned" : "malloc'd");
      struct table_src src =
          table_random(&long_fixed_schema, PARTS * 97 + PARTS / 2, 100, 3000 + (uint64_t)w);
      if (!writings[w].o.raw_fallback) table_make_compressible(&src);
      struct parts ps = cut(&src, PARTS, 1, &writings[w].o, 0, pinned ? dev : NULL);
      const int64_t whole = device_path_reads;
      read_and_check(dev, &ps, &src, PARTS);
      CHECK_EQ_I64(device_path_reads - whole, 1);
      parts_free(&ps);
      table_src_free(&src);
    }
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  parse_where = FUNNEL_PARSE_AUTO;
  write_codec = 0;
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* AUTO takes the device path for reads of at least 48 partitions of LZ4
 * or ZSTD bodies the device decodes (128 of plain ones): 47 go by the host
 * path, 48 by the device path, the same rows either way. */
static void compressed_reads_take_the_device_path_from_48_partitions(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  static const struct iw_options spark = {.compression = 1, .lz4_style = IW_LZ4_SPARK};
  static const struct iw_options zstd = {.compression = 2, .raw_fallback = 1, .zstd_level = 3};
  decode_where = FUNNEL_DECODE_DEVICE;
  for (write_codec = 1; write_codec <= 2; write_codec++) {
    for (int n = 47; n <= 48; n++) {
      check_context("%s, %d partitions", write_codec == 1 ? "lz4" : "zstd", n);
      struct table_src src = table_random(&every_schema, 10 * (int64_t)n, 120, 77 + (uint64_t)n);
      struct parts ps = cut(&src, n, 1, write_codec == 1 ? &spark : &zstd, 0, NULL);
      const int64_t whole = device_path_reads, zstd_before = zstd_decoded_on_device;
      read_and_check(dev, &ps, &src, n);
      CHECK_EQ_I64(device_path_reads - whole, n >= 48);
      /* the device path's ZSTD frames decoded by its ZSTD decoder */
      if (write_codec == 2 && n >= 48) CHECK(zstd_decoded_on_device > zstd_before);
      parts_free(&ps);
      table_src_free(&src);
    }
  }
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  write_codec = 0;
  funnel_device_close(dev);
}

static void expect_failure(struct funnel_device *dev, struct parts *ps, int code, int column,
                           int64_t offset, const char *says);

/* Partition 5's first frame (LZ4 or ZSTD) declares one byte more than it decodes to. */
static void break_partition_5(struct parts *ps) {
  uint8_t *b = (uint8_t *)ps->p[5].data;
  static const uint8_t lz4[4] = {0x04, 0x22, 0x4D, 0x18}, zstd[4] = {0x28, 0xB5, 0x2F, 0xFD};
  for (size_t i = 8; i + 4 <= ps->p[5].length; i++)
    if (memcmp(b + i, lz4, 4) == 0 || memcmp(b + i, zstd, 4) == 0) {
      int64_t declared;
      memcpy(&declared, b + i - 8, 8); /* little-endian, as the host is */
      declared++;
      memcpy(b + i - 8, &declared, 8);
      return;
    }
  check_fail(__FILE__, __LINE__, "partition 5 has no LZ4 or ZSTD frame");
}

/* The one-go tests' columns (an int64 and a string column, nullable),
 * written as Arrow Java writes LZ4 and ZSTD bodies. */
static const struct iw_field one_go_fields[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1}};
static const struct iw_schema one_go_schema = {2, one_go_fields, 0};
static const struct iw_options java_lz4 = {.compression = 1, .lz4_style = IW_LZ4_JAVA,
                                           .raw_fallback = 1, .empty_prefix = 1};
static const struct iw_options java_zstd = {.compression = 2, .raw_fallback = 1,
                                            .empty_prefix = 1, .zstd_level = 3};
/* one int64 column that is never null */
static const struct iw_field wide_fields[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 0}};
static const struct iw_schema wide_schema = {1, wide_fields, 0};

/* A test loop's run 0 to 3: LZ4, then ZSTD, as Arrow Java writes them
 * (write_codec set), each from malloc'd, then pinned memory (*pinned). */
static const struct iw_options *java_run(int run, int *pinned) {
  *pinned = run & 1;
  write_codec = 1 + run / 2;
  return write_codec == 1 ? &java_lz4 : &java_zstd;
}

/* A small read of LZ4 bodies by the device path makes both passes in one
 * go (and of ZSTD bodies, the steps run again with them), from a guess
 * of its decoded bytes by the device's last such read
 * (decode_waits 0). Each step's read, in turn, on one device:
 *   random values, the device's first: a guess of twice the bytes holds;
 *   repeating values: they decode to more than the guess the random read
 *     leaves, so the read finds the gate shut and waits for the first pass
 *     (2), and the same rows come back;
 *   repeating values again: the guess from the read before holds (0);
 *   a frame that decodes to less than it declares: the error the host
 *     path gives, and the device's guess kept (a hostile test: such a read
 *     had reset it, and the next good read waited twice);
 *   repeating values again (0);
 *   zeros: they decode to many times their bytes;
 *   zeros again: a guess of more than 4 times the bytes would be held with
 *     the output (a hostile test: a read of 100 KB after zeros held 32.8
 *     MB), so the read waits for its first pass instead (1);
 *   random values after zeros: the same (1);
 *   more than 4 MiB of partitions: it waits for its first pass (1).
 * Every read's rows checked against the table written; in malloc'd and in
 * pinned memory. */
static void compressed_reads_go_in_one_go_from_a_guess(void) {
  const int ROWS = 60; /* repeating values that decode to at most 2.6 times their bytes */
  decode_where = FUNNEL_DECODE_DEVICE;
  for (int run = 0; run < 4; run++) {
    int pinned;
    const struct iw_options *java = java_run(run, &pinned);
    struct funnel_device *dev = NULL;
    struct funnel_error err;
    if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
    const int64_t events0 = funnel__live_now().events;
    time_kernel = run >= 2; /* the concat timed: its events too */
    struct table_src random = table_random(&one_go_schema, 300 * 20, 100, 91);
    struct table_src repeating = table_random(&one_go_schema, 300 * ROWS, 0, 92);
    table_make_compressible(&repeating);
    struct table_src zeros = table_random(&wide_schema, 300 * 400, 0, 94);
    memset(zeros.cols[0].values, 0, (size_t)zeros.rows * 8);
    /* 128 partitions of 40 KB of random int64s: over 4 MiB in all */
    struct table_src large = table_random(&wide_schema, 128 * 5000, 0, 93);
    static const struct {
      const char *what;
      int src; /* 0 random, 1 repeating, 2 zeros, 3 large */
      int n, broken;
      int64_t waits; /* -1: either way */
    } STEPS[] = {{"random values, the device's first read", 0, 300, 0, 0},
                 {"repeating values, after the random read", 1, 300, 0, 2},
                 {"repeating values, again", 1, 300, 0, 0},
                 {"repeating values, partition 5 broken", 1, 300, 1, -1},
                 {"repeating values, after the broken read", 1, 300, 0, 0},
                 {"zeros, after repeating values", 2, 300, 0, -1},
                 {"zeros, again", 2, 300, 0, 1},
                 {"random values, after zeros", 0, 300, 0, 1},
                 {"more than 4 MiB of partitions", 3, 128, 0, 1}};
    for (size_t k = 0; k < sizeof(STEPS) / sizeof(STEPS[0]); k++) {
      check_context("%s, %s, %s", write_codec == 1 ? "lz4" : "zstd", STEPS[k].what,
                    pinned ? "pinned" : "malloc'd");
      const struct table_src *src = STEPS[k].src == 0   ? &random
                                    : STEPS[k].src == 1 ? &repeating
                                    : STEPS[k].src == 2 ? &zeros
                                                        : &large;
      /* (expect_failure counts what stays in the pinned pool: none of its own) */
      struct parts ps = cut(src, STEPS[k].n, 1, java, 0,
                            pinned && !STEPS[k].broken ? dev : NULL);
      int64_t bytes = 0;
      for (int i = 0; i < ps.n; i++) bytes += (int64_t)ps.p[i].length;
      CHECK((bytes > (int64_t)4 << 20) == (STEPS[k].src == 3));
      if (STEPS[k].broken) {
        break_partition_5(&ps);
        expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 0, -1, "not the");
      } else {
        const int64_t whole = device_path_reads;
        last_decode_waits = last_allocs = -1;
        read_and_check(dev, &ps, src, STEPS[k].n);
        /* AUTO leaves ZSTD partitions of over 16 KiB on average to the host
         * (FUNNEL__DPATH_MAX_AVG_ZSTD): the large ones, 40 KB of random
         * values that go raw */
        const bool on_device = write_codec == 1 || STEPS[k].src != 3;
        CHECK_EQ_I64(device_path_reads - whole, on_device);
        if (STEPS[k].waits >= 0 && on_device) CHECK_EQ_I64(last_decode_waits, STEPS[k].waits);
        /* a read in one go makes two device allocations: its partitions'
         * copy, then its tables, decoded buffers and output in one block */
        if (STEPS[k].waits == 0 && on_device) CHECK_EQ_I64(last_allocs, 2);
      }
      parts_free(&ps);
    }
    /* three batches a partition, the device path forced: its first pass
     * leaves them all, the gate is shut, and the host path reads them (a
     * hostile test: the checks of such a read's stats did not count the
     * launches and the wait of an attempt in one go) */
    check_context("%s, three batches a partition, the device path forced, %s",
                  write_codec == 1 ? "lz4" : "zstd", pinned ? "pinned" : "malloc'd");
    parse_where = FUNNEL_PARSE_DEVICE;
    struct parts three = cut(&repeating, 100, 3, java, 0, pinned ? dev : NULL);
    const int64_t whole = device_path_reads;
    read_and_check(dev, &three, &repeating, 100);
    CHECK_EQ_I64(device_path_reads - whole, 0);
    parse_where = FUNNEL_PARSE_AUTO;
    parts_free(&three);
    table_src_free(&random);
    table_src_free(&repeating);
    table_src_free(&zeros);
    table_src_free(&large);
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
    /* every read's events given back, the timed ones of a read whose gate
     * shut too (a hostile test: its first pair was lost) */
    CHECK_EQ_I64(funnel__live_now().events, events0);
    funnel_device_close(dev);
  }
  time_kernel = 0;
  /* the guess is a codec's own: ZSTD's zeros (which decode to hundreds of
   * times their bytes) leave an LZ4 read's guess as it was (a review: one
   * ratio for both had sent it to two passes) */
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (CHECK_OK(check_device_open(&dev, &err), &err)) {
    struct table_src random = table_random(&one_go_schema, 300 * 20, 100, 95);
    struct table_src zeros = table_random(&wide_schema, 300 * 400, 0, 96);
    memset(zeros.cols[0].values, 0, (size_t)zeros.rows * 8);
    static const struct {
      const char *what;
      int codec, zeros;
      int64_t waits;
    } STEPS[] = {{"lz4 random values", 1, 0, 0},
                 {"zstd zeros: over the guess, the gate shut", 2, 1, 2},
                 {"lz4 random values, after zstd zeros", 1, 0, 0}};
    for (size_t k = 0; k < sizeof(STEPS) / sizeof(STEPS[0]); k++) {
      check_context("one device: %s", STEPS[k].what);
      write_codec = STEPS[k].codec;
      const struct table_src *src = STEPS[k].zeros ? &zeros : &random;
      struct parts ps = cut(src, 300, 1, write_codec == 1 ? &java_lz4 : &java_zstd, 0, NULL);
      last_decode_waits = last_allocs = -1;
      read_and_check(dev, &ps, src, 300);
      CHECK_EQ_I64(last_decode_waits, STEPS[k].waits);
      if (STEPS[k].waits == 0) CHECK_EQ_I64(last_allocs, 2);
      parts_free(&ps);
    }
    table_src_free(&random);
    table_src_free(&zeros);
    funnel_device_close(dev);
  }
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  write_codec = 0;
}

/* A small read in one go whose buffers are all raw (partitions of one
 * row: no frame pays) makes one pass, as a plain read does, with no
 * decoder, once the device's last read of the codec held no frame and its
 * template's partition holds none (dread.c, arm_one_go); a frame then
 * sends it on as one of two passes. Each step's read, in turn, on one
 * device, for LZ4 and ZSTD as Arrow Java writes them, in malloc'd and in
 * pinned memory (launches: the read's concat_launches; L those of the
 * first read: its first pass, the decoder, its second pass and the
 * concat):
 *   300 partitions of a row, the device's first read: the decoder runs
 *     (no read to guess from yet), no wait, no frame decoded;
 *   the same again: L - 2 launches (its one parse and the concat), no
 *     wait, one device allocation (its partitions', tables and output, as
 *     a plain read's), its bytes as given and as decoded those the host
 *     path counts;
 *   a row, then 299 partitions of 60 repeating rows, whose buffers are
 *     frames: the guess is wrong, the one pass leaves them (L - 2
 *     launches), and the read waits for its first pass (2), decodes, and
 *     makes its second pass and concat (L + 2 in all);
 *   the same again: the decoder runs (the last read held frames), no wait
 *     (L);
 *   300 partitions of a row after it: the decoder runs (L);
 *   again: L - 2;
 *   300 partitions of 60 repeating rows after it: the first partition's
 *     frames say so, and the read makes its two passes, with one wait
 *     between (L, 1): no room guessed from the raw read, which would be
 *     short (compressed_reads_go_in_one_go_from_a_guess) and shut the
 *     gate (L + 3, 2 waits, before);
 *   partitions of a row, twice (L, then L - 2);
 *   300 partitions of 60 rows, the int64s repeating, the strings random:
 *     frames but in the last buffer (the strings' bytes, raw), which say
 *     so as well (L, 1).
 * Every read's rows checked against the table written. */
static void raw_reads_in_one_go_launch_no_decoder(void) {
  decode_where = FUNNEL_DECODE_DEVICE;
  for (int run = 0; run < 4; run++) {
    int pinned;
    const struct iw_options *java = java_run(run, &pinned);
    struct funnel_device *dev = NULL;
    struct funnel_error err;
    if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
    struct table_src ones = table_random(&one_go_schema, 300, 300, 71);
    struct table_src repeating = table_random(&one_go_schema, 1 + 299 * 60, 0, 72);
    table_make_compressible(&repeating);
    /* the int64s repeating, the strings random */
    struct table_src half = table_random(&one_go_schema, 300 * 60, 0, 73);
    for (int64_t r = 5; r < half.rows; r++)
      memcpy(half.cols[0].values + r * 8, half.cols[0].values + (r % 5) * 8, 8);
    static const struct {
      const char *what;
      int src; /* 0 ones, 1 repeating after a row, 2 repeating cut evenly, 3 half */
      int launches;     /* over L */
      int64_t waits;
    } STEPS[] = {{"partitions of a row, the device's first read", 0, 0, 0},
                 {"partitions of a row, again", 0, -2, 0},
                 {"a row, then frames: the one pass leaves them", 1, 2, 2},
                 {"a row, then frames, again", 1, 0, 0},
                 {"partitions of a row, after frames", 0, 0, 0},
                 {"partitions of a row, again after frames", 0, -2, 0},
                 {"frames from the first partition, after a raw read", 2, 0, 1},
                 {"partitions of a row, after frames once more", 0, 0, 0},
                 {"partitions of a row, again once more", 0, -2, 0},
                 {"frames but in the last buffer, after a raw read", 3, 0, 1}};
    int64_t launches = -1; /* L */
    int64_t zin0 = -1, zout0 = -1; /* the first read's bytes as given and as decoded */
    for (size_t k = 0; k < sizeof(STEPS) / sizeof(STEPS[0]); k++) {
      check_context("%s, %s, %s", write_codec == 1 ? "lz4" : "zstd", STEPS[k].what,
                    pinned ? "pinned" : "malloc'd");
      const struct table_src *src = STEPS[k].src == 0   ? &ones
                                    : STEPS[k].src == 3 ? &half
                                                        : &repeating;
      struct parts ps = STEPS[k].src == 1 ? row_then_cut(src, 300, java, pinned ? dev : NULL)
                                          : cut(src, 300, 1, java, 0, pinned ? dev : NULL);
      const int64_t whole = device_path_reads, decoded = decoded_on_device;
      last_decode_waits = last_launches = last_allocs = -1;
      read_and_check(dev, &ps, src, 300);
      CHECK_EQ_I64(device_path_reads - whole, 1);
      CHECK_EQ_I64(last_decode_waits, STEPS[k].waits);
      /* a row a partition: every buffer raw, no frame decoded */
      if (STEPS[k].src == 0) CHECK_EQ_I64(decoded_on_device - decoded, 0);
      else CHECK(decoded_on_device - decoded > 0);
      if (k == 0) launches = last_launches;
      CHECK_EQ_I64(last_launches, launches + STEPS[k].launches);
      if (k == 0) zin0 = last_zin, zout0 = last_zout;
      if (STEPS[k].launches == -2) {
        CHECK_EQ_I64(last_allocs, 1);
        /* the one pass counts the bytes as the first pass of two did (the
         * first step's, of the same partitions), its bytes as given as the
         * host path does (which counts the decoded ones otherwise) */
        CHECK_EQ_I64(last_zin, zin0);
        CHECK_EQ_I64(last_zout, zout0);
        parse_where = FUNNEL_PARSE_HOST;
        read_and_check(dev, &ps, src, 300);
        parse_where = FUNNEL_PARSE_AUTO;
        CHECK_EQ_I64(last_zin, zin0);
      }
      parts_free(&ps);
    }
    table_src_free(&ones);
    table_src_free(&repeating);
    table_src_free(&half);
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
    funnel_device_close(dev);
  }
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  write_codec = 0;
}

/* The device allocations of reads that guess they hold no frame (after a
 * read of partitions of a row), of random int64s, which writers store
 * raw: up to FUNNEL__ONE_BLOCK_MAX_BYTES of partitions, one (partitions,
 * tables and output); from there to FUNNEL__LZ4_ONE_GO_MAX_BYTES, two (the
 * partitions', then the tables and output together; a review: three, had
 * they been laid out as a plain read of that size); each in one pass, no
 * wait. LZ4 and ZSTD as Arrow Java writes them, pinned and malloc'd, the
 * device path forced (AUTO leaves ZSTD partitions of over 16 KiB to the
 * host). */
static void raw_reads_allocate_by_their_size(void) {
  decode_where = FUNNEL_DECODE_DEVICE;
  struct table_src ones = table_random(&one_go_schema, 100, 100, 61);
  static const struct {
    int64_t rows; /* of 100 partitions */
    int64_t allocs;
  } READS[] = {{2000, 1}, {3500, 2}};
  for (int run = 0; run < 4; run++) {
    int pinned;
    const struct iw_options *java = java_run(run, &pinned);
    struct funnel_device *dev = NULL;
    struct funnel_error err;
    if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
    for (size_t r = 0; r < sizeof(READS) / sizeof(READS[0]); r++) {
      check_context("%s, %lld rows a partition, %s", write_codec == 1 ? "lz4" : "zstd",
                    (long long)READS[r].rows, pinned ? "pinned" : "malloc'd");
      struct parts raw = cut(&ones, 100, 1, java, 0, pinned ? dev : NULL);
      read_and_check(dev, &raw, &ones, 100); /* the guess: no frame */
      struct table_src big = table_random(&wide_schema, 100 * READS[r].rows, 0, 62);
      struct parts ps = cut(&big, 100, 1, java, 0, pinned ? dev : NULL);
      int64_t bytes = 0;
      for (int i = 0; i < ps.n; i++) bytes += (int64_t)ps.p[i].length;
      CHECK((bytes > ((int64_t)2 << 20)) == (READS[r].allocs == 2));
      CHECK(bytes < ((int64_t)4 << 20));
      const int64_t whole = device_path_reads, decoded = decoded_on_device;
      last_decode_waits = last_allocs = -1;
      parse_where = FUNNEL_PARSE_DEVICE;
      read_and_check(dev, &ps, &big, 100);
      parse_where = FUNNEL_PARSE_AUTO;
      CHECK_EQ_I64(device_path_reads - whole, 1);
      CHECK_EQ_I64(decoded_on_device - decoded, 0); /* every buffer raw */
      CHECK_EQ_I64(last_decode_waits, 0);
      CHECK_EQ_I64(last_allocs, READS[r].allocs);
      parts_free(&ps);
      parts_free(&raw);
      table_src_free(&big);
    }
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
    funnel_device_close(dev);
  }
  table_src_free(&ones);
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  write_codec = 0;
}

/* ps's partitions moved into one block of the device's pinned pool, back
 * to back at 8-byte boundaries (freed with funnel_device_pinned_free of
 * *size bytes); ps's own memory freed. */
static void *pack_pinned(struct funnel_device *dev, struct parts *ps, size_t *size) {
  *size = 0;
  for (int i = 0; i < ps->n; i++) *size += (ps->p[i].length + 7) / 8 * 8;
  void *block = NULL;
  struct funnel_error err;
  if (!CHECK_OK(funnel_device_pinned_alloc(dev, *size, &block, &err), &err)) abort();
  size_t at = 0;
  for (int i = 0; i < ps->n; i++) {
    const size_t len = ps->p[i].length;
    if (len > 0) memcpy((uint8_t *)block + at, ps->p[i].data, len);
    free((void *)ps->p[i].data);
    ps->p[i].data = len > 0 ? (uint8_t *)block + at : NULL;
    at += (len + 7) / 8 * 8;
  }
  ps->pinned_by = NULL;
  return block;
}

/* The writings of the reads that decode while copied: LZ4 as Arrow Java
 * and as the funnel shuffle write it, and ZSTD. */
static const struct writing ZWRITINGS[] = {
    {"lz4 as Arrow Java", {.compression = 1, .lz4_style = IW_LZ4_JAVA, .raw_fallback = 1,
                           .empty_prefix = 1}},
    {"lz4 as the funnel shuffle", {.compression = 1, .lz4_style = IW_LZ4_SPARK}},
    {"zstd", {.compression = 2, .raw_fallback = 1, .empty_prefix = 1, .zstd_level = 3}},
};

/* A read of compressed bodies of 8 MiB and more (FUNNEL_ZOVERLAP_MIN_BYTES,
 * here set to 1) whose partitions lie back to back in the pinned pool is
 * copied, unpacked and decoded in parts (dread.c), each part's jobs
 * decoded once it is unpacked, into room guessed before the first pass.
 * On one device, for LZ4 as Arrow Java and as the funnel shuffle writes
 * it and for ZSTD, each read's rows checked against the table written,
 * and its launches counted (P parts: the first pass's and the decoder's
 * of each part, the second pass's parse and the concat, 2P + 2; a decoder
 * again after the wait, 2P + 3; no room, P + 3):
 *   random values, the device's first read: the guess of twice the bytes
 *     holds (2P + 2);
 *   repeating values after random ones: they decode to more than the
 *     room guessed from the random read: decoded again (2P + 3);
 *   repeating values again: the room holds (2P + 2);
 *   partition 5 broken (a frame declares a byte more than it decodes to):
 *     the host path's error, naming partition 5;
 *   repeating values after the broken read (2P + 2);
 *   zeros after zeros: a guess of over 4 times the bytes makes no room
 *     (P + 3).
 * Every read in 4 parts (the default), waiting once for its first pass;
 * then LZ4 in 2 and in 8 parts (FUNNEL_ZOVERLAP_PARTS). */
static void compressed_reads_decode_while_copied(void) {
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
      {.type = FUNNEL_TYPE_INT32, .name = "i", .nullable = 0}};
  static const struct iw_schema schema = {3, fields, 0};
  /* (writing, parts): each writing in the default 4 parts, then 2 and 8 */
  static const int RUNS[][2] = {{0, 4}, {1, 4}, {2, 4}, {0, 2}, {1, 8}};
  decode_where = FUNNEL_DECODE_DEVICE;
  parse_where = FUNNEL_PARSE_DEVICE;
  for (size_t run = 0; run < sizeof(RUNS) / sizeof(RUNS[0]); run++) {
    const int w = RUNS[run][0], parts = RUNS[run][1];
    write_codec = ZWRITINGS[w].o.compression;
    struct funnel_device *dev = NULL;
    struct funnel_error err;
    char parts_env[8];
    snprintf(parts_env, sizeof(parts_env), "%d", parts);
    setenv("FUNNEL_ZOVERLAP_MIN_BYTES", "1", 1);
    if (parts != 4) setenv("FUNNEL_ZOVERLAP_PARTS", parts_env, 1);
    const int opened = CHECK_OK(check_device_open(&dev, &err), &err);
    unsetenv("FUNNEL_ZOVERLAP_MIN_BYTES");
    unsetenv("FUNNEL_ZOVERLAP_PARTS");
    if (!opened) break;
    struct table_src random = table_random(&schema, 300 * 20, 100, 191);
    struct table_src repeating = table_random(&schema, 300 * 60, 0, 192);
    table_make_compressible(&repeating);
    struct table_src zeros = table_random(&wide_schema, 300 * 400, 0, 194);
    memset(zeros.cols[0].values, 0, (size_t)zeros.rows * 8);
    static const struct {
      const char *what;
      int src; /* 0 random, 1 repeating, 2 zeros */
      int broken;
      int decoded; /* 1: while copied; 2: again after the wait; 3: only after it; 0: any */
    } STEPS[] = {{"random values, the device's first read", 0, 0, 1},
                 {"repeating values, after random ones", 1, 0, 2},
                 {"repeating values, again", 1, 0, 1},
                 {"repeating values, partition 5 broken", 1, 1, 0},
                 {"repeating values, after the broken read", 1, 0, 1},
                 {"zeros", 2, 0, 0},
                 {"zeros, again", 2, 0, 3}};
    for (size_t k = 0; k < sizeof(STEPS) / sizeof(STEPS[0]); k++) {
      check_context("%s, %d parts, %s", ZWRITINGS[w].name, parts, STEPS[k].what);
      const struct table_src *src = STEPS[k].src == 0   ? &random
                                    : STEPS[k].src == 1 ? &repeating
                                                        : &zeros;
      struct parts ps = cut(src, 300, 1, &ZWRITINGS[w].o, 0, NULL);
      if (STEPS[k].broken) break_partition_5(&ps);
      size_t size;
      void *block = pack_pinned(dev, &ps, &size);
      if (STEPS[k].broken) {
        struct funnel_reader *rd = NULL;
        struct funnel_table *tb = NULL;
        if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
          CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, decode_where, &err), &err);
          CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse_where, &err), &err);
          const int st = funnel_reader_read_async(rd, ps.p, (size_t)ps.n, 0, &tb, &err);
          if (CHECK_STATUS(st, FUNNEL_ERR_MALFORMED, &err)) {
            CHECK_EQ_I64(err.partition, 5);
            CHECK_EQ_I64(err.column, 0);
            if (strstr(err.message, "not the") == NULL)
              check_fail(__FILE__, __LINE__, "message \"%s\" does not say \"not the\"",
                         err.message);
          }
          if (st == FUNNEL_OK) funnel_table_free(tb);
          funnel_reader_free(rd);
        }
      } else {
        const int64_t whole = device_path_reads;
        last_decode_waits = last_overlap_parts = last_launches = -1;
        read_and_check(dev, &ps, src, 300);
        CHECK_EQ_I64(device_path_reads - whole, 1);
        const int64_t d = STEPS[k].decoded;
        CHECK_EQ_I64(last_overlap_parts, parts);
        CHECK_EQ_I64(last_streams, 1 + parts); /* a new reader's: its second, one a part */
        CHECK_EQ_I64(last_decode_waits, 1);
        if (d > 0) CHECK_EQ_I64(last_launches, d == 3 ? parts + 3 : 2 * parts + 2 + (d == 2));
      }
      funnel_device_pinned_free(dev, block, size, NULL);
      free(ps.p);
    }
    /* a read decoded while copied whose reader is freed before its table
     * is waited for: the read's stream still holds its second pass and
     * concat (the parts' streams, joined into it, are done when the read
     * returns), and the table reads right; the reader's streams go with
     * it. After a read of repeating values, so that the room guessed holds
     * (the zeros before would leave none: decoded after the wait). */
    {
      check_context("%s, %d parts, the reader freed before the wait", ZWRITINGS[w].name, parts);
      struct parts ps = cut(&repeating, 300, 1, &ZWRITINGS[w].o, 0, NULL);
      size_t size;
      void *block = pack_pinned(dev, &ps, &size);
      read_and_check(dev, &ps, &repeating, 300); /* the guess learns the values' ratio */
      struct funnel_reader *rd = NULL;
      struct funnel_table *tb = NULL;
      const int64_t streams0 = funnel__live_now().streams;
      if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
        CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, decode_where, &err), &err);
        CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse_where, &err), &err);
        const int st = funnel_reader_read_async(rd, ps.p, (size_t)ps.n, 0, &tb, &err);
        funnel_reader_free(rd);
        CHECK_EQ_I64(funnel__live_now().streams, streams0);
        if (CHECK_OK(st, &err)) {
          struct funnel_read_stats s;
          if (CHECK_OK(funnel_table_stats(tb, &s, &err), &err)) {
            CHECK_EQ_I64(s.overlap_parts, parts);
            CHECK_EQ_I64(s.concat_launches, 2 * parts + 2); /* decoded while copied */
          }
          table_check_read(tb, &repeating);
          funnel_table_free(tb);
        }
      }
      funnel_device_pinned_free(dev, block, size, NULL);
      free(ps.p);
    }
    /* reads that decode in fewer parts, or none, and whose readers make
     * as many streams (the parse's and one a part) or none: the same
     * partitions where they were written, apart (never copied in parts);
     * pinned but copied DIRECT (no early copies); and reads of few
     * partitions, whose parts begin at multiples of the parse's tile (8
     * partitions here): 12 make 2 parts of 4 or 8 asked, none of 2; 6
     * none. Each is read by the device path. (Readers made every stream
     * they could have used, and kept them until they were freed: a JUnit
     * test on cuda counted them.) */
    static const struct {
      const char *what;
      int n, pinned, direct, parts[9]; /* the parts by those asked */
    } FEW[] = {{"repeating values where they were written", 300, 0, 0, {0}},
               {"repeating values, pinned, copied DIRECT", 300, 1, 1, {0}},
               {"12 partitions", 12, 1, 0, {[2] = 0, [4] = 2, [8] = 2}},
               {"6 partitions", 6, 1, 0, {0}}};
    for (size_t k = 0; k < sizeof(FEW) / sizeof(FEW[0]); k++) {
      check_context("%s, %d parts, %s", ZWRITINGS[w].name, parts, FEW[k].what);
      struct parts ps = cut(&repeating, FEW[k].n, 1, &ZWRITINGS[w].o, 0, NULL);
      size_t size = 0;
      void *block = FEW[k].pinned ? pack_pinned(dev, &ps, &size) : NULL;
      transfer_where = FEW[k].direct ? FUNNEL_TRANSFER_DIRECT : FUNNEL_TRANSFER_AUTO;
      const int64_t whole = device_path_reads;
      last_overlap_parts = last_streams = -1;
      read_and_check(dev, &ps, &repeating, FEW[k].n);
      transfer_where = FUNNEL_TRANSFER_AUTO;
      const int want = FEW[k].parts[parts];
      CHECK_EQ_I64(device_path_reads - whole, 1);
      CHECK_EQ_I64(last_overlap_parts, want);
      CHECK_EQ_I64(last_streams, want > 0 ? 1 + want : 0);
      if (block != NULL) {
        funnel_device_pinned_free(dev, block, size, NULL);
        free(ps.p);
      } else {
        parts_free(&ps);
      }
    }
    table_src_free(&random);
    table_src_free(&repeating);
    table_src_free(&zeros);
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
    funnel_device_close(dev);
  }
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  parse_where = FUNNEL_PARSE_AUTO;
  write_codec = 0;
}

/* AUTO reads LZ4 bodies of partitions larger than the device path's
 * FUNNEL__DPATH_MAX_AVG by the device path when it decodes them while they
 * are copied (back to back in the pinned pool, 8 MiB and more: the
 * defaults) or stages them (all of them outside the pool, which can hold
 * them, or will when it is made), unless the read has fewer than
 * FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS partitions whose frames the host path
 * splits into blocks (lz4-java's, as the funnel shuffle writes them); by
 * the host path otherwise; ZSTD bodies by the host path either way; and
 * with FUNNEL_LZ4_LARGE_DEVICE=0, all by the host path. `parts` partitions
 * of `rows` int64 values each, half of their bytes random: 48 of 60,000
 * are about 375 KB a partition compressed, 18 MB in all. Each setting
 * opens a device that stages pageable bytes (FUNNEL_STAGE_PAGEABLE=1: the
 * cpu backend does not by default); the second reads the pageable
 * partitions first, before the pool is made; the last one's pool (12
 * MiB, made before the reads) cannot hold the staged read (nor the
 * pinned one, not read there). A staged read makes no stream. With
 * `lead`, a read of the same partitions after one of no rows, which
 * holds no frame (the frames of the next say what the host path would
 * split), pageable, once. (The cpu backend leaves AUTO's decoding to the
 * host: here the device decodes, as FUNNEL_DECODE_DEVICE says, so
 * funnel__device_pays, which AUTO's decoding asks on a GPU, is not.) */
static void large_lz4_read(int parts, int64_t rows, size_t n_settings, bool lead) {
  static const struct {
    const char *name, *large, *pool;
    bool pageable_first;
  } settings[] = {
      {"the defaults", NULL, NULL, false},
      {"the defaults, pageable first", NULL, NULL, true},
      {"FUNNEL_LZ4_LARGE_DEVICE=0", "0", NULL, false},
      {"a pool of 12 MiB", NULL, "12582912", false},
  };
  struct table_src src = table_random(&wide_schema, parts * rows, 0, 195);
  for (int64_t r = 0; r < src.rows; r++) memset(src.cols[0].values + 8 * r + 4, 0, 4);
  decode_where = FUNNEL_DECODE_DEVICE;
  for (size_t k = 0; k < n_settings; k++) {
    struct funnel_device *dev = NULL;
    struct funnel_error err;
    const bool large = settings[k].large == NULL, roomy = settings[k].pool == NULL;
    if (!large) setenv("FUNNEL_LZ4_LARGE_DEVICE", settings[k].large, 1);
    if (!roomy) setenv("FUNNEL_PINNED_POOL_BYTES", settings[k].pool, 1);
    setenv("FUNNEL_STAGE_PAGEABLE", "1", 1);
    const int opened = CHECK_OK(check_device_open(&dev, &err), &err);
    unsetenv("FUNNEL_LZ4_LARGE_DEVICE");
    unsetenv("FUNNEL_PINNED_POOL_BYTES");
    unsetenv("FUNNEL_STAGE_PAGEABLE");
    if (!opened) break;
    pool_small = !roomy;
    if (!roomy) { /* the pool made */
      void *made = NULL;
      if (CHECK_OK(funnel_device_pinned_alloc(dev, 64, &made, &err), &err))
        funnel_device_pinned_free(dev, made, 64, NULL);
    }
    for (size_t w = 0; w < sizeof(ZWRITINGS) / sizeof(ZWRITINGS[0]); w++) {
      write_codec = ZWRITINGS[w].o.compression;
      const bool lz4 = ZWRITINGS[w].o.compression == 1;
      const bool split = ZWRITINGS[w].o.lz4_style == IW_LZ4_SPARK; /* 64 KiB blocks */
      for (int i = 0; i < 2 + (lead && k == 0); i++) {
        const bool led = i == 2; /* the read after a partition of no rows */
        const bool pinned = !led && (settings[k].pageable_first ? i == 1 : i == 0);
        if (pinned && !roomy) continue;
        char what[200];
        snprintf(what, sizeof(what), "%d partitions, %s, %s, %s%s", parts, ZWRITINGS[w].name,
                 pinned ? "back to back, pinned" : "pageable", settings[k].name,
                 led ? ", after one of no rows" : "");
        check_context("%s", what);
        struct parts ps = cut(&src, parts, 1, &ZWRITINGS[w].o, 0, NULL);
        int64_t bytes = 0;
        for (int q = 0; q < ps.n; q++) bytes += (int64_t)ps.p[q].length;
        CHECK(bytes > (int64_t)parts * (lz4 ? FUNNEL__DPATH_MAX_AVG : FUNNEL__DPATH_MAX_AVG_ZSTD));
        CHECK(bytes >= FUNNEL__ZOVERLAP_MIN_BYTES);
        if (lz4 && !roomy) CHECK(bytes > ((int64_t)12 << 20)); /* more than the small pool */
        if (led) { /* (its bytes keep the read large: 48 x 256 KiB are under 18 MB) */
          struct iw_buf none = partition_of(&src, 0, 0, 1, &ZWRITINGS[w].o);
          struct funnel_partition *p = calloc((size_t)ps.n + 1, sizeof(*p));
          p[0] = (struct funnel_partition){iw_dup(none.data, none.len), none.len};
          memcpy(p + 1, ps.p, (size_t)ps.n * sizeof(*p));
          iw_buf_free(&none);
          free(ps.p);
          ps.p = p;
          ps.n++;
        }
        size_t size = 0;
        void *block = pinned ? pack_pinned(dev, &ps, &size) : NULL;
        const int64_t whole = device_path_reads;
        const int64_t decoded0 = decoded_on_device;
        last_overlap_parts = last_decode_waits = last_streams = last_staged = -1;
        read_and_check(dev, &ps, &src, ps.n);
        check_context("%s", what); /* (read_and_check's own cleared) */
        const bool on_device = large && lz4 && (pinned || roomy) &&
                               (!split || parts >= FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS);
        CHECK_EQ_I64(device_path_reads - whole, on_device);
        CHECK_EQ_I64(last_overlap_parts, on_device && pinned ? FUNNEL__ZOVERLAP_PARTS : 0);
        if (on_device) { /* decoded on the device, with one wait */
          CHECK(decoded_on_device > decoded0);
          CHECK_EQ_I64(last_decode_waits, 1);
        }
        if (on_device && !pinned) { /* staged, every partition, and no stream made */
          CHECK_EQ_I64(last_staged, ps.n);
          CHECK_EQ_I64(last_streams, 0);
        }
        if (block != NULL) {
          funnel_device_pinned_free(dev, block, size, NULL);
          free(ps.p);
        } else {
          parts_free(&ps);
        }
      }
    }
    check_context("%s", "");
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
    funnel_device_close(dev);
  }
  table_src_free(&src);
  pool_small = false;
  decode_where = FUNNEL_DECODE_AUTO;
  write_codec = 0;
}

static void large_lz4_partitions_decode_while_copied(void) { large_lz4_read(48, 60000, 4, true); }

/* ... and of FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS of 45,000, about 280 KB
 * each compressed (36 MB in all), the defaults only: lz4-java's frames too */
static void many_large_lz4_partitions_decode_while_copied(void) {
  large_lz4_read(FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS, 45000, 1, false);
}

/* Compressed and uncompressed partitions in one read, the first of them
 * either; in pinned memory (a first uncompressed one sends them all up
 * before parsing, which a compressed one then undoes) and pageable. */
static void compressed_and_plain_partitions_mixed(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  /* pageable, pinned, and pinned read in place (FUNNEL_TRANSFER_DIRECT: a
   * review found the device path's allocation freed twice when it left
   * the compressed partitions of such a read, whose first is plain, to the
   * host) */
  for (int run = 0; run < 3; run++)
    for (int every = 2; every <= 3; every++)
      for (int n = 5; n <= 400; n *= 8) {
        const int pinned = run > 0;
        transfer_where = run == 2 ? FUNNEL_TRANSFER_DIRECT : FUNNEL_TRANSFER_AUTO;
        decode_where = every == 3 ? FUNNEL_DECODE_DEVICE : FUNNEL_DECODE_HOST;
        check_context("%s, every %dth plain, %d partitions, decoded on the %s",
                      run == 2 ? "pinned, read in place" : pinned ? "pinned" : "pageable", every,
                      n, every == 3 ? "device" : "host");
        struct table_src src = table_random(&every_schema, (int64_t)n * 11, 100, (uint64_t)n + every);
        table_make_compressible(&src);
        struct parts ps = cut(&src, n, 1, &WRITINGS[(n + every) % N_WRITINGS].o, every,
                              pinned ? dev : NULL);
        /* partition i is plain when i % every == 0: the first one is */
        const struct funnel__live live0 = funnel__live_now();
        read_and_check(dev, &ps, &src, n - (n + every - 1) / every);
        CHECK_EQ_I64(funnel__live_now().allocs, live0.allocs);
        parts_free(&ps);
        table_src_free(&src);
      }
  transfer_where = FUNNEL_TRANSFER_AUTO;
  decode_where = FUNNEL_DECODE_AUTO;
  check_context("%s", "");
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* LZ4 and ZSTD partitions in one read, in turn (as writers of both might
 * leave them), decoded on the host and on the device: one decoder launch
 * takes both codecs' jobs (CHECK_READ_INVARIANTS counts one). */
static void lz4_and_zstd_partitions_in_one_read(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  for (int round = 0; round < 4; round++) {
    const int n = round < 2 ? 6 : 40; /* (fewer than the device path takes) */
    decode_where = round % 2 == 0 ? FUNNEL_DECODE_HOST : FUNNEL_DECODE_DEVICE;
    check_context("%d partitions, decoded on the %s", n, round % 2 == 0 ? "host" : "device");
    struct table_src src = table_random(&every_schema, (int64_t)n * 40, 100, 500 + (uint64_t)round);
    table_make_compressible(&src);
    struct parts lz4 = cut(&src, n, 1, &WRITINGS[3].o, 0, NULL);
    struct parts zstd = cut(&src, n, 1, &WRITINGS[5].o, 0, NULL);
    /* (neither writing leaves a buffer raw: both have the same frames) */
    write_codec = 1; /* (a device path's attempt, then the host path) */
    const int64_t before_lz4 = decoded_on_device;
    read_and_check(dev, &lz4, &src, n);
    const int64_t lz4_alone = decoded_on_device - before_lz4;
    /* the odd partitions ZSTD's: the same rows either way */
    for (int i = 1; i < n; i += 2) {
      const struct funnel_partition keep = lz4.p[i];
      lz4.p[i] = zstd.p[i];
      zstd.p[i] = keep;
    }
    const int64_t before = decoded_on_device;
    read_and_check(dev, &lz4, &src, n);
    /* on the device, as many buffers as when they were all LZ4 */
    if (decode_where == FUNNEL_DECODE_DEVICE) {
      CHECK(lz4_alone > 0);
      CHECK_EQ_I64(decoded_on_device - before, lz4_alone);
    }
    write_codec = 0;
    parts_free(&lz4);
    parts_free(&zstd);
    table_src_free(&src);
  }
  decode_where = FUNNEL_DECODE_AUTO;
  check_context("%s", "");
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* One partition of a few MiB, decoded a few buffers at a time on the host
 * threads, next to small ones. */
static void large_compressed_partition(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  for (int w = 0; w < N_WRITINGS; w++) {
    decode_where = w % 2 ? FUNNEL_DECODE_DEVICE : FUNNEL_DECODE_HOST;
    check_context("%s, decoded on the %s", WRITINGS[w].name, w % 2 ? "device" : "host");
    struct table_src src = table_random(&every_schema, 60000, 50, 77 + (uint64_t)w);
    table_make_compressible(&src);
    struct parts ps = {calloc(3, sizeof(struct funnel_partition)), 3, NULL};
    const int64_t cuts[4] = {0, 10, 59990, 60000};
    for (int i = 0; i < 3; i++) {
      struct iw_buf b = partition_of(&src, cuts[i], cuts[i + 1], i == 1 ? 2 : 1, &WRITINGS[w].o);
      ps.p[i] = (struct funnel_partition){iw_dup(b.data, b.len), b.len};
      iw_buf_free(&b);
    }
    read_and_check(dev, &ps, &src, 3);
    parts_free(&ps);
    table_src_free(&src);
  }
  decode_where = FUNNEL_DECODE_AUTO;
  check_context("%s", "");
  funnel_device_close(dev);
}

/* Partitions of compressed batches that hold no bytes: 0-row batches
 * (Arrow Java writes each buffer as an 8-byte 0 prefix, Arrow C++ leaves
 * it empty), alone and beside partitions with rows. */
static const struct iw_field FIXED_FIELDS[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
    {.type = FUNNEL_TYPE_FLOAT64, .name = "b", .nullable = 0},
};
static const struct iw_schema FIXED_SCHEMA = {2, FIXED_FIELDS, 0};

static void compressed_batches_without_bytes(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  for (int w = 0; w < 2 * N_WRITINGS; w++) {
    /* fixed-width columns: 0 rows are 0 bytes; then every type (a string
     * column's 0 rows are one offset) */
    const struct iw_schema *schema = w < N_WRITINGS ? &FIXED_SCHEMA : &every_schema;
    check_context("%s, %s", WRITINGS[w % N_WRITINGS].name, w < N_WRITINGS ? "fixed" : "every type");
    struct table_src src = table_random(schema, 30, 100, 3 + (uint64_t)w);
    struct parts ps = {calloc(3, sizeof(struct funnel_partition)), 3, NULL};
    for (int i = 0; i < 3; i++) {
      /* partitions 0 and 2: two 0-row batches; 1: every row */
      struct iw_buf b = i == 1 ? partition_of(&src, 0, 30, 1, &WRITINGS[w % N_WRITINGS].o)
                               : partition_of(&src, 0, 0, 2, &WRITINGS[w % N_WRITINGS].o);
      ps.p[i] = (struct funnel_partition){iw_dup(b.data, b.len), b.len};
      iw_buf_free(&b);
    }
    read_and_check(dev, &ps, &src, 3);
    struct parts alone = {ps.p, 1, NULL}; /* partition 0 alone: no rows */
    struct table_src none = src;
    none.rows = 0;
    read_and_check(dev, &alone, &none, 1);
    parts_free(&ps);
    table_src_free(&src);
  }
  check_context("%s", "");
  funnel_device_close(dev);
}

/* ----------------------------------------------------------------- errors */

static const struct iw_field BAD_FIELDS[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
};
static const struct iw_schema BAD_SCHEMA = {2, BAD_FIELDS, 0};

/* Eight partitions of BAD_SCHEMA, compressed with `codec`; partition 5's
 * batch layout in *l (its bytes are ps.p[5], a copy the caller may spoil). */
static struct parts eight(int codec, struct table_src *src, struct iw_layout *l) {
  *src = table_random(&BAD_SCHEMA, 800, 100, 5);
  table_make_compressible(src);
  struct iw_options o = {.compression = codec, .empty_prefix = 1};
  struct parts ps = {calloc(8, sizeof(struct funnel_partition)), 8, NULL};
  for (int i = 0; i < 8; i++) {
    struct iw_buf b = {0};
    iw_schema_message(&b, src->schema, &o, NULL);
    struct iw_encode e = {.layout = i == 5 ? l : NULL};
    iw_batch_from_cols(&b, src->schema, src->cols, 100 * i, 100 * (i + 1), &e, &o);
    iw_eos(&b, &o);
    ps.p[i] = (struct funnel_partition){iw_dup(b.data, b.len), b.len};
    iw_buf_free(&b);
  }
  return ps;
}

/* Buffer k's {offset within the body, length} in the batch at `l`. */
static void buffer_at(const uint8_t *bytes, const struct iw_layout *l, int k, int64_t *off,
                      int64_t *len) {
  memcpy(off, bytes + l->buffers + 16 * k, 8);
  memcpy(len, bytes + l->buffers + 16 * k + 8, 8);
}

/* Reads the eight partitions; the read must fail with `code` at partition
 * 5, column `column`, byte `offset` (-1: any), its message holding `says`. */
static void expect_failure(struct funnel_device *dev, struct parts *ps, int code, int column,
                           int64_t offset, const char *says) {
  struct funnel_reader *rd = NULL;
  struct funnel_table *tb = NULL;
  struct funnel_error err;
  if (!CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) return;
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, decode_where, &err), &err);
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, parse_where, &err), &err);
  const int st = funnel_reader_read_async(rd, ps->p, (size_t)ps->n, 0, &tb, &err);
  if (CHECK_STATUS(st, code, &err)) {
    CHECK_EQ_I64(err.partition, 5);
    CHECK_EQ_I64(err.column, column);
    if (offset >= 0 && !CHECK_EQ_I64(err.offset, offset)) printf("  %s\n", err.message);
    if (strstr(err.message, says) == NULL)
      check_fail(__FILE__, __LINE__, "message \"%s\" does not say \"%s\"", err.message, says);
  }
  if (st == FUNNEL_OK) funnel_table_free(tb);
  funnel_reader_free(rd);
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0); /* the images went with the read */
}

/* Each decoded on the host, then with the device decoding the values (a
 * frame it fails on is decoded again on the host, which names it), then
 * by the device path (LZ4 bodies unpacked and decoded there; a partition
 * it cannot take goes to the host path, which names what is wrong). */
static void bad_compressed_buffers_name_their_place(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  for (int round = 0; round < 6; round++) {
    const int codec = 1 + round % 2;
    decode_where = round < 2 ? FUNNEL_DECODE_HOST : FUNNEL_DECODE_DEVICE;
    parse_where = round < 4 ? FUNNEL_PARSE_AUTO : FUNNEL_PARSE_DEVICE;
    struct table_src src;
    struct iw_layout l;
    struct parts ps = eight(codec, &src, &l);
    uint8_t *p5 = (uint8_t *)ps.p[5].data;
    const uint8_t *keep = iw_dup(p5, ps.p[5].length);
    /* buffers: a validity, a data; s validity, offsets, data (4) */
    int64_t off, len;
    buffer_at(p5, &l, 4, &off, &len);
    const int64_t at = (int64_t)l.body + off; /* the buffer's offset in the partition */
    int64_t declared;
    memcpy(&declared, p5 + at, 8);
    CHECK(declared > 0 && len > 16);

    check_context("codec %d: a frame's byte flipped", codec);
    p5[at + 8 + len / 2 - 4] ^= 0x5a;
    p5[at + 8 + (len - 8) - 3] ^= 0xff; /* near the end: a checksum or the last block */
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, codec == 1 ? "LZ4" : "ZSTD");
    memcpy(p5, keep, ps.p[5].length);

    check_context("codec %d: one byte more declared", codec);
    int64_t v = declared + 1;
    memcpy(p5 + at, &v, 8);
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, "declared");
    check_context("codec %d: one byte fewer declared", codec);
    v = declared - 1;
    memcpy(p5 + at, &v, 8);
    if (decode_where == FUNNEL_DECODE_DEVICE) /* the plan's check comes first: the string
                                                 bytes are short */
      expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, -1, "data buffer has");
    else
      expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, codec == 1 ? "LZ4" : "ZSTD");

    check_context("codec %d: a decompression bomb", codec);
    v = (int64_t)1 << 60;
    memcpy(p5 + at, &v, 8);
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, "than the codec can expand");
    v = INT64_MAX; /* no sum of what the parse counts may take it (the fuzz harness's UBSan) */
    memcpy(p5 + at, &v, 8);
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, "than the codec can expand");
    v = 40000 * (len - 8) + 5000; /* past either codec's ratio, and small enough to allocate */
    memcpy(p5 + at, &v, 8);
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, "than the codec can expand");
    check_context("codec %d: a negative length", codec);
    v = -2;
    memcpy(p5 + at, &v, 8);
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, "negative");
    memcpy(p5, keep, ps.p[5].length);

    check_context("codec %d: the frame cut short", codec);
    int64_t shorter = len - 9;
    memcpy(p5 + l.buffers + 16 * 4 + 8, &shorter, 8);
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, codec == 1 ? "LZ4" : "ZSTD");
    check_context("codec %d: a buffer too short for its length", codec);
    shorter = 5;
    memcpy(p5 + l.buffers + 16 * 4 + 8, &shorter, 8);
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, at, "8-byte uncompressed length");
    memcpy(p5, keep, ps.p[5].length);

    check_context("codec %d: an unknown codec", codec);
    CHECK(l.codec_field > 0);
    p5[l.codec_field] = 7;
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, -1, (int64_t)l.message, "codec 7");
    memcpy(p5, keep, ps.p[5].length);
    check_context("codec %d: an unknown method", codec);
    p5[l.method_field] = 1;
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, -1, (int64_t)l.message, "method 1");
    memcpy(p5, keep, ps.p[5].length);

    check_context("codec %d: as written", codec);
    const int64_t whole = device_path_reads;
    write_codec = codec;
    read_and_check(dev, &ps, &src, 8);
    write_codec = 0;
    /* the device path read the partitions as written */
    CHECK_EQ_I64(device_path_reads - whole, parse_where == FUNNEL_PARSE_DEVICE);
    free((void *)keep);
    parts_free(&ps);
    table_src_free(&src);
  }
  decode_where = FUNNEL_DECODE_AUTO;
  parse_where = FUNNEL_PARSE_AUTO;
  check_context("%s", "");
  funnel_device_close(dev);
}

/* A compressed batch that decodes well to bad values (string offsets that
 * fall): the plan's error names the compressed buffer's offset in the
 * partition as given, not one in the decoded image. */
/* A frame that fails part way leaves nothing behind for the next read:
 * liblz4 1.9.4's context reset keeps a failed frame's remaining content
 * size, and a context pooled after one failed the next frame without a
 * content size ("ERROR_frameSize_wrong"), a good one (the fuzz harness,
 * in CI, on partitions that read alone). A frame with its content size,
 * corrupt in a block, then Arrow Java's frames, a few times over. */
static void lz4_frame_after_a_failed_one_reads_as_new(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  decode_where = FUNNEL_DECODE_HOST;
  parse_where = FUNNEL_PARSE_HOST;
  write_codec = 1;
  struct table_src src = table_random(&BAD_SCHEMA, 800, 100, 5);
  table_make_compressible(&src);
  static const struct iw_options java = {.compression = 1, .lz4_style = IW_LZ4_JAVA};
  struct parts good = cut(&src, 8, 1, &java, 0, NULL);
  for (int round = 0; round < 3; round++) {
    struct table_src bad_src;
    struct iw_layout l;
    struct parts bad = eight(1, &bad_src, &l);
    /* partition 5 again, its frames with their content size */
    const struct iw_options sized = {.compression = 1, .lz4_style = IW_LZ4_SIZED, .empty_prefix = 1};
    struct iw_buf b = {0};
    iw_schema_message(&b, bad_src.schema, &sized, NULL);
    struct iw_encode e = {.layout = &l};
    iw_batch_from_cols(&b, bad_src.schema, bad_src.cols, 500, 600, &e, &sized);
    iw_eos(&b, &sized);
    free((void *)bad.p[5].data);
    bad.p[5] = (struct funnel_partition){iw_dup(b.data, b.len), b.len};
    iw_buf_free(&b);
    uint8_t *p5 = (uint8_t *)bad.p[5].data;
    int64_t off, len;
    buffer_at(p5, &l, 4, &off, &len);
    const int64_t at = (int64_t)l.body + off;
    CHECK(len > 40);
    p5[at + 8 + len / 2] ^= 0x5a; /* in its block: the header went by */
    p5[at + 8 + len / 2 + 1] ^= 0xa5;
    check_context("round %d: the corrupt frame", round);
    expect_failure(dev, &bad, FUNNEL_ERR_MALFORMED, 1, at, "LZ4");
    check_context("round %d: Arrow Java's frames after it", round);
    read_and_check(dev, &good, &src, 8);
    parts_free(&bad);
    table_src_free(&bad_src);
  }
  check_context("%s", "");
  parts_free(&good);
  table_src_free(&src);
  write_codec = 0;
  decode_where = FUNNEL_DECODE_AUTO;
  parse_where = FUNNEL_PARSE_AUTO;
  funnel_device_close(dev);
}

static void bad_values_in_a_compressed_batch(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  for (int round = 0; round < 4; round++) {
    const int codec = 1 + round % 2;
    /* then by the device path, which leaves the partition to the host's */
    parse_where = round < 2 ? FUNNEL_PARSE_AUTO : FUNNEL_PARSE_DEVICE;
    decode_where = round < 2 ? FUNNEL_DECODE_AUTO : FUNNEL_DECODE_DEVICE;
    check_context("codec %d, parsed %s", codec, round < 2 ? "as AUTO chooses" : "on the device");
    struct table_src src;
    struct iw_layout l;
    struct parts ps = eight(codec, &src, &l);
    static const int64_t a[3] = {1, 2, 3};
    static const int32_t offs[4] = {0, 5, 2, 6};
    const struct iw_column cols[2] = {
        {.length = 3, .data = a, .data_length = 24},
        {.length = 3, .offsets = offs, .offsets_length = 16, .data = "abcdef", .data_length = 6}};
    const struct iw_options o = {.compression = codec};
    struct iw_buf b = {0};
    iw_schema_message(&b, &BAD_SCHEMA, &o, NULL);
    iw_batch_message(&b, &BAD_SCHEMA, 3, cols, &o, &l);
    iw_eos(&b, &o);
    free((void *)ps.p[5].data);
    ps.p[5] = (struct funnel_partition){iw_dup(b.data, b.len), b.len};
    int64_t off, len;
    buffer_at(b.data, &l, 3, &off, &len); /* s's offsets */
    expect_failure(dev, &ps, FUNNEL_ERR_MALFORMED, 1, (int64_t)l.body + off, "as decoded");
    iw_buf_free(&b);
    parts_free(&ps);
    table_src_free(&src);
  }
  parse_where = FUNNEL_PARSE_AUTO;
  decode_where = FUNNEL_DECODE_AUTO;
  check_context("%s", "");
  funnel_device_close(dev);
}

/* A read of more LZ4 buffers than the device holds warps of its decoder at
 * once (more than one wave of them), whose byte buffers are blocks of long
 * sequences (each string repeats the one before it but for a byte in 40):
 * the decoder takes those blocks one sequence after another (lz4dec.h,
 * funnel__lz4_serial; 3,843 of the 4,000 here), the offsets by rounds, and
 * decodes every buffer itself, none left to the host. */
static const struct iw_field LONG_FIELDS[] = {
    {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "s", .nullable = 0}};
static const struct iw_schema LONG_SCHEMA = {1, LONG_FIELDS, 0};

static void many_blocks_of_long_sequences_decode_on_the_device(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  /* 4,000 partitions of 30 rows of 100 bytes: 8,000 buffers (offsets,
   * bytes), each block of bytes about 75 sequences of 40 */
  const int n = 4000, width = 100;
  const int64_t rows = (int64_t)n * 30;
  struct iw_col *c = calloc(1, sizeof(*c));
  c->field = LONG_FIELDS[0];
  c->rows = rows;
  c->valid = malloc((size_t)rows);
  memset(c->valid, 1, (size_t)rows);
  c->ends = malloc((size_t)rows * sizeof(int64_t));
  c->chars = malloc((size_t)(rows * width));
  uint64_t rng = 5;
  for (int64_t r = 0; r < rows; r++) c->ends[r] = (r + 1) * width;
  for (int64_t k = 0; k < rows * width; k++)
    c->chars[k] = k < width || check_rand_below(&rng, 40) == 0 ? (uint8_t)check_rand(&rng)
                                                                : c->chars[k - width + 3];
  struct table_src src = {&LONG_SCHEMA, c, rows};
  static const struct iw_options spark = {.compression = 1, .lz4_style = IW_LZ4_SPARK};
  struct parts ps = cut(&src, n, 1, &spark, 0, NULL);
  struct funnel_reader *rd = NULL;
  struct funnel_table *tb = NULL;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err) &&
      CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, FUNNEL_DECODE_DEVICE, &err),
               &err) &&
      CHECK_OK(funnel_reader_read_async(rd, ps.p, (size_t)n, 0, &tb, &err), &err)) {
    CHECK_OK(funnel_table_wait(tb, &err), &err);
    struct funnel_read_stats s;
    if (CHECK_OK(funnel_table_stats(tb, &s, &err), &err)) {
      CHECK_EQ_I64(s.compressed_partitions, n);
      CHECK_EQ_I64(s.device_decoded, 2 * (int64_t)n);
      /* every row's bytes, every partition's rows + 1 offsets */
      CHECK_EQ_I64(s.bytes_device_decoded, rows * width + (rows + n) * 8);
    }
    table_check_read(tb, &src);
    funnel_table_free(tb);
  }
  funnel_reader_free(rd);
  parts_free(&ps);
  table_src_free(&src);
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* Fixed-width columns without nulls, LZ4 in every writer's frames, the
 * device decoding their values on the host path: each partition's image
 * on the host then holds no buffer at all, and must still be bound. (A
 * hostile test of the C API, 2026-11-29: "RecordBatch at offset 144: its
 * LZ4_FRAME body was not decoded", a malformed-partition error for valid
 * bytes, because such a partition's image was laid out empty and
 * skipped.) */
static void device_decodes_every_value_of_columns_without_nulls(void) {
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 0},
      {.type = FUNNEL_TYPE_FLOAT64, .name = "b", .nullable = 1}};
  static const struct iw_schema schema = {2, fields, 0};
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct table_src src = table_random(&schema, 2000, 0, 7);
  table_make_compressible(&src);
  decode_where = FUNNEL_DECODE_DEVICE;
  parse_where = FUNNEL_PARSE_HOST;
  for (int w = 0; w < N_WRITINGS; w++) {
    if (WRITINGS[w].o.compression != 1) continue;
    check_context("%s", WRITINGS[w].name);
    write_codec = 1;
    const int64_t before = decoded_on_device;
    struct parts ps = cut(&src, 2, 1, &WRITINGS[w].o, 0, NULL);
    read_and_check(dev, &ps, &src, 2);
    CHECK(decoded_on_device > before); /* the device did decode them */
    parts_free(&ps);
  }
  check_context("%s", "");
  decode_where = FUNNEL_DECODE_AUTO;
  parse_where = FUNNEL_PARSE_AUTO;
  write_codec = 0;
  table_src_free(&src);
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* The device asked to decode on the host path while the pinned pool has
 * no room for the block its share needs: the host decodes every buffer
 * (out of the pool as well), and the read succeeds. (The same test,
 * 2026-11-29: the read failed as out of host memory, its layout already
 * rewritten for the device.) */
static void device_decode_without_room_in_the_pool_decodes_on_the_host(void) {
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1}};
  static const struct iw_schema schema = {2, fields, 0};
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct table_src src = table_random(&schema, 40000, 50, 1);
  table_make_compressible(&src);
  static const struct iw_options spark = {.compression = 1, .lz4_style = IW_LZ4_SPARK};
  struct parts ps = cut(&src, 4, 1, &spark, 0, NULL);
  /* the pool filled by the caller's blocks, as fetch buffers would */
  enum { MOST = 4096 };
  void *held[MOST];
  size_t held_size[MOST];
  int n_held = 0;
  for (size_t size = (size_t)1 << 20; size >= 64 && n_held < MOST; size /= 4)
    while (n_held < MOST && funnel_device_pinned_alloc(dev, size, &held[n_held], NULL) == FUNNEL_OK)
      held_size[n_held++] = size;
  CHECK(n_held < MOST);
  struct funnel_reader *rd = NULL;
  struct funnel_table *tb = NULL;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err) &&
      CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, FUNNEL_DECODE_DEVICE, &err),
               &err) &&
      CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_PARSE, FUNNEL_PARSE_HOST, &err),
               &err) &&
      CHECK_OK(funnel_reader_read_async(rd, ps.p, (size_t)ps.n, 0, &tb, &err), &err)) {
    CHECK_OK(funnel_table_wait(tb, &err), &err);
    struct funnel_read_stats s;
    if (CHECK_OK(funnel_table_stats(tb, &s, &err), &err)) {
      CHECK_EQ_I64(s.compressed_partitions, ps.n);
      CHECK_EQ_I64(s.device_decoded, 0);
      CHECK_EQ_I64(s.decoded_pinned, 0);
    }
    table_check_read(tb, &src);
    funnel_table_free(tb);
  }
  funnel_reader_free(rd);
  for (int i = 0; i < n_held; i++)
    CHECK_OK(funnel_device_pinned_free(dev, held[i], held_size[i], NULL), NULL);
  parts_free(&ps);
  table_src_free(&src);
  CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
  funnel_device_close(dev);
}

/* A frame decoded in ways (lz4dec.h, funnel__lz4_frames_way) checks what
 * the whole frame's decoder checks, in the blocks of every way: 200,000
 * bytes in 64 KiB independent blocks (4: more blocks than 2 or 3 ways,
 * so that a way takes two), with block checksums and the content size,
 * its last block stored. Decoded in 1 to 5 ways: to its bytes; and with
 * each block's checksum or a byte of its data spoiled, its descriptor's
 * checksum byte, a content size one more (its checksum byte right), or a
 * stored last block 100 bytes longer than the bytes declared, refused;
 * nothing written outside the buffer. */
static void frames_decoded_in_ways_check_what_whole_frames_do(void) {
  enum { N = 200000, GUARD = 4096 };
  uint8_t *in = malloc(N);
  uint64_t rng = 7;
  for (int i = 0; i < N; i++) { /* compressible, but for the last block's bytes, which are stored */
    const uint64_t r = check_rand(&rng);
    in[i] = i > 180000 ? (uint8_t)r : (uint8_t)("funnel shuffle "[i % 15] + (i / 777) % 5 + (r % 16 == 0));
  }
  const struct iw_lz4_shape sh = {.block_size_id = 4, .block_checksum = 1, .content_size = 1};
  size_t zn;
  uint8_t *z = iw_lz4_frame(&sh, in, N, &zn);
  /* where each block's header lies */
  int64_t hdr[8];
  int k = 0;
  struct funnel__lz4_frame f = {0};
  CHECK_EQ_I64(funnel__lz4_frame_read(z, (int64_t)zn, &f), FUNNEL__LZ4_OK);
  for (int64_t ip = f.header, h = ip, at, size; k < 8; h = ip, k++) {
    int stored;
    if (funnel__lz4_block_next(z, (int64_t)zn, &f, &ip, &at, &size, &stored) <= 0) break;
    hdr[k] = h;
  }
  CHECK_EQ_I64(k, 4);
  CHECK(funnel__lz_ld32(z + hdr[k - 1]) >> 31); /* the last block stored */
  CHECK_EQ_I64(funnel__lz4_split(z, (int64_t)zn, N, 0, 0, NULL, 64), k);
  uint8_t *buf = malloc(N + 2 * GUARD), *bad = malloc(zn + 200);
  /* the job's status in `ways` ways, the buffer's guards checked */
  int64_t status;
#define RUN_IN_WAYS(src, n, ways)                                                          \
  do {                                                                                     \
    memset(buf, 0xC3, N + 2 * GUARD);                                                      \
    struct funnel__lz4_job j_ = {(uint64_t)(uintptr_t)(src), (int64_t)(n),                 \
                                 (uint64_t)(uintptr_t)(buf + GUARD), N, FUNNEL__LZ4_FRAMES, -1}; \
    funnel__lz4_run_jobs(&j_, 1, 0, (ways));                                               \
    status = j_.status;                                                                    \
    uint8_t fill_[GUARD];                                                                  \
    memset(fill_, 0xC3, GUARD);                                                            \
    CHECK_MEM(buf, fill_, GUARD);                                                          \
    CHECK_MEM(buf + GUARD + N, fill_, GUARD);                                              \
  } while (0)
  for (unsigned w = 1; w <= 5; w++) {
    check_context("the frame as written, %u ways", w);
    RUN_IN_WAYS(z, zn, w);
    CHECK_EQ_I64(status, FUNNEL__LZ4_OK);
    CHECK_MEM(buf + GUARD, in, N);
  }
  for (int b = 0; b < k; b++) {
    const int64_t size = funnel__lz_ld32(z + hdr[b]) & 0x7FFFFFFF, data = hdr[b] + 4;
    for (int what = 0; what < 2; what++) {
      memcpy(bad, z, zn);
      bad[what == 0 ? data + size : data + size / 2] ^= 0x5A;
      for (unsigned w = 1; w <= 4; w++) {
        check_context("block %d's %s spoiled, %u ways", b, what == 0 ? "checksum" : "data", w);
        RUN_IN_WAYS(bad, zn, w);
        CHECK(status != FUNNEL__LZ4_OK);
      }
    }
  }
  memcpy(bad, z, zn);
  bad[f.header - 1] ^= 1; /* the descriptor's checksum byte */
  for (unsigned w = 1; w <= 4; w++) {
    check_context("the descriptor's checksum byte spoiled, %u ways", w);
    RUN_IN_WAYS(bad, zn, w);
    CHECK_EQ_I64(status, FUNNEL__LZ4_CORRUPT);
  }
  memcpy(bad, z, zn);
  for (int i = 0; i < 8; i++) bad[6 + i] = (uint8_t)((uint64_t)(N + 1) >> (8 * i));
  bad[f.header - 1] = (uint8_t)(funnel__xxh32(bad + 4, f.header - 5) >> 8);
  for (unsigned w = 1; w <= 4; w++) {
    check_context("a content size one more, %u ways", w);
    RUN_IN_WAYS(bad, zn, w);
    CHECK_EQ_I64(status, FUNNEL__LZ4_LENGTH);
  }
  { /* the last block stored, 100 bytes longer than the bytes declared leave it */
    const int64_t last = N - (int64_t)(k - 1) * 65536, size = last + 100, at = hdr[k - 1];
    const int64_t n2 = at + 4 + size + 4 + 4; /* its checksum, the end mark */
    memcpy(bad, z, (size_t)at);
    const uint32_t word = 0x80000000u | (uint32_t)size;
    for (int i = 0; i < 4; i++) bad[at + i] = (uint8_t)(word >> (8 * i));
    memcpy(bad + at + 4, in + N - last, (size_t)last);
    memset(bad + at + 4 + last, 0xEE, 100);
    const uint32_t sum = funnel__xxh32(bad + at + 4, size);
    for (int i = 0; i < 4; i++) bad[at + 4 + size + i] = (uint8_t)(sum >> (8 * i));
    memset(bad + n2 - 4, 0, 4);
    for (unsigned w = 1; w <= 4; w++) {
      check_context("a stored last block 100 bytes long, %u ways", w);
      RUN_IN_WAYS(bad, n2, w);
      CHECK(status != FUNNEL__LZ4_OK);
    }
  }
#undef RUN_IN_WAYS
  check_context("%s", "");
  free(bad);
  free(buf);
  free(z);
  free(in);
}

/* The device's LZ4 decoder (lz4dec.h, as the cpu backend runs it) against
 * the frames liblz4 writes, of both kinds, from 0 bytes to several blocks,
 * random and repetitive; then every frame spoiled at random bytes, decoded
 * into a buffer of exactly its size (ASan sees a byte out of bounds): a
 * status, never a crash, and never OK with bytes other than the input's
 * unless a checksum-free frame was spoiled (a frame job verifies the
 * checksums a frame has). */
static void device_decoder_reads_what_liblz4_writes(void) {
  uint64_t rng = 31;
  static const int64_t SIZES[] = {0, 1, 7, 100, 4096, 65535, 65536, 65537, 300000, 1100000};
  for (int si = 0; si < 10; si++)
    for (int style = 0; style <= 3; style++)
      for (int kind = 0; kind < 5; kind++) {
        const int64_t n = SIZES[si];
        check_context("%lld bytes, %s frames, %s", (long long)n,
                      style == IW_LZ4_JAVA  ? "Java's"
                      : style == IW_LZ4_CPP ? "C++'s"
                      : style == IW_LZ4_SPARK ? "lz4-java's"
                                              : "checksummed",
                      kind == 0   ? "random"
                      : kind == 1 ? "repetitive"
                      : kind == 2 ? "runs"
                      : kind == 3 ? "short near repeats"
                                  : "random, then short near repeats");
        uint8_t *in = malloc((size_t)n + 1);
        for (int64_t i = 0; i < n; i++)
          in[i] = kind == 0 || kind == 4 ? (uint8_t)check_rand(&rng)
                  : kind == 1 ? (uint8_t)("funnel shuffle "[i % 15] + (i / 9000) % 3)
                              : (uint8_t)((i / 700) & 0xff);
        /* the sequences of shuffle data (short matches a few bytes back, a
         * few literals between): what the decoder's rounds take, matches
         * reading the match just before them included; the fifth kind's
         * after 2,000 random bytes, so that the decoder takes the block one
         * sequence after another (its first round's sequences are long),
         * short ones too */
        for (int64_t i = kind == 4 ? 2000 : 0; kind >= 3 && i < n;) {
          const int64_t back = 1 + (int64_t)check_rand_below(&rng, 24);
          for (int64_t r = 4 + (int64_t)check_rand_below(&rng, 12); r > 0 && i < n; r--, i++)
            in[i] = i >= back ? in[i - back] : (uint8_t)check_rand(&rng);
          for (int64_t r = (int64_t)check_rand_below(&rng, 4); r > 0 && i < n; r--, i++)
            in[i] = (uint8_t)check_rand(&rng);
        }
        size_t zn;
        uint8_t *z = iw_compress(1, style, 0, in, (size_t)n, &zn);
        uint8_t *out = malloc((size_t)n + 1);
        struct funnel__lz4_job job = {.src = (uint64_t)(uintptr_t)z, .src_length = (int64_t)zn,
                                      .dst = (uint64_t)(uintptr_t)out, .dst_length = n,
                                      .kind = FUNNEL__LZ4_FRAMES, .status = -1};
        funnel__lz4_run_jobs(&job, 1, 0, 1);
        CHECK_EQ_I64(job.status, FUNNEL__LZ4_OK);
        if (job.status == FUNNEL__LZ4_OK) CHECK_MEM(out, in, n);
        /* in 3 ways, as the cpu backend takes the device path's jobs */
        memset(out, 0, (size_t)n);
        job.status = -1;
        funnel__lz4_run_jobs(&job, 1, 0, 3);
        CHECK_EQ_I64(job.status, FUNNEL__LZ4_OK);
        if (job.status == FUNNEL__LZ4_OK) CHECK_MEM(out, in, n);
        /* a job a block: frames of independent blocks (Java's, lz4-java's) */
        struct funnel__lz4_job blocks[64];
        const int64_t k = funnel__lz4_split(z, (int64_t)zn, n, (uint64_t)(uintptr_t)z,
                                            (uint64_t)(uintptr_t)out, blocks, 64);
        /* (liblz4 marks a frame of one block independent; a frame of one
         * block with a content checksum is decoded whole, which verifies
         * it) */
        if (n == 0 || style == IW_LZ4_JAVA || (style == IW_LZ4_SUMS && n <= 65536))
          CHECK_EQ_I64(k, n > 4194304 && style == IW_LZ4_JAVA ? (n + 4194303) / 4194304 : 0);
        else if (style == IW_LZ4_CPP || style == IW_LZ4_SUMS) CHECK_EQ_I64(k, n <= 65536 ? 1 : 0);
        else CHECK_EQ_I64(k, (n + 65535) / 65536);
        memset(out, 0, (size_t)n);
        funnel__lz4_run_jobs(blocks, k, 0, 1);
        for (int64_t b = 0; b < k; b++) CHECK_EQ_I64(blocks[b].status, FUNNEL__LZ4_OK);
        if (k > 0) CHECK_MEM(out, in, n);
        /* declared one byte more or less */
        job.dst_length = n + 1;
        funnel__lz4_run_jobs(&job, 1, 0, 1);
        CHECK_EQ_I64(job.status, FUNNEL__LZ4_LENGTH);
        if (n > 0) {
          job.dst_length = n - 1;
          funnel__lz4_run_jobs(&job, 1, 0, 1);
          CHECK(job.status != FUNNEL__LZ4_OK);
        }
        /* spoiled */
        for (int k = 0; k < (n < 5000 ? 200 : 20); k++) {
          size_t cut;
          uint8_t *bad = iw_spoiled_copy(&rng, z, zn, &cut);
          uint8_t *exact = malloc((size_t)n + 1);
          struct funnel__lz4_job spoiled = {.src = (uint64_t)(uintptr_t)bad,
                                            .src_length = (int64_t)cut,
                                            .dst = (uint64_t)(uintptr_t)exact, .dst_length = n,
                                            .kind = FUNNEL__LZ4_FRAMES, .status = -1};
          funnel__lz4_run_jobs(&spoiled, 1, 0, 1);
          CHECK(spoiled.status >= FUNNEL__LZ4_OK && spoiled.status <= FUNNEL__LZ4_DICTIONARY);
          /* in 3 ways: decoded only where the whole frame decodes, to its bytes */
          uint8_t *ways = malloc((size_t)n + 1);
          struct funnel__lz4_job in_ways = spoiled;
          in_ways.dst = (uint64_t)(uintptr_t)ways;
          in_ways.status = -1;
          funnel__lz4_run_jobs(&in_ways, 1, 0, 3);
          CHECK(in_ways.status >= FUNNEL__LZ4_OK && in_ways.status <= FUNNEL__LZ4_DICTIONARY);
          CHECK(in_ways.status != FUNNEL__LZ4_OK || spoiled.status == FUNNEL__LZ4_OK);
          if (in_ways.status == FUNNEL__LZ4_OK && spoiled.status == FUNNEL__LZ4_OK)
            CHECK_MEM(ways, exact, n);
          free(ways);
          /* a frame with a content checksum decodes to its bytes or fails */
          if (spoiled.status == FUNNEL__LZ4_OK && (style == IW_LZ4_JAVA || style == IW_LZ4_SUMS))
            CHECK_MEM(exact, in, n);
          /* its blocks, where it still splits: each in bounds of its own bytes */
          struct funnel__lz4_job parts[64];
          const int64_t np = funnel__lz4_split(bad, (int64_t)cut, n, (uint64_t)(uintptr_t)bad,
                                               (uint64_t)(uintptr_t)exact, parts, 64);
          funnel__lz4_run_jobs(parts, np, 0, 1);
          free(exact);
          free(bad);
        }
        free(z);
        free(out);
        free(in);
      }
  check_context("%s", "");
}

/* The device's ZSTD decoder (zstddec.h, run here as the cpu backend runs
 * it) against what libzstd writes: every size around a block's 128 KiB,
 * levels from the fastest (negative) to 19, with and without the content
 * checksum and size, several kinds of bytes; each must decode to its
 * bytes. Spoiled frames must be refused, or decode to what libzstd
 * decodes them to (the host would then read the same). */
static void device_decoder_reads_what_libzstd_writes(void) {
  uint64_t rng = 77;
  static const int64_t SIZES[] = {0, 1, 7, 100, 4096, 65536, 131072, 131073, 300000, 1100000};
  static const int LEVELS[] = {-5, 1, 3, 9, 19};
  int64_t refused = 0, decoded_alike = 0;
  for (int si = 0; si < 10; si++)
    for (int li = 0; li < 5; li++)
      for (int kind = 0; kind < 5; kind++) {
        const int64_t n = SIZES[si];
        const int level = LEVELS[li], sum = (si + kind) % 2, sized = (li + kind) % 2;
        if (level == 19 && n > 300000) continue; /* (slow to write) */
        check_context("%lld bytes, level %d, %s, checksum %d, size %d", (long long)n, level,
                      kind == 0   ? "random"
                      : kind == 1 ? "repetitive"
                      : kind == 2 ? "runs"
                      : kind == 3 ? "short near repeats"
                                  : "int64 values of a few bits",
                      sum, sized);
        uint8_t *in = malloc((size_t)n + 1);
        for (int64_t i = 0; i < n; i++)
          in[i] = kind == 0   ? (uint8_t)check_rand(&rng)
                  : kind == 1 ? (uint8_t)("funnel shuffle "[i % 15] + (i / 9000) % 3)
                  : kind == 2 ? (uint8_t)((i / 700) & 0xff)
                  : kind == 4 ? (uint8_t)(i % 8 == 0 ? check_rand_below(&rng, 16) : 0)
                              : 0;
        for (int64_t i = 0; kind == 3 && i < n;) {
          const int64_t back = 1 + (int64_t)check_rand_below(&rng, 24);
          for (int64_t r = 4 + (int64_t)check_rand_below(&rng, 12); r > 0 && i < n; r--, i++)
            in[i] = i >= back ? in[i - back] : (uint8_t)check_rand(&rng);
          for (int64_t r = (int64_t)check_rand_below(&rng, 4); r > 0 && i < n; r--, i++)
            in[i] = (uint8_t)check_rand(&rng);
        }
        size_t zn;
        uint8_t *z = iw_zstd_frame(level, sum, sized, in, (size_t)n, &zn);
        uint8_t *out = malloc((size_t)n + 1);
        struct funnel__lz4_job job = {.src = (uint64_t)(uintptr_t)z, .src_length = (int64_t)zn,
                                      .dst = (uint64_t)(uintptr_t)out, .dst_length = n,
                                      .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
        funnel__zstd_run_jobs(&job, 1, 0);
        CHECK_EQ_I64(job.status, FUNNEL__LZ4_OK);
        if (job.status == FUNNEL__LZ4_OK) CHECK_MEM(out, in, n);
        /* the LZ4 decoder leaves it alone */
        job.status = -1;
        funnel__lz4_run_jobs(&job, 1, 0, 1);
        CHECK_EQ_I64(job.status, -1);
        /* declared one byte more or less */
        job.dst_length = n + 1;
        funnel__zstd_run_jobs(&job, 1, 0);
        CHECK_EQ_I64(job.status, FUNNEL__LZ4_LENGTH);
        if (n > 0) {
          job.dst_length = n - 1;
          funnel__zstd_run_jobs(&job, 1, 0);
          CHECK(job.status != FUNNEL__LZ4_OK);
        }
        /* two frames with a skippable one between them */
        if (n <= 300000) {
          uint8_t *two = malloc(2 * zn + 12), *out2 = malloc(2 * (size_t)n + 1);
          memcpy(two, z, zn);
          const uint8_t skip[12] = {0x5A, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4};
          memcpy(two + zn, skip, 12);
          memcpy(two + zn + 12, z, zn);
          struct funnel__lz4_job j2 = {.src = (uint64_t)(uintptr_t)two,
                                       .src_length = 2 * (int64_t)zn + 12,
                                       .dst = (uint64_t)(uintptr_t)out2, .dst_length = 2 * n,
                                       .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
          funnel__zstd_run_jobs(&j2, 1, 0);
          CHECK_EQ_I64(j2.status, FUNNEL__LZ4_OK);
          if (j2.status == FUNNEL__LZ4_OK) {
            CHECK_MEM(out2, in, n);
            CHECK_MEM(out2 + n, in, n);
          }
          free(two);
          free(out2);
        }
        /* spoiled: refused, or decoded as libzstd decodes it */
        for (int k = 0; k < (n < 5000 ? 100 : 12); k++) {
          size_t cut;
          uint8_t *bad = iw_spoiled_copy(&rng, z, zn, &cut);
          uint8_t *exact = malloc((size_t)n + 1), *ref = malloc((size_t)n + 1);
          struct funnel__lz4_job spoiled = {.src = (uint64_t)(uintptr_t)bad,
                                            .src_length = (int64_t)cut,
                                            .dst = (uint64_t)(uintptr_t)exact, .dst_length = n,
                                            .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
          funnel__zstd_run_jobs(&spoiled, 1, 0);
          CHECK(spoiled.status >= FUNNEL__LZ4_OK && spoiled.status <= FUNNEL__LZ4_DICTIONARY);
          if (spoiled.status == FUNNEL__LZ4_OK) {
            decoded_alike++;
            CHECK_EQ_I64(iw_zstd_decompress(bad, cut, ref, (size_t)n), n);
            CHECK_MEM(exact, ref, n);
          } else {
            refused++;
          }
          free(exact);
          free(ref);
          free(bad);
        }
        free(z);
        free(out);
        free(in);
      }
  check_context("%s", "");
  CHECK(refused > 1000 && decoded_alike > 100); /* both seen */
  /* a frame with a dictionary id: refused as such */
  const uint8_t dict[] = {0x28, 0xB5, 0x2F, 0xFD, 0x21, 7, 1, 1, 0, 0, 0x61};
  uint8_t one[1];
  struct funnel__lz4_job dj = {.src = (uint64_t)(uintptr_t)dict, .src_length = sizeof(dict),
                               .dst = (uint64_t)(uintptr_t)one, .dst_length = 1,
                               .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
  funnel__zstd_run_jobs(&dj, 1, 0);
  CHECK_EQ_I64(dj.status, FUNNEL__LZ4_DICTIONARY);
  /* four Huffman streams of 4 literals (a hostile test's frame), which
   * libzstd refuses: refused */
  const uint8_t four[] = {0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x04, 0x85, 0x00, 0x00, 0x46, 0x00, 0x03, 0x81,
                          0x11, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x03, 0x03, 0x03, 0x03, 0x00};
  uint8_t four_out[4];
  CHECK_EQ_I64(iw_zstd_decompress(four, sizeof(four), four_out, 4), -1);
  struct funnel__lz4_job fj = {.src = (uint64_t)(uintptr_t)four, .src_length = sizeof(four),
                               .dst = (uint64_t)(uintptr_t)four_out, .dst_length = 4,
                               .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
  funnel__zstd_run_jobs(&fj, 1, 0);
  CHECK_EQ_I64(fj.status, FUNNEL__LZ4_CORRUPT);
  /* a frame whose offsets' table gives each of its 32 symbols a count of
   * -1 ("less than 1": a state each, no spread; a reviewer's), which
   * libzstd decodes to "abcddddd" */
  uint8_t lows_out[8];
  const uint8_t *lows = IW_ZSTD_ALL_LOW_FRAME;
  const size_t lows_n = sizeof(IW_ZSTD_ALL_LOW_FRAME);
  CHECK_EQ_I64(iw_zstd_decompress(lows, lows_n, lows_out, 8), 8);
  CHECK(memcmp(lows_out, "abcddddd", 8) == 0);
  memset(lows_out, 0, 8);
  struct funnel__lz4_job lj = {.src = (uint64_t)(uintptr_t)lows,
                               .src_length = (int64_t)lows_n,
                               .dst = (uint64_t)(uintptr_t)lows_out, .dst_length = 8,
                               .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
  funnel__zstd_run_jobs(&lj, 1, 0);
  CHECK_EQ_I64(lj.status, FUNNEL__LZ4_OK);
  CHECK(memcmp(lows_out, "abcddddd", 8) == 0);
  /* a raw block of the window's 1 KiB decodes; one of 2 KiB, over the
   * window (RFC 8878's Block_Maximum_Size; libzstd refuses it from 1.5.6
   * on, earlier ones take it) is refused, for the host to decide */
  for (int size = 1024; size <= 2048; size += 1024) {
    check_context("a raw block of %d bytes in a window of 1 KiB", size);
    uint8_t *frame = malloc(9 + (size_t)size), *frame_out = malloc((size_t)size);
    const uint8_t head[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x00,
                            (uint8_t)(1 | size << 3), (uint8_t)(size >> 5), 0};
    memcpy(frame, head, sizeof(head));
    for (int i = 0; i < size; i++) frame[9 + i] = (uint8_t)(i * 7);
    struct funnel__lz4_job rj = {.src = (uint64_t)(uintptr_t)frame, .src_length = 9 + size,
                                 .dst = (uint64_t)(uintptr_t)frame_out, .dst_length = size,
                                 .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
    funnel__zstd_run_jobs(&rj, 1, 0);
    CHECK_EQ_I64(rj.status, size <= 1024 ? FUNNEL__LZ4_OK : FUNNEL__LZ4_CORRUPT);
    if (size <= 1024) CHECK(memcmp(frame_out, frame + 9, (size_t)size) == 0);
    free(frame);
    free(frame_out);
  }
  check_context("%s", "");
}

/* The ZSTD decoder as the test's backend runs it (on cuda the kernel, a
 * warp a frame, whose votes and shuffles the host's one lane never takes)
 * against the host's run of the same source: frames libzstd wrote at
 * every level, with and without checksum and size, and spoiled copies of
 * them, all in one launch. Each job must end in the host's status and,
 * decoded, hold the host's bytes (and the frame's input, unspoiled). */
static void device_decodes_zstd_frames_as_the_host_does(void) {
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct funnel_backend *be = &dev->be;
  static const int64_t SIZES[] = {0, 1, 7, 100, 245, 1000, 4096, 65536, 131073, 300000};
  static const int LEVELS[] = {-5, 1, 3, 9, 19};
  enum { MAX_JOBS = 4096 };
  struct funnel__lz4_job *jobs = calloc(MAX_JOBS, sizeof(*jobs));
  uint8_t **srcs = calloc(MAX_JOBS, sizeof(*srcs)), **want = calloc(MAX_JOBS, sizeof(*want));
  int64_t *want_status = calloc(MAX_JOBS, sizeof(*want_status));
  int64_t n_jobs = 0, src_total = 0, dst_total = 0;
  uint64_t rng = 1234;
  for (int si = 0; si < 10; si++)
    for (int li = 0; li < 5; li++)
      for (int kind = 0; kind < 5; kind++) {
        const int64_t n = SIZES[si];
        uint8_t *in = malloc((size_t)n + 1);
        iw_sample_bytes(in, n, kind, &rng);
        size_t zn;
        uint8_t *z =
            iw_zstd_frame(LEVELS[li], (si + kind) % 2, (li + kind) % 2, in, (size_t)n, &zn);
        const int copies = 1 + (n <= 4096 ? 12 : 3);
        for (int c = 0; c < copies && n_jobs < MAX_JOBS; c++) {
          size_t len = zn;
          uint8_t *frame = c == 0 ? iw_dup(z, zn) : iw_spoiled_copy(&rng, z, zn, &len);
          uint8_t *out = malloc((size_t)n + 1);
          struct funnel__lz4_job host = {.src = (uint64_t)(uintptr_t)frame,
                                         .src_length = (int64_t)len,
                                         .dst = (uint64_t)(uintptr_t)out, .dst_length = n,
                                         .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
          funnel__zstd_run_jobs(&host, 1, 0);
          if (c == 0) {
            CHECK_EQ_I64(host.status, FUNNEL__LZ4_OK);
            CHECK_MEM(out, in, n);
          }
          jobs[n_jobs] = (struct funnel__lz4_job){.src = (uint64_t)src_total,
                                                  .src_length = (int64_t)len,
                                                  .dst = (uint64_t)dst_total, .dst_length = n,
                                                  .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
          srcs[n_jobs] = frame;
          want[n_jobs] = out;
          want_status[n_jobs] = host.status;
          src_total += (int64_t)len + 1;
          dst_total += n + 1;
          n_jobs++;
        }
        free(z);
        free(in);
      }
  /* IW_ZSTD_ALL_LOW_FRAME (an FSE table of count -1 symbols only) */
  {
    const size_t lows_n = sizeof(IW_ZSTD_ALL_LOW_FRAME);
    uint8_t *out = malloc(8);
    CHECK_EQ_I64(iw_zstd_decompress(IW_ZSTD_ALL_LOW_FRAME, lows_n, out, 8), 8);
    jobs[n_jobs] = (struct funnel__lz4_job){.src = (uint64_t)src_total,
                                            .src_length = (int64_t)lows_n,
                                            .dst = (uint64_t)dst_total, .dst_length = 8,
                                            .kind = FUNNEL__ZSTD_FRAMES, .status = -1};
    srcs[n_jobs] = iw_dup(IW_ZSTD_ALL_LOW_FRAME, lows_n);
    want[n_jobs] = out;
    want_status[n_jobs] = FUNNEL__LZ4_OK;
    src_total += (int64_t)lows_n + 1;
    dst_total += 9;
    n_jobs++;
  }
  /* one launch over every job: sources and outputs back to back */
  uint8_t *src_host = malloc((size_t)src_total), *dst_host = malloc((size_t)dst_total);
  for (int64_t j = 0; j < n_jobs; j++)
    memcpy(src_host + jobs[j].src, srcs[j], (size_t)jobs[j].src_length);
  memset(dst_host, 0xA5, (size_t)dst_total);
  uint64_t dsrc = 0, ddst = 0, djobs = 0;
  void *stream = NULL, *done = NULL;
  const size_t jobs_bytes = (size_t)n_jobs * sizeof(*jobs);
  int st = funnel__dev_stream_create(be, &stream, &err);
  if (st == FUNNEL_OK) st = funnel__dev_alloc(be, (size_t)src_total, stream, &dsrc, &err);
  if (st == FUNNEL_OK) st = funnel__dev_alloc(be, (size_t)dst_total, stream, &ddst, &err);
  if (st == FUNNEL_OK) st = funnel__dev_alloc(be, jobs_bytes, stream, &djobs, &err);
  for (int64_t j = 0; j < n_jobs; j++) {
    jobs[j].src += dsrc;
    jobs[j].dst += ddst;
  }
  if (st == FUNNEL_OK)
    st = funnel__dev_copy_h2d_async(be, dsrc, src_host, (size_t)src_total, stream, &err);
  if (st == FUNNEL_OK)
    st = funnel__dev_copy_h2d_async(be, ddst, dst_host, (size_t)dst_total, stream, &err);
  if (st == FUNNEL_OK) st = funnel__dev_copy_h2d_async(be, djobs, jobs, jobs_bytes, stream, &err);
  if (st == FUNNEL_OK)
    st = funnel__dev_launch_dpath(be, FUNNEL_DP_STAGE_ZSTD, djobs, n_jobs, 0, stream, &err);
  if (st == FUNNEL_OK) st = funnel__dev_copy_d2h_async(be, jobs, djobs, jobs_bytes, stream, &err);
  if (st == FUNNEL_OK)
    st = funnel__dev_copy_d2h_async(be, dst_host, ddst, (size_t)dst_total, stream, &err);
  if (st == FUNNEL_OK) st = funnel__dev_event_create(be, &done, &err);
  if (st == FUNNEL_OK) st = funnel__dev_event_record(be, done, stream, &err);
  if (st == FUNNEL_OK) st = funnel__dev_event_wait(be, done, &err);
  CHECK_OK(st, &err);
  int64_t decoded = 0, refused = 0;
  for (int64_t j = 0; j < n_jobs && st == FUNNEL_OK; j++) {
    check_context("job %lld: %lld bytes from %lld", (long long)j, (long long)jobs[j].dst_length,
                  (long long)jobs[j].src_length);
    CHECK_EQ_I64(jobs[j].status, want_status[j]);
    if (want_status[j] == FUNNEL__LZ4_OK && jobs[j].status == FUNNEL__LZ4_OK) {
      CHECK_MEM(dst_host + (jobs[j].dst - ddst), want[j], jobs[j].dst_length);
      decoded++;
    } else {
      refused++;
    }
  }
  check_context("%s", "");
  CHECK(decoded > 300 && refused > 1000); /* both seen */
  printf("    %lld jobs: %lld decoded, %lld refused\n", (long long)n_jobs, (long long)decoded,
         (long long)refused);
  if (done != NULL) funnel__dev_event_destroy(be, done);
  if (djobs) funnel__dev_free(be, djobs, stream);
  if (ddst) funnel__dev_free(be, ddst, stream);
  if (dsrc) funnel__dev_free(be, dsrc, stream);
  if (stream != NULL) funnel__dev_stream_destroy(be, stream);
  for (int64_t j = 0; j < n_jobs; j++) {
    free(srcs[j]);
    free(want[j]);
  }
  free(src_host);
  free(dst_host);
  free(srcs);
  free(want);
  free(want_status);
  free(jobs);
  funnel_device_close(dev);
}

/* Without liblz4 (FUNNEL_LZ4_LIBRARY names a file that is not there, in a
 * child process: the library is loaded once a process), an LZ4 read fails
 * naming the library; ZSTD and uncompressed reads are untouched. */
static int without_lz4(void) {
  {
    struct funnel_device *dev = NULL;
    struct funnel_error err;
    int bad = 0;
    if (check_device_open(&dev, &err) != FUNNEL_OK) return 2;
    for (int codec = 0; codec <= 2; codec++) {
      struct table_src src = table_random(&BAD_SCHEMA, 100, 100, 9);
      struct iw_options o = {.compression = codec};
      struct parts ps = cut(&src, 3, 1, &o, 0, NULL);
      struct funnel_reader *rd = NULL;
      struct funnel_table *tb = NULL;
      if (funnel_reader_create(dev, NULL, 0, &rd, &err) != FUNNEL_OK) return 3;
      const int st = funnel_reader_read_async(rd, ps.p, 3, 0, &tb, &err);
      if (codec == 1) {
        bad |= st != FUNNEL_ERR_UNSUPPORTED || err.partition != 0 ||
               strstr(err.message, "libfunnel-no-such-lz4.so") == NULL ||
               strstr(err.message, "LZ4_FRAME") == NULL;
        if (bad) fprintf(stderr, "LZ4 read without liblz4: %d %s\n", st, err.message);
      } else {
        bad |= st != FUNNEL_OK;
        if (st != FUNNEL_OK) fprintf(stderr, "codec %d read: %s\n", codec, err.message);
      }
      if (st == FUNNEL_OK) funnel_table_free(tb);
      funnel_reader_free(rd);
      parts_free(&ps);
      table_src_free(&src);
    }
    funnel_device_close(dev);
    return bad ? 1 : 0;
  }
}

static char *self_path;

static void missing_library_is_named(void) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("FUNNEL_LZ4_LIBRARY", "libfunnel-no-such-lz4.so", 1);
    setenv("TEST_COMPRESS_WITHOUT_LZ4", "1", 1);
    execl(self_path, self_path, (char *)NULL);
    _exit(4);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK_EQ_I64(WEXITSTATUS(status), 0);
}

/* A read of `ps` on `rd` with a fault at call k of `kind`
 * (funnel__fault_arm), after a read of `guess` with none (what the
 * device's guess for it learns); *hit: the fault was made. Returns the
 * read's status and its table in *t (for the caller to free); *live0: what
 * was alive before it (check_nothing_alive). */
static int read_with_fault(struct funnel_reader *rd, const struct parts *guess,
                           const struct parts *ps, int kind, int64_t k, bool *hit,
                           struct funnel_table **t, struct funnel__live *live0) {
  struct funnel_error err;
  *t = NULL;
  if (CHECK_OK(funnel_reader_read_async(rd, guess->p, (size_t)guess->n, 0, t, &err), &err))
    CHECK_OK(funnel_table_wait(*t, &err), &err);
  funnel_table_free(*t);
  *live0 = funnel__live_now();
  *t = NULL;
  funnel__fault_arm(kind, k);
  int st = funnel_reader_read_async(rd, ps->p, (size_t)ps->n, 0, t, &err);
  if (st == FUNNEL_OK) st = funnel_table_wait(*t, &err);
  *hit = funnel__fault_calls(kind) >= k;
  funnel__fault_arm(kind, 0);
  return st;
}

/* Nothing alive that was not before a read (read_with_fault), its table freed. */
static void check_nothing_alive(const struct funnel__live *live0) {
  const struct funnel__live now = funnel__live_now();
  CHECK_EQ_I64(now.allocs, live0->allocs);
  CHECK_EQ_I64(now.host_allocs, live0->host_allocs);
  CHECK_EQ_I64(now.events, live0->events);
  CHECK_EQ_I64(now.streams, live0->streams);
}

/* A fault at every allocation, copy, launch and event of a read in one go
 * whose gate shuts (its guess from random values, then repeating values
 * that decode to more: the z block's tables kept for the second pass, its
 * decoded buffers and output allocated again): the read fails with the
 * fault's error or works around it and reads the rows as written, and
 * leaves nothing alive (a review: test_faults reached no such read). */
static void faults_in_a_read_whose_gate_shuts_leave_nothing(void) {
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_INT64, .name = "a", .nullable = 1},
      {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1}};
  static const struct iw_schema schema = {2, fields, 0};
  static const struct iw_options lz4 = {.compression = 1, .lz4_style = IW_LZ4_JAVA,
                                        .raw_fallback = 1, .empty_prefix = 1};
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  struct table_src random = table_random(&schema, 100 * 20, 100, 97);
  struct table_src repeating = table_random(&schema, 100 * 60, 0, 98);
  table_make_compressible(&repeating);
  struct parts pr = cut(&random, 100, 1, &lz4, 0, NULL);
  struct parts pp = cut(&repeating, 100, 1, &lz4, 0, NULL);
  struct funnel_reader *rd = NULL;
  if (!CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) return;
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, FUNNEL_DECODE_DEVICE, &err), &err);
  CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TIME_KERNEL, 1, &err), &err);
  int64_t injected[FUNNEL__N_FAULTS] = {0}, shut = 0;
  for (int kind = 0; kind < FUNNEL__N_FAULTS; kind++) {
    for (int64_t k = 1;; k++) {
      check_context("fault %d at call %lld", kind, (long long)k);
      struct funnel_table *t; /* the guess, from random values */
      struct funnel__live live0;
      bool hit;
      const int st = read_with_fault(rd, &pr, &pp, kind, k, &hit, &t, &live0);
      injected[kind] += hit;
      if (st == FUNNEL_OK) {
        struct funnel_read_stats s;
        if (CHECK_OK(funnel_table_stats(t, &s, &err), &err)) shut += s.decode_waits == 2;
        table_check_read(t, &repeating);
      }
      funnel_table_free(t);
      check_nothing_alive(&live0);
      if (!hit || k > 1000) break;
    }
  }
  /* a fault at every call the read makes of each kind: at least what a
   * read whose gate shuts makes on any backend (its partitions' scratch
   * and the z block, then the decoded buffers and the output; a copy of
   * the head and of the partitions; the first pass, the decoder, the
   * second pass and the concat, then the two passes again; the timed
   * kernel's two events). The cpu backend makes more: a copy a pageable
   * partition, where cuda stages them in pinned memory and makes one. */
  printf("  faults injected: %lld allocations, %lld pinned, %lld copies, %lld launches, %lld "
         "events\n",
         (long long)injected[FUNNEL__FAULT_ALLOC], (long long)injected[FUNNEL__FAULT_PINNED],
         (long long)injected[FUNNEL__FAULT_COPY], (long long)injected[FUNNEL__FAULT_LAUNCH],
         (long long)injected[FUNNEL__FAULT_EVENT]);
  CHECK(injected[FUNNEL__FAULT_ALLOC] >= 4);
  CHECK(injected[FUNNEL__FAULT_COPY] >= 2);
  CHECK(injected[FUNNEL__FAULT_LAUNCH] >= 6);
  CHECK(injected[FUNNEL__FAULT_EVENT] >= 2);
  CHECK(shut > 0); /* the faults a read works around left some gates to shut */
  funnel_reader_free(rd);
  parts_free(&pr);
  parts_free(&pp);
  table_src_free(&random);
  table_src_free(&repeating);
  funnel_device_close(dev);
}

/* A fault at every allocation, copy, launch and event of a read in one go
 * that guesses it holds no frame (after a read of partitions of a row on
 * the same reader): its tables and output in its partitions' allocation
 * (the early copies' for pinned partitions, else its own; read in place,
 * FUNNEL_TRANSFER_DIRECT, the allocation holds the tables and output
 * alone), kept for the two passes when a frame is found. Three reads,
 * from malloc'd memory, from pinned and from pinned read in place (a
 * review: its allocation leaked): partitions of a row (one pass); a row, then frames
 * (the one pass finds them, and the two passes follow from its head);
 * frames from the first partition (two passes at once). Each fails with
 * the fault's error or works around it and reads the rows as written, and
 * leaves nothing alive; with no fault, each goes the way it is meant to
 * (its device allocations and waits). */
static void faults_in_a_read_guessing_no_frame_leave_nothing(void) {
  struct funnel_error err;
  struct table_src ones = table_random(&one_go_schema, 100, 100, 81);
  struct table_src repeating = table_random(&one_go_schema, 1 + 99 * 60, 0, 82);
  table_make_compressible(&repeating);
  static const struct {
    const char *what;
    int src;          /* 0 ones, 1 a row then repeating, 2 repeating cut evenly */
    int64_t allocs;   /* device allocations with no fault */
    int64_t waits;    /* ... and decode waits */
  } READS[] = {{"partitions of a row", 0, 1, 0},
               {"a row, then frames", 1, 3, 2},
               {"frames from the first partition", 2, 3, 1}};
  int64_t injected[FUNNEL__N_FAULTS] = {0};
  for (int run = 0; run < 3; run++) {
    const int pinned = run > 0, direct = run == 2;
    const char *where = direct ? "pinned, read in place" : pinned ? "pinned" : "malloc'd";
    struct funnel_device *dev = NULL;
    if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
    struct funnel_device *by = pinned ? dev : NULL;
    struct parts raw = cut(&ones, 100, 1, &java_lz4, 0, by);
    struct funnel_reader *rd = NULL;
    if (!CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) return;
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DECODE, FUNNEL_DECODE_DEVICE, &err),
             &err);
    if (direct)
      CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TRANSFER, FUNNEL_TRANSFER_DIRECT, &err),
               &err);
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_TIME_KERNEL, 1, &err), &err);
    for (size_t r = 0; r < sizeof(READS) / sizeof(READS[0]); r++) {
      const struct table_src *src = READS[r].src == 0 ? &ones : &repeating;
      struct parts ps = READS[r].src == 0   ? cut(&ones, 100, 1, &java_lz4, 0, by)
                        : READS[r].src == 1 ? row_then_cut(&repeating, 100, &java_lz4, by)
                                            : cut(&repeating, 100, 1, &java_lz4, 0, by);
      for (int kind = 0; kind < FUNNEL__N_FAULTS; kind++) {
        for (int64_t k = 1;; k++) {
          check_context("%s, %s, fault %d at call %lld", READS[r].what, where, kind,
                        (long long)k);
          struct funnel_table *t; /* the guess: no frame */
          struct funnel__live live0;
          bool hit;
          const int st = read_with_fault(rd, &raw, &ps, kind, k, &hit, &t, &live0);
          injected[kind] += hit;
          CHECK(hit || st == FUNNEL_OK);
          if (st == FUNNEL_OK) {
            struct funnel_read_stats s;
            if (!hit && CHECK_OK(funnel_table_stats(t, &s, &err), &err)) {
              CHECK_EQ_I64(s.device_parsed, 100);
              CHECK_EQ_I64(s.direct_partitions, direct ? 100 : 0);
              CHECK_EQ_I64(s.device_allocs, READS[r].allocs);
              CHECK_EQ_I64(s.decode_waits, READS[r].waits);
            }
            table_check_read(t, src);
          }
          funnel_table_free(t);
          check_nothing_alive(&live0);
          if (!hit || k > 1000) break;
        }
      }
      parts_free(&ps);
    }
    funnel_reader_free(rd);
    parts_free(&raw);
    CHECK_EQ_I64(funnel_device_pinned_in_use(dev), 0);
    funnel_device_close(dev);
  }
  printf("  faults injected: %lld allocations, %lld pinned, %lld copies, %lld launches, %lld "
         "events\n",
         (long long)injected[FUNNEL__FAULT_ALLOC], (long long)injected[FUNNEL__FAULT_PINNED],
         (long long)injected[FUNNEL__FAULT_COPY], (long long)injected[FUNNEL__FAULT_LAUNCH],
         (long long)injected[FUNNEL__FAULT_EVENT]);
  /* at least the allocations and launches of the three reads with no
   * fault, from each source */
  CHECK(injected[FUNNEL__FAULT_ALLOC] >= 3 * 7);
  CHECK(injected[FUNNEL__FAULT_LAUNCH] >= 3 * (2 + 6 + 4));
  check_context("%s", "");
  table_src_free(&ones);
  table_src_free(&repeating);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (getenv("TEST_COMPRESS_WITHOUT_LZ4") != NULL) return without_lz4();
  self_path = argv[0];
  if (!iw_codecs_available()) {
    fprintf(stderr, "test_compress: liblz4.so.1 and libzstd.so.1 are needed to write the "
                    "compressed partitions\n");
    return 1;
  }
  static const struct check_test tests[] = {
      CHECK_TEST(compressed_partitions_read_as_written),
      CHECK_TEST(compressed_reads_take_the_device_path_from_48_partitions),
      CHECK_TEST(decoded_long_fixed_width_pieces_on_the_device),
      CHECK_TEST(compressed_reads_go_in_one_go_from_a_guess),
      CHECK_TEST(raw_reads_in_one_go_launch_no_decoder),
      CHECK_TEST(raw_reads_allocate_by_their_size),
      CHECK_TEST(faults_in_a_read_whose_gate_shuts_leave_nothing),
      CHECK_TEST(faults_in_a_read_guessing_no_frame_leave_nothing),
      CHECK_TEST(compressed_reads_decode_while_copied),
      CHECK_TEST(large_lz4_partitions_decode_while_copied),
      CHECK_TEST(many_large_lz4_partitions_decode_while_copied),
      CHECK_TEST(compressed_and_plain_partitions_mixed),
      CHECK_TEST(lz4_and_zstd_partitions_in_one_read),
      CHECK_TEST(large_compressed_partition),
      CHECK_TEST(compressed_batches_without_bytes),
      CHECK_TEST(bad_compressed_buffers_name_their_place),
      CHECK_TEST(lz4_frame_after_a_failed_one_reads_as_new),
      CHECK_TEST(bad_values_in_a_compressed_batch),
      CHECK_TEST(device_decoder_reads_what_liblz4_writes),
      CHECK_TEST(frames_decoded_in_ways_check_what_whole_frames_do),
      CHECK_TEST(device_decoder_reads_what_libzstd_writes),
      CHECK_TEST(device_decodes_zstd_frames_as_the_host_does),
      CHECK_TEST(many_blocks_of_long_sequences_decode_on_the_device),
      CHECK_TEST(device_decodes_every_value_of_columns_without_nulls),
      CHECK_TEST(device_decode_without_room_in_the_pool_decodes_on_the_host),
      CHECK_TEST(missing_library_is_named),
  };
  return CHECK_MAIN(argc, argv, tests);
}
