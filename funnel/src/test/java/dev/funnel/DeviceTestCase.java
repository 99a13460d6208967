package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * A test on the device under test, with its own Arrow allocator that must be back to zero at the
 * end: nothing a test made may leak on the Java side.
 */
abstract class DeviceTestCase {
  BufferAllocator allocator;
  FunnelDevice device;

  @BeforeEach
  void openDeviceAndAllocator() {
    allocator = new RootAllocator();
    device = TestSupport.openDevice();
  }

  @AfterEach
  void closeAndCheckNothingLeaked() {
    if (device != null) {
      device.close();
    }
    long leaked = allocator.getAllocatedMemory();
    try {
      assertEquals(0, leaked, () -> "Arrow memory leaked:\n" + allocator.toVerboseString());
    } finally {
      if (leaked == 0) {
        allocator.close();
      }
    }
  }
}
