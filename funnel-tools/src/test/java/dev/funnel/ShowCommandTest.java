package dev.funnel;

import static dev.funnel.TestSupport.BACKEND;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.funnel.tools.Main;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The show command, through Main.run, on files written by Arrow Java. */
class ShowCommandTest {
  private static final Schema SCHEMA = new Schema(List.of(
      TestSupport.notNull("id", new ArrowType.Int(32, true)),
      TestSupport.nullable("name", ArrowType.Utf8.INSTANCE),
      TestSupport.nullable("price", new ArrowType.Decimal(10, 2, 128))));

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
    return s.isEmpty() ? List.of() : Arrays.asList(s.split("\n"));
  }

  private static String[] args(List<Path> files, String... options) {
    List<String> a = new ArrayList<>(List.of("show", "--backend", BACKEND));
    a.addAll(List.of(options));
    files.forEach(f -> a.add(f.toString()));
    return a.toArray(new String[0]);
  }

  /** p0.arrows: (7, "apple", 1.50), (1000, null, -12345.00); p1.arrows: (3, "kiwi", null). */
  private List<Path> writeFiles() throws IOException {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(SCHEMA, allocator)) {
      root.allocateNew();
      IntVector id = (IntVector) root.getVector("id");
      VarCharVector name = (VarCharVector) root.getVector("name");
      DecimalVector price = (DecimalVector) root.getVector("price");
      id.setSafe(0, 7);
      name.setSafe(0, "apple".getBytes(StandardCharsets.UTF_8));
      price.setSafe(0, new BigDecimal("1.50"));
      id.setSafe(1, 1000);
      name.setNull(1);
      price.setSafe(1, new BigDecimal("-12345.00"));
      root.setRowCount(2);
      Path p0 = Files.write(dir.resolve("p0.arrows"), TestSupport.streamOf(root));
      root.allocateNew();
      id.setSafe(0, 3);
      name.setSafe(0, "kiwi".getBytes(StandardCharsets.UTF_8));
      price.setNull(0);
      root.setRowCount(1);
      Path p1 = Files.write(dir.resolve("p1.arrows"), TestSupport.streamOf(root));
      return List.of(p0, p1);
    }
  }

  private static String firstLine(String rest) {
    return BACKEND.equals("auto") ? rest : rest + ", backend " + BACKEND;
  }

  @Test
  void showPrintsRowsSchemaNullCountsAndTheFirstRows() throws IOException {
    assertEquals(0, run(args(writeFiles())), err());

    assertEquals("", err());
    List<String> got = lines(out());
    List<String> expected = List.of(
        firstLine("3 rows in 2 partitions"),
        "",
        "column  type               nullable  nulls",
        "------  -----------------  --------  -----",
        "id      int32              no            0",
        "name    utf8               yes           1",
        "price   decimal128(10, 2)  yes           1",
        "",
        "   id  name                 price",
        "int32  utf8     decimal128(10, 2)",
        "-----  -------  -----------------",
        "    7  \"apple\"               1.50",
        " 1000  null             -12345.00",
        "    3  \"kiwi\"                null");
    if (BACKEND.equals("auto")) {
      assertTrue(got.get(0).startsWith(expected.get(0) + ", backend "), got.get(0));
      got = new ArrayList<>(got);
      got.set(0, expected.get(0));
    }
    assertEquals(expected, got, out());
  }

  @Test
  void showRowsLimitsTheRowsAndSaysHowManyMore() throws IOException {
    assertEquals(0, run(args(writeFiles(), "--rows", "1")), err());

    List<String> got = lines(out());
    assertEquals(List.of(
        "   id  name                 price",
        "int32  utf8     decimal128(10, 2)",
        "-----  -------  -----------------",
        "    7  \"apple\"               1.50",
        "... 2 more rows"), got.subList(got.size() - 5, got.size()), out());
  }

  @Test
  void showReadsEveryType() throws IOException {
    Random random = new Random(71);
    byte[] p = TestSupport.randomStream(TestSupport.allTypesSchema(), allocator, random, 0.2, 30);
    Path file = Files.write(dir.resolve("all.arrows"), p);

    assertEquals(0, run(args(List.of(file), "--rows", "5")), err());

    List<String> got = lines(out());
    assertTrue(got.get(0).startsWith("30 rows in 1 partition"), got.get(0));
    int columns = TestSupport.supportedFields().size();
    // first line, blank, header, rule, a line per column, blank, 3 header lines, 5 rows, more
    assertEquals(2 + 2 + columns + 1 + 3 + 5 + 1, got.size(), out());
    assertEquals("... 25 more rows", got.get(got.size() - 1));
    String tsNsTz = got.get(2 + 2 + 21);
    assertTrue(tsNsTz.matches("ts_ns_tz +timestamp\\[ns, tz=Asia/Kolkata\\] +yes +[0-9]+"), tsNsTz);
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"garbage", "other schema", "missing", "name not UTF-8",
      "fixed_size_binary(0)"})
  void showWithABadFileFailsWithOneLineNamingIt(String kind) throws IOException {
    List<Path> files = new ArrayList<>(writeFiles());
    Path bad = dir.resolve("bad-" + kind.replace(' ', '_') + ".arrows");
    switch (kind) {
      case "garbage" -> Files.write(bad, TestSupport.randomBytes(new Random(72), 300));
      case "other schema" -> Files.write(bad, TestSupport.randomStream(new Schema(List.of(
          TestSupport.nullable("x", new ArrowType.Int(16, true)))), allocator, new Random(73),
          0.1, 4));
      case "name not UTF-8" -> {
        byte[] b = Files.readAllBytes(files.get(0));
        TestSupport.breakUtf8(b, "price");
        Files.write(bad, b);
      }
      case "fixed_size_binary(0)" -> Files.write(bad, TestSupport.fixedSizeBinary0Partition());
      default -> { } // missing: never written
    }
    files.add(1, bad);

    assertEquals(1, run(args(files)));

    List<String> errLines = lines(err());
    assertEquals(1, errLines.size(), err());
    assertTrue(errLines.get(0).startsWith("funnel: " + bad + ": "), err());
    assertTrue(errLines.get(0).contains(WHAT_IS_WRONG.getOrDefault(kind, "")), "says what: " + err());
    assertEquals("", out(), "nothing printed for a failed read");
  }

  /** What the line says for inputs Arrow Java cannot read (it once threw, with a stack trace). */
  private static final Map<String, String> WHAT_IS_WRONG = Map.of(
      "name not UTF-8", ": partition 1: column 2 name is not valid UTF-8 at byte ",
      "fixed_size_binary(0)", ": partition 1: column 1 'z': fixed_size_binary(0) is not supported");

  @Test
  void showWithoutFilesOrWithABadOptionIsAUsageError() throws IOException {
    List<Path> files = writeFiles();
    List<String[]> wrong = List.of(
        new String[] {"show"},
        args(List.of()),
        args(files, "--rows"),
        new String[] {"show", files.get(0).toString(), "--rows"},
        args(files, "--rows", "-1"),
        args(files, "--rows", "many"),
        args(files, "--colour"));
    for (String[] a : wrong) {
      assertEquals(2, run(a), String.join(" ", a));
      assertTrue(err().startsWith("funnel: "), err());
      assertTrue(err().contains("funnel show [--backend auto|cpu|cuda] [--rows N] FILE.arrows..."),
          "the usage names show: " + err());
      assertEquals("", out());
    }
  }
}
