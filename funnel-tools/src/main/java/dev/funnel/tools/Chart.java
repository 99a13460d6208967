package dev.funnel.tools;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.Shape;
import java.awt.Stroke;
import java.awt.geom.Ellipse2D;
import java.awt.geom.Line2D;
import java.awt.geom.Rectangle2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.text.DecimalFormat;
import java.text.DecimalFormatSymbols;
import java.text.FieldPosition;
import java.text.NumberFormat;
import java.text.ParsePosition;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import javax.imageio.ImageIO;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.LegendItem;
import org.jfree.chart.LegendItemCollection;
import org.jfree.chart.annotations.XYTitleAnnotation;
import org.jfree.chart.axis.AxisState;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberTick;
import org.jfree.chart.axis.TickType;
import org.jfree.chart.axis.ValueTick;
import org.jfree.chart.plot.CombinedRangeXYPlot;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.chart.title.LegendTitle;
import org.jfree.chart.title.TextTitle;
import org.jfree.chart.ui.RectangleAnchor;
import org.jfree.chart.ui.RectangleEdge;
import org.jfree.chart.ui.RectangleInsets;
import org.jfree.chart.ui.TextAnchor;
import org.jfree.chart.util.ShapeUtils;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * {@code funnel chart}: the benchmark's throughput (the gb_per_s column) against partition size
 * (bytes / partitions), on log axes, one panel per source, from the CSVs of the C and the Java
 * driver. One mix per chart (--mix, default int64), so that a panel stays readable. Rows of
 * compressed partitions (a codec column other than none) are left out: their gb_per_s is of the
 * compressed bytes, their strategies (decoding on the host or the device) others.
 *
 * <p>Several shapes share a partition size (the same columns x rows with 2 or 1000 partitions):
 * each is drawn as a small marker, and the strategy's line joins the geometric means of the
 * shapes of each size. Sizes within {@link #SAME_SIZE} of each other count as one (string
 * partitions of one shape differ by a few bytes).
 */
public final class Chart {
  static {
    // first, before this class's own colours and shapes load AWT: hosts have no display
    System.setProperty("java.awt.headless", "true");
  }

  private Chart() {}

  static final Path DEFAULT_PNG = Path.of("target", "bench", "chart.png");
  public static final int WIDTH = 1600;
  public static final int HEIGHT = 800;
  private static final double SAME_SIZE = 1.05;

  /** A strategy's look, the same in every panel. */
  private record Style(String strategy, Color color, Shape shape, boolean dashed) {}

  /**
   * The strategies charted, in legend order. Left out: d2d and kernel, whose gb_per_s is of the
   * output bytes, not of the partitions', and strategies this code does not know.
   */
  private static final List<Style> STYLES =
      List.of(
          new Style("funnel", new Color(0x1f77b4), new Ellipse2D.Double(-5, -5, 10, 10), false),
          new Style("funnel_java", new Color(0xff7f0e), ShapeUtils.createDiamond(6), false),
          new Style("funnel_copy", new Color(0x17becf), new Rectangle2D.Double(-4, -4, 8, 8),
              false),
          new Style("funnel_direct", new Color(0x9467bd), ShapeUtils.createUpTriangle(5.5f),
              false),
          new Style("funnel_host", new Color(0xe377c2), new Ellipse2D.Double(-3, -3, 6, 6),
              false),
          new Style("funnel_device", new Color(0xbcbd22), ShapeUtils.createDiamond(4), false),
          new Style("host_concat", new Color(0x2ca02c), ShapeUtils.createDownTriangle(5.5f),
              false),
          new Style("batched_scatter", new Color(0x8c564b),
              ShapeUtils.createRegularCross(5, 1.5f), false),
          new Style("naive", new Color(0xd62728), ShapeUtils.createDiagonalCross(5, 1.5f), false),
          new Style("link", Color.BLACK, new Rectangle2D.Double(-2, -2, 4, 4), true));

  private static final List<String> LEFT_OUT = List.of("d2d", "kernel");

  record Options(Path output, String mix, List<Path> inputs) {}

  static Options parse(String[] args) {
    Path output = DEFAULT_PNG;
    String mix = "int64";
    List<Path> inputs = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "-o", "--output" -> output = Path.of(Main.value(args, i++));
        case "--mix" -> mix = Main.value(args, i++);
        default -> {
          if (args[i].startsWith("-")) {
            throw new Main.UsageException("unknown chart option " + args[i]);
          }
          inputs.add(Path.of(args[i]));
        }
      }
    }
    if (inputs.isEmpty()) {
      throw new Main.UsageException("chart needs at least one results CSV");
    }
    return new Options(output, mix, inputs);
  }

  /** One result: a strategy's throughput on one shape and source. */
  private record Point(String source, String series, String strategy, String backend,
      double partitionBytes, double gbPerS) {}

  static int run(String[] args, PrintStream out, PrintStream err) {
    Options o = parse(args);

    List<Point> points = new ArrayList<>();
    TreeSet<String> mixes = new TreeSet<>();
    TreeSet<String> unknown = new TreeSet<>();
    TreeSet<String> backends = new TreeSet<>();
    TreeSet<String> codecs = new TreeSet<>(); // of the compressed rows of the mix, left out
    int compressed = 0;
    List<ResultsCsv.Row> rows = new ArrayList<>();
    for (Path in : o.inputs()) {
      try {
        rows.addAll(ResultsCsv.read(in,
            List.of("partitions", "bytes", "mix", "source", "strategy", "gb_per_s")));
      } catch (NoSuchFileException e) {
        err.println("funnel: " + in + ": no such file");
        return 1;
      } catch (IOException e) {
        err.println("funnel: " + Main.oneLine(e.getMessage()));
        return 1;
      }
    }
    for (ResultsCsv.Row row : rows) {
      mixes.add(row.get("mix"));
      String strategy = row.get("strategy");
      double parts = row.number("partitions");
      double bytes = row.number("bytes");
      double gb = row.number("gb_per_s");
      if (!row.get("mix").equals(o.mix()) || !(parts > 0 && bytes > 0 && gb > 0)) {
        continue; // another mix, or no throughput (failed or skipped)
      }
      String codec = row.codec();
      if (!codec.equals("none")) {
        codecs.add(codec);
        compressed++;
        continue;
      }
      if (style(strategy) == null) {
        if (!LEFT_OUT.contains(strategy)) {
          unknown.add(strategy);
        }
        continue;
      }
      backends.add(row.get("backend"));
      points.add(new Point(row.get("source"), strategy, strategy, row.get("backend"),
          bytes / parts, gb));
    }
    if (points.isEmpty()) {
      err.println("funnel: no throughput of mix '" + o.mix() + "' to chart in " + o.inputs()
          + (compressed > 0 ? " (only " + compressed + " results of compressed partitions, "
              + String.join(", ", codecs) + ", which the chart leaves out)"
              : mixes.isEmpty() ? "" : " (mixes there: " + String.join(", ", mixes) + ")"));
      return 1;
    }
    if (backends.size() > 1) { // one line per strategy and backend
      points = points.stream().map(p -> new Point(p.source(), p.strategy() + " [" + p.backend()
          + "]", p.strategy(), p.backend(), p.partitionBytes(), p.gbPerS())).toList();
    }

    try {
      write(build(points, o.mix(), backends), o.output());
    } catch (IOException e) {
      err.println("funnel: " + o.output() + ": " + Main.oneLine(e.toString()));
      return 1;
    } catch (RuntimeException | Error e) {
      if (e instanceof VirtualMachineError v) {
        throw v;
      }
      // AWT without fontconfig or any font fails here, with an Error or an NPE
      err.println("funnel: cannot draw the chart: " + Main.oneLine(e.toString())
          + " (drawing text needs fontconfig and a font, e.g. fonts-dejavu-core)");
      return 1;
    }
    out.printf("chart: %s (%d results, mix %s, backend %s)%n", o.output(), points.size(), o.mix(),
        String.join(", ", backends));
    if (!unknown.isEmpty()) {
      out.println("  left out, not known to the chart: " + String.join(", ", unknown));
    }
    if (compressed > 0) {
      out.println("  left out: " + compressed + " results of compressed partitions ("
          + String.join(", ", codecs) + ")");
    }
    return 0;
  }

  private static Style style(String strategy) {
    for (Style s : STYLES) {
      if (s.strategy().equals(strategy)) {
        return s;
      }
    }
    return null;
  }

  private static JFreeChart build(List<Point> points, String mix, TreeSet<String> backends) {
    Font tickFont = new Font(Font.SANS_SERIF, Font.PLAIN, 13);
    Font labelFont = new Font(Font.SANS_SERIF, Font.PLAIN, 15);

    LogAxis gbAxis = new DecadeAxis(
        "throughput (GB/s = 10^9 bytes of partitions per second, log)", new CompactFormat(""));
    gbAxis.setTickLabelFont(tickFont);
    gbAxis.setLabelFont(labelFont);
    gbAxis.setUpperMargin(0.12); // room for the panels' names
    CombinedRangeXYPlot plot = new CombinedRangeXYPlot(gbAxis);
    plot.setGap(24);

    // sources in a fixed order, pinned then pageable, then any other
    Map<String, List<Point>> bySource = new TreeMap<>(Comparator
        .comparingInt((String s) -> s.equals("pinned") ? 0 : s.equals("pageable") ? 1 : 2)
        .thenComparing(s -> s));
    for (Point p : points) {
      bySource.computeIfAbsent(p.source(), s -> new ArrayList<>()).add(p);
    }
    double minX = points.stream().mapToDouble(Point::partitionBytes).min().orElse(1);
    double maxX = points.stream().mapToDouble(Point::partitionBytes).max().orElse(1);
    Map<String, Style> shown = new LinkedHashMap<>(); // series -> style, for the legend
    for (Map.Entry<String, List<Point>> e : bySource.entrySet()) {
      LogAxis sizeAxis = new DecadeAxis(
          "partition size (bytes of Arrow IPC per partition, log)", new CompactFormat("B"));
      sizeAxis.setTickLabelFont(tickFont);
      sizeAxis.setLabelFont(labelFont);
      sizeAxis.setRange(minX / 1.5, maxX * 1.5); // the same in every panel

      XYSeriesCollection means = new XYSeriesCollection();
      XYSeriesCollection each = new XYSeriesCollection();
      XYLineAndShapeRenderer meanRenderer = new XYLineAndShapeRenderer(true, true);
      XYLineAndShapeRenderer eachRenderer = new XYLineAndShapeRenderer(false, true);
      Map<String, List<Point>> bySeries = new TreeMap<>(Comparator
          .comparingInt((String s) -> STYLES.indexOf(style(strategyOf(s, points))))
          .thenComparing(s -> s));
      for (Point p : e.getValue()) {
        bySeries.computeIfAbsent(p.series(), s -> new ArrayList<>()).add(p);
      }
      for (Map.Entry<String, List<Point>> s : bySeries.entrySet()) {
        Style st = style(s.getValue().get(0).strategy());
        shown.putIfAbsent(s.getKey(), st);
        int i = means.getSeriesCount();
        means.addSeries(meanSeries(s.getKey(), s.getValue()));
        meanRenderer.setSeriesPaint(i, st.color());
        meanRenderer.setSeriesShape(i, st.shape());
        meanRenderer.setSeriesStroke(i, stroke(st));
        meanRenderer.setSeriesShapesVisible(i, !st.dashed());
        if (st.dashed()) {
          continue; // the link's line is enough
        }
        XYSeries all = new XYSeries(s.getKey() + " each", true, true);
        s.getValue().forEach(p -> all.add(p.partitionBytes(), p.gbPerS()));
        int j = each.getSeriesCount();
        each.addSeries(all);
        eachRenderer.setSeriesPaint(j, translucent(st.color()));
        eachRenderer.setSeriesShape(j, small(st.shape()));
        eachRenderer.setSeriesShapesFilled(j, false);
      }
      XYPlot panel = new XYPlot(means, sizeAxis, null, meanRenderer);
      panel.setDataset(1, each);
      panel.setRenderer(1, eachRenderer);
      panel.setBackgroundPaint(Color.WHITE);
      panel.setRangeGridlinePaint(new Color(0xcccccc));
      panel.setDomainGridlinePaint(new Color(0xcccccc));
      panel.setDomainMinorGridlinesVisible(true);
      panel.setRangeMinorGridlinesVisible(true);
      panel.setDomainMinorGridlinePaint(new Color(0xeeeeee));
      panel.setRangeMinorGridlinePaint(new Color(0xeeeeee));
      panel.setDomainGridlineStroke(new BasicStroke(1f));
      panel.setRangeGridlineStroke(new BasicStroke(1f));
      panel.setDomainMinorGridlineStroke(new BasicStroke(1f));
      panel.setRangeMinorGridlineStroke(new BasicStroke(1f));
      panel.setOutlinePaint(Color.GRAY);
      TextTitle name = new TextTitle(e.getKey() + " source",
          new Font(Font.SANS_SERIF, Font.BOLD, 16));
      name.setBackgroundPaint(new Color(255, 255, 255, 210));
      name.setPadding(new RectangleInsets(2, 6, 2, 6));
      panel.addAnnotation(new XYTitleAnnotation(0.01, 0.99, name, RectangleAnchor.TOP_LEFT));
      plot.add(panel, 1);
    }

    LegendItemCollection legend = new LegendItemCollection();
    for (Map.Entry<String, Style> s : shown.entrySet()) {
      Style st = s.getValue();
      Color c = st.color();
      LegendItem item = new LegendItem(legendLabel(s.getKey()), null, null, null, !st.dashed(),
          st.shape(), true, c, false, c, stroke(st), true, new Line2D.Double(-14, 0, 14, 0),
          stroke(st), c);
      legend.add(item);
    }
    plot.setFixedLegendItems(legend);

    boolean cpu = backends.contains("cpu");
    JFreeChart chart = new JFreeChart("funnel shuffle read: throughput against partition size"
        + " (backend " + String.join(", ", backends) + ", mix " + mix + ")",
        new Font(Font.SANS_SERIF, Font.BOLD, 20), plot, true);
    chart.setBackgroundPaint(Color.WHITE);
    chart.setAntiAlias(true);
    boolean link = points.stream().anyMatch(p -> p.strategy().equals("link"));
    TextTitle how = new TextTitle("Lines join the geometric mean of the shapes with one partition"
        + " size (P partitions x C columns x R rows; P varies); small markers are each shape."
        + (link ? " Link: one copy of the same bytes, the ceiling." : ""),
        new Font(Font.SANS_SERIF, Font.PLAIN, 14));
    how.setPadding(new RectangleInsets(4, 0, 0, 0));
    chart.addSubtitle(how);
    if (cpu) {
      TextTitle warn = new TextTitle("backend cpu: no GPU is used, device memory is host memory and"
          + " every copy a memcpy: these are NOT GPU figures",
          new Font(Font.SANS_SERIF, Font.BOLD, 15));
      warn.setPaint(new Color(0xb00000));
      warn.setPadding(new RectangleInsets(4, 0, 2, 0));
      chart.addSubtitle(warn);
    }
    LegendTitle lt = chart.getLegend();
    lt.setPosition(RectangleEdge.BOTTOM);
    lt.setItemFont(new Font(Font.SANS_SERIF, Font.PLAIN, 14));
    lt.setFrame(new org.jfree.chart.block.BlockBorder(Color.LIGHT_GRAY));
    lt.setItemLabelPadding(new RectangleInsets(2, 4, 2, 14));
    return chart;
  }

  private static String strategyOf(String series, List<Point> points) {
    for (Point p : points) {
      if (p.series().equals(series)) {
        return p.strategy();
      }
    }
    return series;
  }

  private static String legendLabel(String series) {
    return switch (series) {
      case "funnel" -> "funnel (C driver)";
      case "funnel_java" -> "funnel_java (through JNI)";
      case "link" -> "link (one copy of the bytes)";
      default -> series;
    };
  }

  /** Geometric means of x and y over the points of one partition size, in order of size. */
  private static XYSeries meanSeries(String key, List<Point> points) {
    List<Point> sorted = new ArrayList<>(points);
    sorted.sort(Comparator.comparingDouble(Point::partitionBytes));
    XYSeries series = new XYSeries(key, true, true);
    int start = 0;
    for (int i = 1; i <= sorted.size(); i++) {
      if (i == sorted.size()
          || sorted.get(i).partitionBytes() > sorted.get(start).partitionBytes() * SAME_SIZE) {
        double lx = 0;
        double ly = 0;
        for (int k = start; k < i; k++) {
          lx += Math.log(sorted.get(k).partitionBytes());
          ly += Math.log(sorted.get(k).gbPerS());
        }
        series.add(Math.exp(lx / (i - start)), Math.exp(ly / (i - start)));
        start = i;
      }
    }
    return series;
  }

  private static Stroke stroke(Style st) {
    return st.dashed()
        ? new BasicStroke(2.2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10,
            new float[] {9, 6}, 0)
        : new BasicStroke(2.2f);
  }

  private static Color translucent(Color c) {
    return new Color(c.getRed(), c.getGreen(), c.getBlue(), 150);
  }

  private static Shape small(Shape s) {
    return java.awt.geom.AffineTransform.getScaleInstance(0.7, 0.7).createTransformedShape(s);
  }

  /** Writes the PNG beside the output, then moves it into place: no half-written chart. */
  private static void write(JFreeChart chart, Path output) throws IOException {
    Files.createDirectories(output.toAbsolutePath().getParent());
    BufferedImage image = chart.createBufferedImage(WIDTH, HEIGHT);
    CliFiles.write(output, os -> {
      if (!ImageIO.write(image, "png", os)) {
        throw new IOException("no PNG writer in this Java runtime");
      }
    });
  }

  /**
   * A log axis ticked at 1, 10, 100 ... (and 2, 5 between them when it spans at most three
   * decades), with unlabelled minor ticks at the other multiples: LogAxis's own choice lands on
   * fractional powers (3.16, 31.6).
   */
  private static final class DecadeAxis extends LogAxis {
    private static final long serialVersionUID = 1L;
    private final NumberFormat format;

    DecadeAxis(String label, NumberFormat format) {
      super(label);
      this.format = format;
      setNumberFormatOverride(format);
      setMinorTickMarksVisible(true);
    }

    @Override
    public List<ValueTick> refreshTicks(
        Graphics2D g2, AxisState state, Rectangle2D dataArea, RectangleEdge edge) {
      double lo = getLowerBound();
      double hi = getUpperBound();
      int k0 = (int) Math.floor(Math.log10(lo));
      int k1 = (int) Math.ceil(Math.log10(hi));
      List<Double> values = new ArrayList<>();
      for (int k = k0; k <= k1; k++) {
        for (int m = 1; m <= 9; m++) {
          double v = m * Math.pow(10, k);
          if (v >= lo && v <= hi) {
            values.add(v);
          }
        }
      }
      boolean dense = Math.log10(hi) - Math.log10(lo) <= 3;
      long majors = values.stream().filter(v -> major(v, dense)).count();
      TextAnchor anchor =
          RectangleEdge.isLeftOrRight(edge) ? TextAnchor.CENTER_RIGHT : TextAnchor.TOP_CENTER;
      List<ValueTick> ticks = new ArrayList<>();
      for (double v : values) {
        boolean major = majors < 2 || major(v, dense); // a narrow range: label every tick
        ticks.add(new NumberTick(major ? TickType.MAJOR : TickType.MINOR, v,
            major ? format.format(v) : "", anchor, anchor, 0.0));
      }
      return ticks;
    }

    private static boolean major(double v, boolean dense) {
      long m = Math.round(v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9)));
      return m == 1 || (dense && (m == 2 || m == 5));
    }
  }

  /**
   * Tick labels for log axes: 1 2 5 10 100 1k 10k 1M ..., with a unit ("B") or none; below 1 as
   * decimals (0.5, 0.01).
   */
  private static final class CompactFormat extends NumberFormat {
    private static final long serialVersionUID = 1L;
    private static final String[] PREFIXES = {"", "k", "M", "G", "T"};
    private final String unit;
    private final DecimalFormat digits =
        new DecimalFormat("0.##", DecimalFormatSymbols.getInstance(Locale.ROOT));

    CompactFormat(String unit) {
      this.unit = unit;
    }

    @Override
    public StringBuffer format(double v, StringBuffer to, FieldPosition pos) {
      int k = 0;
      while (Math.abs(v) >= 999.5 && k < PREFIXES.length - 1) {
        v /= 1000;
        k++;
      }
      String n = Math.abs(v) >= 0.01 || v == 0
          ? digits.format(v)
          : String.format(Locale.ROOT, "%.0e", v);
      String suffix = PREFIXES[k] + unit;
      return to.append(n).append(suffix.isEmpty() ? "" : " " + suffix);
    }

    @Override
    public StringBuffer format(long v, StringBuffer to, FieldPosition pos) {
      return format((double) v, to, pos);
    }

    @Override
    public Number parse(String source, ParsePosition pos) {
      return null; // labels only
    }
  }
}
