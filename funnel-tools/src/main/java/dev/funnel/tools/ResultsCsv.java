package dev.funnel.tools;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The benchmark's results as CSV, the format bench/funnel_bench.c writes: one header line, then
 * one row per shape, mix, source and strategy. Rows are read by column name, so columns appended
 * after {@link #HEADER} and strategies this code does not know are carried along, not refused.
 */
public final class ResultsCsv {
  private ResultsCsv() {}

  /** The header both drivers write, in this order. */
  public static final List<String> HEADER =
      List.of(
          "backend", "partitions", "columns", "rows_per_partition", "rows", "mix", "source",
          "strategy", "bytes", "h2d_bytes", "reps", "ms_median", "ms_min", "gb_per_s",
          "ratio_to_link", "funnel_speedup", "calls", "h2d_copies", "launches", "syncs", "allocs",
          "staged_partitions", "parse_ms", "plan_ms", "submit_ms", "verified", "error");

  /** One row: its values by column name; a column the file does not have reads as "". */
  public record Row(Map<String, String> values) {
    String get(String column) {
      return values.getOrDefault(column, "");
    }

    /** Its codec column (the C driver's, and the Java driver's after the header), or "none". */
    String codec() {
      String codec = get("codec").trim();
      return codec.isEmpty() ? "none" : codec;
    }

    /** The column as a number, or NaN when it is empty or not a number. */
    double number(String column) {
      String v = get(column).trim();
      if (v.isEmpty()) {
        return Double.NaN;
      }
      try {
        return Double.parseDouble(v);
      } catch (NumberFormatException e) {
        return Double.NaN;
      }
    }
  }

  /**
   * Reads a results file.
   *
   * @throws IOException when it cannot be read, or is not CSV with a header naming every column
   *     in {@code required} (the message names the file and the line)
   */
  public static List<Row> read(Path file, List<String> required) throws IOException {
    List<List<String>> records = parse(Files.readString(file, StandardCharsets.UTF_8), file);
    if (records.isEmpty()) {
      throw new IOException(file + ": empty, expected a header line");
    }
    List<String> header = records.get(0);
    for (String column : required) {
      if (!header.contains(column)) {
        throw new IOException(file + ": the header has no column '" + column + "'");
      }
    }
    List<Row> rows = new ArrayList<>();
    for (int r = 1; r < records.size(); r++) {
      List<String> fields = records.get(r);
      if (fields.size() == 1 && fields.get(0).isEmpty()) {
        continue; // a blank line
      }
      if (fields.size() < header.size()) {
        throw new IOException(
            file + ": record " + (r + 1) + " has " + fields.size() + " fields, the header "
                + header.size());
      }
      Map<String, String> values = new HashMap<>();
      for (int c = 0; c < header.size(); c++) {
        values.put(header.get(c), fields.get(c));
      }
      rows.add(new Row(Collections.unmodifiableMap(values)));
    }
    return rows;
  }

  /** RFC 4180: fields split at commas, quoted fields may hold commas, "" and line breaks. */
  private static List<List<String>> parse(String text, Path file) throws IOException {
    List<List<String>> records = new ArrayList<>();
    List<String> fields = new ArrayList<>();
    StringBuilder field = new StringBuilder();
    boolean quoted = false;
    int line = 1;
    int i = 0;
    int n = text.length();
    while (i < n) {
      char ch = text.charAt(i++);
      if (quoted) {
        if (ch == '"') {
          if (i < n && text.charAt(i) == '"') {
            field.append('"');
            i++;
          } else {
            quoted = false;
          }
        } else {
          line += ch == '\n' ? 1 : 0;
          field.append(ch);
        }
      } else if (ch == '"' && field.length() == 0) {
        quoted = true;
      } else if (ch == ',') {
        fields.add(field.toString());
        field.setLength(0);
      } else if (ch == '\n' || ch == '\r') {
        if (ch == '\r' && i < n && text.charAt(i) == '\n') {
          i++;
        }
        fields.add(field.toString());
        field.setLength(0);
        records.add(fields);
        fields = new ArrayList<>();
        line++;
      } else {
        field.append(ch);
      }
    }
    if (quoted) {
      throw new IOException(file + ": line " + line + ": a quoted field is not closed");
    }
    if (field.length() > 0 || !fields.isEmpty()) {
      fields.add(field.toString());
      records.add(fields);
    }
    return records;
  }

  /** A field quoted as the C driver quotes its error field. */
  static String quote(String s) {
    return '"' + s.replace("\"", "\"\"") + '"';
  }
}
