/* funnel_bench.c: the shuffle-read benchmark.
 *
 * For each workload shape (P partitions x C columns x R rows per partition)
 * and column mix, P partitions are generated once as real Arrow IPC streams
 * (Schema + one RecordBatch + EOS, written by tests/native/ipc_writer),
 * outside every timed region. Each strategy then turns those host bytes into
 * data in device memory, timed end to end (host bytes in, device data ready):
 *
 *   funnel       funnel_reader_read_async + funnel_table_wait
 *   link         one copy of the same number of bytes: the physical limit
 *   floor        what any read costs at least: one stream-ordered device
 *                allocation, one copy of the bytes from pinned memory, one
 *                empty kernel, an event record and wait
 *   naive        one synchronous copy per column buffer per partition, into
 *                one preallocated device buffer (the pattern of cudf #2881)
 *   host_concat  memcpy every column piece to its final place in one pinned
 *                host buffer (one thread), then one copy
 *   host_stage   pageable sources only, and no device: the bytes staged
 *                into pinned memory as funnel stages them (its host threads);
 *                by default with --devices alone, where it shows what the
 *                host's memory allows processes that stage at once
 *
 * Compression is a dimension of a workload (--compress): the same columns
 * written with each buffer of the RecordBatch compressed (LZ4_FRAME as
 * Arrow Java writes it, 4 MiB independent blocks and a content checksum; or
 * ZSTD at level 3, Arrow Java's default; a buffer that does not shrink goes
 * raw, as both Arrow writers do). Random bytes do not compress, shuffle data
 * does: a compressed workload draws its values as such data has them (int32
 * codes from a small skewed domain, int64 timestamps within a day, float64
 * prices in quarters, bools mostly true, strings from a vocabulary of 1024
 * words), and its rows report the ratio measured, the partitions' bytes
 * written plain over their bytes compressed. The uncompressed workloads keep
 * the random values they always had, so their results stay comparable. On a
 * compressed row:
 *
 *   funnel       as FUNNEL_DECODE_AUTO decides, or FUNNEL_DECODE in the
 *                environment says (its decode time and bytes are printed
 *                under its row)
 *   funnel_host_decode  every buffer decoded on the host threads into the
 *                pinned pool, one copy up (FUNNEL_DECODE_HOST)
 *   funnel_gpu_decode  the values' frames go up compressed and the device
 *                decodes them (FUNNEL_DECODE_DEVICE: LZ4 and ZSTD)
 *   host_decompress_concat  what a plugin does today, as a lower bound: one
 *                thread decompresses every buffer (iw_decompress_buffer:
 *                liblz4, libzstd) straight to its final place in one pinned
 *                host buffer, then one copy. It parses no header (the
 *                buffers' places are known), allocates nothing, writes no
 *                intermediate batch (a plugin decompresses into buffers of
 *                its own, then copies them), and neither rebases offsets nor
 *                shifts validity bits. It keeps one codec context of each
 *                kind for all its buffers (iw_decompress_buffer)
 *   link         one copy of the uncompressed bytes (the partitions written
 *                plain): what reading them uncompressed costs at least
 *   link_compressed  one copy of the compressed bytes: the limit of a read
 *                that decodes on the device
 *   floor        as above, of the compressed bytes
 *
 * and MiB and GB/s are of the uncompressed bytes, what every strategy
 * delivers (the CSV's gb_per_s stays of the partitions' bytes, beside
 * effective_gb_per_s). naive, host_concat and batched_scatter only move
 * bytes: they do not apply to compressed rows.
 *
 * from two sources: partitions in pinned memory (funnel's pinned pool) and
 * in pageable (malloc'd) memory. The baselines call the backend through the
 * same funnel__dev_* wrappers funnel uses, on their own instance of the
 * device's backend, so the driver calls of every strategy are counted alike
 * (funnel__calls_now, per thread; everything here runs on the main thread).
 *
 * The baselines only move bytes: they neither rebase string offsets nor
 * shift validity bits, so what they leave on the device is not a valid
 * table. That makes them lower bounds on the cost of each pattern, which is
 * the conservative side for funnel.
 *
 * The run ends with the targets, each judged by name from ratios measured
 * in the same run (judge_workload).
 *
 *   cmake -S . -B build -DFUNNEL_WITH_JNI=OFF && cmake --build build -j
 *   build/funnel_bench --quick                  # about a minute on cpu
 *   build/funnel_bench --spark --mix mixed      # the Spark regime's grid
 *   build/funnel_bench --shape 200x10x10k --mix strings --json out.jsonl
 *   build/funnel_bench --spark --compress lz4   # the Spark grid, compressed
 *   build/funnel_bench --large                  # with 200 MiB compressed reads
 *   build/funnel_bench --help */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <signal.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "device.h"
#include "ipc_writer.h"
#include "read.h" /* funnel__stage_bytes */

#define WARMUP 2
#define MAX_SHAPES 256
#define MAX_DEVICES 16

/* ------------------------------------------------------------- utilities */

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("funnel_bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) die("out of host memory (%zu bytes)", n);
  return p;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (p == NULL) die("out of host memory");
  return p;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

static int64_t read_i64(const uint8_t *p) {
  int64_t v;
  memcpy(&v, p, 8);
  return v;
}

static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* "1000", "10k", "1M" (rows: powers of 1000) or "512M", "1G" (bytes: powers
 * of 1024, with `unit` 1024). Returns 0 on a malformed or non-positive value. */
static int64_t parse_count(const char *s, int64_t unit) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || v <= 0) return 0;
  int64_t mult = 1;
  switch (tolower((unsigned char)*end)) {
    case '\0': break;
    case 'k': mult = unit; end++; break;
    case 'm': mult = unit * unit; end++; break;
    case 'g': mult = unit * unit * unit; end++; break;
    default: return 0;
  }
  if (*end == 'i' || *end == 'I') end++; /* "MiB" */
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0' || v > INT64_MAX / mult) return 0;
  return v * mult;
}

/* ------------------------------------------------------------- workloads */

/* The column mixes: int64 (no nulls), mixed (int32, int64, float64, bool
 * in turn), strings (utf8 and int64 in turn) and nested (list<int64>,
 * list<utf8>, struct<a: int32, b: utf8>, map<utf8, int64> in turn); all but
 * int64 with about 10% nulls, at every level that may have them. */
enum { MIX_INT64, MIX_MIXED, MIX_STRINGS, MIX_NESTED, N_MIXES };
static const char *const MIX_NAMES[N_MIXES] = {"int64", "mixed", "strings", "nested"};

/* How the partitions' bodies are written: the numbers are iw_options'
 * compression (RecordBatch BodyCompression's codec + 1). */
enum { CODEC_NONE, CODEC_LZ4, CODEC_ZSTD, N_CODECS };
static const char *const CODEC_NAMES[N_CODECS] = {"none", "lz4", "zstd"};
/* How LZ4 frames are written (--lz4-frames): IW_LZ4_JAVA (Arrow Java's
 * arrow-compression: 4 MiB blocks, a content checksum) or IW_LZ4_SPARK
 * (the funnel shuffle's lz4-java: 64 KiB blocks, no checksum). */
static int lz4_frames = IW_LZ4_JAVA;

enum { SRC_PINNED, SRC_PAGEABLE, N_SOURCES };
static const char *const SOURCE_NAMES[N_SOURCES] = {"pinned", "pageable"};

struct shape {
  int parts, cols;
  int64_t rows; /* per partition */
};

static void shape_name(const struct shape *s, char *buf, size_t size) {
  snprintf(buf, size, "%dx%dx%lld", s->parts, s->cols, (long long)s->rows);
}

/* One shape, mix and codec to measure. */
struct job {
  struct shape shape;
  int mix;
  int codec;
  int64_t est_bytes; /* uncompressed */
};

/* "mixed", or "mixed/lz4" for a compressed workload: the tables' mix. */
static void mix_label(int mix, int codec, char *buf, size_t size) {
  snprintf(buf, size, "%s%s%s", MIX_NAMES[mix], codec ? "/" : "", codec ? CODEC_NAMES[codec] : "");
}

/* The nested mix's children. A map's entries and keys are never null (the
 * format says so, and funnel refuses a null key), its values may be. */
static const struct iw_field NESTED_LIST_INT64[] = {
    {.type = FUNNEL_TYPE_INT64, .name = "item", .nullable = 1}};
static const struct iw_field NESTED_LIST_UTF8[] = {
    {.type = FUNNEL_TYPE_UTF8, .name = "item", .nullable = 1}};
static const struct iw_field NESTED_STRUCT[] = {
    {.type = FUNNEL_TYPE_INT32, .name = "a", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "b", .nullable = 1}};
static const struct iw_field NESTED_MAP_KV[] = {
    {.type = FUNNEL_TYPE_UTF8, .name = "key", .nullable = 0},
    {.type = FUNNEL_TYPE_INT64, .name = "value", .nullable = 1}};
static const struct iw_field NESTED_MAP[] = {
    {.type = FUNNEL_TYPE_STRUCT, .name = "entries", .nullable = 0, .n_children = 2,
     .children = NESTED_MAP_KV}};

/* Top-level column c of a mix (its name is the workload's). */
static struct iw_field mix_field(int mix, int c) {
  static const int cycle[4] = {FUNNEL_TYPE_INT32, FUNNEL_TYPE_INT64, FUNNEL_TYPE_FLOAT64,
                               FUNNEL_TYPE_BOOL};
  static const struct iw_field nested[4] = {
      {.type = FUNNEL_TYPE_LIST, .n_children = 1, .children = NESTED_LIST_INT64},
      {.type = FUNNEL_TYPE_LIST, .n_children = 1, .children = NESTED_LIST_UTF8},
      {.type = FUNNEL_TYPE_STRUCT, .n_children = 2, .children = NESTED_STRUCT},
      {.type = FUNNEL_TYPE_MAP, .n_children = 1, .children = NESTED_MAP}};
  struct iw_field f = {.type = FUNNEL_TYPE_INT64};
  if (mix == MIX_MIXED) f.type = cycle[c % 4];
  if (mix == MIX_STRINGS && c % 2 == 0) f.type = FUNNEL_TYPE_UTF8;
  if (mix == MIX_NESTED) f = nested[c % 4];
  f.nullable = mix != MIX_INT64;
  return f;
}

/* A field's nodes: itself and its children's, as the table lists them. */
static int field_nodes(const struct iw_field *f) {
  int n = 1;
  for (int k = 0; k < f->n_children; k++) n += field_nodes(&f->children[k]);
  return n;
}

static int mix_null_permille(int mix) { return mix == MIX_INT64 ? 0 : 100; }

#define STRING_MIN 8
#define STRING_MAX 64
/* the nested mix's lists and maps: 0 to 4 items a valid row, nulls empty */
#define LIST_MAX 4

/* Bytes per row of a field and its children, to skip shapes over
 * --max-bytes before generating them (the real sizes are measured once
 * generated). `nulls`: the mix draws nulls, 1 in 10 rows where the field
 * may have them, and a null string or list is empty. */
static double field_bytes_per_row(const struct iw_field *f, int nulls) {
  const int nullable = f->nullable && nulls;
  const double validity = nullable ? 0.125 : 0, valid = nullable ? 0.9 : 1;
  switch (f->type) {
    case FUNNEL_TYPE_BOOL: return 0.125 + validity;
    case FUNNEL_TYPE_UTF8: return 4 + valid * (STRING_MIN + STRING_MAX) / 2.0 + validity;
    case FUNNEL_TYPE_LIST:
    case FUNNEL_TYPE_MAP:
      return 4 + validity + valid * LIST_MAX / 2.0 * field_bytes_per_row(&f->children[0], nulls);
    case FUNNEL_TYPE_STRUCT: {
      double b = validity;
      for (int k = 0; k < f->n_children; k++) b += field_bytes_per_row(&f->children[k], nulls);
      return b;
    }
    default: return iw_value_width(f) + validity;
  }
}

static int64_t estimate_bytes(struct shape s, int mix) {
  double per_row = 0;
  int nodes = 0;
  for (int c = 0; c < s.cols; c++) {
    const struct iw_field f = mix_field(mix, c);
    per_row += field_bytes_per_row(&f, mix_null_permille(mix) > 0);
    nodes += field_nodes(&f);
  }
  /* metadata: the schema and batch headers, buffer padding, EOS */
  const double per_part = (double)s.rows * per_row + 512.0 + 200.0 * nodes;
  return (int64_t)(per_part * s.parts);
}

/* A column buffer (validity, offsets or data) inside one partition.
 * Compressed: `length` bytes of prefix and frame that decode to
 * `raw_length` (else the two are equal). */
struct piece {
  int64_t offset, length;
  int64_t raw_length;
};

/* A generated shape: the partitions, where each column buffer lies in them,
 * and what the result must hold. */
struct workload {
  struct shape shape;
  int mix;
  int codec;
  struct iw_field *fields;
  char *names; /* 16 bytes per column */
  struct iw_schema schema;
  const struct iw_field **nodes; /* the schema's nodes, depth first: the table's columns */
  int n_nodes;
  int *top;           /* top-level column c is nodes[top[c]] (c itself in a flat mix) */
  int n_bufs;         /* column buffers per partition, over every node */
  int64_t *part_off;  /* partition p: region[part_off[p], + part_len[p]) */
  int64_t *part_len;
  int64_t region_size;
  int64_t total_bytes; /* sum of part_len: the bytes every strategy brings over */
  struct piece *pieces; /* [p * n_bufs + k], within partition p */
  int64_t *dst;         /* [p * n_bufs + k]: its place in the concatenated layout */
  int64_t concat_bytes; /* size of that layout */
  uint8_t *pageable;    /* the region, malloc'd */
  uint8_t *pinned;      /* a copy of the region in funnel's pinned pool, or NULL */
  struct funnel_partition *parts[N_SOURCES];
  int64_t *expect0;     /* int64 mix: column 0, every partition in order */
  int64_t out_bytes;    /* bytes of funnel's result (from the verifying read) */
  int64_t *nulls;       /* per top-level column */
  uint64_t *fp;         /* flat mixes: per top-level column, its rows' fingerprint */
  /* compressed: the same partitions written plain, back to back (the
   * pageable source of the link of the uncompressed bytes), and the layout
   * host_decompress_concat decodes into */
  uint8_t *raw;
  int64_t raw_bytes;    /* their bytes (total_bytes when not compressed) */
  int64_t *raw_dst;     /* [p * n_bufs + k]: its decoded place */
  int64_t raw_concat_bytes;
  /* uncompressed: the bytes of the 32-byte sectors (the memory's unit of
   * transfer) that hold the pieces' bytes, each sector counted once, where
   * the region lies as in device memory (0: not counted) */
  int64_t piece_sector_bytes;
};

/* The bytes a strategy delivers: the uncompressed ones. */
static double compression_ratio(const struct workload *w) {
  return w->total_bytes > 0 ? (double)w->raw_bytes / (double)w->total_bytes : 1;
}

/* iw_col_random draws strings of 0 to 8 bytes; the issue asks for 8 to 64:
 * keep its validity, redraw the lengths (nulls empty, as writers make them)
 * and the characters, eight per draw because this is the slow part of
 * generating the big shapes. */
static void redraw_strings(struct iw_col *col, uint64_t *rng) {
  int64_t total = 0;
  for (int64_t r = 0; r < col->rows; r++) {
    if (col->valid[r])
      total += STRING_MIN + (int64_t)check_rand_below(rng, STRING_MAX - STRING_MIN + 1);
    col->ends[r] = total;
  }
  free(col->chars);
  col->chars = xmalloc((size_t)total);
  for (int64_t i = 0; i < total; i += 8) {
    uint64_t x = check_rand(rng);
    for (int k = 0; k < 8 && i + k < total; k++, x >>= 8)
      col->chars[i + k] = (uint8_t)('a' + (x & 0xFF) % 26);
  }
}

/* The compressed workloads' values, drawn as shuffle data has them: random
 * bytes do not compress, and no compressed column is random bytes. Skewed:
 * the smaller of two uniform draws, so the small values are the common ones
 * (a few codes, prices and words make most rows, as in real columns). */
static uint64_t skewed(uint64_t *rng, uint64_t n) {
  const uint64_t a = check_rand_below(rng, n), b = check_rand_below(rng, n);
  return a < b ? a : b;
}

/* The strings' vocabulary: VOCABULARY words of STRING_MIN to STRING_MAX
 * letters (names, cities, product titles), the same in every run. */
#define VOCABULARY 1024
static uint8_t vocab_chars[VOCABULARY * STRING_MAX];
static int64_t vocab_end[VOCABULARY];

static void vocabulary_init(void) {
  if (vocab_end[VOCABULARY - 1] != 0) return;
  uint64_t rng = 0x70CAB;
  int64_t at = 0;
  for (int i = 0; i < VOCABULARY; i++) {
    const int64_t len = STRING_MIN + (int64_t)check_rand_below(&rng, STRING_MAX - STRING_MIN + 1);
    for (int64_t k = 0; k < len; k++)
      vocab_chars[at + k] = (uint8_t)('a' + check_rand_below(&rng, 26));
    at += len;
    vocab_end[i] = at;
  }
}

/* Rows arrive grouped (the rows of one order, customer or day together):
 * half of a column's rows repeat the value of the row before. */
static int repeats(int64_t r, uint64_t *rng) { return r > 0 && check_rand_below(rng, 2) == 0; }

/* Redraws a column's values as shuffle data has them; keeps its validity
 * (nulls empty strings). int32: codes below 1000; int64: timestamps (ms)
 * within a day, to the second; float64: prices in quarters up to 5000;
 * bool: 9 in 10 true; utf8: words of the vocabulary. On 200x10x20k mixed
 * and 200x10x5k strings LZ4 makes about 2.4x of them, ZSTD about 4x. */
static void shuffle_values(struct iw_col *col, uint64_t *rng) {
  const int64_t rows = col->rows;
  const int width = iw_value_width(&col->field);
  for (int64_t r = 0; r < rows && width > 0; r++) {
    if (repeats(r, rng)) {
      memcpy(col->values + width * r, col->values + width * (r - 1), (size_t)width);
      continue;
    }
    if (col->field.type == FUNNEL_TYPE_INT32) {
      const int32_t v = (int32_t)skewed(rng, 1000);
      memcpy(col->values + 4 * r, &v, 4);
    } else if (col->field.type == FUNNEL_TYPE_INT64) {
      const int64_t v = 1700000000000LL + 1000 * (int64_t)skewed(rng, 86400);
      memcpy(col->values + 8 * r, &v, 8);
    } else if (col->field.type == FUNNEL_TYPE_FLOAT64) {
      const double v = (double)(skewed(rng, 20000) + 1) / 4.0;
      memcpy(col->values + 8 * r, &v, 8);
    } else {
      die("no shuffle values for type %d", col->field.type);
    }
  }
  switch (col->field.type) {
    case FUNNEL_TYPE_INT32:
    case FUNNEL_TYPE_INT64:
    case FUNNEL_TYPE_FLOAT64:
      return;
    case FUNNEL_TYPE_BOOL:
      for (int64_t r = 0; r < rows; r++) col->values[r] = check_rand_below(rng, 10) != 0;
      return;
    case FUNNEL_TYPE_UTF8: {
      vocabulary_init();
      int *word = xmalloc((size_t)rows * sizeof(int));
      int64_t total = 0;
      for (int64_t r = 0; r < rows; r++) {
        word[r] = repeats(r, rng) ? word[r - 1] : (int)skewed(rng, VOCABULARY);
        if (col->valid[r]) total += vocab_end[word[r]] - (word[r] ? vocab_end[word[r] - 1] : 0);
        col->ends[r] = total;
      }
      free(col->chars);
      col->chars = xmalloc((size_t)total);
      for (int64_t r = 0; r < rows; r++) {
        const int64_t at = iw_col_start(col, r);
        if (col->ends[r] > at)
          memcpy(col->chars + at, vocab_chars + (word[r] ? vocab_end[word[r] - 1] : 0),
                 (size_t)(col->ends[r] - at));
      }
      free(word);
      return;
    }
    default: die("no shuffle values for type %d", col->field.type);
  }
}

/* A fingerprint of a flat column's rows, in order: the generator's from
 * its rows (fp_col), the verifying read's from the table funnel made
 * (fp_table_column), each walking its own layout. */
#define FP_NULL 0x9E3779B97F4A7C15ULL
static uint64_t fp_mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x100000001B3ULL;
  return h ^ (h >> 31);
}

static uint64_t fp_bytes(uint64_t h, const uint8_t *p, int64_t n) {
  h = fp_mix(h, (uint64_t)n);
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t v = 0;
    memcpy(&v, p + i, n - i < 8 ? (size_t)(n - i) : 8);
    h = fp_mix(h, v);
  }
  return h;
}

static uint64_t fp_col(uint64_t h, const struct iw_col *c) {
  const int width = iw_value_width(&c->field);
  for (int64_t r = 0; r < c->rows; r++) {
    if (!c->valid[r]) h = fp_mix(h, FP_NULL);
    else if (c->field.type == FUNNEL_TYPE_UTF8)
      h = fp_bytes(h, c->chars + iw_col_start(c, r), c->ends[r] - iw_col_start(c, r));
    else if (c->field.type == FUNNEL_TYPE_BOOL) h = fp_mix(h, c->values[r]);
    else h = fp_bytes(h, c->values + width * r, width);
  }
  return h;
}

/* One node of a nested batch as generated: its buffers, malloc'd, in the
 * layout the format gives them (offsets from 0, nulls empty). */
struct nested_node {
  int64_t length, null_count;
  uint8_t *valid;   /* bits; NULL when no row is null */
  int32_t *off;     /* lists, maps and strings: length + 1 */
  uint8_t *data;    /* values or characters */
  int64_t data_len;
};

static int nested_valid(const struct nested_node *n, int64_t r) {
  return n->valid == NULL || ((n->valid[r >> 3] >> (r & 7)) & 1);
}

/* Characters 'a' to 'z', eight per draw as in redraw_strings. */
static void random_letters(uint8_t *out, int64_t n, uint64_t *rng) {
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t x = check_rand(rng);
    for (int k = 0; k < 8 && i + k < n; k++, x >>= 8) out[i + k] = (uint8_t)('a' + (x & 0xFF) % 26);
  }
}

/* Writes node i's `rows` rows and its children's into g[]; returns the
 * index after its subtree. The bench's own generator, of the layout a
 * plain writer gives (tests/native/test_nested.c's makes the odd ones):
 * about 10% nulls at every nullable level (a map's entries and keys are
 * not), lists and maps of 0 to LIST_MAX items a valid row, strings of
 * STRING_MIN to STRING_MAX bytes as in the strings mix. */
static int gen_nested(const struct workload *w, struct nested_node *g, int i, int64_t rows,
                      uint64_t *rng) {
  const struct iw_field *f = w->nodes[i];
  struct nested_node *n = &g[i];
  n->length = rows;
  if (f->nullable) {
    n->valid = xcalloc((size_t)(rows + 7) / 8, 1);
    for (int64_t r = 0; r < rows; r++) {
      if ((int)check_rand_below(rng, 1000) >= mix_null_permille(w->mix))
        n->valid[r >> 3] |= (uint8_t)(1u << (r & 7));
      else
        n->null_count++;
    }
    /* no validity buffer when nothing is null, as the flat mixes write it */
    if (n->null_count == 0) {
      free(n->valid);
      n->valid = NULL;
    }
  }
  switch (f->type) {
    case FUNNEL_TYPE_INT32:
    case FUNNEL_TYPE_INT64: {
      n->data_len = rows * iw_value_width(f);
      n->data = xmalloc((size_t)n->data_len);
      for (int64_t at = 0; at < n->data_len; at += 8) {
        const uint64_t x = check_rand(rng);
        memcpy(n->data + at, &x, n->data_len - at < 8 ? (size_t)(n->data_len - at) : 8);
      }
      return i + 1;
    }
    case FUNNEL_TYPE_UTF8:
    case FUNNEL_TYPE_LIST:
    case FUNNEL_TYPE_MAP: {
      const int utf8 = f->type == FUNNEL_TYPE_UTF8;
      n->off = xmalloc((size_t)(rows + 1) * sizeof(int32_t));
      int64_t total = 0;
      n->off[0] = 0;
      for (int64_t r = 0; r < rows; r++) {
        if (nested_valid(n, r))
          total += utf8 ? STRING_MIN + (int64_t)check_rand_below(rng, STRING_MAX - STRING_MIN + 1)
                        : (int64_t)check_rand_below(rng, LIST_MAX + 1);
        /* int32 offsets: a partition this big is over any sane --max-bytes */
        if (total > INT32_MAX) die("a nested column of over 2^31 items or bytes in a partition");
        n->off[r + 1] = (int32_t)total;
      }
      if (!utf8) return gen_nested(w, g, i + 1, total, rng);
      n->data_len = total;
      n->data = xmalloc((size_t)total);
      random_letters(n->data, total, rng);
      return i + 1;
    }
    case FUNNEL_TYPE_STRUCT: {
      int next = i + 1;
      for (int k = 0; k < f->n_children; k++) next = gen_nested(w, g, next, rows, rng);
      return next;
    }
    default: die("the nested mix has no %d columns", f->type);
  }
  return i + 1;
}

/* The RecordBatch's columns, one per node, from what gen_nested wrote. */
static void nested_columns(const struct workload *w, const struct nested_node *g,
                           struct iw_column *cols) {
  for (int i = 0; i < w->n_nodes; i++)
    cols[i] = (struct iw_column){
        .length = g[i].length, .null_count = g[i].null_count, .validity = g[i].valid,
        .validity_length = g[i].valid != NULL ? (g[i].length + 7) / 8 : 0, .offsets = g[i].off,
        .offsets_length = g[i].off != NULL ? (g[i].length + 1) * (int64_t)sizeof(int32_t) : 0,
        .data = g[i].data, .data_length = g[i].data_len};
}

/* Appends partition p (a whole stream) to `region` and records where its
 * column buffers went, from the layout the writer reports. */
static void generate_partition(struct workload *w, int p, struct iw_col *cols,
                               struct iw_buf *region, struct iw_buf *raw, uint64_t *rng) {
  const int64_t rows = w->shape.rows;
  const int nested = w->mix == MIX_NESTED;
  struct nested_node *g = nested ? xcalloc((size_t)w->n_nodes, sizeof(*g)) : NULL;
  for (int c = 0; c < w->shape.cols; c++) {
    if (nested) {
      gen_nested(w, g, w->top[c], rows, rng);
      w->nulls[c] += g[w->top[c]].null_count;
      continue;
    }
    iw_col_random(&cols[c], &w->fields[c], rows, mix_null_permille(w->mix), rng);
    if (w->codec != CODEC_NONE) shuffle_values(&cols[c], rng);
    else if (w->fields[c].type == FUNNEL_TYPE_UTF8) redraw_strings(&cols[c], rng);
    for (int64_t r = 0; r < rows; r++) w->nulls[c] += !cols[c].valid[r];
    w->fp[c] = fp_col(w->fp[c], &cols[c]);
  }
  if (w->expect0 != NULL) memcpy(w->expect0 + (int64_t)p * rows, cols[0].values, (size_t)rows * 8);

  /* compressed as Arrow Java writes it (ZSTD at its default level), or
   * LZ4 as the funnel shuffle writes it (--lz4-frames) */
  const struct iw_options compress = {.compression = w->codec, .lz4_style = lz4_frames,
                                      .raw_fallback = 1, .empty_prefix = 1, .zstd_level = 3};
  struct iw_column *batch = NULL;
  if (nested) {
    batch = xcalloc((size_t)w->n_nodes, sizeof(*batch));
    nested_columns(w, g, batch);
  }
  /* the plain stream first (compressed workloads only), then the one read */
  for (int pass = w->codec != CODEC_NONE ? 0 : 1; pass < 2; pass++) {
    struct iw_buf *out = pass ? region : raw;
    const struct iw_options *o = pass ? (w->codec ? &compress : NULL) : NULL;
    /* partitions start 64-byte aligned in the region, as in a fetch buffer */
    while (out->len % 64) iw_buf_append(out, NULL, 1);
    const int64_t start = (int64_t)out->len;
    iw_schema_message(out, &w->schema, NULL, NULL);
    struct iw_layout layout = {0};
    if (nested) {
      iw_batch_message(out, &w->schema, rows, batch, o, &layout);
    } else {
      const struct iw_encode encode = {.layout = &layout};
      iw_batch_from_cols(out, &w->schema, cols, 0, rows, &encode, o);
    }
    iw_eos(out, NULL);
    if (!pass) {
      w->raw_bytes += (int64_t)out->len - start;
      continue;
    }
    w->part_off[p] = start;
    w->part_len[p] = (int64_t)out->len - start;
    for (int k = 0; k < w->n_bufs; k++) {
      /* RecordBatch.buffers[k]: {int64 offset within the body, int64 length} */
      const uint8_t *b = out->data + layout.buffers + 16 * (size_t)k;
      struct piece pc = {(int64_t)layout.body - start + read_i64(b), read_i64(b + 8), 0};
      /* compressed: an int64 prefix, the length decoded (-1: raw bytes follow) */
      const int64_t prefix =
          w->codec && pc.length >= 8 ? read_i64(out->data + start + pc.offset) : 0;
      pc.raw_length = !w->codec ? pc.length : prefix == -1 ? pc.length - 8 : prefix;
      w->pieces[p * w->n_bufs + k] = pc;
    }
  }
  free(batch);
  if (w->codec == CODEC_NONE) w->raw_bytes += w->part_len[p];
  if (nested) {
    for (int i = 0; i < w->n_nodes; i++) {
      free(g[i].valid);
      free(g[i].off);
      free(g[i].data);
    }
    free(g);
    return;
  }
  for (int c = 0; c < w->shape.cols; c++) iw_col_free(&cols[c]);
}

/* The layout the baselines copy into: buffer k of every partition after
 * each other, buffer k + 1 after them (64-byte aligned), as the columns of
 * a concatenated table would be; of the pieces as they lie in the
 * partitions, or (`raw`) as they decode. Returns its size. */
static int64_t plan_destinations(const struct workload *w, int raw, int64_t *dst) {
  int64_t at = 0;
  for (int k = 0; k < w->n_bufs; k++) {
    for (int p = 0; p < w->shape.parts; p++) {
      const struct piece *pc = &w->pieces[p * w->n_bufs + k];
      dst[p * w->n_bufs + k] = at;
      at += raw ? pc->raw_length : pc->length;
    }
    at = align_up(at, 64);
  }
  return at;
}

/* The memory's unit of transfer on the GPUs funnel runs on: a load of one
 * byte moves 32 (a sector of a 128-byte line). */
#define SECTOR 32

/* The 32-byte sectors of the region that hold some piece's bytes, each
 * counted once (pieces share them), the partitions 64-byte aligned as they
 * lie in the region and in its copy on the device. The concat must load
 * at least these to write the output; the parse's results it also loads
 * are not counted. */
static int64_t piece_sectors(const struct workload *w) {
  int64_t n = 0, last = -1; /* the last sector counted: the pieces rise */
  for (int p = 0; p < w->shape.parts; p++)
    for (int k = 0; k < w->n_bufs; k++) {
      const struct piece *pc = &w->pieces[p * w->n_bufs + k];
      if (pc->length <= 0) continue;
      const int64_t at = w->part_off[p] + pc->offset;
      int64_t first = at / SECTOR;
      const int64_t end = (at + pc->length - 1) / SECTOR;
      if (first <= last) first = last + 1;
      if (end >= first) n += end - first + 1;
      if (end > last) last = end;
    }
  return n;
}

/* The share of its d2d copy the concat kernel could reach at most if each
 * byte it moves took what each of the copy's takes: the copy reads and
 * writes the output once, the kernel reads at least the pieces' sectors
 * and writes the output once. 0 when not counted. */
static double kernel_bound(const struct workload *w) {
  if (w->piece_sector_bytes <= 0 || w->out_bytes <= 0) return 0;
  const double b = 2.0 * (double)w->out_bytes / (double)(w->piece_sector_bytes + w->out_bytes);
  return b < 1 ? b : 1;
}

static void workload_free(struct workload *w) {
  free(w->pageable);
  for (int s = 0; s < N_SOURCES; s++) free(w->parts[s]);
  free(w->fields);
  free(w->names);
  free(w->nodes);
  free(w->top);
  free(w->part_off);
  free(w->part_len);
  free(w->pieces);
  free(w->dst);
  free(w->expect0);
  free(w->nulls);
  free(w->fp);
  free(w->raw);
  free(w->raw_dst);
  memset(w, 0, sizeof(*w));
}

static void workload_build(const struct job *job, struct workload *w) {
  memset(w, 0, sizeof(*w));
  const struct shape s = job->shape;
  w->shape = s;
  w->mix = job->mix;
  w->codec = job->codec;
  w->fields = xcalloc((size_t)s.cols, sizeof(*w->fields));
  w->names = xcalloc((size_t)s.cols, 16);
  w->top = xcalloc((size_t)s.cols, sizeof(int));
  for (int c = 0; c < s.cols; c++) {
    w->fields[c] = mix_field(job->mix, c);
    snprintf(w->names + 16 * c, 16, "c%d", c);
    w->fields[c].name = w->names + 16 * c;
    w->top[c] = w->n_nodes;
    w->n_nodes += field_nodes(&w->fields[c]);
  }
  w->schema = (struct iw_schema){s.cols, w->fields, 0};
  /* every node's buffers are pieces the baselines copy, a nested column's
   * children's too, in the order the batch lists them */
  w->nodes = xcalloc((size_t)w->n_nodes, sizeof(*w->nodes));
  iw_schema_nodes(&w->schema, w->nodes, w->n_nodes);
  for (int i = 0; i < w->n_nodes; i++) w->n_bufs += iw_buffer_count(w->nodes[i]);
  w->part_off = xcalloc((size_t)s.parts, sizeof(int64_t));
  w->part_len = xcalloc((size_t)s.parts, sizeof(int64_t));
  w->pieces = xcalloc((size_t)s.parts * (size_t)w->n_bufs, sizeof(struct piece));
  w->dst = xcalloc((size_t)s.parts * (size_t)w->n_bufs, sizeof(int64_t));
  w->nulls = xcalloc((size_t)s.cols, sizeof(int64_t));
  if (job->mix != MIX_NESTED) w->fp = xcalloc((size_t)s.cols, sizeof(uint64_t));
  w->raw_dst = xcalloc((size_t)s.parts * (size_t)w->n_bufs, sizeof(int64_t));
  if (job->mix == MIX_INT64) w->expect0 = xmalloc((size_t)(s.parts * s.rows) * 8);

  /* the same bytes for a shape in every run */
  uint64_t rng = 0x5EED0000ULL ^ ((uint64_t)s.parts << 40) ^ ((uint64_t)s.cols << 32) ^
                 (uint64_t)s.rows * 31 ^ (uint64_t)job->mix;
  /* compressed: other values (shuffle_values), the same for every codec */
  if (job->codec != CODEC_NONE) rng ^= 0xC0DEULL << 48;
  struct iw_col *cols = xcalloc((size_t)s.cols, sizeof(*cols));
  struct iw_buf region = {0}, raw = {0};
  for (int p = 0; p < s.parts; p++) generate_partition(w, p, cols, &region, &raw, &rng);
  free(cols);
  w->pageable = region.data; /* the region is the pageable source */
  w->region_size = (int64_t)region.len;
  w->raw = raw.data;
  for (int p = 0; p < s.parts; p++) w->total_bytes += w->part_len[p];
  w->concat_bytes = plan_destinations(w, 0, w->dst);
  w->raw_concat_bytes = plan_destinations(w, 1, w->raw_dst);
  if (w->codec == CODEC_NONE) w->piece_sector_bytes = piece_sectors(w) * SECTOR;

  w->parts[SRC_PAGEABLE] = xcalloc((size_t)s.parts, sizeof(struct funnel_partition));
  for (int p = 0; p < s.parts; p++)
    w->parts[SRC_PAGEABLE][p] =
        (struct funnel_partition){w->pageable + w->part_off[p], (size_t)w->part_len[p]};
}

/* The pinned source: the same region copied into funnel's pool, so reads of
 * it copy without staging. 0 when the pool cannot hold it. */
static int workload_pin(struct funnel_device *dev, struct workload *w) {
  void *pinned = NULL;
  struct funnel_error err;
  if (funnel_device_pinned_alloc(dev, (size_t)w->region_size, &pinned, &err) != FUNNEL_OK) return 0;
  memcpy(pinned, w->pageable, (size_t)w->region_size);
  w->pinned = pinned;
  w->parts[SRC_PINNED] = xcalloc((size_t)w->shape.parts, sizeof(struct funnel_partition));
  for (int p = 0; p < w->shape.parts; p++)
    w->parts[SRC_PINNED][p] =
        (struct funnel_partition){w->pinned + w->part_off[p], (size_t)w->part_len[p]};
  return 1;
}

static const uint8_t *source_base(const struct workload *w, int src) {
  return src == SRC_PINNED ? (const uint8_t *)w->pinned : w->pageable;
}

/* --dump: the workload's bytes and what the generator knows of them, for
 * the Java driver (bench/java), so both drivers time the same bytes. */
static void dump_workload(const char *dir, const struct workload *w) {
  char shape[64], path[4096];
  shape_name(&w->shape, shape, sizeof(shape));
  snprintf(path, sizeof(path), "%s/%s-%s%s%s", dir, shape, MIX_NAMES[w->mix],
           w->codec ? "-" : "", w->codec ? CODEC_NAMES[w->codec] : "");
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) die("cannot create %s: %s", dir, strerror(errno));
  if (mkdir(path, 0777) != 0 && errno != EEXIST) die("cannot create %s: %s", path, strerror(errno));
  const size_t at = strlen(path);
  snprintf(path + at, sizeof(path) - at, "/partitions.bin");
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(w->pageable, 1, (size_t)w->region_size, f) != (size_t)w->region_size ||
      fclose(f) != 0)
    die("cannot write %s", path);
  snprintf(path + at, sizeof(path) - at, "/workload.properties");
  if ((f = fopen(path, "w")) == NULL) die("cannot write %s", path);
  fprintf(f, "# written by funnel_bench --dump: Arrow IPC streams back to back in partitions.bin\n");
  fprintf(f, "partitions=%d\ncolumns=%d\nrows_per_partition=%lld\nmix=%s\nbytes=%lld\nrows=%lld\n",
          w->shape.parts, w->shape.cols, (long long)w->shape.rows, MIX_NAMES[w->mix],
          (long long)w->total_bytes, (long long)((int64_t)w->shape.parts * w->shape.rows));
  if (w->codec)
    fprintf(f, "compression=%s\nraw_bytes=%lld\n", CODEC_NAMES[w->codec], (long long)w->raw_bytes);
  const struct { const char *key; const int64_t *v; int n; } lists[3] = {
      {"offsets", w->part_off, w->shape.parts},
      {"lengths", w->part_len, w->shape.parts},
      {"nulls", w->nulls, w->shape.cols}};
  for (int l = 0; l < 3; l++) {
    fprintf(f, "%s=", lists[l].key);
    for (int i = 0; i < lists[l].n; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)lists[l].v[i]);
    fputc('\n', f);
  }
  if (fclose(f) != 0) die("cannot write %s", path);
}

/* ----------------------------------------------------------- the bench */

/* The readers of the funnel strategies: the default (AUTO, or as
 * FUNNEL_PARSE and FUNNEL_DECODE in the environment say), each transfer
 * mode forced, and one that times the kernel on the device (COPY, so the
 * kernel's inputs are in device memory, as torch.cat's would be). */
enum { R_AUTO, R_COPY, R_DIRECT, R_KERNEL, R_HOST, R_DEVICE, R_HOST_DECODE, R_GPU_DECODE, N_READERS };

struct bench {
  struct funnel_device *dev;
  int ordinal; /* cuda: the device's ordinal; cpu: -1 */
  struct funnel_reader *reader[N_READERS];
  /* the baselines' own instance of the device's backend */
  struct funnel_backend be;
  int be_open;
  void *stream;
  void *event;
  uint64_t dev_buf; /* the baselines' destination */
  int64_t dev_cap;
  void *host_buf;   /* host_concat's pinned buffer */
  int64_t host_cap;
  uint64_t d2d_src, d2d_dst; /* the d2d limit: the output's size, twice */
  uint64_t *scatter_dst;     /* batched_scatter's arrays, one entry per piece */
  const void **scatter_src;
  size_t *scatter_len;
  int64_t scatter_cap;
  int64_t d2d_cap;
  void *ev_start, *ev_end;   /* timed events around the d2d copy */
  uint8_t *cold;             /* --cold: written before every iteration, else NULL */
  int64_t cold_bytes;
  unsigned cold_round;
};

/* What one timed iteration did. */
struct sample {
  int64_t ns;
  struct funnel__calls calls;
  struct funnel_read_stats stats; /* funnel only */
};

/* The timed region: counters are read outside the clock. */
struct span {
  struct funnel__calls c0;
  int64_t t0;
};

static struct span span_begin(void) {
  struct span s;
  s.c0 = funnel__calls_now();
  s.t0 = now_ns();
  return s;
}

static void span_end(const struct span *s, struct sample *out) {
  out->ns = now_ns() - s->t0;
  const struct funnel__calls c = funnel__calls_now();
  out->calls = (struct funnel__calls){
      .calls = c.calls - s->c0.calls,
      .allocs = c.allocs - s->c0.allocs,
      .host_allocs = c.host_allocs - s->c0.host_allocs,
      .h2d_copies = c.h2d_copies - s->c0.h2d_copies,
      .bytes_h2d = c.bytes_h2d - s->c0.bytes_h2d,
      .d2h_copies = c.d2h_copies - s->c0.d2h_copies,
      .bytes_d2h = c.bytes_d2h - s->c0.bytes_d2h,
      .launches = c.launches - s->c0.launches,
      .syncs = c.syncs - s->c0.syncs};
}

/* Waits for everything the baselines enqueued on their stream. */
static int sync_stream(struct bench *b, struct funnel_error *err) {
  int st = funnel__dev_event_record(&b->be, b->event, b->stream, err);
  return st == FUNNEL_OK ? funnel__dev_event_wait(&b->be, b->event, err) : st;
}

typedef int (*iteration_fn)(struct bench *b, const struct workload *w, int src,
                            struct sample *out, struct funnel_error *err);

static int read_with(struct funnel_reader *reader, const struct workload *w, int src,
                     struct sample *out, struct funnel_error *err) {
  struct funnel_table *t = NULL;
  const struct span sp = span_begin();
  int st = funnel_reader_read_async(reader, w->parts[src], (size_t)w->shape.parts, 0, &t, err);
  if (st == FUNNEL_OK) st = funnel_table_wait(t, err);
  span_end(&sp, out);
  if (st == FUNNEL_OK) funnel_table_stats(t, &out->stats, NULL);
  /* freeing is not part of a read: a consumer frees after using the table */
  funnel_table_free(t);
  return st;
}

static int iter_funnel(struct bench *b, const struct workload *w, int src, struct sample *out,
                       struct funnel_error *err) {
  return read_with(b->reader[R_AUTO], w, src, out, err);
}

static int iter_funnel_copy(struct bench *b, const struct workload *w, int src,
                            struct sample *out, struct funnel_error *err) {
  return read_with(b->reader[R_COPY], w, src, out, err);
}

static int iter_funnel_direct(struct bench *b, const struct workload *w, int src,
                              struct sample *out, struct funnel_error *err) {
  return read_with(b->reader[R_DIRECT], w, src, out, err);
}

/* funnel with the headers parsed on the host, or on the device
 * (FUNNEL_OPTION_PARSE forced), where AUTO picks by the shape */
static int iter_funnel_host(struct bench *b, const struct workload *w, int src,
                            struct sample *out, struct funnel_error *err) {
  return read_with(b->reader[R_HOST], w, src, out, err);
}

static int iter_funnel_device(struct bench *b, const struct workload *w, int src,
                              struct sample *out, struct funnel_error *err) {
  return read_with(b->reader[R_DEVICE], w, src, out, err);
}

/* The concat kernel alone: device time between events around the launch
 * of a COPY read, whose inputs are then in device memory. */
static int iter_kernel(struct bench *b, const struct workload *w, int src, struct sample *out,
                       struct funnel_error *err) {
  int st = read_with(b->reader[R_KERNEL], w, src, out, err);
  if (st == FUNNEL_OK && out->stats.kernel_ns < 0)
    return FUNNEL_ERR(err, FUNNEL_ERR_DEVICE, "the read did not time its kernel");
  out->ns = out->stats.kernel_ns;
  return st;
}

/* The kernel's limit: one device-to-device copy of as many bytes as the
 * result has, timed on the device like the kernel. */
static int iter_d2d(struct bench *b, const struct workload *w, int src, struct sample *out,
                    struct funnel_error *err) {
  (void)src;
  const struct span sp = span_begin();
  int st = funnel__dev_event_record(&b->be, b->ev_start, b->stream, err);
  if (st == FUNNEL_OK)
    st = funnel__dev_copy_d2d_async(&b->be, b->d2d_dst, b->d2d_src, (size_t)w->out_bytes,
                                    b->stream, err);
  if (st == FUNNEL_OK) st = funnel__dev_event_record(&b->be, b->ev_end, b->stream, err);
  if (st == FUNNEL_OK) st = funnel__dev_event_wait(&b->be, b->ev_end, err);
  span_end(&sp, out);
  int64_t ns = 0;
  if (st == FUNNEL_OK) st = funnel__dev_event_elapsed_ns(&b->be, b->ev_start, b->ev_end, &ns, err);
  out->ns = ns;
  return st;
}

/* One copy of `n` bytes from `host`, and its wait. */
static int copy_once(struct bench *b, const void *host, int64_t n, struct sample *out,
                     struct funnel_error *err) {
  const struct span sp = span_begin();
  int st = funnel__dev_copy_h2d_async(&b->be, b->dev_buf, host, (size_t)n, b->stream, err);
  if (st == FUNNEL_OK) st = sync_stream(b, err);
  span_end(&sp, out);
  return st;
}

/* The partitions' bytes, or for a compressed workload the bytes of the
 * same partitions written plain: from the baselines' pinned buffer (pinned
 * source) or the plain region (pageable). */
static int iter_link(struct bench *b, const struct workload *w, int src, struct sample *out,
                     struct funnel_error *err) {
  if (w->codec == CODEC_NONE) return copy_once(b, source_base(w, src), w->total_bytes, out, err);
  return copy_once(b, src == SRC_PINNED ? b->host_buf : w->raw, w->raw_bytes, out, err);
}

static int iter_link_compressed(struct bench *b, const struct workload *w, int src,
                                struct sample *out, struct funnel_error *err) {
  return copy_once(b, source_base(w, src), w->total_bytes, out, err);
}


/* Compressed bodies decoded on the host threads, or the values' LZ4 frames
 * on the device (FUNNEL_OPTION_DECODE forced; AUTO picks by codec and size). */
static int iter_funnel_host_decode(struct bench *b, const struct workload *w, int src,
                                   struct sample *out, struct funnel_error *err) {
  return read_with(b->reader[R_HOST_DECODE], w, src, out, err);
}

static int iter_funnel_gpu_decode(struct bench *b, const struct workload *w, int src,
                                  struct sample *out, struct funnel_error *err) {
  return read_with(b->reader[R_GPU_DECODE], w, src, out, err);
}

/* The floor of any read of these bytes: one stream-ordered device
 * allocation (of the output's size, or the bytes' if larger, so the copy
 * lands in it), one copy of the bytes from pinned memory (the source itself
 * when it is pinned, else the baselines' pinned buffer), one empty kernel
 * (the concat launch with no segments: cuda still launches one block, which
 * returns at once), an event record and its wait. The free is enqueued
 * after the clock stops, as a read's table is freed after its use. */
static int iter_floor(struct bench *b, const struct workload *w, int src, struct sample *out,
                      struct funnel_error *err) {
  const void *host = src == SRC_PINNED ? (const void *)w->pinned : b->host_buf;
  const int64_t size = w->out_bytes > w->total_bytes ? w->out_bytes : w->total_bytes;
  uint64_t dev = 0;
  const struct span sp = span_begin();
  int st = funnel__dev_alloc(&b->be, (size_t)size, b->stream, &dev, err);
  if (st == FUNNEL_OK)
    st = funnel__dev_copy_h2d_async(&b->be, dev, host, (size_t)w->total_bytes, b->stream, err);
  if (st == FUNNEL_OK) st = funnel__dev_launch_concat(&b->be, 0, 0, b->stream, err);
  if (st == FUNNEL_OK) st = sync_stream(b, err);
  span_end(&sp, out);
  if (dev != 0) funnel__dev_free(&b->be, dev, b->stream);
  return st;
}

static int iter_naive(struct bench *b, const struct workload *w, int src, struct sample *out,
                      struct funnel_error *err) {
  const uint8_t *base = source_base(w, src);
  int st = FUNNEL_OK;
  const struct span sp = span_begin();
  for (int p = 0; p < w->shape.parts && st == FUNNEL_OK; p++) {
    for (int k = 0; k < w->n_bufs && st == FUNNEL_OK; k++) {
      const struct piece pc = w->pieces[p * w->n_bufs + k];
      if (pc.length == 0) continue;
      st = funnel__dev_copy_h2d_async(&b->be, b->dev_buf + (uint64_t)w->dst[p * w->n_bufs + k],
                                      base + w->part_off[p] + pc.offset, (size_t)pc.length,
                                      b->stream, err);
      if (st == FUNNEL_OK) st = sync_stream(b, err); /* synchronous, as cudf's loop was */
    }
  }
  span_end(&sp, out);
  return st;
}

static int iter_host_concat(struct bench *b, const struct workload *w, int src,
                            struct sample *out, struct funnel_error *err) {
  const uint8_t *base = source_base(w, src);
  uint8_t *host = b->host_buf;
  const struct span sp = span_begin();
  /* buffer by buffer, so the writes into the pinned buffer are sequential */
  for (int k = 0; k < w->n_bufs; k++) {
    for (int p = 0; p < w->shape.parts; p++) {
      const struct piece pc = w->pieces[p * w->n_bufs + k];
      if (pc.length > 0)
        memcpy(host + w->dst[p * w->n_bufs + k], base + w->part_off[p] + pc.offset,
               (size_t)pc.length);
    }
  }
  int st = funnel__dev_copy_h2d_async(&b->be, b->dev_buf, host, (size_t)w->concat_bytes,
                                      b->stream, err);
  if (st == FUNNEL_OK) st = sync_stream(b, err);
  span_end(&sp, out);
  return st;
}

/* What the host's memory allows a pageable read's staging: the partitions'
 * bytes copied into the pinned buffer as funnel stages them (its host
 * threads, tasks of FUNNEL__STAGE_TASK, stores that bypass the cache), no
 * device involved. Beside funnel in --devices, it tells whether the
 * processes' pageable reads slow down together because they share the
 * host's memory. */
static int iter_host_stage(struct bench *b, const struct workload *w, int src,
                           struct sample *out, struct funnel_error *err) {
  (void)err;
  const struct span sp = span_begin();
  funnel__stage_bytes(b->host_buf, source_base(w, src), w->total_bytes);
  span_end(&sp, out);
  return FUNNEL_OK;
}

/* What a plugin does with compressed partitions today, as a lower bound
 * (the header comment says what it leaves out): one thread decompresses
 * every buffer to its final place in one pinned host buffer, partition by
 * partition as the batches are read, then one copy. */
static int iter_host_decompress_concat(struct bench *b, const struct workload *w, int src,
                                       struct sample *out, struct funnel_error *err) {
  const uint8_t *base = source_base(w, src);
  uint8_t *host = b->host_buf;
  int st = FUNNEL_OK;
  const struct span sp = span_begin();
  for (int p = 0; p < w->shape.parts && st == FUNNEL_OK; p++) {
    for (int k = 0; k < w->n_bufs; k++) {
      const struct piece pc = w->pieces[p * w->n_bufs + k];
      const int64_t at = w->raw_dst[p * w->n_bufs + k];
      if (iw_decompress_buffer(w->codec, base + w->part_off[p] + pc.offset, (size_t)pc.length,
                               host + at, (size_t)(b->host_cap - at)) != pc.raw_length) {
        st = FUNNEL_ERR(err, FUNNEL_ERR_INVALID_ARGUMENT,
                        "partition %d buffer %d: %s did not decode to %lld bytes", p, k,
                        CODEC_NAMES[w->codec], (long long)pc.raw_length);
        break;
      }
    }
  }
  if (st == FUNNEL_OK)
    st = funnel__dev_copy_h2d_async(&b->be, b->dev_buf, host, (size_t)w->raw_concat_bytes,
                                    b->stream, err);
  if (st == FUNNEL_OK) st = sync_stream(b, err);
  span_end(&sp, out);
  return st;
}

/* Every column piece of every partition straight to its final place in one
 * batched call (cuMemcpyBatchAsync on cuda), then one wait. On the H100
 * (driver 580.159.04) a batch of thousands of pieces of mixed sizes (the
 * mixed and strings mixes) failed now and then with a sticky
 * CUDA_ERROR_LAUNCH_FAILED, or a crash inside the driver, whatever the
 * pieces' alignment: it runs last of a group, and every group runs in a
 * process of its own (bench/RESULTS.md). */
static int iter_batched_scatter(struct bench *b, const struct workload *w, int src,
                                struct sample *out, struct funnel_error *err) {
  const uint8_t *base = source_base(w, src);
  const struct span sp = span_begin();
  int64_t k = 0;
  for (int p = 0; p < w->shape.parts; p++) {
    for (int j = 0; j < w->n_bufs; j++) {
      const struct piece pc = w->pieces[p * w->n_bufs + j];
      if (pc.length == 0) continue;
      b->scatter_dst[k] = b->dev_buf + (uint64_t)w->dst[p * w->n_bufs + j];
      b->scatter_src[k] = base + w->part_off[p] + pc.offset;
      b->scatter_len[k] = (size_t)pc.length;
      k++;
    }
  }
  int st = funnel__dev_copy_h2d_batch_async(&b->be, b->scatter_dst,
                                            (const void *const *)b->scatter_src, b->scatter_len, (size_t)k, b->stream, err);
  if (st == FUNNEL_OK) st = sync_stream(b, err);
  span_end(&sp, out);
  return st;
}

/* Which workloads a strategy applies to. */
enum { ANY_CODEC, PLAIN_ONLY, COMPRESSED_ONLY };

struct strategy {
  const char *name;
  iteration_fn run;
  int pinned_only; /* differs from another strategy only for pinned sources */
  int device_time; /* timed on the device, of the output's bytes: not end to end */
  int per_piece;   /* one call per column piece: left out over --max-pieces */
  int column_only; /* CSV and JSON carry it as a column of every row, not a row */
  int codecs;      /* ANY_CODEC, PLAIN_ONLY or COMPRESSED_ONLY */
  const char *unavailable; /* not measured, and why (printed on its row) */
  int pageable_only; /* measured on pageable sources only */
};

enum {
  S_FUNNEL,
  S_FUNNEL_COPY,
  S_FUNNEL_DIRECT,
  S_FUNNEL_HOST,
  S_FUNNEL_DEVICE,
  S_LINK,
  S_FLOOR,
  S_NAIVE,
  S_HOST_CONCAT,
  S_KERNEL,
  S_D2D,
  S_HOST_DECOMPRESS_CONCAT,
  S_LINK_COMPRESSED,
  S_FUNNEL_HOST_DECODE,
  S_FUNNEL_GPU_DECODE,
  S_HOST_STAGE,
  S_BATCHED_SCATTER, /* last: it may leave the device unusable (iter_batched_scatter) */
  N_STRATEGIES
};
static const struct strategy STRATEGIES[N_STRATEGIES] = {
    {"funnel", iter_funnel, 0, 0, 0, 0, ANY_CODEC, NULL, 0},
    {"funnel_copy", iter_funnel_copy, 1, 0, 0, 0, ANY_CODEC, NULL, 0},
    {"funnel_direct", iter_funnel_direct, 1, 0, 0, 0, ANY_CODEC, NULL, 0},
    {"funnel_host", iter_funnel_host, 0, 0, 0, 0, ANY_CODEC, NULL, 0},
    {"funnel_device", iter_funnel_device, 0, 0, 0, 0, ANY_CODEC, NULL, 0},
    {"link", iter_link, 0, 0, 0, 0, ANY_CODEC, NULL, 0},
    {"floor", iter_floor, 0, 0, 0, 1, ANY_CODEC, NULL, 0},
    {"naive", iter_naive, 0, 0, 1, 0, PLAIN_ONLY, NULL, 0},
    {"host_concat", iter_host_concat, 0, 0, 0, 0, PLAIN_ONLY, NULL, 0},
    {"kernel", iter_kernel, 1, 1, 0, 0, ANY_CODEC, NULL, 0},
    {"d2d", iter_d2d, 1, 1, 0, 0, ANY_CODEC, NULL, 0},
    {"host_decompress_concat", iter_host_decompress_concat, 0, 0, 0, 0, COMPRESSED_ONLY, NULL, 0},
    {"link_compressed", iter_link_compressed, 0, 0, 0, 0, COMPRESSED_ONLY, NULL, 0},
    {"funnel_host_decode", iter_funnel_host_decode, 0, 0, 0, 0, COMPRESSED_ONLY, NULL, 0},
    {"funnel_gpu_decode", iter_funnel_gpu_decode, 0, 0, 0, 0, COMPRESSED_ONLY, NULL, 0},
    {"host_stage", iter_host_stage, 0, 0, 0, 0, ANY_CODEC, NULL, 1},
    {"batched_scatter", iter_batched_scatter, 0, 0, 1, 0, PLAIN_ONLY, NULL, 0},
};

static int strategy_applies(const struct strategy *s, const struct workload *w, int src) {
  if ((s->pinned_only && src != SRC_PINNED) || (s->pageable_only && src == SRC_PINNED)) return 0;
  return s->codecs == ANY_CODEC || (s->codecs == COMPRESSED_ONLY) == (w->codec != CODEC_NONE);
}

/* One strategy on one shape, mix and source. */
struct measurement {
  int skipped;          /* the strategy does not apply to this source, or left out */
  char skip_why[200];   /* why it was left out, for the table ("" when it does not apply) */
  int status;           /* FUNNEL_OK, or why it stopped */
  char error[FUNNEL_ERROR_MESSAGE_SIZE + 64];
  int reps;
  double ms_median, ms_min;
  struct funnel__calls calls; /* per iteration (the last timed one) */
  struct funnel_read_stats stats;
};

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* How many timed iterations a measurement makes. With --reps N, N. Else
 * they follow from the wall time t of the last warm-up iteration: small
 * shapes are fast, so they get more iterations (their medians are the
 * noisiest) within a small budget of time, and the slowest get fewer:
 *   t > slow_ns        slow_reps
 *   otherwise          budget_ns / t, within [min_reps, max_reps] */
struct rep_policy {
  int fixed; /* --reps N; 0: adaptive */
  int min_reps, max_reps, slow_reps;
  int64_t budget_ns, slow_ns;
};

static int choose_reps(const struct rep_policy *p, int64_t warm_ns) {
  if (p->fixed > 0) return p->fixed;
  if (warm_ns > p->slow_ns) return p->slow_reps;
  const int64_t n = warm_ns > 0 ? p->budget_ns / warm_ns : p->max_reps;
  return n < p->min_reps ? p->min_reps : n > p->max_reps ? p->max_reps : (int)n;
}

static int run_once(struct bench *b, const struct workload *w, int src, const struct strategy *s,
                    struct sample *smp, struct measurement *m) {
  memset(smp, 0, sizeof(*smp));
  struct funnel_error err;
  funnel__error_clear(&err);
  /* --cold: the host's caches filled with other bytes, outside the clock */
  if (b->cold != NULL) memset(b->cold, (int)(++b->cold_round & 0xFF), (size_t)b->cold_bytes);
  const int st = s->run(b, w, src, smp, &err);
  if (st != FUNNEL_OK) {
    m->status = st;
    snprintf(m->error, sizeof(m->error), "%s: %s", funnel_code_name(st), err.message);
  }
  return st;
}

/* A measurement in progress: its warm-up done, its timed iterations
 * taken one at a time (measure_rep), then summed up (measure_end). */
struct timing {
  const struct strategy *s;
  struct measurement *m;
  int reps, done;
  int64_t *ns;
};

/* The warm-up iterations, and how many timed ones follow; false when the
 * strategy does not apply or failed (m says which). */
static bool measure_begin(struct bench *b, const struct workload *w, int src,
                          const struct rep_policy *policy, const struct strategy *s,
                          struct measurement *m, struct timing *t) {
  memset(m, 0, sizeof(*m));
  *t = (struct timing){.s = s, .m = m};
  if (!strategy_applies(s, w, src)) {
    m->skipped = 1;
    return false;
  }
  if (s->unavailable != NULL) {
    m->skipped = 1;
    snprintf(m->skip_why, sizeof(m->skip_why), "%s", s->unavailable);
    return false;
  }
  struct sample smp;
  int64_t warm_ns = 0;
  for (int i = 0; i < WARMUP; i++) {
    const int64_t t0 = now_ns();
    if (run_once(b, w, src, s, &smp, m) != FUNNEL_OK) return false;
    warm_ns = now_ns() - t0;
  }
  t->reps = choose_reps(policy, warm_ns);
  t->ns = xcalloc((size_t)t->reps, sizeof(int64_t));
  return true;
}

/* The next timed iteration; false when none is left or it failed. */
static bool measure_rep(struct bench *b, const struct workload *w, int src, struct timing *t) {
  if (t->ns == NULL || t->done >= t->reps || t->m->status != FUNNEL_OK) return false;
  struct sample smp;
  if (run_once(b, w, src, t->s, &smp, t->m) != FUNNEL_OK) return false;
  t->ns[t->done++] = smp.ns;
  t->m->calls = smp.calls;
  t->m->stats = smp.stats;
  return true;
}

static void measure_end(struct timing *t) {
  struct measurement *m = t->m;
  if (t->ns != NULL && m->status == FUNNEL_OK && t->done == t->reps) {
    const int reps = t->reps;
    qsort(t->ns, (size_t)reps, sizeof(int64_t), cmp_i64);
    const double mid = reps % 2 ? (double)t->ns[reps / 2]
                                : (t->ns[reps / 2 - 1] + t->ns[reps / 2]) / 2.0;
    m->reps = reps;
    m->ms_median = mid / 1e6;
    m->ms_min = (double)t->ns[0] / 1e6;
  }
  free(t->ns);
  t->ns = NULL;
}

/* One strategy measured alone: its iterations one after the other. */
static void measure(struct bench *b, const struct workload *w, int src,
                    const struct rep_policy *policy, const struct strategy *s,
                    struct measurement *m) {
  struct timing t;
  if (measure_begin(b, w, src, policy, s, m, &t))
    while (measure_rep(b, w, src, &t)) {
    }
  measure_end(&t);
}

/* A flat column's fingerprint as fp_col takes it, from the table's layout:
 * validity bits (none when nothing is null), offsets rebased or not. */
static uint64_t fp_table_column(const struct funnel_column *col,
                                const struct funnel_host_column *h) {
  const uint8_t *valid = col->validity.size > 0 ? h->validity : NULL, *data = h->data;
  uint64_t fp = 0;
  for (int64_t r = 0; r < col->length; r++) {
    if (valid != NULL && !((valid[r >> 3] >> (r & 7)) & 1)) {
      fp = fp_mix(fp, FP_NULL);
    } else if (col->type_id == FUNNEL_TYPE_UTF8) {
      int64_t o0, o1;
      if (col->offset_width == 8) {
        o0 = read_i64((const uint8_t *)h->offsets + 8 * r);
        o1 = read_i64((const uint8_t *)h->offsets + 8 * (r + 1));
      } else {
        int32_t a, b;
        memcpy(&a, (const uint8_t *)h->offsets + 4 * r, 4);
        memcpy(&b, (const uint8_t *)h->offsets + 4 * (r + 1), 4);
        o0 = a, o1 = b;
      }
      fp = fp_bytes(fp, data + o0, o1 - o0);
    } else if (col->type_id == FUNNEL_TYPE_BOOL) {
      fp = fp_mix(fp, (data[r >> 3] >> (r & 7)) & 1);
    } else {
      fp = fp_bytes(fp, data + (int64_t)col->byte_width * r, col->byte_width);
    }
  }
  return fp;
}

/* Every value of a flat table copied back, against the generator's
 * fingerprints of its rows. */
static int verify_values(struct funnel_table *t, const struct workload *w, char *why,
                         size_t why_size) {
  const int n = w->shape.cols;
  struct funnel_column *cols = xcalloc((size_t)n, sizeof(*cols));
  struct funnel_host_column *host = xcalloc((size_t)n, sizeof(*host));
  struct funnel_error err;
  int ok = 1;
  for (int c = 0; c < n && ok; c++) {
    if (funnel_table_column(t, c, &cols[c], &err) != FUNNEL_OK) {
      snprintf(why, why_size, "column %d: %s", c, err.message);
      ok = 0;
      break;
    }
    host[c].validity = xmalloc((size_t)cols[c].validity.size);
    host[c].offsets = xmalloc((size_t)cols[c].offsets.size);
    host[c].data = xmalloc((size_t)cols[c].data.size);
  }
  if (ok && funnel_table_copy_to_host(t, host, &err) != FUNNEL_OK) {
    snprintf(why, why_size, "copy back failed: %s: %s", funnel_code_name(err.code), err.message);
    ok = 0;
  }
  for (int c = 0; c < n && ok; c++) {
    if (fp_table_column(&cols[c], &host[c]) != w->fp[c]) {
      snprintf(why, why_size, "column %d: its values differ from the rows written", c);
      ok = 0;
    }
  }
  for (int c = 0; c < n; c++) {
    free(host[c].validity);
    free(host[c].offsets);
    free(host[c].data);
  }
  free(host);
  free(cols);
  return ok;
}

/* Once per shape and source, untimed: the row count, the number of columns
 * (a nested column's children are columns too), the top-level columns' null
 * counts, for the int64 mix column 0's values copied back, and for a
 * compressed flat mix every value (verify_values). */
static int verify(struct bench *b, struct workload *w, int src, char *why, size_t why_size) {
  struct funnel_error err;
  struct funnel_table *t = NULL;
  int st = funnel_reader_read_async(b->reader[R_AUTO], w->parts[src], (size_t)w->shape.parts, 0,
                                    &t, &err);
  if (st == FUNNEL_OK) st = funnel_table_wait(t, &err);
  struct funnel_read_stats stats;
  if (st == FUNNEL_OK) st = funnel_table_stats(t, &stats, &err);
  if (st == FUNNEL_OK) w->out_bytes = stats.bytes_out;
  if (st != FUNNEL_OK) {
    snprintf(why, why_size, "read failed: %s: %s", funnel_code_name(st), err.message);
    funnel_table_free(t);
    return 0;
  }
  int ok = 1;
  const int64_t rows = (int64_t)w->shape.parts * w->shape.rows;
  if (funnel_table_num_rows(t) != rows) {
    snprintf(why, why_size, "%lld rows, expected %lld", (long long)funnel_table_num_rows(t),
             (long long)rows);
    ok = 0;
  }
  if (ok && funnel_table_num_columns(t) != w->n_nodes) {
    snprintf(why, why_size, "%d columns, expected %d", funnel_table_num_columns(t), w->n_nodes);
    ok = 0;
  }
  for (int c = 0; ok && c < w->shape.cols; c++) {
    /* top-level column c: the table's column top[c], after the nodes of
     * the nested columns before it */
    struct funnel_column col;
    memset(&col, 0, sizeof(col));
    if (funnel_table_column(t, w->top[c], &col, &err) != FUNNEL_OK || col.parent != -1 ||
        col.null_count != w->nulls[c]) {
      snprintf(why, why_size,
               "column %d (table column %d, parent %d): null count %lld, expected %lld", c,
               w->top[c], col.parent, (long long)col.null_count, (long long)w->nulls[c]);
      ok = 0;
    }
  }
  /* on its own GPU: the driver's word for where each buffer lives, the
   * children's of nested columns too */
  for (int c = 0; ok && b->ordinal >= 0 && c < w->n_nodes; c++) {
    struct funnel_column col;
    if (funnel_table_column(t, c, &col, &err) != FUNNEL_OK) continue;
    const struct funnel_buffer *buf[3] = {&col.validity, &col.offsets, &col.data};
    for (int k = 0; ok && k < 3; k++) {
      const int on = buf[k]->size > 0 ? check_cuda_pointer_device(buf[k]->address) : b->ordinal;
      if (on != b->ordinal) {
        snprintf(why, why_size, "column %d buffer %d is on device %d, not cuda:%d", c, k, on,
                 b->ordinal);
        ok = 0;
      }
    }
  }
  if (ok && w->expect0 != NULL) {
    struct funnel_host_column *host = xcalloc((size_t)w->n_nodes, sizeof(*host));
    int64_t *got = xmalloc((size_t)rows * 8);
    host[0].data = got;
    st = funnel_table_copy_to_host(t, host, &err);
    if (st != FUNNEL_OK) {
      snprintf(why, why_size, "copy back failed: %s: %s", funnel_code_name(st), err.message);
      ok = 0;
    }
    for (int64_t r = 0; ok && r < rows; r++) {
      if (got[r] != w->expect0[r]) {
        snprintf(why, why_size, "column 0 row %lld: %lld, expected %lld", (long long)r,
                 (long long)got[r], (long long)w->expect0[r]);
        ok = 0;
      }
    }
    free(got);
    free(host);
  }
  if (ok && w->fp != NULL && w->codec != CODEC_NONE) ok = verify_values(t, w, why, why_size);
  funnel_table_free(t);
  return ok;
}

/* Grows the baselines' device and pinned buffers to fit the workload. Every
 * earlier iteration has waited for its work, so the old ones are unused. */
static int ensure_buffers(struct bench *b, const struct workload *w, struct funnel_error *err) {
  /* compressed: the decoded layout, and the link of the plain bytes */
  const int64_t dev_need =
      max_i64(max_i64(w->total_bytes, w->concat_bytes), max_i64(w->raw_bytes, w->raw_concat_bytes));
  if (dev_need > b->dev_cap) {
    funnel__dev_free(&b->be, b->dev_buf, b->stream);
    b->dev_buf = 0;
    b->dev_cap = 0;
    FUNNEL_RETURN_NOT_OK(funnel__dev_alloc(&b->be, (size_t)dev_need, b->stream, &b->dev_buf, err));
    b->dev_cap = dev_need;
  }
  /* host_concat's destination, and the floor's source for pageable groups */
  const int64_t host_need = dev_need;
  if (host_need > b->host_cap) {
    funnel__dev_host_free(&b->be, b->host_buf);
    b->host_buf = NULL;
    b->host_cap = 0;
    FUNNEL_RETURN_NOT_OK(funnel__dev_host_alloc(&b->be, (size_t)host_need, &b->host_buf, err));
    b->host_cap = host_need;
  }
  const int64_t pieces = (int64_t)w->shape.parts * w->n_bufs;
  if (pieces > b->scatter_cap) {
    free(b->scatter_dst);
    free(b->scatter_src);
    free(b->scatter_len);
    b->scatter_dst = xcalloc((size_t)pieces, sizeof(uint64_t));
    b->scatter_src = xcalloc((size_t)pieces, sizeof(void *));
    b->scatter_len = xcalloc((size_t)pieces, sizeof(size_t));
    b->scatter_cap = pieces;
  }
  return FUNNEL_OK;
}

/* The d2d limit's buffers, once the verifying read told the output's size. */
static int ensure_d2d(struct bench *b, const struct workload *w, struct funnel_error *err) {
  if (w->out_bytes <= b->d2d_cap) return FUNNEL_OK;
  funnel__dev_free(&b->be, b->d2d_src, b->stream);
  funnel__dev_free(&b->be, b->d2d_dst, b->stream);
  b->d2d_src = b->d2d_dst = 0;
  b->d2d_cap = 0;
  FUNNEL_RETURN_NOT_OK(funnel__dev_alloc(&b->be, (size_t)w->out_bytes, b->stream, &b->d2d_src, err));
  FUNNEL_RETURN_NOT_OK(funnel__dev_alloc(&b->be, (size_t)w->out_bytes, b->stream, &b->d2d_dst, err));
  b->d2d_cap = w->out_bytes;
  return FUNNEL_OK;
}

static int bench_open(struct bench *b, const char *backend, struct funnel_error *err) {
  memset(b, 0, sizeof(*b));
  FUNNEL_RETURN_NOT_OK(funnel_device_open(backend, &b->dev, err));
  /* no public accessor for a device's backend: open another of its kind */
  const char *name = funnel_device_backend(b->dev);
  /* the ordinal asked for, else the one funnel opened: the check of where
   * the tables lie holds funnel to what was asked */
  const int asked = funnel__cuda_ordinal(backend);
  b->ordinal = strcmp(name, "cuda") != 0 ? -1 : asked >= 0 ? asked : (int)b->dev->be.device_id;
  FUNNEL_RETURN_NOT_OK(b->ordinal >= 0 ? funnel__cuda_backend_open(&b->be, b->ordinal, err)
                                       : funnel__cpu_backend_init(&b->be, err));
  b->be_open = 1;
  FUNNEL_RETURN_NOT_OK(funnel__dev_stream_create(&b->be, &b->stream, err));
  FUNNEL_RETURN_NOT_OK(funnel__dev_event_create(&b->be, &b->event, err));
  FUNNEL_RETURN_NOT_OK(funnel__dev_event_create_timed(&b->be, &b->ev_start, err));
  FUNNEL_RETURN_NOT_OK(funnel__dev_event_create_timed(&b->be, &b->ev_end, err));
  static const int transfer[N_READERS] = {FUNNEL_TRANSFER_AUTO, FUNNEL_TRANSFER_COPY,
                                          FUNNEL_TRANSFER_DIRECT, FUNNEL_TRANSFER_COPY,
                                          FUNNEL_TRANSFER_AUTO, FUNNEL_TRANSFER_AUTO,
                                          FUNNEL_TRANSFER_AUTO, FUNNEL_TRANSFER_AUTO};
  /* where a reader parses and decodes, or DEFAULT: the device's default,
   * AUTO unless FUNNEL_PARSE or FUNNEL_DECODE in the environment says
   * otherwise (main says so when it does); the strategies that force one
   * way force it whatever the environment */
  enum { DEFAULT = -1 };
  static const int parse[N_READERS] = {DEFAULT, DEFAULT, DEFAULT, DEFAULT, FUNNEL_PARSE_HOST,
                                       FUNNEL_PARSE_DEVICE, DEFAULT, DEFAULT};
  static const int decode[N_READERS] = {DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT,
                                        FUNNEL_DECODE_HOST, FUNNEL_DECODE_DEVICE};
  for (int r = 0; r < N_READERS; r++) {
    FUNNEL_RETURN_NOT_OK(funnel_reader_create(b->dev, NULL, 0, &b->reader[r], err));
    FUNNEL_RETURN_NOT_OK(
        funnel_reader_set_option(b->reader[r], FUNNEL_OPTION_TRANSFER, transfer[r], err));
    if (parse[r] != DEFAULT)
      FUNNEL_RETURN_NOT_OK(
          funnel_reader_set_option(b->reader[r], FUNNEL_OPTION_PARSE, parse[r], err));
    if (decode[r] != DEFAULT)
      FUNNEL_RETURN_NOT_OK(
          funnel_reader_set_option(b->reader[r], FUNNEL_OPTION_DECODE, decode[r], err));
  }
  return funnel_reader_set_option(b->reader[R_KERNEL], FUNNEL_OPTION_TIME_KERNEL, 1, err);
}

static void bench_close(struct bench *b) {
  for (int r = 0; r < N_READERS; r++) funnel_reader_free(b->reader[r]);
  free(b->scatter_dst);
  free(b->scatter_src);
  free(b->scatter_len);
  if (b->be_open) {
    if (b->stream != NULL) {
      funnel__dev_free(&b->be, b->dev_buf, b->stream);
      funnel__dev_free(&b->be, b->d2d_src, b->stream);
      funnel__dev_free(&b->be, b->d2d_dst, b->stream);
      if (b->event != NULL) sync_stream(b, NULL);
    }
    funnel__dev_event_destroy(&b->be, b->event);
    funnel__dev_event_destroy(&b->be, b->ev_start);
    funnel__dev_event_destroy(&b->be, b->ev_end);
    funnel__dev_stream_destroy(&b->be, b->stream);
    funnel__dev_host_free(&b->be, b->host_buf);
    if (b->be.release) b->be.release(&b->be);
  }
  free(b->cold);
  funnel_device_close(b->dev);
}

/* --------------------------------------------------------------- options */

enum { PRESET_DEFAULT, PRESET_QUICK, PRESET_FULL, PRESET_SPARK, PRESET_LARGE, PRESET_TARGETS };

struct options {
  const char *backend;
  int preset;
  struct shape shapes[MAX_SHAPES];
  int n_shapes;
  int mixes[N_MIXES];
  int n_mixes;
  unsigned codecs; /* --compress: bit c for codec c; 0: each grid's own */
  struct rep_policy reps;
  int64_t max_bytes;
  int64_t max_pieces; /* naive and batched_scatter: at most this many column pieces */
  int list_only;
  const char *csv_path;
  const char *json_path;
  const char *dump_dir;
  int strategy_off[N_STRATEGIES]; /* --strategy leaves the others out */
  int concurrent; /* reads at once: 1 measured, the others run behind it */
  int64_t cold_bytes; /* --cold: 0, or the bytes written before every iteration */
  int strategy_chosen; /* --strategy was given */
  int devices[MAX_DEVICES]; /* --devices: CUDA ordinals, each read in a process of its own */
  int n_devices;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: funnel_bench [--backend auto|cpu|cuda|cuda:N] [--quick | --full | --spark | --large |\n"
          "                    --targets] [--shape PxCxR]... [--mix int64|mixed|strings|nested]...\n"
          "                    [--compress none|lz4|zstd|all] [--lz4-frames java|spark]\n"
          "                    [--reps N] [--max-bytes SIZE] [--max-pieces N] [--strategy LIST]\n"
          "                    [--concurrent N | --devices LIST] [--cold SIZE] [--csv PATH] [--json PATH]\n"
          "                    [--dump DIR]\n"
          "                    [--list]\n"
          "\n"
          "Times reading P shuffle partitions (Arrow IPC streams, C columns, R rows each)\n"
          "into one device table with funnel, against one copy of the same bytes (link),\n"
          "the floor of any read (a device allocation, one copy from pinned memory, an\n"
          "empty kernel and an event wait), a synchronous copy per column buffer per\n"
          "partition (naive), a host-side concatenation then one copy (host_concat) and\n"
          "one batched copy of every column piece to its place (batched_scatter), from\n"
          "pinned and pageable memory; funnel with each transfer mode forced (funnel_copy,\n"
          "funnel_direct) and with the headers parsed on the host or on the device\n"
          "(funnel_host, funnel_device: funnel picks by the shape, or as FUNNEL_PARSE and\n"
          "FUNNEL_DECODE in the environment say, as any reader would); and on the device the\n"
          "concat kernel alone (kernel) against a\n"
          "copy of the result's bytes (d2d). Ends with the targets, each judged by name\n"
          "from ratios measured in this run.\n"
          "\n"
          "  --backend     device to open (default auto: cuda when there is one, else cpu;\n"
          "                cuda:N the CUDA device of ordinal N)\n"
          "  (default)     P {2,16,200,1000} x C {2,10,20} x R {1,100,10k,1M}, int64, mixed\n"
          "                and strings\n"
          "  --quick       P {2,16,200} x C {2,10} x R {100,10k}, int64 and strings; and\n"
          "                200x4x100 mixed and strings compressed with lz4 and zstd\n"
          "  --full        P {2,16,200,1000} x C {2,10,20} x R {1,10,...,1M}, every mix,\n"
          "                nested too; and the compressed large reads (as --large)\n"
          "  --spark       the Spark regime: P {200,1000,10k,50k} x C {4,10} x R {1,10,27,100},\n"
          "                mixed and strings (--mix chooses others), uncompressed unless\n"
          "                --compress says\n"
          "  --large       the shapes of the large-read targets (100 MiB and more) and the few\n"
          "                around them; and the compressed large reads: 200x10x20k mixed,\n"
          "                200x10x5k strings and 1000x10x4k mixed (about 200 MiB uncompressed\n"
          "                each), lz4 and zstd\n"
          "  --targets     every shape a target names: --large's, then --spark's, uncompressed\n"
          "                and lz4 (--mix and --compress filter)\n"
          "  --shape       a shape to run instead of the preset's grid, e.g. 200x10x10k (repeatable)\n"
          "  --mix         a column mix to run (repeatable, or comma-separated): int64 (no\n"
          "                nulls), mixed (int32, int64, float64, bool), strings (utf8, int64),\n"
          "                nested (list<int64>, list<utf8>, struct<a: int32, b: utf8>,\n"
          "                map<utf8, int64>); the columns cycle through the mix's types, about\n"
          "                10%% of the rows null at every nullable level (not int64). The\n"
          "                targets judge the first three only\n"
          "  --compress    the codecs to write the partitions with (repeatable, or\n"
          "                comma-separated): none, lz4 (LZ4_FRAME, as Arrow Java writes it),\n"
          "                zstd (level 3), all. With --shape, the default grid and --spark:\n"
          "                each shape in each codec; with --quick, --full, --large and\n"
          "                --targets, which have compressed shapes of their own: the runs of\n"
          "                those codecs only (--large --compress zstd: the compressed large\n"
          "                reads in zstd). Compressed columns hold\n"
          "                values drawn as shuffle data has them (codes, timestamps, prices,\n"
          "                words), which compress; the uncompressed ones random values, as\n"
"                always. Each row reports the compression ratio measured\n"
          "  --lz4-frames  java (default): LZ4 frames as Arrow Java's arrow-compression\n"
          "                writes them (4 MiB blocks, a content checksum, which the host\n"
          "                verifies); spark: as the funnel shuffle writes them with lz4-java\n"
          "                (64 KiB independent blocks, no checksum)\n"
          "  --reps        timed iterations after %d warm-up ones; the median is reported.\n"
          "                Default: adaptive, from the time t of the last warm-up iteration:\n"
          "                50 ms / t of them, at least 7 and at most 51 (--quick: 20 ms / t, 3\n"
          "                to 15), and 3 when t is over 25 ms. The strategies take their timed\n"
          "                iterations in turn (one of each, then the next of each), except with\n"
          "                --concurrent and --devices\n"
          "  --max-bytes   skip shapes whose partitions exceed SIZE bytes (default 1G)\n"
          "  --max-pieces  leave naive and batched_scatter, which make one call per column\n"
          "                piece, out of shapes of more than N pieces (P x buffers; default 50000)\n"
          "  --csv         results as CSV (default bench-results.csv)\n"
          "  --json        results as JSON lines (default: none)\n"
          "  --strategy    strategies to run, comma-separated (funnel, link and floor always\n"
          "                run, and on compressed rows link_compressed): funnel_copy,\n"
          "                funnel_direct, funnel_host, funnel_device, naive, host_concat,\n"
          "                batched_scatter, kernel, d2d, host_decompress_concat, host_stage\n"
          "                (pageable sources: the bytes staged into pinned memory as funnel\n"
          "                stages them, no device; on by default with --devices only); on\n"
          "                compressed rows funnel_host_decode and funnel_gpu_decode (funnel\n"
          "                with every buffer decoded on the host threads, or the values on\n"
          "                the device, LZ4 and ZSTD) too, and naive, host_concat and\n"
          "                batched_scatter do not apply\n"
          "  --concurrent  N reads at once, as a Spark executor's tasks make them: N - 1\n"
          "                threads read the same partitions again and again (a reader each,\n"
          "                so a stream each) while every strategy is measured (default 1)\n"
          "  --devices     several GPUs, e.g. 0,1: each device in a process of its own (as Spark\n"
          "                runs an executor a GPU) reads the same partitions, first alone, one\n"
          "                device after the other, then all at once, each strategy started on\n"
          "                every device together; reports each device's ms alone and together\n"
          "                and the aggregate GB/s (funnel, link and host_stage unless\n"
          "                --strategy says)\n"
          "  --cold        before every iteration of every strategy (outside its timed\n"
          "                region), write SIZE bytes of another host buffer, e.g. 256M: the\n"
          "                host's caches then hold other bytes, as a Spark task's fetch and\n"
          "                deserialization leave them before its read (default: off; each\n"
          "                strategy then follows the others' iterations, which warm them)\n"
          "  --dump        write each workload to DIR/PxCxR-MIX/ for the Java driver\n"
          "  --list        print the shape x mix runs selected and those skipped, then exit\n",
          WARMUP);
}

static const char *need_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) die("%s needs a value (see --help)", argv[*i]);
  return argv[++*i];
}

static void add_devices(struct options *o, const char *list) {
  char *copy = xmalloc(strlen(list) + 1);
  strcpy(copy, list);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char kind[32];
    snprintf(kind, sizeof(kind), "cuda:%.20s", tok);
    const int d = funnel__cuda_ordinal(kind);
    if (d < 0) die("bad device '%s' in --devices: expected CUDA ordinals, e.g. 0,1", tok);
    for (int i = 0; i < o->n_devices; i++)
      if (o->devices[i] == d) die("device %d twice in --devices", d);
    if (o->n_devices == MAX_DEVICES) die("at most %d --devices", MAX_DEVICES);
    o->devices[o->n_devices++] = d;
  }
  free(copy);
  if (o->n_devices < 2) die("--devices needs two devices or more, e.g. 0,1");
}

static void add_mixes(struct options *o, const char *list) {
  char *copy = xmalloc(strlen(list) + 1);
  strcpy(copy, list);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int m = 0; m < N_MIXES; m++)
      if (strcmp(tok, MIX_NAMES[m]) == 0) found = m;
    if (found < 0) die("unknown mix '%s': expected int64, mixed, strings or nested", tok);
    int dup = 0;
    for (int i = 0; i < o->n_mixes; i++) dup |= o->mixes[i] == found;
    if (!dup) o->mixes[o->n_mixes++] = found;
  }
  free(copy);
}

static void add_codecs(struct options *o, const char *list) {
  char *copy = xmalloc(strlen(list) + 1);
  strcpy(copy, list);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int c = 0; c < N_CODECS; c++)
      if (strcmp(tok, CODEC_NAMES[c]) == 0) found = c;
    if (strcmp(tok, "all") == 0) o->codecs |= (1u << N_CODECS) - 1;
    else if (found < 0)
      die("unknown codec '%s' in --compress: expected none, lz4, zstd or all", tok);
    else o->codecs |= 1u << found;
  }
  free(copy);
}

static void select_strategies(struct options *o, const char *list) {
  int want[N_STRATEGIES] = {0};
  char *copy = xmalloc(strlen(list) + 1);
  strcpy(copy, list);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int s = 0; s < N_STRATEGIES; s++)
      if (strcmp(tok, STRATEGIES[s].name) == 0) found = s;
    if (found < 0) die("unknown strategy '%s' (see --help)", tok);
    want[found] = 1;
  }
  free(copy);
  want[S_FUNNEL] = want[S_LINK] = want[S_FLOOR] = 1; /* every ratio is against these */
  /* on compressed rows only, and cheap: the limit of decoding on the device */
  want[S_LINK_COMPRESSED] = want[S_FUNNEL_GPU_DECODE] = want[S_FUNNEL_HOST_DECODE] = 1;
  if (want[S_KERNEL]) want[S_D2D] = 1;
  for (int s = 0; s < N_STRATEGIES; s++) o->strategy_off[s] = !want[s];
}

static struct shape parse_shape(const char *s) {
  char buf[128];
  if (strlen(s) >= sizeof(buf)) die("bad shape '%s': expected PxCxR, e.g. 200x10x1000", s);
  strcpy(buf, s);
  char *save = NULL, *p = strtok_r(buf, "xX", &save), *c = strtok_r(NULL, "xX", &save),
       *r = strtok_r(NULL, "xX", &save);
  const int64_t parts = p ? parse_count(p, 1000) : 0, cols = c ? parse_count(c, 1000) : 0,
                rows = r ? parse_count(r, 1000) : 0;
  if (!parts || !cols || !rows || strtok_r(NULL, "xX", &save) || parts > 1000000 || cols > 10000)
    die("bad shape '%s': expected PxCxR with positive P <= 1000000, C <= 10000, R", s);
  return (struct shape){(int)parts, (int)cols, rows};
}

static void parse_options(int argc, char **argv, struct options *o) {
  memset(o, 0, sizeof(*o));
  o->backend = "auto";
  o->max_bytes = (int64_t)1 << 30;
  o->max_pieces = 50000;
  o->csv_path = "bench-results.csv";
  o->concurrent = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--backend") == 0) {
      o->backend = need_value(argc, argv, &i);
      if (strcmp(o->backend, "auto") && strcmp(o->backend, "cpu") &&
          funnel__cuda_ordinal(o->backend) < -1)
        die("unknown backend '%s': expected auto, cpu, cuda or cuda:N", o->backend);
    } else if (strcmp(a, "--devices") == 0) {
      add_devices(o, need_value(argc, argv, &i));
    } else if (strcmp(a, "--quick") == 0) {
      o->preset = PRESET_QUICK;
    } else if (strcmp(a, "--full") == 0) {
      o->preset = PRESET_FULL;
    } else if (strcmp(a, "--spark") == 0) {
      o->preset = PRESET_SPARK;
    } else if (strcmp(a, "--large") == 0) {
      o->preset = PRESET_LARGE;
    } else if (strcmp(a, "--targets") == 0) {
      o->preset = PRESET_TARGETS;
    } else if (strcmp(a, "--shape") == 0) {
      if (o->n_shapes == MAX_SHAPES) die("at most %d --shape", MAX_SHAPES);
      o->shapes[o->n_shapes++] = parse_shape(need_value(argc, argv, &i));
    } else if (strcmp(a, "--mix") == 0) {
      add_mixes(o, need_value(argc, argv, &i));
    } else if (strcmp(a, "--compress") == 0) {
      add_codecs(o, need_value(argc, argv, &i));
    } else if (strcmp(a, "--lz4-frames") == 0) {
      const char *v = need_value(argc, argv, &i);
      if (strcmp(v, "java") == 0) lz4_frames = IW_LZ4_JAVA;
      else if (strcmp(v, "spark") == 0) lz4_frames = IW_LZ4_SPARK;
      else die("--lz4-frames is java or spark, not '%s'", v);
    } else if (strcmp(a, "--reps") == 0) {
      const int64_t reps = parse_count(need_value(argc, argv, &i), 1000);
      if (reps <= 0 || reps > 100000) die("--reps must be a positive number");
      o->reps.fixed = (int)reps;
    } else if (strcmp(a, "--max-bytes") == 0) {
      o->max_bytes = parse_count(need_value(argc, argv, &i), 1024);
      if (o->max_bytes <= 0) die("--max-bytes must be a positive size, e.g. 1073741824 or 1G");
    } else if (strcmp(a, "--max-pieces") == 0) {
      o->max_pieces = parse_count(need_value(argc, argv, &i), 1000);
      if (o->max_pieces <= 0) die("--max-pieces must be a positive number, e.g. 50000 or 50k");
    } else if (strcmp(a, "--concurrent") == 0) {
      o->concurrent = (int)parse_count(need_value(argc, argv, &i), 1000);
      if (o->concurrent < 1 || o->concurrent > 256) die("--concurrent must be 1 to 256");
    } else if (strcmp(a, "--cold") == 0) {
      o->cold_bytes = parse_count(need_value(argc, argv, &i), 1024);
      if (o->cold_bytes <= 0) die("--cold must be a positive size, e.g. 256M");
    } else if (strcmp(a, "--csv") == 0) {
      o->csv_path = need_value(argc, argv, &i);
    } else if (strcmp(a, "--json") == 0) {
      o->json_path = need_value(argc, argv, &i);
    } else if (strcmp(a, "--strategy") == 0) {
      select_strategies(o, need_value(argc, argv, &i));
      o->strategy_chosen = 1;
    } else if (strcmp(a, "--dump") == 0) {
      o->dump_dir = need_value(argc, argv, &i);
    } else if (strcmp(a, "--list") == 0) {
      o->list_only = 1;
    } else {
      usage(stderr);
      die("unknown argument '%s'", a);
    }
  }
  if (o->n_devices > 0) {
    if (strcmp(o->backend, "auto") != 0 && strcmp(o->backend, "cuda") != 0)
      die("--devices reads on cuda:N devices: leave --backend out (or say cuda)");
    if (o->concurrent > 1) die("--devices and --concurrent: one or the other");
    if (!o->strategy_chosen) select_strategies(o, "funnel,link,host_stage");
  }
  /* host_stage only tells something beside reads of other processes */
  if (!o->strategy_chosen && o->n_devices == 0) o->strategy_off[S_HOST_STAGE] = 1;
  if (o->codecs & ~1u && !iw_codecs_available())
    die("--compress lz4 or zstd: liblz4.so.1 and libzstd.so.1 cannot be loaded here");
  const int quick = o->preset == PRESET_QUICK;
  o->reps.min_reps = quick ? 3 : 7;
  o->reps.max_reps = quick ? 15 : 51;
  o->reps.budget_ns = (quick ? 20 : 50) * 1000000LL;
  o->reps.slow_reps = 3;
  /* 25 ms: the reads of 50,000 partitions on the H100 today; medians of 3
   * such are steady, and 4 fewer iterations of each keep --targets short */
  o->reps.slow_ns = 25 * 1000000LL;
}

static const char *preset_name(int preset) {
  static const char *const names[] = {"default", "quick", "full", "spark", "large", "targets"};
  return names[preset];
}

/* The selected runs, and those left out over --max-bytes. */
struct job_list {
  struct job *jobs, *skipped;
  int n, n_skipped, cap;
};

static void add_job(struct job_list *l, const struct options *o, struct shape s, int mix,
                    int codec) {
  for (int i = 0; i < l->n; i++)
    if (memcmp(&l->jobs[i].shape, &s, sizeof(s)) == 0 && l->jobs[i].mix == mix &&
        l->jobs[i].codec == codec)
      return;
  if (l->n == l->cap || l->n_skipped == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->jobs = realloc(l->jobs, (size_t)l->cap * sizeof(*l->jobs));
    l->skipped = realloc(l->skipped, (size_t)l->cap * sizeof(*l->skipped));
    if (l->jobs == NULL || l->skipped == NULL) die("out of host memory");
  }
  const struct job j = {s, mix, codec, estimate_bytes(s, mix)};
  if (j.est_bytes > o->max_bytes) l->skipped[l->n_skipped++] = j;
  else l->jobs[l->n++] = j;
}

/* A grid's codecs (bit c for codec c): its own, or with --compress those
 * of its own that --compress names in a preset that has compressed grids
 * of its own (--quick, --full, --large, --targets), and in the others
 * (the default, --spark, --shape) every codec --compress names. */
static unsigned grid_codecs(const struct options *o, unsigned own) {
  if (o->codecs == 0) return own;
  const int p = o->preset;
  const int filter = o->n_shapes == 0 && (p == PRESET_QUICK || p == PRESET_FULL ||
                                          p == PRESET_LARGE || p == PRESET_TARGETS);
  return filter ? own & o->codecs : o->codecs;
}

#define PLAIN (1u << CODEC_NONE)
#define COMPRESSED ((1u << CODEC_LZ4) | (1u << CODEC_ZSTD))

/* Adds `shapes` x the mixes `wanted` names (-1 ends it) that --mix selects,
 * in the codecs `codecs` (grid_codecs); `filter`: --mix only filters the
 * preset's mixes, else it replaces them. */
static void add_grid(struct job_list *l, const struct options *o, const struct shape *shapes,
                     int n_shapes, const int *wanted, int filter, unsigned codecs) {
  int mixes[N_MIXES], n = 0;
  for (int i = 0; wanted[i] >= 0; i++) {
    int chosen = o->n_mixes == 0;
    for (int m = 0; m < o->n_mixes; m++) chosen |= o->mixes[m] == wanted[i];
    if (chosen) mixes[n++] = wanted[i];
  }
  if (!filter && o->n_mixes > 0) {
    n = o->n_mixes;
    memcpy(mixes, o->mixes, sizeof(int) * (size_t)n);
  }
  for (int c = 0; c < N_CODECS; c++)
    for (int s = 0; s < n_shapes && (codecs >> c & 1u); s++)
      for (int m = 0; m < n; m++) add_job(l, o, shapes[s], mixes[m], c);
}

/* The Spark regime: a reduce task reads one small block from every map
 * task (Spark's default is 200 of them; stages of 50,000 exist), 10 to 100
 * rows each is common. The spark-regime targets judge every shape in it. */
static int spark_regime(const struct shape *s) { return s->parts >= 200 && s->rows <= 100; }

static int cross(struct shape *out, const int *ps, int np, const int *cs, int nc,
                 const int64_t *rs, int nr) {
  int n = 0;
  for (int i = 0; i < np; i++)
    for (int j = 0; j < nc; j++)
      for (int k = 0; k < nr; k++) out[n++] = (struct shape){ps[i], cs[j], rs[k]};
  return n;
}

static struct job_list make_jobs(const struct options *o) {
  static const int P_ALL[] = {2, 16, 200, 1000}, P_QUICK[] = {2, 16, 200},
                   P_SPARK[] = {200, 1000, 10000, 50000};
  static const int C_ALL[] = {2, 10, 20}, C_QUICK[] = {2, 10}, C_SPARK[] = {4, 10};
  static const int64_t R_DEFAULT[] = {1, 100, 10000, 1000000}, R_QUICK[] = {100, 10000},
                       R_FULL[] = {1, 10, 100, 1000, 10000, 100000, 1000000},
                       R_SPARK[] = {1, 10, 27, 100};
  /* nested only in --full (or by --mix): the targets judge the flat mixes
   * only, so the grids that time them leave it out */
  static const int FLAT_MIXES[] = {MIX_INT64, MIX_MIXED, MIX_STRINGS, -1},
                   FULL_MIXES[] = {MIX_INT64, MIX_MIXED, MIX_STRINGS, MIX_NESTED, -1},
                   QUICK_MIXES[] = {MIX_INT64, MIX_STRINGS, -1},
                   SPARK_MIXES[] = {MIX_MIXED, MIX_STRINGS, -1};
  /* the shapes and mixes the large-read targets name, and a few around them */
  static const struct { struct shape s; int mix; } LARGE[] = {
      {{200, 20, 100}, MIX_INT64},      {{1000, 10, 100}, MIX_INT64},
      {{200, 10, 1000}, MIX_INT64},     {{200, 10, 1000}, MIX_MIXED},
      {{200, 10, 1000}, MIX_STRINGS},   {{200, 10, 10000}, MIX_INT64},
      {{16, 10, 100000}, MIX_INT64},    {{2, 10, 1000000}, MIX_INT64},
      {{200, 10, 10000}, MIX_MIXED},    {{200, 10, 10000}, MIX_STRINGS},
      {{1000, 20, 1000}, MIX_STRINGS}};
  /* the compressed large reads: over 100 MiB uncompressed, 200 MiB or so;
   * the last the same rows as the first in 1,000 partitions, as a reduce
   * task of a large Spark job reads them (its LZ4 read from pinned memory
   * one the device decodes while it copies; ZSTD's partitions, over
   * FUNNEL__DPATH_MAX_AVG_ZSTD, take the host path) */
  static const struct { struct shape s; int mix; } LARGE_COMPRESSED[] = {
      {{200, 10, 20000}, MIX_MIXED}, {{200, 10, 5000}, MIX_STRINGS}, {{1000, 10, 4000}, MIX_MIXED}};
  /* --quick's compressed read: small, and in the Spark regime */
  static const struct shape QUICK_COMPRESSED = {200, 4, 100};

  struct job_list l;
  memset(&l, 0, sizeof(l));
  struct shape shapes[MAX_SHAPES];
  int n = 0;
  const int p = o->preset;
  if (o->n_shapes > 0) {
    const int *mixes = p == PRESET_QUICK   ? QUICK_MIXES
                       : p == PRESET_SPARK ? SPARK_MIXES
                       : p == PRESET_FULL  ? FULL_MIXES
                                           : FLAT_MIXES;
    add_grid(&l, o, o->shapes, o->n_shapes, mixes, 0, grid_codecs(o, PLAIN));
    return l;
  }
  if (p == PRESET_LARGE || p == PRESET_TARGETS) {
    for (size_t i = 0; i < sizeof(LARGE) / sizeof(LARGE[0]); i++) {
      const int wanted[2] = {LARGE[i].mix, -1};
      add_grid(&l, o, &LARGE[i].s, 1, wanted, 1, grid_codecs(o, PLAIN));
    }
  }
  if (p == PRESET_LARGE || p == PRESET_TARGETS || p == PRESET_FULL) {
    for (size_t i = 0; i < sizeof(LARGE_COMPRESSED) / sizeof(LARGE_COMPRESSED[0]); i++) {
      const int wanted[2] = {LARGE_COMPRESSED[i].mix, -1};
      add_grid(&l, o, &LARGE_COMPRESSED[i].s, 1, wanted, 1, grid_codecs(o, COMPRESSED));
    }
  }
  if (p == PRESET_SPARK || p == PRESET_TARGETS) {
    n = cross(shapes, P_SPARK, 4, C_SPARK, 2, R_SPARK, 4);
    add_grid(&l, o, shapes, n, SPARK_MIXES, p == PRESET_TARGETS,
             grid_codecs(o, p == PRESET_TARGETS ? PLAIN | 1u << CODEC_LZ4 : PLAIN));
  }
  if (p == PRESET_QUICK) {
    n = cross(shapes, P_QUICK, 3, C_QUICK, 2, R_QUICK, 2);
    add_grid(&l, o, shapes, n, QUICK_MIXES, 0, grid_codecs(o, PLAIN));
    add_grid(&l, o, &QUICK_COMPRESSED, 1, SPARK_MIXES, 1, grid_codecs(o, COMPRESSED));
  } else if (p == PRESET_DEFAULT || p == PRESET_FULL) {
    n = p == PRESET_FULL ? cross(shapes, P_ALL, 4, C_ALL, 3, R_FULL, 7)
                         : cross(shapes, P_ALL, 4, C_ALL, 3, R_DEFAULT, 4);
    add_grid(&l, o, shapes, n, p == PRESET_FULL ? FULL_MIXES : FLAT_MIXES, 0,
             grid_codecs(o, PLAIN));
  }
  return l;
}

/* FUNNEL_PINNED_POOL_BYTES, read when the device opens, unless the user
 * set it: room for the pinned copy of the workload, for staging its
 * pageable copy (cuda) and for the segment tables: 3x its bytes, and for a
 * compressed workload its decoded bytes, capped at a quarter of the host's
 * memory and 16 GiB (cuda pins all of it at once). */
static void size_pinned_pool(const struct workload *w) {
  int64_t size = 3 * w->region_size + ((int64_t)64 << 20);
  if (w->codec != CODEC_NONE) size += w->raw_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t cap = (int64_t)16 << 30;
  if (pages > 0 && page > 0 && (int64_t)pages * page / 4 < cap) cap = (int64_t)pages * page / 4;
  if (size > cap) size = cap;
  char buf[32];
  snprintf(buf, sizeof(buf), "%lld", (long long)size);
  setenv("FUNNEL_PINNED_POOL_BYTES", buf, 1);
}

/* ---------------------------------------------------------------- output */

/* Geometric means of the ratios per source, for the closing summary. */
struct summary {
  int n;
  double log_vs_link;       /* funnel / link */
  double log_vs_bound;      /* funnel / max(link, floor) */
  double log_over_naive;    /* naive / funnel, over n_naive shapes */
  int n_naive;
  double log_over_concat;   /* host_concat / funnel */
  double log_over_scatter;  /* batched_scatter / funnel, over n_scatter shapes */
  int n_scatter;
  double best_over_naive, worst_over_naive;
  /* compressed rows, per codec: funnel / link of the uncompressed bytes,
   * host_decompress_concat / funnel, and the compression ratio */
  int n_codec[N_CODECS];
  double log_codec_vs_link[N_CODECS], log_over_decompress[N_CODECS], log_ratio[N_CODECS];
};

/* The targets, each judged by name over the rows (shape, mix, source) it
 * applies to, from ratios measured in this run. */
enum {
  T_SPARK_CONCAT,
  T_SPARK_PINNED,
  T_SPARK_PAGEABLE,
  T_LARGE_PINNED,
  T_LARGE_STRINGS,
  T_LARGE_PAGEABLE,
  T_KERNEL,
  T_SMALL_READ,
  T_NAIVE,
  T_LZ4_LINK,
  T_ZSTD_RATE,
  T_SPARK_DECOMPRESS,
  N_TARGETS
};
static const char *const TARGET_NAMES[N_TARGETS] = {
    "spark regime: funnel >= 2x as fast as host concat",
    "spark regime, pinned: funnel <= 1.5x max(link, floor)",
    "spark regime, pageable: funnel <= 2x the pinned read and >= 2x as fast as host concat",
    "large reads, pinned: >= 90% of the link",
    "large reads, pinned strings: >= 80% of the link",
    "large reads, pageable: >= 30 GB/s",
    "kernel: >= 80% of a device-to-device copy (outputs >= 10 MiB)",
    "200x20x100 int64, pinned: <= 0.2 ms and >= 2x as fast as host concat",
    "200x10x1000: >= 20x as fast as naive",
    /* parenthesized: one name over two lines (clang's -Wstring-concatenation) */
    ("compressed lz4 (>= 100 MiB uncompressed, ratio >= 2): funnel >= 1.5x the link of the "
     "uncompressed bytes"),
    "compressed zstd (>= 100 MiB uncompressed): >= 20 GB/s of uncompressed output",
    "spark regime, compressed: funnel >= 2x as fast as host decompress + concat + copy",
};

/* One row of a target: badness is the measured ratio over the target's
 * bound, oriented so that > 1 misses (INFINITY: funnel failed; NAN: a
 * reference was not measured, so the row is not judged). */
struct target_row {
  int target;
  double badness;
  /* it asks funnel to be faster than the floor of any read (host concat's
   * half below the floor): a miss no reader could avoid */
  int below_floor;
  char text[256];
};

struct report {
  const char *backend;
  FILE *csv, *json;
  struct summary summary[N_SOURCES];
  struct target_row *rows;
  int n_rows, cap_rows;
  char info[4][256]; /* lines judged elsewhere (torch.cat) */
  int n_info;
};

static void csv_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    const unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

/* Where a read parsed the headers: "host", "device", or "host after
 * device" (the device path left partitions to the host). */
static const char *parsed_on(const struct funnel_read_stats *s) {
  if (s->device_parsed == 0) return "host";
  return s->device_left == 0 ? "device" : "host after device";
}

/* Columns are only ever appended: the Java driver and the chart read them
 * by name. */
static const char CSV_HEADER[] =
    "backend,partitions,columns,rows_per_partition,rows,mix,source,strategy,bytes,h2d_bytes,"
    "reps,ms_median,ms_min,gb_per_s,ratio_to_link,funnel_speedup,calls,h2d_copies,launches,"
    "syncs,allocs,staged_partitions,parse_ms,plan_ms,submit_ms,verified,error,out_bytes,"
    "ratio_to_d2d,direct_partitions,kernel_ms,floor_ms,ratio_to_bound,parsed_on,codec,raw_bytes,"
    "compression_ratio,effective_gb_per_s,compressed_partitions,bytes_compressed,bytes_decoded,"
    "decode_ms,decoded_pinned,kernel_bound\n";

static void print_table_header(void) {
  printf("%-16s %-12s %-8s %-22s %9s %10s %10s %8s %8s %9s %7s %6s %6s %6s\n", "shape", "mix",
         "source", "strategy", "MiB", "ms median", "ms min", "GB/s", "vs link", "funnel x",
         "calls", "h2d", "syncs", "launch");
}

static void add_row(struct report *r, int target, double badness, const char *fmt, ...) {
  if (r->n_rows == r->cap_rows) {
    r->cap_rows = r->cap_rows ? 2 * r->cap_rows : 256;
    r->rows = realloc(r->rows, (size_t)r->cap_rows * sizeof(*r->rows));
    if (r->rows == NULL) die("out of host memory");
  }
  struct target_row *t = &r->rows[r->n_rows++];
  t->target = target;
  t->badness = badness;
  t->below_floor = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->text, sizeof(t->text), fmt, ap);
  va_end(ap);
}

static int ok_ms(const struct measurement *m) {
  return !m->skipped && m->status == FUNNEL_OK && m->ms_median > 0;
}

static double max2(double a, double b) { return a > b ? a : b; }

/* What came back of one (workload, source). */
struct group_result {
  int measured; /* verified, and its strategies reported */
  struct measurement m[N_STRATEGIES];
};

/* The rows of a compressed workload, from both of its sources: its own
 * targets only (the others were set for plain partitions). Large: 100 MiB
 * uncompressed or more, outside the Spark regime. Effective throughput is
 * of the uncompressed bytes; the lz4 target's link is the pinned one (the
 * physical limit), for the rows of both sources. */
static void judge_compressed(struct report *r, const struct workload *w,
                             const struct group_result g[N_SOURCES]) {
  const int64_t MIB = (int64_t)1 << 20;
  const int spark = spark_regime(&w->shape), large = w->raw_bytes >= 100 * MIB && !spark;
  const double ratio = compression_ratio(w);
  char shape[64], mix[32];
  shape_name(&w->shape, shape, sizeof(shape));
  mix_label(w->mix, w->codec, mix, sizeof(mix));
  const struct measurement *pinned_link = &g[SRC_PINNED].m[S_LINK];
  for (int src = 0; src < N_SOURCES; src++) {
    if (!g[src].measured) continue;
    const struct measurement *m = g[src].m, *f = &m[S_FUNNEL];
    char row[128];
    snprintf(row, sizeof(row), "%s %s %s (ratio %.2f)", shape, mix, SOURCE_NAMES[src], ratio);
    int applies[N_TARGETS] = {0};
    applies[T_LZ4_LINK] = large && w->codec == CODEC_LZ4;
    applies[T_ZSTD_RATE] = large && w->codec == CODEC_ZSTD;
    applies[T_SPARK_DECOMPRESS] = spark;
    if (!ok_ms(f)) {
      for (int t = 0; t < N_TARGETS; t++)
        if (applies[t]) add_row(r, t, INFINITY, "%s: funnel failed: %s", row, f->error);
      continue;
    }
    const double fm = f->ms_median, gbps = (double)w->raw_bytes / (fm * 1e6);
    if (applies[T_LZ4_LINK]) {
      if (ratio < 2)
        add_row(r, T_LZ4_LINK, NAN, "%s: compression ratio under 2", row);
      else if (!g[SRC_PINNED].measured || !ok_ms(pinned_link))
        add_row(r, T_LZ4_LINK, NAN, "%s: no pinned link measured", row);
      else
        add_row(r, T_LZ4_LINK, 1.5 / (pinned_link->ms_median / fm),
                "%s: %.2fx the link (%.1f GB/s of uncompressed bytes; their pinned link %.1f GB/s)",
                row, pinned_link->ms_median / fm, gbps,
                (double)w->raw_bytes / (pinned_link->ms_median * 1e6));
    }
    if (applies[T_ZSTD_RATE])
      add_row(r, T_ZSTD_RATE, 20 / gbps, "%s: %.1f GB/s of uncompressed output (%.3f ms)", row,
              gbps, fm);
    if (applies[T_SPARK_DECOMPRESS]) {
      const struct measurement *h = &m[S_HOST_DECOMPRESS_CONCAT];
      if (!ok_ms(h))
        add_row(r, T_SPARK_DECOMPRESS, NAN, "%s: no host_decompress_concat measured", row);
      else
        add_row(r, T_SPARK_DECOMPRESS, (fm / h->ms_median) / 0.5,
                "%s: %.2fx as fast as host decompress + concat (%.3f against %.3f ms)", row,
                h->ms_median / fm, fm, h->ms_median);
    }
  }
}

/* The rows of a workload, from both of its sources. Spark regime: P >= 200
 * partitions of at most 100 rows (spark_regime); large reads: 100 MiB of
 * partitions or more, outside it (the Spark regime has bars of its own).
 * The kernel-alone target against torch.cat is judged by bench/torch_cat.py
 * and JNI overhead by the Java driver. */
static void judge_workload(struct report *r, const struct workload *w,
                           const struct group_result g[N_SOURCES]) {
  const int64_t MIB = (int64_t)1 << 20;
  const struct shape s = w->shape;
  /* the targets were set for the flat mixes: a nested mix's rows are
   * measured and summarized, not judged */
  if (w->mix == MIX_NESTED) return;
  if (w->codec != CODEC_NONE) {
    judge_compressed(r, w, g);
    return;
  }
  const int spark = spark_regime(&s), large = w->total_bytes >= 100 * MIB && !spark;
  const int strings = w->mix == MIX_STRINGS;
  const int small = s.parts == 200 && s.cols == 20 && s.rows == 100 && w->mix == MIX_INT64;
  const int naive_shape = s.parts == 200 && s.cols == 10 && s.rows == 1000;
  char shape[64];
  shape_name(&s, shape, sizeof(shape));
  for (int src = 0; src < N_SOURCES; src++) {
    if (!g[src].measured) continue;
    const struct measurement *m = g[src].m, *f = &m[S_FUNNEL];
    const int pinned = src == SRC_PINNED;
    char row[96];
    snprintf(row, sizeof(row), "%s %s %s", shape, MIX_NAMES[w->mix], SOURCE_NAMES[src]);
    const double fm = f->ms_median, link = m[S_LINK].ms_median, floor_ms = m[S_FLOOR].ms_median;
    const double hc = m[S_HOST_CONCAT].ms_median;

    if (pinned && w->out_bytes >= 10 * MIB && !m[S_KERNEL].skipped) {
      if (!ok_ms(&m[S_KERNEL]))
        add_row(r, T_KERNEL, INFINITY, "%s: the kernel failed: %s", row, m[S_KERNEL].error);
      else if (!ok_ms(&m[S_D2D]))
        add_row(r, T_KERNEL, NAN, "%s: no d2d copy measured", row);
      else {
        const double frac = m[S_D2D].ms_median / m[S_KERNEL].ms_median, bound = kernel_bound(w);
        char at_most[64] = "";
        if (bound > 0) snprintf(at_most, sizeof(at_most), "; its bytes' bound %.0f%%", 100 * bound);
        add_row(r, T_KERNEL, 0.8 / frac,
                "%s: kernel %.4f ms = %.0f%% of the d2d copy of its %.1f MiB (%.4f ms)%s", row,
                m[S_KERNEL].ms_median, 100 * frac, mib(w->out_bytes), m[S_D2D].ms_median, at_most);
        /* 80% asks for more than its bytes allow */
        r->rows[r->n_rows - 1].below_floor = bound > 0 && bound < 0.8;
      }
    }
    if (pinned && naive_shape && w->mix == MIX_INT64 && ok_ms(&m[S_KERNEL]) && r->n_info < 4)
      snprintf(r->info[r->n_info++], sizeof(r->info[0]),
               "kernel alone: >= 50x as fast as torch.cat per column: judged by "
               "bench/torch_cat.py; %s: kernel %.4f ms", row, m[S_KERNEL].ms_median);

    /* the targets of funnel's own time that apply to this row */
    int applies[N_TARGETS] = {0};
    applies[T_SPARK_CONCAT] = spark;
    applies[T_SPARK_PINNED] = spark && pinned;
    applies[T_SPARK_PAGEABLE] = spark && !pinned;
    applies[T_LARGE_PINNED] = large && pinned && !strings;
    applies[T_LARGE_STRINGS] = large && pinned && strings;
    applies[T_LARGE_PAGEABLE] = large && !pinned;
    applies[T_SMALL_READ] = small && pinned;
    applies[T_NAIVE] = naive_shape;
    if (!ok_ms(f)) {
      for (int t = 0; t < N_TARGETS; t++)
        if (applies[t]) add_row(r, t, INFINITY, "%s: funnel failed: %s", row, f->error);
      continue;
    }
    const double gbps = (double)w->total_bytes / (fm * 1e6);
    const double link_gbps = ok_ms(&m[S_LINK]) ? (double)w->total_bytes / (link * 1e6) : 0;
    if (applies[T_SPARK_CONCAT]) {
      if (!ok_ms(&m[S_HOST_CONCAT]))
        add_row(r, T_SPARK_CONCAT, NAN, "%s: no host_concat measured", row);
      else
        add_row(r, T_SPARK_CONCAT, (fm / hc) / 0.5,
                "%s: funnel %.2fx host concat's time (%.3f against %.3f ms; target <= 0.5x)", row,
                fm / hc, fm, hc);
      if (ok_ms(&m[S_HOST_CONCAT]) && ok_ms(&m[S_FLOOR]))
        r->rows[r->n_rows - 1].below_floor = 0.5 * hc < floor_ms;
    }
    if (applies[T_SPARK_PINNED]) {
      if (!ok_ms(&m[S_LINK]) || !ok_ms(&m[S_FLOOR]))
        add_row(r, T_SPARK_PINNED, NAN, "%s: no link or floor measured", row);
      else
        add_row(r, T_SPARK_PINNED, fm / max2(link, floor_ms) / 1.5,
                "%s: funnel %.2fx max(link, floor) (%.3f ms; link %.3f, floor %.3f ms; "
                "target <= 1.5x)", row, fm / max2(link, floor_ms), fm, link, floor_ms);
    }
    if (applies[T_SPARK_PAGEABLE]) {
      const struct measurement *pf = &g[SRC_PINNED].m[S_FUNNEL];
      if (!g[SRC_PINNED].measured || !ok_ms(pf) || !ok_ms(&m[S_HOST_CONCAT]))
        add_row(r, T_SPARK_PAGEABLE, NAN, "%s: no pinned read or host_concat measured", row);
      else
        add_row(r, T_SPARK_PAGEABLE, max2(fm / pf->ms_median / 2, fm / hc / 0.5),
                "%s: funnel %.3f ms = %.2fx the pinned read's %.3f ms (target <= 2x), %.2fx host "
                "concat's %.3f ms (target <= 0.5x)", row, fm, fm / pf->ms_median, pf->ms_median,
                fm / hc, hc);
      if (g[SRC_PINNED].measured && ok_ms(pf) && ok_ms(&m[S_HOST_CONCAT]) && ok_ms(&m[S_FLOOR]))
        r->rows[r->n_rows - 1].below_floor = 0.5 * hc < floor_ms;
    }
    for (int t = T_LARGE_PINNED; t <= T_LARGE_STRINGS; t++) {
      if (!applies[t]) continue;
      const double want = t == T_LARGE_STRINGS ? 0.8 : 0.9;
      if (!ok_ms(&m[S_LINK])) {
        add_row(r, t, NAN, "%s: no link measured", row);
        continue;
      }
      const double frac = link / fm;
      add_row(r, t, want / frac, "%s: %.0f%% of the link (%.1f of %.1f GB/s)", row, 100 * frac,
              gbps, link_gbps);
    }
    if (applies[T_LARGE_PAGEABLE])
      add_row(r, T_LARGE_PAGEABLE, 30 / gbps,
              "%s: %.1f GB/s (one copy from pageable memory: %.1f GB/s)", row, gbps, link_gbps);
    if (applies[T_SMALL_READ]) {
      if (!ok_ms(&m[S_HOST_CONCAT]))
        add_row(r, T_SMALL_READ, NAN, "%s: no host_concat measured", row);
      else
        add_row(r, T_SMALL_READ, max2(fm / 0.2, 2 / (hc / fm)),
                "%s: %.3f ms (target <= 0.2), %.2fx as fast as host concat (target >= 2x)", row,
                fm, hc / fm);
    }
    if (applies[T_NAIVE]) {
      if (!ok_ms(&m[S_NAIVE]))
        add_row(r, T_NAIVE, NAN, "%s: no naive measured", row);
      else
        add_row(r, T_NAIVE, 20 / (m[S_NAIVE].ms_median / fm),
                "%s: %.1fx as fast as naive (%.3f against %.3f ms)", row,
                m[S_NAIVE].ms_median / fm, fm, m[S_NAIVE].ms_median);
    }
  }
}

static void report_group(struct report *r, const struct workload *w, int src, const char *verified,
                         const struct measurement m[N_STRATEGIES]) {
  char shape[64], mix[32];
  shape_name(&w->shape, shape, sizeof(shape));
  mix_label(w->mix, w->codec, mix, sizeof(mix));
  const char *source = SOURCE_NAMES[src];
  const double ratio = compression_ratio(w);
  const double link = ok_ms(&m[S_LINK]) ? m[S_LINK].ms_median : 0;
  const double floor_ms = ok_ms(&m[S_FLOOR]) ? m[S_FLOOR].ms_median : 0;
  const double bound = max2(link, floor_ms);
  const double d2d = ok_ms(&m[S_D2D]) ? m[S_D2D].ms_median : 0;
  const double fun = ok_ms(&m[S_FUNNEL]) ? m[S_FUNNEL].ms_median : 0;
  for (int s = 0; s < N_STRATEGIES; s++) {
    const struct measurement *x = &m[s];
    if (x->skipped) {
      if (x->skip_why[0])
        printf("%-16s %-12s %-8s %-22s skipped: %s\n", shape, mix, source, STRATEGIES[s].name,
               x->skip_why);
      continue;
    }
    const int ok = x->status == FUNNEL_OK;
    const int dev = STRATEGIES[s].device_time;
    /* end to end: GB/s of the partitions' bytes (uncompressed), which every
     * strategy delivers; device time: GB/s of the result's bytes */
    const int64_t bytes = dev ? w->out_bytes : w->raw_bytes;
    const double gbps = ok && x->ms_median > 0 ? (double)bytes / (x->ms_median * 1e6) : 0;
    /* the CSV's and JSON's gb_per_s: of the partitions' bytes as given */
    const int64_t given = dev ? w->out_bytes : w->total_bytes;
    const double given_gbps = ok && x->ms_median > 0 ? (double)given / (x->ms_median * 1e6) : 0;
    const double vs_link = ok && !dev && link > 0 ? x->ms_median / link : 0;
    const double vs_bound = ok && !dev && bound > 0 ? x->ms_median / bound : 0;
    const double vs_d2d = ok && dev && d2d > 0 ? x->ms_median / d2d : 0;
    const double speedup = ok && !dev && fun > 0 && s != S_FUNNEL ? x->ms_median / fun : 0;
    char speedup_text[32] = "-", ratio_text[32] = "-";
    if (speedup > 0) snprintf(speedup_text, sizeof(speedup_text), "%.2fx", speedup);
    if (vs_link > 0) snprintf(ratio_text, sizeof(ratio_text), "%.2fx", vs_link);
    if (vs_d2d > 0) snprintf(ratio_text, sizeof(ratio_text), "d2d %.2f", vs_d2d);
    if (ok)
      printf("%-16s %-12s %-8s %-22s %9.3f %10.4f %10.4f %8.2f %8s %9s %7lld %6lld %6lld %6lld\n",
             shape, mix, source, STRATEGIES[s].name, mib(bytes), x->ms_median, x->ms_min, gbps,
             ratio_text, speedup_text, (long long)x->calls.calls, (long long)x->calls.h2d_copies,
             (long long)x->calls.syncs, (long long)x->calls.launches);
    else
      printf("%-16s %-12s %-8s %-22s FAILED %s\n", shape, mix, source, STRATEGIES[s].name, x->error);
    const int has_stats = (s == S_FUNNEL || s == S_FUNNEL_COPY || s == S_FUNNEL_DIRECT) && ok;
    if (s == S_FUNNEL && ok && x->stats.compressed_partitions > 0) {
      const struct funnel_read_stats *st = &x->stats;
      /* the host's share: what the device decoded is not in decode_ns */
      const int64_t on_host = st->bytes_decoded - st->bytes_device_decoded;
      printf("%-16s %-12s %-8s   decoded: %lld of %lld partitions, %.3f -> %.3f MiB (%.2fx), %.4f ms "
             "on the host threads for %.3f MiB of it (%.2f GB/s), into %s; the device %.3f MiB "
             "of values (%lld buffers)\n", "", "", "",
             (long long)st->compressed_partitions, (long long)st->partitions,
             mib(st->bytes_compressed), mib(st->bytes_decoded),
             st->bytes_compressed > 0 ? (double)st->bytes_decoded / st->bytes_compressed : 0,
             st->decode_ns / 1e6, mib(on_host),
             st->decode_ns > 0 ? (double)on_host / st->decode_ns : 0,
             st->decoded_pinned ? "the pinned pool" : "host memory, then staged",
             mib(st->bytes_device_decoded), (long long)st->device_decoded);
    }
    if (STRATEGIES[s].column_only) continue; /* the floor: floor_ms on every row */

    const double parse_ms = x->stats.parse_ns / 1e6, plan_ms = x->stats.plan_ns / 1e6,
                 submit_ms = x->stats.submit_ns / 1e6;
    if (r->csv != NULL) {
      FILE *f = r->csv;
      fprintf(f, "%s,%d,%d,%lld,%lld,%s,%s,%s,%lld,%lld,%d,", r->backend, w->shape.parts,
              w->shape.cols, (long long)w->shape.rows,
              (long long)((int64_t)w->shape.parts * w->shape.rows), MIX_NAMES[w->mix], source,
              STRATEGIES[s].name, (long long)w->total_bytes, (long long)x->calls.bytes_h2d, x->reps);
      if (ok) fprintf(f, "%.6f,%.6f,%.4f,", x->ms_median, x->ms_min, given_gbps);
      else fputs(",,,", f);
      if (vs_link > 0) fprintf(f, "%.4f", vs_link);
      fputc(',', f);
      if (speedup > 0) fprintf(f, "%.4f", speedup);
      fprintf(f, ",%lld,%lld,%lld,%lld,%lld,", (long long)x->calls.calls,
              (long long)x->calls.h2d_copies, (long long)x->calls.launches,
              (long long)x->calls.syncs, (long long)x->calls.allocs);
      if (has_stats)
        fprintf(f, "%lld,%.6f,%.6f,%.6f", (long long)x->stats.staged_partitions, parse_ms, plan_ms,
                submit_ms);
      else
        fputs(",,,", f);
      fprintf(f, ",%s,", verified);
      csv_string(f, x->error);
      fprintf(f, ",%lld,", (long long)w->out_bytes);
      if (vs_d2d > 0) fprintf(f, "%.4f", 1.0 / vs_d2d);
      fputc(',', f);
      if (has_stats) fprintf(f, "%lld", (long long)x->stats.direct_partitions);
      fputc(',', f);
      if (s == S_KERNEL && ok) fprintf(f, "%.6f", x->ms_median);
      fputc(',', f);
      if (floor_ms > 0) fprintf(f, "%.6f", floor_ms);
      fputc(',', f);
      if (vs_bound > 0) fprintf(f, "%.4f", vs_bound);
      fputc(',', f);
      if (has_stats) fputs(parsed_on(&x->stats), f);
      fprintf(f, ",%s,%lld,%.4f,", CODEC_NAMES[w->codec], (long long)w->raw_bytes, ratio);
      if (ok && !dev) fprintf(f, "%.4f", gbps);
      if (has_stats)
        fprintf(f, ",%lld,%lld,%lld,%.6f,%lld", (long long)x->stats.compressed_partitions,
                (long long)x->stats.bytes_compressed, (long long)x->stats.bytes_decoded,
                x->stats.decode_ns / 1e6, (long long)x->stats.decoded_pinned);
      else
        fputs(",,,,,", f);
      const double bound = kernel_bound(w);
      fputc(',', f);
      if (bound > 0) fprintf(f, "%.4f", bound);
      fputc('\n', f);
    }
    if (r->json != NULL) {
      FILE *f = r->json;
      fprintf(f,
              "{\"backend\":\"%s\",\"partitions\":%d,\"columns\":%d,\"rows_per_partition\":%lld,"
              "\"mix\":\"%s\",\"source\":\"%s\",\"strategy\":\"%s\",\"bytes\":%lld,"
              "\"out_bytes\":%lld,\"reps\":%d,\"device_time\":%s,\"codec\":\"%s\","
              "\"raw_bytes\":%lld,\"compression_ratio\":%.4f,",
              r->backend, w->shape.parts, w->shape.cols, (long long)w->shape.rows,
              MIX_NAMES[w->mix], source, STRATEGIES[s].name, (long long)w->total_bytes,
              (long long)w->out_bytes, x->reps, dev ? "true" : "false", CODEC_NAMES[w->codec],
              (long long)w->raw_bytes, ratio);
      if (ok)
        fprintf(f, "\"ms_median\":%.6f,\"ms_min\":%.6f,\"gb_per_s\":%.4f,", x->ms_median,
                x->ms_min, given_gbps);
      else
        fputs("\"ms_median\":null,\"ms_min\":null,\"gb_per_s\":null,", f);
      fprintf(f, "\"effective_gb_per_s\":");
      if (ok && !dev) fprintf(f, "%.4f,", gbps); else fputs("null,", f);
      fprintf(f, "\"ratio_to_link\":");
      if (vs_link > 0) fprintf(f, "%.4f,", vs_link); else fputs("null,", f);
      fprintf(f, "\"floor_ms\":");
      if (floor_ms > 0) fprintf(f, "%.6f,", floor_ms); else fputs("null,", f);
      fprintf(f, "\"ratio_to_bound\":");
      if (vs_bound > 0) fprintf(f, "%.4f,", vs_bound); else fputs("null,", f);
      fprintf(f, "\"funnel_speedup\":");
      if (speedup > 0) fprintf(f, "%.4f,", speedup); else fputs("null,", f);
      fprintf(f, "\"calls\":%lld,\"h2d_copies\":%lld,\"launches\":%lld,\"syncs\":%lld,\"allocs\":%lld,",
              (long long)x->calls.calls, (long long)x->calls.h2d_copies,
              (long long)x->calls.launches, (long long)x->calls.syncs, (long long)x->calls.allocs);
      if (has_stats)
        fprintf(f,
                "\"staged_partitions\":%lld,\"direct_partitions\":%lld,\"parse_ms\":%.6f,"
                "\"plan_ms\":%.6f,\"submit_ms\":%.6f,",
                (long long)x->stats.staged_partitions, (long long)x->stats.direct_partitions,
                parse_ms, plan_ms, submit_ms);
      if (has_stats && w->codec != CODEC_NONE)
        fprintf(f,
                "\"compressed_partitions\":%lld,\"bytes_compressed\":%lld,\"bytes_decoded\":%lld,"
                "\"decode_ms\":%.6f,\"decoded_pinned\":%s,",
                (long long)x->stats.compressed_partitions, (long long)x->stats.bytes_compressed,
                (long long)x->stats.bytes_decoded, x->stats.decode_ns / 1e6,
                x->stats.decoded_pinned ? "true" : "false");
      fprintf(f, "\"verified\":\"%s\",\"error\":", verified);
      json_string(f, x->error);
      fputs("}\n", f);
    }
  }
  putchar('\n');
  fflush(stdout);
  if (r->csv != NULL) fflush(r->csv); /* a long run interrupted keeps what it measured */
  if (r->json != NULL) fflush(r->json);

  if (w->codec != CODEC_NONE && fun > 0 && link > 0 && ok_ms(&m[S_HOST_DECOMPRESS_CONCAT])) {
    struct summary *sum = &r->summary[src];
    sum->n_codec[w->codec]++;
    sum->log_codec_vs_link[w->codec] += log(fun / link);
    sum->log_over_decompress[w->codec] += log(m[S_HOST_DECOMPRESS_CONCAT].ms_median / fun);
    sum->log_ratio[w->codec] += log(ratio);
  }
  if (fun > 0 && link > 0 && ok_ms(&m[S_HOST_CONCAT])) {
    struct summary *sum = &r->summary[src];
    sum->n++;
    sum->log_vs_link += log(fun / link);
    sum->log_vs_bound += log(fun / bound);
    sum->log_over_concat += log(m[S_HOST_CONCAT].ms_median / fun);
    if (ok_ms(&m[S_NAIVE])) {
      const double over_naive = m[S_NAIVE].ms_median / fun;
      if (sum->n_naive == 0 || over_naive > sum->best_over_naive) sum->best_over_naive = over_naive;
      if (sum->n_naive == 0 || over_naive < sum->worst_over_naive) sum->worst_over_naive = over_naive;
      sum->n_naive++;
      sum->log_over_naive += log(over_naive);
    }
    if (ok_ms(&m[S_BATCHED_SCATTER])) {
      sum->n_scatter++;
      sum->log_over_scatter += log(m[S_BATCHED_SCATTER].ms_median / fun);
    }
  }
}

static int cmp_rows_worst_first(const void *a, const void *b) {
  const double x = ((const struct target_row *)a)->badness,
               y = ((const struct target_row *)b)->badness;
  /* rows not judged (NAN) last */
  if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
  return x < y ? 1 : x > y ? -1 : 0;
}

/* One verdict line per target, its worst row named first, then up to
 * three more rows that miss. */
static void print_targets(struct report *r, int cpu) {
  printf("targets, each judged from ratios measured in this run (worst row first)%s:\n",
         cpu ? "; cpu backend: these verdicts check the harness, not GPU speed" : "");
  printf("  (spark regime: >= 200 partitions of <= 100 rows; large reads: >= 100 MiB of\n"
         "  partitions outside it; floor: allocation + one copy + empty kernel + event wait;\n"
         "  compressed rows: judged by the compressed targets only, their sizes and rates of\n"
         "  the uncompressed bytes)\n");
  /* no rows at all (only nested runs, or shapes no target names): rows is
   * NULL, which qsort may not be given even for 0 of them */
  if (r->n_rows > 0) qsort(r->rows, (size_t)r->n_rows, sizeof(*r->rows), cmp_rows_worst_first);
  int met = 0, missed = 0, not_judged = 0;
  for (int t = 0; t < N_TARGETS; t++) {
    int n = 0, pass = 0, unjudged = 0, below_floor = 0;
    const struct target_row *worst = NULL;
    for (int i = 0; i < r->n_rows; i++) {
      const struct target_row *row = &r->rows[i];
      if (row->target != t) continue;
      if (isnan(row->badness)) {
        unjudged++;
        continue;
      }
      n++;
      pass += row->badness <= 1;
      below_floor += row->badness > 1 && row->below_floor;
      if (worst == NULL) worst = row;
    }
    if (n == 0 && unjudged == 0) {
      printf("  n/a   %s: no shape of this run\n", TARGET_NAMES[t]);
      continue;
    }
    if (n == 0) { /* every row it applies to lacks what it is judged by */
      for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].target == t) {
          printf("  n/j   %s: not judged in this run (%d rows), e.g. %s\n", TARGET_NAMES[t],
                 unjudged, r->rows[i].text);
          break;
        }
      not_judged++;
      continue;
    }
    const int ok = n > 0 && pass == n;
    met += ok;
    missed += !ok;
    printf("  %-5s %s: %d of %d rows pass", ok ? "PASS" : "FAIL", TARGET_NAMES[t], pass, n);
    if (unjudged)
      printf(" (%d not judged: a reference not measured, or the row outside the target)", unjudged);
    /* the kernel's floor: its bytes' bound (kernel_bound) */
    const char *floor_note = t == T_KERNEL ? " (beyond its bytes' bound)" : " (below the floor)";
    if (below_floor && t == T_KERNEL)
      printf(" (%d of the %d rows missed ask for more than their bytes allow: their pieces' "
             "32-byte sectors, moved at the d2d copy's rate, bound them under 80%%)",
             below_floor, n - pass);
    else if (below_floor)
      printf(" (%d of the %d rows missed ask for less than the floor: host concat's time / 2 "
             "below it)", below_floor, n - pass);
    if (worst != NULL) printf("; worst %s%s", worst->text, worst->below_floor ? floor_note : "");
    putchar('\n');
    int more = 0;
    for (int i = 0; i < r->n_rows && more < 3; i++) {
      const struct target_row *row = &r->rows[i];
      if (row->target != t || row == worst || !(row->badness > 1)) continue;
      printf("          also %s%s\n", row->text, row->below_floor ? floor_note : "");
      more++;
    }
  }
  for (int i = 0; i < r->n_info; i++) printf("  info  %s\n", r->info[i]);
  printf("targets: %d met, %d missed", met, missed);
  if (not_judged) printf(", %d not judged", not_judged);
  putchar('\n');
}

static void print_summary(struct report *r, int cpu) {
  printf("summary (geometric means over the shapes measured):\n");
  for (int src = 0; src < N_SOURCES; src++) {
    const struct summary *s = &r->summary[src];
    if (s->n == 0) continue;
    printf("  %-8s funnel/link %.2fx   funnel/max(link, floor) %.2fx   over host_concat %.2fx",
           SOURCE_NAMES[src], exp(s->log_vs_link / s->n), exp(s->log_vs_bound / s->n),
           exp(s->log_over_concat / s->n));
    if (s->n_naive)
      printf("   over naive %.2fx (%.2fx to %.2fx, %d shapes)", exp(s->log_over_naive / s->n_naive),
             s->worst_over_naive, s->best_over_naive, s->n_naive);
    if (s->n_scatter)
      printf("   over batched_scatter %.2fx (%d)", exp(s->log_over_scatter / s->n_scatter),
             s->n_scatter);
    printf("   (%d shapes)\n", s->n);
  }
  for (int src = 0; src < N_SOURCES; src++) {
    const struct summary *s = &r->summary[src];
    for (int c = 1; c < N_CODECS; c++) {
      const int n = s->n_codec[c];
      if (n == 0) continue;
      printf("  %-8s %-4s funnel/link of the uncompressed bytes %.2fx   over host_decompress_concat "
             "%.2fx   compression ratio %.2fx   (%d shapes)\n",
             SOURCE_NAMES[src], CODEC_NAMES[c], exp(s->log_codec_vs_link[c] / n),
             exp(s->log_over_decompress[c] / n), exp(s->log_ratio[c] / n), n);
    }
  }
  print_targets(r, cpu);
}

static void print_cpu_warning(void) {
  printf("*** backend cpu: no GPU is used. \"Device memory\" is host memory and streams are\n"
         "*** worker threads, so every copy is a memcpy: these are NOT GPU figures. On cpu the\n"
         "*** run checks the harness, the correctness and the call counts, not GPU speed.\n");
}

/* ------------------------------------------------- one process per source
 *
 * Each (workload, source) is measured in a child process that opens the
 * device, while the parent, which never touches it, generates the
 * workloads, prints and judges. A strategy that breaks the device context
 * (a sticky CUDA error is for the life of the process), or crashes, costs
 * the rest of its own group only: the parent reports what came back and
 * goes on. The child streams one record per result through a pipe. */

enum { MSG_BACKEND, MSG_VERIFIED, MSG_MEASURED, MSG_NO_PINNED, MSG_READY };

struct child_msg {
  int kind;
  int strategy;
  int ok;          /* MSG_VERIFIED: the result is right */
  int64_t out_bytes;
  char text[FUNNEL_ERROR_MESSAGE_SIZE + 128]; /* the backend's name, or why not verified */
  struct measurement m;
};

static void send_msg(int fd, const struct child_msg *msg) {
  const char *p = (const char *)msg;
  size_t left = sizeof(*msg);
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n <= 0) _exit(3);
    p += n;
    left -= (size_t)n;
  }
}

/* 1 for a whole message, 0 at the end of the stream. */
static int recv_msg(int fd, struct child_msg *msg) {
  char *p = (char *)msg;
  size_t got = 0;
  while (got < sizeof(*msg)) {
    const ssize_t n = read(fd, p + got, sizeof(*msg) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    got += (size_t)n;
  }
  return 1;
}

/* --concurrent: the reads behind the measured one, each by its own reader
 * (and so its own stream), until told to stop. */
struct behind {
  struct funnel_device *dev;
  const struct workload *w;
  int src;
  atomic_int *stop;
  pthread_t thread;
  atomic_int failed; /* a read failed, and the thread stopped */
};

static void *read_behind(void *arg) {
  struct behind *h = arg;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (funnel_reader_create(h->dev, NULL, 0, &rd, &err) != FUNNEL_OK) {
    atomic_store(&h->failed, 1);
    return NULL;
  }
  while (!atomic_load(h->stop)) {
    struct funnel_table *t = NULL;
    if (funnel_reader_read_async(rd, h->w->parts[h->src], (size_t)h->w->shape.parts, 0, &t,
                                 &err) != FUNNEL_OK ||
        funnel_table_wait(t, &err) != FUNNEL_OK) {
      funnel_table_free(t);
      atomic_store(&h->failed, 1);
      break;
    }
    funnel_table_free(t);
  }
  funnel_reader_free(rd);
  return NULL;
}

/* Every strategy of `opt` measured at once, their timed iterations taken
 * in turn (one of each, then the next of each): what slows the host or
 * the device for a while (another tenant, the clocks, a fresh process's
 * first second) then falls on every strategy alike, not on the one
 * measured at the time. Measured one after the other, the strategy
 * measured first after a workload was made came out up to 1.5x slower
 * than the same read measured after it, now and then (bench/RESULTS.md,
 * 2026-11-24). A strategy's warm-up still precedes its iterations. Sends
 * each measurement to the parent; true when one found the context dead. */
static bool measure_interleaved(struct bench *b, const struct workload *w, int src,
                                const struct options *opt, int64_t pieces, int fd) {
  struct child_msg msg[N_STRATEGIES];
  struct timing t[N_STRATEGIES];
  bool on[N_STRATEGIES] = {false};
  for (int s = 0; s < N_STRATEGIES; s++) {
    memset(&msg[s], 0, sizeof(msg[s]));
    msg[s].kind = MSG_MEASURED;
    msg[s].strategy = s;
    t[s] = (struct timing){0};
    if (opt->strategy_off[s]) continue;
    if (STRATEGIES[s].per_piece && pieces > opt->max_pieces) {
      msg[s].m.skipped = 1;
      snprintf(msg[s].m.skip_why, sizeof(msg[s].m.skip_why),
               "%lld column pieces, over --max-pieces %lld (one call each)", (long long)pieces,
               (long long)opt->max_pieces);
      continue;
    }
    if (s == S_BATCHED_SCATTER) continue; /* alone, after the others are sent (below) */
    on[s] = measure_begin(b, w, src, &opt->reps, &STRATEGIES[s], &msg[s].m, &t[s]);
    if (msg[s].m.status == FUNNEL_ERR_FATAL) break;
  }
  for (bool any = true; any;) {
    any = false;
    for (int s = 0; s < N_STRATEGIES; s++)
      if (on[s]) any |= on[s] = measure_rep(b, w, src, &t[s]);
  }
  bool fatal = false;
  for (int s = 0; s < N_STRATEGIES; s++) {
    measure_end(&t[s]);
    if (opt->strategy_off[s] || s == S_BATCHED_SCATTER) continue;
    send_msg(fd, &msg[s]);
    fatal |= msg[s].m.status == FUNNEL_ERR_FATAL;
  }
  /* batched_scatter can crash inside the driver (iter_batched_scatter):
   * measured last and on its own, so that a crash loses its row alone,
   * not every strategy's of the shape (the 1000x10x100 strings rows of the
   * H100's Spark grid, 2026-11-24) */
  const int s = S_BATCHED_SCATTER;
  if (!fatal && !opt->strategy_off[s] && !msg[s].m.skipped) {
    bool more = measure_begin(b, w, src, &opt->reps, &STRATEGIES[s], &msg[s].m, &t[s]);
    while (more) more = measure_rep(b, w, src, &t[s]);
    measure_end(&t[s]);
    send_msg(fd, &msg[s]);
    fatal = msg[s].m.status == FUNNEL_ERR_FATAL;
  } else if (!opt->strategy_off[s]) {
    send_msg(fd, &msg[s]);
  }
  return fatal;
}

/* Measures every strategy of `opt` on `backend`. go_fd >= 0 (--devices,
 * all devices at once): before each strategy, says MSG_READY and waits for
 * the parent's byte on go_fd, so that every device's process starts it
 * together. */
static void child_measure(int fd, const struct options *opt, const char *backend,
                          struct workload *w, int src, int go_fd) {
  struct bench b;
  struct funnel_error err;
  funnel__error_clear(&err);
  struct child_msg msg;
  memset(&msg, 0, sizeof(msg));
  if (bench_open(&b, backend, &err) != FUNNEL_OK) {
    msg.kind = MSG_VERIFIED;
    snprintf(msg.text, sizeof(msg.text), "cannot open backend '%s': %s: %s", backend,
             funnel_code_name(err.code), err.message);
    send_msg(fd, &msg);
    return;
  }
  if (opt->cold_bytes > 0) {
    b.cold = xmalloc((size_t)opt->cold_bytes);
    b.cold_bytes = opt->cold_bytes;
  }
  if (src == SRC_PINNED && !workload_pin(b.dev, w)) {
    msg.kind = MSG_NO_PINNED;
    send_msg(fd, &msg);
    bench_close(&b);
    return;
  }
  int st = ensure_buffers(&b, w, &err);
  msg.kind = MSG_VERIFIED;
  if (st != FUNNEL_OK) {
    snprintf(msg.text, sizeof(msg.text), "baseline buffers: %s: %s", funnel_code_name(st),
             err.message);
    send_msg(fd, &msg);
    return;
  }
  if (getenv("FUNNEL_BENCH_TRACE") != NULL) fprintf(stderr, "  verify\n");
  msg.ok = verify(&b, w, src, msg.text, sizeof(msg.text));
  msg.out_bytes = w->out_bytes;
  if (msg.ok && ensure_d2d(&b, w, &err) != FUNNEL_OK) {
    msg.ok = 0;
    snprintf(msg.text, sizeof(msg.text), "d2d buffers: %s: %s", funnel_code_name(err.code),
             err.message);
  }
  send_msg(fd, &msg);
  if (!msg.ok) return;
  /* A fresh process: its first reads pay for cold caches, page faults in
   * the pools and the processor's clock ramping up; on the H100 host the
   * strategy measured first came out ~30% slower on small shapes than the
   * same read measured later. Untimed reads until 100 ms or 200 reads. */
  const int64_t warm_until = now_ns() + 100 * 1000000LL;
  for (int i = 0; i < 200 && now_ns() < warm_until; i++) {
    struct sample smp;
    if (read_with(b.reader[R_AUTO], w, src, &smp, &err) != FUNNEL_OK) break;
  }
  int fatal = 0;
  atomic_int stop = 0;
  const int n_behind = opt->concurrent - 1;
  struct behind *behind = n_behind > 0 ? xcalloc((size_t)n_behind, sizeof(*behind)) : NULL;
  int started = 0;
  for (; started < n_behind; started++) {
    behind[started] = (struct behind){.dev = b.dev, .w = w, .src = src, .stop = &stop};
    if (pthread_create(&behind[started].thread, NULL, read_behind, &behind[started]) != 0) break;
  }
  const int64_t pieces = (int64_t)w->shape.parts * w->n_bufs;
  if (go_fd < 0 && n_behind == 0) {
    if (!measure_interleaved(&b, w, src, opt, pieces, fd)) bench_close(&b);
    return;
  }
  for (int s = 0; s < N_STRATEGIES && !fatal; s++) {
    if (opt->strategy_off[s]) continue;
    if (getenv("FUNNEL_BENCH_TRACE") != NULL) fprintf(stderr, "  %s\n", STRATEGIES[s].name);
    memset(&msg, 0, sizeof(msg));
    msg.kind = MSG_MEASURED;
    msg.strategy = s;
    if (STRATEGIES[s].per_piece && pieces > opt->max_pieces) {
      msg.m.skipped = 1;
      snprintf(msg.m.skip_why, sizeof(msg.m.skip_why),
               "%lld column pieces, over --max-pieces %lld (one call each)", (long long)pieces,
               (long long)opt->max_pieces);
    } else if (started < n_behind) {
      msg.m.status = FUNNEL_ERR_HOST_OUT_OF_MEMORY;
      snprintf(msg.m.error, sizeof(msg.m.error), "--concurrent: could not start thread %d",
               started + 1);
    } else {
      if (go_fd >= 0) {
        struct child_msg ready = {.kind = MSG_READY, .strategy = s};
        char go;
        send_msg(fd, &ready);
        if (read(go_fd, &go, 1) != 1) _exit(4); /* the parent is gone */
      }
      measure(&b, w, src, &opt->reps, &STRATEGIES[s], &msg.m);
      /* fewer reads at once than asked for: the figure is not one of them */
      for (int k = 0; k < n_behind && msg.m.status == FUNNEL_OK; k++)
        if (atomic_load(&behind[k].failed)) {
          msg.m.status = FUNNEL_ERR_DEVICE;
          snprintf(msg.m.error, sizeof(msg.m.error),
                   "--concurrent: a read behind this one failed, so fewer ran at once");
        }
    }
    send_msg(fd, &msg);
    fatal = msg.m.status == FUNNEL_ERR_FATAL;
  }
  atomic_store(&stop, 1);
  for (int k = 0; k < started; k++) pthread_join(behind[k].thread, NULL);
  free(behind);
  if (!fatal) bench_close(&b); /* a dead context is left to the process's exit */
}

/* Runs `fn` in a child with a pipe to it; returns the read end, or -1. */
static int spawn(pid_t *pid, void (*fn)(int fd, void *ctx), void *ctx) {
  int fds[2];
  if (pipe(fds) != 0) die("pipe: %s", strerror(errno));
  fflush(NULL);
  *pid = fork();
  if (*pid < 0) die("fork: %s", strerror(errno));
  if (*pid == 0) {
    close(fds[0]);
    fn(fds[1], ctx);
    close(fds[1]);
    fflush(NULL);
    _exit(0);
  }
  close(fds[1]);
  return fds[0];
}

/* How a child ended, for a message: "" when it exited 0. */
static void reap(pid_t pid, char *why, size_t size) {
  int status = 0;
  why[0] = '\0';
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFSIGNALED(status))
    snprintf(why, size, "the measuring process died of signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    snprintf(why, size, "the measuring process exited with status %d", WEXITSTATUS(status));
}

struct probe_ctx {
  const char *backend;
};

static void child_probe(int fd, void *ctx) {
  const struct probe_ctx *p = ctx;
  struct child_msg msg;
  memset(&msg, 0, sizeof(msg));
  msg.kind = MSG_BACKEND;
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (funnel_device_open(p->backend, &dev, &err) == FUNNEL_OK) {
    msg.ok = 1;
    snprintf(msg.text, sizeof(msg.text), "%s", funnel_device_backend(dev));
    funnel_device_close(dev);
  } else {
    snprintf(msg.text, sizeof(msg.text), "cannot open backend '%s': %s: %s", p->backend,
             funnel_code_name(err.code), err.message);
  }
  send_msg(fd, &msg);
}

struct measure_ctx {
  const struct options *opt;
  const char *backend;
  struct workload *w;
  int src;
  int go_fd, go_other; /* --devices together: the read end of the go pipe, and its write end */
};

static void child_measure_entry(int fd, void *ctx) {
  struct measure_ctx *c = ctx;
  if (c->go_other >= 0) close(c->go_other);
  child_measure(fd, c->opt, c->backend, c->w, c->src, c->go_fd);
}

/* ------------------------------------------------------------------ main */

static void print_reps(const struct rep_policy *p) {
  if (p->fixed > 0)
    printf("%d warm-up + %d timed iterations each (median reported)", WARMUP, p->fixed);
  else
    printf("%d warm-up iterations, then %d to %d timed ones within %.0f ms (%d when one takes "
           "over %.0f ms; median reported)", WARMUP, p->min_reps, p->max_reps, p->budget_ns / 1e6,
           p->slow_reps, p->slow_ns / 1e6);
}

static void print_skipped(const struct job_list *l, const struct options *o) {
  if (l->n_skipped == 0) return;
  printf("  skipped, estimated over --max-bytes %.0f MiB:", mib(o->max_bytes));
  for (int i = 0; i < l->n_skipped; i++) {
    char shape[64];
    shape_name(&l->skipped[i].shape, shape, sizeof(shape));
    char mix[32];
    mix_label(l->skipped[i].mix, l->skipped[i].codec, mix, sizeof(mix));
    printf("%s %s %s (~%.0f MiB)", i ? "," : "", shape, mix, mib(l->skipped[i].est_bytes));
  }
  printf("\n");
}

/* Measures one (workload, source) in a child process; prints its rows. */
static int run_group(struct report *rep, const struct options *opt, struct workload *w, int src,
                     struct group_result *g, int *failures, int *baseline_failures) {
  char shape[64], why[256], mix[32];
  shape_name(&w->shape, shape, sizeof(shape));
  mix_label(w->mix, w->codec, mix, sizeof(mix));
  memset(g, 0, sizeof(*g));
  struct measurement *m = g->m;
  int received[N_STRATEGIES] = {0};
  for (int s = 0; s < N_STRATEGIES; s++) m[s].skipped = 1; /* until it comes back */
  struct measure_ctx ctx = {opt, opt->backend, w, src, -1, -1};
  pid_t pid;
  const int fd = spawn(&pid, child_measure_entry, &ctx);
  int verified = -1, no_pinned = 0;
  struct child_msg msg;
  char verify_why[sizeof(msg.text)] = "";
  while (recv_msg(fd, &msg)) {
    if (msg.kind == MSG_NO_PINNED) {
      no_pinned = 1;
    } else if (msg.kind == MSG_VERIFIED) {
      verified = msg.ok;
      w->out_bytes = msg.out_bytes;
      snprintf(verify_why, sizeof(verify_why), "%s", msg.text);
    } else if (msg.kind == MSG_MEASURED && msg.strategy >= 0 && msg.strategy < N_STRATEGIES) {
      m[msg.strategy] = msg.m;
      received[msg.strategy] = 1;
    }
  }
  close(fd);
  reap(pid, why, sizeof(why));
  if (no_pinned) {
    printf("%-16s %-12s %-8s skipped: the pinned pool cannot hold %.3f MiB more (raise "
           "FUNNEL_PINNED_POOL_BYTES)\n\n", shape, mix, SOURCE_NAMES[src], mib(w->region_size));
    return 0;
  }
  if (verified != 1) {
    printf("%-16s %-12s %-8s VERIFY FAILED: %s\n", shape, mix, SOURCE_NAMES[src],
           verified < 0 ? why : verify_why);
    ++*failures;
    return 0;
  }
  /* what a dead child did not send back */
  for (int s = 0; s < N_STRATEGIES; s++) {
    if (opt->strategy_off[s] || !strategy_applies(&STRATEGIES[s], w, src) ||
        STRATEGIES[s].unavailable != NULL || received[s])
      continue;
    m[s].skipped = 0;
    m[s].status = FUNNEL_ERR_FATAL;
    snprintf(m[s].error, sizeof(m[s].error), "not measured: %s",
             why[0] ? why : "an earlier strategy left the device unusable");
  }
  for (int s = 0; s < N_STRATEGIES; s++) {
    if (m[s].skipped || m[s].status == FUNNEL_OK) continue;
    /* a baseline that fails is reported, not a failure of funnel's */
    if (s == S_LINK || s == S_FLOOR || s == S_NAIVE || s == S_HOST_CONCAT ||
        s == S_BATCHED_SCATTER || s == S_D2D || s == S_HOST_DECOMPRESS_CONCAT ||
        s == S_LINK_COMPRESSED)
      ++*baseline_failures;
    else
      ++*failures;
  }
  report_group(rep, w, src, "ok", m);
  g->measured = 1;
  return 1;
}

/* ------------------------------------------------------- several devices
 *
 * --devices: each device in a process of its own (as Spark runs an
 * executor a GPU), reading the same partitions: first alone, one device
 * after the other, then all at once. Together, every process starts each
 * strategy at the same moment (MSG_READY, then the parent's byte on its go
 * pipe), so their timed iterations overlap: on like GPUs they take about as
 * long. */

struct device_result {
  int verified; /* 1 right, 0 not, -1 no answer */
  char why[FUNNEL_ERROR_MESSAGE_SIZE + 128];
  int no_pinned;
  struct measurement m[N_STRATEGIES];
};

/* Measures `w` from `src` on every device of --devices: alone, one at a
 * time (together 0), or all at once (together 1). */
static void measure_devices(const struct options *opt, struct workload *w, int src, int together,
                            struct device_result *r) {
  const int n = opt->n_devices;
  char kinds[MAX_DEVICES][32];
  struct measure_ctx ctx[MAX_DEVICES];
  struct pollfd fds[MAX_DEVICES];
  pid_t pids[MAX_DEVICES];
  int go[MAX_DEVICES], ready[MAX_DEVICES], live = 0;
  for (int d = 0; d < n; d++) {
    memset(&r[d], 0, sizeof(r[d]));
    r[d].verified = -1;
    for (int s = 0; s < N_STRATEGIES; s++) r[d].m[s].skipped = 1; /* until it comes back */
    snprintf(kinds[d], sizeof(kinds[d]), "cuda:%d", opt->devices[d]);
    int pipe_go[2] = {-1, -1};
    if (together && pipe(pipe_go) != 0) die("pipe: %s", strerror(errno));
    ctx[d] = (struct measure_ctx){opt, kinds[d], w, src, pipe_go[0], pipe_go[1]};
    go[d] = pipe_go[1];
    ready[d] = 0;
    fds[d] = (struct pollfd){.fd = -1, .events = POLLIN};
    if (!together) continue; /* alone: started in the loop below, one at a time */
    fds[d].fd = spawn(&pids[d], child_measure_entry, &ctx[d]);
    close(pipe_go[0]);
    live++;
  }
  for (int next = 0; together ? live > 0 : next < n;) {
    if (!together) { /* the next device alone: its process runs to its end */
      fds[next].fd = spawn(&pids[next], child_measure_entry, &ctx[next]);
      live = 1;
    }
    while (live > 0) {
      if (poll(fds, (nfds_t)n, -1) < 0) {
        if (errno == EINTR) continue;
        die("poll: %s", strerror(errno));
      }
      for (int d = 0; d < n; d++) {
        if (fds[d].fd < 0 || !(fds[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        struct child_msg msg;
        if (!recv_msg(fds[d].fd, &msg)) { /* its process ended */
          close(fds[d].fd);
          fds[d].fd = -1;
          if (go[d] >= 0) close(go[d]);
          go[d] = -1;
          ready[d] = 0;
          live--;
          char why[256];
          reap(pids[d], why, sizeof(why));
          if (r[d].verified < 0) snprintf(r[d].why, sizeof(r[d].why), "%s", why);
          continue;
        }
        if (msg.kind == MSG_READY) ready[d] = 1;
        if (msg.kind == MSG_NO_PINNED) r[d].no_pinned = 1;
        if (msg.kind == MSG_VERIFIED) {
          r[d].verified = msg.ok;
          w->out_bytes = msg.out_bytes;
          snprintf(r[d].why, sizeof(r[d].why), "%s", msg.text);
        }
        if (msg.kind == MSG_MEASURED && msg.strategy >= 0 && msg.strategy < N_STRATEGIES)
          r[d].m[msg.strategy] = msg.m;
      }
      /* every process still running waits at the same strategy: go */
      int waiting = 0, all = 1;
      for (int d = 0; d < n; d++) {
        if (fds[d].fd < 0) continue;
        waiting += ready[d];
        all &= ready[d];
      }
      if (waiting > 0 && all)
        for (int d = 0; d < n; d++)
          if (ready[d]) {
            ready[d] = 0;
            if (write(go[d], "g", 1) != 1) die("write: %s", strerror(errno));
          }
    }
    next++;
  }
}

struct devices_report {
  FILE *csv, *json;
  int rows, met;          /* funnel together within 10% of alone: over rows, met */
  double worst;           /* the worst together / alone */
  char worst_row[160];
  int failures;
};

static double gb_per_s(int64_t bytes, const struct measurement *m) {
  return m->status == FUNNEL_OK && !m->skipped && m->ms_median > 0
             ? (double)bytes / (m->ms_median * 1e6)
             : 0;
}

static void write_device_row(struct devices_report *rep, const char *shape, const char *mix,
                             const char *source, int device, const char *strategy,
                             const char *mode, int64_t bytes, const struct measurement *m) {
  const int ok = m->status == FUNNEL_OK;
  if (rep->csv != NULL) {
    fprintf(rep->csv, "%s,%s,%s,cuda:%d,%s,%s,%lld,%.6f,%.6f,%d,%.3f,", shape, mix, source, device,
            strategy, mode, (long long)bytes, ok ? m->ms_median : 0, ok ? m->ms_min : 0, m->reps,
            gb_per_s(bytes, m));
    csv_string(rep->csv, ok ? "ok" : m->error);
    fputc('\n', rep->csv);
  }
  if (rep->json != NULL) {
    fprintf(rep->json,
            "{\"shape\":\"%s\",\"mix\":\"%s\",\"source\":\"%s\",\"device\":\"cuda:%d\","
            "\"strategy\":\"%s\",\"mode\":\"%s\",\"bytes\":%lld,\"ms_median\":%.6f,"
            "\"ms_min\":%.6f,\"reps\":%d,\"gb_per_s\":%.3f,\"status\":",
            shape, mix, source, device, strategy, mode, (long long)bytes, ok ? m->ms_median : 0,
            ok ? m->ms_min : 0, m->reps, gb_per_s(bytes, m));
    json_string(rep->json, ok ? "ok" : m->error);
    fputs("}\n", rep->json);
  }
}

/* Measures and prints one (workload, source) on every device. */
static void run_devices(struct devices_report *rep, const struct options *opt,
                        struct workload *w, int src) {
  char shape[64], mix[32];
  shape_name(&w->shape, shape, sizeof(shape));
  mix_label(w->mix, w->codec, mix, sizeof(mix));
  const char *source = SOURCE_NAMES[src];
  const int n = opt->n_devices;
  struct device_result alone[MAX_DEVICES], both[MAX_DEVICES];
  measure_devices(opt, w, src, 0, alone);
  measure_devices(opt, w, src, 1, both);
  for (int d = 0; d < n; d++) {
    struct device_result *x[2] = {&alone[d], &both[d]};
    for (int k = 0; k < 2; k++) {
      if (x[k]->no_pinned) {
        printf("%-16s %-8s %-8s cuda:%-3d skipped: the pinned pool cannot hold %.3f MiB more "
               "(raise FUNNEL_PINNED_POOL_BYTES)\n", shape, mix, source, opt->devices[d],
               mib(w->region_size));
        return;
      }
      if (x[k]->verified != 1) {
        printf("%-16s %-8s %-8s cuda:%-3d %s: VERIFY FAILED: %s\n", shape, mix, source,
               opt->devices[d], k ? "together" : "alone", x[k]->why);
        rep->failures++;
        return;
      }
    }
  }
  for (int s = 0; s < N_STRATEGIES; s++) {
    if (opt->strategy_off[s] || alone[0].m[s].skipped) continue;
    const int64_t bytes = STRATEGIES[s].device_time ? w->out_bytes : w->total_bytes;
    double sum_alone = 0, sum_both = 0;
    int all_ok = 1;
    for (int d = 0; d < n; d++) {
      const struct measurement *a = &alone[d].m[s], *t = &both[d].m[s];
      const int ok = a->status == FUNNEL_OK && t->status == FUNNEL_OK && !t->skipped;
      write_device_row(rep, shape, mix, source, opt->devices[d], STRATEGIES[s].name, "alone",
                       bytes, a);
      write_device_row(rep, shape, mix, source, opt->devices[d], STRATEGIES[s].name, "together",
                       bytes, t);
      if (!ok) {
        printf("%-16s %-8s %-8s %-12s cuda:%-3d FAILED %s\n", shape, mix, source,
               STRATEGIES[s].name, opt->devices[d],
               a->status != FUNNEL_OK ? a->error : t->skipped ? "not measured" : t->error);
        if (s == S_FUNNEL) rep->failures++;
        all_ok = 0;
        continue;
      }
      const double ratio = t->ms_median / a->ms_median;
      sum_alone += gb_per_s(bytes, a);
      sum_both += gb_per_s(bytes, t);
      printf("%-16s %-8s %-8s %-12s cuda:%-3d %10.4f %11.4f %8.2fx %9.2f %9.2f\n", shape, mix,
             source, STRATEGIES[s].name, opt->devices[d], a->ms_median, t->ms_median, ratio,
             gb_per_s(bytes, a), gb_per_s(bytes, t));
      if (s != S_FUNNEL) continue;
      rep->rows++;
      rep->met += ratio <= 1.10;
      if (ratio > rep->worst) {
        rep->worst = ratio;
        snprintf(rep->worst_row, sizeof(rep->worst_row),
                 "%s %s %s on cuda:%d: %.4f ms together, %.4f alone (%.2fx)", shape, mix, source,
                 opt->devices[d], t->ms_median, a->ms_median, ratio);
      }
    }
    if (all_ok)
      printf("%-16s %-8s %-8s %-12s all %-4d together %.2f GB/s: %.2fx one device alone "
             "(%.2f GB/s, the devices' mean)\n",
             shape, mix, source, STRATEGIES[s].name, n, sum_both, sum_both / (sum_alone / n),
             sum_alone / n);
  }
  printf("\n");
}

/* --devices: the whole run. Returns the exit status. */
static int main_devices(const struct options *opt, const struct job_list *jobs, int pool_set) {
  struct devices_report rep;
  memset(&rep, 0, sizeof(rep));
  rep.csv = fopen(opt->csv_path, "w");
  if (rep.csv == NULL) die("cannot write %s", opt->csv_path);
  fputs("shape,mix,source,device,strategy,mode,bytes,ms_median,ms_min,reps,gb_per_s,status\n",
        rep.csv);
  if (opt->json_path != NULL && (rep.json = fopen(opt->json_path, "w")) == NULL)
    die("cannot write %s", opt->json_path);
  printf("funnel_bench: %d devices (", opt->n_devices);
  for (int d = 0; d < opt->n_devices; d++) printf("%scuda:%d", d ? ", " : "", opt->devices[d]);
  printf("), each in a process of its own, preset %s, %d shape x mix runs x %d sources, ",
         preset_name(opt->preset), jobs->n, N_SOURCES);
  print_reps(&opt->reps);
  printf("\n  alone: one device's process at a time; together: every device's at once, each\n"
         "  strategy started together; ratio = together / alone; GB/s of the partitions' bytes;\n"
         "  \"all\": the devices' GB/s together summed, against one device alone\n\n");
  printf("%-16s %-8s %-8s %-12s %-8s %10s %11s %9s %9s %9s\n", "shape", "mix", "source",
         "strategy", "device", "alone ms", "together ms", "ratio", "GB/s alone", "together");
  const int64_t t_start = now_ns();
  for (int j = 0; j < jobs->n; j++) {
    struct workload w;
    workload_build(&jobs->jobs[j], &w);
    if (!pool_set) size_pinned_pool(&w);
    for (int src = 0; src < N_SOURCES; src++) run_devices(&rep, opt, &w, src);
    workload_free(&w);
  }
  printf("targets, judged from this run:\n  [%s] several devices: each device's funnel read at most "
         "10%% slower together than alone: %d of %d%s%s\n",
         rep.rows > 0 && rep.met == rep.rows ? "MET" : "MISSED", rep.met, rep.rows,
         rep.rows > 0 ? "; worst: " : "", rep.rows > 0 ? rep.worst_row : "");
  printf("results: %s%s%s%s  (%.0f s)\n", opt->csv_path, opt->json_path ? ", " : "",
         opt->json_path ? opt->json_path : "", rep.failures ? "" : "  (every result verified)",
         (now_ns() - t_start) / 1e9);
  if (rep.failures) printf("%d FAILURES of funnel (see above)\n", rep.failures);
  fclose(rep.csv);
  if (rep.json != NULL) fclose(rep.json);
  return rep.failures ? 1 : 0;
}

int main(int argc, char **argv) {
  struct options opt;
  parse_options(argc, argv, &opt);
  struct job_list jobs = make_jobs(&opt);
  if (opt.list_only) {
    printf("funnel_bench: preset %s, %d shape x mix runs x %d sources\n", preset_name(opt.preset),
           jobs.n, N_SOURCES);
    for (int j = 0; j < jobs.n; j++) {
      char shape[64];
      shape_name(&jobs.jobs[j].shape, shape, sizeof(shape));
      char mix[32];
      mix_label(jobs.jobs[j].mix, jobs.jobs[j].codec, mix, sizeof(mix));
      printf("  %-16s %-12s ~%9.1f MiB%s%s\n", shape, mix, mib(jobs.jobs[j].est_bytes),
             jobs.jobs[j].codec ? " uncompressed" : "",
             spark_regime(&jobs.jobs[j].shape) ? "  spark regime" : "");
    }
    print_skipped(&jobs, &opt);
    return 0;
  }
  if (jobs.n == 0) die("nothing to run: every shape is over --max-bytes %lld", (long long)opt.max_bytes);
  const char *user_pool = getenv("FUNNEL_PINNED_POOL_BYTES");
  const int pool_set = user_pool != NULL && *user_pool;
  if (opt.n_devices > 0) {
    const int status = main_devices(&opt, &jobs, pool_set);
    free(jobs.jobs);
    free(jobs.skipped);
    return status;
  }

  /* which backend "auto" gives, asked in a child: the parent never opens it */
  struct probe_ctx probe = {opt.backend};
  pid_t pid;
  int fd = spawn(&pid, child_probe, &probe);
  struct child_msg msg;
  const int got = recv_msg(fd, &msg);
  close(fd);
  char why[256];
  reap(pid, why, sizeof(why));
  if (!got || !msg.ok) die("%s", got ? msg.text : why);
  char backend[32];
  snprintf(backend, sizeof(backend), "%.31s", msg.text);
  const int cpu = strcmp(backend, "cpu") == 0;

  struct report rep = {.backend = backend};
  rep.csv = fopen(opt.csv_path, "w");
  if (rep.csv == NULL) die("cannot write %s", opt.csv_path);
  fputs(CSV_HEADER, rep.csv);
  if (opt.json_path != NULL && (rep.json = fopen(opt.json_path, "w")) == NULL)
    die("cannot write %s", opt.json_path);

  printf("funnel_bench: backend %s, preset %s, %d shape x mix runs x %d sources, ", backend,
         preset_name(opt.preset), jobs.n, N_SOURCES);
  print_reps(&opt.reps);
  printf("\n  max bytes per shape %.0f MiB (%d shape x mix skipped over it), pinned pool %s\n",
         mib(opt.max_bytes), jobs.n_skipped, pool_set ? user_pool : "3x each shape's bytes + 64 MiB");
  print_skipped(&jobs, &opt);
  for (int k = 0; k < 2; k++) { /* as device.c reads them: host or device, else AUTO */
    const char *var = k == 0 ? "FUNNEL_PARSE" : "FUNNEL_DECODE", *v = getenv(var);
    if (v != NULL && (strcmp(v, "host") == 0 || strcmp(v, "device") == 0))
      printf("  %s=%s in the environment: funnel and the strategies that do not force their own\n"
             "  way %s as it says (the readers' default; funnel.h), and the targets judge that\n",
             var, v, k == 0 ? "parse" : "decode");
  }
  if (opt.cold_bytes > 0)
    printf("  host caches cold: %.0f MiB of another buffer written before every iteration "
           "(--cold)\n", mib(opt.cold_bytes));
  if (opt.concurrent > 1)
    printf("  %d reads at once: %d threads read each shape's partitions again and again, a\n"
           "  reader each, while every strategy is measured (--concurrent)\n",
           opt.concurrent, opt.concurrent - 1);
  printf("  MiB and GB/s are of the partitions' bytes; vs link = ms / link ms of the same source;\n"
         "  funnel x = the strategy's ms / funnel's ms; calls, h2d, syncs, launch per iteration;\n"
         "  floor = device allocation + one copy from pinned memory + empty kernel + event wait;\n"
         "  kernel and d2d: device time, GB/s of the result's bytes, ratio to the d2d copy;\n"
         "  naive and batched_scatter only up to --max-pieces %lld column pieces;\n"
         "  compressed rows (mix/codec): MiB and GB/s of the partitions written plain (the\n"
         "  uncompressed bytes every strategy delivers), link = one copy of those bytes,\n"
         "  link_compressed = one copy of the compressed ones, the limit of decoding on the GPU\n",
         (long long)opt.max_pieces);
  if (cpu) print_cpu_warning();
  printf("\n");
  print_table_header();

  int failures = 0, baseline_failures = 0, step = 0;
  const int steps = jobs.n * N_SOURCES;
  const int64_t t_start = now_ns();
  for (int j = 0; j < jobs.n; j++) {
    const struct job *job = &jobs.jobs[j];
    char shape[64], mix[32];
    shape_name(&job->shape, shape, sizeof(shape));
    mix_label(job->mix, job->codec, mix, sizeof(mix));
    if (job->est_bytes > (64 << 20))
      fprintf(stderr, "       generating %s %s (~%.0f MiB)\n", shape, mix, mib(job->est_bytes));
    struct workload w;
    workload_build(job, &w);
    if (opt.dump_dir != NULL) dump_workload(opt.dump_dir, &w);
    if (!pool_set) size_pinned_pool(&w);
    struct group_result g[N_SOURCES];
    for (int src = 0; src < N_SOURCES; src++) {
      step++;
      fprintf(stderr, "[%d/%d] %s %s %s (%.1f MiB, %.0f s so far) ...\n", step, steps, shape, mix,
              SOURCE_NAMES[src], mib(w.raw_bytes), (now_ns() - t_start) / 1e9);
      run_group(&rep, &opt, &w, src, &g[src], &failures, &baseline_failures);
    }
    judge_workload(&rep, &w, g);
    workload_free(&w);
  }

  print_summary(&rep, cpu);
  if (cpu) print_cpu_warning();
  printf("results: %s%s%s%s  (%.0f s)\n", opt.csv_path, opt.json_path ? ", " : "",
         opt.json_path ? opt.json_path : "", failures ? "" : "  (every result verified)",
         (now_ns() - t_start) / 1e9);
  if (baseline_failures)
    printf("%d baseline measurements failed (see above); funnel's are not affected\n",
           baseline_failures);
  if (failures) printf("%d FAILURES of funnel (see above)\n", failures);
  fclose(rep.csv);
  if (rep.json != NULL) fclose(rep.json);
  free(jobs.jobs);
  free(jobs.skipped);
  free(rep.rows);
  return failures ? 1 : 0;
}
