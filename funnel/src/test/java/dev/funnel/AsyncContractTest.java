package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The async contract through the Java API, against a slow device: pom.xml runs this class alone
 * with FUNNEL_CPU_STREAM_DELAY_US set, so the cpu backend's copies and launches start late and a
 * close that did not wait would free memory the work still reads. Elsewhere (no delay, or cuda) it
 * is skipped, not passed.
 */
class AsyncContractTest extends DeviceTestCase {
  @BeforeEach
  void onASlowDevice() {
    Assumptions.assumeTrue(
        System.getenv("FUNNEL_CPU_STREAM_DELAY_US") != null && TestSupport.BACKEND.equals("cpu"),
        "needs the cpu backend with FUNNEL_CPU_STREAM_DELAY_US (pom.xml's async-contract run)");
  }

  private List<byte[]> partitions(long seed) {
    Random random = new Random(seed);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 12; p++) {
      parts.add(
          TestSupport.randomStream(
              TestSupport.allTypesSchema(), allocator, random, 0.1, 1 + random.nextInt(60)));
    }
    return parts;
  }

  /** The partitions back to back in one pinned block, as a fetch writes them. */
  private static PinnedBuffer fill(PinnedPool pool, List<byte[]> parts, long[] offsets) {
    long size = 0;
    for (byte[] p : parts) {
      size += (p.length + 63) / 64 * 64;
    }
    PinnedBuffer b = pool.allocate(size);
    long at = 0;
    for (int i = 0; i < parts.size(); i++) {
      offsets[i] = at;
      b.write(at, parts.get(i), 0, parts.get(i).length);
      at += (parts.get(i).length + 63) / 64 * 64;
    }
    return b;
  }

  /** Scribbles on the pool: a block given back too early would show in the table. */
  private static void scribble(PinnedPool pool, long size) {
    try (PinnedBuffer again = pool.allocate(size)) {
      byte[] junk = new byte[(int) size];
      java.util.Arrays.fill(junk, (byte) 0x5A);
      again.write(0, junk, 0, junk.length);
    }
  }

  @Test
  void aClosedBlockWhoseBufferIsReachableIsNotHandedOutAgain() throws InterruptedException {
    List<byte[]> parts = partitions(1);
    PinnedPool pool = device.pinnedPool();
    long[] offsets = new long[parts.size()];
    PinnedBuffer block = fill(pool, parts, offsets);
    ByteBuffer[] slices = new ByteBuffer[parts.size()];
    for (int i = 0; i < parts.size(); i++) {
      slices[i] = block.buffer().slice((int) offsets[i], parts.get(i).length);
    }
    long size = block.size();
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = reader.read(slices)) {
      assertTrue(!table.isReady(), "the work starts late on this device");
      block.close(); // returns at once: the slices are reachable, so the block is not given back
      assertEquals(size, pool.retiredBytes());
      scribble(pool, size); // a new block, not this one
      TestSupport.assertTableMatches(table, parts, null, allocator);
    }
    slices = null;
    long deadline = System.nanoTime() + 20_000_000_000L;
    while ((pool.inUse() != 0 || pool.retiredBytes() != 0) && System.nanoTime() < deadline) {
      System.gc(); // the slices are unreachable now: the cleaner gives the block back
      Thread.sleep(10);
    }
    assertEquals(0, pool.inUse());
    assertEquals(0, pool.retiredBytes());
  }

  /** AUTO copies the block before parsing; DIRECT has the kernel read it in place. */
  @ParameterizedTest
  @EnumSource(value = FunnelReader.Transfer.class, names = {"AUTO", "DIRECT"})
  void closingAPinnedBufferWaitsForAReadByAddress(FunnelReader.Transfer transfer) {
    List<byte[]> parts = partitions(transfer == FunnelReader.Transfer.AUTO ? 2 : 1);
    PinnedPool pool = device.pinnedPool();
    long[] offsets = new long[parts.size()];
    PinnedBuffer block = fill(pool, parts, offsets);
    long[] addresses = new long[parts.size()];
    long[] lengths = new long[parts.size()];
    for (int i = 0; i < parts.size(); i++) {
      addresses[i] = block.address() + offsets[i];
      lengths[i] = parts.get(i).length;
    }
    try (FunnelReader reader = new FunnelReader(device).setTransfer(transfer);
        DeviceTable table = reader.read(addresses, lengths)) {
      if (transfer == FunnelReader.Transfer.DIRECT) {
        assertTrue(!table.isReady(), "the work starts late on this device");
      }
      long size = block.size();
      block.close(); // waits for the work that reads the block; the table stays open
      assertTrue(table.isReady(), "closing the block waited for the read that reads it");
      scribble(pool, size);
      TestSupport.assertTableMatches(table, parts, null, allocator);
    }
    assertEquals(0, pool.inUse());
  }

  @Test
  void aFailedReadDoesNotHoldItsPinnedBuffer() {
    List<byte[]> parts = partitions(3);
    PinnedPool pool = device.pinnedPool();
    long[] offsets = new long[parts.size()];
    PinnedBuffer block = fill(pool, parts, offsets);
    long[] truncated = {parts.get(0).length - 9};
    try (FunnelReader reader = new FunnelReader(device)) {
      assertThrows(MalformedPartitionException.class,
          () -> reader.read(new long[] {block.address() + offsets[0]}, truncated));
    }
    block.close(); // returns: nothing is in flight
    assertEquals(0, pool.inUse());
  }
}
