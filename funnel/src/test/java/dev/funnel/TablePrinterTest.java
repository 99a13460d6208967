package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
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
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * How values look: every type funnel reads, on values set with Arrow Java, against strings written
 * out by hand. No device: TablePrinter formats Arrow Java vectors.
 */
class TablePrinterTest {
  private BufferAllocator allocator;

  @BeforeEach
  void openAllocator() {
    allocator = new RootAllocator();
  }

  @AfterEach
  void closeAllocator() {
    assertEquals(0, allocator.getAllocatedMemory(), "Arrow memory leaked");
    allocator.close();
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static byte[] bytes(int... b) {
    byte[] r = new byte[b.length];
    for (int i = 0; i < b.length; i++) {
      r[i] = (byte) b[i];
    }
    return r;
  }

  /**
   * Row 0 and row 2 of every supported column set to chosen values, row 1 null (or a third value
   * where the column cannot be null).
   */
  private static void setRows(VectorSchemaRoot root) {
    root.allocateNew();
    long day = 19_723; // 2024-01-01
    long second = 1_704_067_200L; // 2024-01-01T00:00:00Z
    for (FieldVector v : root.getFieldVectors()) {
      String name = v.getField().getName();
      switch (name) {
        case "id" -> {
          ((BigIntVector) v).setSafe(0, 1);
          ((BigIntVector) v).setSafe(1, 2);
          ((BigIntVector) v).setSafe(2, 3);
        }
        case "i8" -> { ((TinyIntVector) v).setSafe(0, -128); ((TinyIntVector) v).setSafe(2, 127); }
        case "i16" -> {
          ((SmallIntVector) v).setSafe(0, (short) -32768);
          ((SmallIntVector) v).setSafe(2, (short) 7);
        }
        case "i32" -> {
          ((IntVector) v).setSafe(0, Integer.MIN_VALUE);
          ((IntVector) v).setSafe(2, 0);
        }
        case "i64" -> {
          ((BigIntVector) v).setSafe(0, Long.MIN_VALUE);
          ((BigIntVector) v).setSafe(2, Long.MAX_VALUE);
        }
        case "u8" -> { ((UInt1Vector) v).setSafe(0, 255); ((UInt1Vector) v).setSafe(2, 128); }
        case "u16" -> { ((UInt2Vector) v).setSafe(0, 65535); ((UInt2Vector) v).setSafe(2, 32768); }
        case "u32" -> { ((UInt4Vector) v).setSafe(0, -1); ((UInt4Vector) v).setSafe(2, 1 << 31); }
        case "u64" -> { ((UInt8Vector) v).setSafe(0, -1L); ((UInt8Vector) v).setSafe(2, 1L << 63); }
        case "f32" -> { ((Float4Vector) v).setSafe(0, 1.5f); ((Float4Vector) v).setSafe(2, 1e10f); }
        case "f64" -> {
          ((Float8Vector) v).setSafe(0, 0.1);
          ((Float8Vector) v).setSafe(2, Double.NEGATIVE_INFINITY);
        }
        case "bool" -> { ((BitVector) v).setSafe(0, 1); ((BitVector) v).setSafe(2, 0); }
        case "date32" -> {
          ((DateDayVector) v).setSafe(0, (int) day);
          ((DateDayVector) v).setSafe(2, -1);
        }
        case "date64" -> {
          ((DateMilliVector) v).setSafe(0, day * 86_400_000L);
          ((DateMilliVector) v).setSafe(2, day * 86_400_000L + 1); // not a whole day
        }
        case "ts_s", "ts_s_tz" -> {
          ((TimeStampVector) v).setSafe(0, second + 3723);
          ((TimeStampVector) v).setSafe(2, -1);
        }
        case "ts_ms", "ts_ms_tz" -> {
          ((TimeStampVector) v).setSafe(0, second * 1000 + 123);
          ((TimeStampVector) v).setSafe(2, -1);
        }
        case "ts_us", "ts_us_tz" -> {
          ((TimeStampVector) v).setSafe(0, second * 1_000_000 + 120);
          ((TimeStampVector) v).setSafe(2, -1);
        }
        case "ts_ns", "ts_ns_tz" -> {
          ((TimeStampVector) v).setSafe(0, second * 1_000_000_000 + 1);
          ((TimeStampVector) v).setSafe(2, Long.MAX_VALUE);
        }
        case "dec20_3" -> {
          ((DecimalVector) v).setSafe(0, new BigDecimal("-12345678901234567.890"));
          ((DecimalVector) v).setSafe(2, new BigDecimal("0.000"));
        }
        case "dec38_10" -> {
          ((DecimalVector) v).setSafe(0, new BigDecimal("0.0000000001"));
          ((DecimalVector) v).setSafe(2, new BigDecimal("1234567890123456789012345678.0000000000"));
        }
        case "utf8" -> {
          ((VarCharVector) v).setSafe(0, utf8("héllo \"w\"\n\t\\ 中"));
          ((VarCharVector) v).setSafe(2, utf8(""));
        }
        case "large_utf8" -> {
          ((LargeVarCharVector) v).setSafe(0, utf8("null"));
          ((LargeVarCharVector) v).setSafe(2, utf8("a\u0001b"));
        }
        case "binary" -> {
          ((VarBinaryVector) v).setSafe(0, bytes(0x00, 0xff, 0x10));
          ((VarBinaryVector) v).setSafe(2, new byte[0]);
        }
        case "large_binary" -> {
          ((LargeVarBinaryVector) v).setSafe(0, bytes(0xde, 0xad, 0xbe, 0xef));
          ((LargeVarBinaryVector) v).setSafe(2, bytes(0x7f));
        }
        case "fsb5" -> {
          ((FixedSizeBinaryVector) v).setSafe(0, bytes(1, 2, 3, 4, 5));
          ((FixedSizeBinaryVector) v).setSafe(2, bytes(0xa0, 0xb0, 0xc0, 0xd0, 0xe0));
        }
        case "fsb16" -> {
          ((FixedSizeBinaryVector) v).setSafe(0, new byte[16]);
          ((FixedSizeBinaryVector) v).setSafe(2, bytes(
              0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
        }
        case "utf8_not_null" -> {
          ((VarCharVector) v).setSafe(0, utf8("x"));
          ((VarCharVector) v).setSafe(1, utf8("y"));
          ((VarCharVector) v).setSafe(2, utf8("z"));
        }
        case "bool_not_null" -> {
          ((BitVector) v).setSafe(0, 0);
          ((BitVector) v).setSafe(1, 1);
          ((BitVector) v).setSafe(2, 0);
        }
        default -> throw new AssertionError("no values chosen for column " + name);
      }
    }
    root.setRowCount(3);
  }

  /** Expected cells of rows 0, 1 and 2 of each column, by hand. */
  private static Map<String, List<String>> expectedCells() {
    Map<String, List<String>> e = new LinkedHashMap<>();
    e.put("id", List.of("1", "2", "3"));
    e.put("i8", List.of("-128", "null", "127"));
    e.put("i16", List.of("-32768", "null", "7"));
    e.put("i32", List.of("-2147483648", "null", "0"));
    e.put("i64", List.of("-9223372036854775808", "null", "9223372036854775807"));
    e.put("u8", List.of("255", "null", "128"));
    e.put("u16", List.of("65535", "null", "32768"));
    e.put("u32", List.of("4294967295", "null", "2147483648"));
    e.put("u64", List.of("18446744073709551615", "null", "9223372036854775808"));
    e.put("f32", List.of("1.5", "null", "1.0E10"));
    e.put("f64", List.of("0.1", "null", "-Infinity"));
    e.put("bool", List.of("true", "null", "false"));
    e.put("date32", List.of("2024-01-01", "null", "1969-12-31"));
    e.put("date64", List.of("2024-01-01", "null", "2024-01-01T00:00:00.001"));
    e.put("ts_s", List.of("2024-01-01T01:02:03", "null", "1969-12-31T23:59:59"));
    e.put("ts_ms", List.of("2024-01-01T00:00:00.123", "null", "1969-12-31T23:59:59.999"));
    e.put("ts_us", List.of("2024-01-01T00:00:00.000120", "null", "1969-12-31T23:59:59.999999"));
    e.put("ts_ns", List.of(
        "2024-01-01T00:00:00.000000001", "null", "2262-04-11T23:47:16.854775807"));
    e.put("ts_s_tz", List.of("2024-01-01T01:02:03Z", "null", "1969-12-31T23:59:59Z"));
    e.put("ts_ms_tz", List.of("2024-01-01T00:00:00.123Z", "null", "1969-12-31T23:59:59.999Z"));
    e.put("ts_us_tz", List.of(
        "2024-01-01T00:00:00.000120Z", "null", "1969-12-31T23:59:59.999999Z"));
    e.put("ts_ns_tz", List.of(
        "2024-01-01T00:00:00.000000001Z", "null", "2262-04-11T23:47:16.854775807Z"));
    e.put("dec20_3", List.of("-12345678901234567.890", "null", "0.000"));
    e.put("dec38_10", List.of(
        "0.0000000001", "null", "1234567890123456789012345678.0000000000"));
    e.put("utf8", List.of("\"héllo \\\"w\\\"\\n\\t\\\\ 中\"", "null", "\"\""));
    e.put("binary", List.of("0x00ff10", "null", "0x"));
    e.put("large_utf8", List.of("\"null\"", "null", "\"a\\u0001b\""));
    e.put("large_binary", List.of("0xdeadbeef", "null", "0x7f"));
    e.put("fsb5", List.of("0x0102030405", "null", "0xa0b0c0d0e0"));
    e.put("fsb16", List.of(
        "0x00000000000000000000000000000000", "null", "0x000102030405060708090a0b0c0d0e0f"));
    e.put("utf8_not_null", List.of("\"x\"", "\"y\"", "\"z\""));
    e.put("bool_not_null", List.of("false", "true", "false"));
    return e;
  }

  @Test
  void everySupportedTypePrintsItsValuesAndNulls() {
    Map<String, List<String>> expected = expectedCells();
    try (VectorSchemaRoot root = VectorSchemaRoot.create(TestSupport.allTypesSchema(), allocator)) {
      setRows(root);
      List<String> names = new ArrayList<>();
      root.getFieldVectors().forEach(v -> names.add(v.getField().getName()));
      assertEquals(new ArrayList<>(expected.keySet()), names, "a value chosen for every column");
      assertAll(root.getFieldVectors().stream().map(v -> () -> {
        String name = v.getField().getName();
        List<String> got = List.of(
            TablePrinter.cell(v, 0), TablePrinter.cell(v, 1), TablePrinter.cell(v, 2));
        assertEquals(expected.get(name), got, name);
      }));
    }
  }

  @Test
  void everySupportedTypeHasItsName() {
    Map<String, String> expected = new LinkedHashMap<>();
    String[] names = {
      "id int64", "i8 int8", "i16 int16", "i32 int32", "i64 int64",
      "u8 uint8", "u16 uint16", "u32 uint32", "u64 uint64", "f32 float32", "f64 float64",
      "bool bool", "date32 date32", "date64 date64",
      "ts_s timestamp[s]", "ts_ms timestamp[ms]", "ts_us timestamp[us]", "ts_ns timestamp[ns]",
      "ts_s_tz timestamp[s, tz=UTC]", "ts_ms_tz timestamp[ms, tz=Europe/Paris]",
      "ts_us_tz timestamp[us, tz=America/New_York]", "ts_ns_tz timestamp[ns, tz=Asia/Kolkata]",
      "dec20_3 decimal128(20, 3)", "dec38_10 decimal128(38, 10)",
      "utf8 utf8", "binary binary", "large_utf8 large_utf8", "large_binary large_binary",
      "fsb5 fixed_size_binary[5]", "fsb16 fixed_size_binary[16]",
      "utf8_not_null utf8", "bool_not_null bool"};
    for (String n : names) {
      String[] p = n.split(" ", 2);
      expected.put(p[0], p[1]);
    }
    Map<String, String> got = new LinkedHashMap<>();
    for (Field f : TestSupport.supportedFields()) {
      got.put(f.getName(), TablePrinter.typeName(f.getType()));
    }
    assertEquals(expected, got);
  }

  @Test
  void longValuesAreCutWithAnEllipsisToTheMaximumWidth() {
    Schema schema = new Schema(List.of(
        TestSupport.nullable("s", ArrowType.Utf8.INSTANCE),
        TestSupport.nullable("b", ArrowType.Binary.INSTANCE)));
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      root.allocateNew();
      VarCharVector s = (VarCharVector) root.getVector("s");
      VarBinaryVector b = (VarBinaryVector) root.getVector("b");
      s.setSafe(0, utf8("a".repeat(1000)));
      s.setSafe(1, utf8("b".repeat(38))); // 40 with its quotes: fits
      s.setSafe(2, utf8("c".repeat(39)));
      s.setSafe(3, utf8("d".repeat(35) + "😀😀")); // the cut falls inside the emoji
      b.setSafe(0, new byte[1000]);
      byte[] nineteen = new byte[19]; // 0x + 38 hex digits: fits
      Arrays.fill(nineteen, (byte) 0x11);
      b.setSafe(1, nineteen);
      byte[] twenty = new byte[20];
      Arrays.fill(twenty, (byte) 0x22);
      b.setSafe(2, twenty);
      b.setSafe(3, new byte[0]);
      root.setRowCount(4);

      assertEquals("\"" + "a".repeat(36) + "...", TablePrinter.cell(s, 0));
      assertEquals("\"" + "b".repeat(38) + "\"", TablePrinter.cell(s, 1));
      assertEquals("\"" + "c".repeat(36) + "...", TablePrinter.cell(s, 2));
      assertEquals("\"" + "d".repeat(35) + "...", TablePrinter.cell(s, 3));
      assertEquals("0x" + "00".repeat(17) + "...", TablePrinter.cell(b, 0));
      assertEquals("0x" + "11".repeat(19), TablePrinter.cell(b, 1));
      assertEquals("0x" + "22".repeat(17) + "...", TablePrinter.cell(b, 2));
    }
  }

  @Test
  void rowsAreAlignedUnderANameAndTypeHeaderWithTheLastLineAfterThem() {
    Schema schema = new Schema(List.of(
        TestSupport.notNull("id", new ArrowType.Int(32, true)),
        TestSupport.nullable("name", ArrowType.Utf8.INSTANCE),
        TestSupport.nullable("price", new ArrowType.Decimal(10, 2, 128))));
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      root.allocateNew();
      IntVector id = (IntVector) root.getVector("id");
      VarCharVector name = (VarCharVector) root.getVector("name");
      DecimalVector price = (DecimalVector) root.getVector("price");
      id.setSafe(0, 7);
      name.setSafe(0, utf8("apple"));
      price.setSafe(0, new BigDecimal("1.50"));
      id.setSafe(1, 1000);
      name.setNull(1);
      price.setSafe(1, new BigDecimal("-12345.00"));
      id.setSafe(2, 3);
      name.setSafe(2, utf8("kiwi"));
      price.setNull(2);
      root.setRowCount(3);

      // widths: id as its type (5), name as "apple" quoted (7), price as its type (17)
      String expected = String.join("\n",
          "   id  name                 price",
          "int32  utf8     decimal128(10, 2)",
          "-----  -------  -----------------",
          "    7  \"apple\"               1.50",
          " 1000  null             -12345.00",
          "    3  \"kiwi\"                null",
          "... 999,997 more rows",
          "");
      assertEquals(expected, TablePrinter.rows(root, 3, TablePrinter.moreRows(999_997)));
      assertEquals(String.join("\n",
          "   id  name                 price",
          "int32  utf8     decimal128(10, 2)",
          "-----  -------  -----------------",
          "    7  \"apple\"               1.50",
          ""), TablePrinter.rows(root, 1, null), "the first row only, no last line");
      assertThrows(IllegalArgumentException.class, () -> TablePrinter.rows(root, 4, null));
    }
  }

  @Test
  void timestampsBeyondJavaTimeAndSpecialFloatsStillPrint() {
    Schema schema = new Schema(List.of(
        TestSupport.nullable("t", new ArrowType.Timestamp(
            org.apache.arrow.vector.types.TimeUnit.SECOND, "UTC")),
        TestSupport.nullable("f", new ArrowType.FloatingPoint(
            org.apache.arrow.vector.types.FloatingPointPrecision.SINGLE))));
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      root.allocateNew();
      TimeStampVector t = (TimeStampVector) root.getVector("t");
      Float4Vector f = (Float4Vector) root.getVector("f");
      t.setSafe(0, Long.MAX_VALUE); // some 292 billion years: past java.time's year 999,999,999
      t.setSafe(1, Long.MIN_VALUE);
      f.setSafe(0, Float.NaN);
      f.setSafe(1, -0.0f);
      root.setRowCount(2);

      assertEquals("9223372036854775807 s", TablePrinter.cell(t, 0));
      assertEquals("-9223372036854775808 s", TablePrinter.cell(t, 1));
      assertEquals("NaN", TablePrinter.cell(f, 0));
      assertEquals("-0.0", TablePrinter.cell(f, 1));
    }
  }

  /** Arrow bounds no decimal scale: one near 2^31 (a corrupt byte) has no plain form. */
  @Test
  void decimalsOfAnyScalePrint() {
    int[] scales = {Integer.MIN_VALUE + 10, Integer.MAX_VALUE, -TablePrinter.MAX_PLAIN_SCALE,
      TablePrinter.MAX_PLAIN_SCALE};
    String[] want = {"1.234E+2147483641", "1.234E-2147483644", "1234000", "0.000"};
    for (int i = 0; i < scales.length; i++) {
      Schema schema = new Schema(List.of(
          TestSupport.nullable("d", new ArrowType.Decimal(38, scales[i], 128))));
      try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
        root.allocateNew();
        DecimalVector d = (DecimalVector) root.getVector("d");
        d.set(0, 1234L); // unscaled
        root.setRowCount(1);
        String cell = TablePrinter.cell(d, 0);
        assertTrue(cell.startsWith(want[i]), "scale " + scales[i] + ": " + cell);
        assertTrue(cell.length() <= TablePrinter.MAX_WIDTH, cell);
      }
    }
  }

  @Test
  void moreRowsCountsWithThousandsSeparatorsAndOneRowIsSingular() {
    assertEquals("... 999,990 more rows", TablePrinter.moreRows(999_990));
    assertEquals("... 1 more row", TablePrinter.moreRows(1));
    assertEquals("... 12 more rows", TablePrinter.moreRows(12));
  }
}
