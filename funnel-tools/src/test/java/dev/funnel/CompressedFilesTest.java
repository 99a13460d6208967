package dev.funnel;

import static dev.funnel.CompressedStreams.decoded;
import static dev.funnel.CompressedStreams.random;
import static dev.funnel.CompressedStreams.repetitive;
import static dev.funnel.TestSupport.BACKEND;
import static org.apache.arrow.vector.compression.CompressionUtil.CodecType.LZ4_FRAME;
import static org.apache.arrow.vector.compression.CompressionUtil.CodecType.ZSTD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * show and concat on input files whose bodies Arrow Java compressed (LZ4_FRAME, ZSTD), beside
 * plain and empty ones: they read as Arrow Java reads them with its codecs, and concat writes an
 * uncompressed stream that Arrow Java reads without any codec.
 */
class CompressedFilesTest {
  private static final Schema SCHEMA = CompressedStreams.everyTypeSchema();

  @TempDir Path dir;
  private BufferAllocator allocator;
  private final CliCapture cli = new CliCapture();

  @BeforeEach
  void openAllocator() {
    allocator = new RootAllocator();
  }

  @AfterEach
  void checkNothingLeaked() {
    assertEquals(0, allocator.getAllocatedMemory(), () -> allocator.toVerboseString());
    allocator.close();
  }

  /** Compressed streams and a file, both codecs, random and repeated rows; a plain, an empty. */
  private List<byte[]> partitions() {
    Random r = new Random(71);
    return List.of(
        CompressedStreams.stream(SCHEMA, allocator, LZ4_FRAME, repetitive(r, 0.2, allocator), 60),
        CompressedStreams.stream(SCHEMA, allocator, ZSTD, random(r, 0.2), 25, 0, 9),
        CompressedStreams.plain(SCHEMA, allocator, random(r, 0.2), 14),
        new byte[0],
        CompressedStreams.file(SCHEMA, allocator, ZSTD, repetitive(r, 0.3, allocator), 33),
        CompressedStreams.stream(SCHEMA, allocator, LZ4_FRAME, random(r, 0.5), 7, 5));
  }

  private static final int COMPRESSED = 4;
  private static final long ROWS = 60 + 25 + 9 + 14 + 33 + 7 + 5;

  private List<Path> write(String prefix, List<byte[]> parts) throws IOException {
    List<Path> paths = new ArrayList<>();
    for (int i = 0; i < parts.size(); i++) {
      paths.add(Files.write(dir.resolve(prefix + i + ".arrows"), parts.get(i)));
    }
    return paths;
  }

  private static String[] args(String command, List<Path> files, String... options) {
    List<String> a = new ArrayList<>(List.of(command, "--backend", BACKEND));
    a.addAll(List.of(options));
    files.forEach(f -> a.add(f.toString()));
    return a.toArray(new String[0]);
  }

  @Test
  void showPrintsWhatItPrintsForArrowJavasDecodedCopies() throws IOException {
    List<byte[]> parts = partitions();
    List<Path> compressed = write("z", parts);
    List<Path> plain = write("d", decoded(parts, allocator));

    assertEquals(0, cli.run(args("show", compressed, "--rows", "30")), cli.err());
    String shown = cli.out();
    assertEquals("", cli.err());
    assertTrue(shown.startsWith(ROWS + " rows in 6 partitions, backend "), shown);

    // the same rows, read from the uncompressed copies Arrow Java made, print the same
    assertEquals(0, cli.run(args("show", plain, "--rows", "30")), cli.err());
    assertEquals(cli.out(), shown);
  }

  @Test
  void concatWritesAnUncompressedStreamArrowJavaReadsWithoutCodecs() throws IOException {
    List<byte[]> parts = partitions();
    List<Path> inputs = write("z", parts);
    Path output = dir.resolve("out.arrows");
    List<String> a = new ArrayList<>(List.of(args("concat", inputs, "--stats")));
    a.add("-o");
    a.add(output.toString());

    assertEquals(0, cli.run(a.toArray(new String[0])), cli.err());

    assertEquals("", cli.err());
    Map<String, Long> stats = StatsInvariantsTest.parseFlatJson(cli.out().strip());
    assertEquals(COMPRESSED, stats.get("compressed_partitions"), cli.out());
    assertEquals(ROWS, stats.get("rows"), cli.out());
    assertTrue(stats.get("bytes_decoded") > 0 && stats.get("bytes_compressed") > 0, cli.out());
    byte[] written = Files.readAllBytes(output);
    CompressedStreams.Census c = CompressedStreams.census(written);
    assertEquals(0, c.compressedBatches(), "no BodyCompression in the output: " + c);
    assertEquals(1, c.plainBatches(), c.toString());
    // Arrow Java with no codec factory: a compressed body would fail here
    try (ArrowStreamReader r = new ArrowStreamReader(new ByteArrayInputStream(written), allocator)) {
      assertTrue(r.loadNextBatch(), "the output holds a RecordBatch");
      TestSupport.Expectation e =
          TestSupport.assertRowsMatch(r.getVectorSchemaRoot(), decoded(parts, allocator), null,
              allocator);
      assertEquals(ROWS, e.rows());
      assertEquals(SCHEMA, r.getVectorSchemaRoot().getSchema());
      assertFalse(r.loadNextBatch(), "the output holds one RecordBatch");
    }
  }

  @Test
  void aCorruptFrameFailsWithOneLineNamingTheFile() throws IOException {
    List<byte[]> parts = new ArrayList<>(partitions());
    byte[] bad = parts.get(1).clone();
    // the first batch's buffer 2 (i8's validity): a frame declaring one byte more, or raw bytes
    // declared as a frame
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    RecordBatch rb = (RecordBatch) TestSupport.message(bad, batch).header(new RecordBatch());
    int start = (int) (batch.bodyStart() + rb.buffers(2).offset());
    long prefix = TestSupport.getLong(bad, start);
    TestSupport.putLong(bad, start, prefix == -1 ? rb.buffers(2).length() : prefix + 1);
    parts.set(1, bad);
    List<Path> inputs = write("z", parts);
    Path output = dir.resolve("out.arrows");
    List<String> a = new ArrayList<>(List.of(args("concat", inputs)));
    a.add("-o");
    a.add(output.toString());

    assertEquals(1, cli.run(a.toArray(new String[0])), cli.err());

    String err = cli.err();
    assertEquals(1, err.strip().lines().count(), err);
    assertTrue(err.startsWith("funnel: " + inputs.get(1) + ": partition 1: "), err);
    assertTrue(err.contains("offset " + start), err);
    assertFalse(Files.exists(output), "no output");
  }
}
