package dev.funnel.spark;

import static org.apache.spark.sql.functions.hash;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.pmod;

import dev.funnel.DeviceTable;
import java.io.Serializable;
import java.util.Iterator;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.Partitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.rdd.ShuffledRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;
import org.slf4j.LoggerFactory;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * A shuffle of a DataFrame whose reduce tasks each read their partition into one {@link
 * DeviceTable} through funnel.
 *
 * <pre>{@code
 * FunnelShuffle shuffle = FunnelShuffle.repartition(df, 200, col("key"));   // map side
 * JavaRDD<Long> rows = shuffle.mapTables((partition, table) ->              // reduce side
 *     List.of(table.numRows()).iterator());
 * }</pre>
 *
 * <p>Rows go to the reduce partition that {@code df.repartition(numPartitions, keys)} sends them
 * to ({@code pmod(hash(keys), numPartitions)}, Spark's hash partitioning). Each map task writes its
 * rows as Arrow IPC frames per reduce partition ({@link ArrowFrames}), which Spark's shuffle moves
 * as raw bytes ({@link FrameSerializer}); each reduce task makes one funnel read of all its frames
 * ({@link ShuffleReads#read}).
 *
 * <p>The frames' bodies are compressed with the codec of {@value FrameCompression#CONF} (lz4 by
 * default, zstd or none), read from the DataFrame's session when the shuffle is built. Spark's own
 * stream compression ({@code spark.shuffle.compress}, true by default) would compress them a
 * second time, and Spark has no switch for one shuffle: a user sets {@code
 * spark.shuffle.compress=false} with lz4 or zstd frames, or {@value FrameCompression#CONF}{@code
 * =none} to keep Spark's. The shuffle logs a warning, once, when it finds both on, and changes no
 * setting (see {@link FrameCompression}).
 */
public final class FunnelShuffle implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final ClassTag<Integer> INT = ClassTag$.MODULE$.apply(Integer.class);
  private static final ClassTag<byte[]> BYTES = ClassTag$.MODULE$.apply(byte[].class);

  private final StructType sparkSchema;
  private final int numPartitions;
  private final FrameCompression compression;
  private final transient JavaPairRDD<Integer, byte[]> frames;

  private FunnelShuffle(
      StructType sparkSchema,
      int numPartitions,
      FrameCompression compression,
      JavaPairRDD<Integer, byte[]> f) {
    this.sparkSchema = sparkSchema;
    this.numPartitions = numPartitions;
    this.compression = compression;
    this.frames = f;
  }

  /** {@link #repartition(Dataset, int, int, long, Column...)} with the default batch sizes. */
  public static FunnelShuffle repartition(Dataset<Row> df, int numPartitions, Column... keys) {
    return repartition(
        df, numPartitions, ArrowFrames.DEFAULT_BATCH_ROWS, ArrowFrames.DEFAULT_BATCH_BYTES, keys);
  }

  /**
   * The funnel shuffle of {@code df} into {@code numPartitions} reduce partitions by {@code keys},
   * frames of at most {@code batchRows} rows and about {@code batchBytes} bytes, their bodies
   * compressed by the session's {@value FrameCompression#CONF}. Nothing runs until an action on
   * {@link #mapTables} or {@link #frames}.
   *
   * @throws IllegalArgumentException when a column's type is not one the shuffle writes, or the
   *     codec setting names no codec
   */
  public static FunnelShuffle repartition(
      Dataset<Row> df, int numPartitions, int batchRows, long batchBytes, Column... keys) {
    if (numPartitions <= 0) {
      throw new IllegalArgumentException("numPartitions " + numPartitions + " must be positive");
    }
    if (keys.length == 0) {
      throw new IllegalArgumentException("repartition needs at least one key column");
    }
    StructType schema = df.schema();
    ArrowFrames.arrowSchema(schema); // rejects what it cannot write, before any job
    FrameCompression compression = FrameCompression.of(df.sparkSession().conf());
    warnIfCompressedTwice(df.sparkSession().sparkContext().getConf(), compression);
    Column[] projected = new Column[schema.fields().length + 1];
    projected[0] = pmod(hash(keys), lit(numPartitions));
    for (int c = 0; c < schema.fields().length; c++) {
      projected[c + 1] = df.col("`" + schema.fields()[c].name().replace("`", "``") + "`");
    }
    RDD<InternalRow> rows = internalRows(df.select(projected));
    JavaPairRDD<Integer, byte[]> frames =
        JavaPairRDD.fromJavaRDD(
            rows.toJavaRDD()
                .mapPartitions(
                    it ->
                        ArrowFrames.frames(
                            it, schema, numPartitions, batchRows, batchBytes, compression)));
    return new FunnelShuffle(schema, numPartitions, compression, frames);
  }

  private static final AtomicBoolean WARNED = new AtomicBoolean();

  /** Says once in this JVM that Spark compresses the compressed frames again, and what to set. */
  private static void warnIfCompressedTwice(SparkConf conf, FrameCompression compression) {
    if (FrameCompression.compressedTwice(conf, compression) && WARNED.compareAndSet(false, true)) {
      LoggerFactory.getLogger(FunnelShuffle.class).warn(
          "the funnel shuffle writes {}-compressed frames ({}) and spark.shuffle.compress is true:"
              + " Spark compresses them again with spark.io.compression.codec ({}), and its reduce"
              + " tasks decompress them on the CPU before funnel reads them. Set"
              + " spark.shuffle.compress=false (Spark's own shuffles in this application then move"
              + " uncompressed too), or {}=none to keep Spark's compression alone.",
          compression.confValue(), FrameCompression.CONF,
          conf.get("spark.io.compression.codec", "lz4"), FrameCompression.CONF);
    }
  }

  private static RDD<InternalRow> internalRows(Dataset<Row> df) {
    if (!(df instanceof org.apache.spark.sql.classic.Dataset)) {
      throw new IllegalArgumentException(
          "the funnel shuffle runs on a classic (not Spark Connect) Dataset, not "
              + df.getClass().getName());
    }
    return ((org.apache.spark.sql.classic.Dataset<Row>) df).queryExecution().toRdd();
  }

  /** The shuffled DataFrame's schema, as Spark has it. */
  public StructType sparkSchema() {
    return sparkSchema;
  }

  /** The schema of the frames and of every reduce task's table. */
  public Schema schema() {
    return ArrowFrames.arrowSchema(sparkSchema);
  }

  /** The codec of the frames' bodies. */
  public FrameCompression compression() {
    return compression;
  }

  /** Reduce partitions. */
  public int numPartitions() {
    return numPartitions;
  }

  /** The map side's output, before the shuffle: (reduce partition, Arrow IPC frame) pairs. */
  public JavaPairRDD<Integer, byte[]> frames() {
    return frames;
  }

  /** What a reduce task does with its table. The table is closed when the task ends. */
  @FunctionalInterface
  public interface TableFunction<T> extends Serializable {
    Iterator<T> apply(int partition, DeviceTable table) throws Exception;
  }

  /** A {@link TableFunction} that is also told where its task's read went. */
  @FunctionalInterface
  public interface TimedTableFunction<T> extends Serializable {
    Iterator<T> apply(int partition, DeviceTable table, ReduceTimes times) throws Exception;
  }

  /**
   * Runs the shuffle: each reduce task reads all its frames into one table and hands it to {@code
   * fn}, whose iterator it consumes before the table is closed.
   */
  public <T> JavaRDD<T> mapTables(TableFunction<T> fn) {
    return mapTables(frames, numPartitions, sparkSchema, fn);
  }

  /**
   * {@link #mapTables(TableFunction)} over any (reduce partition, frame) pairs of frames of {@code
   * sparkSchema}, such as {@link #frames()} transformed.
   */
  public static <T> JavaRDD<T> mapTables(
      JavaPairRDD<Integer, byte[]> frames,
      int numPartitions,
      StructType sparkSchema,
      TableFunction<T> fn) {
    return mapTablesWithTimes(
        frames, numPartitions, sparkSchema, (partition, table, times) -> fn.apply(partition, table));
  }

  /**
   * {@link #mapTables(TableFunction)}, {@code fn} also given the task's {@link ReduceTimes}: the
   * time it waited for frames, staged them and read them.
   */
  public <T> JavaRDD<T> mapTablesWithTimes(TimedTableFunction<T> fn) {
    return mapTablesWithTimes(frames, numPartitions, sparkSchema, fn);
  }

  /** {@link #mapTablesWithTimes(TimedTableFunction)} over any (reduce partition, frame) pairs. */
  public static <T> JavaRDD<T> mapTablesWithTimes(
      JavaPairRDD<Integer, byte[]> frames,
      int numPartitions,
      StructType sparkSchema,
      TimedTableFunction<T> fn) {
    return exchange(frames, numPartitions)
        .mapPartitionsWithIndex(
            (partition, it) -> {
              ReduceTimes times = new ReduceTimes();
              DeviceTable table =
                  ShuffleReads.read(
                      new Iterator<byte[]>() {
                        @Override
                        public boolean hasNext() {
                          return it.hasNext();
                        }

                        @Override
                        public byte[] next() {
                          return it.next()._2();
                        }
                      },
                      ArrowFrames.arrowSchema(sparkSchema),
                      times);
              return fn.apply(partition, table, times);
            },
            false);
  }

  /**
   * Spark's shuffle of (reduce partition, frame) pairs into {@code numPartitions} partitions, the
   * frames moved as raw bytes by {@link FrameSerializer}.
   */
  public static JavaPairRDD<Integer, byte[]> exchange(
      JavaPairRDD<Integer, byte[]> frames, int numPartitions) {
    ShuffledRDD<Integer, byte[], byte[]> shuffled =
        new ShuffledRDD<Integer, byte[], byte[]>(
                frames.rdd(), new ByPartitionId(numPartitions), INT, BYTES, BYTES)
            .setSerializer(new FrameSerializer());
    return JavaPairRDD.fromRDD(shuffled, INT, BYTES);
  }

  /** Sends a record to the reduce partition its key names. */
  static final class ByPartitionId extends Partitioner {
    private static final long serialVersionUID = 1L;
    private final int numPartitions;

    ByPartitionId(int numPartitions) {
      this.numPartitions = numPartitions;
    }

    @Override
    public int numPartitions() {
      return numPartitions;
    }

    @Override
    public int getPartition(Object key) {
      int p = (Integer) key;
      if (p < 0 || p >= numPartitions) {
        throw new IllegalArgumentException(
            "reduce partition " + p + " out of [0, " + numPartitions + ")");
      }
      return p;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof ByPartitionId && ((ByPartitionId) o).numPartitions == numPartitions;
    }

    @Override
    public int hashCode() {
      return numPartitions;
    }
  }
}
