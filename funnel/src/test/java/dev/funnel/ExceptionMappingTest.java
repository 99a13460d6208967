package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import org.junit.jupiter.api.Test;

/**
 * Every native code becomes the exception a plugin catches for it: device out of memory is a
 * class of its own (spill and retry), a device failure another, bad input a third family. The
 * native side's real out-of-memory read is native/tests' test_oom (cuda).
 */
class ExceptionMappingTest {
  private static FunnelException of(int code) {
    return FunnelException.fromNative(code, 3, 4, 5, "message " + code);
  }

  @Test
  void deviceOutOfMemoryIsItsOwnDeviceException() {
    FunnelException e = of(8); // FUNNEL_ERR_DEVICE_OUT_OF_MEMORY
    assertInstanceOf(DeviceOutOfMemoryException.class, e);
    assertInstanceOf(DeviceException.class, e);
    assertEquals(3, e.partition());
    assertEquals(4, e.column());
    assertEquals(5, e.offset());
  }

  @Test
  void otherDeviceFailuresAreNotOutOfMemory() {
    for (int code : new int[] {9, 11}) { // DEVICE, FATAL
      FunnelException e = of(code);
      assertInstanceOf(DeviceException.class, e);
      assertEquals(DeviceException.class, e.getClass(), "code " + code);
    }
    assertInstanceOf(NoDeviceException.class, of(10));
  }

  @Test
  void badInputIsAnInvalidPartitionException() {
    assertInstanceOf(MalformedPartitionException.class, of(2));
    assertInstanceOf(UnsupportedTypeException.class, of(3));
    assertInstanceOf(SchemaMismatchException.class, of(4));
    for (int code : new int[] {2, 3, 4, 5, 6}) {
      assertInstanceOf(InvalidPartitionException.class, of(code), "code " + code);
    }
  }
}
