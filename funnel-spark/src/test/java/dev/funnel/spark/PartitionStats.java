package dev.funnel.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.hash;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.octet_length;
import static org.apache.spark.sql.functions.spark_partition_id;
import static org.apache.spark.sql.functions.sum;
import static org.apache.spark.sql.functions.unix_date;
import static org.apache.spark.sql.functions.when;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;

/**
 * What the Spark tests compare per reduce partition, for {@link SparkJobs#table}'s columns: rows,
 * each column's null count, each column's sum (booleans: the trues; strings: their bytes and the
 * sum of Spark's hash of each; dates: days since the epoch; doubles: 4 x the sum, exact), and the
 * sum over rows of Spark's hash of the whole row (which catches values moved between columns or
 * rows).
 */
final class PartitionStats implements Serializable {
  private static final long serialVersionUID = 1L;
  static final String[] COLUMNS = {"id", "key", "i", "l", "d", "b", "s", "dt"};

  /** rows, nulls per column, then sums: id, key, i, l, 4d, b, s bytes, s hashes, dt, row hashes. */
  final long[] values;

  PartitionStats(long[] values) {
    this.values = values;
  }

  static final String[] NAMES = names();

  private static String[] names() {
    String[] n = new String[1 + COLUMNS.length + 10];
    n[0] = "rows";
    for (int c = 0; c < COLUMNS.length; c++) {
      n[1 + c] = "nulls(" + COLUMNS[c] + ")";
    }
    String[] sums = {
      "sum(id)", "sum(key)", "sum(i)", "sum(l)", "4*sum(d)", "trues(b)", "bytes(s)", "hashes(s)",
      "days(dt)", "row hashes"
    };
    System.arraycopy(sums, 0, n, 1 + COLUMNS.length, sums.length);
    return n;
  }

  /** Spark's own computation: per partition of {@code df.repartition(n, key)}, by SQL. */
  static Map<Integer, PartitionStats> expected(Dataset<Row> df, int numPartitions) {
    Column[] aggs = new Column[NAMES.length - 1];
    int a = 0;
    for (String c : COLUMNS) {
      aggs[a++] = count(lit(1)).minus(count(col(c)));
    }
    aggs[a++] = sum(col("id"));
    aggs[a++] = sum(col("key"));
    aggs[a++] = sum(col("i"));
    aggs[a++] = sum(col("l"));
    aggs[a++] = sum(col("d").multiply(4)).cast("long");
    aggs[a++] = sum(when(col("b"), 1).otherwise(0));
    aggs[a++] = sum(octet_length(col("s")));
    aggs[a++] = sum(when(col("s").isNotNull(), hash(col("s"))));
    aggs[a++] = sum(unix_date(col("dt")));
    aggs[a++] = sum(rowHash());
    List<Row> rows =
        df.repartition(numPartitions, col("key"))
            .withColumn("pid", spark_partition_id())
            .groupBy("pid")
            .agg(count(lit(1)), aggs)
            .collectAsList();
    Map<Integer, PartitionStats> out = new HashMap<>();
    for (int p = 0; p < numPartitions; p++) {
      out.put(p, new PartitionStats(new long[NAMES.length])); // partitions with no rows
    }
    for (Row r : rows) {
      long[] v = new long[NAMES.length];
      for (int i = 0; i < v.length; i++) {
        v[i] = r.isNullAt(1 + i) ? 0 : ((Number) r.get(1 + i)).longValue();
      }
      out.put(r.getInt(0), new PartitionStats(v));
    }
    return out;
  }

  /** Spark's hash of the row's columns, in {@link #COLUMNS} order (nulls skipped). */
  static Column rowHash() {
    Column[] cols = new Column[COLUMNS.length];
    for (int c = 0; c < COLUMNS.length; c++) {
      cols[c] = col(COLUMNS[c]);
    }
    return hash(cols).cast("long");
  }

  /** The same figures from a table funnel read, copied back to Arrow Java. */
  static PartitionStats of(VectorSchemaRoot root) {
    long[] v = new long[NAMES.length];
    v[0] = root.getRowCount();
    FieldVector[] cols = new FieldVector[COLUMNS.length];
    for (int c = 0; c < COLUMNS.length; c++) {
      cols[c] = root.getVector(COLUMNS[c]);
      v[1 + c] = cols[c].getNullCount();
    }
    BigIntVector id = (BigIntVector) cols[0];
    IntVector key = (IntVector) cols[1];
    IntVector i = (IntVector) cols[2];
    BigIntVector l = (BigIntVector) cols[3];
    Float8Vector d = (Float8Vector) cols[4];
    BitVector b = (BitVector) cols[5];
    VarCharVector s = (VarCharVector) cols[6];
    DateDayVector dt = (DateDayVector) cols[7];
    int base = 1 + COLUMNS.length;
    double sumD = 0;
    for (int r = 0; r < v[0]; r++) {
      int h = 42; // Spark's hash: Murmur3, seed 42, each non-null column's value in turn
      if (!id.isNull(r)) {
        v[base] += id.get(r);
        h = Murmur3_x86_32.hashLong(id.get(r), h);
      }
      if (!key.isNull(r)) {
        v[base + 1] += key.get(r);
        h = Murmur3_x86_32.hashInt(key.get(r), h);
      }
      if (!i.isNull(r)) {
        v[base + 2] += i.get(r);
        h = Murmur3_x86_32.hashInt(i.get(r), h);
      }
      if (!l.isNull(r)) {
        v[base + 3] += l.get(r);
        h = Murmur3_x86_32.hashLong(l.get(r), h);
      }
      if (!d.isNull(r)) {
        double x = d.get(r);
        sumD += x;
        h = Murmur3_x86_32.hashLong(Double.doubleToLongBits(x == -0.0 ? 0.0 : x), h);
      }
      if (!b.isNull(r)) {
        v[base + 5] += b.get(r);
        h = Murmur3_x86_32.hashInt(b.get(r), h);
      }
      if (!s.isNull(r)) {
        byte[] bytes = s.get(r);
        v[base + 6] += bytes.length;
        int sh = Murmur3_x86_32.hashUnsafeBytes(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length, 42);
        v[base + 7] += sh;
        h = Murmur3_x86_32.hashUnsafeBytes(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length, h);
      }
      if (!dt.isNull(r)) {
        v[base + 8] += dt.get(r);
        h = Murmur3_x86_32.hashInt(dt.get(r), h);
      }
      v[base + 9] += h;
    }
    v[base + 4] = (long) (sumD * 4);
    return new PartitionStats(v);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PartitionStats && Arrays.equals(values, ((PartitionStats) o).values);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(values);
  }

  @Override
  public String toString() {
    StringBuilder b = new StringBuilder("{");
    for (int i = 0; i < values.length; i++) {
      b.append(i == 0 ? "" : ", ").append(NAMES[i]).append('=').append(values[i]);
    }
    return b.append('}').toString();
  }
}
