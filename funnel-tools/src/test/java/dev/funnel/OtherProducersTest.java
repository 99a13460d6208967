package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.funnel.tools.Main;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Partitions written by Arrow implementations other than Arrow Java (pyarrow 25 = Arrow C++, and
 * Arrow JS 21; generators in tests/data/producers), read through funnel and compared value by
 * value with Arrow Java's reading of the same files.
 */
class OtherProducersTest {
  private static final Path DATA = Path.of(System.getProperty("funnel.root", "."), "tests", "data");

  private static FunnelDevice openDevice() {
    return TestSupport.openDevice();
  }

  private static ByteBuffer map(Path p) throws IOException {
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
      return ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
    }
  }

  /** Arrow Java's reader of a file, with its codecs for compressed bodies. */
  private static ArrowReader arrowJava(Path p, BufferAllocator a) throws IOException {
    byte[] bytes = Files.readAllBytes(p);
    if (p.toString().endsWith(".arrow")) {
      return new ArrowFileReader(new ByteArrayReadableSeekableByteChannel(bytes), a,
          CommonsCompressionFactory.INSTANCE);
    }
    return new ArrowStreamReader(new java.io.ByteArrayInputStream(bytes), a,
        CommonsCompressionFactory.INSTANCE);
  }

  private static void readsLikeArrowJava(String producer, String... files) throws IOException {
    List<Path> paths = new ArrayList<>();
    List<ByteBuffer> parts = new ArrayList<>();
    for (String f : files) {
      paths.add(DATA.resolve(producer).resolve(f));
      parts.add(map(paths.get(paths.size() - 1)));
    }
    try (BufferAllocator a = new RootAllocator();
        FunnelDevice d = openDevice();
        FunnelReader r = new FunnelReader(d);
        DeviceTable t = r.read(parts);
        VectorSchemaRoot got = t.toArrow(a)) {
      ReadStats s = t.stats();
      TestSupport.assertStatsInvariants(s, parts.size());
      long row = 0;
      long[] nulls = new long[got.getFieldVectors().size()];
      for (Path p : paths) {
        try (ArrowReader in = arrowJava(p, a)) {
          assertEquals(in.getVectorSchemaRoot().getSchema(), got.getSchema(), p.toString());
          while (in.loadNextBatch()) {
            VectorSchemaRoot want = in.getVectorSchemaRoot();
            for (int c = 0; c < want.getFieldVectors().size(); c++) {
              FieldVector w = want.getVector(c);
              FieldVector g = got.getVector(c);
              nulls[c] += w.getNullCount();
              for (int i = 0; i < want.getRowCount(); i++) {
                Object wv = w.getObject(i);
                Object gv = g.getObject((int) row + i);
                assertTrue(
                    Objects.deepEquals(wv, gv) || String.valueOf(wv).equals(String.valueOf(gv)),
                    p + " row " + i + " column " + w.getName() + ": " + gv + " != " + wv);
              }
            }
            row += want.getRowCount();
          }
        }
      }
      assertEquals(row, got.getRowCount());
      assertEquals(row, t.numRows());
      for (int c = 0; c < nulls.length; c++) {
        assertEquals(nulls[c], t.column(c).nullCount(), "null count of column " + c);
        assertEquals(nulls[c], got.getVector(c).getNullCount(), "null count of column " + c);
      }
    }
  }

  @Test
  void readsPyarrowStreamsSlicesLegacyFramingAndFileFormat() throws IOException {
    readsLikeArrowJava("pyarrow", "p0.arrows", "p1.arrows", "p2.arrows", "p3.arrows", "p4.arrow");
  }

  @Test
  void readsNestedColumnsPyarrowWrote() throws IOException {
    readsLikeArrowJava("pyarrow", "list.arrows", "list.arrows");
    readsLikeArrowJava("pyarrow", "struct.arrows");
  }

  @Test
  void readsCompressedStreamsPyarrowWrote() throws IOException {
    // Arrow C++'s LZ4 frames (linked blocks, no checksum) and ZSTD; written when funnel refused
    // compressed bodies, hence the files' names
    readsLikeArrowJava("pyarrow", "bad_lz4.arrows", "bad_zstd.arrows", "bad_lz4.arrows");
    // every type over several batches, a sliced batch, nested columns (gen_pyarrow.py)
    readsLikeArrowJava("pyarrow", "lz4_p0.arrows", "zstd_p1.arrows", "p0.arrows");
    readsLikeArrowJava("pyarrow", "nested_lz4.arrows", "nested_zstd.arrows");
    try (FunnelDevice d = openDevice();
        FunnelReader r = new FunnelReader(d);
        DeviceTable t = r.read(map(DATA.resolve("pyarrow/bad_lz4.arrows")),
            map(DATA.resolve("pyarrow/bad_zstd.arrows")))) {
      assertEquals(2, t.stats().compressedPartitions(), t.stats().toJson());
    }
  }

  @Test
  void readsArrowJsStreams() throws IOException {
    readsLikeArrowJava("arrowjs", "p0.arrows", "p1.arrows", "p2.arrows", "p3.arrows");
  }

  @Test
  void commandLineConcatenatesPyarrowFilesLikeArrowJavaReadsThem(@org.junit.jupiter.api.io.TempDir Path dir)
      throws IOException {
    concatenatesLikeArrowJava(dir, "p0.arrows", "p1.arrows", "p2.arrows", "p3.arrows", "p4.arrow");
  }

  @Test
  void commandLineConcatenatesNestedColumns(@org.junit.jupiter.api.io.TempDir Path dir)
      throws IOException {
    concatenatesLikeArrowJava(dir, "list.arrows", "list.arrows", "list.arrows");
  }

  @Test
  void commandLineConcatenatesCompressedPyarrowFiles(@org.junit.jupiter.api.io.TempDir Path dir)
      throws IOException {
    concatenatesLikeArrowJava(dir, "bad_zstd.arrows", "bad_lz4.arrows");
    concatenatesLikeArrowJava(dir, "lz4_p0.arrows", "zstd_p1.arrows");
  }

  /** `funnel concat` of pyarrow's files, compared with Arrow Java's reading of each. */
  private static void concatenatesLikeArrowJava(Path dir, String... files) throws IOException {
    List<String> args = new ArrayList<>(List.of("concat", "--backend", TestSupport.BACKEND, "-o"));
    Path out = dir.resolve("out.arrows");
    args.add(out.toString());
    for (String f : files) {
      args.add(DATA.resolve("pyarrow").resolve(f).toString());
    }
    java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
    int rc =
        Main.run(
            args.toArray(new String[0]),
            new java.io.PrintStream(new java.io.ByteArrayOutputStream()),
            new java.io.PrintStream(err));
    assertEquals(0, rc, err.toString());
    try (BufferAllocator a = new RootAllocator();
        ArrowReader got = arrowJava(out, a)) {
      assertTrue(got.loadNextBatch());
      VectorSchemaRoot g = got.getVectorSchemaRoot();
      long row = 0;
      for (String f : files) {
        try (ArrowReader in = arrowJava(DATA.resolve("pyarrow").resolve(f), a)) {
          assertEquals(in.getVectorSchemaRoot().getSchema(), g.getSchema(), f);
          while (in.loadNextBatch()) {
            VectorSchemaRoot w = in.getVectorSchemaRoot();
            for (int c = 0; c < w.getFieldVectors().size(); c++) {
              for (int i = 0; i < w.getRowCount(); i++) {
                Object wv = w.getVector(c).getObject(i);
                Object gv = g.getVector(c).getObject((int) row + i);
                assertTrue(
                    Objects.deepEquals(wv, gv) || String.valueOf(wv).equals(String.valueOf(gv)),
                    f + " row " + i + " column " + c + ": " + gv + " != " + wv);
              }
            }
            row += w.getRowCount();
          }
        }
      }
      assertEquals(row, g.getRowCount());
    }
  }

  @ParameterizedTest
  @CsvSource({
    "bad_dictionary.arrows, UnsupportedTypeException, dictionary",
    "bad_utf8_view.arrows, UnsupportedTypeException, Utf8View",
    "bad_other_schema.arrows, SchemaMismatchException, int16",
  })
  void rejectsWhatPyarrowWritesThatFunnelDoesNotRead(String file, String kind, String word)
      throws IOException {
    ByteBuffer good = map(DATA.resolve("pyarrow/p0.arrows"));
    ByteBuffer bad = map(DATA.resolve("pyarrow").resolve(file));
    try (FunnelDevice d = openDevice();
        FunnelReader r = new FunnelReader(d)) {
      FunnelException e = assertThrows(FunnelException.class, () -> r.read(good, bad));
      assertEquals(kind, e.getClass().getSimpleName(), e.getMessage());
      assertEquals(1, e.partition(), e.getMessage());
      assertTrue(e.getMessage().startsWith("partition 1: "), e.getMessage());
      assertTrue(e.getMessage().contains(word), e.getMessage());
      assertEquals(0, e.column(), e.getMessage());
      try (DeviceTable t = r.read(good)) { // the reader is still usable
        assertEquals(288, t.numRows());
      }
    }
  }
}
