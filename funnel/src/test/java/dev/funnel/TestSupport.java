package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Random;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseLargeVariableWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.DateMilliVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.LargeVarBinaryVector;
import org.apache.arrow.vector.LargeVarCharVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.UInt1Vector;
import org.apache.arrow.vector.UInt2Vector;
import org.apache.arrow.vector.UInt4Vector;
import org.apache.arrow.vector.UInt8Vector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.DateUnit;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;

/**
 * What every test shares: opening the device under test, the catalogue of supported types, writing
 * partitions with Arrow Java, the independent answer (Arrow Java's own reading of the same bytes)
 * and the stats invariants every successful read must keep.
 */
final class TestSupport {
  private TestSupport() {}

  /** The backend the suite runs on (surefire passes funnel.backend; cpu by default). */
  static final String BACKEND = System.getProperty("funnel.backend", "cpu");

  /** The one way tests open the device: a GPU run that silently fell back to cpu fails here. */
  static FunnelDevice openDevice() {
    FunnelDevice device = FunnelDevice.open(BACKEND);
    if (!BACKEND.equals("auto") && !BACKEND.equals(device.backend())) {
      String got = device.backend();
      device.close();
      fail("asked for backend '" + BACKEND + "' but funnel opened '" + got + "'");
    }
    return device;
  }

  // ------------------------------------------------------------------ types

  static Field nullable(String name, ArrowType type) {
    return Field.nullable(name, type);
  }

  static Field notNull(String name, ArrowType type) {
    return new Field(name, FieldType.notNullable(type), null);
  }

  /** One field of every type funnel reads (funnel.h's enum funnel_type_id), all variants. */
  static List<Field> supportedFields() {
    return List.of(
        notNull("id", new ArrowType.Int(64, true)),
        nullable("i8", new ArrowType.Int(8, true)),
        nullable("i16", new ArrowType.Int(16, true)),
        nullable("i32", new ArrowType.Int(32, true)),
        nullable("i64", new ArrowType.Int(64, true)),
        nullable("u8", new ArrowType.Int(8, false)),
        nullable("u16", new ArrowType.Int(16, false)),
        nullable("u32", new ArrowType.Int(32, false)),
        nullable("u64", new ArrowType.Int(64, false)),
        nullable("f32", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)),
        nullable("f64", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
        nullable("bool", ArrowType.Bool.INSTANCE),
        nullable("date32", new ArrowType.Date(DateUnit.DAY)),
        nullable("date64", new ArrowType.Date(DateUnit.MILLISECOND)),
        nullable("ts_s", new ArrowType.Timestamp(TimeUnit.SECOND, null)),
        nullable("ts_ms", new ArrowType.Timestamp(TimeUnit.MILLISECOND, null)),
        nullable("ts_us", new ArrowType.Timestamp(TimeUnit.MICROSECOND, null)),
        nullable("ts_ns", new ArrowType.Timestamp(TimeUnit.NANOSECOND, null)),
        nullable("ts_s_tz", new ArrowType.Timestamp(TimeUnit.SECOND, "UTC")),
        nullable("ts_ms_tz", new ArrowType.Timestamp(TimeUnit.MILLISECOND, "Europe/Paris")),
        nullable("ts_us_tz", new ArrowType.Timestamp(TimeUnit.MICROSECOND, "America/New_York")),
        nullable("ts_ns_tz", new ArrowType.Timestamp(TimeUnit.NANOSECOND, "Asia/Kolkata")),
        nullable("dec20_3", new ArrowType.Decimal(20, 3, 128)),
        nullable("dec38_10", new ArrowType.Decimal(38, 10, 128)),
        nullable("utf8", ArrowType.Utf8.INSTANCE),
        nullable("binary", ArrowType.Binary.INSTANCE),
        nullable("large_utf8", ArrowType.LargeUtf8.INSTANCE),
        nullable("large_binary", ArrowType.LargeBinary.INSTANCE),
        nullable("fsb5", new ArrowType.FixedSizeBinary(5)),
        nullable("fsb16", new ArrowType.FixedSizeBinary(16)),
        notNull("utf8_not_null", ArrowType.Utf8.INSTANCE),
        notNull("bool_not_null", ArrowType.Bool.INSTANCE));
  }

  static Schema allTypesSchema() {
    return new Schema(supportedFields());
  }

  // ------------------------------------------------------------------- data

  private static final String[] TEXT = {"a", "b", "z", "0", " ", "é", "ß", "中", "文", "😀", "\n"};

  /** Fills `root` with `rows` random rows; nullable fields are null with probability nullRate. */
  static void fill(VectorSchemaRoot root, int rows, Random random, double nullRate) {
    root.clear();
    root.allocateNew();
    for (FieldVector v : root.getFieldVectors()) {
      boolean canBeNull = v.getField().isNullable();
      for (int i = 0; i < rows; i++) {
        if (canBeNull && random.nextDouble() < nullRate) {
          v.setNull(i);
        } else {
          setRandom(v, i, random);
        }
      }
    }
    root.setRowCount(rows);
  }

  /** Sets slot i of v to a random value of its type. */
  static void setRandom(FieldVector v, int i, Random r) {
    if (v instanceof TinyIntVector x) {
      x.setSafe(i, (byte) r.nextInt());
    } else if (v instanceof SmallIntVector x) {
      x.setSafe(i, (short) r.nextInt());
    } else if (v instanceof IntVector x) {
      x.setSafe(i, r.nextInt());
    } else if (v instanceof BigIntVector x) {
      x.setSafe(i, r.nextLong());
    } else if (v instanceof UInt1Vector x) {
      x.setSafe(i, r.nextInt(256));
    } else if (v instanceof UInt2Vector x) {
      x.setSafe(i, r.nextInt(65536));
    } else if (v instanceof UInt4Vector x) {
      x.setSafe(i, r.nextInt());
    } else if (v instanceof UInt8Vector x) {
      x.setSafe(i, r.nextLong());
    } else if (v instanceof Float4Vector x) {
      int k = r.nextInt(20);
      x.setSafe(i, k == 0 ? Float.NaN : k == 1 ? -0.0f : (r.nextFloat() - 0.5f) * 1e6f);
    } else if (v instanceof Float8Vector x) {
      int k = r.nextInt(20);
      x.setSafe(i, k == 0 ? Double.NEGATIVE_INFINITY : k == 1 ? Double.MIN_VALUE : r.nextGaussian() * 1e9);
    } else if (v instanceof BitVector x) {
      x.setSafe(i, r.nextBoolean() ? 1 : 0);
    } else if (v instanceof DateDayVector x) {
      x.setSafe(i, r.nextInt(80_000) - 20_000);
    } else if (v instanceof DateMilliVector x) {
      x.setSafe(i, (r.nextInt(80_000) - 20_000) * 86_400_000L);
    } else if (v instanceof TimeStampVector x) {
      ArrowType.Timestamp t = (ArrowType.Timestamp) v.getField().getType();
      long seconds = r.nextInt();
      long value =
          switch (t.getUnit()) {
            case SECOND -> seconds;
            case MILLISECOND -> seconds * 1_000L + r.nextInt(1_000);
            case MICROSECOND -> seconds * 1_000_000L + r.nextInt(1_000_000);
            case NANOSECOND -> seconds * 1_000_000_000L + r.nextInt(1_000_000_000);
          };
      x.setSafe(i, value);
    } else if (v instanceof DecimalVector x) {
      BigInteger unscaled = new BigInteger(66, r);
      x.setSafe(i, new BigDecimal(r.nextBoolean() ? unscaled : unscaled.negate(), x.getScale()));
    } else if (v instanceof VarCharVector x) {
      x.setSafe(i, randomText(r));
    } else if (v instanceof LargeVarCharVector x) {
      x.setSafe(i, randomText(r));
    } else if (v instanceof VarBinaryVector x) {
      x.setSafe(i, randomBytes(r, r.nextInt(24)));
    } else if (v instanceof LargeVarBinaryVector x) {
      x.setSafe(i, randomBytes(r, r.nextInt(24)));
    } else if (v instanceof FixedSizeBinaryVector x) {
      x.setSafe(i, randomBytes(r, x.getByteWidth()));
    } else {
      throw new IllegalArgumentException("no random values for " + v.getClass().getSimpleName());
    }
  }

  static byte[] randomText(Random r) {
    StringBuilder s = new StringBuilder();
    int n = r.nextInt(10) == 0 ? 0 : r.nextInt(16);
    for (int k = 0; k < n; k++) {
      s.append(TEXT[r.nextInt(TEXT.length)]);
    }
    return s.toString().getBytes(StandardCharsets.UTF_8);
  }

  static byte[] randomBytes(Random r, int n) {
    byte[] b = new byte[n];
    r.nextBytes(b);
    return b;
  }

  // ---------------------------------------------------------------- writing

  /** An IPC stream of `schema` with one RecordBatch of random rows per entry of batchRows. */
  static byte[] randomStream(
      Schema schema, BufferAllocator allocator, Random random, double nullRate, int... batchRows) {
    return randomStream(schema, allocator, random, nullRate, IpcOption.DEFAULT, batchRows);
  }

  static byte[] randomStream(
      Schema schema,
      BufferAllocator allocator,
      Random random,
      double nullRate,
      IpcOption option,
      int... batchRows) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowStreamWriter writer =
          new ArrowStreamWriter(root, null, Channels.newChannel(out), option)) {
        writer.start();
        for (int rows : batchRows) {
          fill(root, rows, random, nullRate);
          writer.writeBatch();
        }
        writer.end();
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** An IPC stream holding root's current contents as one RecordBatch. */
  static byte[] streamOf(VectorSchemaRoot root) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
      writer.start();
      writer.writeBatch();
      writer.end();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** The encapsulated Schema message of `schema`, as Arrow Java writes it. */
  static byte[] schemaMessage(Schema schema) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      MessageSerializer.serialize(new WriteChannel(Channels.newChannel(out)), schema);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** A bare RecordBatch message of root's current contents (MessageSerializer). */
  static byte[] bareBatch(VectorSchemaRoot root) {
    try (ArrowRecordBatch batch = new VectorUnloader(root).getRecordBatch()) {
      return bareBatch(batch);
    }
  }

  static byte[] bareBatch(ArrowRecordBatch batch) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      MessageSerializer.serialize(new WriteChannel(Channels.newChannel(out)), batch);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** The end-of-stream marker. */
  static byte[] endOfStream() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      ArrowStreamWriter.writeEndOfStream(new WriteChannel(Channels.newChannel(out)), IpcOption.DEFAULT);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }

  /** A direct ByteBuffer holding a copy of `bytes`, position 0, limit its length. */
  static ByteBuffer direct(byte[] bytes) {
    return ByteBuffer.allocateDirect(bytes.length).put(bytes).flip();
  }

  static ByteBuffer[] direct(List<byte[]> partitions) {
    ByteBuffer[] out = new ByteBuffer[partitions.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = direct(partitions.get(i));
    }
    return out;
  }

  /** Copies `bytes` into an ArrowBuf of the allocator (the caller closes it). */
  static ArrowBuf arrowBuf(BufferAllocator allocator, byte[] bytes) {
    ArrowBuf b = allocator.buffer(Math.max(1, bytes.length));
    b.setBytes(0, bytes);
    return b;
  }

  // ------------------------------------------------------- stats invariants

  /** Asserts the stats invariants on `table` (closing it if they fail) and returns it. */
  static DeviceTable checked(DeviceTable table, long partitions) {
    try {
      assertStatsInvariants(table.stats(), partitions);
    } catch (Throwable e) {
      table.close();
      throw e;
    }
    return table;
  }

  /** reader.read(parts), with the stats invariants checked. */
  static DeviceTable read(FunnelReader reader, ByteBuffer... partitions) {
    return checked(reader.read(partitions), partitions.length);
  }

  static DeviceTable read(FunnelReader reader, List<byte[]> partitions) {
    return read(reader, direct(partitions));
  }

  /**
   * {@link Handles#live()} once the collector has freed what earlier tests left unreachable (their
   * cleaners run on their own thread): counts no other test's garbage moves afterwards.
   */
  static long[] settledLive() {
    long[] last = Handles.live();
    for (int i = 0; i < 100; i++) {
      System.gc();
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
      long[] now = Handles.live();
      if (Arrays.equals(now, last)) {
        return now;
      }
      last = now;
    }
    return last;
  }

  /**
   * The invariants of the design (ReadStats' javadoc), true of every successful read, by the path
   * it took: the host path; the device path; or the host path after a device-path attempt, with
   * that attempt's copies (the partitions and a table), its launches (parse, scan over 1024
   * partitions or after a parse in parts, a concat that copies nothing) and its two waits (the
   * sums, then its work).
   */
  static void assertStatsInvariants(ReadStats s, long partitions) {
    boolean attempt = s.deviceParsed() > 0;
    boolean onDevice = s.parsedOnDevice();
    // LZ4 bodies read by the device path: its first pass (the unpack) and the decoder's launch;
    // when it waited for the first pass (decodeWaits 1, or 2 after it went in one go and found
    // the gate shut), the args and summary uploaded again, and after a shut gate the launches
    // after the first pass again. An attempt at LZ4 bodies the host path then read (its
    // partitions compressed): the same launches, and its waits for the first pass, at most
    // decodeWaits more
    boolean unpacked = onDevice && s.compressedPartitions() > 0;
    boolean lz4Attempt = attempt && !onDevice && s.compressedPartitions() > 0;
    long waits = unpacked || (attempt && !onDevice) ? s.decodeWaits() : 0;
    // the host path's LZ4 decoding on the device: its launch, and the wait for its statuses
    // before the concat; it may read pinned partitions' frames where they lie, a copy of each
    // such partition more
    long decoder = !onDevice && s.deviceDecoded() > 0 ? 1 : 0;
    long copies =
        (s.partitions() + 1) * (attempt && !onDevice ? 2 : 1)
            + (decoder > 0 ? s.compressedPartitions() : 0) + (waits > 0 ? 2 : 0);
    // the device path's parse: one launch, or one a part when it overlapped the copies (and a
    // read of LZ4 or ZSTD bodies so: a decoder a part too)
    long parses = Math.max(1, s.overlapParts());
    long zLaunches = (waits == 2 ? 6 : 2) + (s.overlapParts() > 1 ? s.overlapParts() : 0);
    long launches =
        onDevice
            ? 2 + parses + (unpacked ? zLaunches : 0)
            : s.columnSets() + (attempt ? 2 + parses : 0) + (lz4Attempt ? zLaunches : 0)
                + decoder;
    long base = (onDevice ? 1 + waits : attempt ? 2 : 0) + decoder;
    // compressed partitions after an uncompressed first one: the early copies are dropped
    long syncs =
        !onDevice && s.compressedPartitions() > 0 && s.syncsInRead() == base + 1 ? base + 1 : base;
    long syncsMost = onDevice ? syncs : syncs + waits;
    assertAll(
        "stats invariants of " + s,
        () -> assertEquals(partitions, s.partitions(), "partitions"),
        () -> assertTrue(s.h2dCopies() <= copies, "h2dCopies " + s.h2dCopies() + " > " + copies),
        () -> assertTrue(
            s.concatLaunches() <= launches,
            "concatLaunches " + s.concatLaunches() + " > " + launches),
        () -> assertEquals(0, onDevice ? 0 : s.deviceCallsParse(), "device calls while parsing"),
        () -> assertEquals(0, s.deviceCallsPlan(), "device calls while planning"),
        () -> assertTrue(
            s.syncsInRead() >= syncs && s.syncsInRead() <= syncsMost,
            "synchronizations inside read (the device path's 1): " + s.syncsInRead()
                + " not in [" + syncs + ", " + syncsMost + "]"));
  }

  // ---------------------------------------------------- the independent answer

  /**
   * Arrow Java's reader of one partition: a whole stream, an IPC file, or (given the reader's
   * schema) bare RecordBatch messages, which it reads after that schema's message.
   */
  static ArrowReader arrowReader(byte[] partition, Schema readerSchema, BufferAllocator allocator) {
    if (partition.length >= 6
        && new String(partition, 0, 6, StandardCharsets.US_ASCII).equals("ARROW1")) {
      return new ArrowFileReader(new ByteArrayReadableSeekableByteChannel(partition), allocator);
    }
    if (messages(partition).get(0).headerType() == MessageHeader.Schema) {
      return new ArrowStreamReader(new ByteArrayInputStream(partition), allocator);
    }
    assertNotNull(readerSchema, "a partition of bare RecordBatch messages needs the reader's schema");
    return new ArrowStreamReader(
        new ByteArrayInputStream(concat(schemaMessage(readerSchema), partition)), allocator);
  }

  /** Rows of a partition, as Arrow Java reads them. */
  static long arrowRows(byte[] partition, Schema readerSchema, BufferAllocator allocator) {
    if (partition.length == 0) {
      return 0;
    }
    long rows = 0;
    try (ArrowReader r = arrowReader(partition, readerSchema, allocator)) {
      while (r.loadNextBatch()) {
        rows += r.getVectorSchemaRoot().getRowCount();
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return rows;
  }

  /** What the concatenation of some partitions holds, per Arrow Java. */
  record Expectation(Schema schema, long rows, long[] nullCounts, long[] dataBytes) {}

  /**
   * Asserts that `got` holds, row by row, the concatenation of `partitions` as Arrow Java reads
   * them (zero-length partitions contribute nothing), and returns what was expected.
   */
  static Expectation assertRowsMatch(
      VectorSchemaRoot got, List<byte[]> partitions, Schema readerSchema, BufferAllocator allocator) {
    Schema want = readerSchema;
    long row = 0;
    long[] nulls = null;
    long[] dataBytes = null;
    for (int p = 0; p < partitions.size(); p++) {
      byte[] bytes = partitions.get(p);
      if (bytes.length == 0) {
        continue;
      }
      try (ArrowReader r = arrowReader(bytes, readerSchema, allocator)) {
        VectorSchemaRoot in = r.getVectorSchemaRoot();
        if (want == null) {
          want = in.getSchema();
        }
        int nCols = want.getFields().size();
        if (nulls == null) {
          nulls = new long[nCols];
          dataBytes = new long[nCols];
        }
        assertEquals(nCols, got.getFieldVectors().size(), "columns of the result");
        int batch = 0;
        while (r.loadNextBatch()) {
          int n = in.getRowCount();
          if (row + n > got.getRowCount()) {
            fail("partition " + p + " batch " + batch + ": the result has " + got.getRowCount()
                + " rows, the partitions up to here hold at least " + (row + n));
          }
          for (int c = 0; c < nCols; c++) {
            FieldVector want1 = in.getVector(c);
            FieldVector got1 = got.getVector(c);
            nulls[c] += want1.getNullCount();
            dataBytes[c] += dataBytes(want1, n);
            for (int i = 0; i < n; i++) {
              int at = (int) (row + i);
              boolean wantNull = want1.isNull(i);
              Object w = wantNull ? null : want1.getObject(i);
              Object g = got1.isNull(at) ? null : got1.getObject(at);
              if (wantNull != got1.isNull(at) || !valuesEqual(w, g)) {
                fail("partition " + p + " batch " + batch + " row " + i + " (result row " + at
                    + ") column " + c + " '" + want1.getName() + "': funnel gave " + show(g)
                    + ", Arrow Java reads " + show(w));
              }
            }
          }
          row += n;
          batch++;
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    assertNotNull(want, "no partition holds a schema and none was given: nothing to compare");
    if (nulls == null) {
      nulls = new long[want.getFields().size()];
      dataBytes = new long[want.getFields().size()];
    }
    assertEquals(row, got.getRowCount(), "rows of the result");
    for (int c = 0; c < nulls.length; c++) {
      assertEquals(nulls[c], got.getVector(c).getNullCount(),
          "null count of result column " + c + " (counted from its validity bits)");
    }
    return new Expectation(want, row, nulls, dataBytes);
  }

  /**
   * Asserts that `table` is the concatenation of `partitions` as Arrow Java reads them: schema,
   * row count, per-column null counts and buffer sizes, and every value (through toArrow).
   */
  static void assertTableMatches(
      DeviceTable table, List<byte[]> partitions, Schema readerSchema, BufferAllocator allocator) {
    Expectation e;
    try (VectorSchemaRoot got = table.toArrow(allocator)) {
      e = assertRowsMatch(got, partitions, readerSchema, allocator);
      assertEquals(e.schema(), got.getSchema(), "schema of toArrow's root");
    }
    assertEquals(e.schema(), table.schema(), "table schema");
    assertEquals(e.rows(), table.numRows(), "numRows");
    assertEquals(e.schema().getFields().size(), table.numColumns(), "numColumns");
    for (int c = 0; c < table.numColumns(); c++) {
      DeviceColumn col = table.column(c);
      Field f = e.schema().getFields().get(c);
      String what = "column " + c + " '" + f.getName() + "': ";
      assertEquals(f, col.field(), what + "field");
      assertEquals(e.rows(), col.length(), what + "length");
      assertEquals(e.nullCounts()[c], col.nullCount(), what + "nullCount");
      if (e.nullCounts()[c] == 0) {
        assertEquals(0, col.validitySize(), what + "validity is absent without nulls");
        assertEquals(0, col.validityAddress(), what + "validity is absent without nulls");
      } else {
        assertEquals((e.rows() + 7) / 8, col.validitySize(), what + "validity bytes");
        assertNotEquals(0, col.validityAddress(), what + "validity address");
      }
      int offsetWidth = offsetWidth(f);
      if (offsetWidth > 0) {
        assertEquals((e.rows() + 1) * offsetWidth, col.offsetsSize(), what + "offsets bytes");
        assertNotEquals(0, col.offsetsAddress(), what + "offsets address");
      } else {
        assertEquals(0, col.offsetsSize(), what + "no offsets for a fixed-width type");
      }
      long wantData =
          offsetWidth > 0 ? e.dataBytes()[c]
              : f.getType() instanceof ArrowType.Bool ? (e.rows() + 7) / 8
              : e.rows() * byteWidth(f);
      assertEquals(wantData, col.dataSize(), what + "data bytes");
      if (wantData > 0) {
        assertNotEquals(0, col.dataAddress(), what + "data address");
      }
    }
  }

  /** The bytes of value data `v`'s first n rows span (variable-width types), else 0. */
  private static long dataBytes(FieldVector v, int n) {
    if (v instanceof BaseVariableWidthVector x) {
      return n == 0 ? 0 : x.getOffsetBuffer().getInt(4L * n) - x.getOffsetBuffer().getInt(0);
    }
    if (v instanceof BaseLargeVariableWidthVector x) {
      return n == 0 ? 0 : x.getOffsetBuffer().getLong(8L * n) - x.getOffsetBuffer().getLong(0);
    }
    return 0;
  }

  static int offsetWidth(Field f) {
    ArrowType t = f.getType();
    if (t instanceof ArrowType.Utf8 || t instanceof ArrowType.Binary) {
      return 4;
    }
    if (t instanceof ArrowType.LargeUtf8 || t instanceof ArrowType.LargeBinary) {
      return 8;
    }
    return 0;
  }

  static int byteWidth(Field f) {
    ArrowType t = f.getType();
    if (t instanceof ArrowType.Int i) {
      return i.getBitWidth() / 8;
    }
    if (t instanceof ArrowType.FloatingPoint fp) {
      return fp.getPrecision() == FloatingPointPrecision.SINGLE ? 4 : 8;
    }
    if (t instanceof ArrowType.Date d) {
      return d.getUnit() == DateUnit.DAY ? 4 : 8;
    }
    if (t instanceof ArrowType.Timestamp) {
      return 8;
    }
    if (t instanceof ArrowType.Decimal) {
      return 16;
    }
    if (t instanceof ArrowType.FixedSizeBinary b) {
      return b.getByteWidth();
    }
    throw new IllegalArgumentException("no byte width for " + t);
  }

  static boolean valuesEqual(Object a, Object b) {
    if (a instanceof byte[] x && b instanceof byte[] y) {
      return Arrays.equals(x, y);
    }
    return Objects.equals(a, b);
  }

  private static String show(Object v) {
    return v instanceof byte[] b ? Arrays.toString(b) : String.valueOf(v);
  }

  // ----------------------------------------------------- IPC byte surgery

  /** One encapsulated message of a stream, located from its framing. */
  record Span(int start, int metaStart, int metaLength, long bodyLength, byte headerType, boolean eos) {
    int bodyStart() {
      return metaStart + metaLength;
    }

    int end() {
      return eos ? metaStart : (int) (bodyStart() + bodyLength);
    }
  }

  /** The messages of an IPC stream (continuation-marker or legacy framing). */
  static List<Span> messages(byte[] stream) {
    ByteBuffer b = ByteBuffer.wrap(stream).order(ByteOrder.LITTLE_ENDIAN);
    List<Span> out = new ArrayList<>();
    int pos = 0;
    while (pos < stream.length) {
      int start = pos;
      int len = b.getInt(pos);
      pos += 4;
      if (len == -1) {
        len = b.getInt(pos);
        pos += 4;
      }
      if (len == 0) {
        out.add(new Span(start, pos, 0, 0, MessageHeader.NONE, true));
        continue;
      }
      Message m = message(stream, pos, len);
      out.add(new Span(start, pos, len, m.bodyLength(), m.headerType(), false));
      pos += len + (int) m.bodyLength();
    }
    return out;
  }

  /** The Message flatbuffer of a span; positions in it are relative to span.metaStart(). */
  static Message message(byte[] stream, Span span) {
    return message(stream, span.metaStart(), span.metaLength());
  }

  private static Message message(byte[] stream, int at, int length) {
    ByteBuffer meta = ByteBuffer.wrap(stream, at, length).slice().order(ByteOrder.LITTLE_ENDIAN);
    return Message.getRootAsMessage(meta);
  }

  /** The first message of the stream with this header type. */
  static Span first(byte[] stream, byte headerType) {
    for (Span s : messages(stream)) {
      if (!s.eos() && s.headerType() == headerType) {
        return s;
      }
    }
    throw new AssertionError("no message of header type " + headerType);
  }

  /** Position (within its flatbuffer) of field `slot` of a table; fails when absent. */
  static int fieldPosition(com.google.flatbuffers.Table table, int slot) {
    try {
      Method offset = com.google.flatbuffers.Table.class.getDeclaredMethod("__offset", int.class);
      offset.setAccessible(true);
      int o = (int) offset.invoke(table, 4 + 2 * slot);
      assertTrue(o != 0, "field " + slot + " is absent from the flatbuffer table");
      java.lang.reflect.Field pos = com.google.flatbuffers.Table.class.getDeclaredField("bb_pos");
      pos.setAccessible(true);
      return pos.getInt(table) + o;
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  /** Position (within its flatbuffer) of the first element of the vector in field `slot`. */
  static int vectorPosition(com.google.flatbuffers.Table table, int slot) {
    try {
      Method offset = com.google.flatbuffers.Table.class.getDeclaredMethod("__offset", int.class);
      offset.setAccessible(true);
      int o = (int) offset.invoke(table, 4 + 2 * slot);
      assertTrue(o != 0, "vector field " + slot + " is absent from the flatbuffer table");
      Method vector = com.google.flatbuffers.Table.class.getDeclaredMethod("__vector", int.class);
      vector.setAccessible(true);
      return (int) vector.invoke(table, o);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  /** Where {@code text}'s UTF-8 bytes first lie in {@code bytes}; fails when nowhere. */
  static int indexOf(byte[] bytes, String text) {
    byte[] t = text.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i + t.length <= bytes.length; i++) {
      if (Arrays.equals(bytes, i, i + t.length, t, 0, t.length)) {
        return i;
      }
    }
    throw new AssertionError("\"" + text + "\" is not in the bytes");
  }

  /**
   * {@code stream} with the last byte of the first occurrence of {@code text} (a field name, a
   * metadata key or value: make it unique) replaced by 0xff, which no UTF-8 string holds; returns
   * the position of that byte.
   */
  static int breakUtf8(byte[] stream, String text) {
    int at = indexOf(stream, text) + text.getBytes(StandardCharsets.UTF_8).length - 1;
    stream[at] = (byte) 0xff;
    return at;
  }

  /**
   * A partition of a fixed_size_binary(0) column after an int32 one: the Schema message and the
   * end-of-stream marker (Arrow Java writes the schema, it cannot hold rows of the type).
   */
  static byte[] fixedSizeBinary0Partition() {
    Schema schema = new Schema(List.of(
        nullable("a", new ArrowType.Int(32, true)), nullable("z", new ArrowType.FixedSizeBinary(0))));
    return concat(schemaMessage(schema), endOfStream());
  }

  static void putLong(byte[] bytes, int at, long value) {
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putLong(at, value);
  }

  static void putInt(byte[] bytes, int at, int value) {
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putInt(at, value);
  }

  static long getLong(byte[] bytes, int at) {
    return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getLong(at);
  }

  static int getInt(byte[] bytes, int at) {
    return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getInt(at);
  }
}
