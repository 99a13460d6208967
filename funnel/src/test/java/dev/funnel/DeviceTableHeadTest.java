package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** DeviceTable.head and toString on a table read through funnel. */
class DeviceTableHeadTest extends DeviceTestCase {
  private static final Schema SCHEMA = new Schema(List.of(
      TestSupport.notNull("id", new ArrowType.Int(64, true)),
      TestSupport.nullable("s", ArrowType.Utf8.INSTANCE)));

  private FunnelReader reader;

  @BeforeEach
  void openReader() {
    reader = new FunnelReader(device);
  }

  @AfterEach
  void closeReader() {
    reader.close();
  }

  /** Rows first..first+rows-1: id = the row, s = "v" + the row, null when row % 5 == 1. */
  private byte[] partition(int first, int rows) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(SCHEMA, allocator)) {
      root.allocateNew();
      BigIntVector id = (BigIntVector) root.getVector("id");
      VarCharVector s = (VarCharVector) root.getVector("s");
      for (int i = 0; i < rows; i++) {
        int row = first + i;
        id.setSafe(i, row);
        if (row % 5 == 1) {
          s.setNull(i);
        } else {
          s.setSafe(i, ("v" + row).getBytes(StandardCharsets.UTF_8));
        }
      }
      root.setRowCount(rows);
      return TestSupport.streamOf(root);
    }
  }

  /** 25 rows in two partitions: 0..9 and 10..24. */
  private DeviceTable table25() {
    return TestSupport.read(reader, List.of(partition(0, 10), partition(10, 15)));
  }

  private static List<String> lines(String s) {
    assertTrue(s.endsWith("\n"), "ends with a newline: " + s);
    return Arrays.asList(s.substring(0, s.length() - 1).split("\n", -1));
  }

  @Test
  void headShowsTheFirstRowsThenHowManyMore() {
    try (DeviceTable table = table25()) {
      assertEquals(String.join("\n",
          "   id  s",
          "int64  utf8",
          "-----  ----",
          "    0  \"v0\"",
          "    1  null",
          "    2  \"v2\"",
          "... 22 more rows",
          ""), table.head(3));
    }
  }

  @Test
  void headOfMoreRowsThanTheTableShowsThemAllWithNoLastLine() {
    try (DeviceTable table = table25()) {
      List<String> got = lines(table.head(1000));
      assertEquals(3 + 25, got.size(), String.join("\n", got));
      assertEquals("   id  s", got.get(0));
      assertEquals("-----  -----", got.get(2));
      assertEquals("    9  \"v9\"", got.get(3 + 9));
      assertEquals("   10  \"v10\"", got.get(3 + 10), "the second partition's first row");
      assertEquals("   21  null", got.get(3 + 21));
      assertEquals("   24  \"v24\"", got.get(3 + 24));
      assertEquals(table.head(25), table.head(1000));
    }
  }

  @Test
  void headOfZeroRowsAndOfAnEmptyTableShowTheHeader() {
    try (DeviceTable table = table25()) {
      assertEquals("   id  s\nint64  utf8\n-----  ----\n... 25 more rows\n", table.head(0));
    }
    try (DeviceTable empty = TestSupport.read(reader, List.of(partition(0, 0), new byte[0]))) {
      assertEquals("   id  s\nint64  utf8\n-----  ----\n(0 rows)\n", empty.head(20));
    }
  }

  @Test
  void headRejectsANegativeCountAndAClosedTable() {
    DeviceTable table = table25();
    assertThrows(IllegalArgumentException.class, () -> table.head(-1));
    table.close();
    assertThrows(IllegalStateException.class, () -> table.head(3));
  }

  @Test
  void toStringSummarisesRowsTypesAndNullsWithoutRows() {
    DeviceTable table = table25();
    assertEquals("DeviceTable[25 rows: id int64 not null, s utf8 5 nulls]", table.toString());
    table.close();
    assertEquals("DeviceTable[closed, 25 rows: id int64 not null, s utf8 5 nulls]",
        table.toString());
    List<byte[]> one = new ArrayList<>(List.of(partition(1, 1)));
    try (DeviceTable single = TestSupport.read(reader, one)) {
      assertEquals("DeviceTable[1 row: id int64 not null, s utf8 1 null]", single.toString());
    }
  }
}
