package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A hostile user's sequences of public calls (issue "no sequence of public calls crashes the
 * JVM"): each ran into a SIGSEGV, a hang or silent corruption before the handles had one lifetime
 * mechanism ({@link NativeHandle}). Each runs in a forked JVM ({@link MisuseChild}), so a crash
 * fails the test, and a hang is killed and fails it.
 */
class MisuseTest {
  @ParameterizedTest
  @ValueSource(strings = {"toArrowVsClose", "headVsClose", "queriesVsClose",
    "readsVsReaderClose", "pinnedAfterDeviceClose", "stalePinnedBuffer", "streams",
    "readsVsStreamClose", "rawAddresses", "droppedWithItsReadInFlight", "interruptedThread",
    "pinnedOfAnotherDeviceVsClose"})
  void aHostileSequenceEndsNormally(String scenario) throws Exception {
    // on the cpu backend, copies and launches start late (a slow device): a close that did not
    // wait for them would free memory they still use
    Map<String, String> env = !TestSupport.BACKEND.equals("cpu") ? Map.of()
        : scenario.endsWith("VsClose") ? Map.of("FUNNEL_CPU_STREAM_DELAY_US", "50")
        // the copies still queued when the collector runs
        : scenario.equals("droppedWithItsReadInFlight")
            ? Map.of("FUNNEL_CPU_STREAM_DELAY_US", "200000") : Map.of();
    Process p = ForkedJvm.start(MisuseChild.class, env,
        List.of("-Xmx3g", "-XX:MaxDirectMemorySize=3g",
            "-Dfunnel.misuse.scale=" + Integer.getInteger("funnel.misuse.scale", 1)),
        scenario);
    ForkedJvm.Result r = ForkedJvm.finish(p, 300);
    assertEquals(0, r.exitCode(), () -> scenario + " ended with " + r.exitCode() + ":\n"
        + r.output());
    assertTrue(r.output().endsWith("ok\n"), () -> scenario + " said:\n" + r.output());
  }

  /** A table nobody closed is freed once unreachable, and counted as a leak. */
  @Test
  void aForgottenTableIsFreedByTheCleaner() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(device)) {
      ByteBuffer[] parts = MisuseChild.partitions(allocator, 2, 10);
      long[] live0 = Handles.live();
      long leaked0 = Handles.leaked()[Handles.Kind.TABLE.ordinal()];
      forget(reader.read(parts));
      long deadline = System.nanoTime() + 20_000_000_000L;
      while (Handles.leaked()[Handles.Kind.TABLE.ordinal()] == leaked0
          && System.nanoTime() < deadline) {
        System.gc();
        Thread.sleep(10);
      }
      assertEquals(leaked0 + 1, Handles.leaked()[Handles.Kind.TABLE.ordinal()]);
      assertEquals(live0[Handles.Kind.TABLE.ordinal()],
          Handles.live()[Handles.Kind.TABLE.ordinal()], "the forgotten table was freed");
    }
  }

  private static void forget(DeviceTable t) {
    t.waitReady();
  }

  /** Every call on a closed object is an IllegalStateException naming it. */
  @Test
  void callsAfterCloseNameTheClosedObject() {
    try (BufferAllocator allocator = new RootAllocator()) {
      ByteBuffer[] parts = MisuseChild.partitions(allocator, 2, 10);
      FunnelDevice device = TestSupport.openDevice();
      FunnelReader reader = new FunnelReader(device);
      DeviceStream stream = device.createStream();
      PinnedBuffer block = device.pinnedPool().allocate(64);
      DeviceTable table = reader.read(parts);
      SharedTable shared = table.share();
      shared.close();
      table.close();
      stream.close();
      reader.close();
      block.close();
      device.close();
      assertClosed("DeviceTable", () -> table.toArrow(allocator));
      assertClosed("DeviceTable", () -> table.head(3));
      assertClosed("DeviceTable", table::stats);
      assertClosed("DeviceTable", table::share);
      assertClosed("FunnelReader", () -> reader.read(parts));
      assertClosed("FunnelReader", () -> reader.setTimeKernel(true));
      assertClosed("FunnelDevice", device::createStream);
      assertClosed("FunnelDevice", () -> device.pinnedPool().allocate(64));
      assertClosed("FunnelDevice", () -> new FunnelReader(device));
      assertClosed("PinnedBuffer", block::buffer);
      assertClosed("PinnedBuffer", () -> block.write(0, new byte[1], 0, 1));
      assertEquals(0, shared.importers());
      assertTrue(shared.close(java.time.Duration.ZERO), "closing a closed share");
      try (VectorSchemaRoot root = VectorSchemaRoot.create(table.schema(), allocator)) {
        assertEquals(1, root.getFieldVectors().size(), "the schema outlives the table");
      }
    }
  }

  private static void assertClosed(String what, org.junit.jupiter.api.function.Executable call) {
    IllegalStateException e = assertThrows(IllegalStateException.class, call);
    assertEquals(what + " is closed", e.getMessage());
  }
}
