/* gen_corpus.c: writes the seed corpus of fuzz_parse_plan (tests/fuzz/corpus),
 * valid inputs in its frame (see fuzz_parse_plan.c): every type, nulls,
 * strings with offsets not starting at 0, several batches and partitions,
 * legacy framing, the IPC file format, bare batches with a reader schema,
 * two streams in one partition, empty partitions, 0-row batches, small
 * segment chunks, non-ASCII names and custom_metadata, nested columns, and
 * partitions written by pyarrow and Arrow JS.
 *
 *   cmake --build target/native-fuzz --target fuzz_gen_corpus   (configured by mvn verify)
 *   target/native-fuzz/fuzz_gen_corpus tests/fuzz/corpus tests/data
 *
 * Deterministic (fixed seeds); the output is committed. Check that every
 * seed is accepted after regenerating:
 *
 *   FUNNEL_FUZZ_EXPECT_VALID=1 target/native-fuzz/fuzz_parse_plan -runs=0 tests/fuzz/corpus */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_writer.h"

/* the frame's control byte */
#define READER_SCHEMA 4
#define KNOWN 8
#define CHUNK(k) ((k) << 4) /* index into fuzz_parse_plan.c's chunk_sizes: 1 is "1", 4 "7", 10 "64" */

static const char *out_dir;

static void die(const char *what, const char *name) {
  fprintf(stderr, "gen_corpus: %s %s\n", what, name);
  exit(1);
}

/* Writes the seed `name`: the control byte, then the chunks (the reader
 * schema when there is one, then the partitions), each but the last behind
 * its uint16 length. */
static void write_seed(const char *name, int control, const struct iw_buf *chunks, int n) {
  const int parts = n - ((control & READER_SCHEMA) ? 1 : 0);
  if (parts < 1 || parts > 3) die("bad partition count for", name);
  control |= parts - 1;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", out_dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL) die("cannot write", path);
  fputc(control, f);
  for (int i = 0; i < n; i++) {
    if (i < n - 1) {
      if (chunks[i].len > 0xFFFF) die("chunk too long in", name);
      fputc((int)(chunks[i].len & 0xFF), f);
      fputc((int)(chunks[i].len >> 8), f);
    }
    if (chunks[i].len > 0) fwrite(chunks[i].data, 1, chunks[i].len, f);
  }
  if (fclose(f) != 0) die("cannot write", path);
}

static void free_chunks(struct iw_buf *chunks, int n) {
  for (int i = 0; i < n; i++) iw_buf_free(&chunks[i]);
}

/* ---------------------------------------------------------------- tables */

static const struct iw_field all_fields[] = {
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
    {.type = FUNNEL_TYPE_DATE32, .name = "d32", .nullable = 1},
    {.type = FUNNEL_TYPE_DATE64, .name = "d64", .nullable = 1},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_s", .nullable = 1, .time_unit = FUNNEL_TIME_SECOND},
    {.type = FUNNEL_TYPE_TIMESTAMP, .name = "ts_ns", .nullable = 1, .time_unit = FUNNEL_TIME_NANOSECOND,
     .timezone = "Europe/Paris"},
    {.type = FUNNEL_TYPE_DECIMAL128, .name = "dec", .nullable = 1, .precision = 20, .scale = 3},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BINARY, .name = "bin", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_UTF8, .name = "ls", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lbin", .nullable = 1},
    {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "fsb", .nullable = 1, .byte_width = 5},
};
static const struct iw_schema all_types = {(int)(sizeof(all_fields) / sizeof(all_fields[0])), all_fields, 0};

static const struct iw_field string_fields[] = {
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
    {.type = FUNNEL_TYPE_BINARY, .name = "bin", .nullable = 0},
    {.type = FUNNEL_TYPE_LARGE_UTF8, .name = "ls", .nullable = 1},
    {.type = FUNNEL_TYPE_LARGE_BINARY, .name = "lbin", .nullable = 1},
};
static const struct iw_schema strings = {4, string_fields, 0};

static const struct iw_field small_fields[] = {
    {.type = FUNNEL_TYPE_BOOL, .name = "b", .nullable = 1},
    {.type = FUNNEL_TYPE_INT64, .name = "x", .nullable = 1},
    {.type = FUNNEL_TYPE_UTF8, .name = "s", .nullable = 1},
};
static const struct iw_schema small = {3, small_fields, 0};

/* `rows` random rows of every column of `schema`: what the seeds encode,
 * in slices. */
struct table {
  const struct iw_schema *schema;
  struct iw_col cols[32];
};

static void table_make(struct table *t, const struct iw_schema *s, int64_t rows, int null_permille,
                       uint64_t seed) {
  uint64_t rng = seed;
  t->schema = s;
  for (int i = 0; i < s->n_fields; i++) iw_col_random(&t->cols[i], &s->fields[i], rows, null_permille, &rng);
}

static void table_free(struct table *t) {
  for (int i = 0; i < t->schema->n_fields; i++) iw_col_free(&t->cols[i]);
}

/* Appends a stream of rows [r0, r1) in `n_batches` equal batches (0-row
 * ones when r0 == r1): Schema (unless bare), batches, EOS (unless `eos` is
 * 0). */
static void stream(struct iw_buf *out, const struct table *t, int64_t r0, int64_t r1, int n_batches,
                   const struct iw_options *o, const struct iw_encode *e, int bare, int eos) {
  if (!bare) iw_schema_message(out, t->schema, o, NULL);
  for (int k = 0; k < n_batches; k++) {
    const int64_t a = r0 + (r1 - r0) * k / n_batches, b = r0 + (r1 - r0) * (k + 1) / n_batches;
    iw_batch_from_cols(out, t->schema, t->cols, a, b, e, o);
  }
  if (eos) iw_eos(out, o);
}

/* ------------------------------------------------------------------ seeds */

static void seeds_generated(void) {
  uint64_t rng = 99;
  const struct iw_encode plain = {0};
  const struct iw_encode varied = {.rng = &rng, .vary = 1, .junk_padding = 1};
  const struct iw_encode based = {.rng = &rng, .offset_base = 5, .junk_padding = 1};
  const struct iw_options legacy = {.legacy = 1};
  struct iw_buf c[4];
  struct table t;

  /* every type, nulls, three batches */
  table_make(&t, &all_types, 30, 200, 1);
  memset(c, 0, sizeof(c));
  stream(&c[0], &t, 0, 30, 3, NULL, &varied, 0, 1);
  write_seed("all_types", 0, c, 1);
  free_chunks(c, 1);
  /* the same over two partitions, parsed with the known schema */
  stream(&c[0], &t, 0, 11, 1, NULL, &plain, 0, 1);
  stream(&c[1], &t, 11, 30, 2, NULL, &varied, 0, 1);
  write_seed("all_types_known_2parts", KNOWN, c, 2);
  free_chunks(c, 2);
  /* legacy framing, no end-of-stream marker */
  stream(&c[0], &t, 0, 30, 2, &legacy, &plain, 0, 0);
  write_seed("all_types_legacy", 0, c, 1);
  free_chunks(c, 1);
  /* the IPC file format */
  {
    struct iw_layout l[2];
    struct iw_encode e = plain;
    iw_file_begin(&c[0]);
    iw_schema_message(&c[0], t.schema, NULL, NULL);
    for (int k = 0; k < 2; k++) {
      e.layout = &l[k];
      iw_batch_from_cols(&c[0], t.schema, t.cols, k * 15, (k + 1) * 15, &e, NULL);
    }
    iw_eos(&c[0], NULL);
    iw_file_end(&c[0], t.schema, l, 2);
    write_seed("all_types_file", 0, c, 1);
    free_chunks(c, 1);
  }
  /* bare batches read with the reader's schema */
  iw_schema_message(&c[0], t.schema, NULL, NULL);
  stream(&c[1], &t, 0, 13, 1, NULL, &plain, 1, 0);
  stream(&c[2], &t, 13, 30, 2, NULL, &varied, 1, 0);
  write_seed("all_types_bare_reader_schema", READER_SCHEMA | KNOWN, c, 3);
  free_chunks(c, 3);
  table_free(&t);

  /* strings: offsets from 5, junk before and after, small chunks */
  table_make(&t, &strings, 40, 150, 2);
  stream(&c[0], &t, 0, 17, 2, NULL, &based, 0, 1);
  stream(&c[1], &t, 17, 40, 3, NULL, &varied, 0, 1);
  write_seed("strings_2parts", 0, c, 2);
  write_seed("strings_chunk7", CHUNK(4), c, 2);
  write_seed("strings_chunk1_known", CHUNK(1) | KNOWN, c, 2);
  free_chunks(c, 2);
  /* two streams in one partition, then an empty partition */
  stream(&c[0], &t, 0, 9, 1, NULL, &plain, 0, 1);
  stream(&c[0], &t, 9, 40, 2, NULL, &varied, 0, 1);
  write_seed("strings_two_streams_then_empty", 0, c, 2);
  free_chunks(c, 2);
  table_free(&t);

  /* bools and nulls cut at unaligned rows over three partitions */
  table_make(&t, &small, 23, 300, 3);
  stream(&c[0], &t, 0, 3, 1, NULL, &varied, 0, 1);
  stream(&c[1], &t, 3, 16, 2, NULL, &varied, 0, 1);
  stream(&c[2], &t, 16, 23, 1, &legacy, &varied, 0, 1);
  write_seed("small_3parts_unaligned", KNOWN, c, 3);
  write_seed("small_3parts_chunk64", CHUNK(10), c, 3);
  free_chunks(c, 3);
  /* an empty partition, a stream, a schema-only partition */
  stream(&c[1], &t, 0, 23, 4, NULL, &varied, 0, 1);
  stream(&c[2], &t, 0, 0, 0, NULL, &plain, 0, 1);
  write_seed("small_empty_stream_schema_only", 0, c, 3);
  free_chunks(c, 3);
  /* 0-row batches (some with empty offsets buffers) */
  stream(&c[0], &t, 0, 0, 3, NULL, &varied, 0, 1);
  stream(&c[1], &t, 0, 5, 1, NULL, &plain, 0, 1);
  write_seed("small_zero_row_batches", 0, c, 2);
  free_chunks(c, 2);
  /* many small batches */
  stream(&c[0], &t, 0, 23, 23, NULL, &varied, 0, 1);
  write_seed("small_23_batches", 0, c, 1);
  free_chunks(c, 1);
  table_free(&t);

  /* pieces longer than a chunk of bits at chunk sizes 1, 2 and 3 (9, 17
   * and 25 bits), and more batches than the plan's first room for offset
   * checks */
  table_make(&t, &small, 100, 300, 4);
  stream(&c[0], &t, 0, 60, 1, NULL, &varied, 0, 1);
  stream(&c[1], &t, 60, 100, 2, NULL, &varied, 0, 1);
  write_seed("small_long_pieces_chunk1", CHUNK(1), c, 2);
  write_seed("small_long_pieces_chunk2", CHUNK(2) | KNOWN, c, 2);
  write_seed("small_long_pieces_chunk3", CHUNK(3), c, 2);
  free_chunks(c, 2);
  stream(&c[0], &t, 0, 70, 70, NULL, &plain, 0, 1);
  write_seed("small_70_batches", 0, c, 1);
  free_chunks(c, 1);
  table_free(&t);

  /* the reader's schema and the partitions' own */
  table_make(&t, &small, 23, 300, 3);
  iw_schema_message(&c[0], t.schema, NULL, NULL);
  stream(&c[1], &t, 0, 10, 1, NULL, &plain, 0, 1);
  stream(&c[2], &t, 10, 23, 1, NULL, &plain, 1, 0);
  write_seed("small_reader_schema_stream_and_bare", READER_SCHEMA, c, 3);
  free_chunks(c, 3);
  table_free(&t);

  /* the narrowest fixed_size_binary (0 is refused: Arrow Java cannot hold
   * it) */
  {
    static const struct iw_field f[] = {
        {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "z", .nullable = 1, .byte_width = 1},
        {.type = FUNNEL_TYPE_FIXED_SIZE_BINARY, .name = "w", .nullable = 1, .byte_width = 3}};
    static const struct iw_schema zs = {2, f, 0};
    table_make(&t, &zs, 12, 250, 5);
    stream(&c[0], &t, 0, 12, 2, NULL, &varied, 0, 1);
    write_seed("fixed_size_binary_1", 0, c, 1);
    free_chunks(c, 1);
    table_free(&t);
  }

  /* the strings of a schema Arrow Java reads, a byte from being refused:
   * names and a timezone of 2-, 3- and 4-byte UTF-8, custom_metadata on
   * the schema and a field, decimal128 precisions 1 and 38 */
  {
    static const struct iw_kv field_md[] = {{"origin", "sp\xc3\xa4rk"}, {"", ""}};
    static const struct iw_kv schema_md[] = {{"writer", "\xe4\xb8\xad"}};
    static const struct iw_field f[] = {
        {.type = FUNNEL_TYPE_INT32, .name = "caf\xc3\xa9", .nullable = 1, .n_metadata = 2,
         .metadata = field_md},
        {.type = FUNNEL_TYPE_TIMESTAMP, .name = "\xe6\x97\xb6", .nullable = 1,
         .time_unit = FUNNEL_TIME_MILLISECOND, .timezone = "Europe/Z\xc3\xbcrich"},
        {.type = FUNNEL_TYPE_DECIMAL128, .name = "\xf0\x9f\x98\x80", .nullable = 1, .precision = 1},
        {.type = FUNNEL_TYPE_DECIMAL128, .name = "d38", .nullable = 0, .precision = 38, .scale = 38}};
    static const struct iw_schema us = {4, f, 0};
    const struct iw_options md = {.n_metadata = 1, .metadata = schema_md};
    table_make(&t, &us, 9, 300, 6);
    stream(&c[0], &t, 0, 9, 2, &md, &varied, 0, 1);
    write_seed("utf8_names_and_metadata", 0, c, 1);
    free_chunks(c, 1);
    table_free(&t);
  }

  /* no columns at all */
  {
    static const struct iw_schema none = {0, NULL, 0};
    struct table e = {.schema = &none};
    stream(&c[0], &e, 0, 10, 2, NULL, &plain, 0, 1);
    write_seed("no_columns", 0, c, 1);
    free_chunks(c, 1);
  }
}

/* Nested columns: list, struct, map, fixed_size_list and a list of lists,
 * offsets that do not start at 0, nulls at several levels, in two
 * partitions (the second with a 0-row batch after its rows). */
static void seeds_nested(void) {
  static const struct iw_field l_item[] = {{.type = FUNNEL_TYPE_INT64, .name = "item", .nullable = 1}};
  static const struct iw_field s_kids[] = {{.type = FUNNEL_TYPE_INT32, .name = "a", .nullable = 1},
                                           {.type = FUNNEL_TYPE_UTF8, .name = "b", .nullable = 1}};
  static const struct iw_field kv[] = {{.type = FUNNEL_TYPE_UTF8, .name = "key", .nullable = 0},
                                       {.type = FUNNEL_TYPE_INT64, .name = "value", .nullable = 1}};
  static const struct iw_field entries[] = {
      {.type = FUNNEL_TYPE_STRUCT, .name = "entries", .n_children = 2, .children = kv}};
  static const struct iw_field f_item[] = {{.type = FUNNEL_TYPE_INT16, .name = "item", .nullable = 1}};
  static const struct iw_field inner[] = {{.type = FUNNEL_TYPE_UTF8, .name = "item", .nullable = 1}};
  static const struct iw_field ll_item[] = {
      {.type = FUNNEL_TYPE_LIST, .name = "item", .nullable = 1, .n_children = 1, .children = inner}};
  static const struct iw_field fields[] = {
      {.type = FUNNEL_TYPE_LIST, .name = "l", .nullable = 1, .n_children = 1, .children = l_item},
      {.type = FUNNEL_TYPE_STRUCT, .name = "s", .nullable = 1, .n_children = 2, .children = s_kids},
      {.type = FUNNEL_TYPE_MAP, .name = "m", .nullable = 1, .n_children = 1, .children = entries},
      {.type = FUNNEL_TYPE_FIXED_SIZE_LIST, .name = "f", .nullable = 1, .n_children = 1,
       .children = f_item, .list_size = 2},
      {.type = FUNNEL_TYPE_LIST, .name = "ll", .nullable = 1, .n_children = 1, .children = ll_item},
  };
  static const struct iw_schema schema = {5, fields, 0};
  static const int32_t l_off[] = {1, 3, 3, 4}, b_off[] = {0, 1, 1, 3}, m_off[] = {0, 2, 2, 3},
                       k_off[] = {0, 1, 2, 3}, ll_off[] = {0, 1, 3, 3}, lli_off[] = {2, 3, 3, 5},
                       s_off[] = {0, 1, 2, 3, 4, 5, 6};
  static const int64_t l_vals[] = {9, 1, 2, 3, 9}, m_vals[] = {10, 20, 30};
  static const int32_t a_vals[] = {7, 8, 9};
  static const int16_t f_vals[] = {1, 2, 3, 4, 5, 6};
  static const uint8_t five = 0x5, one_null = 0x1d, row1_null = 0x5;
  const struct iw_column cols[14] = {
      {.length = 3, .offsets = l_off, .offsets_length = 16},
      {.length = 5, .null_count = 1, .validity = &one_null, .validity_length = 1, .data = l_vals,
       .data_length = 40},
      {.length = 3, .null_count = 1, .validity = &five, .validity_length = 1},
      {.length = 3, .data = a_vals, .data_length = 12},
      {.length = 3, .offsets = b_off, .offsets_length = 16, .data = "xyz", .data_length = 3},
      {.length = 3, .offsets = m_off, .offsets_length = 16},
      {.length = 3},
      {.length = 3, .offsets = k_off, .offsets_length = 16, .data = "abc", .data_length = 3},
      {.length = 3, .null_count = 1, .validity = &row1_null, .validity_length = 1, .data = m_vals,
       .data_length = 24},
      {.length = 3},
      {.length = 6, .data = f_vals, .data_length = 12},
      {.length = 3, .offsets = ll_off, .offsets_length = 16},
      {.length = 3, .offsets = lli_off, .offsets_length = 16},
      {.length = 6, .offsets = s_off, .offsets_length = 28, .data = "uvwxyz", .data_length = 6},
  };
  struct iw_buf c[2] = {{0}, {0}};
  for (int p = 0; p < 2; p++) {
    iw_schema_message(&c[p], &schema, NULL, NULL);
    iw_batch_message(&c[p], &schema, 3, cols, NULL, NULL);
    if (p == 1) {
      const struct iw_column none[14] = {{0}};
      iw_batch_message(&c[p], &schema, 0, none, NULL, NULL);
    }
    iw_eos(&c[p], NULL);
  }
  write_seed("nested_2parts", 0, c, 2);
  write_seed("nested_known_2parts_chunk7", KNOWN | CHUNK(4), c, 2);
  free_chunks(c, 2);
  /* the same, the bodies compressed (ZSTD, then LZ4 as Arrow Java writes it) */
  const struct iw_options z = {.compression = 2, .empty_prefix = 1};
  const struct iw_options l4 = {.compression = 1, .raw_fallback = 1, .empty_prefix = 1};
  for (int p = 0; p < 2; p++) {
    const struct iw_options *o = p == 0 ? &z : &l4;
    iw_schema_message(&c[p], &schema, o, NULL);
    iw_batch_message(&c[p], &schema, 3, cols, o, NULL);
    iw_eos(&c[p], o);
  }
  write_seed("nested_compressed_2parts", KNOWN, c, 2);
  free_chunks(c, 2);
  /* both LZ4, a batch each: the device path unpacks and decodes them */
  for (int p = 0; p < 2; p++) {
    iw_schema_message(&c[p], &schema, &l4, NULL);
    iw_batch_message(&c[p], &schema, 3, cols, &l4, NULL);
    iw_eos(&c[p], &l4);
  }
  write_seed("nested_lz4_2parts", KNOWN, c, 2);
  free_chunks(c, 2);
}

/* Compressed bodies as each writer makes them: Arrow Java's LZ4 frames
 * (independent blocks, a checksum, raw buffers where compression does not
 * pay, 0-prefixed empty buffers), Arrow C++'s (linked blocks), ZSTD; and
 * a compressed partition after an uncompressed one. */
static void seeds_compressed(void) {
  static const struct iw_options o[] = {
      {.compression = 1, .lz4_style = IW_LZ4_JAVA, .raw_fallback = 1, .empty_prefix = 1},
      {.compression = 1, .lz4_style = IW_LZ4_CPP},
      {.compression = 2, .raw_fallback = 1, .empty_prefix = 1},
  };
  static const char *const names[] = {"compressed_lz4_java", "compressed_lz4_cpp",
                                      "compressed_zstd"};
  struct iw_buf c[2];
  struct table t;
  table_make(&t, &all_types, 24, 200, 7);
  for (int k = 0; k < 3; k++) {
    memset(c, 0, sizeof(c));
    stream(&c[0], &t, 0, 24, 2, &o[k], NULL, 0, 1);
    write_seed(names[k], 0, c, 1);
    free_chunks(c, 1);
  }
  memset(c, 0, sizeof(c));
  stream(&c[0], &t, 0, 10, 1, NULL, NULL, 0, 1);
  stream(&c[1], &t, 10, 24, 1, &o[0], NULL, 0, 1);
  write_seed("compressed_after_plain_known", KNOWN, c, 2);
  free_chunks(c, 2);
  /* LZ4 partitions of a batch each, as the device path reads them: Arrow
   * Java's frames (raw and empty buffers among them) and the funnel
   * shuffle's; then the values made to repeat (every row a copy of one of
   * the first three), so that their buffers are frames too */
  static const struct iw_options spark = {.compression = 1, .lz4_style = IW_LZ4_SPARK};
  for (int k = 0; k < 3; k++) {
    if (k == 2)
      for (int i = 0; i < t.schema->n_fields; i++) {
        struct iw_col *col = &t.cols[i];
        const int w = iw_value_width(&col->field);
        for (int64_t r = 3; col->values != NULL && r < col->rows; r++)
          memcpy(col->values + r * (w > 0 ? w : 1), col->values + (r % 3) * (w > 0 ? w : 1),
                 (size_t)(w > 0 ? w : 1));
      }
    memset(c, 0, sizeof(c));
    stream(&c[0], &t, 0, 10, 1, k == 0 ? &o[0] : &spark, NULL, 0, 1);
    stream(&c[1], &t, 10, 24, 1, k == 0 ? &o[0] : &spark, NULL, 0, 1);
    write_seed(k == 0 ? "lz4_java_batch_each" : k == 1 ? "lz4_spark_batch_each"
                                                       : "lz4_spark_repeating_batch_each", 0, c, 2);
    free_chunks(c, 2);
  }
  table_free(&t);
  /* a long column in the funnel shuffle's frames: 10,000 int64 values
   * repeating, 80,000 bytes in two 64 KiB blocks of a few hundred bytes,
   * which the device decodes in ways (lz4dec.h, funnel__lz4_frames_way) */
  static const struct iw_field long_fields[] = {{.type = FUNNEL_TYPE_INT64, .name = "v"}};
  static const struct iw_schema long_column = {1, long_fields, 0};
  table_make(&t, &long_column, 10000, 0, 8);
  for (int64_t r = 3; r < 10000; r++) memcpy(t.cols[0].values + 8 * r, t.cols[0].values + 8 * (r % 3), 8);
  memset(c, 0, sizeof(c));
  stream(&c[0], &t, 0, 10000, 1, &spark, NULL, 0, 1);
  write_seed("lz4_spark_long_frame", 0, c, 1);
  free_chunks(c, 1);
  table_free(&t);
}

/* A producer's file (tests/data) as one partition, or two as two. */
static int read_file(const char *dir, const char *name, struct iw_buf *out) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0;
  uint8_t buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) iw_buf_append(out, buf, n);
  fclose(f);
  return 1;
}

static void seeds_from_producers(const char *data_dir) {
  static const struct {
    const char *name;
    int control;
    const char *files[2];
  } seeds[] = {
      /* a schema-only stream, then the IPC file format, both by pyarrow */
      {"pyarrow_p2_p4", KNOWN, {"pyarrow/p2.arrows", "pyarrow/p4.arrow"}},
      {"arrowjs_p2_p3", 0, {"arrowjs/p2.arrows", "arrowjs/p3.arrows"}},
  };
  for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
    struct iw_buf c[2];
    memset(c, 0, sizeof(c));
    for (int k = 0; k < 2; k++)
      if (!read_file(data_dir, seeds[s].files[k], &c[k])) die("cannot read", seeds[s].files[k]);
    write_seed(seeds[s].name, seeds[s].control, c, 2);
    free_chunks(c, 2);
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: fuzz_gen_corpus OUT_DIR [TESTS_DATA_DIR]\n");
    return 2;
  }
  out_dir = argv[1];
  seeds_generated();
  seeds_nested();
  seeds_compressed();
  if (argc == 3) seeds_from_producers(argv[2]);
  return 0;
}
