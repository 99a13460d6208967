package dev.funnel;

import static dev.funnel.TestSupport.BACKEND;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.funnel.tools.Main;
import dev.funnel.tools.ResultsCsv;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code funnel bench} through Main.run, on workload directories laid out as {@code funnel_bench
 * --dump} writes them, with partitions written by Arrow Java.
 */
class BenchCommandTest {
  @TempDir Path dir;
  private Path dump;
  private BufferAllocator allocator;
  private final CliCapture cli = new CliCapture();

  @BeforeEach
  void makeDumpDirectory() throws IOException {
    dump = Files.createDirectory(dir.resolve("dump"));
    allocator = new RootAllocator();
  }

  @AfterEach
  void checkNothingLeaked() {
    assertEquals(0, allocator.getAllocatedMemory(), allocator::toVerboseString);
    allocator.close();
  }

  private int run(String... args) {
    return cli.run(args);
  }

  private String out() {
    return cli.out();
  }

  private String err() {
    return cli.err();
  }

  private String[] bench(Path csv, String... more) {
    List<String> a = new ArrayList<>(List.of("bench", "--workloads", dump.toString(),
        "--backend", BACKEND, "--reps", "1", "--jit-warmup-ms", "0", "--csv", csv.toString()));
    a.addAll(List.of(more));
    return a.toArray(new String[0]);
  }

  /** What a test workload holds, counted while writing it. */
  record Written(Path dir, long bytes, long[] nulls) {}

  private static final Schema SCHEMA =
      new Schema(
          List.of(
              TestSupport.notNull("id", new ArrowType.Int(64, true)),
              TestSupport.nullable(
                  "price", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
              TestSupport.nullable("name", ArrowType.Utf8.INSTANCE)));

  private Written writeWorkload(int parts, int rows, String mix, boolean withEmpty)
      throws IOException {
    return writeWorkload(parts, rows, mix, withEmpty, null);
  }

  /**
   * Writes {@code <P>x3x<R>-<mix>[-<codec>]}: P partitions of R rows (partition 1 an empty shuffle
   * block when {@code withEmpty}), each a whole Arrow IPC stream, their bodies compressed by
   * Arrow Java's {@code codec} (null: uncompressed), at 64-byte aligned offsets with zero gaps,
   * and the properties as funnel_bench --dump writes them.
   */
  private Written writeWorkload(int parts, int rows, String mix, boolean withEmpty,
      CodecType codec) throws IOException {
    String name = codec == null ? "none" : codec == CodecType.ZSTD ? "zstd" : "lz4";
    Path d = Files.createDirectory(dump.resolve(parts + "x3x" + rows + "-" + mix
        + (codec == null ? "" : "-" + name)));
    ByteArrayOutputStream bin = new ByteArrayOutputStream();
    long[] nulls = new long[3];
    List<String> offsets = new ArrayList<>();
    List<String> lengths = new ArrayList<>();
    long bytes = 0;
    for (int p = 0; p < parts; p++) {
      while (bin.size() % 64 != 0) {
        bin.write(0);
      }
      offsets.add(Integer.toString(bin.size()));
      byte[] stream = withEmpty && p == 1 ? new byte[0] : partition(p, rows, nulls, codec);
      bin.write(stream);
      lengths.add(Integer.toString(stream.length));
      bytes += stream.length;
    }
    bin.write(new byte[13]); // a tail past the last partition is not part of any
    Files.write(d.resolve("partitions.bin"), bin.toByteArray());
    int rowsWritten = withEmpty ? (parts - 1) * rows : parts * rows;
    String props = "# written by a test, as funnel_bench --dump writes it\n"
        + "partitions=" + parts + "\ncolumns=3\nrows_per_partition=" + rows + "\nmix=" + mix
        + (codec == null ? "" : "\ncompression=" + name)
        + "\nbytes=" + bytes + "\nrows=" + rowsWritten
        + "\noffsets=" + String.join(",", offsets) + "\nlengths=" + String.join(",", lengths)
        + "\nnulls=" + Arrays.stream(nulls).mapToObj(Long::toString)
            .collect(Collectors.joining(",")) + "\n";
    Files.writeString(d.resolve("workload.properties"), props);
    return new Written(d, bytes, nulls);
  }

  private byte[] partition(int p, int rows, long[] nulls, CodecType codec) throws IOException {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(SCHEMA, allocator)) {
      BigIntVector id = (BigIntVector) root.getVector("id");
      Float8Vector price = (Float8Vector) root.getVector("price");
      VarCharVector name = (VarCharVector) root.getVector("name");
      root.allocateNew();
      for (int i = 0; i < rows; i++) {
        int k = p * rows + i;
        id.setSafe(i, k);
        if (k % 3 == 0) {
          price.setNull(i);
          nulls[1]++;
        } else {
          price.setSafe(i, k / 4.0);
        }
        if (k % 5 == 1) {
          name.setNull(i);
          nulls[2]++;
        } else {
          name.setSafe(i, ("name-" + k).getBytes(StandardCharsets.UTF_8));
        }
      }
      root.setRowCount(rows);
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowStreamWriter w = codec == null
          ? new ArrowStreamWriter(root, null, Channels.newChannel(out))
          : new ArrowStreamWriter(root, null, Channels.newChannel(out), IpcOption.DEFAULT,
              CommonsCompressionFactory.INSTANCE, codec)) {
        w.start();
        w.writeBatch();
        w.end();
      }
      return out.toByteArray();
    }
  }

  private static List<Map<String, String>> csvRows(Path csv) throws IOException {
    return ResultsCsv.read(csv, ResultsCsv.HEADER).stream().map(ResultsCsv.Row::values).toList();
  }

  @Test
  void benchTimesEveryWorkloadFromBothSourcesAndWritesTheCDriversCsvLayout() throws IOException {
    Written small = writeWorkload(3, 40, "mixed", true);
    Written big = writeWorkload(2, 300, "int64", false);
    Path csv = dir.resolve("results").resolve("java.csv"); // its directory is created

    int status = run(bench(csv));

    assertEquals(0, status, out() + err());
    List<String> lines = Files.readAllLines(csv);
    assertEquals(String.join(",", ResultsCsv.HEADER) + ",codec", lines.get(0),
        "the header both drivers share, then the codec");
    List<Map<String, String>> rows = csvRows(csv);
    assertEquals(4, rows.size(), lines.toString());
    // sorted by mix, then shape; pinned before pageable
    List<String> order = rows.stream().map(r -> r.get("partitions") + "x" + r.get("columns") + "x"
        + r.get("rows_per_partition") + " " + r.get("mix") + " " + r.get("source")).toList();
    assertEquals(List.of("2x3x300 int64 pinned", "2x3x300 int64 pageable",
        "3x3x40 mixed pinned", "3x3x40 mixed pageable"), order);
    for (Map<String, String> r : rows) {
      Written w = r.get("mix").equals("int64") ? big : small;
      assertEquals("funnel_java", r.get("strategy"), r.toString());
      assertEquals("ok", r.get("verified"), r.toString());
      assertEquals("", r.get("error"), r.toString());
      assertEquals(Long.toString(w.bytes()), r.get("bytes"), r.toString());
      assertEquals("1", r.get("reps"), r.toString());
      if (!BACKEND.equals("auto")) {
        assertEquals(BACKEND, r.get("backend"), r.toString());
      }
      double ms = Double.parseDouble(r.get("ms_median"));
      assertTrue(ms > 0 && Double.parseDouble(r.get("ms_min")) <= ms, r.toString());
      assertEquals(w.bytes() / (ms * 1e6), Double.parseDouble(r.get("gb_per_s")),
          1e-4 + 1e-3 * w.bytes() / (ms * 1e6), r.toString());
      long copies = Long.parseLong(r.get("h2d_copies"));
      assertTrue(copies <= Long.parseLong(r.get("partitions")) + 1, r.toString());
      assertTrue(Long.parseLong(r.get("launches")) <= 1, r.toString());
      assertEquals("", r.get("calls"), "driver calls are not seen from Java");
      assertEquals("", r.get("ratio_to_link"));
    }
    assertTrue(out().contains("2x3x300"), out());
    assertTrue(out().contains("every result verified"), out());
    if (BACKEND.equals("cpu")) {
      assertTrue(out().contains("backend cpu"), out());
      assertTrue(out().contains("NOT GPU figures"), out());
    }
    assertTrue(err().contains("[1/4] 2x3x300 int64 pinned"), err());
    assertTrue(err().contains("[4/4] 3x3x40 mixed pageable"), err());

    // the chart reads what the bench wrote
    ChartCommandTest.assumeHostDrawsText();
    Path png = dir.resolve("chart.png");
    assertEquals(0, run("chart", "-o", png.toString(), "--mix", "mixed", csv.toString()), err());
    assertTrue(Files.size(png) > 1000);
  }

  @Test
  void benchChecksCompressedWorkloadsAgainstArrowJavasDecodingAndKeepsTheirCodecs()
      throws IOException {
    Written plain = writeWorkload(3, 40, "mixed", true);
    Written lz4 = writeWorkload(3, 40, "mixed", true, CodecType.LZ4_FRAME);
    Written zstd = writeWorkload(3, 40, "mixed", true, CodecType.ZSTD);
    assertTrue(lz4.bytes() != plain.bytes() && zstd.bytes() != plain.bytes(), "compressed");
    // the C driver's funnel rows of the three, a time each, the codec after the shared header
    Path c = dir.resolve("c.csv");
    StringBuilder cCsv = new StringBuilder(String.join(",", ResultsCsv.HEADER) + ",codec\n");
    for (String source : List.of("pinned", "pageable")) {
      for (String[] codecMs : List.of(new String[] {"none", "1.0"}, new String[] {"lz4", "2.0"},
          new String[] {"zstd", "3.0"})) {
        cCsv.append("cpu,3,3,40,80,mixed,").append(source).append(",funnel,1000,,3,")
            .append(codecMs[1]).append(",0.1,0.5,,,,,,,,,,,,ok,,").append(codecMs[0])
            .append("\n");
      }
    }
    Files.writeString(c, cCsv);
    Path csv = dir.resolve("java.csv");

    int status = run(bench(csv, "--c-results", c.toString()));

    assertEquals(0, status, out() + err());
    List<Map<String, String>> rows = csvRows(csv);
    assertEquals(List.of("none pinned", "none pageable", "lz4 pinned", "lz4 pageable",
        "zstd pinned", "zstd pageable"),
        rows.stream().map(r -> r.get("codec") + " " + r.get("source")).toList());
    for (Map<String, String> r : rows) {
      Written w = switch (r.get("codec")) {
        case "lz4" -> lz4;
        case "zstd" -> zstd;
        default -> plain;
      };
      assertEquals("ok", r.get("verified"), r.toString());
      assertEquals("", r.get("error"), r.toString());
      assertEquals(Long.toString(w.bytes()), r.get("bytes"), r.toString());
    }
    assertTrue(out().contains("every result verified"), out());
    // each compared with the C row of its own codec
    for (String[] labelMs : List.of(new String[] {"mixed", "1\\.000"},
        new String[] {"mixed/lz4", "2\\.000"}, new String[] {"mixed/zstd", "3\\.000"})) {
      for (String source : List.of("pinned", "pageable")) {
        String pattern = "3x3x40 +" + labelMs[0] + " +" + source + " +[0-9.]+ +" + labelMs[1]
            + " .*";
        assertTrue(out().lines().anyMatch(l -> l.matches(pattern)), pattern + " in " + out());
      }
    }
    assertTrue(err().contains("[3/6] 3x3x40 mixed/lz4 pinned"), err());

    // the chart leaves the compressed rows out, and says so
    ChartCommandTest.assumeHostDrawsText();
    assertEquals(0, run("chart", "-o", dir.resolve("chart.png").toString(), "--mix", "mixed",
        csv.toString()), err());
    assertTrue(out().contains("left out: 4 results of compressed partitions (lz4, zstd)"), out());
  }

  @Test
  void benchMarksAWorkloadWhosePropertiesDisagreeWithItsPartitionsFailedAndExits1()
      throws IOException {
    Written w = writeWorkload(3, 30, "strings", false);
    Path props = w.dir().resolve("workload.properties");
    long[] wrong = w.nulls().clone();
    wrong[2]++;
    Files.writeString(props, Files.readString(props).replace(
        "nulls=" + w.nulls()[0] + "," + w.nulls()[1] + "," + w.nulls()[2],
        "nulls=" + wrong[0] + "," + wrong[1] + "," + wrong[2]));
    Path csv = dir.resolve("java.csv");

    int status = run(bench(csv));

    assertEquals(1, status, out() + err());
    List<Map<String, String>> rows = csvRows(csv);
    assertEquals(2, rows.size());
    for (Map<String, String> r : rows) {
      assertEquals("FAILED", r.get("verified"), r.toString());
      assertTrue(r.get("error").contains("column 2"), r.toString());
    }
    assertTrue(out().contains("VERIFY FAILED"), out());
    assertTrue(out().contains("column 2: the dump says " + wrong[2] + " nulls, Arrow Java counts "
        + w.nulls()[2]), out());
    assertFalse(out().contains("every result verified"), out());
  }

  @Test
  void benchReportsAMalformedDumpAndStillRunsTheOthers() throws IOException {
    writeWorkload(2, 10, "int64", false);
    Written bad = writeWorkload(3, 10, "mixed", false);
    Path props = bad.dir().resolve("workload.properties");
    Files.writeString(props, Files.readString(props).replaceFirst("lengths=[0-9]+,", "lengths="));
    Path csv = dir.resolve("java.csv");

    int status = run(bench(csv));

    assertEquals(1, status, out() + err());
    assertTrue(out().contains("FAILED: " + props + ": lengths has 2 entries, expected 3"), out());
    assertEquals(2, csvRows(csv).size(), "the good workload still ran, from both sources");
  }

  @Test
  void benchComparesItsTimesWithTheCDriversFunnelRows() throws IOException {
    writeWorkload(2, 50, "int64", false);
    Path c = dir.resolve("c.csv");
    // as the C driver writes it, with a column appended and strategies the Java side ignores
    Function<String, String> row = s -> "cpu,2,3,50,100,int64," + s + ",1000,,3,"
        + (s.endsWith("link") ? "0.5" : "2.0") + ",0.1,0.5,,,,,,,,,,,,ok,\"a, \"\"quoted\"\" error\",7";
    Files.writeString(c, String.join(",", ResultsCsv.HEADER) + ",out_bytes\n"
        + row.apply("pinned,funnel") + "\n" + row.apply("pinned,link") + "\n"
        + row.apply("pageable,funnel") + "\n" + row.apply("pageable,kernel") + "\n");

    int status = run(bench(dir.resolve("java.csv"), "--c-results", c.toString()));

    assertEquals(0, status, out() + err());
    assertTrue(out().contains("java/C"), out());
    String pinned = out().lines().filter(l -> l.matches("2x3x50 +int64 +pinned +[0-9.]+ +2\\.000 .*"))
        .findFirst().orElse("");
    assertFalse(pinned.isEmpty(), "a comparison line for pinned against C's 2.000 ms: " + out());
    assertTrue(out().contains("geometric mean java/C:"), out());
    assertTrue(out().contains("pageable"), out());
  }

  @Test
  void benchWithoutWorkloadsFailsSayingHowToWriteThem() throws IOException {
    int status = run(bench(dir.resolve("java.csv")));

    assertEquals(1, status);
    assertTrue(err().contains("funnel_bench --dump"), err());

    status = run("bench", "--workloads", dir.resolve("missing").toString());
    assertEquals(1, status);
    assertTrue(err().contains("not a directory"), err());
  }

  @Test
  void benchCommandLineErrorsExitWithStatus2() {
    Path csv = dir.resolve("java.csv");
    for (String[] args : List.of(
        new String[] {"bench"},
        new String[] {"bench", "--backend", "cpu"},
        new String[] {"bench", "--workloads", dump.toString(), "--reps", "0"},
        new String[] {"bench", "--workloads", dump.toString(), "--reps", "many"},
        new String[] {"bench", "--workloads", dump.toString(), "--backend", "tpu"},
        new String[] {"bench", "--workloads", dump.toString(), "--fast"},
        new String[] {"bench", "--workloads"})) {
      assertEquals(2, run(args), String.join(" ", args));
      assertTrue(err().startsWith("funnel: "), err());
      assertTrue(err().contains("usage"), err());
    }
    assertFalse(Files.exists(csv));
  }
}
