package dev.funnel;

import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Every supported type, read from Arrow Java's partitions and compared value by value. */
class ReadTypesTest extends DeviceTestCase {

  static Stream<Field> supportedFields() {
    return TestSupport.supportedFields().stream();
  }

  @Test
  void everySupportedTypeRoundTripsThroughOnePartition() {
    Schema schema = TestSupport.allTypesSchema();
    List<byte[]> parts = List.of(randomStream(schema, allocator, new Random(1), 0.2, 500));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(500, table.numRows());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @ParameterizedTest(name = "{0} partitions")
  @ValueSource(ints = {1, 2, 200, 1000})
  void everySupportedTypeConcatenatesAcrossPartitions(int partitions) {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(partitions);
    int maxRows = partitions >= 200 ? 12 : 300;
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      parts.add(randomStream(schema, allocator, random, 0.25, random.nextInt(maxRows + 1)));
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("supportedFields")
  void eachTypeAloneConcatenatesWithRandomNulls(Field field) {
    Schema schema = new Schema(List.of(field));
    Random random = new Random(field.getName().hashCode());
    double[] nullRates = {0.0, 0.3, 1.0, 0.5};
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 30; p++) {
      parts.add(randomStream(schema, allocator, random, nullRates[p % 4], random.nextInt(41)));
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void zeroRowPartitionsContributeNoRows() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(3);
    List<byte[]> parts =
        List.of(
            randomStream(schema, allocator, random, 0.2), // Schema message only
            randomStream(schema, allocator, random, 0.2, 0), // one 0-row RecordBatch
            randomStream(schema, allocator, random, 0.2, 37),
            randomStream(schema, allocator, random, 0.2, 0, 0),
            randomStream(schema, allocator, random, 0.2, 11),
            randomStream(schema, allocator, random, 0.2));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(48, table.numRows());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void onlyZeroRowPartitionsGiveAnEmptyTableWithTheirSchema() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(4);
    List<byte[]> parts =
        List.of(
            randomStream(schema, allocator, random, 0.2, 0),
            new byte[0],
            randomStream(schema, allocator, random, 0.2));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(0, table.numRows());
      assertEquals(schema, table.schema());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void partitionsWithSeveralRecordBatchesConcatenateInOrder() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(5);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 12; p++) {
      int[] batches = new int[1 + random.nextInt(5)];
      for (int b = 0; b < batches.length; b++) {
        batches[b] = random.nextInt(4) == 0 ? 0 : random.nextInt(70);
      }
      parts.add(randomStream(schema, allocator, random, 0.3, batches));
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void zeroBytePartitionsAreEmptyShuffleBlocks() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(6);
    List<byte[]> parts = new ArrayList<>();
    int empty = 0;
    for (int p = 0; p < 40; p++) {
      // first, last and a run in the middle are empty blocks; the schema comes from partition 1
      if (p == 0 || p == 39 || (p >= 17 && p <= 21) || random.nextInt(5) == 0) {
        parts.add(new byte[0]);
        empty++;
      } else {
        parts.add(randomStream(schema, allocator, random, 0.2, random.nextInt(60)));
      }
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(empty, table.stats().emptyPartitions());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void allNullAndNullFreeColumnsKeepTheirNullCounts() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(7);
    List<byte[]> allNull = new ArrayList<>();
    List<byte[]> noNull = new ArrayList<>();
    for (int p = 0; p < 9; p++) {
      allNull.add(randomStream(schema, allocator, random, 1.0, 1 + p * 3));
      noNull.add(randomStream(schema, allocator, random, 0.0, 1 + p * 3));
    }
    try (FunnelReader reader = new FunnelReader(device)) {
      try (DeviceTable table = read(reader, allNull)) {
        assertTableMatches(table, allNull, null, allocator);
        for (DeviceColumn c : table.columns()) {
          assertEquals(c.field().isNullable() ? table.numRows() : 0, c.nullCount(), c.name());
        }
      }
      try (DeviceTable table = read(reader, noNull)) {
        assertTableMatches(table, noNull, null, allocator);
        for (DeviceColumn c : table.columns()) {
          assertEquals(0, c.nullCount(), c.name());
          assertEquals(0, c.validitySize(), c.name());
        }
      }
    }
  }

  @Test
  void schemaAndFieldMetadataAreKept() {
    Field f =
        new Field(
            "tagged",
            new FieldType(true, new ArrowType.Int(32, true), null, Map.of("origin", "map task")),
            null);
    Schema schema = new Schema(List.of(f), Map.of("spark.shuffle", "7"));
    List<byte[]> parts = List.of(randomStream(schema, allocator, new Random(8), 0.1, 10));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(schema, table.schema());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void schemaWithoutColumnsStillCountsRows() {
    Schema empty = new Schema(List.of());
    Random random = new Random(9);
    List<byte[]> parts =
        List.of(
            randomStream(empty, allocator, random, 0, 5),
            new byte[0],
            randomStream(empty, allocator, random, 0, 0, 7));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(12, table.numRows());
      assertEquals(0, table.numColumns());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void duplicateAndEmptyColumnNamesAreKept() {
    Schema schema =
        new Schema(
            List.of(
                TestSupport.nullable("x", new ArrowType.Int(32, true)),
                TestSupport.nullable("x", ArrowType.Utf8.INSTANCE),
                TestSupport.nullable("", ArrowType.Bool.INSTANCE),
                TestSupport.nullable("名前", new ArrowType.Int(8, false))));
    Random random = new Random(10);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 5; p++) {
      parts.add(randomStream(schema, allocator, random, 0.3, random.nextInt(30)));
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals("名前", table.column(3).name());
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void wideSchemaOf500ColumnsConcatenates() {
    List<Field> fields = new ArrayList<>();
    List<Field> all = TestSupport.supportedFields();
    for (int c = 0; c < 500; c++) {
      Field f = all.get(c % all.size());
      fields.add(new Field("c" + c, f.getFieldType(), null));
    }
    Schema schema = new Schema(fields);
    Random random = new Random(11);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 12; p++) {
      parts.add(randomStream(schema, allocator, random, 0.2, random.nextInt(20)));
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(500, table.numColumns());
      assertTableMatches(table, parts, null, allocator);
    }
  }
}
