package dev.funnel;

import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.getInt;
import static dev.funnel.TestSupport.getLong;
import static dev.funnel.TestSupport.nullable;
import static dev.funnel.TestSupport.putInt;
import static dev.funnel.TestSupport.putLong;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.types.MetadataVersion;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The device path ({@link FunnelReader.Parse}): partitions it parses give the table Arrow Java
 * reads from them; partitions it may not take (several batches, a schema written differently, an
 * IPC file, legacy framing) send the read to the host path, with the same table; a malformed
 * partition fails the read with the exception a host-parsed read gives, the same class, code,
 * partition, column, offset and message.
 */
class DeviceParseTest extends DeviceTestCase {
  private static final Schema ALL = TestSupport.allTypesSchema();

  /** Rows of a partition a case breaks. */
  private static final int BAD_ROWS = 12;

  private static final int ID = column("id");
  private static final int F64 = column("f64");
  private static final int UTF8 = column("utf8");
  private static final int LARGE_UTF8 = column("large_utf8");

  // ----------------------------------------------------------------- errors

  @Test
  void setParseRejectsNull() {
    try (FunnelReader reader = new FunnelReader(device)) {
      NullPointerException e = assertThrows(NullPointerException.class, () -> reader.setParse(null));
      assertTrue(String.valueOf(e.getMessage()).contains("parse"), e.getMessage());
      List<byte[]> parts = List.of(randomStream(ALL, allocator, new Random(60), 0.3, 5));
      try (DeviceTable table = read(reader.setParse(FunnelReader.Parse.DEVICE), parts)) {
        assertTrue(table.stats().parsedOnDevice(), "the reader still reads: " + table.stats().toJson());
        assertTableMatches(table, parts, null, allocator);
      }
    }
  }

  /** Breaks a partition (a copy of an Arrow Java stream of BAD_ROWS rows); returns it. */
  interface Break {
    byte[] apply(byte[] partition);
  }

  static Stream<Arguments> breaks() {
    Map<String, Break> breaks = new LinkedHashMap<>();
    breaks.put("a utf8 offset falls", p -> offsetFalls(p, UTF8, 4));
    breaks.put("a large_utf8 offset falls", p -> offsetFalls(p, LARGE_UTF8, 8));
    breaks.put("utf8 offsets end past the data", p -> {
      RecordBatch rb = batch(p);
      long dataLength = rb.buffers(firstBuffer(UTF8) + 2).length();
      putInt(p, bufferStart(p, firstBuffer(UTF8) + 1) + 4 * BAD_ROWS, (int) dataLength + 1);
      return p;
    });
    breaks.put("a null count the validity bits contradict", p -> {
      // id is not nullable: Arrow Java writes its validity buffer all ones, null count 0
      int at = nodeEntry(p, ID) + 8;
      assertEquals(0, getLong(p, at), "located id's null count");
      putLong(p, at, 1);
      return p;
    });
    breaks.put("a validity buffer shorter than the rows", p -> {
      int c = firstColumnWithNulls(p);
      putLong(p, bufferEntry(p, firstBuffer(c)) + 8, 1); // 12 rows need 2 bytes
      return p;
    });
    breaks.put("a buffer ends past the body", p -> {
      TestSupport.Span span = TestSupport.first(p, MessageHeader.RecordBatch);
      int entry = bufferEntry(p, firstBuffer(UTF8) + 2);
      putLong(p, entry + 8, span.bodyLength() - getLong(p, entry) + 1);
      return p;
    });
    breaks.put("an f64 data buffer one byte short", p -> {
      putLong(p, bufferEntry(p, firstBuffer(F64) + 1) + 8, 8L * BAD_ROWS - 1);
      return p;
    });
    breaks.put("a field node length differs from the batch", p -> {
      putLong(p, nodeEntry(p, F64), BAD_ROWS + 1);
      return p;
    });
    breaks.put("bodyLength past the partition", p -> {
      TestSupport.Span span = TestSupport.first(p, MessageHeader.RecordBatch);
      int at = span.metaStart() + TestSupport.fieldPosition(TestSupport.message(p, span), 3);
      putLong(p, at, span.bodyLength() + 64);
      return p;
    });
    breaks.put("truncated in the body",
        p -> Arrays.copyOf(p, TestSupport.first(p, MessageHeader.RecordBatch).bodyStart() + 3));
    breaks.put("truncated in the metadata",
        p -> Arrays.copyOf(p, TestSupport.first(p, MessageHeader.RecordBatch).metaStart() + 9));
    List<int[]> runs = List.of(new int[] {1, 0}, new int[] {200, 0}, new int[] {200, 137},
        new int[] {2000, 1999}, new int[] {200, 170, 37});
    List<Arguments> out = new ArrayList<>();
    for (Map.Entry<String, Break> b : breaks.entrySet()) {
      for (int[] run : runs) {
        out.add(Arguments.of(b.getKey(), run[0], Arrays.copyOfRange(run, 1, run.length),
            b.getValue()));
      }
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0}: {1} partitions, broken {2}")
  @MethodSource("breaks")
  void malformedPartitionFailsOnDeviceAsOnHost(String what, int n, int[] bad, Break brk) {
    List<byte[]> parts = new ArrayList<>(goodPartitions(n));
    Random random = new Random(61);
    for (int i : bad) {
      parts.set(i, randomStream(ALL, allocator, random, 0.3, BAD_ROWS));
    }
    List<byte[]> unbroken = List.copyOf(parts);
    for (int i : bad) {
      parts.set(i, brk.apply(parts.get(i).clone()));
    }
    int first = Arrays.stream(bad).min().orElseThrow();
    assertFailsAlike(MalformedPartitionException.class, parts, first, unbroken);
  }

  @ParameterizedTest(name = "{0} partitions, broken {1}")
  @MethodSource("schemaRuns")
  void schemaNamingAColumnDifferentlyFailsOnDeviceAsOnHost(int n, int bad) {
    List<Field> fields = new ArrayList<>(ALL.getFields());
    fields.set(UTF8, nullable("utf8_renamed", ArrowType.Utf8.INSTANCE));
    List<byte[]> parts = new ArrayList<>(goodPartitions(n));
    parts.set(bad, randomStream(ALL, allocator, new Random(62), 0.3, BAD_ROWS));
    List<byte[]> unbroken = List.copyOf(parts);
    parts.set(bad, randomStream(new Schema(fields), allocator, new Random(62), 0.3, BAD_ROWS));
    SchemaMismatchException e = assertFailsAlike(SchemaMismatchException.class, parts, bad, unbroken);
    assertEquals(UTF8, e.column(), e.getMessage());
  }

  static Stream<Arguments> schemaRuns() {
    return Stream.of(Arguments.of(200, 137), Arguments.of(2000, 1999));
  }

  /**
   * Reads `parts` parsed on the host, then on the device: both fail with `type` naming partition
   * `first`, and the two exceptions agree in everything. Then the same reader reads `unbroken` on
   * the device (so it was the break that sent the read to the host) and gives Arrow Java's table.
   */
  private <T extends FunnelException> T assertFailsAlike(
      Class<T> type, List<byte[]> parts, int first, List<byte[]> unbroken) {
    try (FunnelReader reader = new FunnelReader(device)) {
      reader.setParse(FunnelReader.Parse.HOST);
      T host = assertThrows(type, () -> reader.read(direct(parts)).close(), "parsed on the host");
      reader.setParse(FunnelReader.Parse.DEVICE);
      FunnelException dev =
          assertThrows(FunnelException.class, () -> reader.read(direct(parts)).close(),
              "parsed on the device");
      assertAll(
          "the device path's exception is the host path's: " + host.getMessage(),
          () -> assertEquals(host.getClass(), dev.getClass(), "class"),
          () -> assertEquals(host.getMessage(), dev.getMessage(), "message"),
          () -> assertEquals(host.code(), dev.code(), "code"),
          () -> assertEquals(host.partition(), dev.partition(), "partition"),
          () -> assertEquals(host.column(), dev.column(), "column"),
          () -> assertEquals(host.offset(), dev.offset(), "offset"));
      assertEquals(first, host.partition(), host.getMessage());
      assertTrue(host.getMessage().contains("partition " + first), host.getMessage());
      assertEquals(0, allocator.getAllocatedMemory(), "Arrow memory leaked");
      try (DeviceTable table = read(reader, unbroken)) {
        assertTrue(table.stats().parsedOnDevice(),
            "unbroken, the partitions are parsed on the device: " + table.stats().toJson());
        assertTableMatches(table, unbroken, null, allocator);
      }
      return host;
    }
  }

  // ------------------------------------------------------------ round trips

  @ParameterizedTest(name = "{0} partitions")
  @ValueSource(ints = {1, 200, 3000})
  void deviceParsesSingleBatchPartitionsOfEveryType(int n) {
    List<byte[]> parts = singleBatchPartitions(n, new Random(63 + n), allocator);
    try (FunnelReader reader = new FunnelReader(device).setParse(FunnelReader.Parse.DEVICE);
        DeviceTable table = read(reader, parts)) {
      ReadStats s = table.stats();
      assertTrue(s.parsedOnDevice(), s.toJson());
      assertEquals(n, s.deviceParsed(), s.toJson());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void deviceParsesBareBatchesWithTheReadersSchema() {
    Random random = new Random(64);
    List<byte[]> parts = new ArrayList<>();
    try (VectorSchemaRoot root = VectorSchemaRoot.create(ALL, allocator)) {
      for (int p = 0; p < 300; p++) {
        if (p % 3 == 0) {
          parts.add(randomStream(ALL, allocator, random, 0.3, random.nextInt(9)));
        } else {
          TestSupport.fill(root, random.nextInt(9), random, 0.3);
          parts.add(TestSupport.bareBatch(root));
        }
      }
    }
    try (FunnelReader reader = new FunnelReader(device, ALL).setParse(FunnelReader.Parse.DEVICE);
        DeviceTable table = read(reader, parts)) {
      assertTrue(table.stats().parsedOnDevice(), table.stats().toJson());
      assertTableMatches(table, parts, ALL, allocator);
    }
  }

  @Test
  void autoParsesOnDeviceFrom64SmallPartitions() {
    assumeTrue(System.getenv("FUNNEL_PARSE") == null, "FUNNEL_PARSE decides what AUTO does");
    List<byte[]> parts = singleBatchPartitions(64, new Random(65), allocator);
    try (FunnelReader reader = new FunnelReader(device).setParse(FunnelReader.Parse.AUTO)) {
      try (DeviceTable table = read(reader, parts)) {
        assertTrue(table.stats().parsedOnDevice(), "64 partitions: " + table.stats().toJson());
        assertEquals(64, table.stats().deviceParsed());
        assertTableMatches(table, parts, null, allocator);
      }
      List<byte[]> fewer = parts.subList(0, 63);
      try (DeviceTable table = read(reader, fewer)) {
        assertEquals(0, table.stats().deviceParsed(), "63 partitions: " + table.stats().toJson());
        assertTableMatches(table, fewer, null, allocator);
      }
    }
  }

  /** Partitions of over 16 KiB on average go to the device path from 128, as larger ones do. */
  @Test
  void autoParsesOnDeviceFrom128PartitionsOver16KiB() {
    assumeTrue(System.getenv("FUNNEL_PARSE") == null, "FUNNEL_PARSE decides what AUTO does");
    for (int extra : new int[] {0, 8}) {
      List<byte[]> parts = blobPartitions(128, (16 << 10) + extra);
      try (FunnelReader reader = new FunnelReader(device)) {
        for (int n : new int[] {63, 64, 127, 128}) {
          List<byte[]> some = parts.subList(0, n);
          try (DeviceTable table = read(reader, some)) {
            ReadStats s = table.stats();
            boolean device = n >= 128 || (n >= 64 && extra == 0);
            assertEquals(device ? n : 0, s.deviceParsed(),
                n + " partitions of 16 KiB + " + extra + ": " + s.toJson());
            assertTableMatches(table, some, null, allocator);
          }
        }
      }
    }
  }

  @Test
  void autoParsesOnHostWhenPartitionsAverageOver256KiB() {
    assumeTrue(System.getenv("FUNNEL_PARSE") == null, "FUNNEL_PARSE decides what AUTO does");
    for (int extra : new int[] {0, 8}) {
      List<byte[]> parts = blobPartitions(128, (256 << 10) + extra);
      try (FunnelReader reader = new FunnelReader(device);
          DeviceTable table = read(reader, parts)) {
        ReadStats s = table.stats();
        assertEquals(extra == 0, s.parsedOnDevice(), "averaging 256 KiB + " + extra + ": " + s.toJson());
        assertEquals(extra == 0 ? 128 : 0, s.deviceParsed(), s.toJson());
        assertTableMatches(table, parts, null, allocator);
      }
    }
  }

  /** n one-row partitions of one binary column, each exactly `bytes` bytes (checked). */
  private List<byte[]> blobPartitions(int n, int bytes) {
    Schema blobs = new Schema(List.of(nullable("blob", ArrowType.Binary.INSTANCE)));
    // a one-row partition is `fixed` bytes and its value (a multiple of 8: no padding)
    int fixed = blobPartition(blobs, 8, 0).length - 8;
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < n; p++) {
      parts.add(blobPartition(blobs, bytes - fixed, p));
      assertEquals(bytes, parts.get(p).length, "partition " + p + "'s bytes");
    }
    return parts;
  }

  static Stream<Arguments> leftToHost() {
    Schema withMetadata = new Schema(ALL.getFields(), Map.of("written", "differently"));
    return Stream.of(
        Arguments.of("several batches", (PartitionWriter) (a, r) ->
            randomStream(ALL, a, r, 0.3, 1 + r.nextInt(5), 0, 1 + r.nextInt(5))),
        Arguments.of("an IPC file", (PartitionWriter) DeviceParseTest::filePartition),
        Arguments.of("legacy framing", (PartitionWriter) (a, r) ->
            randomStream(ALL, a, r, 0.3, new IpcOption(true, MetadataVersion.V5), 1 + r.nextInt(8))),
        Arguments.of("a schema with custom metadata", (PartitionWriter) (a, r) ->
            randomStream(withMetadata, a, r, 0.3, 1 + r.nextInt(8))));
  }

  /** Writes one partition the device path may not take. */
  interface PartitionWriter {
    byte[] write(BufferAllocator allocator, Random random);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("leftToHost")
  void partitionsTheDeviceLeavesAreReadByTheHost(String what, PartitionWriter odd) {
    Random random = new Random(66);
    List<byte[]> parts = singleBatchPartitions(200, random, allocator);
    int[] oddOnes = {5, 99, 199};
    for (int i : oddOnes) {
      parts.set(i, odd.write(allocator, random));
    }
    try (FunnelReader reader = new FunnelReader(device).setParse(FunnelReader.Parse.DEVICE);
        DeviceTable table = read(reader, parts)) {
      ReadStats s = table.stats();
      assertFalse(s.parsedOnDevice(), s.toJson());
      assertEquals(200, s.deviceParsed(), s.toJson());
      assertEquals(oddOnes.length, s.deviceLeft(), "the partitions it left: " + s.toJson());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  // ---------------------------------------------------------------- helpers

  /**
   * n partitions of every type with nulls, each one RecordBatch of 0 to 19 rows or none (an empty
   * shuffle block, a Schema alone); the first has rows.
   */
  static List<byte[]> singleBatchPartitions(int n, Random random, BufferAllocator allocator) {
    List<byte[]> parts = new ArrayList<>(n);
    for (int p = 0; p < n; p++) {
      int k = p == 0 ? 3 : random.nextInt(20);
      parts.add(k == 0 ? new byte[0]
          : k == 1 ? randomStream(ALL, allocator, random, 0.3)
          : randomStream(ALL, allocator, random, 0.3, k == 2 ? 0 : 1 + random.nextInt(19)));
    }
    return parts;
  }

  private static final Map<Integer, List<byte[]>> GOOD = new ConcurrentHashMap<>();

  /** singleBatchPartitions(n), written once for the whole class. */
  private static List<byte[]> goodPartitions(int n) {
    return GOOD.computeIfAbsent(n, k -> {
      try (BufferAllocator a = new RootAllocator()) {
        return List.copyOf(singleBatchPartitions(k, new Random(67), a));
      }
    });
  }

  private static byte[] filePartition(BufferAllocator allocator, Random random) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(ALL, allocator)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowFileWriter writer = new ArrowFileWriter(root, null, Channels.newChannel(out))) {
        writer.start();
        TestSupport.fill(root, 1 + random.nextInt(8), random, 0.3);
        writer.writeBatch();
        writer.end();
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** One row: a value of `length` random bytes, seeded by `seed`. */
  private byte[] blobPartition(Schema schema, int length, int seed) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      root.allocateNew();
      ((VarBinaryVector) root.getVector(0)).setSafe(0, TestSupport.randomBytes(new Random(seed), length));
      root.setRowCount(1);
      return TestSupport.streamOf(root);
    }
  }

  private static int column(String name) {
    for (int c = 0; c < ALL.getFields().size(); c++) {
      if (ALL.getFields().get(c).getName().equals(name)) {
        return c;
      }
    }
    throw new AssertionError("no column " + name);
  }

  /** Index of column c's first IPC buffer (validity): 3 buffers a string column, else 2. */
  private static int firstBuffer(int c) {
    int k = 0;
    for (int i = 0; i < c; i++) {
      k += TestSupport.offsetWidth(ALL.getFields().get(i)) > 0 ? 3 : 2;
    }
    return k;
  }

  private static RecordBatch batch(byte[] p) {
    TestSupport.Span span = TestSupport.first(p, MessageHeader.RecordBatch);
    return (RecordBatch) TestSupport.message(p, span).header(new RecordBatch());
  }

  /** Where buffer k's {offset, length} lies in the partition. */
  private static int bufferEntry(byte[] p, int k) {
    TestSupport.Span span = TestSupport.first(p, MessageHeader.RecordBatch);
    RecordBatch rb = batch(p);
    int at = span.metaStart() + TestSupport.vectorPosition(rb, 2) + 16 * k;
    assertEquals(rb.buffers(k).offset(), getLong(p, at), "located buffer " + k);
    return at;
  }

  /** Where column c's field node {length, null_count} lies in the partition. */
  private static int nodeEntry(byte[] p, int c) {
    TestSupport.Span span = TestSupport.first(p, MessageHeader.RecordBatch);
    RecordBatch rb = batch(p);
    int at = span.metaStart() + TestSupport.vectorPosition(rb, 1) + 16 * c;
    assertEquals(rb.nodes(c).length(), getLong(p, at), "located field node " + c);
    return at;
  }

  /** Where buffer k's bytes start in the partition. */
  private static int bufferStart(byte[] p, int k) {
    TestSupport.Span span = TestSupport.first(p, MessageHeader.RecordBatch);
    return (int) (span.bodyStart() + batch(p).buffers(k).offset());
  }

  private static int firstColumnWithNulls(byte[] p) {
    RecordBatch rb = batch(p);
    for (int c = 0; c < rb.nodesLength(); c++) {
      if (rb.nodes(c).nullCount() > 0) {
        return c;
      }
    }
    throw new AssertionError("no column of the partition has a null");
  }

  /** Offset BAD_ROWS - 1 (interior: the ends stay) made one less than the one before it. */
  private static byte[] offsetFalls(byte[] p, int column, int width) {
    int o = bufferStart(p, firstBuffer(column) + 1);
    int k = BAD_ROWS - 1;
    if (width == 4) {
      putInt(p, o + 4 * k, getInt(p, o + 4 * (k - 1)) - 1);
    } else {
      putLong(p, o + 8 * k, getLong(p, o + 8 * (k - 1)) - 1);
    }
    return p;
  }
}
