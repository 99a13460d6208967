package dev.funnel.testkit;

import dev.funnel.DeviceTable;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Asserts that a {@link DeviceTable} holds exactly the rows Arrow Java reads from the partitions
 * it was read from, in order: the schema, the row count, each column's null count, and every
 * value (the table copied back with {@code toArrow}). The expected side is Arrow Java's own
 * reading of the bytes, never funnel's: compressed bodies (LZ4_FRAME, ZSTD) are decoded by
 * Arrow Java's codecs (arrow-compression). A failure is an {@link AssertionError} naming the first
 * differing row and column and where that row came from. Works on the cpu backend.
 */
public final class TableAssert {
  private TableAssert() {}

  /** {@link #assertTableEquals(List, DeviceTable)} for partitions held in ByteBuffers. */
  public static void assertTableEquals(List<ByteBuffer> partitions, DeviceTable table) {
    List<byte[]> bytes = new ArrayList<>(partitions.size());
    for (ByteBuffer b : partitions) {
      ByteBuffer v = b.duplicate();
      byte[] a = new byte[v.remaining()];
      v.get(a);
      bytes.add(a);
    }
    assertTableEqualsBytes(bytes, table);
  }

  /**
   * Asserts that {@code table} is the concatenation of {@code partitions} (whole IPC streams; a
   * zero-length partition is an empty shuffle block) as Arrow Java reads them.
   */
  public static void assertTableEqualsBytes(List<byte[]> partitions, DeviceTable table) {
    Objects.requireNonNull(partitions, "partitions");
    Objects.requireNonNull(table, "table");
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot got = table.toArrow(allocator)) {
      Schema want = null;
      long[] nulls = new long[got.getFieldVectors().size()];
      long row = 0;
      for (int p = 0; p < partitions.size(); p++) {
        if (partitions.get(p).length == 0) {
          continue;
        }
        try (ArrowStreamReader r =
            new ArrowStreamReader(new ByteArrayInputStream(partitions.get(p)), allocator,
                CommonsCompressionFactory.INSTANCE)) {
          VectorSchemaRoot in = r.getVectorSchemaRoot();
          if (want == null) {
            want = in.getSchema();
            check(want.equals(table.schema()), "schema: the table's is " + table.schema()
                + ", Arrow Java reads " + want + " in partition " + p);
          }
          for (int batch = 0; r.loadNextBatch(); batch++) {
            int n = in.getRowCount();
            check(row + n <= got.getRowCount(), "rows: the table has " + got.getRowCount()
                + ", the partitions up to partition " + p + " batch " + batch + " hold at least "
                + (row + n));
            for (int i = 0; i < n; i++) {
              for (int c = 0; c < nulls.length; c++) {
                FieldVector w = in.getVector(c);
                FieldVector g = got.getVector(c);
                int at = (int) (row + i);
                Object wv = w.isNull(i) ? null : w.getObject(i);
                Object gv = g.isNull(at) ? null : g.getObject(at);
                if (w.isNull(i) != g.isNull(at) || !same(wv, gv)) {
                  throw new AssertionError("row " + at + " (partition " + p + ", batch " + batch
                      + ", row " + i + "), column " + c + " '" + w.getName() + "': expected "
                      + show(wv) + " (Arrow Java's reading), the table has " + show(gv));
                }
              }
            }
            for (int c = 0; c < nulls.length; c++) {
              nulls[c] += in.getVector(c).getNullCount();
            }
            row += n;
          }
        } catch (IOException e) {
          throw new UncheckedIOException("partition " + p + ": Arrow Java cannot read it", e);
        }
      }
      check(row == table.numRows(), "rows: the table has " + table.numRows()
          + ", the partitions hold " + row);
      for (int c = 0; c < nulls.length; c++) {
        check(nulls[c] == table.column(c).nullCount(), "column " + c + " '"
            + table.schema().getFields().get(c).getName() + "': null count "
            + table.column(c).nullCount() + ", the partitions hold " + nulls[c] + " nulls");
      }
    }
  }

  private static void check(boolean ok, String message) {
    if (!ok) {
      throw new AssertionError(message);
    }
  }

  private static boolean same(Object a, Object b) {
    if (a instanceof byte[] x && b instanceof byte[] y) {
      return Arrays.equals(x, y);
    }
    return Objects.equals(a, b);
  }

  private static String show(Object v) {
    return v instanceof byte[] b ? Arrays.toString(b) : String.valueOf(v);
  }
}
