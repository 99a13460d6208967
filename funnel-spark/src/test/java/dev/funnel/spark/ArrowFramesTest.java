package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.time.LocalDateTime;
import java.util.Collections;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/** The map side's frames, read back by Arrow Java's own stream reader. */
class ArrowFramesTest {
  static final StructType ALL =
      new StructType()
          .add("b8", DataTypes.ByteType)
          .add("i16", DataTypes.ShortType)
          .add("i32", DataTypes.IntegerType)
          .add("i64", DataTypes.LongType)
          .add("f32", DataTypes.FloatType)
          .add("f64", DataTypes.DoubleType)
          .add("bool", DataTypes.BooleanType)
          .add("date", DataTypes.DateType)
          .add("ts", DataTypes.TimestampType)
          .add("ts_ntz", DataTypes.TimestampNTZType)
          .add("dec", DataTypes.createDecimalType(20, 3))
          .add("str", DataTypes.StringType)
          .add("bin", DataTypes.BinaryType);

  static InternalRow row(int partition, int k) {
    return new GenericInternalRow(
        new Object[] {
          partition,
          (byte) k,
          (short) (k * 300),
          k * 100_000,
          k * 10_000_000_000L,
          k / 2f,
          k / 4.0,
          k % 2 == 0,
          k * 1000,
          k * 1_000_000L,
          -k * 1_000_000L,
          Decimal.apply(new BigDecimal(k + ".125")),
          UTF8String.fromString("é" + k),
          new byte[] {(byte) k, 0}
        });
  }

  static InternalRow nulls(int partition) {
    Object[] v = new Object[1 + ALL.fields().length];
    v[0] = partition;
    return new GenericInternalRow(v);
  }

  /** The frame's rows as Arrow Java reads them (strings as String, binary as a List). */
  static List<List<Object>> readAll(byte[] frame, BufferAllocator allocator) throws IOException {
    List<List<Object>> rows = new ArrayList<>();
    try (ArrowStreamReader reader =
        new ArrowStreamReader(new ByteArrayInputStream(frame), allocator)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      assertEquals(ArrowFrames.arrowSchema(ALL), root.getSchema());
      while (reader.loadNextBatch()) {
        for (int r = 0; r < root.getRowCount(); r++) {
          List<Object> row = new ArrayList<>();
          for (int c = 0; c < root.getFieldVectors().size(); c++) {
            Object v = root.getVector(c).getObject(r);
            if (v instanceof byte[]) {
              List<Byte> bytes = new ArrayList<>();
              for (byte b : (byte[]) v) {
                bytes.add(b);
              }
              v = bytes;
            } else if (v != null && !(v instanceof Number || v instanceof Boolean
                || v instanceof java.time.LocalDateTime)) {
              v = v.toString(); // Text
            }
            row.add(v);
          }
          rows.add(row);
        }
      }
    }
    return rows;
  }

  @Test
  void rejectsTypesItDoesNotWriteNamingTheColumn() {
    StructType t = new StructType().add("ok", DataTypes.IntegerType)
        .add("tags", DataTypes.createArrayType(DataTypes.StringType));
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ArrowFrames.arrowSchema(t));
    assertTrue(e.getMessage().contains("'tags'") && e.getMessage().contains("array<string>"),
        e.getMessage());
  }

  @Test
  void rejectsAPartitionOutOfRange() {
    try (ArrowFrames w = new ArrowFrames(ALL, 1, 4, 10, 1 << 20)) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> w.append(4, row(4, 1)));
      assertTrue(e.getMessage().contains("reduce partition 4 out of [0, 4)"), e.getMessage());
    }
  }

  @Test
  void everyTypeAndNullsAsArrowJavaReadsThem() throws IOException {
    List<List<Object>> got;
    try (BufferAllocator allocator = new RootAllocator();
        ArrowFrames w = new ArrowFrames(ALL, 1, 2, 3, 1 << 20)) {
      assertNull(w.append(1, row(1, 1)));
      assertNull(w.append(1, nulls(1)));
      byte[] full = w.append(1, row(1, 2)); // 3 rows: the batch is full
      assertNotNull(full);
      assertNull(w.flush(1), "nothing left after a full frame");
      assertNull(w.flush(0), "no rows for partition 0");
      got = readAll(full, allocator);
    }
    assertEquals(3, got.size());
    assertEquals(
        List.of((byte) 1, (short) 300, 100_000, 10_000_000_000L, 0.5f, 0.25, false, 1000,
            1_000_000L, LocalDateTime.of(1969, 12, 31, 23, 59, 59), new BigDecimal("1.125"),
            "é1", List.of((byte) 1, (byte) 0)),
        got.get(0));
    assertEquals(Collections.nCopies(ALL.fields().length, null), got.get(1));
    assertEquals(new BigDecimal("2.125"), got.get(2).get(10));
    assertEquals(true, got.get(2).get(6));
  }

  @Test
  void framesCloseAtTheBatchSizesAndTheRestAtTheEnd() throws IOException {
    List<InternalRow> rows = new ArrayList<>();
    for (int k = 0; k < 25; k++) {
      rows.add(row(k % 3 == 0 ? 0 : 2, k));
    }
    Iterator<Tuple2<Integer, byte[]>> frames =
        ArrowFrames.frames(rows.iterator(), ALL, 3, 4, 1 << 20);
    int[] rowsPer = new int[3];
    List<Integer> frameRows = new ArrayList<>();
    try (BufferAllocator allocator = new RootAllocator()) {
      while (frames.hasNext()) {
        Tuple2<Integer, byte[]> f = frames.next();
        int n = readAll(f._2(), allocator).size();
        rowsPer[f._1()] += n;
        frameRows.add(n);
      }
    }
    assertEquals(9, rowsPer[0]);
    assertEquals(0, rowsPer[1]);
    assertEquals(16, rowsPer[2]);
    // partition 0: 4, 4, 1; partition 2: 4 x 4
    assertEquals(List.of(4, 4, 4, 4, 4, 4, 1), frameRows.stream().sorted((a, b) -> b - a).toList());
  }

  @Test
  void aFrameOfAnArrowBatch() throws IOException {
    StructType s = new StructType().add("x", DataTypes.IntegerType);
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(ArrowFrames.arrowSchema(s), allocator)) {
      IntVector x = (IntVector) root.getVector(0);
      x.allocateNew(3);
      x.set(0, 7);
      x.setNull(1);
      x.set(2, -1);
      x.setValueCount(3);
      root.setRowCount(3);
      byte[] frame = ArrowFrames.frame(root);
      try (ArrowStreamReader reader =
          new ArrowStreamReader(new ByteArrayInputStream(frame), allocator)) {
        assertTrue(reader.loadNextBatch());
        IntVector got = (IntVector) reader.getVectorSchemaRoot().getVector(0);
        assertEquals(3, got.getValueCount());
        assertEquals(Arrays.asList(7, null, -1),
            Arrays.asList(got.getObject(0), got.getObject(1), got.getObject(2)));
        assertFalse(reader.loadNextBatch());
      }
    }
  }

  @Test
  void batchBytesClosesAFrameBeforeBatchRows() {
    StructType s = new StructType().add("str", DataTypes.StringType);
    try (ArrowFrames w = new ArrowFrames(s, 1, 1, 1000, 100)) {
      String big = "x".repeat(60);
      assertNull(w.append(0, new GenericInternalRow(new Object[] {0, UTF8String.fromString(big)})));
      assertNotNull(w.append(0, new GenericInternalRow(new Object[] {0, UTF8String.fromString(big)})));
    }
  }
}
