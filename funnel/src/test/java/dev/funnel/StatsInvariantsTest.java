package dev.funnel;

import static dev.funnel.TestSupport.assertStatsInvariants;
import static dev.funnel.TestSupport.bareBatch;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * ReadStats: the design's invariants (checked on every read of the suite by TestSupport.read) and
 * the counts, against what the partitions hold.
 */
class StatsInvariantsTest extends DeviceTestCase {

  /** Some partitions, and the schema the reader is given (null: none). */
  record Input(List<byte[]> partitions, Schema readerSchema) {}

  static Stream<Arguments> shapes() {
    Schema all = TestSupport.allTypesSchema();
    return Stream.of(
        Arguments.of("one partition", (Function<BufferAllocator, Input>) a ->
            new Input(List.of(randomStream(all, a, new Random(51), 0.2, 300)), null)),
        Arguments.of("1000 one-row partitions", (Function<BufferAllocator, Input>) a -> {
          Random r = new Random(52);
          List<byte[]> parts = new ArrayList<>();
          for (int p = 0; p < 1000; p++) {
            parts.add(randomStream(all, a, r, 0.2, 1));
          }
          return new Input(parts, null);
        }),
        Arguments.of("empty blocks among partitions", (Function<BufferAllocator, Input>) a -> {
          Random r = new Random(53);
          List<byte[]> parts = new ArrayList<>();
          for (int p = 0; p < 50; p++) {
            parts.add(p % 3 == 0 ? new byte[0] : randomStream(all, a, r, 0.2, r.nextInt(30)));
          }
          return new Input(parts, null);
        }),
        Arguments.of("zero-row partitions and batches", (Function<BufferAllocator, Input>) a -> {
          Random r = new Random(54);
          return new Input(List.of(randomStream(all, a, r, 0.2), randomStream(all, a, r, 0.2, 0),
              randomStream(all, a, r, 0.2, 0, 5, 0, 2), randomStream(all, a, r, 0.2, 0)), null);
        }),
        Arguments.of("several batches per partition", (Function<BufferAllocator, Input>) a -> {
          Random r = new Random(55);
          List<byte[]> parts = new ArrayList<>();
          for (int p = 0; p < 20; p++) {
            parts.add(randomStream(all, a, r, 0.2, 1 + r.nextInt(9), r.nextInt(9), 3));
          }
          return new Input(parts, null);
        }),
        Arguments.of("bare batches, reader schema", (Function<BufferAllocator, Input>) a -> {
          Random r = new Random(56);
          List<byte[]> parts = new ArrayList<>();
          try (VectorSchemaRoot root = VectorSchemaRoot.create(all, a)) {
            for (int p = 0; p < 20; p++) {
              TestSupport.fill(root, r.nextInt(25), r, 0.2);
              parts.add(bareBatch(root));
            }
          }
          return new Input(parts, all);
        }),
        Arguments.of("only empty blocks, reader schema", (Function<BufferAllocator, Input>) a ->
            new Input(List.of(new byte[0], new byte[0]), all)),
        Arguments.of("no partitions, reader schema", (Function<BufferAllocator, Input>) a ->
            new Input(List.of(), all)));
  }

  private DeviceTable readInput(Input in) {
    try (FunnelReader reader = in.readerSchema() == null
        ? new FunnelReader(device) : new FunnelReader(device, in.readerSchema())) {
      return read(reader, in.partitions());
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("shapes")
  void statsKeepTheInvariantsAndCountWhatWasRead(String name, Function<BufferAllocator, Input> shape) {
    Input in = shape.apply(allocator);
    long empty = 0;
    long withRows = 0;
    long bytesWithRows = 0;
    long rows = 0;
    for (byte[] p : in.partitions()) {
      long r = TestSupport.arrowRows(p, in.readerSchema(), allocator);
      empty += p.length == 0 ? 1 : 0;
      withRows += r > 0 ? 1 : 0;
      bytesWithRows += r > 0 ? p.length : 0;
      rows += r;
    }
    try (DeviceTable table = readInput(in)) {
      ReadStats s = table.stats();
      String json = s.toJson();
      assertStatsInvariants(s, in.partitions().size());
      assertEquals(empty, s.emptyPartitions(), json);
      assertEquals(rows, s.rows(), json);
      assertEquals(rows, table.numRows(), json);
      assertEquals(TestSupport.allTypesSchema().getFields().size(), s.columns(), json);
      if (s.deviceParsed() == 0) {
        assertTrue(s.h2dCopies() <= withRows + 1,
            "at most one copy per partition with rows, plus the segment table: " + json);
        assertTrue(s.concatLaunches() <= 1, "one concat launch at most: " + json);
      }
      assertTrue(s.bytesH2d() >= bytesWithRows, "every partition with rows is copied: " + json);
      table.waitReady();
      assertEquals(s, table.stats(), "stats describe the read, not the wait");
    }
  }

  @Test
  void batchesCountsEveryRecordBatchMessageRead() {
    Schema all = TestSupport.allTypesSchema();
    Random r = new Random(57);
    List<byte[]> parts = List.of(randomStream(all, allocator, r, 0.2, 4, 0, 6),
        randomStream(all, allocator, r, 0.2, 0), randomStream(all, allocator, r, 0.2, 1, 2, 3));
    long messages = 0;
    for (byte[] p : parts) {
      messages += TestSupport.messages(p).stream()
          .filter(m -> !m.eos() && m.headerType() == MessageHeader.RecordBatch).count();
    }
    assertEquals(7, messages);
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(messages, table.stats().batches(),
          "funnel.h: batches counts the RecordBatch messages read: " + table.stats().toJson());
    }
  }

  @Test
  void invariantCheckRejectsEveryViolation() {
    ReadStats ok = stats(Map.of());
    assertStatsInvariants(ok, 10);
    List<Map<String, Long>> violations = List.of(
        Map.of("h2dCopies", 12L),
        Map.of("concatLaunches", 2L),
        Map.of("deviceCallsParse", 1L),
        Map.of("deviceCallsPlan", 1L),
        Map.of("syncsInRead", 1L));
    for (Map<String, Long> v : violations) {
      ReadStats s = stats(v);
      assertThrows(AssertionError.class, () -> assertStatsInvariants(s, 10), v.toString());
    }
    assertThrows(AssertionError.class, () -> assertStatsInvariants(ok, 9), "partitions");
    // the device path: one more copy, three launches, device calls while parsing, one wait
    Map<String, Long> device = Map.of("deviceParsed", 10L, "h2dCopies", 11L, "concatLaunches", 3L,
        "deviceCallsParse", 6L, "syncsInRead", 1L);
    assertStatsInvariants(stats(device), 10);
    assertEachBreaks(device, List.of(Map.of("h2dCopies", 12L), Map.of("concatLaunches", 4L),
        Map.of("deviceCallsPlan", 1L), Map.of("syncsInRead", 0L), Map.of("syncsInRead", 2L)));
    // the device's LZ4 decoder: its launch and its wait; and dropping early copies, one wait more
    Map<String, Long> decoded = Map.of("compressedPartitions", 10L, "deviceDecoded", 30L,
        "concatLaunches", 2L, "syncsInRead", 1L);
    assertStatsInvariants(stats(decoded), 10);
    Map<String, Long> dropped = new HashMap<>(decoded);
    dropped.put("syncsInRead", 2L);
    assertStatsInvariants(stats(dropped), 10);
    assertEachBreaks(decoded, List.of(Map.of("concatLaunches", 3L), Map.of("syncsInRead", 0L),
        Map.of("syncsInRead", 3L)));
    // LZ4 bodies by the device path, waiting for the first pass: two copies, two launches and a
    // wait more
    Map<String, Long> unpacked = Map.of("deviceParsed", 10L, "compressedPartitions", 10L,
        "deviceDecoded", 30L, "h2dCopies", 13L, "concatLaunches", 5L, "deviceCallsParse", 9L,
        "syncsInRead", 2L, "decodeWaits", 1L);
    assertStatsInvariants(stats(unpacked), 10);
    assertEachBreaks(unpacked, List.of(Map.of("h2dCopies", 14L), Map.of("concatLaunches", 6L),
        Map.of("syncsInRead", 1L), Map.of("syncsInRead", 3L), Map.of("deviceCallsPlan", 1L)));
    // ... in one go: two launches more, no copy and no wait more
    Map<String, Long> oneGo = new HashMap<>(unpacked);
    oneGo.putAll(Map.of("h2dCopies", 11L, "syncsInRead", 1L, "decodeWaits", 0L));
    assertStatsInvariants(stats(oneGo), 10);
    assertEachBreaks(oneGo, List.of(Map.of("h2dCopies", 12L), Map.of("concatLaunches", 6L),
        Map.of("syncsInRead", 2L)));
    // ... in one go, the gate found shut: the launches after the first pass and two waits more
    Map<String, Long> shut = new HashMap<>(unpacked);
    shut.putAll(Map.of("concatLaunches", 9L, "syncsInRead", 3L, "decodeWaits", 2L));
    assertStatsInvariants(stats(shut), 10);
    assertEachBreaks(shut, List.of(Map.of("concatLaunches", 10L), Map.of("syncsInRead", 2L)));
    // the host path after an attempt: the attempt's copies, three launches and two waits more
    Map<String, Long> left = Map.of("deviceParsed", 10L, "deviceLeft", 1L, "h2dCopies", 22L,
        "concatLaunches", 4L, "syncsInRead", 2L);
    assertStatsInvariants(stats(left), 10);
    assertEachBreaks(left, List.of(Map.of("h2dCopies", 23L), Map.of("concatLaunches", 5L),
        Map.of("syncsInRead", 1L), Map.of("deviceCallsParse", 1L)));
  }

  /** Each of `changes`, applied to the valid `base`, breaks an invariant. */
  private static void assertEachBreaks(Map<String, Long> base, List<Map<String, Long>> changes) {
    for (Map<String, Long> v : changes) {
      Map<String, Long> bad = new HashMap<>(base);
      bad.putAll(v);
      assertThrows(AssertionError.class, () -> assertStatsInvariants(stats(bad), 10), v.toString());
    }
  }

  @Test
  void statsJsonIsOneObjectWithTheHeadersKeys() {
    List<byte[]> parts = List.of(randomStream(TestSupport.allTypesSchema(), allocator,
        new Random(58), 0.2, 17));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      ReadStats s = table.stats();
      String json = s.toJson();
      assertTrue(json.startsWith("{") && json.endsWith("}") && !json.contains("\n"), json);
      Map<String, Long> values = parseFlatJson(json);
      Map<String, Long> want = new LinkedHashMap<>();
      want.put("partitions", s.partitions());
      want.put("empty_partitions", s.emptyPartitions());
      want.put("batches", s.batches());
      want.put("rows", s.rows());
      want.put("columns", s.columns());
      want.put("column_sets", s.columnSets());
      want.put("segments", s.segments());
      want.put("h2d_copies", s.h2dCopies());
      want.put("bytes_h2d", s.bytesH2d());
      want.put("concat_launches", s.concatLaunches());
      want.put("device_allocs", s.deviceAllocs());
      want.put("pinned_allocs", s.pinnedAllocs());
      want.put("syncs_in_read", s.syncsInRead());
      want.put("device_calls_during_parse", s.deviceCallsParse());
      want.put("device_calls_during_plan", s.deviceCallsPlan());
      want.put("device_calls_during_submit", s.deviceCallsSubmit());
      want.put("bytes_out", s.bytesOut());
      want.put("parse_ns", s.parseNanos());
      want.put("plan_ns", s.planNanos());
      want.put("submit_ns", s.submitNanos());
      for (Map.Entry<String, Long> e : want.entrySet()) {
        assertEquals(e.getValue(), values.get(e.getKey()), e.getKey() + " in " + json);
      }
      assertEquals(ReadStats.class.getRecordComponents().length, values.size(),
          "one key per ReadStats component: " + json);
      assertEquals(17, values.get("rows"));
    }
  }

  /** {"key": integer, ...} to a map, in order; fails on anything else. */
  static Map<String, Long> parseFlatJson(String json) {
    Map<String, Long> out = new LinkedHashMap<>();
    String body = json.trim();
    assertTrue(body.startsWith("{") && body.endsWith("}"), json);
    body = body.substring(1, body.length() - 1).trim();
    Pattern entry = Pattern.compile("\"([a-z0-9_]+)\"\\s*:\\s*(\"[^\"]*\"|-?\\d+)\\s*(,|$)");
    Matcher m = entry.matcher(body);
    int at = 0;
    while (at < body.length()) {
      assertTrue(m.find(at) && m.start() == at, "not a flat JSON object: " + json);
      if (!m.group(2).startsWith("\"")) {
        out.put(m.group(1), Long.parseLong(m.group(2)));
      }
      at = m.end();
      while (at < body.length() && body.charAt(at) == ' ') {
        at++;
      }
    }
    return out;
  }

  /**
   * A ReadStats that keeps the invariants (10 partitions, 11 copies, one launch, one column set,
   * no device calls while parsing or planning, no syncs), with some components overridden by name.
   */
  private static ReadStats stats(Map<String, Long> overrides) {
    Map<String, Long> values = new HashMap<>(Map.of("partitions", 10L, "h2dCopies", 11L,
        "concatLaunches", 1L, "columnSets", 1L, "deviceCallsParse", 0L, "deviceCallsPlan", 0L,
        "syncsInRead", 0L, "deviceParsed", 0L, "deviceLeft", 0L));
    values.put("compressedPartitions", 0L);
    values.put("deviceDecoded", 0L);
    values.put("decodeWaits", 0L);
    values.putAll(overrides);
    RecordComponent[] components = ReadStats.class.getRecordComponents();
    Class<?>[] types = new Class<?>[components.length];
    Object[] args = new Object[components.length];
    for (int i = 0; i < components.length; i++) {
      types[i] = components[i].getType();
      args[i] = values.getOrDefault(components[i].getName(), 1L);
    }
    try {
      return ReadStats.class.getDeclaredConstructor(types).newInstance(args);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }
}
