package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.funnel.tools.Main;
import dev.funnel.tools.ResultsCsv;
import dev.funnel.tools.Chart;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code funnel chart} through Main.run, on small results files in the C driver's layout. */
class ChartCommandTest {
  @TempDir Path dir;
  private final CliCapture cli = new CliCapture();

  private int run(String... args) {
    return cli.run(args);
  }

  private String out() {
    return cli.out();
  }

  /**
   * Whether AWT can draw text here: the GPU host has no fontconfig or fonts, and a test that needs
   * them is reported skipped there, not passed.
   */
  static boolean hostDrawsText() {
    System.setProperty("java.awt.headless", "true");
    try {
      BufferedImage image = new BufferedImage(8, 8, BufferedImage.TYPE_INT_RGB);
      java.awt.Graphics2D g = image.createGraphics();
      g.drawString("x", 1, 7);
      g.dispose();
      return true;
    } catch (RuntimeException | LinkageError e) {
      return false;
    }
  }

  static void assumeHostDrawsText() {
    Assumptions.assumeTrue(hostDrawsText(), "AWT cannot draw text on this host (no fonts)");
  }

  private String err() {
    return cli.err();
  }

  /** A row in the C driver's layout plus one appended column. */
  private static String row(String backend, int parts, int rows, String mix, String source,
      String strategy, long bytes, double ms) {
    String gb = ms > 0 ? String.format(Locale.ROOT, "%.4f", bytes / (ms * 1e6)) : "";
    String msText = ms > 0 ? String.format(Locale.ROOT, "%.6f", ms) : "";
    return String.join(",", backend, Integer.toString(parts), "4", Integer.toString(rows),
        Integer.toString(parts * rows), mix, source, strategy, Long.toString(bytes), "", "3",
        msText, msText, gb, "", "", "", "", "", "", "", "", "", "", "", "ok",
        "\"an error, \"\"quoted\"\"\"", "123");
  }

  /** Results of the C driver: three shapes, both sources, several strategies. */
  private Path cResults() throws IOException {
    StringBuilder csv = new StringBuilder(String.join(",", ResultsCsv.HEADER) + ",out_bytes\n");
    int[][] shapes = {{2, 100}, {16, 100}, {16, 10000}, {200, 1000}};
    String[] strategies = {"funnel", "funnel_copy", "link", "naive", "host_concat",
        "batched_scatter", "kernel", "d2d", "tomorrows_strategy"};
    for (int[] s : shapes) {
      long bytes = (long) s[0] * (s[1] * 32L + 600);
      for (String source : List.of("pinned", "pageable")) {
        for (int k = 0; k < strategies.length; k++) {
          double ms = 0.02 + bytes / 1e6 * (1 + k) / (source.equals("pinned") ? 20.0 : 10.0);
          csv.append(row("cpu", s[0], s[1], "int64", source, strategies[k], bytes, ms))
              .append('\n');
          csv.append(row("cpu", s[0], s[1], "strings", source, strategies[k], 2 * bytes, ms))
              .append('\n');
        }
      }
    }
    // a result that failed has no throughput: left out
    csv.append(row("cpu", 1000, 1, "int64", "pinned", "funnel", 80_000, -1)).append('\n');
    return Files.writeString(dir.resolve("c.csv"), csv);
  }

  private Path javaResults() throws IOException {
    StringBuilder csv = new StringBuilder(String.join(",", ResultsCsv.HEADER) + "\n");
    for (String source : List.of("pinned", "pageable")) {
      csv.append(row("cpu", 16, 100, "int64", source, "funnel_java", 16 * 3800, 0.5)).append('\n');
      csv.append(row("cpu", 2, 100, "int64", source, "funnel_java", 2 * 3800, 0.1)).append('\n');
    }
    return Files.writeString(dir.resolve("java.csv"), csv);
  }

  @Test
  void chartDrawsAReadablePngOfTheCAndJavaResults() throws IOException {
    assumeHostDrawsText();
    Path png = dir.resolve("out").resolve("chart.png"); // its directory is created

    int status = run("chart", "-o", png.toString(), cResults().toString(),
        javaResults().toString());

    assertEquals(0, status, err());
    BufferedImage image = ImageIO.read(png.toFile());
    assertNotNull(image, "ImageIO reads the chart back as an image");
    assertEquals(Chart.WIDTH, image.getWidth());
    assertEquals(Chart.HEIGHT, image.getHeight());
    assertTrue(distinctColours(image) > 10, "more than a blank image");
    assertTrue(out().contains("mix int64"), out());
    assertTrue(out().contains("tomorrows_strategy"), "strategies it does not know are named: "
        + out());
    assertFalse(out().contains("kernel"), "d2d and kernel are left out by design: " + out());
    try (Stream<Path> s = Files.list(png.getParent())) {
      assertEquals(List.of(png), s.toList(), "no temporary file left beside the chart");
    }
  }

  @Test
  void chartDrawsTheMixAskedFor() throws IOException {
    assumeHostDrawsText();
    Path png = dir.resolve("strings.png");

    assertEquals(0, run("chart", "--mix", "strings", "--output", png.toString(),
        cResults().toString()), err());

    assertNotNull(ImageIO.read(png.toFile()));
    assertTrue(out().contains("mix strings"), out());
  }

  @Test
  void chartWithNothingOfTheMixFailsNamingTheMixesThere() throws IOException {
    Path png = dir.resolve("chart.png");

    int status = run("chart", "-o", png.toString(), "--mix", "mixed", javaResults().toString());

    assertEquals(1, status);
    assertTrue(err().contains("mixes there: int64"), err());
    assertFalse(Files.exists(png));
  }

  @Test
  void chartLeavesCompressedPartitionsOutAndSaysSoWhenNothingElseIsThere() throws IOException {
    // the C driver's compressed rows: the codec column after the shared header
    StringBuilder csv = new StringBuilder(String.join(",", ResultsCsv.HEADER) + ",codec\n");
    for (String codec : List.of("lz4", "zstd")) {
      for (String source : List.of("pinned", "pageable")) {
        csv.append(row("cpu", 200, 100, "mixed", source, "funnel", 400_000, 0.5)
            .replaceFirst(",123$", "," + codec)).append('\n');
      }
    }
    Path png = dir.resolve("chart.png");

    int status = run("chart", "-o", png.toString(), "--mix", "mixed",
        Files.writeString(dir.resolve("c.csv"), csv).toString());

    assertEquals(1, status, out());
    assertTrue(err().contains("only 4 results of compressed partitions, lz4, zstd"), err());
    assertFalse(Files.exists(png));
  }

  @Test
  void chartOfAFileThatIsNotResultsFailsNamingIt() throws IOException {
    Path bad = Files.writeString(dir.resolve("bad.csv"), "a,b\n1,2\n");
    Path missing = dir.resolve("missing.csv");

    assertEquals(1, run("chart", "-o", dir.resolve("x.png").toString(), bad.toString()));
    assertTrue(err().contains(bad.toString()) && err().contains("no column"), err());
    assertEquals(1, run("chart", "-o", dir.resolve("x.png").toString(), missing.toString()));
    assertTrue(err().contains(missing + ": no such file"), err());
  }

  @Test
  void chartCommandLineErrorsExitWithStatus2() {
    assertEquals(2, run("chart"));
    assertTrue(err().contains("at least one results CSV"), err());
    assertTrue(err().contains("usage"), err());
    assertEquals(2, run("chart", "--width", "3", "x.csv"));
    assertTrue(err().contains("unknown chart option --width"), err());
    assertEquals(2, run("chart", "x.csv", "-o"));
    assertTrue(err().contains("-o needs a value"), err());
  }

  private static int distinctColours(BufferedImage image) {
    java.util.Set<Integer> seen = new java.util.HashSet<>();
    for (int y = 0; y < image.getHeight(); y += 7) {
      for (int x = 0; x < image.getWidth(); x += 7) {
        seen.add(image.getRGB(x, y));
      }
    }
    return seen.size();
  }
}
