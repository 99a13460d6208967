/* fuzz_parse_plan.c: a libFuzzer harness over parse and plan, the host
 * code a read runs on bytes it was handed (no backend, no device).
 *
 * An input is a small frame around one to three partitions:
 *
 *   byte 0   bits 0-1  partitions - 1 (3: three partitions, as 2)
 *            bit 2     a reader schema (an encapsulated Schema message)
 *                      comes first
 *            bit 3     parse as a read does, with a known schema: the
 *                      reader's, else the first partition's
 *            bits 4-7  the plan's segment chunk size (as FUNNEL_SEGMENT_CHUNK_BYTES
 *                      would set it), from chunk_sizes (NULL: the default)
 *   then the chunks: [reader schema], partition 0, 1, ...; each but the
 *   last is a uint16 length (little-endian, clamped to what is left) and
 *   that many bytes; the last takes the rest.
 *
 * Each chunk is copied into a malloc'd buffer of exactly its length, so
 * ASan sees any read past a partition. The run parses, builds the plan,
 * writes the segment table and checks the string offsets, as a read does,
 * and aborts on what a read must never see:
 *  - a rejection without a known code, a message, or a partition, column
 *    and byte offset in range;
 *  - a plan whose output layout differs from one recomputed here, or whose
 *    rows are not the partitions' rows;
 *  - more segments than plan.max_segments (the reader's table would
 *    overflow), a different count when only counting, or a segment that
 *    reads outside its partition or writes outside the output;
 *  - funnel__plan_check_pieces disagreeing with a plain loop over every
 *    offset and validity bit (accept, or the first bad piece in partition
 *    order).
 *
 * And it runs the device path's parser (dpath.h, as the cpu backend runs
 * the kernels' code) over the same partitions with the schema a read would
 * give it, and aborts when it takes what the host path rejects, or takes it
 * with other rows, null counts, string bytes or buffer positions than the
 * host path found (it may leave anything to the host path, which then reads
 * it: a read's answer never comes from the device parser alone). LZ4 and
 * ZSTD bodies it reads as a read does: unpacked, decoded by the device's
 * decoders, parsed again; their pieces' bytes, not their positions, must be
 * the host path's.
 *
 * Compressed partitions: their bodies are decoded as a read decodes them
 * (liblz4, libzstd), and the device's decoders (lz4dec.h, zstddec.h, the
 * warp's code as the cpu backend runs it) decode each buffer too, an LZ4
 * one whole and block by block, into buffers of exactly the declared
 * length; it
 * aborts when the device's bytes differ from the host's where both
 * decoded, or a status is out of range.
 *
 * FUNNEL_FUZZ_EXPECT_VALID=1 also aborts on any rejection: for checking
 * that the seed corpus (gen_corpus.c) is all valid input. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpath.h"
#include "dpath_cpu.h"
#include "format.h"
#include "lz4dec.h"
#include "zstddec.h"
#include "plan.h"

#define MAX_PARTS 3
/* the segment table is written only up to this room (a table of 2^18
 * segments is 10 MiB); larger plans are parsed and planned, not walked */
#define MAX_WALKED_SEGMENTS ((int64_t)1 << 18)
/* device addresses the segments are built on: partition p at (p + 1) << 40,
 * the output at 1 << 48, far apart so that each address names its buffer */
#define IN_BASE(p) ((uint64_t)((p) + 1) << 40)
#define OUT_BASE ((uint64_t)1 << 48)

static const char *const chunk_sizes[16] = {NULL, "1",  "2",   "3",    "7",    "8",
                                            "9",  "15", "16",  "17",   "64",   "100",
                                            "1000", "4096", "65536", NULL};

static int expect_valid, valid_wanted; /* wanted: expected, and not libFuzzer's empty input */

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...);

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fuzz_parse_plan: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *v = getenv("FUNNEL_FUZZ_EXPECT_VALID");
  expect_valid = v != NULL && *v != '\0' && *v != '0';
  return 0;
}

/* ----------------------------------------------------------------- input */

struct input {
  int64_t chunk_bytes; /* the plan's segment chunk size (0: the default) */
  int n_parts;
  int reader_schema;
  int known;
  uint8_t *schema;            /* the reader schema's bytes, or NULL */
  int64_t schema_length;
  uint8_t *parts[MAX_PARTS];  /* NULL when empty */
  int64_t lengths[MAX_PARTS];
};

static uint8_t *copy_exact(const uint8_t *p, size_t n) {
  if (n == 0) return NULL;
  uint8_t *c = malloc(n);
  if (c == NULL) fail("out of memory");
  memcpy(c, p, n);
  return c;
}

/* The next chunk of the frame: a uint16 length and its bytes, or the rest
 * when it is the last. */
static uint8_t *take(const uint8_t **data, size_t *size, int last, int64_t *length) {
  size_t n = *size;
  if (!last) {
    n = 0;
    if (*size >= 2) {
      n = (size_t)((*data)[0] | (*data)[1] << 8);
      *data += 2;
      *size -= 2;
    } else {
      *data += *size;
      *size = 0;
    }
    if (n > *size) n = *size;
  }
  uint8_t *c = copy_exact(*data, n);
  *data += n;
  *size -= n;
  *length = (int64_t)n;
  return c;
}

static void input_split(const uint8_t *data, size_t size, struct input *in) {
  memset(in, 0, sizeof(*in));
  const uint8_t control = size > 0 ? data[0] : 0;
  if (size > 0) {
    data++;
    size--;
  }
  in->n_parts = (control & 3) + 1 > MAX_PARTS ? MAX_PARTS : (control & 3) + 1;
  in->reader_schema = (control >> 2) & 1;
  in->known = (control >> 3) & 1;
  const char *chunk = chunk_sizes[control >> 4];
  in->chunk_bytes = chunk != NULL ? atoll(chunk) : 0;
  if (in->reader_schema) in->schema = take(&data, &size, 0, &in->schema_length);
  for (int p = 0; p < in->n_parts; p++)
    in->parts[p] = take(&data, &size, p == in->n_parts - 1, &in->lengths[p]);
}

static void input_free(struct input *in) {
  free(in->schema);
  for (int p = 0; p < MAX_PARTS; p++) free(in->parts[p]);
}

/* ------------------------------------------------------------ rejections */

static const char *const phase_names[] = {"reader schema", "parse", "decode", "plan", "offsets"};
enum phase { PHASE_SCHEMA, PHASE_PARSE, PHASE_DECODE, PHASE_PLAN, PHASE_OFFSETS };

/* The device's LZ4 or ZSTD decoder over one buffer: whole (its frames)
 * and, where an LZ4 frame's blocks are independent, a job a block, each
 * into a buffer of exactly the declared length. */
#define MAX_DD 64
struct dd_try {
  int part, batch, k;
  int64_t want;
  uint8_t *whole, *split, *ways;
  int status, blocks, blocks_ok;
};

static void device_decode(const struct funnel__partition *part, int p, struct dd_try *dd,
                          int *n_dd) {
  for (int64_t bi = 0; bi < part->n_batches; bi++) {
    const struct funnel__batch *b = &part->batches[bi];
    if (b->codec == FUNNEL__CODEC_NONE) continue;
    const bool zstd = b->codec == FUNNEL__CODEC_ZSTD;
    for (int32_t k = 0; k < b->n_buffers && *n_dd < MAX_DD; k++) {
      const int64_t off = (int64_t)funnel__ld64(b->buffers + 16 * k);
      const int64_t len = (int64_t)funnel__ld64(b->buffers + 16 * k + 8);
      const int64_t want = (int64_t)funnel__ld64(b->dbuffers + 16 * k + 8);
      if (len <= 8 || want > ((int64_t)16 << 20)) continue;
      const uint8_t *z = part->bytes + b->body + off;
      if ((int64_t)funnel__ld64(z) < 0) continue; /* raw */
      struct dd_try *d = &dd[(*n_dd)++];
      *d = (struct dd_try){.part = p, .batch = (int)bi, .k = k, .want = want};
      d->whole = malloc((size_t)want + 1);
      d->split = malloc((size_t)want + 1);
      d->ways = malloc((size_t)want + 1);
      struct funnel__lz4_job job = {.src = (uint64_t)(uintptr_t)(z + 8), .src_length = len - 8,
                                    .dst = (uint64_t)(uintptr_t)d->whole, .dst_length = want,
                                    .kind = zstd ? FUNNEL__ZSTD_FRAMES : FUNNEL__LZ4_FRAMES,
                                    .status = -1};
      if (zstd) funnel__zstd_run_jobs(&job, 1, 0);
      else funnel__lz4_run_jobs(&job, 1, 0, 1);
      d->status = (int)job.status;
      if (job.status < FUNNEL__LZ4_OK || job.status > FUNNEL__LZ4_DICTIONARY)
        fail("the device's %s decoder: status %lld", zstd ? "ZSTD" : "LZ4", (long long)job.status);
      if (zstd) continue;
      /* in 3 ways, as the device path's launch takes it (lz4dec.h,
       * funnel__lz4_frames_way): decoded only where it decodes whole, to
       * the same bytes */
      struct funnel__lz4_job in_ways = job;
      in_ways.dst = (uint64_t)(uintptr_t)d->ways;
      in_ways.status = -1;
      funnel__lz4_run_jobs(&in_ways, 1, 0, 3);
      if (in_ways.status < FUNNEL__LZ4_OK || in_ways.status > FUNNEL__LZ4_DICTIONARY)
        fail("the device's LZ4 decoder in ways: status %lld", (long long)in_ways.status);
      if (in_ways.status == FUNNEL__LZ4_OK &&
          (job.status != FUNNEL__LZ4_OK || memcmp(d->ways, d->whole, (size_t)want) != 0))
        fail("the device's LZ4 decoder in ways: partition %d buffer %d decoded %s", p, k,
             job.status != FUNNEL__LZ4_OK ? "where the whole frame is refused"
                                          : "to other bytes than the whole frame");
      struct funnel__lz4_job blocks[16];
      d->blocks = (int)funnel__lz4_split(z + 8, len - 8, want, (uint64_t)(uintptr_t)(z + 8),
                                         (uint64_t)(uintptr_t)d->split, blocks, 16);
      funnel__lz4_run_jobs(blocks, d->blocks, 0, 1);
      d->blocks_ok = 1;
      for (int j = 0; j < d->blocks; j++) d->blocks_ok &= blocks[j].status == FUNNEL__LZ4_OK;
    }
  }
}

static void check_rejection(enum phase phase, int st, const struct funnel_error *err,
                            const struct input *in) {
  const char *what = phase_names[phase];
  if (valid_wanted) fail("%s rejected a seed: %s", what, err->message);
  const int known = st == FUNNEL_ERR_MALFORMED || st == FUNNEL_ERR_UNSUPPORTED ||
                    st == FUNNEL_ERR_SCHEMA_MISMATCH || st == FUNNEL_ERR_NO_SCHEMA ||
                    st == FUNNEL_ERR_LIMIT ||
                    (phase == PHASE_SCHEMA && st == FUNNEL_ERR_INVALID_ARGUMENT);
  if (!known) fail("%s: unexpected code %s: %s", what, funnel_code_name(st), err->message);
  if (err->code != st)
    fail("%s: returned %s, error says %s", what, funnel_code_name(st), funnel_code_name(err->code));
  if (err->message[0] == '\0') fail("%s: %s without a message", what, funnel_code_name(st));
  if (memchr(err->message, '\0', sizeof(err->message)) == NULL)
    fail("%s: message not NUL-terminated", what);
  if (err->partition < -1 || err->partition >= in->n_parts)
    fail("%s: partition %lld of %d: %s", what, (long long)err->partition, in->n_parts, err->message);
  if (phase == PHASE_SCHEMA && err->partition != -1)
    fail("%s: reader schema error names partition %lld: %s", what, (long long)err->partition,
         err->message);
  if (err->column < -1) fail("%s: column %lld: %s", what, (long long)err->column, err->message);
  if (err->offset < -1) fail("%s: offset %lld: %s", what, (long long)err->offset, err->message);
  /* a byte offset is one within the partition named */
  if (err->partition >= 0 && err->offset > in->lengths[err->partition])
    fail("%s: offset %lld past the %lld bytes of partition %lld: %s", what,
         (long long)err->offset, (long long)in->lengths[err->partition],
         (long long)err->partition, err->message);
}

/* ------------------------------------------------------------------ plan */

static int64_t bitmap_bytes(int64_t rows) { return (rows + 7) / 8; }

/* The output layout recomputed from the pieces, and checked against the
 * plan: null counts, sizes, 64-byte aligned regions in column order inside
 * out_size. */
static void check_layout(const struct funnel__plan *plan, const struct funnel__partition *pv,
                         int n_parts) {
  int64_t rows = 0;
  for (int p = 0; p < n_parts; p++) rows += pv[p].rows;
  if (plan->rows != rows) fail("plan has %lld rows, the partitions %lld", (long long)plan->rows, (long long)rows);
  int64_t end = 0;
  const int64_t table_rows = rows;
  for (int c = 0; c < plan->schema->n_fields; c++) {
    const struct funnel__field *f = &plan->schema->fields[c];
    const struct funnel__out_column *oc = &plan->columns[c];
    /* a top-level column has the table's rows; a nested column's child
     * the rows its pieces take */
    int64_t nulls = 0, chars = 0;
    rows = f->parent < 0 ? table_rows : 0;
    for (int p = 0; p < n_parts; p++)
      for (int64_t b = 0; b < pv[p].n_batches; b++) {
        const struct funnel__piece *pc = &pv[p].batches[b].pieces[c];
        if (pv[p].batches[b].rows == 0) continue;
        nulls += pc->null_count;
        if (f->parent >= 0) rows += pc->length;
        if (f->offset_width != 0 && pc->length > 0) chars += pc->last_offset - pc->first_offset;
      }
    if (oc->length != rows)
      fail("column %d: %lld rows, pieces say %lld", c, (long long)oc->length, (long long)rows);
    if (oc->null_count != nulls)
      fail("column %d: null count %lld, pieces say %lld", c, (long long)oc->null_count, (long long)nulls);
    int64_t data_size;
    if (f->offset_width != 0) data_size = chars;
    else if (f->type_id == FUNNEL_TYPE_BOOL) data_size = bitmap_bytes(rows);
    else data_size = rows * f->byte_width; /* the plan refused an overflow */
    const int has_data = f->nested == FUNNEL__NESTED_NONE;
    const struct {
      int64_t at, size, want;
      int present;
    } regions[3] = {
        {oc->validity, oc->validity_size, nulls > 0 ? bitmap_bytes(rows) : 0, nulls > 0},
        {oc->offsets, oc->offsets_size, f->offset_width ? (rows + 1) * f->offset_width : 0,
         f->offset_width != 0},
        {oc->data, oc->data_size, data_size, has_data},
    };
    for (int k = 0; k < 3; k++) {
      if (!regions[k].present) {
        if (regions[k].at != -1) fail("column %d: buffer %d placed at %lld, not needed", c, k, (long long)regions[k].at);
        continue;
      }
      if (regions[k].size != regions[k].want)
        fail("column %d: buffer %d of %lld bytes, want %lld", c, k, (long long)regions[k].size,
             (long long)regions[k].want);
      if (regions[k].at < end || regions[k].at % FUNNEL__ALIGN != 0 ||
          regions[k].size > plan->out_size - regions[k].at)
        fail("column %d: buffer %d at %lld (+%lld) overlaps, is unaligned or leaves the %lld-byte output",
             c, k, (long long)regions[k].at, (long long)regions[k].size, (long long)plan->out_size);
      end = regions[k].at + regions[k].size;
    }
  }
}

/* [addr, addr + bytes) inside [base, base + size) */
static int inside(uint64_t addr, uint64_t bytes, uint64_t base, uint64_t size) {
  return addr >= base && addr - base <= size && bytes <= size - (addr - base);
}

static void check_segment(const struct funnel__plan *plan, const struct funnel__segment *s,
                          int64_t i, const int64_t *lengths, int n_parts) {
  uint64_t src_bytes = 0, dst_bytes = 0;
  int bits = 0;
  switch (s->kind) {
    case FUNNEL_SEG_BYTES: src_bytes = dst_bytes = s->count; break;
    case FUNNEL_SEG_BITS:
      if (s->src_bit >= 8) fail("segment %lld: source bit %u", (long long)i, s->src_bit);
      src_bytes = (s->src_bit + s->count + 7) / 8;
      bits = 1;
      break;
    case FUNNEL_SEG_ONES:
    case FUNNEL_SEG_ZEROS: bits = 1; break;
    case FUNNEL_SEG_OFFSETS32: src_bytes = dst_bytes = 4 * s->count; break;
    case FUNNEL_SEG_OFFSETS64: src_bytes = dst_bytes = 8 * s->count; break;
    case FUNNEL_SEG_PUT32: dst_bytes = 4; break;
    case FUNNEL_SEG_PUT64: dst_bytes = 8; break;
    default: fail("segment %lld: kind %u", (long long)i, s->kind);
  }
  /* bit kinds write from bit dst_bit of dst on */
  const uint64_t dst = s->dst + (bits ? s->dst_bit / 8 : 0);
  if (bits) dst_bytes = (s->dst_bit % 8 + s->count + 7) / 8;
  if (!inside(dst, dst_bytes, OUT_BASE, (uint64_t)plan->out_size))
    fail("segment %lld (kind %u, count %llu): writes %llu bytes at output byte %lld, the output "
         "is %lld bytes",
         (long long)i, s->kind, (unsigned long long)s->count, (unsigned long long)dst_bytes,
         (long long)(dst - OUT_BASE), (long long)plan->out_size);
  const int reads = s->kind == FUNNEL_SEG_BYTES || s->kind == FUNNEL_SEG_BITS ||
                    s->kind == FUNNEL_SEG_OFFSETS32 || s->kind == FUNNEL_SEG_OFFSETS64;
  const int64_t p = (int64_t)(s->src >> 40) - 1;
  if (reads && (p < 0 || p >= n_parts || !inside(s->src, src_bytes, IN_BASE(p), (uint64_t)lengths[p])))
    fail("segment %lld (kind %u, count %llu): reads %llu bytes at %#llx, outside every partition",
         (long long)i, s->kind, (unsigned long long)s->count, (unsigned long long)src_bytes,
         (unsigned long long)s->src);
}

static void check_segments(const struct funnel__plan *plan, const int64_t *lengths, int n_parts) {
  if (plan->max_segments > MAX_WALKED_SEGMENTS) return;
  uint64_t in_base[MAX_PARTS];
  for (int p = 0; p < n_parts; p++) in_base[p] = IN_BASE(p);
  const int64_t counted = funnel__plan_segments(plan, in_base, OUT_BASE, NULL);
  if (counted > plan->max_segments)
    fail("%lld segments, room for %lld", (long long)counted, (long long)plan->max_segments);
  struct funnel__segment *segs = malloc((size_t)(plan->max_segments ? plan->max_segments : 1) * sizeof(*segs));
  if (segs == NULL) fail("out of memory");
  const int64_t n = funnel__plan_segments(plan, in_base, OUT_BASE, segs);
  if (n != counted) fail("%lld segments written, %lld counted", (long long)n, (long long)counted);
  for (int64_t i = 0; i < n; i++) check_segment(plan, &segs[i], i, lengths, n_parts);
  free(segs);
}

/* The first string piece, in partition order, whose offsets decrease
 * somewhere: a plain loop over every offset. Returns 0 when none. */
static int first_bad_offsets(const struct funnel__plan *plan, const struct funnel__partition *pv,
                             int n_parts, int64_t *part, int *col) {
  for (int p = 0; p < n_parts; p++)
    for (int64_t b = 0; b < pv[p].n_batches; b++)
      for (int c = 0; c < plan->schema->n_fields; c++) {
        const int w = plan->schema->fields[c].offset_width;
        const struct funnel__piece *pc = &pv[p].batches[b].pieces[c];
        if (pc->validity_bits >= 0) { /* the null count is the zero bits */
          int64_t zeros = 0;
          for (int64_t r = 0; r < pc->length; r++)
            zeros += !((pv[p].bytes[pc->validity_bits + r / 8] >> (r % 8)) & 1);
          if (zeros != pc->null_count) {
            *part = p;
            *col = c;
            return 1;
          }
        }
        if (w == 0 || pc->length == 0) continue;
        const uint8_t *o = pv[p].bytes + pc->offsets + pc->start * w;
        int64_t prev = INT64_MIN;
        for (int64_t k = 0; k <= pc->length; k++) {
          int64_t v;
          if (w == 4) {
            int32_t x;
            memcpy(&x, o + 4 * k, 4);
            v = x;
          } else {
            memcpy(&v, o + 8 * k, 8);
          }
          if (v < prev) {
            *part = p;
            *col = c;
            return 1;
          }
          prev = v;
        }
      }
  return 0;
}

/* ------------------------------------------------------------------- run */

/* ----------------------------------------------------------- device path */

static void *zalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (p == NULL) fail("out of memory");
  return p;
}

/* Partition p's pieces as the device parsed them from its decoded
 * buffers (`d`, a column each; `chars`: the string bytes, scanned) hold
 * the bytes the host path decoded (its image, pv->bytes): values, string
 * offsets and bytes, validity bits. A nested read's children are left to
 * the rows and counts compared before. */
static void same_piece_bytes(const struct funnel__partition *pv, int p,
                             const struct funnel__dp_column *cols, int n_cols,
                             const struct funnel__dp_piece *d, const int64_t *chars, int n,
                             bool nested) {
  const int64_t rows = pv->rows;
  for (int c = 0; c < n_cols && !nested; c++) {
    const struct funnel__piece *h = &pv->batches[0].pieces[c];
    const uint8_t *img = pv->bytes;
    if ((d[c].validity != 0) != (h->validity >= 0))
      fail("device parser: partition %d column %d's validity %s, the host path's %s", p, c,
           d[c].validity ? "present" : "absent", h->validity >= 0 ? "present" : "absent");
    if (d[c].validity != 0 &&
        memcmp((const void *)(uintptr_t)d[c].validity, img + h->validity, (size_t)(rows / 8)) != 0)
      fail("device parser: partition %d column %d's validity bits differ from the host path's", p, c);
    const int kind = cols[c].kind;
    int64_t n_bytes = 0;
    const uint8_t *want = NULL;
    if (kind == FUNNEL_DP_FIXED) {
      n_bytes = rows * cols[c].width;
      want = img + h->data;
    } else if (kind == FUNNEL_DP_BOOL) {
      n_bytes = rows / 8;
      want = img + h->data;
    } else if (kind == FUNNEL_DP_VAR32 || kind == FUNNEL_DP_VAR64) {
      const int w = kind == FUNNEL_DP_VAR32 ? 4 : 8;
      if (memcmp((const void *)(uintptr_t)d[c].offsets, img + h->offsets, (size_t)((rows + 1) * w)) != 0)
        fail("device parser: partition %d column %d's string offsets differ from the host path's", p, c);
      const int64_t *at = chars + cols[c].var * (n + 1);
      n_bytes = at[p + 1] - at[p];
      want = img + h->data + h->first_offset;
    }
    if (n_bytes > 0 && memcmp((const void *)(uintptr_t)d[c].data, want, (size_t)n_bytes) != 0)
      fail("device parser: partition %d column %d's values differ from the host path's", p, c);
  }
}

/* The device parser over the partitions, with `schema` (the read's: the
 * reader's, or the first non-empty partition's), and with the template a
 * read would find in them when `with_template` (else every partition
 * walked); `plan` and `pv` are the host path's when it took them
 * (host_ok). */
static void check_device_parse(const struct input *in, const struct funnel__schema *schema,
                               int with_template, int host_ok, const struct funnel__plan *plan,
                               const struct funnel__partition *pv) {
  const int n = in->n_parts;
  int n_cols = schema->n_fields;
  /* a read takes the host path */
  if (n_cols == 0 || (schema->nested && !funnel__dp_nested_fits(schema))) return;
  struct funnel__dp_column *cols = zalloc((size_t)n_cols * sizeof(*cols));
  int n_var, n_buffers;
  funnel__dp_columns_of(schema, cols, &n_var, &n_buffers);
  struct funnel__dp_input inputs[MAX_PARTS];
  for (int p = 0; p < n; p++)
    inputs[p] = (struct funnel__dp_input){(uint64_t)(uintptr_t)in->parts[p], in->lengths[p]};
  struct funnel__dp_piece *pieces = zalloc((size_t)(n * n_cols) * sizeof(*pieces));
  int64_t *rows = zalloc((size_t)(n + 1) * sizeof(int64_t));
  int64_t *chars = zalloc((size_t)(n_var * (n + 1) + 1) * sizeof(int64_t));
  struct funnel__dp_summary *s =
      zalloc(sizeof(*s) + (size_t)(n_cols + n_var) * sizeof(int64_t));
  s->first_left = n;
  struct funnel__dp_bitbuf *bits = zalloc((size_t)(2 * n_cols) * sizeof(*bits));
  const uint64_t out = (uint64_t)1 << 20; /* where the output would lie: never dereferenced */
  struct funnel__dp_args a = {
      .inputs = (uint64_t)(uintptr_t)inputs, .columns = (uint64_t)(uintptr_t)cols,
      .schema = (uint64_t)(uintptr_t)schema->ipc, .pieces = (uint64_t)(uintptr_t)pieces,
      .rows = (uint64_t)(uintptr_t)rows, .chars = (uint64_t)(uintptr_t)chars,
      .summary = (uint64_t)(uintptr_t)s, .bitbufs = (uint64_t)(uintptr_t)bits, .out = out,
      .out_capacity = FUNNEL__MAX_OUTPUT_BYTES, .n_parts = n, .schema_length = schema->ipc_length,
      .max_rows = FUNNEL__MAX_ROWS, .n_cols = n_cols, .n_var = n_var, .n_buffers = n_buffers};
  struct funnel__dp_slice *slices =
      schema->nested ? zalloc((size_t)(n * n_cols) * sizeof(*slices)) : NULL;
  a.slices = (uint64_t)(uintptr_t)slices;
  uint8_t *tmpl = zalloc((size_t)funnel__dp_template_max(schema->ipc_length, n_cols, n_buffers));
  a.tmpl_bytes = (uint64_t)(uintptr_t)tmpl;
  /* the read's codec, as reader.c finds it: compressed bodies (LZ4, ZSTD)
   * are unpacked first */
  int codec = FUNNEL__CODEC_NONE;
  for (int p = 0, tries = 0; p < n && tries < 16; p++) {
    if (in->lengths[p] == 0) continue;
    tries++;
    const int c = funnel__first_batch_codec(in->parts[p], in->lengths[p]);
    if (c != FUNNEL__CODEC_NO_BATCH) {
      codec = c;
      break;
    }
  }
  struct funnel__lz4_job *jobs = NULL;
  uint8_t *zbuf = NULL;
  if (codec == FUNNEL__CODEC_LZ4_FRAME || codec == FUNNEL__CODEC_ZSTD) {
    jobs = zalloc((size_t)n * (size_t)n_buffers * sizeof(*jobs));
    a.zmode = FUNNEL_DP_UNPACK;
    a.zcodec = codec;
    a.zjobs = (uint64_t)(uintptr_t)jobs;
  }
  /* as dread.c finds it: the first non-empty partition that gives one */
  for (int p = 0; p < n && with_template && n_cols > 0; p++)
    if (in->lengths[p] > 0 && funnel__dp_template_of(&a, schema->ipc, in->parts[p], in->lengths[p], tmpl))
      break;
  if (n_cols > 0) funnel__dp_run_cpu(FUNNEL_DP_PARSE, &a, 0, n, 1); /* one lane */
  if (n_cols > 0 && a.zmode == FUNNEL_DP_UNPACK) {
    /* the decoded buffers (a read allocates what the pass reserved; here
     * as much as the host's images may take), decoded, then parsed again */
    if (s->left == 0 && s->zbytes <= ((int64_t)64 << 20)) {
      zbuf = zalloc((size_t)s->zbytes);
      /* as the read's decoder runs them (the cpu backend: LZ4 jobs in its
       * ways): the ZSTD one runs LZ4 jobs too, in one way */
      funnel__lz4_run_jobs(jobs, (int64_t)n * n_buffers, (uint64_t)(uintptr_t)zbuf,
                           codec == FUNNEL__CODEC_ZSTD ? 1 : FUNNEL__LZ4_CPU_WAYS);
      if (codec == FUNNEL__CODEC_ZSTD)
        funnel__zstd_run_jobs(jobs, (int64_t)n * n_buffers, (uint64_t)(uintptr_t)zbuf);
      memset(s, 0, sizeof(*s) + (size_t)(n_cols + n_var) * sizeof(int64_t));
      s->first_left = n;
      a.zmode = FUNNEL_DP_DECODED;
      a.zscratch = (uint64_t)(uintptr_t)zbuf;
      funnel__dp_run_cpu(FUNNEL_DP_PARSE, &a, 0, n, 1);
    } else if (s->left == 0) {
      s->left = 1; /* as the read leaves it */
      s->first_left = 0;
    }
  }
  /* as a read does: the parse of a whole read of few partitions scans */
  if (n_cols > 0 && a.zmode != FUNNEL_DP_UNPACK && !FUNNEL__DP_PARSE_SCANS(n, 0, n))
    funnel__dp_run_cpu(FUNNEL_DP_SCAN, &a, 0, 1 + n_var, n);
  const int64_t *nulls = (const int64_t *)(s + 1), *var_bytes = nulls + n_cols;
  if (n_cols == 0) {
    /* nothing the device path parses */
  } else if (s->left == 0) {
    if (!host_ok) fail("the device parser took partitions the host path rejects");
    if (s->rows != plan->rows || s->batches != plan->batches)
      fail("device parser: %lld rows in %lld batches, the host path %lld in %lld",
           (long long)s->rows, (long long)s->batches, (long long)plan->rows,
           (long long)plan->batches);
    for (int c = 0; c < n_cols; c++) {
      if (nulls[c] != plan->columns[c].null_count)
        fail("device parser: column %d has %lld nulls, the host path %lld", c,
             (long long)nulls[c], (long long)plan->columns[c].null_count);
      /* a list's "string bytes" are its child's rows */
      const bool list = cols[c].kind == FUNNEL_DP_LIST32 || cols[c].kind == FUNNEL_DP_LIST64;
      const int64_t want = list ? plan->columns[c + 1].length : plan->columns[c].data_size;
      if (cols[c].var >= 0 && var_bytes[cols[c].var] != want)
        fail("device parser: column %d has %lld string bytes or child rows, the host path %lld", c,
             (long long)var_bytes[cols[c].var], (long long)want);
    }
    /* the device's layout of the output is the host's */
    if (!s->laid_out || s->out_size != plan->out_size)
      fail("device layout: %s, %lld bytes; the host path %lld", s->laid_out ? "laid out" : "not laid out",
           (long long)s->out_size, (long long)plan->out_size);
    int64_t n_bits = 0;
    for (int c = 0; c < n_cols; c++) {
      const struct funnel__out_column *oc = &plan->columns[c];
      const uint64_t v = oc->validity >= 0 ? out + (uint64_t)oc->validity : 0;
      const uint64_t o = oc->offsets >= 0 ? out + (uint64_t)oc->offsets : 0;
      const uint64_t dt = oc->data >= 0 ? out + (uint64_t)oc->data : 0;
      if (cols[c].validity != v || cols[c].offsets != o || cols[c].data != dt)
        fail("device layout: column %d's buffers lie elsewhere than the host path lays them", c);
      n_bits += (v != 0) + (cols[c].kind == FUNNEL_DP_BOOL);
    }
    if (a.n_bitbufs != n_bits)
      fail("device layout: %lld bit buffers, the host path's layout has %lld", (long long)a.n_bitbufs,
           (long long)n_bits);
    for (int p = 0; p < n; p++) {
      if (rows[p + 1] - rows[p] != pv[p].rows)
        fail("device parser: partition %d has %lld rows, the host path %lld", p,
             (long long)(rows[p + 1] - rows[p]), (long long)pv[p].rows);
      if (pv[p].rows == 0) continue;
      if (pv[p].n_batches != 1) fail("device parser: took partition %d of %lld batches", p, (long long)pv[p].n_batches);
      if (pv[p].decoded) { /* the bytes the device decoded, where the host decoded them */
        same_piece_bytes(&pv[p], p, cols, n_cols, pieces + p * n_cols, chars, n, schema->nested);
        continue;
      }
      const uint64_t base = (uint64_t)(uintptr_t)in->parts[p];
      for (int c = 0; c < n_cols; c++) {
        const struct funnel__piece *h = &pv[p].batches[0].pieces[c];
        const struct funnel__dp_piece *d = &pieces[p * n_cols + c];
        const uint64_t validity = h->validity >= 0 ? base + (uint64_t)h->validity : 0;
        /* where the part of the node the table takes starts (a nested child's) */
        const int w = cols[c].kind == FUNNEL_DP_VAR32 || cols[c].kind == FUNNEL_DP_LIST32 ? 4 : 8;
        const int64_t at = cols[c].kind == FUNNEL_DP_FIXED ? h->start * cols[c].width
                           : cols[c].var >= 0 && cols[c].kind <= FUNNEL_DP_VAR64 ? h->first_offset
                                                                                  : 0;
        const uint64_t data = h->data >= 0 ? base + (uint64_t)(h->data + at) : 0;
        if (d->validity != validity || d->data != data || d->null_count != h->null_count ||
            (cols[c].var >= 0 && (d->offsets != base + (uint64_t)(h->offsets + h->start * w) ||
                                  d->first != h->first_offset)) ||
            (slices != NULL && slices[p * n_cols + c].start != h->start))
          fail("device parser: partition %d column %d's buffers lie elsewhere than the host path found", p, c);
      }
    }
  } else if (s->first_left < 0 || s->first_left >= n) {
    fail("device parser: %lld partitions left, the first %lld of %d", (long long)s->left,
         (long long)s->first_left, n);
  }
  free(tmpl);
  free(jobs);
  free(zbuf);
  free(slices);
  free(cols);
  free(bits);
  free(pieces);
  free(rows);
  free(chars);
  free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct input in;
  valid_wanted = expect_valid && size > 0;
  input_split(data, size, &in);
  struct funnel__arena arena = {0};
  struct funnel_error err;
  memset(&err, 0, sizeof(err));
  struct funnel__partition pv[MAX_PARTS];
  memset(pv, 0, sizeof(pv));

  struct funnel__schema reader_schema;
  const struct funnel__schema *schema = NULL;
  int st = FUNNEL_OK;
  if (in.reader_schema) {
    st = funnel__schema_parse(in.schema, in.schema_length, &arena, &reader_schema, &err);
    if (st != FUNNEL_OK) check_rejection(PHASE_SCHEMA, st, &err, &in);
    else schema = &reader_schema;
  }
  /* as a read parses: an empty partition is an empty shuffle block */
  const struct funnel__schema *known = schema;
  /* the device path's schema: the reader's, or the first non-empty
   * partition's when it parses and has one (else a read takes the host path) */
  const struct funnel__schema *device_schema = schema;
  int first = -1;
  for (int p = 0; p < in.n_parts && st == FUNNEL_OK; p++) {
    if (in.lengths[p] == 0) continue;
    st = in.known ? funnel__partition_parse_known(in.parts[p], in.lengths[p], p, known, &arena, &pv[p], &err)
                  : funnel__partition_parse(in.parts[p], in.lengths[p], p, &arena, &pv[p], &err);
    if (st != FUNNEL_OK) check_rejection(PHASE_PARSE, st, &err, &in);
    else if (known == NULL) known = pv[p].schema;
    if (first < 0) {
      first = p;
      if (device_schema == NULL && st == FUNNEL_OK) device_schema = pv[p].schema;
    }
  }
  /* the device's LZ4 decoder over each LZ4 buffer the partitions hold,
   * before the host decodes them (its bytes compared after) */
  struct dd_try dd[MAX_DD];
  int n_dd = 0;
  for (int p = 0; p < in.n_parts && st == FUNNEL_OK; p++)
    if (in.lengths[p] > 0 && pv[p].image_length > 0) device_decode(&pv[p], p, dd, &n_dd);
  /* compressed bodies decoded as a read decodes them, each partition into
   * an image of exactly its size (ASan sees a write past it); the plan
   * then reads the images */
  uint8_t *images[MAX_PARTS] = {NULL};
  int64_t read_lengths[MAX_PARTS];
  for (int p = 0; p < in.n_parts; p++) read_lengths[p] = in.lengths[p];
  const struct funnel__schema *decode_schema = known != NULL ? known : schema;
  for (int p = 0; p < in.n_parts && st == FUNNEL_OK; p++) {
    if (in.lengths[p] == 0 || pv[p].image_length == 0) continue;
    if (pv[p].image_length > ((int64_t)64 << 20)) { /* declared, not decoded: as a limit */
      st = FUNNEL_ERR_LIMIT;
      break;
    }
    images[p] = malloc((size_t)pv[p].image_length);
    struct funnel__decoder dec = {0};
    st = funnel__partition_decode(decode_schema, &pv[p], p, images[p], &dec, &err);
    funnel__decoder_free(&dec);
    if (st != FUNNEL_OK) check_rejection(PHASE_DECODE, st, &err, &in);
    else read_lengths[p] = pv[p].length;
  }
  for (int i = 0; i < n_dd; i++) {
    const struct dd_try *d = &dd[i];
    const struct funnel__partition *part = &pv[d->part];
    if (st == FUNNEL_OK && part->decoded && d->status == FUNNEL__LZ4_OK) {
      const struct funnel__batch *b = &part->batches[d->batch];
      const int64_t at = (int64_t)funnel__ld64(b->dbuffers + 16 * d->k);
      if (memcmp(d->whole, images[d->part] + b->dbody + at, (size_t)d->want) != 0)
        fail("the device's %s decoder: partition %d batch %d buffer %d decoded to other bytes "
             "than the host's library", b->codec == FUNNEL__CODEC_ZSTD ? "ZSTD" : "LZ4", d->part,
             d->batch, d->k);
      if (d->blocks > 0 && d->blocks_ok &&
          memcmp(d->split, images[d->part] + b->dbody + at, (size_t)d->want) != 0)
        fail("the device's LZ4 decoder, a block a job: partition %d batch %d buffer %d decoded "
             "to other bytes than liblz4's", d->part, d->batch, d->k);
    }
    free(d->whole);
    free(d->split);
    free(d->ways);
  }
  struct funnel__plan plan;
  if (st == FUNNEL_OK) {
    st = funnel__plan_build(schema, pv, in.n_parts, in.chunk_bytes, &arena, &plan, &err);
    funnel__decoded_error(pv, in.n_parts, &err);
    if (st != FUNNEL_OK) check_rejection(PHASE_PLAN, st, &err, &in);
  }
  if (st == FUNNEL_OK) {
    check_layout(&plan, pv, in.n_parts);
    check_segments(&plan, read_lengths, in.n_parts);
    int64_t bad_part = -1;
    int bad_col = -1;
    const int bad = first_bad_offsets(&plan, pv, in.n_parts, &bad_part, &bad_col);
    st = funnel__plan_check_pieces(&plan, &err);
    funnel__decoded_error(pv, in.n_parts, &err);
    if (st != FUNNEL_OK) check_rejection(PHASE_OFFSETS, st, &err, &in);
    if (!bad && st != FUNNEL_OK) fail("pieces rejected, offsets all rise and null counts all match: %s", err.message);
    if (bad && st == FUNNEL_OK)
      fail("pieces accepted, partition %lld column %d has a falling offset or a wrong null count", (long long)bad_part, bad_col);
    if (bad && (err.partition != bad_part || err.column != bad_col))
      fail("offsets: error names partition %lld column %lld, the first bad piece is %lld, %d: %s",
           (long long)err.partition, (long long)err.column, (long long)bad_part, bad_col, err.message);
  }
  if (device_schema != NULL && in.n_parts > 0 && !(first < 0 && schema == NULL))
    for (int with_template = 0; with_template < 2; with_template++)
      check_device_parse(&in, device_schema, with_template, st == FUNNEL_OK, &plan, pv);
  for (int p = 0; p < in.n_parts; p++) free(images[p]);
  funnel__arena_free(&arena);
  input_free(&in);
  return 0;
}
