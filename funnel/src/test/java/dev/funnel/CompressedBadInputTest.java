package dev.funnel;

import static dev.funnel.CompressedStreams.census;
import static dev.funnel.CompressedStreams.repetitive;
import static dev.funnel.CompressedStreams.stream;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.getLong;
import static dev.funnel.TestSupport.putLong;
import static dev.funnel.TestSupport.read;
import static org.apache.arrow.vector.compression.CompressionUtil.CodecType.LZ4_FRAME;
import static org.apache.arrow.vector.compression.CompressionUtil.CodecType.ZSTD;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.apache.arrow.flatbuf.BodyCompression;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Compressed partitions funnel must refuse: Arrow Java's output with a frame, a declared length, a
 * buffer's length or the codec patched at places located through Arrow's flatbuffer classes. Each
 * is a MalformedPartitionException naming the partition, the column and the buffer's offset; the
 * read leaks nothing (Arrow memory, handles, native objects, the pinned pool) and the reader still
 * reads.
 */
class CompressedBadInputTest extends DeviceTestCase {
  /** a int32, s utf8, flag bool: buffers a(0,1) s(2,3,4) flag(5,6). */
  private static final Schema SCHEMA = new Schema(List.of(
      TestSupport.nullable("a", new ArrowType.Int(32, true)),
      TestSupport.nullable("s", ArrowType.Utf8.INSTANCE),
      TestSupport.nullable("flag", ArrowType.Bool.INSTANCE)));

  /** The column of each buffer, in the schema's order. */
  private static final int[] COLUMN_OF_BUFFER = {0, 0, 1, 1, 1, 2, 2};

  private static final String[] NAME = {"a", "s", "flag"};

  private final Map<CodecType, byte[]> good = new java.util.EnumMap<>(CodecType.class);
  private FunnelReader reader;
  private long[] handles0;
  private long[] native0;

  @BeforeEach
  void writeGoodPartitionsAndWarmUp() {
    Random r = new Random(7);
    for (CodecType codec : List.of(LZ4_FRAME, ZSTD)) {
      // repeated rows: the buffers are frames, not raw bytes
      good.put(codec, stream(SCHEMA, allocator, codec, repetitive(r, 0.3, allocator), 300, 40));
      assertTrue(census(good.get(codec)).frames() >= 5, census(good.get(codec)).toString());
    }
    reader = new FunnelReader(device);
    assertReaderStillReads(); // warm: the pools exist before the counts are taken
    handles0 = TestSupport.settledLive();
    native0 = Faults.nativeLive();
  }

  @AfterEach
  void closeReader() {
    reader.close();
  }

  // ------------------------------------------------------------- the frames

  /** Where buffer k of a partition's first RecordBatch lies, its entry and its 8-byte prefix. */
  private record Buffer(int k, int start, long length, int entry, long prefix) {
    int frame() {
      return start + 8;
    }
  }

  private static Buffer buffer(byte[] p, int k) {
    TestSupport.Span batch = TestSupport.first(p, MessageHeader.RecordBatch);
    RecordBatch rb = (RecordBatch) TestSupport.message(p, batch).header(new RecordBatch());
    int start = (int) (batch.bodyStart() + rb.buffers(k).offset());
    int entry = batch.metaStart() + TestSupport.vectorPosition(rb, 2) + 16 * k;
    assertEquals(rb.buffers(k).offset(), getLong(p, entry), "located the buffer entry");
    return new Buffer(k, start, rb.buffers(k).length(), entry, getLong(p, start));
  }

  /** The buffers of the first batch that hold a frame (not raw bytes, not empty). */
  private static List<Buffer> frames(byte[] p) {
    List<Buffer> out = new ArrayList<>();
    for (int k = 0; k < COLUMN_OF_BUFFER.length; k++) {
      Buffer b = buffer(p, k);
      if (b.prefix() > 0 && b.length() >= 24) {
        out.add(b);
      }
    }
    assertTrue(out.size() >= 3, "frames in the first batch: " + out);
    return out;
  }

  interface FramePatch {
    void apply(byte[] partition, Buffer buffer);
  }

  static Stream<Arguments> framePatches() {
    List<Arguments> out = new ArrayList<>();
    for (CodecType codec : List.of(LZ4_FRAME, ZSTD)) {
      out.add(Arguments.of(codec, "the frame's magic number",
          (FramePatch) (p, b) -> p[b.frame()] ^= 0x5a));
      out.add(Arguments.of(codec, "the frame cut short (its buffer 5 bytes shorter)",
          (FramePatch) (p, b) -> putLong(p, b.entry() + 8, b.length() - 5)));
      out.add(Arguments.of(codec, "a declared length one byte more than the frame holds",
          (FramePatch) (p, b) -> putLong(p, b.start(), b.prefix() + 1)));
      out.add(Arguments.of(codec, "a declared length one byte less than the frame holds",
          (FramePatch) (p, b) -> putLong(p, b.start(), b.prefix() - 1)));
      out.add(Arguments.of(codec, "a declared length of 1",
          (FramePatch) (p, b) -> putLong(p, b.start(), 1)));
    }
    // Arrow Java's LZ4 frames carry a content checksum, which catches a byte changed anywhere
    out.add(Arguments.of(LZ4_FRAME, "a byte flipped inside the frame",
        (FramePatch) (p, b) -> p[(int) (b.frame() + (b.length() - 8) / 2)] ^= 0x01));
    out.add(Arguments.of(LZ4_FRAME, "the frame's last byte (its content checksum) changed",
        (FramePatch) (p, b) -> p[(int) (b.start() + b.length() - 1)] ^= 0x10));
    return out.stream();
  }

  @ParameterizedTest(name = "{0}: {1}")
  @MethodSource("framePatches")
  void readRejectsABrokenFrameNamingItsColumnAndOffset(CodecType codec, String what,
      FramePatch patch) {
    for (Buffer b : frames(good.get(codec))) {
      byte[] bad = good.get(codec).clone();
      patch.apply(bad, b);
      MalformedPartitionException e = expectRejected(1, bad);
      String at = codec + " buffer " + b.k() + ": " + e.getMessage();
      assertEquals(COLUMN_OF_BUFFER[b.k()], e.column(), at);
      assertEquals(b.start(), e.offset(), at);
      assertTrue(e.getMessage().contains("'" + NAME[COLUMN_OF_BUFFER[b.k()]] + "'"), at);
      assertTrue(e.getMessage().contains("buffer " + b.k()), at);
      assertTrue(e.getMessage().contains("offset " + b.start()), at);
    }
  }

  static Stream<Arguments> bombs() {
    List<Arguments> out = new ArrayList<>();
    for (CodecType codec : List.of(LZ4_FRAME, ZSTD)) {
      out.add(Arguments.of(codec, 1L << 40));
      out.add(Arguments.of(codec, Long.MAX_VALUE));
      out.add(Arguments.of(codec, -2L));
      out.add(Arguments.of(codec, Long.MIN_VALUE));
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0}: declared {1}")
  @MethodSource("bombs")
  void readRejectsADeclaredLengthNoFrameCanHold(CodecType codec, long declared) {
    // a decompression bomb, or a negative length other than -1 (raw bytes follow)
    for (Buffer b : frames(good.get(codec))) {
      byte[] bad = good.get(codec).clone();
      putLong(bad, b.start(), declared);
      MalformedPartitionException e = expectRejected(2, bad);
      String at = codec + " buffer " + b.k() + ": " + e.getMessage();
      assertEquals(COLUMN_OF_BUFFER[b.k()], e.column(), at);
      assertEquals(b.start(), e.offset(), at);
      assertTrue(e.getMessage().contains(Long.toString(declared)), at);
    }
  }

  @ParameterizedTest(name = "{0}: {1} bytes")
  @MethodSource("shortBuffers")
  void readRejectsABufferShorterThanItsPrefix(CodecType codec, long length) {
    Buffer b = frames(good.get(codec)).get(0);
    byte[] bad = good.get(codec).clone();
    putLong(bad, b.entry() + 8, length);
    MalformedPartitionException e = expectRejected(0, bad);
    assertEquals(COLUMN_OF_BUFFER[b.k()], e.column(), e.getMessage());
    assertEquals(b.start(), e.offset(), e.getMessage());
    assertTrue(e.getMessage().contains("8-byte"), e.getMessage());
  }

  static Stream<Arguments> shortBuffers() {
    return Stream.of(Arguments.of(LZ4_FRAME, 1L), Arguments.of(LZ4_FRAME, 7L),
        Arguments.of(ZSTD, 4L));
  }

  @ParameterizedTest(name = "codec byte {0}")
  @ValueSource(ints = {2, 7, 127, -1})
  void readRejectsAnUnknownCodec(int codec) {
    // Arrow Java writes ZSTD (1) into the flatbuffer; LZ4_FRAME (0), the default, it leaves out
    byte[] bad = good.get(ZSTD).clone();
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    RecordBatch rb = (RecordBatch) TestSupport.message(bad, batch).header(new RecordBatch());
    BodyCompression bc = rb.compression();
    int at = batch.metaStart() + TestSupport.fieldPosition(bc, 0);
    assertEquals(ZSTD.getType(), bad[at], "located the codec byte");
    bad[at] = (byte) codec;
    MalformedPartitionException e = expectRejected(1, bad);
    assertEquals(-1, e.column(), e.getMessage());
    assertEquals(batch.start(), e.offset(), e.getMessage());
    assertTrue(e.getMessage().contains("codec " + codec), e.getMessage());
  }

  @Test
  void aBadPartitionAmongThousandsIsNamed() {
    Random r = new Random(8);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 2000; p++) {
      parts.add(stream(SCHEMA, allocator, ZSTD, repetitive(r, 0.2, allocator), 1 + r.nextInt(30)));
    }
    byte[] bad = good.get(ZSTD).clone();
    Buffer b = frames(bad).get(1);
    putLong(bad, b.start(), b.prefix() + 3);
    parts.set(1234, bad);
    MalformedPartitionException e = assertThrows(MalformedPartitionException.class,
        () -> reader.read(direct(parts)).close());
    assertEquals(1234, e.partition(), e.getMessage());
    assertEquals(COLUMN_OF_BUFFER[b.k()], e.column(), e.getMessage());
    assertEquals(b.start(), e.offset(), e.getMessage());
    assertNothingHeld();
    assertReaderStillReads();
  }

  // --------------------------------------------------------- the libraries

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = CodecType.class, names = {"LZ4_FRAME", "ZSTD"})
  void aHostWithoutTheCodecsLibraryFailsOnlyItsReadsNamingTheLibrary(CodecType codec,
      @TempDir Path dir) throws Exception {
    Path lz4 = Files.write(dir.resolve("lz4.arrows"), good.get(LZ4_FRAME));
    Path zstd = Files.write(dir.resolve("zstd.arrows"), good.get(ZSTD));
    Path plain = Files.write(dir.resolve("plain.arrows"),
        TestSupport.randomStream(SCHEMA, allocator, new Random(9), 0.2, 20));
    // a library the loader cannot find; for ZSTD, one it finds without the ZSTD functions
    String variable = codec == LZ4_FRAME ? "FUNNEL_LZ4_LIBRARY" : "FUNNEL_ZSTD_LIBRARY";
    String library = codec == LZ4_FRAME ? "libfunnel-test-no-such-lz4.so.1" : "liblz4.so.1";
    Process child = ForkedJvm.start(CodecLibraryChild.class, Map.of(variable, library), List.of(),
        lz4.toString(), zstd.toString(), plain.toString());
    ForkedJvm.Result result = ForkedJvm.finish(child, 120);
    assertEquals(0, result.exitCode(), result.output());
    String out = result.output();
    String missing = codec == LZ4_FRAME ? lz4.toString() : zstd.toString();
    String other = codec == LZ4_FRAME ? zstd.toString() : lz4.toString();
    String failed = missing + ": UnsupportedTypeException partition 0: ";
    assertTrue(out.contains(failed), out);
    String line = out.lines().filter(l -> l.startsWith(failed)).findFirst().orElseThrow();
    assertTrue(line.contains(library) && line.contains(codec.name()), line);
    if (codec == ZSTD) {
      assertTrue(line.contains("has no ZSTD_"), line);
    }
    assertTrue(out.contains(other + ": rows 340"), out);
    assertTrue(out.contains(plain + ": rows 20"), out);
    // the first failure is kept, not retried: the second read says the same
    assertEquals(2, out.lines().filter(l -> l.startsWith(failed)).count(), out);
  }

  // ---------------------------------------------------------------- helpers

  /**
   * Reads three partitions, `bad` at `index` and good ones (both codecs) around it; asserts the
   * read fails with a MalformedPartitionException naming that partition, that nothing is held,
   * and that the reader still reads.
   */
  private MalformedPartitionException expectRejected(int index, byte[] bad) {
    List<byte[]> parts = new ArrayList<>(List.of(good.get(LZ4_FRAME), good.get(ZSTD),
        good.get(LZ4_FRAME)));
    parts.set(index, bad);
    MalformedPartitionException e = assertThrows(MalformedPartitionException.class,
        () -> reader.read(direct(parts)).close(),
        () -> "expected a MalformedPartitionException for partition " + index);
    assertEquals(MalformedPartitionException.class, e.getClass(), e.getMessage());
    assertEquals(index, e.partition(), e.getMessage());
    assertTrue(e.getMessage().startsWith("partition " + index + ": "), e.getMessage());
    assertNothingHeld();
    assertReaderStillReads();
    return e;
  }

  private void assertNothingHeld() {
    assertEquals(0, allocator.getAllocatedMemory(), "Arrow memory leaked");
    assertEquals(0, device.pinnedPool().inUse(), "pinned blocks held");
    assertArrayEquals(handles0, Handles.live(), "handles alive");
    assertArrayEquals(native0, Faults.nativeLive(),
        "native device allocations, pinned allocations, events and streams alive");
  }

  private void assertReaderStillReads() {
    List<byte[]> parts = List.of(good.get(LZ4_FRAME), good.get(ZSTD));
    try (DeviceTable table = read(reader, direct(parts))) {
      assertEquals(2, table.stats().compressedPartitions(), table.stats().toJson());
      TestSupport.assertTableMatches(table, CompressedStreams.decoded(parts, allocator), null,
          allocator);
    }
  }
}
