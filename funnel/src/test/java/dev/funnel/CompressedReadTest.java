package dev.funnel;

import static dev.funnel.CompressedStreams.census;
import static dev.funnel.CompressedStreams.decoded;
import static dev.funnel.CompressedStreams.plain;
import static dev.funnel.CompressedStreams.random;
import static dev.funnel.CompressedStreams.repetitive;
import static dev.funnel.CompressedStreams.stream;
import static dev.funnel.TestSupport.assertRowsMatch;
import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.checked;
import static dev.funnel.TestSupport.concat;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.read;
import static org.apache.arrow.vector.compression.CompressionUtil.CodecType.LZ4_FRAME;
import static org.apache.arrow.vector.compression.CompressionUtil.CodecType.ZSTD;
import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.apache.arrow.flatbuf.BodyCompressionMethod;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.ipc.message.ArrowBodyCompression;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Partitions whose bodies Arrow Java compressed (LZ4_FRAME, ZSTD; arrow-compression's codecs),
 * read through funnel on the host path and compared value by value with Arrow Java's reading of
 * the same bytes with those codecs; and the decode counters of ReadStats against what the
 * partitions' own flatbuffers and buffer prefixes say.
 */
class CompressedReadTest extends DeviceTestCase {
  private static final Schema EVERY_TYPE = CompressedStreams.everyTypeSchema();

  /** a int64, s utf8, l list<int64>: small, so that thousands of partitions write quickly. */
  private static final Schema SMALL = new Schema(List.of(
      TestSupport.notNull("a", new ArrowType.Int(64, true)),
      TestSupport.nullable("s", ArrowType.Utf8.INSTANCE),
      NestedReadTest.nestedSchema().getFields().get(0)));

  // ---------------------------------------------------------------- helpers

  /**
   * Asserts that `table` holds the concatenation of `partitions` as Arrow Java reads them with its
   * codecs: flat schemas through assertTableMatches (every value and the columns' buffer sizes),
   * nested ones through toArrow (every value of every level).
   */
  private void assertMatches(DeviceTable table, List<byte[]> partitions, Schema readerSchema) {
    List<byte[]> want = decoded(partitions, allocator);
    boolean nested = table.schema().getFields().stream().anyMatch(CompressedStreams::isNested);
    if (!nested) {
      assertTableMatches(table, want, readerSchema, allocator);
      return;
    }
    try (VectorSchemaRoot got = table.toArrow(allocator)) {
      TestSupport.Expectation e = assertRowsMatch(got, want, readerSchema, allocator);
      assertEquals(e.schema(), got.getSchema(), "schema of toArrow's root");
      assertEquals(e.schema(), table.schema(), "table schema");
      assertEquals(e.rows(), table.numRows(), "numRows");
    }
  }

  private void assertMatches(DeviceTable table, List<byte[]> partitions) {
    assertMatches(table, partitions, null);
  }

  /**
   * The decode counters against the partitions' census: the partitions with compressed batches,
   * their compressed buffers' bytes, and the bytes decoded (each buffer and batch 64-byte aligned
   * in the image, the plain batches beside them copied as they are) between the declared bytes
   * and those plus the alignment. A partition whose compressed batches are all empty (they
   * declare 0 bytes) may count or not: the counts are then a range, exact otherwise.
   */
  private static void assertDecodeStats(ReadStats s, List<byte[]> partitions) {
    long[] parts = new long[2];
    long[] zbytes = new long[2];
    long least = 0;
    long most = 0;
    for (byte[] p : partitions) {
      CompressedStreams.Census c = census(p);
      if (c.compressedBatches() == 0) {
        continue;
      }
      parts[1]++;
      zbytes[1] += c.bytesCompressed();
      most += c.bytesDeclared() + c.plainBodyBytes()
          + 64 * (c.buffers() + c.compressedBatches() + c.plainBatches() + 1);
      if (c.decodes()) {
        parts[0]++;
        zbytes[0] += c.bytesCompressed();
        least += c.bytesDeclared() + c.plainBodyBytes();
      }
    }
    long n = parts[0];
    long lo = least;
    long hi = most;
    assertAll("decode counters of " + s.toJson(),
        () -> assertTrue(s.compressedPartitions() >= parts[0]
                && s.compressedPartitions() <= parts[1],
            "compressedPartitions " + s.compressedPartitions() + " not in [" + parts[0] + ", "
                + parts[1] + "]"),
        () -> assertTrue(s.bytesCompressed() >= zbytes[0] && s.bytesCompressed() <= zbytes[1],
            "bytesCompressed " + s.bytesCompressed() + " not in [" + zbytes[0] + ", "
                + zbytes[1] + "]"),
        () -> assertTrue(s.bytesDecoded() >= lo && s.bytesDecoded() <= hi,
            "bytesDecoded " + s.bytesDecoded() + " not in [" + lo + ", " + hi + "]"),
        () -> assertTrue(s.compressedPartitions() == 0 ? s.decodeNanos() == 0
                : n == 0 || s.decodeNanos() > 0, "decodeNanos " + s.decodeNanos()),
        () -> assertTrue(s.decodeNanos() <= s.parseNanos(), "decodeNanos within parseNanos"),
        () -> assertTrue(s.compressedPartitions() == 0 ? s.decodedPinned() == 0
                : s.decodedPinned() == 1,
            "decodedPinned " + s.decodedPinned() + ": a small read decodes into the pinned pool"));
  }

  /** Reads, checks the table against Arrow Java and the stats against the census. */
  private void readAndCompare(FunnelReader reader, List<byte[]> partitions) {
    try (DeviceTable table = read(reader, partitions)) {
      assertMatches(table, partitions);
      assertDecodeStats(table.stats(), partitions);
    }
  }

  private void readAndCompare(List<byte[]> partitions) {
    try (FunnelReader reader = new FunnelReader(device)) {
      readAndCompare(reader, partitions);
    }
  }

  /** A stream of random or repetitive rows, by the coin. */
  private byte[] randomOrRepetitive(Schema schema, CodecType codec, Random r, double nullRate,
      int... batchRows) {
    CompressedStreams.Filler f =
        r.nextBoolean() ? random(r, nullRate) : repetitive(r, nullRate, allocator);
    return stream(schema, allocator, codec, f, batchRows);
  }

  // ------------------------------------------------------------ round trips

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void everyTypeRoundTripsWithRandomAndRepetitiveRows(CodecType codec) {
    Random r = new Random(codec.ordinal());
    List<byte[]> parts = List.of(
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 500),
        stream(EVERY_TYPE, allocator, codec, repetitive(r, 0.2, allocator), 700, 0, 300),
        stream(EVERY_TYPE, allocator, codec, random(r, 0.0), 3, 1));
    CompressedStreams.Census c = census(parts);
    // Arrow Java's three ways of writing a buffer, each met
    assertTrue(c.raw() > 0, "random rows give raw buffers (-1 prefix): " + c);
    assertTrue(c.frames() > 0, "repeated rows give frames: " + c);
    assertTrue(c.emptyPrefixed() > 0, "an empty batch gives 8-byte 0 prefixes: " + c);
    assertEquals(0, c.plainBatches(), c.toString());
    readAndCompare(parts);
  }

  static Stream<Arguments> eachTypeWithEachCodec() {
    List<Arguments> out = new ArrayList<>();
    for (Field f : EVERY_TYPE.getFields()) {
      out.add(Arguments.of(f, LZ4_FRAME));
      out.add(Arguments.of(f, ZSTD));
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("eachTypeWithEachCodec")
  void eachTypeAloneConcatenatesWithRandomNulls(Field field, CodecType codec) {
    Schema schema = new Schema(List.of(field));
    Random r = new Random(field.getName().hashCode() * 31L + codec.ordinal());
    double[] nullRates = {0.0, 0.3, 1.0, 0.5};
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 24; p++) {
      parts.add(p % 7 == 6 ? new byte[0]
          : randomOrRepetitive(schema, codec, r, nullRates[p % 4], r.nextInt(61),
              1 + r.nextInt(9)));
    }
    readAndCompare(parts);
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void emptyPartitionsSchemaOnlyStreamsAndEmptyBatchesAmongOthersContributeNoRows(
      CodecType codec) {
    Random r = new Random(20 + codec.ordinal());
    List<byte[]> parts = List.of(
        new byte[0],
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2)), // the Schema message alone
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 0, 0, 2),
        new byte[0],
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 35, 0, 5),
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2)),
        stream(EVERY_TYPE, allocator, codec, repetitive(r, 0.2, allocator), 1, 0),
        new byte[0]);
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(43, table.numRows());
      assertEquals(3, table.stats().emptyPartitions(), table.stats().toJson());
      assertMatches(table, parts);
      assertDecodeStats(table.stats(), parts);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void partitionsOfOnlyEmptyCompressedBatchesRead(CodecType codec) {
    Random r = new Random(25 + codec.ordinal());
    List<byte[]> parts = List.of(
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 0),
        stream(EVERY_TYPE, allocator, codec, repetitive(r, 0.2, allocator), 30),
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 0, 0),
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 4));
    CompressedStreams.Census empty = census(parts.get(0));
    assertTrue(!empty.decodes() && empty.emptyPrefixed() == empty.buffers()
        && empty.buffers() > 0, "an empty batch's buffers are 8-byte 0 prefixes: " + empty);
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(34, table.numRows());
      assertMatches(table, parts);
      assertDecodeStats(table.stats(), parts);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void onlyEmptyCompressedBatchesGiveAnEmptyTableWithTheirSchema(CodecType codec) {
    Random r = new Random(30 + codec.ordinal());
    List<byte[]> parts = List.of(
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 0),
        new byte[0],
        stream(EVERY_TYPE, allocator, codec, random(r, 0.2), 0, 0, 0));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(0, table.numRows());
      assertEquals(EVERY_TYPE, table.schema());
      assertMatches(table, parts);
      assertDecodeStats(table.stats(), parts);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void compressedBatchesOfASchemaWithoutColumnsCountRows(CodecType codec) {
    Schema empty = new Schema(List.of());
    Random r = new Random(35 + codec.ordinal());
    List<byte[]> parts = List.of(
        stream(empty, allocator, codec, random(r, 0), 5),
        new byte[0],
        stream(empty, allocator, codec, random(r, 0), 0, 7));
    assertEquals(3, census(parts).compressedBatches(), "compressed batches without buffers");
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(12, table.numRows());
      assertEquals(0, table.numColumns());
      assertMatches(table, parts);
      assertDecodeStats(table.stats(), parts);
    }
  }

  /**
   * LZ4 partitions of one batch each, random and repetitive rows, read by the device path, which
   * decodes them there (the cpu backend runs the device's code): the rows as Arrow Java reads
   * them, every partition taken by the device, nothing decoded on the host.
   */
  @Test
  void lz4PartitionsReadByTheDevicePath() {
    Random r = new Random(48);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 24; p++) {
      parts.add(p % 11 == 10 ? new byte[0]
          : randomOrRepetitive(SMALL, LZ4_FRAME, r, 0.25, 1 + r.nextInt(40)));
    }
    // twice: the second read guesses its decoded bytes from the first, the same partitions
    for (int round = 0; round < 2; round++) {
      try (FunnelReader reader = new FunnelReader(device).setParse(FunnelReader.Parse.DEVICE)
              .setDecode(FunnelReader.Decode.DEVICE);
          DeviceTable table = read(reader, parts)) {
        assertMatches(table, parts);
        ReadStats s = table.stats();
        String json = s.toJson();
        assertTrue(s.parsedOnDevice(), json);
        assertEquals(
            parts.stream().filter(p -> p.length > 0).count(), s.compressedPartitions(), json);
        assertEquals(0, s.decodeNanos(), json);
        assertEquals(0, s.decodedPinned(), json);
        assertTrue(s.deviceDecoded() > 0 && s.bytesDeviceDecoded() <= s.bytesDecoded(), json);
        // a small read makes both passes in one go and waits once, for the sums (decodeWaits
        // 0), unless its guess (from the device's last read) would hold more than 4 times its
        // bytes (1); the first may find its guess short and wait for its first pass too (2),
        // the second, which guesses from the first, never
        assertTrue(round == 0 || s.decodeWaits() != 2, json);
        assertEquals(1 + s.decodeWaits(), s.syncsInRead(), json);
      }
    }
  }

  @ParameterizedTest(name = "{0} partitions")
  @ValueSource(ints = {1, 2, 300, 3000})
  void manyPartitionsConcatenate(int partitions) {
    Random r = new Random(partitions);
    int maxRows = partitions >= 300 ? 6 : 400;
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      // Arrow Java's LZ4 codec allocates a 4 MiB block a buffer: ZSTD for most of thousands
      CodecType codec = p % 4 == 0 ? LZ4_FRAME : ZSTD;
      parts.add(p % 13 == 12 ? new byte[0]
          : randomOrRepetitive(SMALL, codec, r, 0.25, 1 + r.nextInt(maxRows)));
    }
    readAndCompare(parts);
  }

  @Test
  void severalBatchesAPartitionConcatenateInOrder() {
    Random r = new Random(40);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 10; p++) {
      int[] batches = new int[1 + r.nextInt(5)];
      for (int b = 0; b < batches.length; b++) {
        // empty batches among them, the last one holds rows
        batches[b] = b + 1 < batches.length && r.nextInt(3) == 0 ? 0 : 1 + r.nextInt(120);
      }
      parts.add(randomOrRepetitive(EVERY_TYPE, p % 2 == 0 ? LZ4_FRAME : ZSTD, r, 0.3, batches));
    }
    readAndCompare(parts);
  }

  @Test
  void compressedAndPlainPartitionsMixInOneRead() {
    Random r = new Random(50);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 40; p++) {
      int rows = 1 + r.nextInt(90);
      switch (p % 5) {
        case 0 -> parts.add(plain(EVERY_TYPE, allocator, random(r, 0.2), rows, 3));
        case 1 -> parts.add(randomOrRepetitive(EVERY_TYPE, LZ4_FRAME, r, 0.2, rows));
        case 2 -> parts.add(randomOrRepetitive(EVERY_TYPE, ZSTD, r, 0.2, rows, 0));
        case 3 -> parts.add(p == 13 ? new byte[0]
            : plain(EVERY_TYPE, allocator, random(r, 0.2), rows));
        default -> parts.add(randomOrRepetitive(EVERY_TYPE, ZSTD, r, 0.0, rows, rows / 2));
      }
    }
    CompressedStreams.Census c = census(parts);
    assertTrue(c.plainBatches() > 0 && c.compressedBatches() > 0, c.toString());
    readAndCompare(parts);
  }

  @Test
  void aPartitionMayMixCodecsBatchByBatch() {
    Random r = new Random(60);
    byte[] lz4 = stream(EVERY_TYPE, allocator, LZ4_FRAME, repetitive(r, 0.2, allocator), 40, 7);
    byte[] zstd = stream(EVERY_TYPE, allocator, ZSTD, random(r, 0.2), 30);
    byte[] plain = plain(EVERY_TYPE, allocator, random(r, 0.2), 20);
    // one stream: plain's Schema, then plain, LZ4 and ZSTD batches interleaved
    List<TestSupport.Span> l = TestSupport.messages(lz4);
    List<TestSupport.Span> z = TestSupport.messages(zstd);
    List<TestSupport.Span> q = TestSupport.messages(plain);
    byte[] mixed = concat(
        Arrays.copyOfRange(plain, q.get(0).start(), q.get(0).end()),
        Arrays.copyOfRange(lz4, l.get(1).start(), l.get(1).end()),
        Arrays.copyOfRange(plain, q.get(1).start(), q.get(1).end()),
        Arrays.copyOfRange(zstd, z.get(1).start(), z.get(1).end()),
        Arrays.copyOfRange(lz4, l.get(2).start(), l.get(2).end()),
        TestSupport.endOfStream());
    CompressedStreams.Census c = census(mixed);
    assertEquals(3, c.compressedBatches(), c.toString());
    assertEquals(1, c.plainBatches(), c.toString());
    List<byte[]> parts = List.of(mixed, plain, mixed);
    readAndCompare(parts);
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void compressedIpcFilesRead(CodecType codec) {
    Random r = new Random(70 + codec.ordinal());
    List<byte[]> parts = List.of(
        CompressedStreams.file(EVERY_TYPE, allocator, codec, repetitive(r, 0.3, allocator), 33, 9),
        stream(EVERY_TYPE, allocator, codec, random(r, 0.3), 12));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertMatches(table, parts);
      assertEquals(2, table.stats().compressedPartitions(), table.stats().toJson());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void bareCompressedBatchesReadWithTheReadersSchema(CodecType codec) {
    Random r = new Random(80 + codec.ordinal());
    List<byte[]> streams = new ArrayList<>();
    List<byte[]> bare = new ArrayList<>();
    for (int p = 0; p < 6; p++) {
      byte[] s = randomOrRepetitive(EVERY_TYPE, codec, r, 0.2, r.nextInt(50), 1 + r.nextInt(50));
      List<TestSupport.Span> m = TestSupport.messages(s);
      streams.add(s);
      // the RecordBatch messages alone, as a shuffle writer that sends the schema once writes
      bare.add(Arrays.copyOfRange(s, m.get(1).start(), m.get(m.size() - 1).start()));
    }
    try (FunnelReader reader = new FunnelReader(device, EVERY_TYPE);
        DeviceTable table = read(reader, bare)) {
      assertMatches(table, streams);
      assertDecodeStats(table.stats(), bare);
    }
  }

  @Test
  void rawBuffersUnderABodyCompressionAreRead() {
    // every buffer packaged as a writer does one it could not shrink: an int64 -1, the bytes
    Schema schema = new Schema(List.of(
        TestSupport.nullable("a", new ArrowType.Int(32, true)),
        TestSupport.nullable("s", ArrowType.Utf8.INSTANCE),
        TestSupport.nullable("flag", ArrowType.Bool.INSTANCE)));
    List<byte[]> parts = new ArrayList<>();
    for (CodecType codec : List.of(LZ4_FRAME, ZSTD)) {
      try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
        TestSupport.fill(root, 9, new Random(42), 0.2);
        List<ArrowBuf> packaged = new ArrayList<>();
        try (ArrowRecordBatch plain = new VectorUnloader(root).getRecordBatch()) {
          for (ArrowBuf b : plain.getBuffers()) {
            packaged.add(CompressionUtil.packageRawBuffer(allocator, b));
          }
          ArrowBodyCompression compression =
              new ArrowBodyCompression(codec.getType(), BodyCompressionMethod.BUFFER);
          try (ArrowRecordBatch compressed =
              new ArrowRecordBatch(9, plain.getNodes(), packaged, compression)) {
            parts.add(concat(TestSupport.schemaMessage(schema), TestSupport.bareBatch(compressed),
                TestSupport.endOfStream()));
          }
        } finally {
          packaged.forEach(ArrowBuf::close);
        }
      }
    }
    for (byte[] p : parts) {
      TestSupport.Span span = TestSupport.first(p, MessageHeader.RecordBatch);
      assertNotNull(((RecordBatch) TestSupport.message(p, span).header(new RecordBatch()))
          .compression(), "a BodyCompression was written");
      CompressedStreams.Census c = census(p);
      assertEquals(c.raw(), c.buffers(), "every buffer raw: " + c);
    }
    readAndCompare(parts);
  }

  @Test
  void aReadWithoutCompressedPartitionsDecodesNothing() {
    Random r = new Random(90);
    List<byte[]> parts = List.of(plain(EVERY_TYPE, allocator, random(r, 0.2), 50),
        new byte[0], plain(EVERY_TYPE, allocator, random(r, 0.2), 0, 8));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      ReadStats s = table.stats();
      assertEquals(List.of(0L, 0L, 0L, 0L, 0L), List.of(s.compressedPartitions(),
          s.bytesCompressed(), s.bytesDecoded(), s.decodeNanos(), s.decodedPinned()), s.toJson());
      assertMatches(table, parts);
    }
  }

  // -------------------------------------------------------- where the bytes lie

  /** Compressed, plain and empty partitions, for the inputs' cases. */
  private List<byte[]> inputsPartitions(long seed) {
    Random r = new Random(seed);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 30; p++) {
      int rows = 1 + r.nextInt(70);
      parts.add(p % 6 == 5 ? new byte[0]
          : p % 6 == 4 ? plain(EVERY_TYPE, allocator, random(r, 0.2), rows)
          : randomOrRepetitive(EVERY_TYPE, p % 2 == 0 ? LZ4_FRAME : ZSTD, r, 0.2, rows,
              r.nextInt(20)));
    }
    return parts;
  }

  @Test
  void partitionsInPinnedBuffersDecodeAndGiveTheirBlocksBack() {
    List<byte[]> parts = inputsPartitions(100);
    PinnedPool pool = device.pinnedPool();
    assertEquals(0, pool.inUse());
    List<PinnedBuffer> pinned = new ArrayList<>();
    try (FunnelReader reader = new FunnelReader(device)) {
      long[] addresses = new long[parts.size()];
      long[] lengths = new long[parts.size()];
      for (int p = 0; p < parts.size(); p++) {
        byte[] bytes = parts.get(p);
        if (bytes.length > 0) {
          PinnedBuffer b = pool.allocate(bytes.length);
          pinned.add(b);
          b.write(0, bytes, 0, bytes.length); // as a fetch fills it
          addresses[p] = b.address();
        }
        lengths[p] = bytes.length;
      }
      for (int k = 0; k < 2; k++) { // the second read reuses what the first gave back
        try (DeviceTable table = checked(reader.read(addresses, lengths), parts.size())) {
          assertEquals(0, table.stats().stagedPartitions(), table.stats().toJson());
          assertMatches(table, parts);
          assertDecodeStats(table.stats(), parts);
        }
      }
    } finally {
      pinned.forEach(PinnedBuffer::close);
    }
    assertEquals(0, pool.inUse(), "every pinned block, the decoded images' too, is back");
  }

  @Test
  void partitionsAtAddressesOfArrowBufsAndInDirectByteBuffersDecode() {
    List<byte[]> parts = inputsPartitions(101);
    List<ArrowBuf> bufs = new ArrayList<>();
    try (FunnelReader reader = new FunnelReader(device)) {
      long[] addresses = new long[parts.size()];
      long[] lengths = new long[parts.size()];
      for (int p = 0; p < parts.size(); p++) {
        byte[] bytes = parts.get(p);
        if (bytes.length > 0) {
          ArrowBuf b = TestSupport.arrowBuf(allocator, bytes);
          bufs.add(b);
          addresses[p] = b.memoryAddress();
        }
        lengths[p] = bytes.length;
      }
      try (DeviceTable table = checked(reader.read(addresses, lengths), parts.size())) {
        table.waitReady();
        // once ready the table owns its data: scribble over the compressed bytes
        bufs.forEach(b -> b.setOne(0, b.capacity()));
        assertMatches(table, parts);
        assertDecodeStats(table.stats(), parts);
      }
      ByteBuffer[] buffers = direct(parts);
      long[] at = new long[parts.size()];
      for (int p = 0; p < parts.size(); p++) {
        at[p] = lengths[p] == 0 ? 0 : MemoryUtil.getByteBufferAddress(buffers[p]);
      }
      try (DeviceTable table = read(reader, buffers)) {
        assertMatches(table, parts);
      }
      try (DeviceTable table = checked(reader.read(at, lengths), parts.size())) {
        assertMatches(table, parts);
      }
    } finally {
      bufs.forEach(ArrowBuf::close);
    }
    assertEquals(0, device.pinnedPool().inUse());
  }

  // ------------------------------------------------------------ the device path

  @Test
  void theDevicePathLeavesCompressedPartitionsToTheHost() {
    Random r = new Random(110);
    List<byte[]> plain = new ArrayList<>();
    List<byte[]> compressedFirst = new ArrayList<>();
    List<byte[]> compressedLater = new ArrayList<>();
    for (int p = 0; p < 150; p++) {
      byte[] q = TestSupport.randomStream(TestSupport.allTypesSchema(), allocator, r, 0.2,
          r.nextInt(8));
      plain.add(q);
      byte[] z = stream(TestSupport.allTypesSchema(), allocator, p % 2 == 0 ? ZSTD : LZ4_FRAME,
          repetitive(r, 0.2, allocator), 1 + r.nextInt(8));
      compressedFirst.add(p % 3 == 0 ? z : q);
      compressedLater.add(p % 3 == 2 ? z : q);
    }
    try (FunnelReader reader = new FunnelReader(device).setParse(FunnelReader.Parse.DEVICE)) {
      try (DeviceTable table = read(reader, plain)) {
        assertTrue(table.stats().parsedOnDevice(), "plain partitions: " + table.stats().toJson());
        assertMatches(table, plain);
      }
      for (List<byte[]> parts : List.of(compressedFirst, compressedLater)) {
        try (DeviceTable table = read(reader, parts)) {
          ReadStats s = table.stats();
          assertTrue(!s.parsedOnDevice(), "the host read them: " + s.toJson());
          assertMatches(table, parts);
          assertDecodeStats(s, parts);
        }
      }
    }
  }
}
