package dev.funnel.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.concat;
import static org.apache.spark.sql.functions.date_add;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.when;

import dev.funnel.FunnelException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.storage.StorageLevel;

/**
 * A Spark job whose shuffle's reduce side reads through funnel, checked against Spark's own
 * counts; with {@code --bench}, the reduce-stage time of the same shuffle through Spark's own row
 * shuffle and through the funnel shuffle, with and without Spark's stream compression.
 *
 * <pre>
 * spark-submit --master spark://HOST:7077 --jars funnel-VERSION.jar \
 *   --class dev.funnel.spark.SparkExample funnel-spark-VERSION.jar --rows 2000000
 * mvn -q -f funnel-spark exec:exec@spark-example -Dexample.args="--rows 2000000 --bench"
 * </pre>
 *
 * <p>Options: {@code --rows N} (2,000,000), {@code --partitions P} (200), {@code --maps M} (map
 * tasks, each writing one frame per reduce partition: Spark's default parallelism, at least 2),
 * {@code --master M} (spark-submit's {@code --master}; local[*] when there is none), {@code
 * --backend auto|cpu|cuda} (spark-submit's {@code --conf spark.funnel.backend}; auto when there
 * is none), {@code --codec lz4|zstd|none} (the frames' bodies: spark-submit's {@code --conf
 * spark.funnel.compression.codec}; lz4 when there is none), {@code --bench} with {@code --reps
 * N} (5) and {@code --warmup N} (2). The device is opened on the executors only: the driver needs
 * no GPU.
 *
 * <p>Compressed frames ask that Spark not compress its shuffle streams ({@link
 * FrameCompression}): the check sets {@code spark.shuffle.compress=false}, and says so, unless
 * spark-submit set it; {@code --bench} runs under both settings, each in a SparkContext of its
 * own, as Spark applies the setting to every shuffle of a context.
 */
public final class SparkExample {
  private SparkExample() {}

  public static void main(String[] args) throws Exception {
    long rows = 2_000_000;
    int partitions = 200;
    int maps = 0; // Spark's default parallelism
    int reps = 5;
    int warmup = 2;
    String master = null;
    String backend = null; // spark-submit's --conf spark.funnel.backend, else auto
    String codec = null; // spark-submit's --conf spark.funnel.compression.codec, else lz4
    boolean bench = false;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--rows" -> rows = Long.parseLong(value(args, ++i));
        case "--partitions" -> partitions = Integer.parseInt(value(args, ++i));
        case "--maps" -> maps = Integer.parseInt(value(args, ++i));
        case "--reps" -> reps = Integer.parseInt(value(args, ++i));
        case "--warmup" -> warmup = Integer.parseInt(value(args, ++i));
        case "--master" -> master = value(args, ++i);
        case "--backend" -> backend = value(args, ++i);
        case "--codec" -> codec = value(args, ++i);
        case "--bench" -> bench = true;
        default -> {
          System.err.println("spark-example: unknown option '" + args[i] + "'\nusage: "
              + "[--rows N] [--partitions P] [--maps M] [--master M] [--backend auto|cpu|cuda]"
              + " [--codec lz4|zstd|none] [--bench [--reps N] [--warmup N]]");
          System.exit(2);
        }
      }
    }
    SparkSession.Builder builder =
        SparkSession.builder()
            .appName("funnel-spark-example")
            .config("spark.sql.adaptive.enabled", "false"); // one map and one reduce stage a job
    if (backend != null) {
      builder.config(FunnelExecutor.BACKEND_CONF, backend);
    }
    if (master != null) {
      builder.master(master);
    } else if (System.getProperty("spark.master") == null) {
      builder.master("local[*]").config("spark.ui.enabled", "false"); // not under spark-submit
    }
    SparkConf submitted = new SparkConf(); // spark-submit's settings, its system properties
    FrameCompression frames;
    try {
      frames = FrameCompression.of(codec != null ? codec
          : submitted.get(FrameCompression.CONF, FrameCompression.DEFAULT.confValue()));
    } catch (IllegalArgumentException e) {
      System.err.println("spark-example: " + e.getMessage());
      System.exit(2);
      return;
    }
    builder.config(FrameCompression.CONF, frames.confValue());
    int status = 0;
    try {
      if (bench) {
        bench(builder, rows, maps, partitions, reps, warmup, frames);
      } else {
        if (FrameCompression.compressedTwice(submitted, frames)
            && !submitted.contains(FrameCompression.SPARK_SHUFFLE_COMPRESS)) {
          // Spark would compress the compressed frames again; a setting the user made stays
          builder.config(FrameCompression.SPARK_SHUFFLE_COMPRESS, "false");
          System.out.println("spark-example: spark.shuffle.compress=false, as the frames are "
              + frames.confValue() + "-compressed (" + FrameCompression.CONF + ")");
        }
        SparkSession spark = builder.getOrCreate();
        try {
          status = run(table(spark, rows, maps), partitions);
        } finally {
          spark.stop();
        }
      }
    } catch (Exception e) {
      if (!(e instanceof org.apache.spark.SparkException)) {
        throw e;
      }
      // a task's failure (Scala throws it unchecked), funnel's exception among its causes
      System.err.println("spark-example: the job failed: " + rootMessage(e));
      status = 1;
    } finally {
      FunnelExecutor.closeDevices();
    }
    if (status != 0) {
      System.exit(status);
    }
  }

  private static String rootMessage(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof FunnelException) {
        return t.getClass().getName() + ": " + t.getMessage();
      }
    }
    return e.getMessage();
  }

  /** What one reduce task read: its rows and the nulls of column i, on which device, where. */
  record TaskRead(int partition, long rows, long nulls, String device, String executor)
      implements java.io.Serializable {}

  private static String value(String[] args, int i) {
    if (i >= args.length) {
      System.err.println("spark-example: " + args[i - 1] + " needs a value");
      System.exit(2);
    }
    return args[i];
  }

  /** id, key, and an int, a long, a double, a boolean, a string and a date column, with nulls. */
  static Dataset<Row> table(SparkSession spark, long rows, int maps) {
    Column id = col("id");
    return spark
        .range(0, rows, 1,
            maps > 0 ? maps : Math.max(2, spark.sparkContext().defaultParallelism()))
        .select(
            id,
            id.multiply(7919).mod(100_003).cast("int").as("key"),
            when(id.mod(13).notEqual(0), id.mod(1000).cast("int")).as("i"),
            when(id.mod(17).notEqual(0), id.multiply(1_000_003L)).as("l"),
            when(id.mod(19).notEqual(0), id.cast("double").divide(7.0)).as("d"),
            when(id.mod(23).notEqual(0), id.mod(3).equalTo(0)).as("b"),
            when(id.mod(29).notEqual(0), concat(lit("name-"), id.mod(9973).cast("string"))).as("s"),
            when(id.mod(31).notEqual(0), date_add(lit("2020-01-01").cast("date"),
                id.mod(3650).cast("int"))).as("dt"));
  }

  /**
   * The funnel shuffle: each reduce task reads its partition into one table. Returns 0 when the
   * rows and nulls are Spark's own count, else 1.
   */
  static int run(Dataset<Row> df, int partitions) {
    long start = System.nanoTime();
    // map side: rows to Arrow IPC frames per reduce partition, as df.repartition(partitions, key)
    FunnelShuffle shuffle = FunnelShuffle.repartition(df, partitions, col("key"));
    // reduce side: one funnel read per task; the table is closed when the task ends
    List<TaskRead> perTask =
        shuffle
            .mapTables(
                (partition, table) -> {
                  table.waitReady();
                  long nulls = table.column(2).nullCount();
                  return List.of(new TaskRead(partition, table.numRows(), nulls,
                      FunnelExecutor.deviceKind() + " (" + FunnelExecutor.device().backend()
                          + ")", org.apache.spark.SparkEnv.get().executorId())).iterator();
                })
            .collect();
    double seconds = (System.nanoTime() - start) / 1e9;
    long total = perTask.stream().mapToLong(TaskRead::rows).sum();
    long largest = perTask.stream().mapToLong(TaskRead::rows).max().orElse(0);
    long empty = perTask.stream().filter(t -> t.rows() == 0).count();
    long nulls = perTask.stream().mapToLong(TaskRead::nulls).sum();
    String devices = String.join(", ", new java.util.TreeSet<>(
        perTask.stream().map(TaskRead::device).toList()));
    long sparkRows = df.count();
    long sparkNulls = df.filter(col("i").isNull()).count();
    System.out.printf(Locale.ROOT,
        "funnel shuffle on %s: %,d rows of %d columns into %d reduce partitions in %.2f s"
            + " (frames %s, spark.shuffle.compress %s)%n",
        devices, total, df.columns().length, partitions, seconds, shuffle.compression().confValue(),
        df.sparkSession().sparkContext().getConf().get(FrameCompression.SPARK_SHUFFLE_COMPRESS,
            "true"));
    long executors = perTask.stream().map(TaskRead::executor).distinct().count();
    System.out.printf(Locale.ROOT,
        "  %d reduce tasks, one device table each, read on %d %s: largest %,d rows, %d"
            + " empty; column i has %,d nulls%n", perTask.size(), executors,
        executors == 1 ? "executor" : "executors", largest, empty, nulls);
    System.out.printf(Locale.ROOT, "  Spark counts %,d rows, %,d nulls in i: %s%n", sparkRows,
        sparkNulls, sparkRows == total && sparkNulls == nulls ? "same" : "DIFFERENT");
    return sparkRows == total && sparkNulls == nulls ? 0 : 1;
  }

  /**
   * The same repartition of the same cached DataFrame through Spark's own row shuffle (reduce
   * tasks iterate their rows) and through the funnel shuffle (reduce tasks read one table,
   * ready), each {@code warmup + reps} times alternately, under each setting of {@code
   * spark.shuffle.compress}: Spark reads it once a SparkContext, for all its shuffles, so each
   * setting runs in a SparkContext of its own. Prints the median stage times and shuffle bytes of
   * the four, and the reduce stages of the two shuffles each compressed once: Spark's rows by its
   * stream codec, funnel's frames by their bodies' codec.
   */
  static void bench(SparkSession.Builder builder, long rows, int maps, int partitions, int reps,
      int warmup, FrameCompression frames) {
    Phase on = phase(builder.config(FrameCompression.SPARK_SHUFFLE_COMPRESS, "true"), rows, maps,
        partitions, reps, warmup, false);
    Phase off = phase(builder.config(FrameCompression.SPARK_SHUFFLE_COMPRESS, "false"), rows,
        maps, partitions, reps, warmup, true);
    String io = on.ioCodec();
    System.out.printf(Locale.ROOT,
        "%,d rows, %d columns, %d reduce partitions, %s, backend %s, %d cores; median of %d"
            + " runs after %d warm-up%n", on.rows(), on.columns(), partitions, on.master(),
        on.backend(), Runtime.getRuntime().availableProcessors(), reps, warmup);
    System.out.printf(Locale.ROOT,
        "funnel's frames: %s bodies (%s); Spark's streams: %s (spark.io.compression.codec) when"
            + " spark.shuffle.compress, which is one setting for all the shuffles of a"
            + " SparkContext: each setting ran in a SparkContext of its own%n",
        frames.confValue(), FrameCompression.CONF, io);
    System.out.printf(Locale.ROOT, "%-18s %-22s %-22s %12s %12s %14s%n", "shuffle",
        "spark.shuffle.compress", "compressed by", "map stage", "reduce stage", "shuffle bytes");
    String funnelOwn = frames == FrameCompression.NONE ? "nothing" : "funnel " + frames.confValue();
    String twice = frames == FrameCompression.NONE ? "Spark " + io
        : funnelOwn + " + Spark " + io;
    printRow("Spark row shuffle", "true", "Spark " + io, on.spark());
    printRow("funnel shuffle", "true", twice, on.funnel());
    printRow("Spark row shuffle", "false", "nothing", off.spark());
    printRow("funnel shuffle", "false", funnelOwn, off.funnel());
    System.out.printf(Locale.ROOT,
        "uncompressed: Spark's rows %,.0f bytes (spark.shuffle.compress=false above), funnel's"
            + " frames %,d bytes (the frames of %s=none, counted on the map side)%n",
        median(off.spark(), 2), off.plainFrameBytes(), FrameCompression.CONF);
    // each shuffle compressed once: Spark's rows by its streams, funnel's frames by their bodies
    // (by Spark's streams when the frames are not compressed)
    Phase funnelOnce = frames == FrameCompression.NONE ? on : off;
    System.out.printf(Locale.ROOT,
        "compression on, each shuffle compressed once: reduce stage Spark row shuffle %.0f ms (%s"
            + " streams, %,.0f bytes), funnel shuffle %.0f ms (%s, %,.0f bytes)%n",
        median(on.spark(), 1), io, median(on.spark(), 2), median(funnelOnce.funnel(), 1),
        frames == FrameCompression.NONE ? "uncompressed frames in Spark's " + io + " streams"
            : frames.confValue() + " bodies, spark.shuffle.compress=false",
        median(funnelOnce.funnel(), 2));
    System.out.printf(Locale.ROOT,
        "reduce stage, each run (ms): spark.shuffle.compress=true: Spark %s, funnel %s;"
            + " false: Spark %s, funnel %s%n", runs(on.spark(), 1), runs(on.funnel(), 1),
        runs(off.spark(), 1), runs(off.funnel(), 1));
    System.out.println("the breakdowns below: funnel's tasks with its frames compressed once,"
        + " Spark's with its streams compressed");
    printBreakdown(funnelOnce.funnelTasks(),
        funnelOnce.funnel().stream().mapToLong(r -> r[3]).sum(), on.sparkTasks());
  }

  private static void printRow(String shuffle, String compress, String by, List<long[]> runs) {
    System.out.printf(Locale.ROOT, "%-18s %-22s %-22s %9.0f ms %9.0f ms %,14.0f%n", shuffle,
        compress, by, median(runs, 0), median(runs, 1), median(runs, 2));
  }

  /**
   * One SparkContext's runs: per run {map stage ms, reduce stage ms, shuffle bytes written,
   * reduce tasks' run ms} of each shuffle; every funnel reduce task's times and every Spark
   * reduce task's {rows, ns iterating them} of the timed runs; the bytes of the same shuffle's
   * frames uncompressed, when counted (else 0).
   */
  record Phase(List<long[]> spark, List<long[]> funnel, List<TaskTimes> funnelTasks,
      List<long[]> sparkTasks, long plainFrameBytes, long rows, int columns, String master,
      String backend, String ioCodec) {}

  /**
   * {@link #bench}'s runs in a SparkContext of {@code builder}'s settings, stopped after; with
   * {@code countPlainFrames}, the bytes of the frames uncompressed too.
   */
  static Phase phase(SparkSession.Builder builder, long rowCount, int maps, int partitions,
      int reps, int warmup, boolean countPlainFrames) {
    SparkSession spark = builder.getOrCreate();
    try {
      Dataset<Row> df = table(spark, rowCount, maps);
      String backend = "?";
      df.persist(StorageLevel.MEMORY_ONLY());
      long rows = df.count(); // the cache is filled before anything is timed
      StageTimes times = new StageTimes();
      spark.sparkContext().addSparkListener(times);
      List<long[]> spark_ = new ArrayList<>();
      List<long[]> funnel = new ArrayList<>();
      List<TaskTimes> funnelTasks = new ArrayList<>(); // every reduce task of the timed runs
      List<long[]> sparkTasks = new ArrayList<>(); // {rows, ns iterating them}
      for (int r = 0; r < warmup + reps; r++) {
        String tag = "spark-" + r;
        spark.sparkContext().setJobGroup(tag, tag, false);
        JavaRDD<long[]> sparkCounts =
            ((org.apache.spark.sql.classic.Dataset<Row>) df.repartition(partitions, col("key")))
                .queryExecution()
                .toRdd()
                .toJavaRDD()
                .mapPartitions(
                    it -> {
                      long t0 = System.nanoTime();
                      long n = 0;
                      while (it.hasNext()) {
                        it.next();
                        n++;
                      }
                      return List.of(new long[] {n, System.nanoTime() - t0}).iterator();
                    });
        List<long[]> sparkRun = sparkCounts.collect();
        long[] a = sparkRun.stream().mapToLong(t -> t[0]).toArray();
        long[] sparkStages = times.await(tag);
        tag = "funnel-" + r;
        spark.sparkContext().setJobGroup(tag, tag, false);
        List<TaskTimes> reads =
            FunnelShuffle.repartition(df, partitions, col("key"))
                .mapTablesWithTimes(
                    (p, table, t) -> {
                      long w = System.nanoTime();
                      table.waitReady();
                      long end = System.nanoTime();
                      return List.of(new TaskTimes(table.numRows(),
                          FunnelExecutor.device().backend(), t.fetchNanos(), t.stagingNanos(),
                          t.readNanos(), end - w, end - t.startNanos(), t.frames(), t.bytes(),
                          table.stats().parsedOnDevice(), table.stats().parseNanos(),
                          table.stats().planNanos(), table.stats().submitNanos()))
                          .iterator();
                    })
                .collect();
        backend = reads.isEmpty() ? backend : reads.get(0).device();
        long[] b = reads.stream().mapToLong(TaskTimes::rows).toArray();
        long[] funnelStages = times.await(tag);
        if (!Arrays.equals(a, b)) {
          throw new IllegalStateException(
              "the two shuffles put different row counts in partitions");
        }
        if (r >= warmup) {
          spark_.add(sparkStages);
          funnel.add(funnelStages);
          funnelTasks.addAll(reads);
          sparkTasks.addAll(sparkRun);
        }
      }
      spark.sparkContext().clearJobGroup();
      long plainFrameBytes = countPlainFrames ? plainFrameBytes(spark, df, partitions) : 0;
      df.unpersist();
      return new Phase(spark_, funnel, funnelTasks, sparkTasks, plainFrameBytes, rows,
          df.columns().length, spark.sparkContext().master(), backend,
          spark.sparkContext().getConf().get("spark.io.compression.codec", "lz4"));
    } finally {
      spark.stop();
    }
  }

  /**
   * The bytes the funnel shuffle of {@code df} would write uncompressed: its frames of codec
   * none, each with FrameSerializer's 8-byte record header, made on the map side, not shuffled.
   */
  private static long plainFrameBytes(SparkSession spark, Dataset<Row> df, int partitions) {
    String codec = spark.conf().get(FrameCompression.CONF, FrameCompression.DEFAULT.confValue());
    FunnelShuffle plain;
    spark.conf().set(FrameCompression.CONF, FrameCompression.NONE.confValue());
    try {
      plain = FunnelShuffle.repartition(df, partitions, col("key"));
    } finally {
      spark.conf().set(FrameCompression.CONF, codec);
    }
    return plain.frames().map(t -> t._2().length + 8L).fold(0L, Long::sum);
  }

  /** Where one funnel reduce task's time went, nanoseconds (see {@link ReduceTimes}). */
  record TaskTimes(long rows, String device, long fetch, long staging, long read, long waitReady,
      long total, int frames, long bytes, boolean parsedOnDevice, long parse, long plan,
      long submit)
      implements java.io.Serializable {}

  /**
   * The funnel shuffle's reduce tasks, part by part: each part's median over the tasks and its
   * share of their summed time; Spark's row shuffle's tasks (iterating their rows) beside them.
   */
  static void printBreakdown(List<TaskTimes> tasks, long sparkRunMillis, List<long[]> sparkTasks) {
    if (tasks.isEmpty()) {
      return;
    }
    double all = tasks.stream().mapToLong(TaskTimes::total).sum();
    System.out.printf(Locale.ROOT,
        "funnel shuffle, reduce tasks (%d: every task of the timed runs), on the task's thread;"
            + " median %d frames, %,d bytes a task; headers parsed on the device in %d:%n",
        tasks.size(),
        (long) medianOf(tasks.stream().mapToLong(TaskTimes::frames).toArray()),
        (long) medianOf(tasks.stream().mapToLong(TaskTimes::bytes).toArray()),
        tasks.stream().filter(TaskTimes::parsedOnDevice).count());
    System.out.printf(Locale.ROOT, "  %-40s %10s %10s %8s%n", "part", "median ms", "mean ms",
        "share");
    String[] names = {"fetch and deserialize (Spark's shuffle)", "staging into pinned blocks",
        "funnel's read (the call)", "  of which parse (host or device)", "  of which plan",
        "  of which submit", "waiting for the table"};
    List<java.util.function.ToLongFunction<TaskTimes>> parts = List.of(TaskTimes::fetch,
        TaskTimes::staging, TaskTimes::read, TaskTimes::parse, TaskTimes::plan, TaskTimes::submit,
        TaskTimes::waitReady);
    for (int i = 0; i < names.length; i++) {
      long[] v = tasks.stream().mapToLong(parts.get(i)).toArray();
      System.out.printf(Locale.ROOT, "  %-40s %10.3f %10.3f %7.1f%%%n", names[i],
          medianOf(v) / 1e6, Arrays.stream(v).sum() / 1e6 / v.length,
          100 * Arrays.stream(v).sum() / all);
    }
    System.out.printf(Locale.ROOT, "  %-40s %10.3f %10.3f %7.1f%%%n",
        "task (first frame to table ready)",
        medianOf(tasks.stream().mapToLong(TaskTimes::total).toArray()) / 1e6,
        all / 1e6 / tasks.size(), 100.0);
    long[] other = tasks.stream()
        .mapToLong(t -> t.total() - t.fetch() - t.staging() - t.read() - t.waitReady()).toArray();
    System.out.printf(Locale.ROOT, "  %-40s %10.3f %10.3f %7.1f%%%n",
        "other (the task's thread between parts)", medianOf(other) / 1e6,
        Arrays.stream(other).sum() / 1e6 / other.length, 100 * Arrays.stream(other).sum() / all);
    double own = tasks.stream().mapToLong(t -> t.read() + t.waitReady()).sum();
    System.out.printf(Locale.ROOT,
        "  funnel's own share (read + wait): %.1f%% of the tasks' time above; %.1f%% of their"
            + " run time as Spark's executors count it (%.3f ms a task, mean)%n",
        100 * own / all, sparkRunMillis == 0 ? 0.0 : 100 * own / 1e6 / sparkRunMillis,
        (double) sparkRunMillis / tasks.size());
    if (!sparkTasks.isEmpty()) {
      System.out.printf(Locale.ROOT,
          "Spark row shuffle, reduce tasks (%d): iterating their rows (fetch and deserialize),"
              + " median %.3f ms a task%n", sparkTasks.size(),
          medianOf(sparkTasks.stream().mapToLong(t -> t[1]).toArray()) / 1e6);
    }
  }

  private static double medianOf(long[] v) {
    long[] s = v.clone();
    Arrays.sort(s);
    return s.length == 0 ? 0
        : s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2.0;
  }

  private static String runs(List<long[]> runs, int which) {
    return Arrays.toString(runs.stream().mapToLong(r -> r[which]).toArray());
  }

  private static double median(List<long[]> runs, int which) {
    return medianOf(runs.stream().mapToLong(r -> r[which]).toArray());
  }

  /**
   * Stage times by job group: a job's map stage and its reduce (result) stage, each from the
   * stage's submission to its completion, as the scheduler records them.
   */
  static final class StageTimes extends SparkListener {
    private final Map<Integer, String> groupOfStage = new ConcurrentHashMap<>();
    private final Map<String, int[]> stagesOfGroup = new ConcurrentHashMap<>();
    private final Map<Integer, Long> millis = new ConcurrentHashMap<>();
    private final Map<Integer, Long> shuffleBytes = new ConcurrentHashMap<>();
    private final Map<Integer, Long> taskRunMillis = new ConcurrentHashMap<>();

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
      if (end.taskMetrics() != null) {
        taskRunMillis.merge(end.stageId(), end.taskMetrics().executorRunTime(), Long::sum);
      }
    }

    @Override
    public void onJobStart(SparkListenerJobStart job) {
      String group = job.properties().getProperty("spark.jobGroup.id");
      if (group == null) {
        return;
      }
      int[] ids = new int[job.stageIds().size()];
      for (int i = 0; i < ids.length; i++) {
        ids[i] = (Integer) job.stageIds().apply(i);
      }
      Arrays.sort(ids); // the map stage first, the result stage last
      stagesOfGroup.put(group, ids);
      for (int id : ids) {
        groupOfStage.put(id, group);
      }
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted done) {
      StageInfo s = done.stageInfo();
      if (s.submissionTime().isDefined() && s.completionTime().isDefined()) {
        shuffleBytes.put(s.stageId(), s.taskMetrics().shuffleWriteMetrics().bytesWritten());
        millis.put(s.stageId(), (Long) s.completionTime().get() - (Long) s.submissionTime().get());
      }
    }

    /**
     * {map stage ms, reduce stage ms, shuffle bytes written, the reduce tasks' summed run time
     * in ms as Spark's executors measure it} of the group's job, once the listener has both
     * stages.
     */
    long[] await(String group) {
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (System.nanoTime() < deadline) {
        int[] ids = stagesOfGroup.get(group);
        if (ids != null && ids.length == 2 && millis.containsKey(ids[0])
            && millis.containsKey(ids[1])) {
          return new long[] {millis.get(ids[0]), millis.get(ids[1]), shuffleBytes.get(ids[0]),
              taskRunMillis.getOrDefault(ids[1], 0L)};
        }
        try {
          Thread.sleep(10);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
      throw new IllegalStateException("no map and reduce stage times for " + group + ": "
          + Arrays.toString(stagesOfGroup.get(group)));
    }
  }
}
