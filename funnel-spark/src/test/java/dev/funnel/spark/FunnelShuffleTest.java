package dev.funnel.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.expr;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.spark_partition_id;
import static org.apache.spark.sql.functions.when;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.funnel.DeviceColumn;
import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelException;
import dev.funnel.FunnelReader;
import dev.funnel.LiveHandles;
import dev.funnel.MalformedPartitionException;
import dev.funnel.PinnedBuffer;
import dev.funnel.PinnedPool;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import scala.Tuple2;
import scala.Tuple3;

/**
 * Real Spark jobs (local mode, 4 task threads, 200 reduce partitions) whose reduce tasks read
 * their partition through funnel, checked per reduce partition against Spark's own computation
 * on the same DataFrame, shuffled by Spark's {@code repartition(200, key)}; with frames of each
 * codec ({@link FrameCompression}), lz4 where a test names none.
 */
class FunnelShuffleTest {
  static final int PARTITIONS = 200;
  static final long ROWS = 1_000_000;

  static SparkSession spark;
  long[] handlesBefore;

  @BeforeAll
  static void startSpark() {
    spark = SparkJobs.session();
  }

  @AfterAll
  static void stopSpark() {
    if (spark != null) {
      spark.stop();
    }
    FunnelExecutor.closeDevices();
  }

  @BeforeEach
  void countHandles() {
    FunnelExecutor.device(); // opened before counting: it stays for the suite
    handlesBefore = LiveHandles.live();
  }

  @AfterEach
  void everyTableAndReaderClosed() {
    FunnelExecutor.closeShared(); // the readers and streams tasks share stay for the next job
    assertArrayEquals(
        handlesBefore, LiveHandles.live(), "devices, readers, tables alive after the job");
  }

  /** Each reduce task's figures, from its funnel table copied back to Arrow Java. */
  static Map<Integer, PartitionStats> throughFunnel(FunnelShuffle shuffle) {
    List<Tuple2<Integer, PartitionStats>> got =
        shuffle
            .mapTables(
                (partition, table) -> {
                  assertEquals(shuffle.schema(), table.schema());
                  try (BufferAllocator allocator = new RootAllocator();
                      VectorSchemaRoot root = table.toArrow(allocator)) {
                    PartitionStats stats = PartitionStats.of(root);
                    List<DeviceColumn> cols = table.columns();
                    for (int c = 0; c < cols.size(); c++) { // funnel's own count, from its scan
                      assertEquals(stats.values[1 + c], cols.get(c).nullCount(), "null count");
                    }
                    assertEquals(stats.values[0], table.numRows());
                    return List.of(new Tuple2<>(partition, stats)).iterator();
                  }
                })
            .collect();
    Map<Integer, PartitionStats> out = new TreeMap<>();
    for (Tuple2<Integer, PartitionStats> t : got) {
      assertEquals(null, out.put(t._1(), t._2()), "two tables for partition " + t._1());
    }
    return out;
  }

  static void assertSameStats(Map<Integer, PartitionStats> expected, Map<Integer, PartitionStats> got) {
    assertEquals(expected.size(), got.size(), "tables, one per reduce partition");
    for (int p = 0; p < expected.size(); p++) {
      assertEquals(expected.get(p), got.get(p), "reduce partition " + p);
    }
  }

  /**
   * {@code build}'s shuffle, built with the session's {@value FrameCompression#CONF} set to
   * {@code codec} (and unset after), asserting that its map tasks write frames of that codec.
   */
  static FunnelShuffle withCodec(FrameCompression codec, Supplier<FunnelShuffle> build) {
    FunnelShuffle shuffle;
    spark.conf().set(FrameCompression.CONF, codec.confValue());
    try {
      shuffle = build.get();
    } finally {
      spark.conf().unset(FrameCompression.CONF);
    }
    assertEquals(codec, shuffle.compression());
    List<String> codecs = shuffle.frames()
        .map(f -> ArrowFramesTest.bodyCodec(f._2()).name())
        .distinct()
        .collect();
    assertEquals(List.of(codec.arrowType().name()), codecs, "the codec of every frame");
    return shuffle;
  }

  @Test
  void repartitionRejectsACodecItDoesNotKnowNamingTheSetting() {
    Dataset<Row> df = SparkJobs.table(spark, 100, col("id"));
    spark.conf().set(FrameCompression.CONF, "snappy");
    try {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> FunnelShuffle.repartition(df, PARTITIONS, col("key")));
      assertEquals(FrameCompression.CONF + "=snappy is not a codec of the funnel shuffle: lz4,"
          + " zstd or none", e.getMessage());
    } finally {
      spark.conf().unset(FrameCompression.CONF);
    }
  }

  @Test
  void shuffleOfAMillionRowsMatchesSparkPerReducePartition() {
    Dataset<Row> df = SparkJobs.table(spark, ROWS, col("id").multiply(7919).mod(100_003));
    Map<Integer, PartitionStats> expected = PartitionStats.expected(df, PARTITIONS);
    long total = expected.values().stream().mapToLong(s -> s.values[0]).sum();
    assertEquals(ROWS, total, "Spark's own count");
    long nonEmpty = expected.values().stream().filter(s -> s.values[0] > 0).count();
    assertEquals(PARTITIONS, nonEmpty, "the keys spread over every reduce partition");

    // small frames: a map task writes many per reduce partition; the default codec, lz4
    FunnelShuffle shuffle = FunnelShuffle.repartition(df, PARTITIONS, 1000, 1L << 20, col("key"));
    assertEquals(FrameCompression.LZ4, shuffle.compression());
    assertSameStats(expected, throughFunnel(shuffle));
  }

  @Test
  void skewedShuffleOneHugePartitionManyEmpty() {
    Dataset<Row> df =
        SparkJobs.table(
            spark, ROWS, when(col("id").mod(100).notEqual(0), lit(7)).otherwise(col("id").mod(5)));
    Map<Integer, PartitionStats> expected = PartitionStats.expected(df, PARTITIONS);
    long empty = expected.values().stream().filter(s -> s.values[0] == 0).count();
    long largest = expected.values().stream().mapToLong(s -> s.values[0]).max().getAsLong();
    assertTrue(empty >= PARTITIONS - 6, empty + " empty reduce partitions");
    assertTrue(largest >= ROWS * 99 / 100, "largest reduce partition has " + largest + " rows");

    FunnelShuffle shuffle = FunnelShuffle.repartition(df, PARTITIONS, col("key"));
    assertSameStats(expected, throughFunnel(shuffle));
  }

  @ParameterizedTest
  @EnumSource(FrameCompression.class)
  void serializedSortShuffleAbove200Partitions(FrameCompression codec) {
    // above spark.shuffle.sort.bypassMergeThreshold (200) Spark sorts the serialized records
    // (FrameSerializer allows relocation) instead of writing a file per partition
    int partitions = 333;
    Dataset<Row> df = SparkJobs.table(spark, 100_000, col("id").mod(10_007));
    Map<Integer, PartitionStats> expected = PartitionStats.expected(df, partitions);
    FunnelShuffle shuffle = withCodec(codec,
        () -> FunnelShuffle.repartition(df, partitions, 100, 1L << 20, col("key")));
    assertSameStats(expected, throughFunnel(shuffle));
  }

  @Test
  void corruptFrameFailsTheJobWithFunnelsMessage() throws Exception {
    Dataset<Row> df = SparkJobs.table(spark, 10_000, col("id").mod(50));
    FunnelShuffle shuffle = FunnelShuffle.repartition(df, PARTITIONS, col("key"));
    byte[] bad = truncatedFrame(shuffle);
    String funnelSays;
    try (FunnelDevice device = FunnelDevice.open(SparkJobs.BACKEND);
        FunnelReader reader = new FunnelReader(device, shuffle.schema())) {
      MalformedPartitionException e =
          assertThrows(MalformedPartitionException.class, () -> reader.read(direct(bad)));
      funnelSays = e.getMessage().replaceFirst("^partition 0: ", "");
    }

    // map task 0's first frame is cut short
    JavaPairRDD<Integer, byte[]> corrupt =
        shuffle
            .frames()
            .mapPartitionsWithIndex(
                (map, it) -> {
                  List<Tuple2<Integer, byte[]>> out = new ArrayList<>();
                  it.forEachRemaining(out::add);
                  if (map == 0) {
                    out.set(0, new Tuple2<>(out.get(0)._1(), bad));
                  }
                  return out.iterator();
                },
                false)
            .mapToPair(t -> t);
    SparkException e =
        assertThrows(
            SparkException.class,
            () ->
                FunnelShuffle.mapTables(
                        corrupt,
                        PARTITIONS,
                        shuffle.sparkSchema(),
                        (p, table) -> List.of(table.numRows()).iterator())
                    .collect());
    assertTrue(
        e.getMessage().contains(MalformedPartitionException.class.getName()),
        "task failure names funnel's exception: " + e.getMessage());
    assertTrue(
        e.getMessage().contains(funnelSays), "task failure carries funnel's message: " + funnelSays
            + "\nin: " + e.getMessage());
  }

  static final StructType LONGS = new StructType().add("x", DataTypes.LongType);

  /** Frames of 0..rows-1, 1000 rows each, of the default codec. */
  static List<byte[]> longFrames(long rows) {
    List<byte[]> frames = new ArrayList<>();
    try (ArrowFrames writer =
        new ArrowFrames(LONGS, 0, 1, 1000, 1L << 20, FrameCompression.DEFAULT)) {
      for (long k = 0; k < rows; k++) {
        byte[] f = writer.append(0, new GenericInternalRow(new Object[] {k}));
        if (f != null) {
          frames.add(f);
        }
      }
      frames.add(writer.flush(0));
    }
    return frames;
  }

  static long sumOfLongs(DeviceTable table) {
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = table.toArrow(allocator)) {
      long sum = 0;
      for (int r = 0; r < root.getRowCount(); r++) {
        sum += ((BigIntVector) root.getVector(0)).get(r);
      }
      return sum;
    }
  }

  @Test
  void tasksShareOneReaderOfASchemaAndReuseStreams() {
    FunnelDevice device = FunnelExecutor.device();
    org.apache.arrow.vector.types.pojo.Schema longs = ArrowFrames.arrowSchema(LONGS);
    FunnelReader reader = FunnelExecutor.sharedReader(device, longs);
    assertTrue(reader == FunnelExecutor.sharedReader(device, ArrowFrames.arrowSchema(LONGS)),
        "an equal schema gets the same reader");
    dev.funnel.DeviceStream a = FunnelExecutor.takeStream(device);
    dev.funnel.DeviceStream b = FunnelExecutor.takeStream(device);
    assertTrue(a != b, "two tasks at once hold two streams");
    FunnelExecutor.giveBack(a);
    assertTrue(a == FunnelExecutor.takeStream(device), "a stream given back is taken again");
    FunnelExecutor.giveBack(a);
    FunnelExecutor.giveBack(b);
    // each task's table reads right through the shared reader, on its own stream
    JavaPairRDD<Integer, byte[]> frames =
        new org.apache.spark.api.java.JavaSparkContext(spark.sparkContext()).parallelizePairs(
            List.of(new Tuple2<>(0, longFrames(100).get(0)), new Tuple2<>(1, longFrames(50).get(0))),
            2);
    List<long[]> got =
        FunnelShuffle.mapTablesWithTimes(frames, 2, LONGS,
                (p, table, t) -> List.of(new long[] {table.numRows(), t.frames(), t.bytes(),
                    t.fetchNanos() >= 0 && t.stagingNanos() >= 0 && t.readNanos() > 0 ? 1 : 0})
                    .iterator())
            .collect();
    assertEquals(2, got.size());
    assertArrayEquals(new long[] {100, 1, longFrames(100).get(0).length, 1}, got.get(0));
    assertArrayEquals(new long[] {50, 1, longFrames(50).get(0).length, 1}, got.get(1));
  }

  @Test
  void stagingFallsBackToDirectMemoryWhenThePinnedPoolIsFull() {
    PinnedPool pool = FunnelExecutor.device().pinnedPool();
    List<PinnedBuffer> filling = new ArrayList<>();
    try {
      while (true) {
        try {
          filling.add(pool.allocate(1 << 20));
        } catch (FunnelException e) {
          assertEquals(FunnelException.Code.HOST_OUT_OF_MEMORY, e.code());
          break;
        }
      }
      try (DeviceTable table =
          ShuffleReads.read(longFrames(2500).iterator(), ArrowFrames.arrowSchema(LONGS))) {
        assertEquals(2500, table.numRows());
        assertEquals(2499L * 2500 / 2, sumOfLongs(table));
      }
    } finally {
      filling.forEach(PinnedBuffer::close);
    }
  }

  @Test
  void stagingGoesBackOnceTheReadIsDoneAndTheTableStays() throws Exception {
    List<byte[]> frames = longFrames(2500);
    StructType schema = LONGS;
    PinnedPool pool = FunnelExecutor.device().pinnedPool();
    long before = pool.inUse();
    // on the driver: no task, so the caller closes the table
    try (DeviceTable table = ShuffleReads.read(frames.iterator(), ArrowFrames.arrowSchema(schema))) {
      assertEquals(2500, table.numRows());
      table.waitReady();
      long deadline = System.nanoTime() + 5_000_000_000L;
      while (pool.inUse() > before && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      assertEquals(before, pool.inUse(), "pinned staging given back after the read completed");
      assertEquals(2499L * 2500 / 2, sumOfLongs(table));
    }
  }

  /** A frame of {@code shuffle}'s schema and codec, its RecordBatch body cut short by 8 bytes. */
  static byte[] truncatedFrame(FunnelShuffle shuffle) {
    try (ArrowFrames writer =
        new ArrowFrames(shuffle.sparkSchema(), 0, 1, 100, 1L << 20, shuffle.compression())) {
      Object[] values = {1L, 2, 3, 4L, 5.0, true, UTF8String.fromString("x"), 6};
      writer.append(0, new GenericInternalRow(values));
      byte[] frame = writer.flush(0);
      int eos = 8; // the end-of-stream marker
      return Arrays.copyOf(frame, frame.length - eos - 8);
    }
  }

  static ByteBuffer direct(byte[] bytes) {
    ByteBuffer b = ByteBuffer.allocateDirect(bytes.length);
    b.put(bytes).flip();
    return b;
  }

  /**
   * {@code rows} rows of id (bigint), key (int, from {@code key}) and nested columns made by
   * Spark: ints array<int>, strs array<string>, m map<string,bigint>, st struct<a:int,b:string>,
   * structs array<struct<a:int,b:string>>, sm struct<n:int,m:map<string,int>>, deep
   * array<array<int>>, each with nulls at every level (the column, elements, values, fields) and
   * empty arrays and maps; tags array<string> whose elements are never null, pair
   * struct<id:bigint,ids:array<bigint>> of which nothing may be null, and none, a struct of no
   * fields or null.
   */
  static Dataset<Row> nestedTable(long rows, Column key) {
    String n4 = "array_repeat(0, cast(id % 4 as int))"; // 0..3 elements
    return spark
        .range(0, rows, 1, 4)
        .select(
            col("id"),
            key.cast("int").as("key"),
            expr("CASE WHEN id % 11 = 0 THEN NULL ELSE transform(array_repeat(0, cast(id % 5 as"
                    + " int)), (x, j) -> IF((id + j) % 3 = 0, NULL, cast(id * 10 + j as int))) END")
                .as("ints"),
            expr("CASE WHEN id % 13 = 0 THEN NULL ELSE transform(" + n4 + ", (x, j) ->"
                    + " IF((id + j) % 5 = 0, NULL, concat('s', id, '-', j, repeat('é', j)))) END")
                .as("strs"),
            expr("CASE WHEN id % 7 = 0 THEN NULL ELSE map_from_arrays(transform(" + n4
                    + ", (x, j) -> concat('k', j)), transform(" + n4 + ", (x, j) ->"
                    + " IF((id + j) % 3 = 1, NULL, id * 1000 + j))) END")
                .as("m"),
            expr("CASE WHEN id % 17 = 0 THEN NULL ELSE named_struct('a', IF(id % 3 = 0, NULL,"
                    + " cast(id as int)), 'b', IF(id % 5 = 0, NULL, concat('b', id))) END")
                .as("st"),
            expr("CASE WHEN id % 19 = 0 THEN NULL ELSE transform(" + n4 + ", (x, j) ->"
                    + " IF((id + j) % 4 = 3, NULL, named_struct('a', IF(j = 1, NULL,"
                    + " cast(id + j as int)), 'b', IF((id + j) % 2 = 0, NULL, concat('e', j)))))"
                    + " END")
                .as("structs"),
            expr("CASE WHEN id % 23 = 0 THEN NULL ELSE named_struct('n', IF(id % 2 = 0, NULL,"
                    + " cast(id % 100 as int)), 'm', IF(id % 6 = 1, NULL, map_from_arrays("
                    + "transform(" + n4 + ", (x, j) -> concat('m', j)), transform(" + n4
                    + ", (x, j) -> IF(j = 1, NULL, cast(id + j as int)))))) END")
                .as("sm"),
            expr("CASE WHEN id % 29 = 0 THEN NULL ELSE transform(" + n4 + ", (x, j) ->"
                    + " IF((id + j) % 5 = 2, NULL, transform(array_repeat(0, cast((id + j) % 3"
                    + " as int)), (y, k) -> IF(k = 1, NULL, cast(id + k as int))))) END")
                .as("deep"),
            expr("transform(array_repeat(0, cast(id % 3 as int)), (x, j) -> concat('t', j))")
                .as("tags"),
            expr("named_struct('id', id, 'ids', array(id, id + 1))").as("pair"),
            expr("IF(id % 2 = 0, NULL, struct())").as("none"));
  }

  /** Rows in order of their column 0, a bigint. */
  static List<Row> byId(List<Row> rows) {
    List<Row> sorted = new ArrayList<>(rows);
    sorted.sort(Comparator.comparingLong(r -> r.getLong(0)));
    return sorted;
  }

  @ParameterizedTest
  @EnumSource(FrameCompression.class)
  void nestedColumnsMatchSparksOwnShuffleRowForRow(FrameCompression codec) {
    Dataset<Row> df = nestedTable(20_000, col("id").multiply(7919).mod(10_007));
    StructType schema = df.schema();
    assertFalse(((ArrayType) schema.apply("tags").dataType()).containsNull(), schema.treeString());
    assertFalse(schema.apply("pair").nullable(), schema.treeString());

    // Spark's own shuffle of the same rows: each reduce partition's rows
    Map<Integer, List<Row>> expected = new TreeMap<>();
    for (int p = 0; p < PARTITIONS; p++) {
      expected.put(p, new ArrayList<>());
    }
    for (Row r : df.repartition(PARTITIONS, col("key"))
        .withColumn("pid", spark_partition_id())
        .collectAsList()) {
      Object[] values = new Object[r.length() - 1];
      for (int c = 0; c < values.length; c++) {
        values[c] = r.get(c);
      }
      expected.get(r.getInt(values.length)).add(RowFactory.create(values));
    }

    // small frames: a map task writes many per reduce partition, whose nested columns funnel
    // concatenates (their offsets rebased)
    FunnelShuffle shuffle =
        withCodec(codec, () -> FunnelShuffle.repartition(df, PARTITIONS, 50, 1L << 20, col("key")));
    List<Tuple3<Integer, List<Row>, long[]>> got =
        shuffle
            .mapTables(
                (partition, table) -> {
                  assertEquals(shuffle.schema(), table.schema());
                  long[] nulls = new long[table.numColumns()]; // funnel's own, from its scan
                  for (int c = 0; c < nulls.length; c++) {
                    nulls[c] = table.column(c).nullCount();
                  }
                  try (BufferAllocator allocator = new RootAllocator();
                      VectorSchemaRoot root = table.toArrow(allocator)) {
                    List<Row> rows = ArrowFramesTest.sparkRows(root, schema);
                    return List.of(new Tuple3<>(partition, rows, nulls)).iterator();
                  }
                })
            .collect();
    assertEquals(PARTITIONS, got.size(), "tables, one per reduce partition");
    long nonEmpty = expected.values().stream().filter(rows -> !rows.isEmpty()).count();
    assertTrue(nonEmpty > PARTITIONS * 9 / 10, nonEmpty + " non-empty reduce partitions");
    for (Tuple3<Integer, List<Row>, long[]> t : got) {
      List<Row> want = byId(expected.get(t._1()));
      List<Row> have = byId(t._2());
      assertEquals(want.size(), have.size(), "rows of reduce partition " + t._1());
      for (int r = 0; r < want.size(); r++) {
        assertEquals(want.get(r), have.get(r), "reduce partition " + t._1() + ", row " + r);
      }
      long[] nulls = new long[schema.fields().length];
      for (Row r : want) {
        for (int c = 0; c < nulls.length; c++) {
          nulls[c] += r.isNullAt(c) ? 1 : 0;
        }
      }
      assertArrayEquals(nulls, t._3(), "null counts of reduce partition " + t._1());
    }
  }
}
