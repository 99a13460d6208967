/* format.h: Arrow IPC streaming format, read by hand. Host only: nothing
 * here knows a backend, so parsing cannot make a device call.
 *
 * Every read of the bytes is bounds-checked against the message (metadata)
 * and the partition (bodies). Offsets reported in errors are byte offsets
 * within the partition. */
#ifndef FUNNEL_FORMAT_H
#define FUNNEL_FORMAT_H

#include "internal.h"

struct funnel__field {
  const char *name;      /* NUL-terminated copy */
  int type_id;           /* enum funnel_type_id */
  int nullable;
  int byte_width;        /* fixed width: bytes per value; else 0 */
  int offset_width;      /* var width: 4 or 8; else 0 */
  int time_unit;         /* timestamp */
  const char *timezone;  /* timestamp: "" when none */
  int precision, scale;  /* decimal128 */
  int n_buffers;         /* IPC buffers per field: 2 (fixed, bool, list), 3 (var
                            width) or 1 (struct, fixed_size_list) */
  /* the schema's tree, flattened depth first (funnel__schema.fields) */
  int nested;            /* enum funnel__nested */
  int parent;            /* index of the parent node, -1 for a top-level column */
  int n_children;
  int list_size;         /* fixed_size_list */
  int keys_sorted;       /* map */
  const char *path;      /* "c3.item.y" */
};

/* How a node's rows relate to its children's. FUNNEL__NESTED_LIST has
 * offset_width 4 or 8 (map and list: 4) and no data buffer. */
enum funnel__nested {
  FUNNEL__NESTED_NONE = 0,
  FUNNEL__NESTED_LIST,   /* list, large_list, map: offsets into the child */
  FUNNEL__NESTED_FIXED,  /* fixed_size_list: list_size child rows a row */
  FUNNEL__NESTED_STRUCT  /* the children have the struct's rows */
};

/* Nodes nested deeper than this are refused (MALFORMED): the parse walks
 * the tree recursively. */
#define FUNNEL__MAX_DEPTH 64

struct funnel__schema {
  int n_fields;          /* nodes: the top-level columns and their children, depth first */
  struct funnel__field *fields;
  int n_top;             /* top-level columns */
  bool nested;           /* any node is a list, struct, map or fixed_size_list */
  const uint8_t *ipc;    /* the encapsulated Schema message, copied */
  int64_t ipc_length;
};

/* One column of one record batch, bound to the schema. Offsets are
 * absolute byte offsets within the partition; -1 when absent. */
struct funnel__piece {
  /* The rows of the node the table takes: [start, start + length) of its
   * FieldNode's. A top-level column's start is 0 and its length the
   * batch's rows; a child's follow from its parent's (a list's offsets, a
   * struct's rows, list_size times a fixed_size_list's). null_count is
   * the count in that range. */
  int64_t start;
  int64_t node_length;   /* the FieldNode's length */
  int64_t length;
  int64_t null_count;
  int64_t validity;      /* -1 when the piece is all valid */
  int64_t validity_bits; /* a validity buffer with bytes (checked against the
                            null count by funnel__piece_check), even when
                            the null count is 0; -1 when none */
  int64_t offsets;       /* var width */
  int64_t data;
  int64_t first_offset;  /* var width: offsets[0] and offsets[length] */
  int64_t last_offset;
};

/* RecordBatch.compression's codec (Arrow's CompressionType), or none. */
enum funnel__codec {
  FUNNEL__CODEC_NO_BATCH = -2, /* funnel__first_batch_codec: the stream has no batch */
  FUNNEL__CODEC_NONE = -1,
  FUNNEL__CODEC_LZ4_FRAME = 0,
  FUNNEL__CODEC_ZSTD = 1
};

struct funnel__batch {
  int64_t message_offset; /* where the message starts, for errors */
  int codec;              /* enum funnel__codec: how the body is compressed */
  /* A batch of a partition with compressed batches (image_length > 0):
   * its body in the partition's decoded image (funnel__batch_decode): where
   * it starts there and its length, and its Buffer structs there ({int64
   * offset within that body, length}: in the arena for a compressed batch,
   * the batch's own for one that is not, whose body is copied as it is).
   * Once decoded (funnel__partition_use_image) they are the batch's body
   * and buffers. */
  int64_t dbody, dbody_length;
  const uint8_t *dbuffers;
  int64_t zbytes;         /* compressed buffers: their bytes in the body */
  /* LZ4 frames of values (what the device may decode, parse.c): how many,
   * their bytes in the body and decoded; 0 when the buffers are not the
   * schema's */
  int64_t value_frames, value_zbytes, value_bytes;
  const uint8_t *ddev;    /* per buffer, 1: the device decodes it (its
                             frames go up), or NULL: none */
  int64_t sbody;          /* once decoded: the body and Buffer structs as given */
  const uint8_t *sbuffers;
  int64_t rows;
  int64_t body;           /* body start within the partition */
  int64_t body_length;
  int32_t n_nodes, n_buffers;
  const uint8_t *nodes;   /* FieldNode structs: {int64 length, null_count} */
  const uint8_t *buffers; /* Buffer structs: {int64 offset, length} */
  struct funnel__piece *pieces; /* n_fields, filled by funnel__batch_bind */
  /* the schema funnel__batch_bind_ends bound the pieces to (a later call
   * with it returns at once), or NULL */
  const struct funnel__schema *bound;
  /* the schema every piece passed funnel__piece_check against when the
   * batch was parsed (a small batch), or NULL: still to check */
  const struct funnel__schema *checked;
};

struct funnel__partition {
  const uint8_t *bytes;  /* the partition, or once decoded its image */
  int64_t length;
  /* When a batch is compressed: the bytes its decoded image takes (the
   * batches' bodies, decoded or copied, each FUNNEL__ALIGN aligned), else
   * 0; and once decoded, the bytes as given (errors about the headers
   * still name offsets in them). */
  int64_t image_length;
  const uint8_t *source;
  int64_t source_length;
  bool decoded;
  const struct funnel__schema *schema; /* its Schema message, or NULL */
  int64_t schema_offset;
  int64_t n_batches;
  struct funnel__batch *batches;
  int64_t rows;
};

/* Parses an encapsulated Schema message at the start of `bytes` (a Schema
 * message or the beginning of a stream) into `out`, allocated in `arena`
 * (the message bytes are copied there too). The message is handed on as
 * it is (Java reads it with Arrow Java), so it is checked as Arrow Java
 * reads it: every string of it (names, timezones, custom_metadata of the
 * schema and its fields) in bounds and valid UTF-8, every type table
 * present, metadata version V4 or V5; what Arrow Java or Arrow C++ cannot
 * hold (fixed_size_binary(0), decimal128 precision outside 1..38) is
 * refused too, as is a NUL in a name or timezone (funnel carries them as
 * C strings). */
int funnel__schema_parse(const uint8_t *bytes, int64_t length,
                         struct funnel__arena *arena,
                         struct funnel__schema *out,
                         struct funnel_error *error);

/* Splits partition `index` into its messages: an optional Schema, then
 * RecordBatch messages, up to an optional end-of-stream marker (several
 * streams may follow each other; their schemas must be equal). Checks the
 * framing, every flatbuffer access, and that every buffer lies inside its
 * body. Batches are bound to a schema later, by funnel__batch_bind. */
int funnel__partition_parse(const uint8_t *bytes, int64_t length,
                            int64_t index, struct funnel__arena *arena,
                            struct funnel__partition *out,
                            struct funnel_error *error);

/* The same, where a Schema message byte-for-byte equal to `known`'s (may
 * be NULL) is not parsed again: the partition's schema is then `known`
 * itself. Shuffle partitions repeat one schema; this makes the repeat
 * cost a memcmp. When the partition's schema is `known` (or it has none),
 * its batches are bound to `known` too (funnel__batch_bind_ends) while
 * their headers are in cache, on the thread that parses, and a small one
 * (FUNNEL__CHECK_INLINE_BYTES) has its pieces checked (funnel__piece_check)
 * while its offsets are; a batch that does not bind or pass is left for
 * the plan and the read's checks, which do it again and report the error
 * in their order. */
int funnel__partition_parse_known(const uint8_t *bytes, int64_t length,
                                  int64_t index, const struct funnel__schema *known,
                                  struct funnel__arena *arena,
                                  struct funnel__partition *out,
                                  struct funnel_error *error);

/* Binds the batches of a parsed partition whose schema is `schema` (or
 * which has none) to it, as funnel__partition_parse_known does with
 * `known`: funnel__batch_bind_ends, then funnel__piece_check for a small
 * batch. A batch that fails is left as it was, for the plan and the read's
 * checks to do again and report in their order. */
void funnel__partition_bind(const struct funnel__schema *schema,
                            struct funnel__partition *part, int64_t index,
                            struct funnel__arena *arena);

/* Binds a parsed batch to `schema`: node and buffer counts, lengths, null
 * counts (against the validity bits, whenever a validity buffer has bytes:
 * Arrow Java reads those whatever the count says), buffer sizes against
 * the types, first and last string offsets. */
int funnel__batch_bind(const struct funnel__schema *schema,
                       const struct funnel__partition *part,
                       struct funnel__batch *batch, int64_t index,
                       struct funnel__arena *arena,
                       struct funnel_error *error);

/* funnel__batch_bind in two halves, so that the checks whose cost grows
 * with the rows can run on several threads while a read's copies fly: the
 * first checks everything but those (once: a batch bound to `schema`
 * already is left as it is); the second checks column `i`'s
 * interior string offsets (rising) and its null count against its validity
 * bits, with the same error funnel__batch_bind gives. */
int funnel__batch_bind_ends(const struct funnel__schema *schema,
                            const struct funnel__partition *part,
                            struct funnel__batch *batch, int64_t index,
                            struct funnel__arena *arena, struct funnel_error *error);
int funnel__piece_check(const struct funnel__schema *schema,
                         const struct funnel__partition *part,
                         const struct funnel__batch *batch, int i, int64_t index,
                         struct funnel_error *error);

/* ------------------------------------------------------------- decode.c */

/* Body compression. A compressed buffer is an int64 uncompressed length
 * (-1: the bytes follow uncompressed) and then an LZ4 frame (LZ4_FRAME) or
 * ZSTD frames; an empty buffer may have no bytes at all. liblz4.so.1 and
 * libzstd.so.1 are loaded the first time a read needs them (dlopen, like
 * libcuda): a host without them fails such a read with
 * FUNNEL_ERR_UNSUPPORTED naming the library, and reads nothing else
 * differently. */

/* "LZ4_FRAME", "ZSTD". */
const char *funnel__codec_name(int codec);

/* The most bytes `n` compressed bytes of `codec` can decode to: a larger
 * declared length is malformed (a decompression bomb, not an allocation). */
int64_t funnel__codec_max_decoded(int codec, int64_t n);

/* Loads the codec's library once; FUNNEL_ERR_UNSUPPORTED with `why`
 * filled when it cannot be. */
int funnel__codec_load(int codec, char *why, size_t why_size);

/* A thread's decompression contexts, made when first needed. */
struct funnel__decoder {
  void *lz4, *zstd;
};
void funnel__decoder_free(struct funnel__decoder *d);

/* Decodes buffers [lo, hi) of batch `b` of partition `index` (the whole
 * body copied for an uncompressed batch) into its place in `image`, the
 * partition's image. Every failure names the partition, the column, the
 * buffer and its offset in the partition: a corrupt frame, a frame that
 * decodes to more or fewer bytes than its prefix declares, a missing
 * library. `schema` (may be NULL) names the columns. */
int funnel__batch_decode(const struct funnel__schema *schema,
                         const struct funnel__partition *part,
                         const struct funnel__batch *b, int64_t index, uint8_t *image,
                         int32_t lo, int32_t hi, struct funnel__decoder *dec,
                         struct funnel_error *error);

/* Decodes buffer k of batch `b` of a partition (decoded or not: the
 * buffer as given) into `dst`, which holds its declared length; the
 * errors funnel__batch_decode gives. */
int funnel__buffer_decode(const struct funnel__schema *schema,
                          const struct funnel__partition *part, const struct funnel__batch *b,
                          int64_t index, int32_t k, uint8_t *dst, struct funnel__decoder *dec,
                          struct funnel_error *error);

/* Once every batch is decoded into `image`: the partition's views become
 * the image's (its bytes, each batch's body and buffers). */
void funnel__partition_use_image(struct funnel__partition *part, uint8_t *image);

/* An error about partition error->partition's bytes (the plan's checks)
 * whose offset lies in its decoded image: the offset becomes that of the
 * compressed buffer as given, which the message then names. No-op for a
 * partition that was not decoded. */
void funnel__decoded_error(const struct funnel__partition *parts, int64_t count,
                           struct funnel_error *error);

/* Decodes the whole partition into `image` (image_length bytes), on this
 * thread, and uses it: funnel__batch_decode for every batch, then
 * funnel__partition_use_image. */
int funnel__partition_decode(const struct funnel__schema *schema,
                             struct funnel__partition *part, int64_t index, uint8_t *image,
                             struct funnel__decoder *dec, struct funnel_error *error);

/* The column buffer `k` of a batch belongs to under `schema` (NULL, or a
 * batch that has another buffer count: -1), and what it holds:
 * "validity", "offsets", "data". */
int funnel__buffer_column(const struct funnel__schema *schema, int32_t n_buffers, int32_t k,
                          const char **kind);

/* Whether field f's IPC buffer j (0 its validity) holds its values: the
 * data buffer, which no check on the host reads (not offsets). */
bool funnel__buffer_holds_values(const struct funnel__field *f, int j);

/* The codec of the first RecordBatch of the stream in `bytes` (its header
 * only: nothing of the partition is checked), FUNNEL__CODEC_NONE when it is
 * not compressed or cannot be read, or FUNNEL__CODEC_NO_BATCH when the
 * stream ends before a RecordBatch. */
int funnel__first_batch_codec(const uint8_t *bytes, int64_t length);

/* Index of the first field where `a` and `b` differ (name, type, type
 * parameters, nullability), n_fields when only the field counts differ, or
 * -1 when they are equal. `why` (may be NULL) gets a description. */
int funnel__schema_diff(const struct funnel__schema *a,
                        const struct funnel__schema *b, char *why,
                        size_t why_size);

/* "int64", "timestamp[us, tz=UTC]", ... into buf. */
void funnel__field_type_string(const struct funnel__field *f, char *buf,
                               size_t size);

#endif
