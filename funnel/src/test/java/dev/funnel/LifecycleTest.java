package dev.funnel;

import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Closing devices, readers and tables, in every order a caller may. */
class LifecycleTest extends DeviceTestCase {
  private List<byte[]> parts;

  @BeforeEach
  void writePartitions() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(71);
    parts = new ArrayList<>();
    for (int p = 0; p < 40; p++) {
      parts.add(randomStream(schema, allocator, random, 0.2, random.nextInt(200)));
    }
  }

  @Test
  void closeIsIdempotent() {
    FunnelReader reader = new FunnelReader(device);
    DeviceTable table = read(reader, parts);
    table.close();
    table.close();
    reader.close();
    reader.close();
    device.close();
    device.close();
  }

  @Test
  void tableMethodsAfterCloseThrowIllegalStateException() {
    DeviceTable table;
    try (FunnelReader reader = new FunnelReader(device)) {
      table = read(reader, parts);
    }
    table.close();
    Map<String, Executable> calls = new LinkedHashMap<>();
    calls.put("stats", table::stats);
    calls.put("isReady", table::isReady);
    calls.put("waitReady", table::waitReady);
    calls.put("toArrow", () -> table.toArrow(allocator));
    calls.put("column (device addresses)", () -> table.column(0));
    calls.put("columns (device addresses)", table::columns);
    calls.forEach((name, call) -> assertThrows(IllegalStateException.class, call, name));
    assertNotNull(table.toString());
  }

  @Test
  void readerAndDeviceMethodsAfterCloseThrowIllegalStateException() {
    FunnelReader reader = new FunnelReader(device);
    reader.close();
    assertThrows(IllegalStateException.class, () -> reader.read(direct(parts)));
    assertThrows(IllegalStateException.class, () -> reader.read(new long[0], new long[0]));
    device.close();
    assertThrows(IllegalStateException.class, device::createStream);
    assertThrows(IllegalStateException.class, () -> new FunnelReader(device));
  }

  @Test
  void toArrowAfterWaitReadyGivesTheData() {
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      table.waitReady();
      assertTrue(table.isReady());
      table.waitReady(); // idempotent
      assertTableMatches(table, parts, null, allocator);
      assertTableMatches(table, parts, null, allocator); // twice: independent copies
    }
  }

  @Test
  void isReadyBecomesTrueWithoutWaiting() throws InterruptedException {
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      long deadline = System.nanoTime() + 30_000_000_000L;
      while (!table.isReady() && System.nanoTime() < deadline) {
        Thread.sleep(1);
      }
      assertTrue(table.isReady(), "not ready after 30 s");
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void tableStaysValidAfterItsReaderIsClosed() {
    DeviceTable table;
    try (FunnelReader reader = new FunnelReader(device)) {
      table = read(reader, parts); // closed at once, the read possibly still in flight
    }
    try (table) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void tableClosedWhileInFlightFreesEverything() {
    try (FunnelReader reader = new FunnelReader(device)) {
      for (int i = 0; i < 20; i++) {
        read(reader, parts).close();
      }
      try (DeviceTable table = read(reader, parts)) {
        assertTableMatches(table, parts, null, allocator);
      }
    }
  }

  @Test
  void shapeIsKnownBeforeTheDataIsReady() {
    long rows = 0;
    for (byte[] p : parts) {
      rows += TestSupport.arrowRows(p, null, allocator);
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertEquals(rows, table.numRows());
      assertEquals(TestSupport.allTypesSchema(), table.schema());
      assertEquals(table.numColumns(), table.columns().size());
      try (VectorSchemaRoot root = table.toArrow(allocator)) {
        assertEquals(rows, root.getRowCount());
      }
    }
  }
}
