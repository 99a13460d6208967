package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Partitions fetched straight into the device's pinned pool, and the pool's bookkeeping. */
class PinnedPoolTest extends DeviceTestCase {

  @Test
  void readFromPinnedBuffersMatchesArrowJavaAndStagesNothing() {
    Random random = new Random(5);
    List<byte[]> partitions = new ArrayList<>();
    for (int p = 0; p < 200; p++) {
      partitions.add(
          TestSupport.randomStream(
              TestSupport.allTypesSchema(), allocator, random, 0.1, random.nextInt(40)));
    }
    PinnedPool pool = device.pinnedPool();
    List<PinnedBuffer> pinned = new ArrayList<>();
    try (FunnelReader reader = new FunnelReader(device)) {
      ByteBuffer[] views = new ByteBuffer[partitions.size()];
      for (int p = 0; p < partitions.size(); p++) {
        PinnedBuffer b = pool.allocate(partitions.get(p).length);
        pinned.add(b);
        views[p] = b.buffer().put(partitions.get(p)).flip(); // as a fetch would fill it
      }
      try (DeviceTable table = TestSupport.read(reader, views)) {
        assertEquals(0, table.stats().stagedPartitions(), table.stats().toJson());
        TestSupport.assertTableMatches(table, partitions, null, allocator);
      }
    } finally {
      pinned.forEach(PinnedBuffer::close);
    }
    assertEquals(0, pool.inUse(), "every pinned block is back in the pool");
  }

  @Test
  void pinnedBufferCloseIsIdempotentAndBufferAfterCloseThrows() {
    PinnedPool pool = device.pinnedPool();
    PinnedBuffer b = pool.allocate(100);
    assertEquals(100, b.buffer().capacity());
    assertTrue(b.buffer().isDirect());
    assertTrue(pool.inUse() >= 100);
    b.close();
    b.close();
    assertEquals(0, pool.inUse());
    assertThrows(IllegalStateException.class, b::buffer);
  }

  @Test
  void allocateBeyondThePoolThrowsHostOutOfMemory() {
    FunnelException e =
        assertThrows(FunnelException.class, () -> device.pinnedPool().allocate(Integer.MAX_VALUE));
    assertEquals(FunnelException.Code.HOST_OUT_OF_MEMORY, e.code(), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> device.pinnedPool().allocate(-1));
  }
}
