package dev.funnel.tools;

import java.io.IOException;
import java.io.Reader;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.List;
import java.util.Properties;
import java.util.stream.Stream;

/**
 * One workload that the C benchmark wrote with {@code funnel_bench --dump DIR}, so that the Java
 * driver reads the same bytes: a directory {@code <P>x<C>x<R>-<mix>} holding
 *
 * <ul>
 *   <li>{@code partitions.bin}: the P partitions (whole Arrow IPC streams) back to back, each at
 *       an offset that is a multiple of 64;
 *   <li>{@code workload.properties}: partitions, columns, rows_per_partition, mix, bytes (the sum
 *       of the lengths), rows, and comma-separated offsets, lengths (one per partition) and nulls
 *       (one per column, as the generator counted them); compression (none, lz4 or zstd: the
 *       codec of the partitions' bodies; none when absent).
 * </ul>
 */
final class Workload {
  static final String PROPERTIES = "workload.properties";
  static final String PARTITIONS = "partitions.bin";

  /** The codecs a dump's bodies may be compressed with, as the C driver names them. */
  static final List<String> CODECS = List.of("none", "lz4", "zstd");

  /** The order of a run: by mix, then partitions, columns, rows per partition and codec. */
  static final Comparator<Workload> ORDER =
      Comparator.comparing((Workload w) -> w.mix)
          .thenComparingInt(w -> w.partitions)
          .thenComparingInt(w -> w.columns)
          .thenComparingLong(w -> w.rowsPerPartition)
          .thenComparingInt(w -> CODECS.indexOf(w.codec));

  /** A dump that does not hold what its properties say; the message names the file. */
  static final class InvalidException extends Exception {
    private static final long serialVersionUID = 1L;

    InvalidException(String message) {
      super(message);
    }
  }

  final Path dir;
  final int partitions;
  final int columns;
  final long rowsPerPartition;
  final String mix;
  final String codec;
  final long bytes;
  final long rows;
  final long[] offsets;
  final long[] lengths;
  final long[] nulls;
  final long fileSize;

  private Workload(Path dir, Properties p, long fileSize) throws InvalidException {
    this.dir = dir;
    this.fileSize = fileSize;
    partitions = (int) count(p, "partitions", 1, Integer.MAX_VALUE);
    columns = (int) count(p, "columns", 1, Integer.MAX_VALUE);
    rowsPerPartition = count(p, "rows_per_partition", 0, Long.MAX_VALUE);
    mix = text(p, "mix");
    codec = p.getProperty("compression", "none").trim();
    if (!CODECS.contains(codec)) {
      throw invalid("compression=" + codec + ", expected one of " + String.join(", ", CODECS));
    }
    bytes = count(p, "bytes", 0, Long.MAX_VALUE);
    rows = count(p, "rows", 0, Long.MAX_VALUE);
    offsets = list(p, "offsets", partitions);
    lengths = list(p, "lengths", partitions);
    nulls = list(p, "nulls", columns);
    long sum = 0;
    for (int i = 0; i < partitions; i++) {
      if (offsets[i] > fileSize || lengths[i] > fileSize - offsets[i]) {
        throw invalid("partition " + i + " [" + offsets[i] + ", +" + lengths[i] + ") lies past the "
            + fileSize + " bytes of " + PARTITIONS);
      }
      sum += lengths[i];
    }
    if (sum != bytes) {
      throw invalid("bytes=" + bytes + ", but the lengths add up to " + sum);
    }
  }

  /** The shape, "PxCxR". */
  String shape() {
    return partitions + "x" + columns + "x" + rowsPerPartition;
  }

  /** The mix as the C driver prints it: "mixed", or "mixed/lz4" for compressed bodies. */
  String label() {
    return codec.equals("none") ? mix : mix + "/" + codec;
  }

  /** The subdirectories of {@code root} that hold a workload, in no particular order. */
  static List<Path> find(Path root) throws IOException {
    try (Stream<Path> s = Files.list(root)) {
      return s.filter(d -> Files.isRegularFile(d.resolve(PROPERTIES))).sorted().toList();
    }
  }

  /** Reads a workload's properties and checks them against each other and the file's size. */
  static Workload load(Path dir) throws IOException, InvalidException {
    Properties p = new Properties();
    try (Reader r = Files.newBufferedReader(dir.resolve(PROPERTIES), StandardCharsets.UTF_8)) {
      p.load(r);
    }
    Path bin = dir.resolve(PARTITIONS);
    if (!Files.isRegularFile(bin)) {
      throw new InvalidException(bin + ": no such file");
    }
    return new Workload(dir, p, Files.size(bin));
  }

  /**
   * The whole of partitions.bin in ordinary (pageable) direct memory, position 0, starting at a
   * 64-byte aligned address as a fetch buffer would.
   */
  ByteBuffer readPartitions() throws IOException, InvalidException {
    if (fileSize > Integer.MAX_VALUE - 64) {
      throw new InvalidException(dir.resolve(PARTITIONS) + ": " + fileSize
          + " bytes, more than a ByteBuffer holds");
    }
    ByteBuffer raw = ByteBuffer.allocateDirect((int) fileSize + 63);
    int skip = (64 - raw.alignmentOffset(0, 64)) % 64;
    ByteBuffer all = raw.slice(skip, (int) fileSize);
    try (FileChannel ch = FileChannel.open(dir.resolve(PARTITIONS), StandardOpenOption.READ)) {
      while (all.hasRemaining()) {
        if (ch.read(all) < 0) {
          throw new InvalidException(dir.resolve(PARTITIONS) + ": shorter than " + fileSize
              + " bytes; did it change while being read?");
        }
      }
    }
    return all.flip();
  }

  private InvalidException invalid(String what) {
    return new InvalidException(dir.resolve(PROPERTIES) + ": " + what);
  }

  private String text(Properties p, String key) throws InvalidException {
    String v = p.getProperty(key);
    if (v == null || v.isBlank()) {
      throw invalid("no " + key);
    }
    return v.trim();
  }

  private long count(Properties p, String key, long min, long max) throws InvalidException {
    String v = text(p, key);
    try {
      long n = Long.parseLong(v);
      if (n >= min && n <= max) {
        return n;
      }
    } catch (NumberFormatException ignored) {
      // reported below
    }
    throw invalid(key + "=" + v + ", expected an integer in [" + min + ", " + max + "]");
  }

  private long[] list(Properties p, String key, int expected) throws InvalidException {
    String[] items = text(p, key).split(",", -1);
    if (items.length != expected) {
      throw invalid(key + " has " + items.length + " entries, expected " + expected);
    }
    long[] values = new long[expected];
    for (int i = 0; i < expected; i++) {
      try {
        values[i] = Long.parseLong(items[i].trim());
      } catch (NumberFormatException e) {
        values[i] = -1;
      }
      if (values[i] < 0) {
        throw invalid(key + " entry " + i + " is '" + items[i].trim()
            + "', expected a non-negative integer");
      }
    }
    return values;
  }
}
