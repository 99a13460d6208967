package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.time.LocalDateTime;
import java.util.Collections;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.nio.channels.Channels;
import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelReader;
import dev.funnel.ReadStats;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.flatbuf.BodyCompression;
import org.apache.arrow.flatbuf.BodyCompressionMethod;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.CompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.ipc.message.MessageMetadataResult;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.CatalystTypeConverters;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import scala.Tuple2;

/**
 * The map side's frames, read back by Arrow Java's own stream reader, and as Spark reads Arrow
 * (its ArrowColumnVector) for the nested types.
 */
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

  /** Arrow Java's codecs: its readers given them read frames of any {@link FrameCompression}. */
  static final CompressionCodec.Factory CODECS = CommonsCompressionFactory.INSTANCE;

  /**
   * The codec {@code frame}'s RecordBatch header names (NO_COMPRESSION when it has none), as
   * Arrow Java's MessageSerializer reads the frame: one RecordBatch message, no Schema message
   * before it and nothing after its body.
   */
  static CodecType bodyCodec(byte[] frame) throws IOException {
    try (ReadChannel in = new ReadChannel(Channels.newChannel(new ByteArrayInputStream(frame)))) {
      MessageMetadataResult batch = MessageSerializer.readMessage(in);
      assertEquals(MessageHeader.RecordBatch, batch.getMessage().headerType());
      assertEquals(frame.length, in.bytesRead() + batch.getMessageBodyLength(),
          "a frame is its batch's message and body, nothing after");
      RecordBatch header = (RecordBatch) batch.getMessage().header(new RecordBatch());
      BodyCompression compression = header.compression();
      if (compression == null) {
        return CodecType.NO_COMPRESSION;
      }
      assertEquals(BodyCompressionMethod.BUFFER, compression.method());
      return CodecType.fromCompressionType(compression.codec());
    }
  }

  /**
   * {@code frame} in a whole Arrow IPC stream of {@code schema} (its Schema message, the frame,
   * the end-of-stream marker), which Arrow Java's stream reader reads.
   */
  static byte[] asStream(byte[] frame, Schema schema) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    WriteChannel channel = new WriteChannel(Channels.newChannel(out));
    MessageSerializer.serialize(channel, schema);
    channel.write(frame);
    ArrowStreamWriter.writeEndOfStream(channel, IpcOption.DEFAULT);
    return out.toByteArray();
  }

  static InternalRow nulls(int partition) {
    Object[] v = new Object[1 + ALL.fields().length];
    v[0] = partition;
    return new GenericInternalRow(v);
  }

  /** The frame's rows as Arrow Java reads them ({@link #rowOf}). */
  static List<List<Object>> readAll(byte[] frame, BufferAllocator allocator) throws IOException {
    List<List<Object>> rows = new ArrayList<>();
    byte[] stream = asStream(frame, ArrowFrames.arrowSchema(ALL));
    try (ArrowStreamReader reader =
        new ArrowStreamReader(new ByteArrayInputStream(stream), allocator, CODECS)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      assertEquals(ArrowFrames.arrowSchema(ALL), root.getSchema());
      while (reader.loadNextBatch()) {
        for (int r = 0; r < root.getRowCount(); r++) {
          rows.add(rowOf(root, r));
        }
      }
    }
    return rows;
  }

  /** Row r of root as Arrow Java's vectors give it (strings as String, binary as a List). */
  static List<Object> rowOf(VectorSchemaRoot root, int r) {
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
    return row;
  }

  @Test
  void rejectsTypesItDoesNotWriteNamingTheColumn() {
    StructType t = new StructType().add("ok", DataTypes.IntegerType)
        .add("span", DataTypes.CalendarIntervalType);
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ArrowFrames.arrowSchema(t));
    assertTrue(e.getMessage().startsWith("column 'span' has type interval, which"),
        e.getMessage());
  }

  @Test
  void rejectsATypeItDoesNotWriteInsideANestedOneNamingWhere() {
    StructType t = new StructType().add("ok", DataTypes.createArrayType(DataTypes.IntegerType))
        .add("spans", DataTypes.createMapType(DataTypes.StringType,
            new StructType().add("x", DataTypes.createArrayType(DataTypes.CalendarIntervalType))));
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ArrowFrames.arrowSchema(t));
    assertTrue(e.getMessage().startsWith("column 'spans' has type"
        + " map<string,struct<x:array<interval>>>, whose spans.value.x.element is interval,"),
        e.getMessage());
  }

  @Test
  void rejectsAPartitionOutOfRange() {
    try (ArrowFrames w = new ArrowFrames(ALL, 1, 4, 10, 1 << 20, FrameCompression.LZ4)) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> w.append(4, row(4, 1)));
      assertTrue(e.getMessage().contains("reduce partition 4 out of [0, 4)"), e.getMessage());
    }
  }

  @ParameterizedTest
  @EnumSource(FrameCompression.class)
  void everyTypeAndNullsAsArrowJavaReadsThem(FrameCompression codec) throws IOException {
    List<List<Object>> got;
    try (BufferAllocator allocator = new RootAllocator();
        ArrowFrames w = new ArrowFrames(ALL, 1, 2, 3, 1 << 20, codec)) {
      assertNull(w.append(1, row(1, 1)));
      assertNull(w.append(1, nulls(1)));
      byte[] full = w.append(1, row(1, 2)); // 3 rows: the batch is full
      assertNotNull(full);
      assertNull(w.flush(1), "nothing left after a full frame");
      assertNull(w.flush(0), "no rows for partition 0");
      assertEquals(codec.arrowType(), bodyCodec(full));
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
        ArrowFrames.frames(rows.iterator(), ALL, 3, 4, 1 << 20, FrameCompression.LZ4);
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

  /**
   * A reduce task's frames as the map side writes them (bare RecordBatch messages) read by
   * funnel's device path (the cpu backend runs the device's code) with the shuffle's schema: every
   * frame parsed there, LZ4 bodies decoded there; the rows as Arrow Java reads each frame.
   */
  @ParameterizedTest
  @EnumSource(value = FrameCompression.class, names = {"NONE", "LZ4"})
  void framesReadByTheDevicePathAsArrowJavaReadsThem(FrameCompression codec) throws IOException {
    List<InternalRow> rows = new ArrayList<>();
    for (int k = 0; k < 1_500; k++) {
      rows.add(k % 7 == 3 ? nulls(0) : row(0, k));
    }
    List<byte[]> frames = new ArrayList<>();
    ArrowFrames.frames(rows.iterator(), ALL, 1, 10, 1 << 20, codec)
        .forEachRemaining(f -> frames.add(f._2()));
    assertEquals(150, frames.size());
    List<List<Object>> want = new ArrayList<>();
    List<ByteBuffer> parts = new ArrayList<>();
    try (BufferAllocator allocator = new RootAllocator()) {
      for (byte[] f : frames) {
        want.addAll(readAll(f, allocator));
        parts.add(ByteBuffer.allocateDirect(f.length).put(f).flip());
      }
      try (FunnelDevice device = FunnelDevice.open(SparkJobs.BACKEND);
          FunnelReader reader = new FunnelReader(device, ArrowFrames.arrowSchema(ALL))
              .setParse(FunnelReader.Parse.DEVICE).setDecode(FunnelReader.Decode.DEVICE);
          DeviceTable table = reader.read(parts);
          VectorSchemaRoot got = table.toArrow(allocator)) {
        ReadStats stats = table.stats();
        assertTrue(stats.parsedOnDevice(), stats.toJson());
        assertEquals(frames.size(), stats.deviceParsed(), stats.toJson());
        if (codec == FrameCompression.LZ4) {
          assertEquals(frames.size(), stats.compressedPartitions(), stats.toJson());
          assertEquals(0, stats.decodeNanos(), "nothing decoded on the host: " + stats.toJson());
        }
        assertEquals(want.size(), got.getRowCount());
        for (int r = 0; r < want.size(); r++) {
          assertEquals(want.get(r), rowOf(got, r), "row " + r);
        }
      }
    }
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
      byte[] frame = ArrowFrames.frame(root, FrameCompression.ZSTD);
      assertEquals(CodecType.ZSTD, bodyCodec(frame));
      byte[] stream = asStream(frame, root.getSchema());
      try (ArrowStreamReader reader =
          new ArrowStreamReader(new ByteArrayInputStream(stream), allocator, CODECS)) {
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
    try (ArrowFrames w = new ArrowFrames(s, 1, 1, 1000, 100, FrameCompression.LZ4)) {
      String big = "x".repeat(60);
      assertNull(w.append(0, new GenericInternalRow(new Object[] {0, UTF8String.fromString(big)})));
      assertNotNull(w.append(0, new GenericInternalRow(new Object[] {0, UTF8String.fromString(big)})));
    }
  }

  static final StructType AB =
      new StructType().add("a", DataTypes.IntegerType).add("b", DataTypes.StringType);

  /**
   * Nested columns, with nulls allowed at every level but the map keys and in tags; none is a
   * struct of no fields.
   */
  static final StructType NESTED =
      new StructType()
          .add("ints", DataTypes.createArrayType(DataTypes.IntegerType))
          .add("strs", DataTypes.createArrayType(DataTypes.StringType))
          .add("m", DataTypes.createMapType(DataTypes.StringType, DataTypes.LongType))
          .add("st", AB)
          .add("structs", DataTypes.createArrayType(AB))
          .add("sm", new StructType().add("n", DataTypes.IntegerType)
              .add("m", DataTypes.createMapType(DataTypes.StringType, DataTypes.IntegerType)))
          .add("deep", DataTypes.createArrayType(DataTypes.createMapType(
              DataTypes.StringType, DataTypes.createArrayType(DataTypes.IntegerType))))
          .add("tags", DataTypes.createArrayType(DataTypes.StringType, false), false)
          .add("none", new StructType());

  private static GenericArrayData array(Object... values) {
    return new GenericArrayData(values);
  }

  private static ArrayBasedMapData map(Object... keysAndValues) {
    Object[] keys = new Object[keysAndValues.length / 2];
    Object[] values = new Object[keys.length];
    for (int k = 0; k < keys.length; k++) {
      keys[k] = keysAndValues[2 * k];
      values[k] = keysAndValues[2 * k + 1];
    }
    return new ArrayBasedMapData(array(keys), array(values));
  }

  private static GenericInternalRow struct(Object... values) {
    return new GenericInternalRow(values);
  }

  private static UTF8String s(String s) {
    return UTF8String.fromString(s);
  }

  /** Rows of {@link #NESTED}: values with nulls inside, empty ones, nulls, single elements. */
  static final Object[][] NESTED_ROWS = {
    {
      array(1, null, 3),
      array(s("a"), null, s("")),
      map(s("k1"), 1L, s("k2"), null),
      struct(7, null),
      array(struct(1, s("x")), null, struct(null, s("y"))),
      struct(5, map(s("z"), null, s("y"), 2)),
      array(map(s("p"), array(1, null)), null, map(), map(s("q"), null)),
      array(s("t1"), s("t2")),
      struct()
    },
    {
      array(), array(), map(), struct(null, null), array(), struct(null, map()), array(), array(),
      null
    },
    {null, null, null, null, null, null, null, array(s("")), null},
    {
      array((Object) null),
      array((Object) null),
      map(s("only"), null),
      struct(0, s("é")),
      array((Object) null),
      struct(1, null),
      array((Object) null),
      array(s("中文")),
      struct()
    },
    {
      array(-1),
      array(s("a longer string, of more than a few bytes")),
      map(s(""), Long.MIN_VALUE),
      struct(Integer.MAX_VALUE, s("")),
      array(struct(null, null)),
      null,
      array(map(s("a"), array())),
      array(),
      null
    },
  };

  /**
   * {@code root}'s rows as Spark reads Arrow (its ArrowColumnVector), made external rows (Row,
   * Seq, Map) by Spark's own converter, which compare by value.
   */
  static List<Row> sparkRows(VectorSchemaRoot root, StructType schema) {
    ColumnVector[] columns = new ColumnVector[root.getFieldVectors().size()];
    for (int c = 0; c < columns.length; c++) {
      columns[c] = new ArrowColumnVector(root.getVector(c));
    }
    ColumnarBatch batch = new ColumnarBatch(columns, root.getRowCount());
    scala.Function1<Object, Object> toRow = CatalystTypeConverters.createToScalaConverter(schema);
    List<Row> rows = new ArrayList<>();
    for (int r = 0; r < root.getRowCount(); r++) {
      rows.add((Row) toRow.apply(batch.getRow(r))); // a copy: the batch's row is reused
    }
    return rows;
  }

  /** The frame's rows as Spark reads them ({@link #sparkRows}). */
  static List<Row> readBySpark(byte[] frame, StructType schema, BufferAllocator allocator)
      throws IOException {
    List<Row> rows = new ArrayList<>();
    byte[] stream = asStream(frame, ArrowFrames.arrowSchema(schema));
    try (ArrowStreamReader reader =
        new ArrowStreamReader(new ByteArrayInputStream(stream), allocator, CODECS)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      assertEquals(ArrowFrames.arrowSchema(schema), root.getSchema());
      while (reader.loadNextBatch()) {
        rows.addAll(sparkRows(root, schema));
      }
    }
    return rows;
  }

  @Test
  void nestedTypesAreWrittenAsSparksOwnArrowSchema() {
    // Spark's own conversion (ArrowUtils, as for Arrow UDFs): the same names, types, nullability
    assertEquals(ArrowUtils.toArrowSchema(NESTED, "UTC", true, false),
        ArrowFrames.arrowSchema(NESTED));
  }

  /**
   * Writes rows of {@code schema} (their values; partition 0) in frames of {@code batchRows} rows
   * and asserts that Spark reads back each row written; returns the frames' rows.
   */
  static List<Integer> assertRoundTrip(
      StructType schema, List<Object[]> rows, int batchRows, FrameCompression codec)
      throws IOException {
    scala.Function1<Object, Object> toRow = CatalystTypeConverters.createToScalaConverter(schema);
    List<Row> expected = new ArrayList<>();
    List<Row> got = new ArrayList<>();
    List<Integer> frameRows = new ArrayList<>();
    try (BufferAllocator allocator = new RootAllocator();
        ArrowFrames w = new ArrowFrames(schema, 1, 1, batchRows, 1 << 20, codec)) {
      List<byte[]> frames = new ArrayList<>();
      for (Object[] values : rows) {
        expected.add((Row) toRow.apply(new GenericInternalRow(values)));
        Object[] row = new Object[1 + values.length];
        System.arraycopy(values, 0, row, 1, values.length); // column 0, the partition: 0
        row[0] = 0;
        byte[] f = w.append(0, new GenericInternalRow(row));
        if (f != null) {
          frames.add(f);
        }
      }
      frames.add(w.flush(0));
      for (byte[] f : frames) {
        assertEquals(codec.arrowType(), bodyCodec(f));
        List<Row> read = readBySpark(f, schema, allocator);
        frameRows.add(read.size());
        got.addAll(read);
      }
    }
    assertEquals(expected.size(), got.size());
    for (int r = 0; r < expected.size(); r++) {
      assertEquals(expected.get(r), got.get(r), "row " + r);
    }
    return frameRows;
  }

  @ParameterizedTest
  @EnumSource(FrameCompression.class)
  void nestedTypesNullsAndEmptyCollectionsRoundTripThroughSparksArrowReader(FrameCompression codec)
      throws IOException {
    List<Object[]> rows = new ArrayList<>();
    for (int k = 0; k < 3; k++) { // thrice: the frames after the first reuse the vectors
      rows.addAll(Arrays.asList(NESTED_ROWS));
    }
    assertEquals(List.of(4, 4, 4, 3), assertRoundTrip(NESTED, rows, 4, codec));
  }

  @ParameterizedTest
  @EnumSource(FrameCompression.class)
  void everyFlatTypeInsideAnArrayOfStructs(FrameCompression codec) throws IOException {
    StructType schema = new StructType().add("all", DataTypes.createArrayType(ALL));
    int n = ALL.fields().length;
    Object[] one = Arrays.copyOfRange(((GenericInternalRow) row(0, 1)).values(), 1, 1 + n);
    Object[] two = Arrays.copyOfRange(((GenericInternalRow) row(0, 2)).values(), 1, 1 + n);
    List<Object[]> rows = List.of(
        new Object[] {array(struct(one), null, struct(new Object[n]), struct(two))},
        new Object[] {array()},
        new Object[] {null});
    assertEquals(List.of(3), assertRoundTrip(schema, rows, 10, codec));
  }

  @Test
  void nestedBytesCloseAFrame() {
    StructType schema =
        new StructType().add("strs", DataTypes.createArrayType(DataTypes.StringType));
    try (ArrowFrames w = new ArrowFrames(schema, 1, 1, 1000, 100, FrameCompression.LZ4)) {
      GenericArrayData strs = array(s("x".repeat(30)), s("y".repeat(30)));
      assertNull(w.append(0, new GenericInternalRow(new Object[] {0, strs})));
      assertNotNull(w.append(0, new GenericInternalRow(new Object[] {0, strs})));
    }
  }

  static final StructType INT_AND_STRING =
      new StructType().add("i", DataTypes.IntegerType).add("s", DataTypes.StringType);

  /** One frame of {@code codec} of 10,000 rows of ten ints and ten strings, a few nulls. */
  static byte[] compressibleFrame(FrameCompression codec) {
    try (ArrowFrames w = new ArrowFrames(INT_AND_STRING, 1, 1, 100_000, 1L << 30, codec)) {
      for (int k = 0; k < 10_000; k++) {
        assertNull(w.append(0, new GenericInternalRow(new Object[] {
            0, k % 10, k % 97 == 0 ? null : s("value-" + (k % 10))})));
      }
      return w.flush(0);
    }
  }

  @Test
  void compressedFramesAreSmallerAndReadBackTheSame() throws IOException {
    byte[] none = compressibleFrame(FrameCompression.NONE);
    byte[] lz4 = compressibleFrame(FrameCompression.LZ4);
    byte[] zstd = compressibleFrame(FrameCompression.ZSTD);
    assertEquals(CodecType.NO_COMPRESSION, bodyCodec(none));
    assertEquals(CodecType.LZ4_FRAME, bodyCodec(lz4));
    assertEquals(CodecType.ZSTD, bodyCodec(zstd));
    // 10,000 ints (40 KB) and strings (70 KB of values, 40 KB of offsets) of 10 values; the
    // offsets, a string of 7 bytes after another, are what lz4 compresses least
    assertTrue(none.length > 140_000, "uncompressed frame of " + none.length + " bytes");
    assertTrue(lz4.length < none.length / 3, "lz4 " + lz4.length + " of " + none.length);
    assertTrue(zstd.length < none.length / 3, "zstd " + zstd.length + " of " + none.length);
    try (BufferAllocator allocator = new RootAllocator()) {
      List<Row> expected = readBySpark(none, INT_AND_STRING, allocator);
      assertEquals(10_000, expected.size());
      assertEquals(expected, readBySpark(lz4, INT_AND_STRING, allocator));
      assertEquals(expected, readBySpark(zstd, INT_AND_STRING, allocator));
    }
  }
}
