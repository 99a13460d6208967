package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The numbers Java and C share, read from the C headers themselves (not from the JNI glue, which
 * could repeat a mistake): the order of struct funnel_read_stats against {@link ReadStats}, the
 * error codes, the reader options and transfer modes, the buffer kinds and the fault kinds.
 */
class SharedConstantsTest {
  private static String header(String path) throws IOException {
    return Files.readString(Path.of(System.getProperty("funnel.root", "."), path));
  }

  /** The enumerators of {@code enum name} in a header, with their values (implicit ones counted). */
  static Map<String, Integer> enumOf(String text, String name) {
    Matcher m = Pattern.compile("enum\\s+" + name + "\\s*\\{(.*?)\\};", Pattern.DOTALL).matcher(text);
    if (!m.find()) {
      throw new AssertionError("no enum " + name);
    }
    String body = m.group(1).replaceAll("(?s)/\\*.*?\\*/", "");
    Map<String, Integer> values = new LinkedHashMap<>();
    int next = 0;
    for (String item : body.split(",")) {
      item = item.trim();
      if (item.isEmpty()) {
        continue;
      }
      String[] kv = item.split("=");
      int v = kv.length > 1 ? Integer.decode(kv[1].trim()) : next;
      values.put(kv[0].trim(), v);
      next = v + 1;
    }
    return values;
  }

  /** The int64_t fields of {@code struct name}, in order. */
  static List<String> fieldsOf(String text, String name) {
    Matcher m = Pattern.compile("struct\\s+" + name + "\\s*\\{(.*?)\\};", Pattern.DOTALL)
        .matcher(text);
    if (!m.find()) {
      throw new AssertionError("no struct " + name);
    }
    List<String> fields = new ArrayList<>();
    Matcher f = Pattern.compile("int64_t\\s+(\\w+)\\s*;")
        .matcher(m.group(1).replaceAll("(?s)/\\*.*?\\*/", ""));
    while (f.find()) {
      fields.add(f.group(1));
    }
    return fields;
  }

  private static String camel(String snake) {
    StringBuilder b = new StringBuilder();
    boolean up = false;
    for (char c : snake.toCharArray()) {
      if (c == '_') {
        up = true;
      } else {
        b.append(up ? Character.toUpperCase(c) : c);
        up = false;
      }
    }
    String s = b.toString();
    return s.endsWith("Ns") ? s.substring(0, s.length() - 2) + "Nanos" : s;
  }

  @Test
  void readStatsHaveTheOrderOfTheCStruct() throws IOException {
    List<String> c = new ArrayList<>();
    for (String f : fieldsOf(header("native/include/funnel.h"), "funnel_read_stats")) {
      c.add(camel(f));
    }
    List<String> java = new ArrayList<>();
    for (var rc : ReadStats.class.getRecordComponents()) {
      java.add(rc.getName());
    }
    assertEquals(c, java);
  }

  @Test
  void errorCodesAreTheCCodes() throws IOException {
    Map<String, Integer> c = enumOf(header("native/include/funnel.h"), "funnel_code");
    for (Map.Entry<String, Integer> e : c.entrySet()) {
      String name = e.getKey().replaceFirst("^FUNNEL_(ERR_)?", "");
      assertEquals(FunnelException.Code.valueOf(name), FunnelException.Code.of(e.getValue()),
          e.getKey());
    }
    assertEquals(c.size() + 1, FunnelException.Code.values().length, "codes, and UNKNOWN");
  }

  @Test
  void optionsAndTransferModesAreTheCValues() throws IOException {
    String h = header("native/include/funnel.h");
    Map<String, Integer> options = enumOf(h, "funnel_option");
    assertEquals(options.get("FUNNEL_OPTION_TRANSFER"), FunnelReader.OPTION_TRANSFER);
    assertEquals(options.get("FUNNEL_OPTION_TIME_KERNEL"), FunnelReader.OPTION_TIME_KERNEL);
    assertEquals(options.get("FUNNEL_OPTION_SHAREABLE"), FunnelReader.OPTION_SHAREABLE);
    assertEquals(options.get("FUNNEL_OPTION_DIRECT_MAX_BYTES"),
        FunnelReader.OPTION_DIRECT_MAX_BYTES);
    assertEquals(options.get("FUNNEL_OPTION_PARSE"), FunnelReader.OPTION_PARSE);
    assertEquals(options.get("FUNNEL_OPTION_DECODE"), FunnelReader.OPTION_DECODE);
    assertEquals(6, options.size(), "an option Java does not know: " + options);
    Map<String, Integer> decode = enumOf(h, "funnel_decode");
    for (FunnelReader.Decode d : FunnelReader.Decode.values()) {
      assertEquals(decode.get("FUNNEL_DECODE_" + d.name()), d.ordinal(), d.name());
    }
    assertEquals(decode.size(), FunnelReader.Decode.values().length);
    Map<String, Integer> parse = enumOf(h, "funnel_parse");
    for (FunnelReader.Parse p : FunnelReader.Parse.values()) {
      assertEquals(parse.get("FUNNEL_PARSE_" + p.name()), p.ordinal(), p.name());
    }
    assertEquals(parse.size(), FunnelReader.Parse.values().length);
    Map<String, Integer> transfer = enumOf(h, "funnel_transfer");
    for (FunnelReader.Transfer t : FunnelReader.Transfer.values()) {
      assertEquals(transfer.get("FUNNEL_TRANSFER_" + t.name()), t.ordinal(), t.name());
    }
    assertEquals(transfer.size(), FunnelReader.Transfer.values().length);
  }

  @Test
  void bufferKindsAreTheCValues() throws IOException {
    Map<String, Integer> kinds = enumOf(header("native/include/funnel.h"), "funnel_buffer_kind");
    assertEquals(kinds.get("FUNNEL_BUFFER_VALIDITY"), DeviceTable.VALIDITY);
    assertEquals(kinds.get("FUNNEL_BUFFER_OFFSETS"), DeviceTable.OFFSETS);
    assertEquals(kinds.get("FUNNEL_BUFFER_DATA"), DeviceTable.DATA);
    assertEquals(3, kinds.size());
  }

  @Test
  void faultKindsAreTheCValues() throws IOException {
    Map<String, Integer> kinds = enumOf(header("native/src/backend.h"), "funnel__fault_kind");
    assertEquals(kinds.get("FUNNEL__FAULT_ALLOC"), Faults.ALLOC);
    assertEquals(kinds.get("FUNNEL__FAULT_PINNED"), Faults.PINNED);
    assertEquals(kinds.get("FUNNEL__FAULT_COPY"), Faults.COPY);
    assertEquals(kinds.get("FUNNEL__FAULT_LAUNCH"), Faults.LAUNCH);
    assertEquals(kinds.get("FUNNEL__FAULT_EVENT"), Faults.EVENT);
    assertEquals(kinds.get("FUNNEL__N_FAULTS"), Faults.KINDS);
  }
}
