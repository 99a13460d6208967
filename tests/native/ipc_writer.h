/* ipc_writer.h: a small Arrow IPC streaming-format writer for the tests.
 *
 * It shares no code with funnel's reader: the flatbuffers are written by
 * hand from Message.fbs and Schema.fbs, front to back (every uoffset points
 * forward and is patched once its target is written; each vtable sits just
 * before its table). An encapsulated message is the continuation marker
 * 0xFFFFFFFF, the int32 metadata length (padded so the body starts 8-byte
 * aligned), the Message flatbuffer, then the body, whose buffers are each
 * padded to 8 bytes. Legacy framing (before Arrow 0.15) drops the marker.
 *
 * Two layers:
 *  - messages from buffers (iw_schema_message, iw_batch_message, iw_eos):
 *    the caller says exactly what goes in each buffer, including offsets
 *    that do not start at 0 and bitmaps with junk in their padding bits;
 *  - test tables (struct iw_col): random rows of a column, the source of
 *    truth the tests compute their expected answers from with plain loops,
 *    and iw_batch_from_cols to encode a slice of rows as a RecordBatch.
 *
 * Everything aborts on out-of-memory; these are tests. */
#ifndef FUNNEL_TEST_IPC_WRITER_H
#define FUNNEL_TEST_IPC_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "funnel.h"

/* A growable byte buffer. Zero-initialize; iw_buf_free releases it. */
struct iw_buf {
  uint8_t *data;
  size_t len, cap;
};
void iw_buf_free(struct iw_buf *b);
void iw_buf_append(struct iw_buf *b, const void *bytes, size_t n);
/* A malloc'd copy of exactly `n` bytes (at least 1 is allocated), so that
 * ASan sees any read past the end. */
uint8_t *iw_dup(const void *bytes, size_t n);

/* Field types the tests write besides funnel's enum funnel_type_id. */
enum {
  IW_TYPE_FLOAT16 = 100, /* FloatingPoint{HALF} */
  IW_TYPE_DECIMAL256,    /* Decimal{bitWidth 256} */
  IW_TYPE_LIST,          /* List<int32> */
  IW_TYPE_STRUCT,        /* Struct<a: int32> */
  IW_TYPE_UTF8_VIEW,     /* Utf8View */
  IW_TYPE_RAW            /* the union tag `raw_tag` with an empty type table */
};

/* Arrow's Type union tags (Schema.fbs). */
enum {
  IW_TAG_INT = 2, IW_TAG_FLOATING_POINT = 3, IW_TAG_BINARY = 4, IW_TAG_UTF8 = 5,
  IW_TAG_BOOL = 6, IW_TAG_DECIMAL = 7, IW_TAG_DATE = 8, IW_TAG_TIME = 9,
  IW_TAG_TIMESTAMP = 10, IW_TAG_LIST = 12, IW_TAG_STRUCT = 13,
  IW_TAG_FIXED_SIZE_BINARY = 15, IW_TAG_LARGE_BINARY = 19, IW_TAG_LARGE_UTF8 = 20,
  IW_TAG_UTF8_VIEW = 24
};

/* One custom_metadata entry (Schema.fbs KeyValue). */
struct iw_kv {
  const char *key, *value;
};

struct iw_field {
  int type;              /* enum funnel_type_id or IW_TYPE_* */
  const char *name;
  int nullable;
  int time_unit;         /* timestamp: enum funnel_time_unit */
  const char *timezone;  /* timestamp: NULL writes no timezone */
  int precision, scale;  /* decimal */
  int byte_width;        /* fixed_size_binary */
  int dictionary;        /* nonzero: dictionary-encoded, int32 indices */
  int raw_tag;           /* IW_TYPE_RAW: the Type union tag */
  int n_metadata;        /* custom_metadata: written when nonzero */
  const struct iw_kv *metadata;
  /* nested types (FUNNEL_TYPE_LIST, LARGE_LIST, FIXED_SIZE_LIST, STRUCT,
   * MAP): their children, written as given (a map's: one struct of a key
   * and a value) */
  int n_children;
  const struct iw_field *children;
  int list_size;         /* fixed_size_list */
  int keys_sorted;       /* map */
};

struct iw_schema {
  int n_fields;
  const struct iw_field *fields;
  int big_endian;        /* writes endianness = Big */
};

/* Bytes per value of a fixed-width type (0 for bool and variable width),
 * and the offset width of a variable-width type (else 0). */
int iw_value_width(const struct iw_field *f);
int iw_offset_width(const struct iw_field *f);
/* IPC buffers per field: 3 for variable width, 2 for fixed width, bool
 * and the lists (validity, offsets), 1 for struct and fixed_size_list. */
int iw_buffer_count(const struct iw_field *f);
/* The schema's nodes, depth first (a field, then its children's nodes):
 * fills `out` (room for `cap`) and returns how many there are. A record
 * batch's columns (iw_batch_message) are these nodes. */
int iw_schema_nodes(const struct iw_schema *s, const struct iw_field **out, int cap);

/* How iw_batch_message compresses a body (iw_options.compression). */
enum {
  IW_LZ4_JAVA = 0, /* Arrow Java's arrow-compression: 4 MiB independent blocks,
                      a content checksum */
  IW_LZ4_CPP = 1,  /* Arrow C++ / pyarrow: 64 KiB linked blocks, no checksum */
  IW_LZ4_SPARK = 2, /* funnel-spark's lz4-java frames: 64 KiB independent blocks,
                       no checksum */
  IW_LZ4_SUMS = 3,  /* no Arrow writer's: 64 KiB linked blocks, each with a block
                       checksum, and a content checksum (what liblz4 can write) */
  IW_LZ4_SIZED = 4  /* no Arrow writer's: 64 KiB independent blocks, the content
                       size in the header and a content checksum */
};

struct iw_options {
  int legacy;       /* no continuation marker (framing before Arrow 0.15) */
  int version;      /* MetadataVersion; 0 writes V5 (4) */
  int compression;  /* RecordBatch BodyCompression: 0 none, 1 LZ4_FRAME, 2 ZSTD;
                       each buffer is compressed as Arrow's BUFFER method says
                       (an int64 uncompressed length, then the frame) */
  int header_only;  /* compression: the header says so but the buffers are
                       written as given (bad input) */
  int lz4_style;    /* IW_LZ4_JAVA, IW_LZ4_CPP or IW_LZ4_SPARK */
  int raw_fallback; /* a buffer whose frame is not smaller goes raw (length -1),
                       as Arrow Java and Arrow C++ write it */
  int empty_prefix; /* an empty buffer gets the 8-byte 0 prefix (Arrow Java);
                       else it stays empty (0 bytes) */
  int zstd_level;   /* 0: 1 (Arrow Java's default is 3; any level reads alike) */
  int n_metadata;   /* Schema custom_metadata: written when nonzero */
  const struct iw_kv *metadata;
};

/* Where the last message went, as absolute offsets within the output
 * buffer, for tests that corrupt a chosen field. 0 when not written. */
struct iw_layout {
  size_t message;           /* first byte of the message (its prefix) */
  size_t metadata;          /* the Message flatbuffer */
  size_t metadata_length;   /* padded, as in the prefix */
  size_t body;
  size_t body_length;
  size_t version_field;     /* Message.version (int16) */
  size_t header_type_field; /* Message.header_type (uint8) */
  size_t body_length_field; /* Message.bodyLength (int64) */
  size_t header;            /* the header table (Schema, RecordBatch, ...) */
  size_t length_field;      /* RecordBatch.length (int64) */
  size_t nodes;             /* RecordBatch.nodes[0]: {int64 length, null_count} */
  size_t buffers;           /* RecordBatch.buffers[0]: {int64 offset, length} */
  size_t fields;            /* Schema.fields vector (its uint32 count) */
  size_t codec_field;       /* RecordBatch BodyCompression.codec (int8), when compressed */
  size_t method_field;      /* ... and .method (int8) */
};

/* One column of one record batch, buffer by buffer. A NULL pointer with a
 * nonzero length writes that many zero bytes. */
struct iw_column {
  int64_t length;
  int64_t null_count;
  const void *validity;
  int64_t validity_length;  /* 0: an empty validity buffer */
  const void *offsets;      /* variable width only */
  int64_t offsets_length;
  const void *data;
  int64_t data_length;
};

/* Appends an encapsulated Schema message. `o` and `layout` may be NULL. */
void iw_schema_message(struct iw_buf *out, const struct iw_schema *s,
                       const struct iw_options *o, struct iw_layout *layout);
/* Appends a RecordBatch message of `length` rows; cols[i] follows the
 * schema's node i (iw_schema_nodes; its buffer count: a list's second
 * buffer is its offsets). */
void iw_batch_message(struct iw_buf *out, const struct iw_schema *s, int64_t length,
                      const struct iw_column *cols, const struct iw_options *o,
                      struct iw_layout *layout);
/* Compresses n bytes as one frame of `codec` (1 LZ4_FRAME in `lz4_style`,
 * 2 ZSTD) into a malloc'd buffer (*out_len its length), with liblz4 and
 * libzstd loaded at run time; aborts when they cannot be loaded. */
uint8_t *iw_compress(int codec, int lz4_style, int zstd_level, const void *src, size_t n,
                     size_t *out_len);
/* Decompresses one buffer as Arrow's BUFFER method writes it (prefix and
 * frame; -1 raw) into dst of `cap` bytes: returns the bytes written, or -1
 * when the frame is bad or does not fit. The benchmark's baseline: each
 * thread keeps one context of each codec for all its calls. */
int64_t iw_decompress_buffer(int codec, const uint8_t *src, size_t n, uint8_t *dst, size_t cap);
/* How iw_lz4_frame writes a frame: its blocks' maximum (4: 64 KiB ... 7:
 * 4 MiB), linked or independent, with block and content checksums and the
 * content size or not, at `level` (0 fast, 3 and more: LZ4 HC); `piece` 0:
 * every block full (LZ4F_compressFrame), else a block of each `piece`
 * bytes (LZ4F_compressUpdate, flushed), the last less. */
struct iw_lz4_shape {
  int block_size_id, linked, block_checksum, content_checksum, content_size, level;
  size_t piece;
};
/* One LZ4 frame of the n bytes at src, written by liblz4 as `shape` says;
 * to free(). */
uint8_t *iw_lz4_frame(const struct iw_lz4_shape *shape, const void *src, size_t n,
                      size_t *out_len);
/* One raw LZ4 block of the n bytes at src (LZ4_compress_default, or
 * LZ4_compress_HC at a level of 3 or more); to free(). */
uint8_t *iw_lz4_block(int level, const void *src, size_t n, size_t *out_len);
/* One ZSTD frame of the n bytes at src (libzstd's ZSTD_compress2) at
 * `level`, with a content checksum and the content size when asked; to
 * free(). */
uint8_t *iw_zstd_frame(int level, int checksum, int content_size, const void *src, size_t n,
                       size_t *out_len);
/* libzstd's decoding of the frames at src into at most cap bytes: how
 * many, or -1 when it refuses them. */
int64_t iw_zstd_decompress(const uint8_t *src, size_t n, uint8_t *dst, size_t cap);

/* n test bytes of a kind the decoders' tests compress (rng drawn for
 * kinds 0, 3 and 4): 0 random, 1 repeated text, 2 runs of 700 bytes, 3
 * lowercase words now and then capitalised (as string columns: Huffman
 * literals, FSE-compressed tables), 4 int64 values of a few bits, 5
 * shuffle-like: matches 1 to 8 bytes back (overlapping copies) and a few
 * bytes back, runs of zeros, long literal runs, matches of more than 32
 * bytes, matches far back; 6 a block's first sequences long, then short
 * ones (a few literals and a match a few bytes back). */
void iw_sample_bytes(uint8_t *out, int64_t n, int kind, uint64_t *rng);
/* A copy (to free()) of the zn > 0 bytes at z with 1 to 3 of them
 * changed, cut short one time in four: its length into *len. */
uint8_t *iw_spoiled_copy(uint64_t *rng, const uint8_t *z, size_t zn, size_t *len);
/* One ZSTD frame of a compressed block: raw literals "abcd", one
 * sequence, the literals lengths' and match lengths' tables RLE, the
 * offsets' FSE-compressed with each of its 32 symbols of count -1 ("less
 * than 1": an FSE table with nothing to spread). libzstd decodes it to
 * "abcddddd". */
extern const uint8_t IW_ZSTD_ALL_LOW_FRAME[34];

/* Whether liblz4 and libzstd can be loaded here. */
int iw_codecs_available(void);

/* Appends a DictionaryBatch message (id 0, an empty int32 batch). */
void iw_dictionary_message(struct iw_buf *out, const struct iw_options *o,
                           struct iw_layout *layout);
/* Appends the end-of-stream marker: 0xFFFFFFFF 0x00000000 (legacy: 0). */
void iw_eos(struct iw_buf *out, const struct iw_options *o);

/* The IPC file format: iw_file_begin writes "ARROW1" and 2 bytes of
 * padding; the caller then appends a stream (Schema, RecordBatches, EOS),
 * keeping each batch's layout (absolute offsets, so the file must start at
 * offset 0 of `out`); iw_file_end writes the Footer (schema and a Block per
 * batch), its int32 length and "ARROW1". */
void iw_file_begin(struct iw_buf *out);
void iw_file_end(struct iw_buf *out, const struct iw_schema *s, const struct iw_layout *batches,
                 int n_batches);

/* ----------------------------------------------------------- test tables */

/* The rows of one column: what a test reads back must equal these, so the
 * expected answer comes from here, never from funnel. */
struct iw_col {
  struct iw_field field;
  int64_t rows;
  uint8_t *valid;   /* rows bytes: 1 valid, 0 null */
  uint8_t *values;  /* fixed width: rows * width bytes; bool: rows bytes of 0/1 */
  int64_t *ends;    /* variable width: row r is chars[start(r), ends[r]) */
  uint8_t *chars;
};

/* Fills `c` with `rows` random rows; about null_permille/1000 of them are
 * null when the field is nullable. */
void iw_col_random(struct iw_col *c, const struct iw_field *f, int64_t rows, int null_permille,
                   uint64_t *rng);
void iw_col_free(struct iw_col *c);
static inline int64_t iw_col_start(const struct iw_col *c, int64_t r) {
  return r == 0 ? 0 : c->ends[r - 1];
}

/* How iw_batch_from_cols encodes a slice. Zero-initialized: no validity
 * buffer when a slice has no nulls, offsets from 0, zero padding. */
struct iw_encode {
  uint64_t *rng;          /* for the choices below and junk padding; NULL: none */
  int junk_padding;       /* random bits after the last row of each bitmap */
  int64_t offset_base;    /* offsets start here; junk bytes before the first value */
  int vary;               /* each slice picks at random: all-ones validity when it
                             has no nulls, an offset base in 0..9, an empty offsets
                             buffer for 0 rows */
  struct iw_layout *layout; /* when set, gets the batch message's layout */
};

/* Appends rows [r0, r1) of every column as one RecordBatch message. */
void iw_batch_from_cols(struct iw_buf *out, const struct iw_schema *s,
                        const struct iw_col *cols, int64_t r0, int64_t r1,
                        const struct iw_encode *e, const struct iw_options *o);

#endif
