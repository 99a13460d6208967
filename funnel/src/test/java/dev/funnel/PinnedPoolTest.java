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
      long[] addresses = new long[partitions.size()];
      long[] lengths = new long[partitions.size()];
      for (int p = 0; p < partitions.size(); p++) {
        PinnedBuffer b = pool.allocate(partitions.get(p).length);
        pinned.add(b);
        b.write(0, partitions.get(p), 0, partitions.get(p).length); // as a fetch fills it
        addresses[p] = b.address();
        lengths[p] = partitions.get(p).length;
      }
      try (DeviceTable table = reader.read(addresses, lengths)) {
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
    b.write(0, new byte[100], 0, 100);
    assertTrue(pool.inUse() >= 100);
    b.close();
    b.close();
    assertEquals(0, pool.inUse(), "a block no ByteBuffer was handed out of goes back at close");
    assertThrows(IllegalStateException.class, b::buffer);
    assertThrows(IllegalStateException.class, () -> b.write(0, new byte[1], 0, 1));
  }

  @Test
  void aBlockWhoseBufferWasHandedOutGoesBackWhenTheBufferIsUnreachable() throws Exception {
    PinnedPool pool = device.pinnedPool();
    PinnedBuffer b = pool.allocate(100);
    ByteBuffer view = b.buffer();
    assertEquals(100, view.capacity());
    assertTrue(view.isDirect());
    b.close();
    view.put(0, (byte) 1); // writes into memory nobody else has
    assertEquals(100, pool.retiredBytes());
    assertTrue(pool.inUse() >= 100, "not handed out again while the buffer is reachable");
    view = null;
    long deadline = System.nanoTime() + 20_000_000_000L;
    while ((pool.inUse() != 0 || pool.retiredBytes() != 0) && System.nanoTime() < deadline) {
      System.gc();
      Thread.sleep(10);
    }
    assertEquals(0, pool.inUse());
    assertEquals(0, pool.retiredBytes());
  }

  @Test
  void aFullPoolCollectsClosedBlocksBeforeItGivesUp() {
    PinnedPool pool = device.pinnedPool();
    long size = 8 << 20;
    for (int i = 0; i < 64; i++) { // 512 MiB through a pool of 64 (cpu) or 256 MiB (cuda)
      PinnedBuffer b = pool.allocate(size);
      b.buffer().put(0, (byte) i); // handed out: each goes back only once unreachable
      b.close();
    }
  }

  @Test
  void allocateBeyondThePoolThrowsHostOutOfMemory() {
    FunnelException e =
        assertThrows(FunnelException.class, () -> device.pinnedPool().allocate(Integer.MAX_VALUE));
    assertEquals(FunnelException.Code.HOST_OUT_OF_MEMORY, e.code(), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> device.pinnedPool().allocate(-1));
  }
}
