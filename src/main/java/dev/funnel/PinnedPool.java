package dev.funnel;

import java.nio.ByteBuffer;

/**
 * The device's pinned (page-locked) host memory pool, allocated once on first use and reused.
 * A shuffle fetch can write a partition straight into a {@link PinnedBuffer}, and reads copy it to
 * the device without staging. Thread-safe.
 */
public final class PinnedPool {
  static {
    NativeLibrary.load();
  }

  private final FunnelDevice device;

  PinnedPool(FunnelDevice device) {
    this.device = device;
  }

  /**
   * Allocates {@code size} bytes (at most {@link Integer#MAX_VALUE}, a ByteBuffer's limit).
   *
   * @throws FunnelException with code HOST_OUT_OF_MEMORY when the pool cannot hold it
   */
  public PinnedBuffer allocate(long size) {
    if (size < 0 || size > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("pinned buffer size " + size + " out of [0, 2^31)");
    }
    long address = nativeAlloc(device.handle(), size);
    return new PinnedBuffer(this, address, size, nativeWrap(address, size));
  }

  /** Bytes of the pool in use, by callers and by reads staging pageable partitions. */
  public long inUse() {
    return nativeInUse(device.handle());
  }

  void free(long address, long size) {
    nativeFree(device.handle(), address, size);
  }

  private static native long nativeAlloc(long device, long size);

  private static native void nativeFree(long device, long address, long size);

  private static native long nativeInUse(long device);

  private static native ByteBuffer nativeWrap(long address, long size);
}
