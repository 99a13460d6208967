package dev.funnel;

/**
 * What one read did, counted from the calls actually made (funnel.h's {@code struct
 * funnel_read_stats}).
 *
 * <p>The invariants of the design, which tests assert. A read whose headers the host parsed:
 * {@code h2dCopies <= partitions + 1}, {@code concatLaunches <= columnSets}, {@code
 * deviceCallsParse == 0}, {@code deviceCallsPlan == 0}, {@code syncsInRead == 0}. A read the
 * device parsed ({@code deviceParsed > 0 && deviceLeft == 0}, {@link FunnelReader#setParse}):
 * {@code h2dCopies <= partitions + 1} (the partitions and one small table), {@code
 * concatLaunches <= 2 + max(1, overlapParts)} (parse, scan over 1024 partitions or after a
 * parse in parts, concat), {@code syncsInRead == 1} (the wait for the parse's sums, which give
 * the table's shape; the concat is already enqueued behind them), {@code deviceCallsPlan == 0}. A
 * large read of many partitions back to back in the pinned pool is parsed in {@code
 * overlapParts} parts (else 0), each while the next part's bytes are copied: a parse launch and a
 * copy a part.
 *
 * <p>{@code deviceParsed} partitions went up as raw bytes for the device to parse; {@code
 * deviceLeft} of them it left to the host (a schema written differently, several batches, a
 * malformed partition), which then read them all: such a read counts the attempt's copies, its
 * launches and two waits (for the sums, and for the attempt's work before its memory goes)
 * on top of the host path's.
 *
 * <p>{@code compressedPartitions} had compressed bodies (LZ4_FRAME or ZSTD), whose {@code
 * bytesCompressed} the host threads decoded to {@code bytesDecoded} in {@code decodeNanos} (part of
 * {@code parseNanos}), into the pinned pool when {@code decodedPinned} is 1; of those, the
 * device decoded {@code deviceDecoded} buffers of values to {@code bytesDeviceDecoded} bytes
 * ({@link FunnelReader.Decode}). Such a read waits once for the device's decoder (one sync and one
 * launch more), and when the compressed partitions lie in the pinned pool their frames are read
 * where they lie: up to one copy per compressed partition more. A read of LZ4 or ZSTD bodies by
 * the device path decodes every frame there ({@code deviceDecoded} of them, to {@code
 * bytesDeviceDecoded}; {@code bytesDecoded} counts the raw buffers too, {@code decodeNanos} and {@code decodedPinned}
 * are 0) and makes two launches more (the first pass and the decoder). A small one (up to 4 MiB
 * of partitions) makes both passes in one go, from a guess of the bytes its frames decode to
 * ({@code decodeWaits} 0); a larger one, or one whose guess would hold more than 4 times its
 * bytes, waits once more, for the first pass's sizes, and makes two copies more, the args and
 * summary again ({@code decodeWaits} 1); a small one whose first pass left a partition or decoded
 * more than the guess waits for the first pass's summary and then goes on as a larger one does
 * ({@code decodeWaits} 2: two waits, and the launches after the first pass again). A small one
 * whose every buffer is stored raw (partitions of a row or a few), after a read of that codec with
 * no frame, parses once with no decoder, as an uncompressed read does (no launch more, and its
 * partitions, tables and output in one device allocation); a frame found then sends it on as one
 * of two passes ({@code decodeWaits} 2), and a frame in its first non-empty partition sends it
 * there at once ({@code decodeWaits} 1). A larger one
 * whose partitions lie back to back in the pinned pool (from 8 MiB) is copied, unpacked and
 * decoded in parts ({@code overlapParts}), each part decoded once it is unpacked, into room
 * guessed alike, before the wait for the first pass ({@code decodeWaits} 1); when the room falls
 * short, the decoder runs again after it.
 *
 * <p>{@code directPartitions} were read by the kernel straight from pinned host memory (no copy);
 * {@code kernelNanos} is the concat's device time when the reader times it ({@link
 * FunnelReader#setTimeKernel}), read after the table is ready, else -1.
 */
public record ReadStats(
    long partitions,
    long emptyPartitions,
    long batches,
    long rows,
    long columns,
    long columnSets,
    long segments,
    long h2dCopies,
    long bytesH2d,
    long concatLaunches,
    long deviceAllocs,
    long pinnedAllocs,
    long syncsInRead,
    long deviceCallsParse,
    long deviceCallsPlan,
    long deviceCallsSubmit,
    long bytesOut,
    long parseNanos,
    long planNanos,
    long submitNanos,
    long stagedPartitions,
    long bytesStaged,
    long directPartitions,
    long bytesDirect,
    long kernelNanos,
    long deviceParsed,
    long deviceLeft,
    long compressedPartitions,
    long bytesCompressed,
    long bytesDecoded,
    long decodeNanos,
    long decodedPinned,
    long deviceDecoded,
    long bytesDeviceDecoded,
    long overlapParts,
    long decodeWaits) {

  static ReadStats of(long[] v) {
    if (v.length != ReadStats.class.getRecordComponents().length) {
      throw new IllegalStateException("native stats have " + v.length + " fields, ReadStats "
          + ReadStats.class.getRecordComponents().length + ": library and classes differ");
    }
    return new ReadStats(
        v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
        v[14], v[15], v[16], v[17], v[18], v[19], v[20], v[21], v[22], v[23], v[24], v[25],
        v[26], v[27], v[28], v[29], v[30], v[31], v[32], v[33], v[34], v[35]);
  }

  /** Whether the device parsed the headers and kept every partition. */
  public boolean parsedOnDevice() {
    return deviceParsed > 0 && deviceLeft == 0;
  }

  /** One JSON object, snake_case keys as in funnel.h. */
  public String toJson() {
    return "{\"partitions\": " + partitions
        + ", \"empty_partitions\": " + emptyPartitions
        + ", \"batches\": " + batches
        + ", \"rows\": " + rows
        + ", \"columns\": " + columns
        + ", \"column_sets\": " + columnSets
        + ", \"segments\": " + segments
        + ", \"h2d_copies\": " + h2dCopies
        + ", \"bytes_h2d\": " + bytesH2d
        + ", \"concat_launches\": " + concatLaunches
        + ", \"device_allocs\": " + deviceAllocs
        + ", \"pinned_allocs\": " + pinnedAllocs
        + ", \"syncs_in_read\": " + syncsInRead
        + ", \"device_calls_during_parse\": " + deviceCallsParse
        + ", \"device_calls_during_plan\": " + deviceCallsPlan
        + ", \"device_calls_during_submit\": " + deviceCallsSubmit
        + ", \"bytes_out\": " + bytesOut
        + ", \"parse_ns\": " + parseNanos
        + ", \"plan_ns\": " + planNanos
        + ", \"submit_ns\": " + submitNanos
        + ", \"staged_partitions\": " + stagedPartitions
        + ", \"bytes_staged\": " + bytesStaged
        + ", \"direct_partitions\": " + directPartitions
        + ", \"bytes_direct\": " + bytesDirect
        + ", \"kernel_ns\": " + kernelNanos
        + ", \"device_parsed\": " + deviceParsed
        + ", \"device_left\": " + deviceLeft
        + ", \"compressed_partitions\": " + compressedPartitions
        + ", \"bytes_compressed\": " + bytesCompressed
        + ", \"bytes_decoded\": " + bytesDecoded
        + ", \"decode_ns\": " + decodeNanos
        + ", \"decoded_pinned\": " + decodedPinned
        + ", \"device_decoded\": " + deviceDecoded
        + ", \"bytes_device_decoded\": " + bytesDeviceDecoded
        + ", \"overlap_parts\": " + overlapParts
        + ", \"decode_waits\": " + decodeWaits
        + "}";
  }
}
