package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * FunnelDevice.open's kinds: "cuda:N" opens the device of ordinal N, an ordinal this process does
 * not see is a NoDeviceException saying how many it sees, anything else is INVALID_ARGUMENT. On a
 * host without a GPU every cuda kind is a NoDeviceException naming the missing driver or device.
 */
class DeviceKindTest {
  private static boolean cudaOpens() {
    try (FunnelDevice d = FunnelDevice.open("cuda")) {
      return true;
    } catch (NoDeviceException e) {
      return false;
    }
  }

  @Test
  void malformedKindsAreInvalidArguments() {
    for (String kind : new String[] {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda: 1",
        "cuda:99999999999", "cpu:0", "CUDA", ""}) {
      FunnelException e = assertThrows(FunnelException.class, () -> FunnelDevice.open(kind).close(),
          kind);
      assertEquals(FunnelException.Code.INVALID_ARGUMENT, e.code(), kind);
      assertTrue(e.getMessage().contains("'" + kind + "'") && e.getMessage().contains("cuda:N"),
          e.getMessage());
    }
  }

  @Test
  void anOrdinalThisProcessDoesNotSeeIsNoDevice() {
    NoDeviceException e = assertThrows(NoDeviceException.class,
        () -> FunnelDevice.open("cuda:4096").close());
    if (cudaOpens()) {
      assertTrue(e.getMessage().contains("no CUDA device 4096"), e.getMessage());
    } else {
      assertTrue(e.getMessage().contains("no CUDA driver") || e.getMessage().contains("no CUDA "
          + "device") || e.getMessage().contains("no cuda backend"), e.getMessage());
    }
  }

  @Test
  void cudaZeroIsTheFirstDevice() {
    if (!cudaOpens()) {
      assertThrows(NoDeviceException.class, () -> FunnelDevice.open("cuda:0").close());
      return;
    }
    try (FunnelDevice d = FunnelDevice.open("cuda:0")) {
      assertEquals("cuda", d.backend());
    }
  }
}
