package dev.funnel.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.concat;
import static org.apache.spark.sql.functions.date_add;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.repeat;
import static org.apache.spark.sql.functions.when;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/** The local Spark session and the DataFrames the Spark tests shuffle. */
final class SparkJobs {
  /** The backend the suite runs on (the GPU run passes cuda). */
  static final String BACKEND = System.getProperty("funnel.backend", "cpu");

  private SparkJobs() {}

  /** Local mode, 4 task threads, 200 shuffle partitions; no UI. */
  static SparkSession session() {
    return SparkSession.builder()
        .master("local[4]")
        .appName("funnel-spark-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "200")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config(FunnelExecutor.BACKEND_CONF, BACKEND)
        .getOrCreate();
  }

  /**
   * {@code rows} rows of id (bigint), key (int, from {@code key}), i (int), l (bigint), d
   * (double), b (boolean), s (string), dt (date), every column but id and key with nulls, in 4
   * map partitions. Doubles are multiples of 1/4, so their sums are exact in any order.
   */
  static Dataset<Row> table(SparkSession spark, long rows, Column key) {
    Column id = col("id");
    return spark
        .range(0, rows, 1, 4)
        .select(
            id,
            key.cast("int").as("key"),
            when(id.mod(13).notEqual(0), id.mod(1000).minus(500).cast("int")).as("i"),
            when(id.mod(17).notEqual(0), id.multiply(1_000_003L)).as("l"),
            when(id.mod(19).notEqual(0), id.mod(4000).cast("double").divide(4.0).minus(500.0).cast("double")).as("d"),
            when(id.mod(23).notEqual(0), id.mod(3).equalTo(0)).as("b"),
            when(
                    id.mod(29).notEqual(0),
                    concat(lit("s"), id.mod(9973).cast("string"), repeat(lit("x"), id.mod(7).cast("int"))))
                .as("s"),
            when(
                    id.mod(31).notEqual(0),
                    date_add(lit("2020-01-01").cast("date"), id.mod(3650).cast("int")))
                .as("dt"));
  }
}
