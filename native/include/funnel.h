/*
 * funnel.h: the one public C header of funnel.
 *
 * funnel turns a reduce task's shuffle partitions (Arrow IPC bytes in host
 * memory) into ONE columnar table in device memory: a handful of driver
 * calls, at most one host-to-device copy per partition, one concat launch.
 *
 *   struct funnel_device *dev;  funnel_device_open("auto", &dev, &err);
 *   struct funnel_reader *rd;   funnel_reader_create(dev, NULL, 0, &rd, &err);
 *   struct funnel_table *t;     funnel_reader_read_async(rd, parts, n, 0, &t, &err);
 *   ... the caller may do other work; the copies and the concat run ...
 *   funnel_table_wait(t, &err); funnel_table_column(t, 0, &col); ...
 *   funnel_table_free(t); funnel_reader_free(rd); funnel_device_close(dev);
 *
 * Errors: every fallible function returns a funnel_status (FUNNEL_OK is 0)
 * and takes a `struct funnel_error *` last, which may be NULL. On failure it
 * holds the code, a message, and where known the partition, the column and
 * the byte offset within the partition that failed. Output parameters are
 * left untouched on failure and nothing is leaked.
 *
 * Threads: devices, readers, tables and streams may be used from any
 * thread, and calls may run at once, each object freed once. Concurrent
 * reads on one reader are ordered on the reader's stream. What a C caller
 * may race with the end of an object:
 *   - a free waits for the calls on its object that other threads have
 *     already begun: funnel_reader_free for their reads,
 *     funnel_table_free for their waits, copies back, exports and shares
 *     of the table, funnel_stream_destroy for the reads enqueueing on the
 *     stream; funnel_device_pinned_free waits for the work of the reads of
 *     the block (a read still enqueueing included);
 *   - a call that begins after the free of its object has begun is a use
 *     after free, which funnel cannot detect: the caller orders them (the
 *     Java layer does). Stream handles are the exception: a destroyed
 *     handle is an error, never a use after free;
 *   - funnel_reader_set_option must not run while another thread reads
 *     through the reader.
 */
#ifndef FUNNEL_H
#define FUNNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FUNNEL_BUILDING)
#define FUNNEL_API __attribute__((visibility("default")))
#else
#define FUNNEL_API
#endif

#define FUNNEL_VERSION_MAJOR 0
#define FUNNEL_VERSION_MINOR 1

/* ---------------------------------------------------------------- errors */

enum funnel_code {
  FUNNEL_OK = 0,
  /* The caller broke the API's contract (NULL pointer, bad index, ...). */
  FUNNEL_ERR_INVALID_ARGUMENT = 1,
  /* A partition's bytes are not valid Arrow IPC (truncated, corrupt
   * flatbuffer, buffers outside the body, ...). */
  FUNNEL_ERR_MALFORMED = 2,
  /* Valid Arrow that funnel does not handle yet: a type (dictionary,
   * union, view types, ...), big-endian data; or a compressed body whose
   * codec's library (liblz4, libzstd) this host cannot load. */
  FUNNEL_ERR_UNSUPPORTED = 3,
  /* A partition's schema differs from the first one's (or the reader's). */
  FUNNEL_ERR_SCHEMA_MISMATCH = 4,
  /* No partition holds a schema and the reader was given none. */
  FUNNEL_ERR_NO_SCHEMA = 5,
  /* A size does not fit: a 32-bit offset column over 2^31-1 bytes, ... */
  FUNNEL_ERR_LIMIT = 6,
  /* Host memory could not be allocated. */
  FUNNEL_ERR_HOST_OUT_OF_MEMORY = 7,
  /* Device memory could not be allocated: free some and retry. */
  FUNNEL_ERR_DEVICE_OUT_OF_MEMORY = 8,
  /* A device call failed; the message names the call and the error. */
  FUNNEL_ERR_DEVICE = 9,
  /* The requested backend has no driver or device on this host. */
  FUNNEL_ERR_NO_DEVICE = 10,
  /* A sticky device error: the context is unusable, the process must
   * not use the device again. */
  FUNNEL_ERR_FATAL = 11,
  /* A shared table still has importers, or a share was withdrawn. */
  FUNNEL_ERR_IN_USE = 12
};

typedef int funnel_status;

#define FUNNEL_ERROR_MESSAGE_SIZE 512

struct funnel_error {
  int code;          /* an enum funnel_code */
  int64_t partition; /* index of the partition at fault, or -1 */
  int64_t column;    /* index of the column at fault, or -1 */
  int64_t offset;    /* byte offset within that partition, or -1 */
  char message[FUNNEL_ERROR_MESSAGE_SIZE]; /* NUL-terminated, one line */
};

/* The name of a code ("FUNNEL_ERR_MALFORMED"); never NULL. */
FUNNEL_API const char *funnel_code_name(int code);

/* ----------------------------------------------------------------- types */

enum funnel_type_id {
  FUNNEL_TYPE_INT8 = 1,
  FUNNEL_TYPE_INT16,
  FUNNEL_TYPE_INT32,
  FUNNEL_TYPE_INT64,
  FUNNEL_TYPE_UINT8,
  FUNNEL_TYPE_UINT16,
  FUNNEL_TYPE_UINT32,
  FUNNEL_TYPE_UINT64,
  FUNNEL_TYPE_FLOAT32,
  FUNNEL_TYPE_FLOAT64,
  FUNNEL_TYPE_BOOL,
  FUNNEL_TYPE_DATE32,
  FUNNEL_TYPE_DATE64,
  FUNNEL_TYPE_TIMESTAMP,
  FUNNEL_TYPE_DECIMAL128,
  FUNNEL_TYPE_UTF8,
  FUNNEL_TYPE_BINARY,
  FUNNEL_TYPE_LARGE_UTF8,
  FUNNEL_TYPE_LARGE_BINARY,
  FUNNEL_TYPE_FIXED_SIZE_BINARY,
  /* nested: a column of these is followed by its children's columns
   * (funnel_column.parent, n_children) */
  FUNNEL_TYPE_LIST,            /* int32 offsets into its one child */
  FUNNEL_TYPE_LARGE_LIST,      /* int64 offsets */
  FUNNEL_TYPE_FIXED_SIZE_LIST, /* list_size child values a row */
  FUNNEL_TYPE_STRUCT,          /* a child a field, each of the struct's rows */
  FUNNEL_TYPE_MAP              /* int32 offsets into its child struct<key, value> */
};

enum funnel_time_unit {
  FUNNEL_TIME_SECOND = 0,
  FUNNEL_TIME_MILLISECOND = 1,
  FUNNEL_TIME_MICROSECOND = 2,
  FUNNEL_TIME_NANOSECOND = 3
};

/* The name of a type id ("int64", "large_utf8"); never NULL. */
FUNNEL_API const char *funnel_type_name(int type_id);

/* The buffers of a column, in Arrow's order: funnel_host_range.buffer and
 * the three buffers of funnel_column. */
enum funnel_buffer_kind {
  FUNNEL_BUFFER_VALIDITY = 0,
  FUNNEL_BUFFER_OFFSETS = 1,
  FUNNEL_BUFFER_DATA = 2
};

/* A buffer of a result column. `address` is a device address (on the cpu
 * backend, host memory owned by the table); `size` is the number of
 * meaningful bytes (the allocation is padded to 64 bytes). */
struct funnel_buffer {
  uint64_t address;
  int64_t size;
};

/* One column of a result table, in Arrow layout. Pointers stay valid until
 * the table is freed. */
struct funnel_column {
  const char *name;       /* UTF-8, NUL-terminated */
  int type_id;            /* an enum funnel_type_id */
  int nullable;           /* the field's nullability in the schema */
  int byte_width;         /* bytes per value for fixed-width types; 0 for
                             bool (bit-packed) and variable-width types */
  int offset_width;       /* 4 or 8 for utf8/binary and their large forms */
  int time_unit;          /* timestamp: enum funnel_time_unit */
  const char *timezone;   /* timestamp: "" when none */
  int decimal_precision;  /* decimal128 */
  int decimal_scale;      /* decimal128 */
  int64_t length;         /* rows */
  int64_t null_count;     /* from the partitions' headers */
  struct funnel_buffer validity; /* size 0 when null_count is 0 */
  struct funnel_buffer offsets;  /* (length + 1) * offset_width bytes */
  struct funnel_buffer data;     /* values; bool: bit-packed */
  /* The table's columns are the schema's nodes, depth first: a nested
   * column (list, large_list, fixed_size_list, struct, map) is followed by
   * its children and theirs. Top-level columns have parent -1. A list's
   * offsets index its child's rows; a struct's children have its rows; a
   * fixed_size_list's child list_size times its rows. */
  int parent;             /* index of the column this one is a child of, or -1 */
  int n_children;
  int list_size;          /* fixed_size_list */
  int keys_sorted;        /* map */
  const char *path;       /* "c3.item.y": the names from the top-level column down */
};

/* ---------------------------------------------------------------- device */

struct funnel_device;

/* Opens a backend. `kind` is "auto" (cuda when a CUDA driver and device are
 * present, else cpu), "cpu", "cuda" (the device of the calling thread's
 * current CUDA context, else device 0) or "cuda:N" (the device of ordinal
 * N, counted among those CUDA_VISIBLE_DEVICES leaves visible). Asking for
 * cuda on a host without a CUDA driver or device, or for an ordinal this
 * process does not see, fails with FUNNEL_ERR_NO_DEVICE; another kind with
 * FUNNEL_ERR_INVALID_ARGUMENT. The environment
 * is read now, once: FUNNEL_PINNED_POOL_BYTES (the pinned pool's size),
 * FUNNEL_DIRECT_MAX_BYTES (FUNNEL_OPTION_DIRECT_MAX_BYTES's default),
 * FUNNEL_PARSE=host|device (FUNNEL_OPTION_PARSE's default, else AUTO),
 * FUNNEL_STAGE_PAGEABLE, FUNNEL_SEGMENT_CHUNK_BYTES, FUNNEL_BATCH_COPY,
 * FUNNEL_OVERLAP_MIN_BYTES and FUNNEL_OVERLAP_MIN_PARTS (the smallest read
 * parsed on the device while its partitions are copied),
 * FUNNEL_STAGE_TASK_BYTES and FUNNEL_STAGE_ROUND_BYTES (the bytes a host
 * thread stages at a time, and the least a round of staging pageable
 * partitions stages): for tests and benchmarks. The device is
 * thread-safe. */
FUNNEL_API funnel_status funnel_device_open(const char *kind,
                                            struct funnel_device **out,
                                            struct funnel_error *error);

/* A caller's device memory allocator (a plugin's RMM resource, which can
 * spill): a device opened with one allocates through it, not its own pool,
 * the output, scratch and segment table of every read, ordered on the
 * read's stream.
 *
 * allocate: `size` (> 0) bytes of device memory, usable once `stream` gets
 * there (a CUstream on cuda; on cpu an opaque handle, and the memory is host
 * memory), aligned to at least 64 bytes; stores the address in *out and
 * returns 0, or returns nonzero when it cannot: the read then fails with
 * FUNNEL_ERR_DEVICE_OUT_OF_MEMORY (so a plugin may spill and retry), having
 * freed what it allocated. deallocate: frees what allocate returned, with
 * the size asked for, ordered on `stream`. Both may be called from any
 * thread, from funnel's workers too, with no particular CUDA context
 * current (an allocator picks its device itself, as RMM's per-device
 * resources do), and must not call back into funnel.
 * The struct is copied; `context` must stay valid, and the functions
 * callable, until the device is freed (its last table, export and reader
 * released: funnel_device_close is not the end). A shareable read
 * (FUNNEL_OPTION_SHAREABLE) allocates memory CUDA IPC can share, not
 * through the allocator. */
struct funnel_allocator {
  int (*allocate)(void *context, size_t size, void *stream, uint64_t *out);
  void (*deallocate)(void *context, uint64_t ptr, size_t size, void *stream);
  void *context;
};

/* funnel_device_open with the caller's allocator (NULL: funnel's pool). */
FUNNEL_API funnel_status funnel_device_open_with_allocator(const char *kind,
                                                           const struct funnel_allocator *allocator,
                                                           struct funnel_device **out,
                                                           struct funnel_error *error);

/* The backend actually opened: "cpu" or "cuda". */
FUNNEL_API const char *funnel_device_backend(const struct funnel_device *dev);

/* Closes the caller's handle to a device opened by funnel_device_open. NULL
 * is a no-op. What was made from the device holds it: readers, tables (and
 * their Device Data Interface exports), streams and pinned blocks. The
 * device is freed with the last of them, so the caller may close it first
 * and then, with the same pointer, still free its pinned blocks
 * (funnel_device_pinned_free) and destroy its streams
 * (funnel_stream_destroy); no other call may take the device after it was
 * closed. */
FUNNEL_API void funnel_device_close(struct funnel_device *dev);

/* ---------------------------------------------------------------- streams */

/* A stream is a handle: a number funnel gives, never twice in a process,
 * which a read looks up and checks (funnel_reader_read_async), so a wrong,
 * destroyed or another device's handle is FUNNEL_ERR_INVALID_ARGUMENT, not
 * a crash. 0 is never a stream: a read given 0 uses its reader's own. A
 * stream holds its device until destroyed. */

/* Creates a stream of the device's backend (cpu: a worker thread; cuda: a
 * non-blocking CUstream) that the caller owns, and gives its handle. */
FUNNEL_API funnel_status funnel_device_stream_create(struct funnel_device *dev,
                                                     uintptr_t *out,
                                                     struct funnel_error *error);

/* Lends reads a stream of the backend that the caller made and keeps
 * owning (a CUstream from cudf, RMM, PyTorch ...), as a handle: reads given
 * the handle enqueue on that stream. funnel never destroys the native
 * stream; the caller keeps it alive until funnel_stream_destroy of the
 * handle has returned. The cpu backend has no native streams:
 * FUNNEL_ERR_UNSUPPORTED there. */
FUNNEL_API funnel_status funnel_device_stream_wrap(struct funnel_device *dev,
                                                   uintptr_t native_stream, uintptr_t *out,
                                                   struct funnel_error *error);

/* Destroys a stream handle. Reads using it on other threads finish
 * enqueueing first (the call waits for them). A stream funnel_device_stream_
 * create made is destroyed, which completes the work queued on it (cpu: it
 * runs first; cuda: cuStreamDestroy, the work completes on the device); a
 * wrapped stream is left to its owner. Tables read on it stay valid. Works
 * after funnel_device_close. An unknown, 0 or already destroyed handle is
 * FUNNEL_ERR_INVALID_ARGUMENT naming it. */
FUNNEL_API funnel_status funnel_stream_destroy(uintptr_t stream, struct funnel_error *error);

/* ---------------------------------------------------------- pinned blocks */

/* Pinned (page-locked) host memory from the device's pool, which is
 * allocated once, on first use, and reused: the caller can fetch partitions
 * straight into it, and reads copy from it without staging. `size` bytes,
 * 64-byte aligned. FUNNEL_ERR_HOST_OUT_OF_MEMORY when the pool cannot hold
 * it (its size: FUNNEL_PINNED_POOL_BYTES in the environment when the device
 * opened, default 256 MiB on cuda, 64 MiB on cpu). The block holds the
 * device: it stays valid after funnel_device_close, until freed. */
FUNNEL_API funnel_status funnel_device_pinned_alloc(struct funnel_device *dev, size_t size,
                                                    void **out, struct funnel_error *error);

/* Gives a block back. `ptr` must be the start of a live block of `dev` and
 * `size` the size it was allocated with, else FUNNEL_ERR_INVALID_ARGUMENT
 * naming the pointer or both sizes, and nothing is freed (a second free of
 * a block is such an error). A read of partitions in the block, by a
 * reader of any device, holds it until the read's work is known complete (funnel_table_wait, or the
 * table's release): this call first waits for that work itself (it need
 * not wait for the caller to wait on the tables), then frees; should a
 * wait fail (a device error, returned), the block stays. NULL is a no-op.
 * After funnel_device_close, freeing the last block frees the device. */
FUNNEL_API funnel_status funnel_device_pinned_free(struct funnel_device *dev, void *ptr,
                                                   size_t size, struct funnel_error *error);

/* Bytes of the pool in use (allocated by callers or staging reads). */
FUNNEL_API int64_t funnel_device_pinned_in_use(struct funnel_device *dev);

/* ---------------------------------------------------------------- reader */

struct funnel_reader;
struct funnel_table;

/* Creates a reader. `schema`/`schema_length` optionally give the schema
 * once, as Arrow IPC bytes whose first message is a Schema (an encapsulated
 * Schema message, or the start of a stream): partitions may then be bare
 * RecordBatch messages, and a read whose partitions are all empty gives an
 * empty table of that schema. The bytes are copied; the caller may free
 * them on return. Without a schema (NULL, 0), the first partition that holds
 * one defines it. */
FUNNEL_API funnel_status funnel_reader_create(struct funnel_device *dev,
                                              const void *schema,
                                              size_t schema_length,
                                              struct funnel_reader **out,
                                              struct funnel_error *error);

/* Frees a reader. Reads other threads are making through it finish first
 * (the call waits for them); then the work queued on its own stream
 * completes: tables it made stay valid, and ones still in flight finish. A
 * read that begins after the free has begun is a use after free. NULL is a
 * no-op. */
FUNNEL_API void funnel_reader_free(struct funnel_reader *reader);

/* How a read moves partition bytes to the device (FUNNEL_OPTION_TRANSFER). */
enum funnel_transfer {
  /* When every partition lies in the pinned pool: COPY, with the copies
   * enqueued before the partitions are parsed, so they fly while the host
   * parses and plans. Otherwise, by size: DIRECT when the pinned partitions
   * total at most 8 MiB (FUNNEL_OPTION_DIRECT_MAX_BYTES), COPY above. */
  FUNNEL_TRANSFER_AUTO = 0,
  /* every partition is copied to device memory (partitions that lie back to
   * back in pinned memory go up in one copy), then the kernel runs; all in
   * the pinned pool: copied before parsing, as AUTO does */
  FUNNEL_TRANSFER_COPY = 1,
  /* the kernel reads partitions that lie in the pinned pool straight from
   * host memory: no copy at all for them (others are still copied) */
  FUNNEL_TRANSFER_DIRECT = 2
};

/* Where a read parses the partitions' IPC headers (FUNNEL_OPTION_PARSE). */
enum funnel_parse {
  /* DEVICE for many small partitions (at least 128, or 64 of at most 16
   * KiB on average, or 48 of LZ4 or ZSTD bodies the device decodes, of at
   * most 256 KiB on average, 16 KiB for ZSTD ones), HOST otherwise; the
   * default unless FUNNEL_PARSE=host|device in the environment when the
   * device opened says otherwise */
  FUNNEL_PARSE_AUTO = 0,
  /* the host parses and plans every partition, then the copies and one
   * concat launch follow: no wait inside the read */
  FUNNEL_PARSE_HOST = 1,
  /* the partitions go up as raw bytes and the device parses them: no host
   * work per partition. The output is allocated from an upper bound of its
   * size (at most about twice the partitions' bytes; the table's buffers
   * lie in it), the device lays it out from its own sums, and the parse and
   * the concat are enqueued at once; the read then waits once inside, for
   * the sums that give the table's shape (stats.syncs_in_read is 1), while
   * the concat runs, and returns. The device takes partitions that repeat the read's Schema
   * message byte for byte (or have none) and hold at most one RecordBatch;
   * any other partition, and any partition the device finds malformed,
   * sends the whole read to the host path (stats.device_left), which gives
   * the same table or the same error as HOST. Without the reader's schema,
   * the first non-empty partition's gives it. Compressed partitions: LZ4_FRAME
   * or ZSTD bodies (one codec a read: the first batch's; a partition of the
   * other sends the read to the host path), when the device may decode them (FUNNEL_OPTION_DECODE not
   * HOST), go up compressed and the device reads every buffer's prefix,
   * then the read waits for the size of the decoded buffers (a second wait:
   * stats.syncs_in_read is 2), allocates them and the output (without room
   * for both, it takes the host path), and the device decodes every frame
   * and parses as above. AUTO takes the device path for a read of ZSTD
   * bodies of at most 16 KiB a partition on average (a warp decodes a ZSTD
   * frame at about 8 MB/s). */
  FUNNEL_PARSE_DEVICE = 2
};

/* Where a read decodes compressed record batch bodies (FUNNEL_OPTION_DECODE).
 * The host threads decode every buffer with liblz4 and libzstd, into the
 * pinned pool, from where it goes up; the device can decode LZ4_FRAME and
 * ZSTD buffers, so the link carries fewer bytes. A read by the device path
 * (FUNNEL_OPTION_PARSE) decodes its LZ4 or ZSTD bodies there. A read by the host path
 * decodes there the buffers whose bytes the host does not read (the values
 * and string bytes; validity bitmaps and offsets are read by the read's
 * checks and decoded on the host): their frames go up compressed and a
 * kernel expands them; it waits once inside, for the decoder's statuses,
 * before it launches the concat (stats.syncs_in_read counts it), and a
 * buffer the device could not decode is decoded again on the host, which
 * names what is wrong with it. The device verifies an LZ4 frame's block
 * and content checksums and its descriptor's checksum byte when it
 * decodes the frame whole (the device path always; the host path unless a
 * frame of several independent blocks is decoded a block a warp, whose
 * content checksum then goes unverified); the host threads verify them
 * all (liblz4). The device verifies a ZSTD frame's content checksum
 * (XXH64) when it has one, and refuses a frame with a dictionary or a
 * window over 128 MiB (libzstd's default limit), which the host then
 * decodes or names. */
enum funnel_decode {
  /* On a device backend (cuda): a read by the device path (many small
   * partitions) decodes its LZ4 or ZSTD bodies on the device. The host path
   * decodes there, codec by codec, LZ4 or ZSTD values of a read with at
   * least 8 MiB of them when the device looks faster (a warp decodes a
   * buffer, or an LZ4 frame's independent block: a few long buffers
   * decode faster on the host threads, many on the device), on the host
   * threads otherwise. On the cpu backend: HOST. The default unless
   * FUNNEL_DECODE=host|device in the environment when the device opened
   * says otherwise */
  FUNNEL_DECODE_AUTO = 0,
  FUNNEL_DECODE_HOST = 1,
  /* every LZ4 and ZSTD value buffer of the read (the cpu backend runs the same
   * decoder on its stream: for tests). On the host path the frames and the
   * decoder's jobs need a block of the pinned pool; without room for it
   * the host threads decode every buffer, as HOST (stats.device_decoded
   * 0), and the read goes on. */
  FUNNEL_DECODE_DEVICE = 2
};

enum funnel_option {
  FUNNEL_OPTION_TRANSFER = 1,    /* an enum funnel_transfer; default AUTO */
  FUNNEL_OPTION_TIME_KERNEL = 2, /* 1: time the concat on the device with a
                                    pair of events (stats.kernel_ns); 0: not
                                    (the default; timing events cost a little) */
  FUNNEL_OPTION_SHAREABLE = 3,   /* 1: allocate each table's buffers so that
                                    funnel_table_share shares them as they are,
                                    without a copy (cuda: cuMemAlloc, which CUDA
                                    IPC can share and funnel's stream-ordered
                                    pool cannot, at the price of a plain
                                    allocation per read; cpu: a POSIX shared
                                    memory object); 0: not (the default) */
  FUNNEL_OPTION_DIRECT_MAX_BYTES = 4, /* FUNNEL_TRANSFER_AUTO reads pinned
                                    partitions in place when they total at
                                    most this many bytes (>= 0); default:
                                    FUNNEL_DIRECT_MAX_BYTES in the environment
                                    when the device opened, else 8 MiB */
  FUNNEL_OPTION_PARSE = 5,       /* an enum funnel_parse; default AUTO */
  FUNNEL_OPTION_DECODE = 6       /* an enum funnel_decode; default AUTO */
};

/* Sets a reader option for the reads that follow. Not to be called while
 * another thread reads through the same reader. */
FUNNEL_API funnel_status funnel_reader_set_option(struct funnel_reader *reader, int option,
                                                  int64_t value, struct funnel_error *error);

/* One shuffle partition in host memory: Arrow IPC streaming-format bytes,
 * either a whole stream (Schema message, RecordBatch messages, optional
 * end-of-stream marker) or bare RecordBatch messages when the reader has the
 * schema. Several streams may follow each other in one partition (merged
 * spills), their schemas equal; the IPC file format ("ARROW1" ... footer)
 * is read as the stream it contains; legacy framing (no 0xFFFFFFFF marker)
 * is accepted. A zero-length partition is an empty shuffle block: no rows. */
struct funnel_partition {
  const void *data;
  size_t length;
};

/* Reads `count` partitions, in order, into one table, asynchronously.
 *
 * `stream` is 0 (the reader's own stream) or a live stream handle of the
 * reader's device (funnel_device_stream_create/wrap), else
 * FUNNEL_ERR_INVALID_ARGUMENT ("stream 4660 is not a live stream of this
 * device", "... belongs to another device"); it stays alive while the read
 * enqueues (funnel_stream_destroy waits).
 *
 * The host path (FUNNEL_OPTION_PARSE): parses and plans on the calling
 * thread (no device call), then enqueues on the stream at most one
 * host-to-device copy per run of partitions (partitions back to back in
 * pinned memory go up in one copy; a large staged read adds up to 16, one
 * per staging round), one copy of the segment table and one concat launch,
 * records an event and returns without waiting. The device path (AUTO's
 * choice for many small partitions) enqueues the same copies, one small
 * upload, the parse and the concat, then WAITS once, on an event recorded
 * on the stream after the parse, for its sums (so also for whatever was
 * enqueued on that stream before the read: a caller's stream must not hold
 * work that waits on something the caller does after the read returns),
 * and returns while the concat runs. On cuda, partitions that are not in the pinned pool are
 * first copied into it (staging) by the calling thread and the shared host
 * threads, in rounds, each round's bytes going up while the next is
 * staged. String offsets and null counts (against the validity bits) are
 * checked on the host threads while the copies run.
 *
 * Async contract: the memory of every partition (and the `parts` array is
 * copied, so only the bytes it points to) must stay valid and unchanged
 * until funnel_table_wait has returned for the table, or the table has been
 * freed. funnel enforces it for partitions in the caller's pinned blocks
 * (funnel_device_pinned_alloc, of this device or another): the table holds
 * each such block, and
 * funnel_device_pinned_free of it waits for the table's work; pageable
 * memory is the caller's to keep. On failure nothing the read enqueued is
 * still running (a bad
 * string offset is found while the copies run; the read waits for them
 * before it returns the error): the partitions may be released at once.
 *
 * On success *out is a table the caller frees with funnel_table_free. Its
 * shape (rows, columns, null counts, sizes) is known at once; its buffers
 * hold the data only after funnel_table_wait. */
FUNNEL_API funnel_status funnel_reader_read_async(
    struct funnel_reader *reader, const struct funnel_partition *parts,
    size_t count, uintptr_t stream, struct funnel_table **out,
    struct funnel_error *error);

/* ----------------------------------------------------------------- table */

struct funnel_table;

/* Blocks until the table's copies and concat have completed. After it
 * returns FUNNEL_OK, the read's partitions may be released (the pinned
 * blocks it held are let go) and the column buffers hold the data.
 * Idempotent; any thread. */
FUNNEL_API funnel_status funnel_table_wait(struct funnel_table *table,
                                           struct funnel_error *error);

/* 1 when the work of the read has completed, 0 while it is in flight. Never
 * blocks. */
FUNNEL_API int funnel_table_is_ready(struct funnel_table *table);

FUNNEL_API int64_t funnel_table_num_rows(const struct funnel_table *table);
FUNNEL_API int funnel_table_num_columns(const struct funnel_table *table);

/* Describes column `index`. Valid at once; the buffers hold data only after
 * funnel_table_wait. */
FUNNEL_API funnel_status funnel_table_column(const struct funnel_table *table,
                                             int index,
                                             struct funnel_column *out,
                                             struct funnel_error *error);

/* The schema of the table as an encapsulated Arrow IPC Schema message
 * (the bytes the schema came in). Valid until the table is freed. */
FUNNEL_API const void *funnel_table_schema_ipc(const struct funnel_table *table,
                                               size_t *length);

/* Where a column is copied back to: host pointers of at least the sizes of
 * the column's buffers (funnel_table_column); NULL skips that buffer. */
struct funnel_host_column {
  void *validity;
  void *offsets;
  void *data;
};

/* Copies every column back to host memory, in one pass (every size is known
 * from the plan), and waits for the copy. Waits for the read first.
 * `columns` has funnel_table_num_columns entries. */
FUNNEL_API funnel_status funnel_table_copy_to_host(
    struct funnel_table *table, const struct funnel_host_column *columns,
    struct funnel_error *error);

/* Part of one buffer of one column, `length` bytes from byte `offset`, to
 * host memory at `dst`. */
struct funnel_host_range {
  int column;
  int buffer; /* an enum funnel_buffer_kind */
  int64_t offset;
  int64_t length;
  void *dst;
};

/* Copies `count` ranges back to host memory in one pass and waits for the
 * copy (after the read). For a look at the first rows of a large table
 * without copying all of it back: validity and offsets of the first rows
 * first, then the string bytes those offsets cover. A range outside its
 * buffer is FUNNEL_ERR_INVALID_ARGUMENT naming it; nothing is copied then. */
FUNNEL_API funnel_status funnel_table_copy_ranges_to_host(
    struct funnel_table *table, const struct funnel_host_range *ranges, size_t count,
    struct funnel_error *error);

/* What a read did, counted from the calls actually made. */
struct funnel_read_stats {
  int64_t partitions;        /* partitions given */
  int64_t empty_partitions;  /* zero-byte partitions (empty shuffle blocks) */
  int64_t batches;           /* RecordBatch messages read */
  int64_t rows;
  int64_t columns;
  int64_t column_sets;       /* groups of columns concatenated by one launch */
  int64_t segments;          /* entries of the segment table */
  int64_t h2d_copies;        /* host-to-device copies enqueued */
  int64_t bytes_h2d;         /* bytes those copies moved */
  int64_t concat_launches;
  int64_t device_allocs;     /* device allocations made by the read */
  int64_t pinned_allocs;     /* pinned host allocations made by the read */
  int64_t syncs_in_read;     /* stream/context synchronizations inside read */
  int64_t device_calls_parse; /* backend calls made while parsing */
  int64_t device_calls_plan;  /* backend calls made while planning */
  int64_t device_calls_submit;/* backend calls made while submitting */
  int64_t bytes_out;         /* bytes of the result's buffers */
  int64_t parse_ns;          /* host time of each phase */
  int64_t plan_ns;
  int64_t submit_ns;
  int64_t staged_partitions; /* pageable partitions copied into the pinned pool first */
  int64_t bytes_staged;
  int64_t direct_partitions; /* partitions the kernel read straight from pinned memory */
  int64_t bytes_direct;
  int64_t kernel_ns;         /* device time of the concat (FUNNEL_OPTION_TIME_KERNEL), else -1 */
  int64_t device_parsed;     /* partitions whose headers the device parsed (FUNNEL_PARSE_DEVICE) */
  int64_t device_left;       /* of those, partitions it left to the host, which then read them all */
  int64_t compressed_partitions; /* partitions with a compressed (LZ4_FRAME, ZSTD) body */
  int64_t bytes_compressed;  /* their compressed buffers' bytes */
  int64_t bytes_decoded;     /* the bytes those decoded to (with their batches' other bodies) */
  int64_t decode_ns;         /* host time decoding them (on the host threads), within parse_ns;
                                0 on the device path */
  int64_t decoded_pinned;    /* 1 when they were decoded into the pinned pool (one copy up),
                                0 into host memory of their own (staged like a pageable partition) */
  int64_t device_decoded;    /* buffers the device decoded (FUNNEL_OPTION_DECODE) */
  int64_t bytes_device_decoded; /* the bytes they decoded to */
  int64_t overlap_parts;     /* device path: the parts its partitions were parsed in while
                                the later parts were copied (0: parsed after the copy); a
                                read the device left to the host path: its attempt's. A read
                                of compressed bodies in parts (from 8 MiB of partitions back
                                to back in the pinned pool) decodes each part once it is
                                parsed, into room guessed as a read in one go does, before
                                it waits for the first pass (decode_waits 1), unless the
                                guess would be over 4 times the bytes; when the room falls
                                short, the decoder runs again after the wait */
  int64_t decode_waits;      /* device path, compressed bodies: its waits before its decoder was
                                enqueued: 0 when both passes went in one go (a read of up to
                                4 MiB, from a guess of the decoded bytes), or when it parsed
                                once (every buffer raw); 1 when it waited for the first
                                pass's sizes (a larger read, or a small one after a read with
                                no frame whose first partition holds one), 2 when it went in
                                one go, found the first pass had left a partition or decoded
                                more than the guess (nothing after it ran), and waited for the
                                first pass then, or guessed it held no frame, parsed once,
                                found one and made the two passes after */
};

FUNNEL_API funnel_status funnel_table_stats(const struct funnel_table *table,
                                            struct funnel_read_stats *out,
                                            struct funnel_error *error);

/* Frees the caller's handle to the table: waits for the table's work if it
 * is still in flight (the partitions may be released on return), and for
 * the calls on the table other threads have begun (copies back above all:
 * nothing is freed under them), then frees its device memory, unless an
 * export (funnel_table_export_device) or a share still holds it: the
 * memory then goes with the last of them. A call on the table that begins
 * after the free has begun is a use after free. NULL is a no-op. */
FUNNEL_API void funnel_table_free(struct funnel_table *table);

/* ----------------------------------------- Arrow C Device Data Interface */

/* The structures of the Arrow C Data Interface and C Device Data Interface
 * (https://arrow.apache.org/docs/format/CDeviceDataInterface.html), as the
 * specification defines them, under its include guards so that a consumer
 * that has them from elsewhere (Arrow C++, nanoarrow, dlpack-style headers)
 * keeps its own. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char *format;
  const char *name;
  const char *metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema **children;
  struct ArrowSchema *dictionary;
  void (*release)(struct ArrowSchema *);
  void *private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void **buffers;
  struct ArrowArray **children;
  struct ArrowArray *dictionary;
  void (*release)(struct ArrowArray *);
  void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_DEVICE_DATA_INTERFACE
#define ARROW_C_DEVICE_DATA_INTERFACE

#define ARROW_DEVICE_CPU 1
#define ARROW_DEVICE_CUDA 2
#define ARROW_DEVICE_CUDA_HOST 3

typedef int32_t ArrowDeviceType;

struct ArrowDeviceArray {
  struct ArrowArray array;
  int64_t device_id;
  ArrowDeviceType device_type;
  void *sync_event;
  int64_t reserved[3];
};

#endif /* ARROW_C_DEVICE_DATA_INTERFACE */

/* Exports the table, without copying it, as a struct array (one child per
 * top-level column, the table's rows as its length; a nested column's
 * children are its children arrays, as Arrow lays them out) into the
 * caller's `array`, and optionally its schema (a "+s" struct, one child
 * field per top-level column, nested ones with their children: "+l",
 * "+L", "+w:n", "+s", "+m"; names, types, nullability and a map's sorted
 * keys as read) into `schema` (NULL: not wanted).
 *
 * cuda: device_type ARROW_DEVICE_CUDA, device_id the CUDA device ordinal,
 * buffers are device addresses; sync_event points to a CUevent recorded
 * after the read's concat, on which the consumer waits (cuStreamWaitEvent)
 * before it reads, or is NULL when the read has completed. cpu backend:
 * ARROW_DEVICE_CPU, device_id -1, sync_event NULL (the export waits for
 * the read first: a CPU consumer has no event to wait on).
 *
 * The export holds the table (and its device) until the consumer calls
 * array->release: the table's buffers stay valid after funnel_table_free
 * and funnel_device_close, and are freed by the last of the release and
 * funnel_table_free. Children, at any depth, may be moved out and released
 * on their own (each holds the table too, and its own children). The schema holds nothing of the table. A
 * column with no nulls has a NULL validity buffer. */
FUNNEL_API funnel_status funnel_table_export_device(struct funnel_table *table,
                                                    struct ArrowDeviceArray *array,
                                                    struct ArrowSchema *schema,
                                                    struct funnel_error *error);

/* ----------------------------------------------------- sharing (CUDA IPC) */

/* Sharing a table with other processes on the same host (not to
 * be confused with funnel_table_export_device, which hands a table to a
 * consumer in this process): its buffers in memory other processes can open
 * (cuda: one cuMemAlloc allocation shared with cuIpcGetMemHandle; cpu
 * backend: one POSIX shared memory object), the table's own when it was
 * read with FUNNEL_OPTION_SHAREABLE, else a copy, and a self-describing
 * descriptor (bytes) that another process passes to funnel_table_import.
 *
 * Descriptor (little-endian, every field 8-byte aligned; version 1):
 *   "FNLTBL01" magic; u32 version; u32 backend (1 cpu, 2 cuda);
 *   u8[16] device UUID; i64 sharing pid; char[64] control block name;
 *   i64 rows; i32 columns; i32 allocations; i32 has_event; u32 0;
 *   u8[64] interprocess event handle (cuda; zeros when none);
 *   allocations x { u8[64] handle of the allocation base; i64 size };
 *   i64 schema length; the schema as an encapsulated Arrow IPC Schema
 *   message, padded to 8 bytes;
 *   columns x { i64 null count; 3 x { i32 allocation (-1: absent); u32 0;
 *   i64 offset; i64 length } (validity, offsets, data) }.
 *
 * The protocol that keeps the memory alive: the sharing process creates a
 * control block (POSIX shared memory, named in the descriptor) with one
 * slot per importer. funnel_table_import claims a slot (its pid and start
 * time) before it opens the memory, funnel_table_free of the imported table
 * gives the slot back after it has closed the memory. funnel_share_close
 * first withdraws the share (no new imports), then waits until no slot is
 * held, and only then frees the memory. An importer that dies without
 * closing is noticed (its pid is gone, or a new process has its pid) and
 * its slot reclaimed, by funnel_share_importers and funnel_share_close: its
 * mappings died with it. If the sharing process dies, its memory is freed
 * by the driver (cpu: the shared memory objects stay in /dev/shm until
 * removed); importers must not rely on their buffers after that, which
 * they cannot observe: sharing is for processes of one job. */
struct funnel_share;

/* Shares `table` (waits for its read first). A table read with
 * FUNNEL_OPTION_SHAREABLE is shared as it is, and the share holds it until
 * closed (funnel_table_free may come first); any other table is copied once
 * into shareable memory. Up to FUNNEL_SHARE_SLOTS importers may hold it at
 * once. Fails for an imported table (share the original), and with
 * FUNNEL_ERR_UNSUPPORTED on a backend that cannot share. */
#define FUNNEL_SHARE_SLOTS 64
FUNNEL_API funnel_status funnel_table_share(struct funnel_table *table,
                                            struct funnel_share **out,
                                            struct funnel_error *error);

/* The descriptor: valid until the share is closed. */
FUNNEL_API const void *funnel_share_descriptor(const struct funnel_share *share,
                                               size_t *length);

/* Importers holding the share now; importers that died are reclaimed. */
FUNNEL_API int funnel_share_importers(struct funnel_share *share);

/* Withdraws the share (later imports fail), waits up to `timeout_ms`
 * (< 0: without limit) for its importers to close, then frees it. On
 * FUNNEL_ERR_IN_USE importers still hold it: the share stays (withdrawn)
 * and is to be closed again. NULL is a no-op. */
FUNNEL_API funnel_status funnel_share_close(struct funnel_share *share, int64_t timeout_ms,
                                            struct funnel_error *error);

/* Opens a table another process shared, as a read-only table of this
 * process: its columns point into the sharing process's memory,
 * funnel_table_wait waits for that process's copy, and funnel_table_free
 * closes it and tells that process. A table shared from another GPU of the
 * host is opened in place when this device has peer access to that one
 * (cuDeviceCanAccessPeer; NVLink or PCIe): its buffers stay on the sharing
 * GPU, and this device reads them over the link between the two. Fails with
 * FUNNEL_ERR_MALFORMED for bytes that are not a descriptor (naming the
 * offset), FUNNEL_ERR_INVALID_ARGUMENT when opened on another backend, on
 * a device with no peer access to the sharing one or one this process does
 * not see (the message names both devices), or in the sharing process
 * itself, and FUNNEL_ERR_IN_USE when the share was withdrawn or has no free
 * slot. */
FUNNEL_API funnel_status funnel_table_import(struct funnel_device *dev, const void *descriptor,
                                             size_t length, struct funnel_table **out,
                                             struct funnel_error *error);

#ifdef __cplusplus
}
#endif

#endif /* FUNNEL_H */
