package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A device opened with the caller's allocator (funnel.h's struct funnel_allocator; here the
 * test allocator of the native test hooks, which counts and can refuse) allocates every read's
 * device memory through it, frees all of it, and a refusal is a DeviceOutOfMemoryException that
 * leaves nothing allocated; on both read paths (host and device parse). cpu backend: the test
 * allocator hands out host memory.
 */
class DeviceAllocatorTest {
  private static final int ALLOCS = 0;
  private static final int FREES = 1;
  private static final int LIVE_BYTES = 2;
  private static final int REFUSED = 3;

  private final List<byte[]> partitions = new ArrayList<>();

  @BeforeEach
  void partitions() {
    Assumptions.assumeTrue(TestSupport.BACKEND.equals("cpu"), "the test allocator is host memory");
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(23);
    try (BufferAllocator allocator = new RootAllocator()) {
      for (int p = 0; p < 12; p++) {
        partitions.add(p == 5 ? new byte[0]
            : TestSupport.randomStream(schema, allocator, random, 0.2, random.nextInt(60)));
      }
    }
  }

  @ParameterizedTest
  @EnumSource(value = FunnelReader.Parse.class, names = {"HOST", "DEVICE"})
  void readsAllocateThroughTheCallersAllocatorAndFreeEverything(FunnelReader.Parse parse) {
    long[] before = Faults.testAllocatorCounts();
    long nativeBefore = Faults.nativeLive()[0];
    long allocs;
    try (FunnelDevice device = FunnelDevice.open("cpu", Faults.testAllocator(0));
        FunnelReader reader = new FunnelReader(device).setParse(parse);
        BufferAllocator allocator = new RootAllocator()) {
      try (DeviceTable table = TestSupport.read(reader, partitions)) {
        table.waitReady();
        assertEquals(parse == FunnelReader.Parse.DEVICE, table.stats().deviceParsed() > 0,
            "the read took the " + parse + " path");
        long[] during = Faults.testAllocatorCounts();
        allocs = during[ALLOCS] - before[ALLOCS];
        assertTrue(allocs >= 1, "allocations through the caller's allocator: " + allocs);
        long callersLive = (during[ALLOCS] - during[FREES]) - (before[ALLOCS] - before[FREES]);
        assertTrue(callersLive >= 1, "the table holds memory of the caller's");
        assertEquals(callersLive, Faults.nativeLive()[0] - nativeBefore,
            "every live device allocation is the caller's");
        assertTrue(during[LIVE_BYTES] - before[LIVE_BYTES] >= table.column(0).dataSize(),
            "the output lies in the caller's memory");
        TestSupport.assertTableMatches(table, partitions, null, allocator);
      }
    }
    long[] after = Faults.testAllocatorCounts();
    assertEquals(after[ALLOCS] - before[ALLOCS], after[FREES] - before[FREES], "all freed");
    assertEquals(before[LIVE_BYTES], after[LIVE_BYTES], "bytes live");
    assertEquals(nativeBefore, Faults.nativeLive()[0]);
  }

  @ParameterizedTest
  @EnumSource(value = FunnelReader.Parse.class, names = {"HOST", "DEVICE"})
  void aRefusalIsDeviceOutOfMemoryAndLeavesNothingAllocated(FunnelReader.Parse parse) {
    long[] first = Faults.testAllocatorCounts();
    long nativeBefore = Faults.nativeLive()[0];
    long perRead;
    try (FunnelDevice device = FunnelDevice.open("cpu", Faults.testAllocator(0));
        FunnelReader reader = new FunnelReader(device).setParse(parse)) {
      try (DeviceTable table = TestSupport.read(reader, partitions)) {
        table.waitReady();
      }
      perRead = Faults.testAllocatorCounts()[ALLOCS] - first[ALLOCS];
      // every allocation of a read refused in turn, then all of them
      for (long k = -1; k <= perRead; k++) {
        if (k == 0) {
          continue;
        }
        long[] before = Faults.testAllocatorCounts();
        Faults.testAllocator(k);
        long refuse = k;
        DeviceOutOfMemoryException e = assertThrows(DeviceOutOfMemoryException.class,
            () -> TestSupport.read(reader, partitions).close(), "allocation " + refuse);
        assertTrue(e.getMessage().contains("the caller's allocator gave no memory"),
            e.getMessage());
        long[] after = Faults.testAllocatorCounts();
        assertEquals(before[REFUSED] + 1, after[REFUSED], "allocation " + k);
        assertEquals(after[ALLOCS] - before[ALLOCS], after[FREES] - before[FREES],
            "allocation " + k + " refused: the read freed what it had");
        assertEquals(nativeBefore, Faults.nativeLive()[0], "allocation " + k);
      }
      Faults.testAllocator(0);
      try (DeviceTable table = TestSupport.read(reader, partitions)) {
        table.waitReady(); // the device goes on once memory is there again
      }
    }
    assertEquals(first[LIVE_BYTES], Faults.testAllocatorCounts()[LIVE_BYTES]);
    assertEquals(nativeBefore, Faults.nativeLive()[0]);
  }

  @Test
  void anAllocatorAddressThatIsNoneIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> FunnelDevice.open("cpu", 3));
  }
}
