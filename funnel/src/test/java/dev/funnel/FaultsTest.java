package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.Test;

/**
 * Injected faults through the Java API (issue 5, item 3): the k-th device allocation, pinned
 * allocation, copy, launch or event of a read and its copy back fails, for every k they reach. Each
 * fault is a FunnelException naming the step (out of memory as its own class); afterwards no
 * native handle, device allocation, event or pinned block is left, no Arrow memory either (the
 * test case's allocator), and the next read on the same reader matches Arrow Java.
 */
class FaultsTest extends DeviceTestCase {
  private static final String[] KINDS = {"ALLOC", "PINNED", "COPY", "LAUNCH", "EVENT"};

  @Test
  void everyFaultAReadReachesIsAnExceptionAndLeavesNothing() {
    Random random = new Random(42);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 8; p++) {
      parts.add(
          TestSupport.randomStream(
              TestSupport.allTypesSchema(), allocator, random, 0.1, 1 + random.nextInt(50)));
    }
    PinnedPool pool = device.pinnedPool();
    List<PinnedBuffer> blocks = new ArrayList<>();
    ByteBuffer[] views = new ByteBuffer[parts.size()];
    for (int p = 0; p < parts.size(); p++) {
      if (p % 2 == 0) {
        PinnedBuffer b = pool.allocate(parts.get(p).length);
        blocks.add(b);
        views[p] = b.buffer().put(parts.get(p)).flip();
      } else {
        views[p] = TestSupport.direct(parts.get(p));
      }
    }
    int[] injected = new int[KINDS.length];
    try (FunnelReader reader = new FunnelReader(device)) {
      readAndCheck(reader, views, parts); // warm: the pools exist
      // other tests' garbage, freed by the cleaner while this runs, would move the counts
      long[] handles0 = TestSupport.settledLive();
      long[] native0 = Faults.nativeLive();
      long pinned0 = pool.inUse();
      for (int kind = 0; kind < Faults.KINDS; kind++) {
        for (long k = 1; k < 1000; k++) {
          String where = KINDS[kind] + " fault at call " + k;
          Faults.arm(kind, k);
          FunnelException failed = null;
          try {
            readAndCheck(reader, views, parts);
          } catch (FunnelException e) {
            failed = e;
          } finally {
            boolean hit = Faults.calls(kind) >= k;
            Faults.arm(kind, 0);
            if (hit) {
              injected[kind]++;
            }
            if (failed != null) {
              assertTrue(hit, where + ": " + failed);
              assertTrue(failed.getMessage().contains("injected fault"), where + ": " + failed);
              if (kind == Faults.ALLOC) {
                assertInstanceOf(DeviceOutOfMemoryException.class, failed, where);
              } else {
                assertInstanceOf(DeviceException.class, failed, where);
              }
            }
            assertArrayEquals(handles0, Handles.live(), where + ": Java handles left");
            assertArrayEquals(native0, Faults.nativeLive(), where + ": native objects left");
            assertEquals(pinned0, pool.inUse(), where + ": pinned bytes left");
            readAndCheck(reader, views, parts); // the reader goes on
            if (!hit) {
              k = 1000; // this read makes fewer calls of the kind
            }
          }
        }
      }
    } finally {
      Faults.arm(Faults.ALLOC, 0);
      blocks.forEach(PinnedBuffer::close);
    }
    for (int kind = 0; kind < KINDS.length; kind++) {
      assertTrue(injected[kind] > 0, KINDS[kind] + " was never reached");
    }
  }

  private void readAndCheck(FunnelReader reader, ByteBuffer[] views, List<byte[]> parts) {
    try (DeviceTable table = reader.read(views.clone())) {
      TestSupport.assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void handlesComeBackToZeroAfterUse() {
    long[] before = Handles.live();
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable t = reader.read(TestSupport.direct(TestSupport.randomStream(
            TestSupport.allTypesSchema(), allocator, new Random(1), 0.1, 10)))) {
      long[] during = Handles.live();
      assertEquals(before[1] + 1, during[1], "one reader more");
      assertEquals(before[2] + 1, during[2], "one table more");
      try (VectorSchemaRoot root = t.toArrow(allocator)) {
        assertEquals(10, root.getRowCount());
      }
    }
    assertArrayEquals(before, Handles.live());
  }
}
