package dev.funnel;

import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.bareBatch;
import static dev.funnel.TestSupport.concat;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.notNull;
import static dev.funnel.TestSupport.nullable;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Where the schema comes from (the partitions or the reader), and partitions that disagree. */
class SchemaTest extends DeviceTestCase {

  private static final List<Field> BASE =
      List.of(
          nullable("a", new ArrowType.Int(32, true)),
          nullable("b", ArrowType.Utf8.INSTANCE),
          nullable("c", new ArrowType.Timestamp(TimeUnit.MILLISECOND, "UTC")),
          nullable("d", new ArrowType.Decimal(20, 3, 128)),
          nullable("e", new ArrowType.FixedSizeBinary(5)));

  private static Schema base() {
    return new Schema(BASE);
  }

  private static Schema with(int column, Field replacement) {
    List<Field> f = new ArrayList<>(BASE);
    f.set(column, replacement);
    return new Schema(f);
  }

  /** Bare RecordBatch messages of random rows (rows.length messages back to back). */
  private byte[] bareBatches(Schema schema, Random random, int... rows) {
    List<byte[]> messages = new ArrayList<>();
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      for (int n : rows) {
        TestSupport.fill(root, n, random, 0.25);
        messages.add(bareBatch(root));
      }
    }
    return concat(messages.toArray(new byte[0][]));
  }

  @Test
  void readerGivenTheSchemaReadsBareRecordBatches() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(31);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 30; p++) {
      parts.add(p % 7 == 2 ? new byte[0] : bareBatches(schema, random, random.nextInt(40)));
    }
    parts.add(bareBatches(schema, random, 5, 0, 17, 1)); // several messages in one partition
    try (FunnelReader reader = new FunnelReader(device, schema);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, schema, allocator);
    }
  }

  @Test
  void readerGivenTheSchemaReadsBareAndWholeStreamPartitionsTogether() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(32);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 12; p++) {
      parts.add(p % 2 == 0
          ? bareBatches(schema, random, random.nextInt(30))
          : randomStream(schema, allocator, random, 0.25, random.nextInt(30)));
    }
    try (FunnelReader reader = new FunnelReader(device, schema);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, schema, allocator);
    }
  }

  @Test
  void readerGivenTheSchemaAndOnlyEmptyPartitionsGivesAnEmptyTableOfThatSchema() {
    Schema schema = TestSupport.allTypesSchema();
    List<byte[]> parts = List.of(new byte[0], new byte[0], new byte[0]);
    try (FunnelReader reader = new FunnelReader(device, schema);
        DeviceTable table = read(reader, parts)) {
      assertEquals(0, table.numRows());
      assertEquals(schema, table.schema());
      assertEquals(3, table.stats().emptyPartitions());
      assertTableMatches(table, parts, schema, allocator);
    }
  }

  @Test
  void readerGivenTheSchemaAndNoPartitionsGivesAnEmptyTableOfThatSchema() {
    Schema schema = TestSupport.allTypesSchema();
    try (FunnelReader reader = new FunnelReader(device, schema);
        DeviceTable table = read(reader)) {
      assertEquals(0, table.numRows());
      assertEquals(schema, table.schema());
      assertTableMatches(table, List.of(), schema, allocator);
    }
  }

  @Test
  void readerWithoutSchemaAndNoPartitionsThrowsNoSchema() {
    try (FunnelReader reader = new FunnelReader(device)) {
      InvalidPartitionException e = assertThrows(InvalidPartitionException.class, reader::read);
      assertEquals(FunnelException.Code.NO_SCHEMA, e.code(), e.getMessage());
      assertReaderStillReads(reader);
    }
  }

  @Test
  void readerWithoutSchemaAndOnlyZeroBytePartitionsThrowsNoSchema() {
    try (FunnelReader reader = new FunnelReader(device)) {
      InvalidPartitionException e = assertThrows(InvalidPartitionException.class,
          () -> reader.read(direct(new byte[0]), direct(new byte[0])).close());
      assertEquals(FunnelException.Code.NO_SCHEMA, e.code(), e.getMessage());
      assertReaderStillReads(reader);
    }
  }

  @Test
  void bareRecordBatchWithoutAReaderSchemaThrowsNoSchema() {
    byte[] bare = bareBatches(base(), new Random(33), 4);
    try (FunnelReader reader = new FunnelReader(device)) {
      InvalidPartitionException e = assertThrows(InvalidPartitionException.class,
          () -> reader.read(direct(new byte[0]), direct(bare)).close());
      assertEquals(FunnelException.Code.NO_SCHEMA, e.code(), e.getMessage());
      assertEquals(1, e.partition(), e.getMessage());
      assertTrue(e.getMessage().contains("partition 1"), e.getMessage());
      assertReaderStillReads(reader);
    }
  }

  static Stream<Arguments> mismatches() {
    List<Field> extra = new ArrayList<>(BASE);
    extra.add(nullable("f", new ArrowType.Int(8, true)));
    return Stream.of(
        Arguments.of("type", with(1, nullable("b", new ArrowType.Int(64, true))), 1),
        Arguments.of("utf8 vs binary", with(1, nullable("b", ArrowType.Binary.INSTANCE)), 1),
        Arguments.of("utf8 vs large_utf8", with(1, nullable("b", ArrowType.LargeUtf8.INSTANCE)), 1),
        Arguments.of("name", with(0, nullable("A", new ArrowType.Int(32, true))), 0),
        Arguments.of("signedness", with(0, nullable("a", new ArrowType.Int(32, false))), 0),
        Arguments.of("nullability", with(1, notNull("b", ArrowType.Utf8.INSTANCE)), 1),
        Arguments.of("timezone",
            with(2, nullable("c", new ArrowType.Timestamp(TimeUnit.MILLISECOND, "Europe/Paris"))), 2),
        Arguments.of("no timezone",
            with(2, nullable("c", new ArrowType.Timestamp(TimeUnit.MILLISECOND, null))), 2),
        Arguments.of("time unit",
            with(2, nullable("c", new ArrowType.Timestamp(TimeUnit.MICROSECOND, "UTC"))), 2),
        Arguments.of("decimal scale", with(3, nullable("d", new ArrowType.Decimal(20, 4, 128))), 3),
        Arguments.of("decimal precision",
            with(3, nullable("d", new ArrowType.Decimal(21, 3, 128))), 3),
        Arguments.of("byte width", with(4, nullable("e", new ArrowType.FixedSizeBinary(6))), 4),
        Arguments.of("extra column", new Schema(extra), 5),
        Arguments.of("missing column", new Schema(BASE.subList(0, 4)), 4));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("mismatches")
  void partitionWithADifferentSchemaIsRejected(String what, Schema other, int column) {
    Random random = new Random(34);
    // the schema is defined by partition 1 (partition 0 is an empty block); partition 3 differs
    List<byte[]> parts =
        List.of(
            new byte[0],
            randomStream(base(), allocator, random, 0.2, 10),
            randomStream(base(), allocator, random, 0.2, 3),
            randomStream(other, allocator, random, 0.2, 7),
            randomStream(base(), allocator, random, 0.2, 2));
    try (FunnelReader reader = new FunnelReader(device)) {
      SchemaMismatchException e = assertThrows(SchemaMismatchException.class,
          () -> reader.read(direct(parts)).close());
      assertEquals(FunnelException.Code.SCHEMA_MISMATCH, e.code(), e.getMessage());
      assertEquals(3, e.partition(), e.getMessage());
      assertEquals(column, e.column(), e.getMessage());
      assertTrue(e.getMessage().contains("partition 3"), e.getMessage());
      assertReaderStillReads(reader);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("mismatches")
  void partitionThatDisagreesWithTheReadersSchemaIsRejected(
      String what, Schema other, int column) {
    Random random = new Random(35);
    List<byte[]> parts =
        List.of(
            bareBatches(base(), random, 6),
            randomStream(other, allocator, random, 0.2, 7),
            randomStream(base(), allocator, random, 0.2, 2));
    try (FunnelReader reader = new FunnelReader(device, base())) {
      SchemaMismatchException e = assertThrows(SchemaMismatchException.class,
          () -> reader.read(direct(parts)).close());
      assertEquals(1, e.partition(), e.getMessage());
      assertEquals(column, e.column(), e.getMessage());
      assertTrue(e.getMessage().contains("partition 1"), e.getMessage());
      assertReaderStillReads(reader);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("mismatches")
  void streamsOfOnePartitionWithDifferentSchemasAreRejected(
      String what, Schema other, int column) {
    Random random = new Random(39);
    byte[] twoStreams = concat(randomStream(base(), allocator, random, 0.2, 4),
        randomStream(other, allocator, random, 0.2, 3));
    List<byte[]> parts = List.of(randomStream(base(), allocator, random, 0.2, 5), new byte[0],
        twoStreams);
    try (FunnelReader reader = new FunnelReader(device)) {
      SchemaMismatchException e = assertThrows(SchemaMismatchException.class,
          () -> reader.read(direct(parts)).close());
      assertEquals(2, e.partition(), e.getMessage());
      assertEquals(column, e.column(), e.getMessage());
      assertTrue(e.getMessage().contains("partition 2"), e.getMessage());
      assertReaderStillReads(reader);
    }
  }

  @Test
  void readerGivenASchemaOfAnUnsupportedTypeIsRefusedAtCreation() {
    Schema schema = new Schema(List.of(nullable("a", new ArrowType.Int(32, true)),
        nullable("t", new ArrowType.Time(TimeUnit.MILLISECOND, 32))));
    UnsupportedTypeException e = assertThrows(UnsupportedTypeException.class,
        () -> new FunnelReader(device, schema).close());
    assertEquals(-1, e.partition(), e.getMessage());
    assertEquals(1, e.column(), e.getMessage());
    assertTrue(e.getMessage().contains("reader schema"), e.getMessage());
  }

  @Test
  void bareRecordBatchThatDoesNotFitTheReadersSchemaIsMalformed() {
    List<Field> extra = new ArrayList<>(BASE);
    extra.add(nullable("f", new ArrowType.Int(8, true)));
    Random random = new Random(36);
    byte[] good = bareBatches(base(), random, 3);
    byte[] wider = bareBatches(new Schema(extra), random, 3);
    try (FunnelReader reader = new FunnelReader(device, base())) {
      MalformedPartitionException e = assertThrows(MalformedPartitionException.class,
          () -> reader.read(direct(good), direct(wider)).close());
      assertEquals(1, e.partition(), e.getMessage());
      assertTrue(e.getMessage().contains("partition 1"), e.getMessage());
      assertReaderStillReads(reader);
    }
  }

  @Test
  void tableOfAReaderGivenTheSchemaOutlivesTheReader() {
    Schema schema = base();
    List<byte[]> parts = List.of(bareBatches(schema, new Random(37), 9, 4));
    DeviceTable table;
    try (FunnelReader reader = new FunnelReader(device, schema)) {
      table = read(reader, parts);
    }
    try (table) {
      assertTableMatches(table, parts, schema, allocator);
    }
  }

  /** After a failed read, the same reader reads a good partition (of its schema, if it has one). */
  private void assertReaderStillReads(FunnelReader reader) {
    Random random = new Random(38);
    List<byte[]> good = List.of(randomStream(base(), allocator, random, 0.2, 12));
    ByteBuffer[] buffers = direct(good);
    try (DeviceTable table = read(reader, buffers)) {
      assertTableMatches(table, good, null, allocator);
    }
  }
}
