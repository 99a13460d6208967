package dev.funnel;

import static dev.funnel.TestSupport.assertRowsMatch;
import static dev.funnel.TestSupport.read;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.arrow.c.ArrowArray;
import org.apache.arrow.c.ArrowSchema;
import org.apache.arrow.c.Data;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.complex.LargeListVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.MapVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Nested columns (list, large_list, fixed_size_list, struct, map, nested in each other) written
 * by Arrow Java, read by funnel and compared value by value with Arrow Java's own reading of the
 * same partitions.
 */
class NestedReadTest extends DeviceTestCase {

  private static Field field(String name, boolean nullable, ArrowType type, Field... children) {
    return new Field(name, new FieldType(nullable, type, null), List.of(children));
  }

  private static Field map(String name, Field key, Field value) {
    Field entries = field("entries", false, ArrowType.Struct.INSTANCE, key, value);
    return field(name, true, new ArrowType.Map(false), entries);
  }

  private static final ArrowType I16 = new ArrowType.Int(16, true);
  private static final ArrowType I32 = new ArrowType.Int(32, true);
  private static final ArrowType I64 = new ArrowType.Int(64, true);
  private static final ArrowType UTF8 = ArrowType.Utf8.INSTANCE;

  static Schema nestedSchema() {
    return new Schema(List.of(
        field("l", true, ArrowType.List.INSTANCE, field("item", true, I64)),
        field("ls", true, ArrowType.List.INSTANCE, field("item", true, UTF8)),
        field("s", true, ArrowType.Struct.INSTANCE, field("a", true, I32), field("b", true, UTF8)),
        map("m", field("key", false, UTF8), field("value", true, I64)),
        field("f", true, new ArrowType.FixedSizeList(3), field("item", true, I16)),
        field("lb", true, ArrowType.LargeList.INSTANCE, field("item", true, ArrowType.Bool.INSTANCE)),
        field("lsl", true, ArrowType.List.INSTANCE,
            field("item", true, ArrowType.Struct.INSTANCE, field("x", true, I64),
                field("y", true, ArrowType.List.INSTANCE, field("item", true, UTF8)))),
        field("sm", true, ArrowType.Struct.INSTANCE,
            map("m", field("key", false, UTF8), field("value", true, I32))),
        field("id", false, I64)));
  }

  // ------------------------------------------------------------- writing

  private static final String[] WORDS = {"", "a", "bc", "é", "中文", "xyz", "k1", "k2"};

  /** Sets slot i of v (and what it holds) to a random value, or null at rate nullRate. */
  static void fill(FieldVector v, int i, Random r, double nullRate) {
    if (v.getField().isNullable() && r.nextDouble() < nullRate) {
      if (v instanceof StructVector s) {
        s.setNull(i);
        // the children's slots under a null struct hold values all the same
        for (FieldVector c : s.getChildrenFromFields()) {
          fill(c, i, r, nullRate);
        }
      } else if (v instanceof FixedSizeListVector f) {
        f.setNull(i);
        for (int k = 0; k < f.getListSize(); k++) {
          fill(f.getDataVector(), i * f.getListSize() + k, r, nullRate);
        }
      } else {
        v.setNull(i);
      }
      return;
    }
    if (v instanceof MapVector m) { // before ListVector, which it extends
      StructVector entries = (StructVector) m.getDataVector();
      List<FieldVector> kv = entries.getChildrenFromFields();
      int start = m.startNewValue(i);
      int n = r.nextInt(4);
      for (int k = 0; k < n; k++) {
        entries.setIndexDefined(start + k);
        ((VarCharVector) kv.get(0)).setSafe(start + k, word(r));
        fill(kv.get(1), start + k, r, nullRate);
      }
      m.endValue(i, n);
    } else if (v instanceof ListVector l) {
      int start = l.startNewValue(i);
      int n = r.nextInt(5);
      for (int k = 0; k < n; k++) {
        fill(l.getDataVector(), start + k, r, nullRate);
      }
      l.endValue(i, n);
    } else if (v instanceof LargeListVector l) {
      long start = l.startNewValue(i);
      int n = r.nextInt(5);
      for (int k = 0; k < n; k++) {
        fill(l.getDataVector(), (int) start + k, r, nullRate);
      }
      l.endValue(i, n);
    } else if (v instanceof FixedSizeListVector f) {
      f.setNotNull(i);
      for (int k = 0; k < f.getListSize(); k++) {
        fill(f.getDataVector(), i * f.getListSize() + k, r, nullRate);
      }
    } else if (v instanceof StructVector s) {
      s.setIndexDefined(i);
      for (FieldVector c : s.getChildrenFromFields()) {
        fill(c, i, r, nullRate);
      }
    } else if (v instanceof BigIntVector x) {
      x.setSafe(i, r.nextInt(2000) - 1000);
    } else if (v instanceof IntVector x) {
      x.setSafe(i, r.nextInt(2000) - 1000);
    } else if (v instanceof SmallIntVector x) {
      x.setSafe(i, (short) (r.nextInt(2000) - 1000));
    } else if (v instanceof BitVector x) {
      x.setSafe(i, r.nextBoolean() ? 1 : 0);
    } else if (v instanceof VarCharVector x) {
      x.setSafe(i, word(r));
    } else {
      throw new IllegalArgumentException("no random values for " + v.getClass().getSimpleName());
    }
  }

  private static byte[] word(Random r) {
    return WORDS[r.nextInt(WORDS.length)].getBytes(StandardCharsets.UTF_8);
  }

  /** An IPC stream of one RecordBatch of random rows per entry of batchRows. */
  byte[] stream(Schema schema, Random random, double nullRate, int... batchRows) {
    return stream(schema, allocator, random, nullRate, batchRows);
  }

  static byte[] stream(Schema schema, BufferAllocator allocator, Random random, double nullRate,
      int... batchRows) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
        writer.start();
        for (int rows : batchRows) {
          root.clear();
          root.allocateNew();
          for (FieldVector v : root.getFieldVectors()) {
            for (int i = 0; i < rows; i++) {
              fill(v, i, random, nullRate);
            }
          }
          root.setRowCount(rows);
          writer.writeBatch();
        }
        writer.end();
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  // --------------------------------------------------------------- reads

  @ParameterizedTest(name = "{0} partitions")
  @ValueSource(ints = {1, 7, 200})
  void nestedColumnsConcatenateAsArrowJavaReadsThem(int partitions) {
    Schema schema = nestedSchema();
    Random random = new Random(partitions);
    double[] nullRates = {0.0, 0.2, 0.5, 1.0};
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      int batches = random.nextInt(3); // 0: the schema alone
      int[] rows = new int[batches];
      for (int b = 0; b < batches; b++) {
        rows[b] = random.nextInt(partitions >= 200 ? 8 : 40);
      }
      parts.add(stream(schema, random, nullRates[p % 4], rows));
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts);
        VectorSchemaRoot got = table.toArrow(allocator)) {
      TestSupport.Expectation e = assertRowsMatch(got, parts, null, allocator);
      assertEquals(e.rows(), table.numRows());
      assertEquals(schema, table.schema());
      assertEquals(schema.getFields().size(), table.numColumns());
      for (int c = 0; c < table.numColumns(); c++) {
        DeviceColumn col = table.column(c);
        assertEquals(schema.getFields().get(c), col.field());
        assertEquals(e.rows(), col.length(), col.name());
        assertEquals(e.nullCounts()[c], col.nullCount(), col.name());
        assertEquals(col.field().getChildren().size(), col.children().size(), col.name());
      }
    }
  }

  @Test
  void headShowsNestedValues() {
    Schema schema = new Schema(List.of(
        field("l", true, ArrowType.List.INSTANCE, field("item", true, I64)),
        field("s", true, ArrowType.Struct.INSTANCE, field("a", true, I32), field("b", true, UTF8)),
        map("m", field("key", false, UTF8), field("value", true, I64))));
    byte[] part;
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      root.allocateNew();
      ListVector l = (ListVector) root.getVector("l");
      BigIntVector item = (BigIntVector) l.getDataVector();
      l.startNewValue(0);
      item.setSafe(0, 1);
      item.setNull(1);
      item.setSafe(2, 3);
      l.endValue(0, 3);
      StructVector s = (StructVector) root.getVector("s");
      s.setIndexDefined(0);
      ((IntVector) s.getChild("a")).setSafe(0, 1);
      ((VarCharVector) s.getChild("b")).setSafe(0, "x".getBytes(StandardCharsets.UTF_8));
      MapVector m = (MapVector) root.getVector("m");
      StructVector entries = (StructVector) m.getDataVector();
      m.startNewValue(0);
      entries.setIndexDefined(0);
      entries.setIndexDefined(1);
      VarCharVector key = (VarCharVector) entries.getChildrenFromFields().get(0);
      BigIntVector value = (BigIntVector) entries.getChildrenFromFields().get(1);
      key.setSafe(0, "k1".getBytes(StandardCharsets.UTF_8));
      value.setSafe(0, 1);
      key.setSafe(1, "k2".getBytes(StandardCharsets.UTF_8));
      value.setNull(1);
      m.endValue(0, 2);
      root.setRowCount(1);
      part = TestSupport.streamOf(root);
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, List.of(part, part))) {
      String head = table.head(5);
      assertTrue(head.contains("[1, null, 3]"), head);
      assertTrue(head.contains("{a: 1, b: \"x\"}"), head);
      assertTrue(head.contains("{\"k1\": 1, \"k2\": null}"), head);
      assertTrue(head.contains("list<int64>"), head);
      assertTrue(head.contains("map<utf8, int64>"), head);
      String columns = table.describeColumns();
      assertTrue(columns.contains("struct<a: int32, b: utf8>"), columns);
    }
  }

  @Test
  void headCopiesTheFirstRowsOfEveryLevelAsToArrowHasThem() {
    Schema schema = nestedSchema();
    Random random = new Random(23);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 6; p++) {
      parts.add(stream(schema, random, 0.3, random.nextInt(40), random.nextInt(3)));
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts);
        VectorSchemaRoot all = table.toArrow(allocator)) {
      for (int k : new int[] {1, 2, 7, (int) table.numRows()}) {
        String last = k < table.numRows() ? TablePrinter.moreRows(table.numRows() - k) : null;
        assertEquals(TablePrinter.rows(all, k, last), table.head(k), "head(" + k + ")");
      }
    }
  }

  @Test
  void arrowJavaImportsTheNestedCpuExport() {
    assumeTrue(TestSupport.BACKEND.equals("cpu"), "Arrow Java reads host memory only: cpu backend");
    Schema schema = nestedSchema();
    Random random = new Random(17);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 9; p++) {
      parts.add(stream(schema, random, 0.25, random.nextInt(30)));
    }
    long[] native0 = Faults.nativeLive();
    try (ArrowBuf deviceArray = allocator.buffer(128);
        ArrowSchema cSchema = ArrowSchema.allocateNew(allocator)) {
      deviceArray.setZero(0, 128);
      try (FunnelReader reader = new FunnelReader(device);
          DeviceTable table = read(reader, parts)) {
        table.exportTo(deviceArray.memoryAddress(), cSchema.memoryAddress());
      }
      device.close(); // the export holds what it needs
      device = null;
      ArrowArray array = ArrowArray.wrap(deviceArray.memoryAddress());
      try (VectorSchemaRoot root = Data.importVectorSchemaRoot(allocator, array, cSchema, null)) {
        assertRowsMatch(root, parts, null, allocator);
        assertEquals(schema.getFields().size(), root.getSchema().getFields().size());
        for (int c = 0; c < schema.getFields().size(); c++) {
          assertEquals(schema.getFields().get(c).getType(),
              root.getSchema().getFields().get(c).getType());
        }
      }
    }
    assertArrayEquals(Arrays.copyOf(native0, 3), Arrays.copyOf(Faults.nativeLive(), 3),
        "native allocations, pinned allocations and events left after the release");
  }

}
