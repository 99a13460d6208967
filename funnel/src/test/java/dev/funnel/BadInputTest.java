package dev.funnel;

import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.bareBatch;
import static dev.funnel.TestSupport.concat;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.endOfStream;
import static dev.funnel.TestSupport.getInt;
import static dev.funnel.TestSupport.getLong;
import static dev.funnel.TestSupport.notNull;
import static dev.funnel.TestSupport.nullable;
import static dev.funnel.TestSupport.putInt;
import static dev.funnel.TestSupport.putLong;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static dev.funnel.TestSupport.schemaMessage;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.dictionary.Dictionary;
import org.apache.arrow.vector.dictionary.DictionaryEncoder;
import org.apache.arrow.vector.dictionary.DictionaryProvider;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.ArrowDictionaryBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.IntervalUnit;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.Types.MinorType;
import org.apache.arrow.vector.types.UnionMode;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.DictionaryEncoding;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Input funnel must refuse: each case gives the specific exception, names the partition, leaks
 * nothing, and leaves the reader usable. Bad partitions are real Arrow Java output with bytes
 * patched at places located through Arrow's own flatbuffer classes.
 */
class BadInputTest extends DeviceTestCase {
  /** a int32, s utf8, flag bool: buffers a(0,1) s(2,3,4) flag(5,6) */
  private static final Schema SCHEMA =
      new Schema(
          List.of(
              nullable("a", new ArrowType.Int(32, true)),
              nullable("s", ArrowType.Utf8.INSTANCE),
              nullable("flag", ArrowType.Bool.INSTANCE)));

  private static final int S_OFFSETS = 3;
  private static final int S_DATA = 4;

  private byte[] good;
  private FunnelReader reader;

  @BeforeEach
  void writeAGoodPartition() {
    good = randomStream(SCHEMA, allocator, new Random(40), 0.3, 6, 3);
    reader = new FunnelReader(device);
  }

  @AfterEach
  void closeReader() {
    reader.close();
  }

  // ------------------------------------------------------------- truncation

  @Test
  void readRejectsTruncatedPartitionAtEveryCutInsideAMessage() {
    Set<Integer> boundaries = boundaries(good);
    int cuts = 0;
    for (int cut = 1; cut < good.length; cut++) {
      if (boundaries.contains(cut)) {
        continue;
      }
      byte[] bad = Arrays.copyOf(good, cut);
      MalformedPartitionException e = expectRejected(MalformedPartitionException.class, 1, bad);
      assertTrue(e.offset() >= 0 && e.offset() <= cut,
          "cut at " + cut + ": offset " + e.offset() + " is not in the partition");
      cuts++;
    }
    assertTrue(cuts > good.length / 2, "tested " + cuts + " cuts");
  }

  @ParameterizedTest(name = "bad partition at {0}")
  @ValueSource(ints = {0, 2})
  void readRejectsTruncatedPartitionWhereverItSits(int index) {
    TestSupport.Span batch = TestSupport.first(good, MessageHeader.RecordBatch);
    int[] cuts = {1, 3, 7, batch.metaStart() + 5, batch.bodyStart() + 3, good.length - 3};
    for (int cut : cuts) {
      expectRejected(MalformedPartitionException.class, index, Arrays.copyOf(good, cut));
    }
  }

  @Test
  void truncationAtAMessageBoundaryReadsThePrefix() {
    for (int cut : boundaries(good)) {
      List<byte[]> parts = List.of(good, Arrays.copyOf(good, cut));
      try (DeviceTable table = read(reader, direct(parts))) {
        assertTableMatches(table, parts, null, allocator);
      }
    }
  }

  /** Where a stream may end without being malformed: message starts, and the end. */
  private static Set<Integer> boundaries(byte[] stream) {
    Set<Integer> b = new TreeSet<>();
    for (TestSupport.Span s : TestSupport.messages(stream)) {
      b.add(s.start());
    }
    b.add(stream.length);
    return b;
  }

  // ------------------------------------------------------------- flatbuffers

  static Stream<Arguments> corruptions() {
    return Stream.of(
        Arguments.of("Schema message: root offset past the metadata",
            (Patch) (p, schema, batch) -> putInt(p, schema.metaStart(), 0x7FFFFFF0)),
        Arguments.of("Schema message: vtable before the metadata",
            (Patch) (p, schema, batch) ->
                putInt(p, schema.metaStart() + getInt(p, schema.metaStart()), 0x40000000)),
        Arguments.of("Schema message: header offset past the metadata",
            (Patch) (p, schema, batch) -> putInt(p,
                schema.metaStart() + TestSupport.fieldPosition(TestSupport.message(p, schema), 2),
                0x7FFFFF00)),
        Arguments.of("Schema: fields vector longer than the metadata",
            (Patch) (p, schema, batch) -> putInt(p,
                schema.metaStart() + TestSupport.vectorPosition(schemaTable(p, schema), 1) - 4,
                0x10000000)),
        Arguments.of("RecordBatch message: root offset past the metadata",
            (Patch) (p, schema, batch) -> putInt(p, batch.metaStart(), 0x7FFFFFF0)),
        Arguments.of("RecordBatch: buffers vector longer than the metadata",
            (Patch) (p, schema, batch) -> putInt(p,
                batch.metaStart() + TestSupport.vectorPosition(batchTable(p, batch), 2) - 4,
                0x10000000)),
        Arguments.of("RecordBatch: nodes vector longer than the metadata",
            (Patch) (p, schema, batch) -> putInt(p,
                batch.metaStart() + TestSupport.vectorPosition(batchTable(p, batch), 1) - 4,
                0x0FFFFFFF)));
  }

  interface Patch {
    void apply(byte[] partition, TestSupport.Span schema, TestSupport.Span batch);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corruptions")
  void readRejectsCorruptFlatbuffers(String what, Patch patch) {
    byte[] bad = good.clone();
    patch.apply(bad, TestSupport.first(bad, MessageHeader.Schema),
        TestSupport.first(bad, MessageHeader.RecordBatch));
    expectRejected(MalformedPartitionException.class, 1, bad);
  }

  @Test
  void readRejectsBodyShorterThanItsBuffersClaim() {
    byte[] bad = good.clone();
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    RecordBatch rb = batchTable(bad, batch);
    long buffersEnd = 0;
    for (int j = 0; j < rb.buffersLength(); j++) {
      buffersEnd = Math.max(buffersEnd, rb.buffers(j).offset() + rb.buffers(j).length());
    }
    int at = batch.metaStart() + TestSupport.fieldPosition(TestSupport.message(bad, batch), 3);
    assertEquals(batch.bodyLength(), getLong(bad, at), "located Message.bodyLength");
    putLong(bad, at, buffersEnd - 1);
    assertEquals(buffersEnd - 1, TestSupport.message(bad, batch).bodyLength());
    expectRejected(MalformedPartitionException.class, 1, bad);
  }

  @Test
  void readRejectsBodyLongerThanThePartition() {
    byte[] bad = good.clone();
    List<TestSupport.Span> spans = TestSupport.messages(bad);
    TestSupport.Span last = spans.stream()
        .filter(s -> !s.eos() && s.headerType() == MessageHeader.RecordBatch)
        .reduce((x, y) -> y).orElseThrow();
    int at = last.metaStart() + TestSupport.fieldPosition(TestSupport.message(bad, last), 3);
    putLong(bad, at, last.bodyLength() + 1000);
    expectRejected(MalformedPartitionException.class, 1, bad);
  }

  /** A buffer's new (offset, length), given the body's length. */
  interface Range {
    long[] of(long bodyLength);
  }

  static Stream<Arguments> bufferRanges() {
    return Stream.of(
        Arguments.of("starts at the end of the body", S_DATA, (Range) body -> new long[] {body, 8}),
        Arguments.of("ends one byte past the body", S_DATA, (Range) body -> new long[] {0, body + 1}),
        Arguments.of("negative offset", S_OFFSETS, (Range) body -> new long[] {-8, 8}),
        Arguments.of("negative length", 0, (Range) body -> new long[] {0, -1}),
        Arguments.of("offset + length overflows", 5,
            (Range) body -> new long[] {Long.MAX_VALUE - 4, 16}),
        Arguments.of("huge length", 6, (Range) body -> new long[] {0, Long.MAX_VALUE}));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("bufferRanges")
  void readRejectsBufferRangesOutsideTheBody(String what, int buffer, Range range) {
    byte[] bad = good.clone();
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    RecordBatch rb = batchTable(bad, batch);
    long[] ol = range.of(batch.bodyLength());
    assertTrue(buffer < rb.buffersLength());
    int entry = batch.metaStart() + TestSupport.vectorPosition(rb, 2) + 16 * buffer;
    assertEquals(rb.buffers(buffer).offset(), getLong(bad, entry), "located the buffer entry");
    putLong(bad, entry, ol[0]);
    putLong(bad, entry + 8, ol[1]);
    RecordBatch patched = batchTable(bad, batch);
    assertEquals(ol[0], patched.buffers(buffer).offset());
    assertEquals(ol[1], patched.buffers(buffer).length());
    expectRejected(MalformedPartitionException.class, 1, bad);
  }

  static Stream<Arguments> nodePatches() {
    return Stream.of(
        Arguments.of("null count above the length", 0, -1L, Long.MAX_VALUE),
        Arguments.of("negative null count", 1, -1L, -1L),
        Arguments.of("length differs from the batch", 2, 1L, 0L));
  }

  /** length -1 keeps the node's length; null count Long.MAX_VALUE stands for "length + 1". */
  @ParameterizedTest(name = "{0}")
  @MethodSource("nodePatches")
  void readRejectsFieldNodesThatDisagreeWithTheBatch(
      String what, int column, long length, long nullCount) {
    byte[] bad = good.clone();
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    RecordBatch rb = batchTable(bad, batch);
    int entry = batch.metaStart() + TestSupport.vectorPosition(rb, 1) + 16 * column;
    long len = rb.nodes(column).length();
    assertEquals(len, getLong(bad, entry), "located the field node");
    long newLength = length == -1 ? len : len + length;
    putLong(bad, entry, newLength);
    putLong(bad, entry + 8, nullCount == Long.MAX_VALUE ? len + 1 : nullCount);
    MalformedPartitionException e = expectRejected(MalformedPartitionException.class, 1, bad);
    assertEquals(column, e.column(), e.getMessage());
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"last offset past the data", "first offset negative",
      "last offset before the first"})
  void readRejectsOffsetsOutsideTheDataBuffer(String what) {
    byte[] bad = good.clone();
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    RecordBatch rb = batchTable(bad, batch);
    long rows = rb.length();
    int offsets = (int) (batch.bodyStart() + rb.buffers(S_OFFSETS).offset());
    long dataLength = rb.buffers(S_DATA).length();
    int last = offsets + (int) (4 * rows);
    assertEquals(0, getInt(bad, offsets), "Arrow Java's offsets start at 0");
    switch (what) {
      case "last offset past the data" -> putInt(bad, last, (int) dataLength + 1);
      case "first offset negative" -> putInt(bad, offsets, -4);
      default -> {
        putInt(bad, offsets, 3);
        putInt(bad, last, 2);
      }
    }
    MalformedPartitionException e = expectRejected(MalformedPartitionException.class, 1, bad);
    assertEquals(1, e.column(), e.getMessage());
  }

  // ------------------------------------------------------------ unsupported

  static Stream<Arguments> unsupportedFields() {
    return Stream.of(
        Arguments.of(nullable("t32", new ArrowType.Time(TimeUnit.MILLISECOND, 32))),
        Arguments.of(nullable("t64", new ArrowType.Time(TimeUnit.MICROSECOND, 64))),
        Arguments.of(nullable("dur", new ArrowType.Duration(TimeUnit.SECOND))),
        Arguments.of(nullable("ym", new ArrowType.Interval(IntervalUnit.YEAR_MONTH))),
        Arguments.of(nullable("dt", new ArrowType.Interval(IntervalUnit.DAY_TIME))),
        Arguments.of(nullable("mdn", new ArrowType.Interval(IntervalUnit.MONTH_DAY_NANO))),
        Arguments.of(nullable("null", ArrowType.Null.INSTANCE)),
        Arguments.of(nullable("f16", new ArrowType.FloatingPoint(FloatingPointPrecision.HALF))),
        Arguments.of(nullable("d256", new ArrowType.Decimal(40, 2, 256))),
        // list, large_list, fixed_size_list, struct and map are read: NestedReadTest
        Arguments.of(new Field("union",
            FieldType.nullable(new ArrowType.Union(UnionMode.Sparse,
                new int[] {MinorType.INT.ordinal()})),
            List.of(nullable("int", new ArrowType.Int(32, true))))),
        Arguments.of(nullable("utf8_view", ArrowType.Utf8View.INSTANCE)),
        Arguments.of(nullable("binary_view", ArrowType.BinaryView.INSTANCE)));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("unsupportedFields")
  void readRejectsUnsupportedTypes(Field field) {
    Schema schema = new Schema(List.of(notNull("id", new ArrowType.Int(64, true)), field));
    byte[] bad;
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      root.allocateNew();
      root.setRowCount(0);
      bad = TestSupport.streamOf(root);
    }
    UnsupportedTypeException e = expectRejected(UnsupportedTypeException.class, 1, bad);
    assertEquals(1, e.column(), e.getMessage());
  }

  @Test
  void readRejectsDictionaryEncodedColumns() throws IOException {
    byte[] bad;
    try (VarCharVector words = new VarCharVector("words", allocator);
        VarCharVector values = new VarCharVector("word", allocator);
        BigIntVector id = new BigIntVector("id", allocator)) {
      String[] w = {"map", "reduce", "shuffle"};
      for (int i = 0; i < w.length; i++) {
        words.setSafe(i, w[i].getBytes(StandardCharsets.UTF_8));
      }
      words.setValueCount(w.length);
      for (int i = 0; i < 10; i++) {
        values.setSafe(i, w[i % 3].getBytes(StandardCharsets.UTF_8));
        id.setSafe(i, i);
      }
      values.setValueCount(10);
      id.setValueCount(10);
      Dictionary dictionary = new Dictionary(words, new DictionaryEncoding(7L, false, null));
      try (FieldVector encoded = (FieldVector) DictionaryEncoder.encode(values, dictionary);
          VectorSchemaRoot root = new VectorSchemaRoot(List.of(id, encoded))) {
        DictionaryProvider provider = new DictionaryProvider.MapDictionaryProvider(dictionary);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (ArrowStreamWriter writer =
            new ArrowStreamWriter(root, provider, Channels.newChannel(out))) {
          writer.start();
          writer.writeBatch();
          writer.end();
        }
        bad = out.toByteArray();
      }
    }
    TestSupport.first(bad, MessageHeader.DictionaryBatch); // Arrow Java wrote one
    UnsupportedTypeException e = expectRejected(UnsupportedTypeException.class, 1, bad);
    assertEquals(1, e.column(), e.getMessage());
  }

  @Test
  void readRejectsDictionaryBatchMessages() throws IOException {
    byte[] bad;
    try (VarCharVector words = new VarCharVector("words", allocator)) {
      words.setSafe(0, "a".getBytes(StandardCharsets.UTF_8));
      words.setValueCount(1);
      try (VectorSchemaRoot root = VectorSchemaRoot.of(words);
          ArrowDictionaryBatch batch =
              new ArrowDictionaryBatch(3L, new VectorUnloader(root).getRecordBatch(), false)) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        MessageSerializer.serialize(new WriteChannel(Channels.newChannel(out)), batch);
        bad = out.toByteArray();
      }
    }
    byte[] goodBare;
    try (VectorSchemaRoot root = VectorSchemaRoot.create(SCHEMA, allocator)) {
      TestSupport.fill(root, 4, new Random(41), 0.2);
      goodBare = bareBatch(root);
    }
    try (FunnelReader withSchema = new FunnelReader(device, SCHEMA)) {
      UnsupportedTypeException e = assertThrows(UnsupportedTypeException.class,
          () -> withSchema.read(direct(goodBare), direct(bad)).close());
      assertEquals(1, e.partition(), e.getMessage());
      assertTrue(e.getMessage().contains("partition 1"), e.getMessage());
      try (DeviceTable table = read(withSchema, direct(goodBare))) {
        assertTableMatches(table, List.of(goodBare), SCHEMA, allocator);
      }
    }
  }

  // ---------------------------------------------------------------- garbage

  static Stream<Arguments> garbage() {
    Random random = new Random(43);
    byte[] text = "this is not an Arrow stream\n".repeat(20).getBytes(StandardCharsets.US_ASCII);
    byte[] ffs = new byte[64];
    Arrays.fill(ffs, (byte) 0xFF);
    byte[] hugeLength = new byte[64];
    putInt(hugeLength, 0, -1);
    putInt(hugeLength, 4, 0x7FFFFFFF);
    byte[] fileMagic = concat("ARROW1\0\0".getBytes(StandardCharsets.US_ASCII),
        TestSupport.randomBytes(random, 200));
    return Stream.of(
        Arguments.of("random bytes", TestSupport.randomBytes(random, 1000),
            MalformedPartitionException.class),
        Arguments.of("three random bytes", TestSupport.randomBytes(random, 3),
            MalformedPartitionException.class),
        Arguments.of("text", text, MalformedPartitionException.class),
        Arguments.of("0xFF bytes", ffs, MalformedPartitionException.class),
        Arguments.of("continuation marker and a huge length", hugeLength,
            MalformedPartitionException.class),
        Arguments.of("IPC file magic without a footer", fileMagic,
            MalformedPartitionException.class));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("garbage")
  void readRejectsGarbage(String what, byte[] bad, Class<? extends InvalidPartitionException> type) {
    expectRejected(type, 1, bad);
  }

  @Test
  void readRejectsTensorMessages() {
    byte[] bad = withBatchHeaderType(MessageHeader.Tensor);
    expectRejected(UnsupportedTypeException.class, 1, bad);
  }

  @Test
  void readRejectsUnknownMessageHeaderTypes() {
    byte[] bad = withBatchHeaderType((byte) 9);
    expectRejected(MalformedPartitionException.class, 1, bad);
  }

  @Test
  void readRejectsMetadataOlderThanV4() {
    byte[] bad = good.clone();
    TestSupport.Span schema = TestSupport.first(bad, MessageHeader.Schema);
    int at = schema.metaStart() + TestSupport.fieldPosition(TestSupport.message(bad, schema), 0);
    bad[at] = 2; // MetadataVersion V3
    bad[at + 1] = 0;
    assertEquals(2, TestSupport.message(bad, schema).version());
    expectRejected(UnsupportedTypeException.class, 1, bad);
  }

  @Test
  void readRejectsHeapByteBuffer() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> reader.read(direct(good), ByteBuffer.wrap(good), direct(good)));
    assertTrue(e.getMessage().contains("partition 1"), e.getMessage());
    assertReaderStillReads();
  }

  /** The good partition with its first RecordBatch message's header type set to `type`. */
  private byte[] withBatchHeaderType(byte type) {
    byte[] bad = good.clone();
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    int at = batch.metaStart() + TestSupport.fieldPosition(TestSupport.message(bad, batch), 1);
    bad[at] = type;
    assertEquals(type, TestSupport.message(bad, batch).headerType());
    return bad;
  }

  // ---------------------------------------------------------------- helpers

  private static RecordBatch batchTable(byte[] p, TestSupport.Span batch) {
    return (RecordBatch) TestSupport.message(p, batch).header(new RecordBatch());
  }

  private static org.apache.arrow.flatbuf.Schema schemaTable(byte[] p, TestSupport.Span schema) {
    return (org.apache.arrow.flatbuf.Schema)
        TestSupport.message(p, schema).header(new org.apache.arrow.flatbuf.Schema());
  }

  /**
   * Reads three partitions, `bad` at `index` and good ones around it; asserts the read fails with
   * `type` naming that partition, that nothing leaked, and that the reader still reads.
   */
  private <T extends RuntimeException> T expectRejected(Class<T> type, int index, byte[] bad) {
    List<byte[]> parts = new ArrayList<>(List.of(good, good, good));
    parts.set(index, bad);
    T e = assertThrows(type, () -> reader.read(direct(parts)).close(),
        () -> "expected " + type.getSimpleName() + " for partition " + index);
    String message = e.getMessage();
    if (e instanceof FunnelException f) {
      assertEquals(index, f.partition(), message);
      assertEquals(type, f.getClass(), message);
    }
    assertTrue(message.contains("partition " + index), message);
    assertEquals(0, allocator.getAllocatedMemory(), "Arrow memory leaked");
    assertReaderStillReads();
    return e;
  }

  private void assertReaderStillReads() {
    List<byte[]> parts = List.of(good);
    try (DeviceTable table = read(reader, direct(parts))) {
      assertTableMatches(table, parts, null, allocator);
    }
  }
}
