/* tuning.h: every tuning constant of funnel, each with the measurement (or
 * the reason) that chose it. Plain C that nvcc compiles too. The
 * environment overrides some of them once, when a device opens
 * (device.c: struct funnel__config). */
#ifndef FUNNEL_TUNING_H
#define FUNNEL_TUNING_H

#include <stdint.h>

/* Alignment of every device allocation, pool block and output buffer: a
 * cache line and Arrow's recommended alignment, so the kernel copies in
 * 16-byte words; the pool rounds every block up to it. */
#define FUNNEL__ALIGN 64

/* Pieces larger than this are cut into segments of this size, so that one
 * launch spreads them over many blocks of the kernel (a block runs a
 * segment). H100, 2026-11-23 (bench/RESULTS.md): 2 x 10 x 1M int64 ran its
 * kernel in 0.139 ms (84% of a d2d copy of the result) at 64 KiB, 0.145 at
 * 256 KiB and 0.284 at 1 MiB, where 150 blocks could not fill 132 SMs.
 * Override: FUNNEL_SEGMENT_CHUNK_BYTES. */
#define FUNNEL__SEGMENT_CHUNK_BYTES ((int64_t)64 << 10)
/* The most the override may ask for: a segment counts its bits in 32 bits
 * (segment.h), and 8 x 256 MiB + 1 bits fit. */
#define FUNNEL__SEGMENT_CHUNK_MAX ((int64_t)256 << 20)

/* The cuda concat launch: threads a block, and the most blocks (they
 * stride over the segments beyond). Not measured: a common block size. */
#define FUNNEL__CONCAT_THREADS 256
/* The device path's kernels (dpath.h): threads a block, also the tile of
 * the scan (concat.cu's launch bounds say the same) */
#define FUNNEL__DPATH_THREADS 256
/* FUNNEL_PARSE_AUTO takes the device path for at least this many
 * partitions of at most FUNNEL__DPATH_MAX_AVG bytes on average: below, the
 * host parses faster than the device path's one wait; above, the pieces
 * are large enough for the host path's chunked segments, which spread a
 * large piece over many blocks where the device path gives it one block's
 * FUNNEL__DP_CONCAT_MAX_LANES lanes at most (a warp once its pieces are
 * 2,048 or more) */
#define FUNNEL__DPATH_MIN_PARTS 128
/* ... and from this many of at most FUNNEL__DPATH_SMALL_AVG bytes on
 * average: the host path's cost grows with the partitions and their
 * columns, the device path's barely, so small partitions pay for the wait
 * sooner. The crossover on the H100 (ci/gpu-grids crossover, session 62,
 * the device path forced against the host path forced, plain, pinned and
 * pageable): partitions of 2.7 to 9.7 KB (10x27 and 4x100, mixed and
 * strings) took 0.55 to 0.84 of the host path's time at 64 and 0.44 to
 * 0.77 at 96, where AUTO had taken the host path; at 48 one shape was
 * still slower (4x100 strings pinned, 1.25), at 32 several (up to 1.02);
 * partitions of 35 KB (10x625 mixed) were still faster on the host at 96
 * (pinned 1.31), and cross at 128 (0.50). With this threshold, the same
 * small reads at 64 and 96 partitions took 0.27 to 0.97 of the host
 * path's time (geomean pinned 0.57, pageable 0.63; bench/RESULTS.md). */
#define FUNNEL__DPATH_MIN_PARTS_SMALL 64
#define FUNNEL__DPATH_SMALL_AVG ((int64_t)16 << 10)
/* ... and of this many of LZ4 bodies the device decodes (dread.c): the
 * host path's decoding into images costs more a partition than its plain
 * parse. Measured on the H100 host (bench/RESULTS.md, session 30; lz4-java
 * frames, the device path forced against the host path forced, ms):
 * 16x8x1000 mixed 0.38 against 0.24, 50x10x2000 strings 1.50 against
 * 1.86, 64x10x5000 mixed 1.74 against 1.96, 100x10x500 mixed 0.31 against
 * 0.54 */
#define FUNNEL__DPATH_MIN_PARTS_LZ4 48
/* A device-path read of at most this many bytes of partitions makes one
 * device allocation for its partitions, its tables and its output, freed
 * with the output (funnel__dpath_reserve): two allocations and two frees
 * fewer a read (about 2 us each allocation on the H100 host), for inputs
 * held until the table is freed instead of until its wait. Small, so that
 * a consumer keeping many tables (a plugin's batches) holds little more:
 * a read of 2 MiB takes 40 us on the link, where 4 us still count. A read
 * of compressed bodies in one go whose decoded buffers are guessed at most
 * this many bytes makes one allocation for its tables, decoded buffers and
 * output alike (dread.c, alloc_z_block); one that guesses it holds no
 * frame (every buffer raw) is laid out as a plain read is, in one with
 * its partitions, or (over this many bytes, up to
 * FUNNEL__LZ4_ONE_GO_MAX_BYTES) its tables and output in one. */
#define FUNNEL__ONE_BLOCK_MAX_BYTES ((int64_t)2 << 20)
/* A device-path read of LZ4 bodies of at most this many bytes of
 * partitions makes both its passes in one go (dpath.h, dread.c), its
 * decoded buffers and output allocated from a guess: no wait for the first
 * pass's sizes (a wait, allocations, two copies and the launches after, on
 * the read's critical path: 13% of a read of 200 or 1,000 partitions
 * pinned, 6% pageable, on the H200 host), for up to half the decoded bytes
 * again, and an eighth of the partitions' bytes, held as room. Larger
 * reads wait: the wait is a small part of them (0.95 to 0.99 of the time
 * at 1,000x10x100), and the room would not be. */
#define FUNNEL__LZ4_ONE_GO_MAX_BYTES ((int64_t)4 << 20)
/* ... and whose guess of its decoded bytes is at most this many times its
 * partitions' bytes (the room is held with the table's output) */
#define FUNNEL__LZ4_ONE_GO_MAX_RATIO 4
/* AUTO reads LZ4 bodies of partitions over FUNNEL__DPATH_MAX_AVG on average
 * by the device path (dread.c) unless they are fewer than this many (not
 * counting empty ones) and their frames are of independent blocks of at
 * most FUNNEL__LZ4_SPLIT_BLOCK_MAX, which the host path decodes a block a
 * job where the device path takes a buffer a job. Measured on the H100
 * (bench/RESULTS.md, session 56): 64x10x15k in lz4-java's frames (64 KiB
 * blocks) took the device path 1.19 to 1.55 times the host path's time,
 * in Arrow Java's (4 MiB) 0.82 to 0.91; reads of 200 partitions and more
 * 0.47 to 0.89 in either */
#define FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS 128
#define FUNNEL__LZ4_SPLIT_BLOCK_MAX ((int64_t)256 << 10)
#define FUNNEL__DPATH_MAX_AVG ((int64_t)256 << 10)
/* ... and of ZSTD bodies, of at most this many bytes a partition on
 * average: a warp decodes a frame at about 8 MB/s (FUNNEL__DEVICE_ZSTD_WARP_BPS
 * below), so a read waits on its longest buffer, where the host path's
 * threads decode at 0.5 GB/s each. Spark's partitions (10 to 100 rows)
 * are a few KiB; before this limit the device path took no ZSTD body and
 * such reads spent 2 to 10 times the LZ4 ones' time on the host path
 * (H200, 50000x4x1 mixed: 12.5 ms against 1.2). Not tuned finely. */
#define FUNNEL__DPATH_MAX_AVG_ZSTD ((int64_t)16 << 10)
/* The device path keeps 40 bytes a (partition, column) piece on the device
 * (dread.c): above this many pieces (640 MiB of them) a read takes the
 * host path, which keeps none; a read of LZ4 bodies as many jobs of 48
 * bytes, a (partition, buffer) each */
#define FUNNEL__DPATH_MAX_PIECES ((int64_t)1 << 24)
/* The cuda parse gives a partition a warp while the read's partitions
 * take at most FUNNEL__DP_PARSE_THREADS threads that way (256 blocks, two
 * an SM of the H100), then half the lanes each time the partitions
 * double, down to FUNNEL__DP_PARSE_MIN_LANES (dpath.h,
 * funnel__dp_parse_lanes): a warp's lanes shorten a partition's chain of
 * loads while the device has room for them; past that, the groups must
 * fill it. Measured on the H100 with ncu (mixed, the parse with the
 * read's template, us for 32, 16, 8, 4, 2 and 1 lanes): 1000x10x10 22, 24,
 * 27, 29, 42, 73; 10000x4x1 50, 42, 38, 36, 39, 47; 10000x10x10 87, 76,
 * 74, 75, 84, 114; 50000x4x1 193, 132, 125, 119, 125, 137; 50000x10x10
 * 337, 295, 292, 302, 319, 352. */
#define FUNNEL__DP_PARSE_THREADS ((int64_t)1 << 16)
#define FUNNEL__DP_PARSE_MIN_LANES 8
/* A parse of the whole read, of this many partitions or fewer, scans its
 * sums and lays the output out in its last block to finish (each thread
 * FUNNEL__DP_PARSE_SCAN_MAX / FUNNEL__DPATH_THREADS values at most),
 * where a FUNNEL_DP_SCAN launch would follow. On the H100 (interleaved
 * A/B, pinned, funnel_device, with a limit of 4,096): 1000x4x1 and
 * 1000x10x10 mixed 4 to 6% faster; 2000x4x1 no different; 4000x4x1
 * strings 12% slower, its last block's scan of 16 values a thread against
 * the scan kernel's 16 blocks. */
#define FUNNEL__DP_PARSE_SCAN_MAX 1024

/* The device path's concat copies a piece of fixed-width values whose
 * output is 16-byte aligned in 16-byte words from this many 8-byte words
 * of it (dpath.h, dp_copy); shorter ones, 8 bytes at a time. The kernel
 * alone on the H100 (session 48, bench/RESULTS.md): 16-byte words for
 * every such piece made 10000x4x100 mixed 36.7 -> 28.8 us and 50000x4x100
 * mixed 139.0 -> 125.5, but pieces of 27 rows slower (50000x10x27 mixed
 * 171.6 -> 188.6, 10000x10x27 mixed 32.4 -> 36.5); from 48 words the
 * first two kept their gain and the others lost none. Flat reads with
 * string columns run a kernel held to 48 registers, which spilled more
 * with the 16-byte copies (1% to 3% slower): it copies 8 bytes at a time. */
#define FUNNEL__DP_COPY_PAIRS_MIN 48

/* The device path parses a read's partitions while they are copied, when
 * they go up as one copy of their span from the pinned pool (transfer.c,
 * early copies): the first half of them goes up at once, the rest after
 * the table the parse reads (one copy engine takes the copies in turn, so
 * that table must not queue behind the bytes), in OVERLAP_PIECES pieces
 * (fewer when it has fewer tiles of the parse); the parse of each part, on
 * a stream of its own, runs as soon as its bytes are there, and the next
 * part's bytes are copied meanwhile. Only for reads of OVERLAP_MIN_PARTS
 * partitions and OVERLAP_MIN_BYTES bytes and more: below, the parse is too
 * short to pay for the parts' waits, or the first half's copy too short
 * to cover the host's work on the table, while which the link then idles
 * (H100, pinned, ms without -> with, the copy started before the pass
 * over the partitions: 10000x4x1 mixed (7 MB) 0.209 -> 0.196, 10000x4x10
 * mixed 0.252 -> 0.239, 10000x10x1 mixed 0.358 -> 0.349; but 1000x10x10
 * mixed 0.091 -> 0.114, 1000x10x100 mixed 0.201 -> 0.246, 1000x4x100
 * strings 0.245 -> 0.251; from 12 MiB, before the copy went first:
 * 50000x10x27 mixed 3.52 -> 3.19, strings 8.17 -> 7.74, 10000x10x10 mixed
 * 0.526 -> 0.519: bench/RESULTS.md, session 32). */
#define FUNNEL__OVERLAP_MIN_PARTS 4096
#define FUNNEL__OVERLAP_MIN_BYTES ((int64_t)4 << 20)
#define FUNNEL__OVERLAP_PIECES 4
/* ... and, as large, while they are staged (pageable, into one pinned
 * block: transfer.c's rounds), in a part a round up to this many parts of
 * about as many partitions each, a part launched once the round that
 * completes it is copied (dread.c). */
#define FUNNEL__STAGED_PARSE_PARTS 8
/* A device-path read of compressed bodies of this many bytes of
 * partitions or more, from one copy of their span in the pinned pool
 * (transfer.c's early copies), decodes while it is copied: in
 * FUNNEL__ZOVERLAP_PARTS parts of about as many partitions each, each
 * part's first pass (its buffers' jobs) launched on the reader's second
 * stream once its bytes are there, and its jobs decoded on a stream of
 * their own (a part's decoding lasts as long as its longest job, so the
 * parts' must not queue behind one another), into room made from a guess
 * before the first pass (dread.c). Below it, a read makes both passes in
 * one go (FUNNEL__LZ4_ONE_GO_MAX_BYTES) or is too short for the parts'
 * waits to pay. FUNNEL_ZOVERLAP_MIN_BYTES sets it when the device opens,
 * and FUNNEL_ZOVERLAP_PARTS the parts (2 to FUNNEL__ZOVERLAP_MAX_PARTS).
 * 4 parts: 1000x10x4k mixed LZ4 pinned on the H100 0.74 of the time (5.05
 * -> 3.72 ms, bench/RESULTS.md, session 54); other counts not measured. */
#define FUNNEL__ZOVERLAP_PARTS 4
#define FUNNEL__ZOVERLAP_MAX_PARTS 8
#define FUNNEL__ZOVERLAP_MIN_BYTES ((int64_t)8 << 20)

/* A read of this many partitions or more starts the copy of their span
 * before its pass over them (reader.c; transfer.c, funnel__guess_scan):
 * the pass takes 2 to 3 ns a partition on the H100 host (22 us for
 * 10,000, 164 us for 50,000), with the link idle meanwhile. Below, the
 * pass costs less than a guess gone wrong would. */
#define FUNNEL__GUESS_MIN_PARTS 2048
/* the pairs of neighbours the guess checks on the way */
#define FUNNEL__GUESS_SAMPLES 8

/* A batch of at most this many rows is bound by the cuda parse a lane a
 * column (dpath.h, dp_batch_values), not a column at a time by the whole
 * warp: Spark's small partitions have tens of rows and ten or so columns,
 * each column a chain of dependent loads. */
#define FUNNEL__DP_LANE_COLUMN_ROWS 64
/* A batch of at most this many rows, of a read of flat columns (plain, or
 * the second pass of a compressed one), that matches the read's template
 * is bound by the short path (dpath.h, funnel__dp_parse_short): a lane a
 * column, each lane's loop over its validity's bytes at most this many
 * rows long (a compressed read's first pass binds nothing: any rows).
 * Spark's batches of 10 to 100 rows; not tuned (a longer batch goes to
 * the general parse, whose lanes split its rows). */
#define FUNNEL__DP_FAST_ROWS 128

/* The device path's template of a read (dpath.h, struct
 * funnel__dp_template): the bytes of a batch's metadata besides its field
 * nodes and buffers that it has room for (Arrow Java writes about 100);
 * and how many of the first non-empty partitions are tried for one. */
#define FUNNEL__DP_TEMPLATE_SLACK 512
#define FUNNEL__DP_TEMPLATE_TRIES 4
#define FUNNEL__CONCAT_MAX_BLOCKS 65535
/* The device path's concat takes up to this many threads (a group of
 * lanes a piece, dread.c's concat_lanes) while a piece has lanes to spare:
 * the H100 holds 270,336 threads (132 SMs of 2,048). */
#define FUNNEL__DP_CONCAT_FILL ((int64_t)1 << 18)
/* ... and a piece of a warp's size or more (dread.c's concat_lanes: 32
 * lanes wanted) up to this many lanes, a few warps of one block, while
 * the pieces are few: a read of few large pieces (200x10x1000 strings,
 * 2,000 pieces of 8 to 40 KB) left at a warp a piece fills a quarter of
 * the H100's threads, and its kernel ran at 42% of a d2d copy of its
 * output; at 64 lanes, 64% (bench/RESULTS.md, sessions 53 and 54). At
 * most FUNNEL__DPATH_THREADS (a group of lanes lies in one block). */
#ifndef FUNNEL__DP_CONCAT_MAX_LANES
#define FUNNEL__DP_CONCAT_MAX_LANES 128
#endif

/* The pinned pool, allocated once per device. cuda: cuMemHostAlloc costs
 * ~130 ms per 256 MiB on the H100 host, paid once; 256 MiB stages a few
 * large reads at once. cpu: ordinary memory; 64 MiB holds every test's
 * reads. Override: FUNNEL_PINNED_POOL_BYTES. */
#define FUNNEL__POOL_BYTES_CUDA ((int64_t)256 << 20)
#define FUNNEL__POOL_BYTES_CPU ((int64_t)64 << 20)

/* Partitions parsed on the shared host threads, in tasks of PARSE_TASK
 * consecutive partitions, when a read has at least PARSE_PARALLEL_MIN:
 * below that one thread is quicker (H100 host, 2026-11-23: 200 partitions
 * parsed in 0.08 ms alone, 0.12 ms on 16 threads; 1000 in 0.38 and 0.13). */
#define FUNNEL__PARSE_PARALLEL_MIN 400
#define FUNNEL__PARSE_TASK 8
/* ... and in at most PARSE_TASKS_MAX tasks (more partitions a task when
 * there are more): each task has an arena whose 64 KiB blocks a task of 8
 * small partitions leaves nearly empty; at 50000 partitions 6250 tasks
 * took 400 MB of blocks a read, each touched (page faults) in its first
 * pages only. 16 tasks a host thread still balance the load. */
#define FUNNEL__PARSE_TASKS_MAX 256

/* A read of at least PLAN_PARALLEL_MIN pieces (partitions x columns) is
 * planned on the shared host threads, in tasks of PLAN_TASK consecutive
 * partitions: the sums over the pieces (one round), and the segment table
 * (two rounds: count, then write, ~1.6x the CPU time of one pass). cpu
 * host (2 vCPUs), 2026-11-23: one pass writes ~12 ns a piece (50000x4x10
 * mixed: 2.5-2.9 ms alone, 2.3-2.4 ms on 2 threads); the gain grows with
 * the threads. Below the minimum a pass is too short (~0.2 ms) to pay for
 * the fan-outs. */
#define FUNNEL__PLAN_PARALLEL_MIN 16384
#define FUNNEL__PLAN_TASK 256

/* Interior string offsets and validity bits are checked on the host
 * threads in tasks that read about this many bytes: below it a thread
 * costs more than it saves. */
#define FUNNEL__CHECK_TASK ((int64_t)1 << 20)

/* A batch whose checks read at most this many bytes (about: offsets and
 * a validity bit per row and column) is checked as it is parsed, on the
 * parsing thread, while its offsets are in cache from binding it; larger
 * ones are left to the host threads while the copies fly. Spark's small
 * partitions then need no check pass at all. Not measured finely: a few
 * pages, far below FUNNEL__CHECK_TASK. */
#define FUNNEL__CHECK_INLINE_BYTES ((int64_t)16 << 10)

/* Pageable partitions are staged into pinned memory in tasks of this many
 * bytes on the host threads, with stores that bypass the cache
 * (transfer.c). A probe on the H100 host (16 cores; bench/RESULTS.md,
 * 2026-11-24) staged partitions of 700 B: one thread 11 to 13 GB/s at any
 * size; 16 threads in tasks of 256 KiB 39 GB/s for 2 MiB, 85 for 7 MiB,
 * 90 for 21 MiB (tasks of 1 MiB: 21, 49, 81: too few of them for 16
 * threads below 16 MiB). Plain memcpy stored as fast but the copy of
 * its bytes to the device then took 2 to 3 times as long (7 MiB: 600
 * against 150 us), the copy engine reading lines dirty in the caches. */
#define FUNNEL__STAGE_TASK ((int64_t)256 << 10)
/* Compressed partitions are decoded on the host threads in tasks of about
 * this many decoded bytes: small partitions share one, a larger batch is
 * split by its buffers (a buffer is one frame: never split) in runs of
 * this size. */
#define FUNNEL__DECODE_TASK ((int64_t)256 << 10)
/* ... small partitions share fewer, down to this many bytes, so that a
 * read of a few MiB gives every host thread a task (parse.c,
 * decode_task_bytes): 16 partitions of 10 columns and 625 rows (the
 * shape of the Spark example's reduce task; 1.9 MB of decoding weight,
 * mixed columns) made 4 or 6 tasks of 256 KiB for 16 threads.
 * Interleaved A/B on the H100 host (session 47, bench/RESULTS.md; reads
 * of 16 and 32 partitions, median of three rounds): 16x10x625 mixed zstd
 * 346 -> 214 us, lz4 pageable 138 -> 99; geomean 0.67 for the mixed
 * columns in ZSTD, 0.85 in LZ4, strings 0.98 to 1.01. A read the Spark
 * job makes while 15 other tasks read finds the host threads busy and
 * decodes on its own thread (workers.c): there the reduce stage did not
 * change. Below this a task would cost about what waking a worker does
 * (15 to 20 us, FUNNEL__STAGE_INLINE_BYTES; 32 KiB are about 60 us of
 * decoding at 0.5 GB/s a thread). */
#define FUNNEL__DECODE_TASK_MIN ((int64_t)32 << 10)
/* ... where a buffer counts this many bytes more: decoding a frame of a
 * few bytes costs 100 to 150 ns (liblz4, libzstd: its header, a context
 * reset), as much as 4 KiB of decoded bytes; 200 partitions of 4 columns
 * and 10 rows were one task of 1,600 frames, 0.2 ms on one thread. */
#define FUNNEL__DECODE_FRAME_BYTES ((int64_t)4 << 10)
/* FUNNEL_DECODE_AUTO decodes LZ4 values on a device backend from this many
 * decoded bytes of them in a read (the decoder's wait then pays) ... */
#define FUNNEL__DEVICE_DECODE_MIN ((int64_t)8 << 20)
/* ... and when the device's decoding looks faster than the host threads'
 * (parse.c, funnel__device_pays). A job (a buffer, or a block of one, lz4dec.h)
 * is decoded whole by its own block of two warps, FUNNEL_LZ4_PAIR_BLOCKS
 * of them an SM; the slowest job sets the kernel's time, not the bytes in
 * all. Measured on the H100 host, the benchmark's shuffle-like columns,
 * with one warp a job (28 an SM, sessions 38 and 50): a job of a full
 * wave decoded about 28 MB/s of mixed columns (a 160 KB block in 5.75 ms;
 * strings faster, about 35 MB/s; fewer an SM, faster still); the 16 host
 * threads about 8 GB/s of the same reads (0.5 GB/s a thread, images and
 * binding included); the link about 50 GB/s pinned. With these AUTO's
 * reads took at most 1.11x the time of the faster way on 24 shapes from
 * 10 to 2,000 partitions, 11 MB to 227 MB, mixed and strings, both kinds
 * of frames; the worst where the two ways cross, 40x10x20k mixed in Arrow
 * Java's frames, left on the host (5.2 ms against 4.7; bench/RESULTS.md,
 * session 38). With session 29's decoder's figures (22 MB/s, 32 warps)
 * 50x10x20k mixed and 50x10x5k strings in Java's frames stayed on the
 * host, 1.23x and 1.24x slower. With 8 MiB alone, 10x10x20k mixed took
 * 4.0 ms on the device against 1.7 on the host. Two warps a job (session
 * 51) took the large mixed reads to 0.94 of one warp's time and strings
 * to 0.97 to 1.04, so the rate stays; but they hold 16 jobs an SM, not 28,
 * so a read of more jobs than that runs in more waves (the estimate had
 * kept one warp's 28: 10,000 jobs on the H100's 132 SMs are 5 waves, not
 * 3). Not measured again for AUTO's choices. A backend that does not know
 * its SMs counts FUNNEL__DEVICE_DECODE_JOBS at once in all (the H100
 * holds 2,112). */
#define FUNNEL__DEVICE_DECODE_JOBS_SM FUNNEL_LZ4_PAIR_BLOCKS
#define FUNNEL__DEVICE_DECODE_JOB_BPS 28e6
#define FUNNEL__HOST_DECODE_THREAD_BPS 0.5e9
#define FUNNEL__DECODE_LINK_BPS 50e9
#define FUNNEL__DEVICE_DECODE_JOBS 2048
/* ... plus what each job costs besides its bytes: the host lays every one
 * out on the calling thread (parse.c, dd_layout: its frame's blocks, its
 * place in the region, its entry), and the read then waits for the
 * decoder before the concat. Measured on the H100 host (bench/RESULTS.md,
 * session 30), the Spark grid's shapes with lz4-java's frames, AUTO
 * against both ways forced: without this term AUTO took the device for
 * 50,000x10x10 mixed pinned (about 200,000 jobs of a few dozen bytes),
 * 94 ms against 27 on the host threads, and 10,000x10x100 (about 60,000
 * jobs), 21 against 8.3 ms: 200 to 330 ns a job more. */
#define FUNNEL__DEVICE_DECODE_JOB_S 300e-9
/* The same for ZSTD frames (zstddec.h: a warp a frame, a block of its own,
 * 16 an SM): measured on the H200 host (bench/RESULTS.md, session 41),
 * the benchmark's ZSTD columns (level 3): a warp of a full wave decodes
 * about 5 MB/s of mixed columns (200x10x20k mixed, 2,000 frames of 160
 * KB: 31.7 ms) and 9 MB/s of strings (200x10x5k strings, its longest
 * frame 171 KB: 20.1 ms); the estimate takes 8. The 16 host threads
 * (libzstd) decode about 7.6 GB/s of mixed columns, 0.5 GB/s a thread.
 * With these AUTO takes the device for both of those reads (0.93x to
 * 0.98x the host's time for the mixed one, 0.84x to 0.91x for the strings
 * one) and leaves to the host the reads of few or long frames, which it
 * decodes faster (10x10x20k mixed: 2.3 ms against 20.4; 100x10x20k
 * strings, frames of about 700 KB: 38 against 41). The decoder is faster
 * since (session 45: a warp of a full wave about 8 MB/s of the mixed
 * columns, 11 of strings), which the estimate of 8 already assumed for
 * the mixed ones; not measured again for AUTO's choices. */
#define FUNNEL__DEVICE_ZSTD_WARPS_SM 16
#define FUNNEL__DEVICE_ZSTD_WARP_BPS 8e6
#define FUNNEL__HOST_ZSTD_THREAD_BPS 0.5e9
/* The device decodes a buffer of independent LZ4 blocks a block a warp, up
 * to this many blocks (a buffer of more is decoded whole, by one warp). */
#define FUNNEL__DECODE_BLOCKS_MAX 65536
/* The device path's launch of LZ4 jobs of a read of partitions over
 * FUNNEL__DPATH_MAX_AVG on average (FUNNEL_DP_STAGE_LZ4_WAYS) decodes
 * each job of frames in as many ways as make this many times the blocks of
 * the decoder an SM holds on every SM (cuda_backend.c; lz4dec.h,
 * funnel__lz4_frames_way): a buffer's frame of independent blocks
 * (lz4-java's) shared by several blocks of two warps, as the host path's
 * jobs of a block each are. On the H100 (bench/RESULTS.md, session 56),
 * lz4-java's frames, the device path: 200x10x20k mixed pinned 0.78 of the
 * time in one way, 64x10x15k mixed 0.84 (FUNNEL_LZ4_WAYS=1 in the
 * environment turns the ways off) */
#define FUNNEL__LZ4_WAYS_WAVES 2
/* ... and the cpu backend in this many, one after the other: no faster,
 * but its tests of such reads then run the ways' code as the device runs
 * it */
#define FUNNEL__LZ4_CPU_WAYS 3

/* Staging proceeds in up to STAGE_ROUNDS rounds of at least
 * STAGE_ROUND_MIN bytes; the bytes of each round go up while the next is
 * staged, so the host's stores and the link overlap. funnel_bench on the
 * H100, pageable, mixed (ms, rounds of at least 2 MiB against 16 MiB):
 * 1000x4x100 (2.7 MB) 0.18 against 0.35, 10000x4x1 (7 MB) 0.59 against
 * 0.65, 10000x10x10 (20 MB) 0.91 against 1.04. A round's tasks are
 * rounded up to a multiple of the host threads (transfer.c): 2 MiB rounds
 * of 256 KiB tasks left half of 16 threads idle, and 50000x4x1 mixed (33
 * MB) staged at 30 GB/s in 16 rounds of 8 or 9 tasks, at 60 to 75 in
 * rounds of 16 or more (the read 2.33 -> 1.61 ms, session 33). */
#define FUNNEL__STAGE_ROUNDS 16
#define FUNNEL__STAGE_ROUND_MIN ((int64_t)2 << 20)

/* Pageable bytes up to this many are staged on the calling thread alone:
 * below it, the wake of a sleeping worker (15 to 20 us on the H100 host)
 * costs more than the threads save. The same probe: 0.14 MB staged in 8
 * to 10 us alone, 0.72 MB in 55 alone and 38 on the threads. */
#define FUNNEL__STAGE_INLINE_BYTES ((int64_t)256 << 10)

/* FUNNEL_TRANSFER_AUTO, for a read of partitions only some of which are
 * pinned, reads the pinned ones in place when they total at most this many
 * bytes. H100 (PCIe Gen5), 2026-11-22, in a run whose record did not land:
 * the kernel reads pinned host memory at ~44 GB/s, the copy engine at ~55;
 * in place won at 3.6 MiB (0.280 against 0.316 ms), copying at 15.5 MiB
 * (0.484 against 0.512). A read of pinned partitions only copies them
 * before parsing, which beat both on 2026-11-23 (bench/RESULTS.md).
 * Override: FUNNEL_DIRECT_MAX_BYTES, or FUNNEL_OPTION_DIRECT_MAX_BYTES. */
#define FUNNEL__DIRECT_MAX_DEFAULT ((int64_t)8 << 20)

/* Partitions that lie less than this far after each other in pinned
 * memory go up in one copy, the gap with them. No further: a gap of 64
 * bytes or more may be another thread's pool block (the pool rounds each
 * to 64), which the copy would read while that thread writes it (a data
 * race on the cpu backend, found by ThreadSanitizer in test_stress, and
 * for a gap of exactly 64 by a review: test_pool's
 * another_block_between_partitions_is_not_copied). A shorter gap is the
 * padding of the block before and the start of the block after, both
 * blocks the read holds. */
#define FUNNEL__MERGE_GAP ((int64_t)FUNNEL__ALIGN)

/* A pass over a read's partitions runs in parts of about this many
 * partitions on the host threads (workers.h, funnel__pass_parts) from two
 * parts on. Alone, each pass took 3 to 7 ns a partition on the H100 host:
 * a read of 50,000 pageable partitions spent 0.15 to 0.23 ms scanning
 * their addresses, 0.3 laying staging out and 0.1 writing the device
 * path's table before the first byte was staged (session 33). A worker
 * spinning after a loop wakes in a microsecond or two, a sleeping one in
 * 15 to 20 us: a part is a few microseconds' work at least. */
#define FUNNEL__PASS_PART 2048

/* Host threads that run a loop, the caller included: the cores, at most
 * this many (the staging memcpy saturates host memory well before).
 * Override: FUNNEL_HOST_THREADS (read once per process), up to
 * FUNNEL__HOST_THREADS_LIMIT. */
#define FUNNEL__HOST_THREADS_MAX 16
/* A worker polls for the next loop this long after its last one before it
 * sleeps (workers.c): the loops of one read follow each other within tens
 * of microseconds (a staging's rounds, a plan's passes), and waking a
 * sleeping thread cost 15 to 20 us on the H100 host (a probe,
 * bench/RESULTS.md, 2026-11-24). */
#define FUNNEL__WORKER_SPIN_NS 50000
#define FUNNEL__HOST_THREADS_LIMIT 64

#endif
