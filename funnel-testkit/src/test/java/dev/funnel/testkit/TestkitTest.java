package dev.funnel.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.types.DateUnit;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;

class TestkitTest {
  private static final Schema SCHEMA = new Schema(List.of(
      new Field("id", FieldType.notNullable(new ArrowType.Int(64, true)), null),
      Field.nullable("u16", new ArrowType.Int(16, false)),
      Field.nullable("f64", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
      Field.nullable("flag", ArrowType.Bool.INSTANCE),
      Field.nullable("day", new ArrowType.Date(DateUnit.DAY)),
      Field.nullable("ts", new ArrowType.Timestamp(TimeUnit.MICROSECOND, "UTC")),
      Field.nullable("price", new ArrowType.Decimal(20, 3, 128)),
      Field.nullable("name", ArrowType.Utf8.INSTANCE),
      Field.nullable("blob", ArrowType.LargeBinary.INSTANCE),
      Field.nullable("key", new ArrowType.FixedSizeBinary(8))));

  private static final String BACKEND = System.getProperty("funnel.backend", "cpu");

  @Test
  void partitionsHaveNullsEmptyOnesAndSeveralBatches() throws Exception {
    List<byte[]> parts = RandomPartitions.of(SCHEMA).partitions(60).seed(3).emptyRate(0.2).bytes();
    int zeroLength = 0;
    int noRows = 0;
    int manyBatches = 0;
    long nulls = 0;
    try (BufferAllocator allocator = new RootAllocator()) {
      for (byte[] p : parts) {
        if (p.length == 0) {
          zeroLength++;
          continue;
        }
        int batches = 0;
        long rows = 0;
        try (ArrowStreamReader r = new ArrowStreamReader(new ByteArrayInputStream(p), allocator)) {
          assertEquals(SCHEMA, r.getVectorSchemaRoot().getSchema());
          while (r.loadNextBatch()) {
            batches++;
            rows += r.getVectorSchemaRoot().getRowCount();
            nulls += r.getVectorSchemaRoot().getVector("name").getNullCount();
          }
        }
        noRows += rows == 0 ? 1 : 0;
        manyBatches += batches > 1 ? 1 : 0;
      }
    }
    assertTrue(zeroLength > 0 && noRows > 0 && manyBatches > 0 && nulls > 0,
        zeroLength + " zero-length, " + noRows + " without rows, " + manyBatches
            + " of several batches, " + nulls + " nulls");
    assertEquals(parts.size(), 60);
  }

  @Test
  void theSameSeedGivesTheSameBytes() {
    List<byte[]> a = RandomPartitions.of(SCHEMA).seed(9).bytes();
    List<byte[]> b = RandomPartitions.of(SCHEMA).seed(9).bytes();
    for (int p = 0; p < a.size(); p++) {
      assertTrue(java.util.Arrays.equals(a.get(p), b.get(p)), "partition " + p);
    }
  }

  @Test
  void aTableReadFromThePartitionsEqualsThem() {
    List<ByteBuffer> parts = RandomPartitions.of(SCHEMA).partitions(40).seed(5).buffers();
    try (FunnelDevice device = FunnelDevice.open(BACKEND);
        FunnelReader reader = new FunnelReader(device);
        DeviceTable table = reader.read(parts)) {
      TableAssert.assertTableEquals(parts, table);
    }
  }

  @Test
  void aDifferingValueIsNamedByRowAndColumn() throws Exception {
    List<byte[]> parts = RandomPartitions.of(SCHEMA).partitions(6).seed(11).emptyRate(0)
        .maxBatches(1).nullRate(0).bytes();
    long before = 0;
    try (BufferAllocator allocator = new RootAllocator()) {
      before = rows(parts.get(0), allocator) + rows(parts.get(1), allocator);
      List<byte[]> changed = new ArrayList<>(parts);
      changed.set(2, withId(parts.get(2), 3, -1L, allocator));
      List<ByteBuffer> read = new ArrayList<>();
      for (byte[] b : changed) {
        read.add(ByteBuffer.allocateDirect(b.length).put(b).flip());
      }
      try (FunnelDevice device = FunnelDevice.open(BACKEND);
          FunnelReader reader = new FunnelReader(device);
          DeviceTable table = reader.read(read)) {
        AssertionError e = assertThrows(AssertionError.class,
            () -> TableAssert.assertTableEqualsBytes(parts, table));
        assertTrue(e.getMessage().startsWith("row " + (before + 3)
            + " (partition 2, batch 0, row 3), column 0 'id': expected "), e.getMessage());
        assertTrue(e.getMessage().endsWith("the table has -1"), e.getMessage());
      }
    }
  }

  @Test
  void aMissingRowIsNamed() {
    List<ByteBuffer> parts = RandomPartitions.of(SCHEMA).partitions(5).seed(2).emptyRate(0)
        .buffers();
    try (FunnelDevice device = FunnelDevice.open(BACKEND);
        FunnelReader reader = new FunnelReader(device);
        DeviceTable table = reader.read(parts.subList(0, 4))) {
      AssertionError e = assertThrows(AssertionError.class,
          () -> TableAssert.assertTableEquals(parts, table));
      assertTrue(e.getMessage().startsWith("rows: the table has "), e.getMessage());
    }
  }

  @Test
  void compressedPartitionsAreComparedAsArrowJavaDecodesThem() throws Exception {
    List<byte[]> plain = RandomPartitions.of(SCHEMA).partitions(6).seed(11).emptyRate(0)
        .maxBatches(1).bytes();
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = FunnelDevice.open(BACKEND);
        FunnelReader reader = new FunnelReader(device)) {
      long before = rows(plain.get(0), allocator) + rows(plain.get(1), allocator);
      for (CodecType codec : List.of(CodecType.LZ4_FRAME, CodecType.ZSTD)) {
        List<byte[]> parts = new ArrayList<>();
        for (byte[] p : plain) {
          parts.add(compressed(p, codec, allocator));
        }
        try (DeviceTable table = reader.read(direct(parts))) {
          assertEquals(parts.size(), table.stats().compressedPartitions(), codec.toString());
          TableAssert.assertTableEqualsBytes(parts, table);
        }
        // the table read from a partition with one value changed: the expected side is decoded
        // and compared, not skipped
        List<byte[]> changed = new ArrayList<>(parts);
        changed.set(2, compressed(withId(plain.get(2), 3, -1L, allocator), codec, allocator));
        try (DeviceTable table = reader.read(direct(changed))) {
          AssertionError e = assertThrows(AssertionError.class,
              () -> TableAssert.assertTableEqualsBytes(parts, table));
          assertTrue(e.getMessage().startsWith("row " + (before + 3)
              + " (partition 2, batch 0, row 3), column 0 'id': expected "),
              codec + ": " + e.getMessage());
        }
      }
    }
  }

  private static List<ByteBuffer> direct(List<byte[]> parts) {
    List<ByteBuffer> read = new ArrayList<>();
    for (byte[] b : parts) {
      read.add(ByteBuffer.allocateDirect(b.length).put(b).flip());
    }
    return read;
  }

  /** The partition rewritten by Arrow Java with its bodies compressed by {@code codec}. */
  private static byte[] compressed(byte[] part, CodecType codec, BufferAllocator allocator)
      throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (ArrowStreamReader r = new ArrowStreamReader(new ByteArrayInputStream(part), allocator)) {
      VectorSchemaRoot root = r.getVectorSchemaRoot();
      try (ArrowStreamWriter w = new ArrowStreamWriter(root, null, Channels.newChannel(out),
          IpcOption.DEFAULT, CommonsCompressionFactory.INSTANCE, codec)) {
        w.start();
        while (r.loadNextBatch()) {
          w.writeBatch();
        }
        w.end();
      }
    }
    return out.toByteArray();
  }

  private static long rows(byte[] part, BufferAllocator allocator) throws Exception {
    long n = 0;
    try (ArrowStreamReader r = new ArrowStreamReader(new ByteArrayInputStream(part), allocator)) {
      while (r.loadNextBatch()) {
        n += r.getVectorSchemaRoot().getRowCount();
      }
    }
    return n;
  }

  /** The partition rewritten by Arrow Java with column "id" of row {@code row} set to value. */
  private static byte[] withId(byte[] part, int row, long value, BufferAllocator allocator)
      throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (ArrowStreamReader r = new ArrowStreamReader(new ByteArrayInputStream(part), allocator)) {
      VectorSchemaRoot root = r.getVectorSchemaRoot();
      try (ArrowStreamWriter w = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
        w.start();
        while (r.loadNextBatch()) {
          ((BigIntVector) root.getVector("id")).set(row, value);
          w.writeBatch();
        }
        w.end();
      }
    }
    return out.toByteArray();
  }
}
