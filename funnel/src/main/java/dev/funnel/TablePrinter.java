package dev.funnel;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
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
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.complex.LargeListVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.MapVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;

/**
 * Tables as text for people: a column summary, and rows as an aligned grid.
 *
 * <p>Cells: {@code null} for nulls; integers in decimal, unsigned ones as unsigned; floats as Java
 * prints them; decimals exactly (no exponent); bools as true/false; dates as ISO dates;
 * timestamps as ISO date-times with as many fraction digits as their unit has (seconds: none,
 * ms: 3, us: 6, ns: 9), with a trailing {@code Z} (UTC) when the type has a time zone and without
 * one when it has none (a wall-clock time); strings quoted, with Java escapes for quotes,
 * backslashes and control characters; binary as {@code 0x} and lowercase hex. A cell longer than
 * the maximum width is cut and ends in {@code ...}. Numbers are right-aligned, the rest left.
 */
final class TablePrinter {
  private TablePrinter() {}

  /** The widest a cell is printed, ellipsis included. */
  static final int MAX_WIDTH = 40;

  /**
   * Decimals print in plain form up to a scale of this many digits either way, past it in
   * scientific notation: Arrow bounds no scale, and one near 2^31 has no plain form that fits a
   * String.
   */
  static final int MAX_PLAIN_SCALE = 1000;

  private static final String ELLIPSIS = "...";
  private static final DateTimeFormatter DATE_TIME =
      DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss", Locale.ROOT);

  /**
   * A field's type as funnel's README names it, nested ones with their children's:
   * list&lt;int64&gt;, struct&lt;a: int32, b: utf8&gt;, map&lt;utf8, int64&gt;,
   * fixed_size_list&lt;int16&gt;[3].
   */
  static String typeName(Field field) {
    ArrowType type = field.getType();
    List<Field> kids = field.getChildren();
    if (type instanceof ArrowType.Map && kids.size() == 1
        && kids.get(0).getChildren().size() == 2) {
      List<Field> kv = kids.get(0).getChildren();
      return "map<" + typeName(kv.get(0)) + ", " + typeName(kv.get(1)) + ">";
    } else if (type instanceof ArrowType.List && kids.size() == 1) {
      return "list<" + typeName(kids.get(0)) + ">";
    } else if (type instanceof ArrowType.LargeList && kids.size() == 1) {
      return "large_list<" + typeName(kids.get(0)) + ">";
    } else if (type instanceof ArrowType.FixedSizeList t && kids.size() == 1) {
      return "fixed_size_list<" + typeName(kids.get(0)) + ">[" + t.getListSize() + "]";
    } else if (type instanceof ArrowType.Struct) {
      StringBuilder b = new StringBuilder("struct<");
      for (int i = 0; i < kids.size(); i++) {
        b.append(i > 0 ? ", " : "").append(kids.get(i).getName()).append(": ")
            .append(typeName(kids.get(i)));
      }
      return b.append('>').toString();
    }
    return typeName(type);
  }

  /** The type as funnel's README names it: int64, timestamp[us, tz=UTC], decimal128(20, 3). */
  static String typeName(ArrowType type) {
    if (type instanceof ArrowType.Int t) {
      return (t.getIsSigned() ? "int" : "uint") + t.getBitWidth();
    } else if (type instanceof ArrowType.FloatingPoint t) {
      return switch (t.getPrecision()) {
        case HALF -> "float16";
        case SINGLE -> "float32";
        case DOUBLE -> "float64";
      };
    } else if (type instanceof ArrowType.Bool) {
      return "bool";
    } else if (type instanceof ArrowType.Date t) {
      return switch (t.getUnit()) {
        case DAY -> "date32";
        case MILLISECOND -> "date64";
      };
    } else if (type instanceof ArrowType.Timestamp t) {
      String tz = t.getTimezone() == null ? "" : ", tz=" + t.getTimezone();
      return "timestamp[" + unitSuffix(t.getUnit()) + tz + "]";
    } else if (type instanceof ArrowType.Decimal t) {
      return "decimal" + t.getBitWidth() + "(" + t.getPrecision() + ", " + t.getScale() + ")";
    } else if (type instanceof ArrowType.Utf8) {
      return "utf8";
    } else if (type instanceof ArrowType.LargeUtf8) {
      return "large_utf8";
    } else if (type instanceof ArrowType.Binary) {
      return "binary";
    } else if (type instanceof ArrowType.LargeBinary) {
      return "large_binary";
    } else if (type instanceof ArrowType.FixedSizeBinary t) {
      return "fixed_size_binary[" + t.getByteWidth() + "]";
    }
    return type.toString(); // a type funnel does not read; Arrow Java's name for it
  }

  private static String unitSuffix(org.apache.arrow.vector.types.TimeUnit unit) {
    return switch (unit) {
      case SECOND -> "s";
      case MILLISECOND -> "ms";
      case MICROSECOND -> "us";
      case NANOSECOND -> "ns";
    };
  }

  /** "... 999,990 more rows": the last line of a grid that shows the first rows only. */
  static String moreRows(long more) {
    return String.format(Locale.ROOT, "... %,d more row%s", more, more == 1 ? "" : "s");
  }

  /** A row count for people: 1,000,000. */
  static String count(long n) {
    return String.format(Locale.ROOT, "%,d", n);
  }

  /** One line per column: name, type, nullable (yes/no) and null count. */
  static String columns(List<DeviceColumn> columns) {
    List<String[]> rows = new ArrayList<>();
    for (DeviceColumn c : columns) {
      rows.add(new String[] {
          cut(c.name(), MAX_WIDTH),
          typeName(c.field()),
          c.field().isNullable() ? "yes" : "no",
          count(c.nullCount())});
    }
    String[] header = {"column", "type", "nullable", "nulls"};
    boolean[] right = {false, false, false, true};
    return grid(List.<String[]>of(header), rows, right);
  }

  /**
   * The first {@code rows} rows of {@code root} as a grid: a line of column names, a line of
   * types, a rule, one line per row, then {@code lastLine} when it is not null.
   */
  static String rows(VectorSchemaRoot root, int rows, String lastLine) {
    if (rows < 0 || rows > root.getRowCount()) {
      throw new IllegalArgumentException(
          "rows " + rows + " out of range: the root holds " + root.getRowCount());
    }
    List<FieldVector> vectors = root.getFieldVectors();
    int n = vectors.size();
    String[] names = new String[n];
    String[] types = new String[n];
    boolean[] right = new boolean[n];
    for (int c = 0; c < n; c++) {
      Field f = vectors.get(c).getField();
      names[c] = cut(f.getName(), MAX_WIDTH);
      types[c] = cut(typeName(f), MAX_WIDTH);
      right[c] = isNumber(f.getType());
    }
    List<String[]> cells = new ArrayList<>(rows);
    for (int r = 0; r < rows; r++) {
      String[] line = new String[n];
      for (int c = 0; c < n; c++) {
        line[c] = cell(vectors.get(c), r);
      }
      cells.add(line);
    }
    String grid = n == 0 ? "(no columns)\n" : grid(List.of(names, types), cells, right);
    return lastLine == null ? grid : grid + lastLine + "\n";
  }

  private static boolean isNumber(ArrowType type) {
    return type instanceof ArrowType.Int
        || type instanceof ArrowType.FloatingPoint
        || type instanceof ArrowType.Decimal;
  }

  /** Value {@code row} of {@code v} as one cell: at most {@link #MAX_WIDTH} characters. */
  static String cell(FieldVector v, int row) {
    return cut(value(v, row), MAX_WIDTH);
  }

  /**
   * Value {@code row} of {@code v}, whole: nested values as {@code [1, null, 3]}, {@code {a: 1,
   * b: "x"}} and {@code {k1: 1, k2: null}}.
   */
  private static String value(FieldVector v, int row) {
    if (v.isNull(row)) {
      return "null";
    }
    if (v instanceof MapVector m) { // before ListVector, which it extends
      StructVector entries = (StructVector) m.getDataVector();
      List<FieldVector> kv = entries.getChildrenFromFields();
      StringBuilder b = new StringBuilder("{");
      for (int k = m.getElementStartIndex(row); k < m.getElementEndIndex(row); k++) {
        b.append(k > m.getElementStartIndex(row) ? ", " : "").append(value(kv.get(0), k))
            .append(": ").append(value(kv.get(1), k));
      }
      return b.append('}').toString();
    } else if (v instanceof ListVector l) {
      return items((FieldVector) l.getDataVector(), l.getElementStartIndex(row),
          l.getElementEndIndex(row));
    } else if (v instanceof LargeListVector l) {
      return items((FieldVector) l.getDataVector(), (int) l.getElementStartIndex(row),
          (int) l.getElementEndIndex(row));
    } else if (v instanceof FixedSizeListVector l) {
      int n = l.getListSize();
      return items((FieldVector) l.getDataVector(), row * n, row * n + n);
    } else if (v instanceof StructVector st) {
      StringBuilder b = new StringBuilder("{");
      List<FieldVector> kids = st.getChildrenFromFields();
      for (int k = 0; k < kids.size(); k++) {
        b.append(k > 0 ? ", " : "").append(kids.get(k).getName()).append(": ")
            .append(value(kids.get(k), row));
      }
      return b.append('}').toString();
    }
    return scalar(v, row);
  }

  private static String items(FieldVector child, int from, int to) {
    StringBuilder b = new StringBuilder("[");
    for (int k = from; k < to; k++) {
      b.append(k > from ? ", " : "").append(value(child, k));
      if (b.length() > MAX_WIDTH) {
        break; // the cell is cut there anyway
      }
    }
    return b.append(']').toString();
  }

  private static String scalar(FieldVector v, int row) {
    String s;
    if (v instanceof TinyIntVector x) {
      s = Byte.toString(x.get(row));
    } else if (v instanceof SmallIntVector x) {
      s = Short.toString(x.get(row));
    } else if (v instanceof IntVector x) {
      s = Integer.toString(x.get(row));
    } else if (v instanceof BigIntVector x) {
      s = Long.toString(x.get(row));
    } else if (v instanceof UInt1Vector x) {
      s = Integer.toString(Byte.toUnsignedInt(x.get(row)));
    } else if (v instanceof UInt2Vector x) {
      s = Integer.toString(x.get(row)); // a char: already unsigned
    } else if (v instanceof UInt4Vector x) {
      s = Integer.toUnsignedString(x.get(row));
    } else if (v instanceof UInt8Vector x) {
      s = Long.toUnsignedString(x.get(row));
    } else if (v instanceof Float4Vector x) {
      s = Float.toString(x.get(row));
    } else if (v instanceof Float8Vector x) {
      s = Double.toString(x.get(row));
    } else if (v instanceof BitVector x) {
      s = x.get(row) != 0 ? "true" : "false";
    } else if (v instanceof DateDayVector x) {
      s = LocalDate.ofEpochDay(x.get(row)).toString();
    } else if (v instanceof DateMilliVector x) {
      s = date64(x.get(row));
    } else if (v instanceof TimeStampVector x) {
      s = timestamp(x.get(row), (ArrowType.Timestamp) v.getField().getType());
    } else if (v instanceof DecimalVector x) {
      BigDecimal d = x.getObject(row);
      // a scale far from any real one (Arrow does not bound it) has no plain form that fits
      s = Math.abs((long) d.scale()) <= MAX_PLAIN_SCALE ? d.toPlainString() : d.toString();
    } else if (v instanceof VarCharVector x) {
      s = quote(x.get(row));
    } else if (v instanceof LargeVarCharVector x) {
      s = quote(x.get(row));
    } else if (v instanceof VarBinaryVector x) {
      s = hex(x.get(row));
    } else if (v instanceof LargeVarBinaryVector x) {
      s = hex(x.get(row));
    } else if (v instanceof FixedSizeBinaryVector x) {
      s = hex(x.get(row));
    } else {
      s = String.valueOf(v.getObject(row)); // a type funnel does not read
    }
    return s;
  }

  /** A date64: its date, or its date and time when it is not a whole day (the spec says it is). */
  private static String date64(long millis) {
    long days = Math.floorDiv(millis, 86_400_000L);
    long rest = Math.floorMod(millis, 86_400_000L);
    if (rest == 0) {
      return LocalDate.ofEpochDay(days).toString();
    }
    return dateTime(Math.floorDiv(millis, 1000L), Math.floorMod(millis, 1000L) * 1_000_000L, 3);
  }

  private static String timestamp(long value, ArrowType.Timestamp type) {
    long perSecond;
    int digits;
    switch (type.getUnit()) {
      case SECOND -> { perSecond = 1; digits = 0; }
      case MILLISECOND -> { perSecond = 1_000L; digits = 3; }
      case MICROSECOND -> { perSecond = 1_000_000L; digits = 6; }
      default -> { perSecond = 1_000_000_000L; digits = 9; }
    }
    long seconds = Math.floorDiv(value, perSecond);
    long nanos = Math.floorMod(value, perSecond) * (1_000_000_000L / perSecond);
    String s = dateTime(seconds, nanos, digits);
    if (s == null) {
      return value + " " + unitSuffix(type.getUnit()); // beyond year 999,999,999
    }
    return type.getTimezone() == null ? s : s + "Z";
  }

  /** uuuu-MM-ddTHH:mm:ss, then {@code digits} fraction digits; null out of java.time's range. */
  private static String dateTime(long epochSeconds, long nanos, int digits) {
    LocalDateTime t;
    try {
      t = LocalDateTime.ofEpochSecond(epochSeconds, (int) nanos, ZoneOffset.UTC);
    } catch (DateTimeException e) {
      return null;
    }
    String s = DATE_TIME.format(t);
    if (digits == 0) {
      return s;
    }
    String fraction = String.format(Locale.ROOT, "%09d", nanos);
    return s + "." + fraction.substring(0, digits);
  }

  private static String quote(byte[] utf8) {
    String s = new String(utf8, StandardCharsets.UTF_8);
    StringBuilder b = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length() && b.length() <= MAX_WIDTH; i++) {
      char ch = s.charAt(i);
      switch (ch) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (ch < 0x20 || ch == 0x7f) {
            b.append(String.format(Locale.ROOT, "\\u%04x", (int) ch));
          } else {
            b.append(ch);
          }
        }
      }
    }
    return b.append('"').toString();
  }

  private static String hex(byte[] bytes) {
    // whole bytes only, and only as many as show: a blob of a megabyte is still one short cell
    boolean fits = 2 + 2L * bytes.length <= MAX_WIDTH;
    int shown = fits ? bytes.length : (MAX_WIDTH - 2 - ELLIPSIS.length()) / 2;
    StringBuilder b = new StringBuilder(MAX_WIDTH).append("0x");
    for (int i = 0; i < shown; i++) {
      b.append(Character.forDigit((bytes[i] >> 4) & 0xf, 16));
      b.append(Character.forDigit(bytes[i] & 0xf, 16));
    }
    return fits ? b.toString() : b.append(ELLIPSIS).toString();
  }

  /** {@code s}, or its first characters and "..." in {@code width} characters. */
  static String cut(String s, int width) {
    if (s.length() <= width) {
      return s;
    }
    int end = width - ELLIPSIS.length();
    if (Character.isHighSurrogate(s.charAt(end - 1))) {
      end--; // never half a character
    }
    return s.substring(0, end) + ELLIPSIS;
  }

  /**
   * Header lines, a rule, then the rows; each column as wide as its widest cell, two blanks between
   * columns, no trailing blanks.
   */
  private static String grid(List<String[]> header, List<String[]> rows, boolean[] right) {
    int n = right.length;
    int[] width = new int[n];
    List<String[]> all = new ArrayList<>(header);
    all.addAll(rows);
    for (String[] line : all) {
      for (int c = 0; c < n; c++) {
        width[c] = Math.max(width[c], line[c].length());
      }
    }
    StringBuilder b = new StringBuilder();
    for (String[] line : header) {
      line(b, line, width, right);
    }
    String[] rule = new String[n];
    for (int c = 0; c < n; c++) {
      rule[c] = "-".repeat(width[c]);
    }
    line(b, rule, width, right);
    for (String[] line : rows) {
      line(b, line, width, right);
    }
    return b.toString();
  }

  private static void line(StringBuilder b, String[] cells, int[] width, boolean[] right) {
    int start = b.length();
    for (int c = 0; c < cells.length; c++) {
      if (c > 0) {
        b.append("  ");
      }
      String pad = " ".repeat(width[c] - cells[c].length());
      b.append(right[c] ? pad : "").append(cells[c]).append(right[c] ? "" : pad);
    }
    int end = b.length();
    while (end > start && b.charAt(end - 1) == ' ') {
      end--;
    }
    b.setLength(end);
    b.append('\n');
  }
}
