package dev.funnel;

import static dev.funnel.TestSupport.BACKEND;
import static dev.funnel.TestSupport.randomStream;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.funnel.tools.Main;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The command line, through Main.run: concat and demo. */
class CommandLineTest {
  @TempDir Path dir;
  private Path in;
  private Path outDir;
  private BufferAllocator allocator;
  private final CliCapture cli = new CliCapture();

  @BeforeEach
  void makeDirectories() throws IOException {
    in = Files.createDirectory(dir.resolve("in"));
    outDir = Files.createDirectory(dir.resolve("out"));
    allocator = new RootAllocator();
  }

  @AfterEach
  void checkNothingLeaked() {
    long leaked = allocator.getAllocatedMemory();
    assertEquals(0, leaked, () -> "Arrow memory leaked:\n" + allocator.toVerboseString());
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

  private static List<String> lines(String s) {
    if (s.isEmpty()) {
      return List.of();
    }
    String t = s.endsWith("\n") ? s.substring(0, s.length() - 1) : s;
    return Arrays.asList(t.split("\n", -1));
  }

  /** Writes the partitions as files in/p<i>.arrows; returns their paths. */
  private List<Path> writeInputs(List<byte[]> partitions) throws IOException {
    List<Path> paths = new ArrayList<>();
    for (int i = 0; i < partitions.size(); i++) {
      paths.add(Files.write(in.resolve("p" + i + ".arrows"), partitions.get(i)));
    }
    return paths;
  }

  private String[] concatArgs(Path output, List<Path> inputs, String... options) {
    List<String> a = new ArrayList<>(List.of("concat", "--backend", BACKEND));
    a.addAll(List.of(options));
    a.add("-o");
    a.add(output.toString());
    inputs.forEach(p -> a.add(p.toString()));
    return a.toArray(new String[0]);
  }

  private List<byte[]> samplePartitions(long seed) {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(seed);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 7; p++) {
      parts.add(p == 4 ? new byte[0]
          : randomStream(schema, allocator, random, 0.2, random.nextInt(90), random.nextInt(9)));
    }
    return parts;
  }

  @Test
  void concatWritesTheConcatenationOfItsInputsAndPrintsStats() throws IOException {
    List<byte[]> parts = samplePartitions(61);
    List<Path> inputs = writeInputs(parts);
    Path output = outDir.resolve("OUT.arrows");

    int status = run(concatArgs(output, inputs, "--stats"));

    assertEquals(0, status, err());
    assertEquals("", err());
    byte[] written = Files.readAllBytes(output);
    long rows;
    try (ArrowStreamReader r = new ArrowStreamReader(new ByteArrayInputStream(written), allocator)) {
      VectorSchemaRoot got = r.getVectorSchemaRoot();
      assertTrue(r.loadNextBatch(), "the output holds a RecordBatch");
      rows = TestSupport.assertRowsMatch(got, parts, null, allocator).rows();
      assertEquals(TestSupport.allTypesSchema(), got.getSchema());
      assertFalse(r.loadNextBatch(), "the output holds one RecordBatch");
    }
    List<String> outLines = lines(out());
    assertEquals(1, outLines.size(), "one JSON object on stdout: " + out());
    Map<String, Long> stats = StatsInvariantsTest.parseFlatJson(outLines.get(0));
    for (String key : List.of("partitions", "rows", "h2d_copies", "concat_launches",
        "device_calls_during_plan", "bytes_h2d")) {
      assertTrue(stats.containsKey(key), key + " in " + out());
    }
    if (!BACKEND.equals("auto")) {
      assertTrue(outLines.get(0).contains("\"backend\": \"" + BACKEND + "\""), out());
    }
    long bytesWithRows = 0;
    for (byte[] p : parts) {
      bytesWithRows += TestSupport.arrowRows(p, null, allocator) > 0 ? p.length : 0;
    }
    assertEquals(inputs.size(), stats.get("partitions"), out());
    assertEquals(rows, stats.get("rows"), out());
    assertTrue(stats.get("h2d_copies") <= inputs.size() + 1, out());
    assertTrue(stats.get("concat_launches") <= stats.get("column_sets"), out());
    assertEquals(0, stats.get("device_calls_during_plan"), out());
    assertEquals(0, stats.get("device_calls_during_parse"), out());
    assertTrue(stats.get("bytes_h2d") >= bytesWithRows, out());
    assertEquals(List.of(output), listing(outDir), "no temporary file left beside the output");
  }

  @Test
  void concatWithoutStatsPrintsNothingAndReplacesAnExistingOutput() throws IOException {
    List<byte[]> parts = samplePartitions(62);
    List<Path> inputs = writeInputs(parts);
    Path output = Files.write(outDir.resolve("OUT.arrows"), new byte[] {1, 2, 3});

    assertEquals(0, run(concatArgs(output, inputs)), err());

    assertEquals("", out());
    assertEquals("", err());
    try (ArrowStreamReader r =
        new ArrowStreamReader(new ByteArrayInputStream(Files.readAllBytes(output)), allocator)) {
      assertTrue(r.loadNextBatch());
      TestSupport.assertRowsMatch(r.getVectorSchemaRoot(), parts, null, allocator);
    }
    assertEquals(List.of(output), listing(outDir));
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"garbage", "truncated", "other schema", "missing", "unsupported type",
      "directory", "name not UTF-8", "fixed_size_binary(0)"})
  void concatWithABadInputFailsWithOneLineNamingItAndLeavesNoOutput(String kind)
      throws IOException {
    List<byte[]> parts = samplePartitions(63);
    List<Path> inputs = writeInputs(parts);
    Path bad = in.resolve("bad-" + kind.replace(' ', '_') + ".arrows");
    Random random = new Random(64);
    switch (kind) {
      case "garbage" -> Files.write(bad, TestSupport.randomBytes(random, 500));
      case "truncated" -> Files.write(bad, Arrays.copyOf(parts.get(1), parts.get(1).length - 20));
      case "other schema" -> Files.write(bad, randomStream(new Schema(List.of(
          TestSupport.nullable("x", new ArrowType.Int(16, true)))), allocator, random, 0.1, 5));
      case "unsupported type" -> Files.write(bad, randomStream(new Schema(List.of(
          TestSupport.nullable("t", new ArrowType.Duration(
              org.apache.arrow.vector.types.TimeUnit.SECOND)))), allocator, random, 0, 0));
      case "directory" -> Files.createDirectory(bad);
      case "name not UTF-8" -> {
        byte[] b = parts.get(1).clone();
        TestSupport.breakUtf8(b, "large_binary");
        Files.write(bad, b);
      }
      case "fixed_size_binary(0)" -> Files.write(bad, TestSupport.fixedSizeBinary0Partition());
      default -> { } // missing: never written
    }
    inputs.add(3, bad);
    Path output = outDir.resolve("OUT.arrows");

    int status = run(concatArgs(output, inputs, "--stats"));

    assertNotEquals(0, status);
    List<String> errLines = lines(err());
    assertEquals(1, errLines.size(), "exactly one line on stderr: " + err());
    assertTrue(errLines.get(0).contains(bad.toString()), "names " + bad + ": " + err());
    assertTrue(errLines.get(0).contains(WHAT_IS_WRONG.getOrDefault(kind, "")), "says what: " + err());
    assertEquals("", out(), "no stats for a failed concat");
    assertFalse(Files.exists(output), "no output file");
    assertEquals(List.of(), listing(outDir), "no temporary file left behind");
  }

  /** What the line says for inputs Arrow Java cannot read (it once threw, with a stack trace). */
  static final Map<String, String> WHAT_IS_WRONG = Map.of(
      "name not UTF-8", ": partition 3: column 27 name is not valid UTF-8 at byte ",
      "fixed_size_binary(0)", ": partition 3: column 1 'z': fixed_size_binary(0) is not supported");

  /**
   * funnel reads more rows than an Arrow Java vector holds (a batch of no columns claims them at
   * no cost), the writer cannot: one line, no output.
   */
  @Test
  void concatOfMoreRowsThanArrowJavaHoldsFailsInOneLine() throws IOException {
    byte[] stream;
    try (VectorSchemaRoot root = VectorSchemaRoot.create(new Schema(List.of()), allocator)) {
      root.setRowCount(5);
      stream = TestSupport.streamOf(root);
    }
    TestSupport.Span batch = TestSupport.first(stream, org.apache.arrow.flatbuf.MessageHeader.RecordBatch);
    org.apache.arrow.flatbuf.RecordBatch rb = (org.apache.arrow.flatbuf.RecordBatch)
        TestSupport.message(stream, batch).header(new org.apache.arrow.flatbuf.RecordBatch());
    TestSupport.putLong(stream, batch.metaStart() + TestSupport.fieldPosition(rb, 0), 3_000_000_000L);
    List<Path> inputs = writeInputs(List.of(stream));
    Path output = outDir.resolve("OUT.arrows");

    assertEquals(1, run(concatArgs(output, inputs)));

    assertEquals(1, lines(err()).size(), err());
    assertTrue(err().startsWith("funnel: 3000000000 rows do not fit in Arrow Java vectors"), err());
    assertEquals(List.of(), listing(outDir), "no output, no temporary file");
  }

  @Test
  void concatOnCudaWithoutAGpuFailsMentioningCuda() throws IOException {
    Assumptions.assumeFalse(BACKEND.equals("cuda"), "the suite runs on a GPU");
    Assumptions.assumeFalse(Files.exists(Path.of("/dev/nvidiactl")), "this host has a GPU");
    List<Path> inputs = writeInputs(samplePartitions(65));
    Path output = outDir.resolve("OUT.arrows");
    List<String> args = new ArrayList<>(List.of(concatArgs(output, inputs)));
    args.set(2, "cuda");

    int status = run(args.toArray(new String[0]));

    assertNotEquals(0, status);
    assertTrue(err().contains("CUDA"), err());
    assertEquals(1, lines(err()).size(), err());
    assertFalse(Files.exists(output));
    assertEquals(List.of(), listing(outDir));
  }

  @Test
  void usageErrorsExitWithStatus2() {
    assertEquals(2, run());
    assertTrue(err().contains("usage"), err());
    assertEquals(2, run("shuffle"));
    assertTrue(err().contains("unknown command"), err());
    assertEquals(2, run("concat", "--backend", BACKEND, in.resolve("x.arrows").toString()));
    assertTrue(err().contains("-o"), err());
    assertEquals(2, run("concat", "-o", outDir.resolve("OUT.arrows").toString()));
    assertEquals(List.of(), listing(outDir));
  }

  @Test
  void demoVerifiesItsRead() {
    int status = run("demo", "--backend", BACKEND, "--partitions", "20", "--rows", "100");

    assertEquals(0, status, err() + out());
    assertTrue(out().contains("verified"), out());
    if (!BACKEND.equals("auto")) {
      assertTrue(out().contains("backend " + BACKEND), out());
    }
    // 20 partitions: the host parses them, and the device is not called meanwhile
    assertTrue(out().contains("headers parsed on the host (0 device calls while parsing and"
        + " planning)"), out());
  }

  @Test
  void demoSaysWhereTheHeadersWereParsed() {
    // the demo's default: 200 small partitions, which the device parses
    int status = run("demo", "--backend", BACKEND, "--partitions", "200", "--rows", "10");

    assertEquals(0, status, err() + out());
    assertTrue(out().contains("headers parsed on the device ("), out());
    assertFalse(out().contains("while parsing and planning"), out());
  }

  private static List<Path> listing(Path d) {
    try (Stream<Path> s = Files.list(d)) {
      return s.sorted().toList();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** Files the command line cannot read: a directory, a FIFO, a file over 2 GiB (sparse). */
  private List<Path> unreadableInputs() throws Exception {
    Path directory = Files.createDirectory(in.resolve("a-directory.arrows"));
    Path fifo = in.resolve("a-fifo.arrows");
    Process mkfifo = new ProcessBuilder("mkfifo", fifo.toString()).inheritIO().start();
    assertEquals(0, mkfifo.waitFor(), "mkfifo");
    Path huge = in.resolve("huge.arrows");
    try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(huge.toFile(), "rw")) {
      f.setLength((2L << 30) + 1); // sparse: nothing is written
    }
    return List.of(directory, fifo, huge);
  }

  @Test
  void inputsThatAreNotReadableFilesAreOneLineNamingThem() throws Exception {
    List<Path> good = writeInputs(samplePartitions(5));
    for (Path bad : unreadableInputs()) {
      for (String command : List.of("concat", "show")) {
        Path output = outDir.resolve("OUT.arrows");
        List<Path> inputs = List.of(good.get(0), bad, good.get(1));
        String[] args = command.equals("concat") ? concatArgs(output, inputs)
            : Stream.concat(Stream.of("show", "--backend", BACKEND),
                inputs.stream().map(Path::toString)).toArray(String[]::new);
        int status = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
            java.time.Duration.ofSeconds(30), () -> run(args), command + " " + bad);
        assertEquals(1, status, command + " " + bad + ": " + err());
        List<String> errLines = lines(err());
        assertEquals(1, errLines.size(), err());
        assertTrue(errLines.get(0).startsWith("funnel: " + bad + ": "), err());
        assertFalse(Files.exists(output), "no output file for " + bad);
      }
    }
  }

  @Test
  void anOutputInAMissingFolderIsOneLineAndNoWork() throws IOException {
    List<Path> inputs = writeInputs(samplePartitions(6));
    Path output = outDir.resolve("missing").resolve("OUT.arrows");
    assertEquals(1, run(concatArgs(output, inputs)), err());
    assertEquals(List.of("funnel: " + output + ": no such directory " + output.getParent()),
        lines(err()));
    assertFalse(Files.exists(output.getParent()));
  }

  @Test
  void outputFilesFollowTheUmask() throws IOException {
    Assumptions.assumeTrue(dir.getFileSystem().supportedFileAttributeViews().contains("posix"));
    List<Path> inputs = writeInputs(samplePartitions(7));
    Path output = outDir.resolve("OUT.arrows");
    assertEquals(0, run(concatArgs(output, inputs)), err());
    // a file this JVM creates plainly gets 0666 less the umask: what the user expects
    Path plain = Files.createFile(outDir.resolve("plain"));
    assertEquals(Files.getPosixFilePermissions(plain), Files.getPosixFilePermissions(output));
    try (Stream<Path> left = Files.list(outDir)) {
      assertEquals(List.of("OUT.arrows", "plain"),
          left.map(p -> p.getFileName().toString()).sorted().toList(), "no temporary file left");
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"demo", "concat", "show", "bench", "chart"})
  void everySubcommandTakesHelp(String command) {
    for (String help : List.of("--help", "-h")) {
      assertEquals(0, run(command, help), err());
      assertEquals("", err());
      assertTrue(out().startsWith("usage: funnel " + command + " "), out());
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"demo", "concat", "show", "bench", "chart"})
  void usageErrorsExit2(String command) {
    assertEquals(2, run(command, "--no-such-option", "x"), err());
    assertTrue(err().startsWith("funnel: "), err());
    assertEquals(2, run("demo", "--seed", "not-a-number"), err());
    assertEquals(2, run("no-such-command"), err());
  }
}
