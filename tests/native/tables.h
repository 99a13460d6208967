/* tables.h: a table of random rows (the source of truth), cut into
 * partitions, and the check that a column read back is the plain
 * concatenation of its rows. Shared by the tests that read whole tables. */
#ifndef FUNNEL_TEST_TABLES_H
#define FUNNEL_TEST_TABLES_H

#include <stdint.h>

#include "funnel.h"
#include "ipc_writer.h"

/* A field of every type funnel reads (timestamps of every unit, with and
 * without a timezone; nullable and not), and their schema. */
extern const struct iw_field table_every_type[];
extern const struct iw_schema every_schema;

/* Fixed-width columns of 4 and 8 bytes, with and without nulls: the
 * device concat's 16-byte copies (test_reader, test_compress). */
extern const struct iw_schema long_fixed_schema;

struct table_src {
  const struct iw_schema *schema;
  struct iw_col *cols;
  int64_t rows;
};

/* `rows` random rows of every field of `s`; about null_permille/1000 of
 * the nullable ones null. */
struct table_src table_random(const struct iw_schema *s, int64_t rows, int null_permille,
                              uint64_t seed);

/* Makes a table's values repeat, so that their buffers compress (random
 * rows mostly go raw): row r takes row r % 5's value, strings a pattern. */
void table_make_compressible(struct table_src *t);
void table_src_free(struct table_src *t);

/* The rows cut into `n_parts` partitions of about equal rows, each a whole
 * stream (schema, one batch, end of stream) in malloc'd memory. */
struct funnel_partition *table_partitions(const struct table_src *t, int n_parts);
void table_partitions_free(struct funnel_partition *p, int n_parts);

/* The value of row i of partition p of a read salted `salt` in the async
 * and misuse tests' int64 tables: each read's rows differ from the last's. */
int64_t table_salted_value(int p, int64_t i, int salt);

/* Partition p of such a read: one non-nullable int64 column "v" of `rows`
 * rows, a whole stream in malloc'd memory (free its data). */
struct funnel_partition table_salted_partition(int p, int64_t rows, int salt);

/* Bit i of a bitmap. */
int table_bit(const uint8_t *p, int64_t i);

/* Checks that `col` (described by funnel, its buffers' bytes in host
 * memory at validity, offsets, data) holds the `rows` rows of `c`. */
void check_column(const struct funnel_column *col, const struct iw_col *c, int64_t rows,
                  const uint8_t *validity, const uint8_t *offsets, const uint8_t *data);

/* Describes, copies back (into buffers of exactly the sizes the columns
 * advertise, so ASan sees a longer copy) and compares every column of a
 * read's table `t` with `src` (check_column). */
struct funnel_table;
void table_check_read(struct funnel_table *t, const struct table_src *src);

#endif
