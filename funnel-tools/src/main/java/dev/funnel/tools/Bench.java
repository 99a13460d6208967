package dev.funnel.tools;

import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelException;
import dev.funnel.FunnelReader;
import dev.funnel.PinnedBuffer;
import dev.funnel.PinnedPool;
import dev.funnel.ReadStats;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;

/**
 * {@code funnel bench}: the Java driver of the shuffle-read benchmark. It reads the workloads that
 * {@code funnel_bench --dump DIR} wrote, the same bytes the C driver timed, through JNI, and
 * times each read as the C driver times its "funnel" strategy: {@code read} + {@code waitReady}
 * on one device and one reader for the whole run, 2 warm-up and N timed iterations, the median
 * reported; closing the table is outside the clock. Before the first workload, untimed reads warm
 * the JIT up (--jit-warmup-ms). The difference to the C figures is what JNI and the Java wrappers
 * cost.
 *
 * <p>Each workload is checked once per source, untimed: the rows and the null count of every
 * column that funnel reads must equal what Arrow Java reads in the same partitions, and what the
 * dump's properties say. Compressed partitions (LZ4_FRAME, ZSTD) are decoded for that check by
 * Arrow Java's own codecs (arrow-compression), not by funnel.
 */
final class Bench {
  private Bench() {}

  static final int WARMUP = 2;
  static final String STRATEGY = "funnel_java";
  static final Path DEFAULT_CSV = Path.of("target", "bench", "java.csv");

  /** The CSV's columns: the header both drivers share, then the codec, as the C driver has it. */
  static final List<String> COLUMNS = Stream.concat(ResultsCsv.HEADER.stream(), Stream.of("codec"))
      .toList();

  /** The ratio java/C the Java driver is meant to stay under. */
  private static final double TARGET_RATIO = 1.10;

  private static final String CPU_WARNING =
      "*** backend cpu: no GPU is used. \"Device memory\" is host memory and streams are\n"
          + "*** worker threads, so every copy is a memcpy: these are NOT GPU figures. On cpu the\n"
          + "*** run checks the harness, the correctness and the JNI overhead, not GPU speed.";

  record Options(
      Path workloads, String backend, int reps, Path csv, Path cResults, int jitWarmupMs) {}

  static Options parse(String[] args) {
    Path workloads = null;
    String backend = "auto";
    int reps = 7;
    Path csv = DEFAULT_CSV;
    Path cResults = null;
    int jitWarmupMs = 1000;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--workloads" -> workloads = Path.of(Main.value(args, i++));
        case "--backend" -> {
          backend = Main.value(args, i++);
          if (!List.of("auto", "cpu", "cuda").contains(backend)) {
            throw new Main.UsageException(
                "unknown backend '" + backend + "': expected auto, cpu or cuda");
          }
        }
        case "--reps" -> reps = count(args, i++, 1);
        case "--csv" -> csv = Path.of(Main.value(args, i++));
        case "--c-results" -> cResults = Path.of(Main.value(args, i++));
        case "--jit-warmup-ms" -> jitWarmupMs = count(args, i++, 0);
        default -> throw new Main.UsageException("unknown bench option " + args[i]);
      }
    }
    if (workloads == null) {
      throw new Main.UsageException(
          "bench needs --workloads DIR (written by funnel_bench --dump DIR)");
    }
    return new Options(workloads, backend, reps, csv, cResults, jitWarmupMs);
  }

  private static int count(String[] args, int i, int min) {
    String v = Main.value(args, i);
    try {
      int n = Integer.parseInt(v);
      if (n >= min) {
        return n;
      }
    } catch (NumberFormatException ignored) {
      // reported below
    }
    throw new Main.UsageException(
        args[i] + " needs an integer of at least " + min + ", got '" + v + "'");
  }

  /** What Arrow Java reads in a workload's partitions: the expected answer of a read. */
  record Expected(long rows, int columns, long[] nulls) {}

  /** One timed strategy on one source; msMedian is NaN when it failed (see error). */
  record Measurement(double msMedian, double msMin, ReadStats last, String error) {}

  /** A row of the results. */
  record Result(Workload workload, String source, boolean verified, Measurement m) {}

  /** How one source hands its partitions to the reader. */
  interface Source {
    DeviceTable read(FunnelReader reader);
  }

  static int run(String[] args, PrintStream out, PrintStream err) {
    Options o = parse(args);
    if (!Files.isDirectory(o.workloads())) {
      err.println("funnel: " + o.workloads() + ": not a directory");
      return 1;
    }
    List<ResultsCsv.Row> cRows = null;
    List<Workload> workloads = new ArrayList<>();
    List<String> broken = new ArrayList<>();
    try {
      if (o.cResults() != null) {
        cRows = ResultsCsv.read(o.cResults(), List.of("partitions", "columns",
            "rows_per_partition", "mix", "source", "strategy", "ms_median"));
      }
      for (Path dir : Workload.find(o.workloads())) {
        try {
          workloads.add(Workload.load(dir));
        } catch (Workload.InvalidException | IOException e) {
          broken.add(Main.oneLine(e.getMessage()));
        }
      }
    } catch (IOException e) {
      err.println("funnel: " + Main.oneLine(e.getMessage()));
      return 1;
    }
    if (workloads.isEmpty() && broken.isEmpty()) {
      err.println("funnel: " + o.workloads() + " holds no */" + Workload.PROPERTIES
          + ": write the workloads with funnel_bench --dump " + o.workloads() + " first");
      return 1;
    }
    workloads.sort(Workload.ORDER);

    try (PrintWriter csv = openCsv(o.csv());
        BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = FunnelDevice.open(o.backend());
        FunnelReader reader = new FunnelReader(device)) {
      Run run = new Run(o, device, reader, allocator, out, err, 2 * workloads.size());
      run.preamble(workloads);
      for (String b : broken) {
        out.println("FAILED: " + b);
      }
      run.failures += broken.size();
      for (Workload w : workloads) {
        int before = run.results.size();
        run.workload(w);
        for (Result r : run.results.subList(before, run.results.size())) {
          csv.println(csvRow(run.backend, r, o.reps()));
        }
        csv.flush(); // a long run interrupted keeps what it measured
        if (csv.checkError()) {
          err.println("funnel: " + o.csv() + ": write failed");
          return 1;
        }
      }
      out.println();
      if (cRows != null) {
        compare(out, run.backend, run.results, cRows, o.cResults());
      }
      if (run.backend.equals("cpu")) {
        out.println(CPU_WARNING);
      }
      out.println("results: " + o.csv() + (run.failures == 0 ? "  (every result verified)" : ""));
      if (run.failures > 0) {
        out.println(run.failures + " FAILURES (see above)");
      }
      return run.failures == 0 ? 0 : 1;
    } catch (IOException e) {
      err.println("funnel: " + o.csv() + ": " + Main.oneLine(e.toString()));
      return 1;
    }
  }

  private static PrintWriter openCsv(Path path) throws IOException {
    Path parent = path.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    BufferedWriter w = Files.newBufferedWriter(path, StandardCharsets.UTF_8);
    PrintWriter csv = new PrintWriter(w);
    csv.println(String.join(",", COLUMNS));
    csv.flush();
    return csv;
  }

  /** One run: the device and reader every read shares, and what has been measured so far. */
  private static final class Run {
    final Options o;
    final FunnelDevice device;
    final FunnelReader reader;
    final BufferAllocator allocator;
    final PrintStream out;
    final PrintStream err;
    final String backend;
    final int steps;
    final List<Result> results = new ArrayList<>();
    int step;
    int failures;

    Run(Options o, FunnelDevice device, FunnelReader reader, BufferAllocator allocator,
        PrintStream out, PrintStream err, int steps) {
      this.o = o;
      this.device = device;
      this.reader = reader;
      this.allocator = allocator;
      this.out = out;
      this.err = err;
      this.backend = device.backend();
      this.steps = steps;
    }

    void preamble(List<Workload> workloads) {
      out.printf("funnel bench (Java, through JNI): backend %s, %d workloads x 2 sources, %d"
          + " warm-up + %d timed iterations each (median reported)%n", backend, workloads.size(),
          WARMUP, o.reps());
      String pool = System.getenv("FUNNEL_PINNED_POOL_BYTES");
      out.printf("  workloads from %s; pinned pool %s%n", o.workloads(),
          pool == null || pool.isEmpty() ? "of the default size (64 MiB on cpu, 256 MiB on cuda;"
              + " FUNNEL_PINNED_POOL_BYTES sets it)" : pool + " bytes");
      out.println("  pinned: partitions as addresses in one PinnedPool block; pageable: direct"
          + " ByteBuffer slices");
      out.println("  MiB and GB/s are of the partitions' bytes; h2d and launch: the last timed"
          + " read's ReadStats");
      if (backend.equals("cpu")) {
        out.println(CPU_WARNING);
      }
      if (o.jitWarmupMs() > 0 && !workloads.isEmpty()) {
        Workload smallest = workloads.stream().min(Comparator.comparingLong(w -> w.bytes)).get();
        out.println("  JIT warm-up: " + warmUpJit(smallest));
      }
      out.println();
      out.printf(Locale.ROOT, "%-16s %-12s %-8s %9s %10s %10s %7s %6s %6s  %s%n", "shape", "mix",
          "source", "MiB", "ms median", "ms min", "GB/s", "h2d", "launch", "verified");
    }

    /**
     * Untimed reads of the smallest workload, through both read overloads, for about the
     * --jit-warmup-ms (at most 20000 reads): the JIT compiles the Java side of a read before the
     * first workload is timed, as it has in an executor that has run for a while. The C driver
     * has no such state, and 2 warm-up iterations would leave Java's first figures interpreted.
     */
    private String warmUpJit(Workload w) {
      long t0 = System.nanoTime();
      long deadline = t0 + o.jitWarmupMs() * 1_000_000L;
      int reads = 0;
      try {
        ByteBuffer bytes = w.readPartitions();
        Source pageable = pageable(w, bytes);
        try (PinnedBuffer pinned = device.pinnedPool().allocate(w.fileSize)) {
          pinned.write(0, bytes.duplicate());
          long[] addresses = addresses(w, pinned);
          for (; reads < 20000 && System.nanoTime() < deadline; reads++) {
            try (DeviceTable t = reads % 2 == 0 ? reader.read(addresses, w.lengths)
                : pageable.read(reader)) {
              t.waitReady();
            }
          }
        }
      } catch (IOException | Workload.InvalidException | RuntimeException e) {
        return "stopped after " + reads + " reads: " + describe(e);
      }
      return String.format(Locale.ROOT, "%d untimed reads of %s %s (%.0f ms)", reads, w.shape(),
          w.label(), (System.nanoTime() - t0) / 1e6);
    }

    /** Loads a workload, counts what it holds with Arrow Java, then runs both sources. */
    void workload(Workload w) {
      ByteBuffer bytes;
      Expected expected;
      try {
        bytes = w.readPartitions();
        expected = countWithArrowJava(bytes, w, allocator);
      } catch (Workload.InvalidException | IOException | RuntimeException | OutOfMemoryError e) {
        out.printf("%-16s %-12s FAILED: %s%n", w.shape(), w.label(), describe(e));
        failures++;
        step += 2;
        return;
      }
      progress(w, "pinned");
      add(pinned(w, bytes, expected));
      progress(w, "pageable");
      add(source(w, "pageable", pageable(w, bytes), expected));
    }

    private void progress(Workload w, String source) {
      err.printf(Locale.ROOT, "[%d/%d] %s %s %s (%.1f MiB) ...%n", ++step, steps, w.shape(),
          w.label(), source, mib(w.bytes));
    }

    private void add(Result r) {
      if (r != null) { // null: skipped
        failures += r.verified() && r.m().error().isEmpty() ? 0 : 1;
        results.add(r);
        print(out, r);
      }
    }

    /**
     * The pinned source: the workload copied once into a block of the device's pinned pool, as a
     * fetch would have written it there. Partitions go to the reader as addresses and lengths:
     * that is what a plugin holding pool blocks has, and the cheaper call (no ByteBuffer per
     * partition to look up in JNI, no array of them to copy and keep reachable). Null when the
     * pool cannot hold the workload, which skips it, as the C driver does.
     */
    private Result pinned(Workload w, ByteBuffer bytes, Expected expected) {
      PinnedBuffer pinned;
      try {
        pinned = device.pinnedPool().allocate(w.fileSize);
      } catch (FunnelException e) {
        if (e.code() != FunnelException.Code.HOST_OUT_OF_MEMORY) {
          return new Result(w, "pinned", false,
              new Measurement(Double.NaN, Double.NaN, null, describe(e)));
        }
        out.printf(Locale.ROOT, "%-16s %-12s %-8s skipped: the pinned pool cannot hold %.3f MiB"
            + " more (raise FUNNEL_PINNED_POOL_BYTES)%n", w.shape(), w.label(), "pinned",
            mib(w.fileSize));
        return null;
      }
      try (pinned) {
        pinned.write(0, bytes.duplicate());
        long[] addresses = addresses(w, pinned);
        long[] lengths = w.lengths.clone();
        // every table of these reads is ready and closed before the block goes back
        return source(w, "pinned", r -> r.read(addresses, lengths), expected);
      }
    }

    /** Verifies one read of the source (untimed), then times it. */
    private Result source(Workload w, String source, Source s, Expected expected) {
      String why;
      try {
        why = verify(reader, s, w, expected);
      } catch (RuntimeException e) {
        why = "read failed: " + describe(e);
      }
      if (why != null) {
        out.printf("%-16s %-12s %-8s VERIFY FAILED: %s%n", w.shape(), w.label(), source, why);
      }
      Measurement m = measure(reader, s, o.reps());
      if (why != null && m.error().isEmpty()) {
        m = new Measurement(m.msMedian(), m.msMin(), m.last(), "verify: " + why);
      }
      return new Result(w, source, why == null, m);
    }
  }

  private static long[] addresses(Workload w, PinnedBuffer pinned) {
    long[] addresses = new long[w.partitions];
    for (int p = 0; p < w.partitions; p++) {
      addresses[p] = pinned.address() + w.offsets[p];
    }
    return addresses;
  }

  /** The pageable source: the partitions as slices of ordinary direct memory. */
  private static Source pageable(Workload w, ByteBuffer bytes) {
    ByteBuffer[] slices = new ByteBuffer[w.partitions];
    for (int p = 0; p < w.partitions; p++) {
      slices[p] = bytes.slice((int) w.offsets[p], (int) w.lengths[p]);
    }
    return r -> r.read(slices);
  }

  /**
   * Null when a read of the source gives the rows and null counts Arrow Java reads in the
   * partitions, which must also be what the dump's properties say; else what differs.
   */
  static String verify(FunnelReader reader, Source s, Workload w, Expected expected) {
    try (DeviceTable table = s.read(reader)) {
      table.waitReady();
      if (table.numRows() != expected.rows()) {
        return "funnel read " + table.numRows() + " rows, Arrow Java reads " + expected.rows();
      }
      if (table.numColumns() != expected.columns()) {
        return "funnel read " + table.numColumns() + " columns, Arrow Java reads "
            + expected.columns();
      }
      for (int c = 0; c < expected.columns(); c++) {
        long got = table.column(c).nullCount();
        if (got != expected.nulls()[c]) {
          return "column " + c + ": funnel counts " + got + " nulls, Arrow Java "
              + expected.nulls()[c];
        }
      }
    }
    // the dump's own account, checked against the same independent answer
    if (w.rows != expected.rows()) {
      return "the dump says rows=" + w.rows + ", Arrow Java reads " + expected.rows();
    }
    if (w.columns != expected.columns()) {
      return "the dump says columns=" + w.columns + ", Arrow Java reads " + expected.columns();
    }
    for (int c = 0; c < w.columns; c++) {
      if (w.nulls[c] != expected.nulls()[c]) {
        return "column " + c + ": the dump says " + w.nulls[c] + " nulls, Arrow Java counts "
            + expected.nulls()[c];
      }
    }
    return null;
  }

  /** WARMUP + reps reads; the clock covers read + waitReady, not closing the table. */
  static Measurement measure(FunnelReader reader, Source s, int reps) {
    long[] ns = new long[reps];
    ReadStats last = null;
    try {
      for (int i = 0; i < WARMUP + reps; i++) {
        long t0 = System.nanoTime();
        DeviceTable table = s.read(reader);
        try {
          table.waitReady();
          long t = System.nanoTime() - t0;
          if (i >= WARMUP) {
            ns[i - WARMUP] = t;
          }
          if (i == WARMUP + reps - 1) {
            last = table.stats();
          }
        } finally {
          table.close();
        }
      }
    } catch (RuntimeException e) {
      return new Measurement(Double.NaN, Double.NaN, null, describe(e));
    }
    Arrays.sort(ns);
    double median = reps % 2 == 1 ? ns[reps / 2] : (ns[reps / 2 - 1] + ns[reps / 2]) / 2.0;
    return new Measurement(median / 1e6, ns[0] / 1e6, last, "");
  }

  /**
   * Rows, columns and nulls per column in the partitions, as Arrow Java reads them: every batch
   * loaded, compressed bodies decoded by arrow-compression, the nulls counted in the validity bits.
   */
  static Expected countWithArrowJava(ByteBuffer bytes, Workload w, BufferAllocator allocator)
      throws IOException, Workload.InvalidException {
    long rows = 0;
    int columns = -1;
    long[] nulls = null;
    for (int p = 0; p < w.partitions; p++) {
      if (w.lengths[p] == 0) {
        continue; // an empty shuffle block
      }
      ByteBuffer part = bytes.slice((int) w.offsets[p], (int) w.lengths[p]);
      try (ArrowStreamReader r = new ArrowStreamReader(new BufferChannel(part), allocator,
          CommonsCompressionFactory.INSTANCE)) {
        VectorSchemaRoot root = r.getVectorSchemaRoot();
        int n = root.getFieldVectors().size();
        if (columns < 0) {
          columns = n;
          nulls = new long[n];
        } else if (n != columns) {
          throw new Workload.InvalidException(w.dir.resolve(Workload.PARTITIONS) + ": partition "
              + p + " has " + n + " columns, partition 0 " + columns);
        }
        while (r.loadNextBatch()) {
          rows += root.getRowCount();
          for (int c = 0; c < n; c++) {
            nulls[c] += root.getVector(c).getNullCount();
          }
        }
      }
    }
    return columns < 0 ? new Expected(0, 0, new long[0]) : new Expected(rows, columns, nulls);
  }

  /** A partition's bytes as a channel for ArrowStreamReader, without copying them. */
  private static final class BufferChannel implements ReadableByteChannel {
    private final ByteBuffer src;
    private boolean open = true;

    BufferChannel(ByteBuffer src) {
      this.src = src.duplicate();
    }

    @Override
    public int read(ByteBuffer dst) {
      if (!src.hasRemaining()) {
        return -1;
      }
      int n = Math.min(dst.remaining(), src.remaining());
      dst.put(src.slice(src.position(), n));
      src.position(src.position() + n);
      return n;
    }

    @Override
    public boolean isOpen() {
      return open;
    }

    @Override
    public void close() {
      open = false;
    }
  }

  private static void print(PrintStream out, Result r) {
    Workload w = r.workload();
    Measurement m = r.m();
    if (Double.isNaN(m.msMedian())) {
      out.printf("%-16s %-12s %-8s FAILED %s%n", w.shape(), w.label(), r.source(), m.error());
      return;
    }
    out.printf(Locale.ROOT, "%-16s %-12s %-8s %9.3f %10.3f %10.3f %7.2f %6d %6d  %s%n", w.shape(),
        w.label(), r.source(), mib(w.bytes), m.msMedian(), m.msMin(), gbPerS(w.bytes, m.msMedian()),
        m.last().h2dCopies(), m.last().concatLaunches(), r.verified() ? "ok" : "FAILED");
  }

  /** A row in the C driver's CSV layout; the fields JNI cannot see (driver calls) are blank. */
  static String csvRow(String backend, Result r, int reps) {
    Workload w = r.workload();
    Measurement m = r.m();
    boolean ok = !Double.isNaN(m.msMedian());
    Map<String, String> v = new HashMap<>();
    v.put("backend", backend);
    v.put("partitions", Integer.toString(w.partitions));
    v.put("columns", Integer.toString(w.columns));
    v.put("rows_per_partition", Long.toString(w.rowsPerPartition));
    v.put("rows", Long.toString(w.rows));
    v.put("mix", w.mix);
    v.put("codec", w.codec);
    v.put("source", r.source());
    v.put("strategy", STRATEGY);
    v.put("bytes", Long.toString(w.bytes));
    v.put("reps", Integer.toString(ok ? reps : 0));
    if (ok) {
      v.put("ms_median", String.format(Locale.ROOT, "%.6f", m.msMedian()));
      v.put("ms_min", String.format(Locale.ROOT, "%.6f", m.msMin()));
      v.put("gb_per_s", String.format(Locale.ROOT, "%.4f", gbPerS(w.bytes, m.msMedian())));
      v.put("h2d_copies", Long.toString(m.last().h2dCopies()));
      v.put("launches", Long.toString(m.last().concatLaunches()));
    }
    v.put("verified", r.verified() ? "ok" : "FAILED");
    v.put("error", ResultsCsv.quote(m.error()));
    StringBuilder line = new StringBuilder();
    for (String column : COLUMNS) {
      line.append(line.length() == 0 ? "" : ",").append(v.getOrDefault(column, ""));
    }
    return line.toString();
  }

  /** Java ms against the C driver's "funnel" ms on the same workload and source. */
  private static void compare(PrintStream out, String backend, List<Result> results,
      List<ResultsCsv.Row> cRows, Path cFile) {
    Map<String, ResultsCsv.Row> c = new HashMap<>();
    for (ResultsCsv.Row row : cRows) {
      if (row.get("strategy").equals("funnel") && !Double.isNaN(row.number("ms_median"))) {
        c.putIfAbsent(key(row.get("partitions"), row.get("columns"),
            row.get("rows_per_partition"), row.get("mix"), row.codec(), row.get("source")), row);
      }
    }
    out.printf("JNI overhead: %s ms / C funnel ms on the same workload and source (C: %s);"
        + " target: within %.2fx%n", STRATEGY, cFile, TARGET_RATIO);
    out.printf(Locale.ROOT, "%-16s %-12s %-8s %10s %10s %8s%n", "shape", "mix", "source",
        "java ms", "C ms", "java/C");
    Map<String, double[]> logSums = new HashMap<>(); // source -> {sum of logs, count}
    TreeSet<String> cBackends = new TreeSet<>();
    int missing = 0;
    for (Result r : results) {
      Workload w = r.workload();
      ResultsCsv.Row row = c.get(key(Integer.toString(w.partitions), Integer.toString(w.columns),
          Long.toString(w.rowsPerPartition), w.mix, w.codec, r.source()));
      double java = r.m().msMedian();
      if (row == null || Double.isNaN(java)) {
        missing++;
        continue;
      }
      double cMs = row.number("ms_median");
      double ratio = java / cMs;
      cBackends.add(row.get("backend"));
      out.printf(Locale.ROOT, "%-16s %-12s %-8s %10.3f %10.3f %7.2fx%s%n", w.shape(), w.label(),
          r.source(), java, cMs, ratio, ratio > TARGET_RATIO ? "  over target" : "");
      for (String k : List.of(r.source(), "all")) {
        double[] acc = logSums.computeIfAbsent(k, x -> new double[2]);
        acc[0] += Math.log(ratio);
        acc[1]++;
      }
    }
    if (logSums.isEmpty()) {
      out.println("  no C funnel result matches these workloads");
    } else {
      StringBuilder gm = new StringBuilder("geometric mean java/C:");
      for (String k : List.of("pinned", "pageable", "all")) {
        double[] acc = logSums.get(k);
        if (acc != null) {
          gm.append(String.format(Locale.ROOT, "  %s %.3fx (%d)", k,
              Math.exp(acc[0] / acc[1]), (long) acc[1]));
        }
      }
      out.println(gm);
    }
    if (missing > 0) {
      out.println("  " + missing + " Java result(s) without a C funnel result to compare");
    }
    cBackends.remove(backend);
    if (!cBackends.isEmpty()) {
      out.println("  note: the C results are from backend " + String.join(", ", cBackends)
          + ", these from " + backend + ": the ratio compares different devices");
    }
    out.println();
  }

  private static String key(String p, String c, String r, String mix, String codec,
      String source) {
    return p.trim() + "x" + c.trim() + "x" + r.trim() + " " + mix.trim() + " " + codec + " "
        + source.trim();
  }

  static double gbPerS(long bytes, double ms) {
    return ms > 0 ? bytes / (ms * 1e6) : 0;
  }

  private static double mib(long bytes) {
    return bytes / 1048576.0;
  }

  private static String describe(Throwable e) {
    if (e instanceof OutOfMemoryError) {
      return "out of Java memory (" + e.getMessage() + "): raise -Xmx or -XX:MaxDirectMemorySize";
    }
    String m = e.getMessage();
    String name = e instanceof FunnelException f ? f.code().name() : e.getClass().getSimpleName();
    return Main.oneLine(m == null ? name : name + ": " + m);
  }
}
