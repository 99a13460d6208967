package dev.funnel;

import java.nio.ByteBuffer;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicLong;

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
  /** Bytes of closed blocks whose ByteBuffer may still be reachable (see PinnedBuffer). */
  private final AtomicLong retired = new AtomicLong();

  PinnedPool(FunnelDevice device) {
    this.device = device;
  }

  /**
   * Allocates {@code size} bytes (at most {@link Integer#MAX_VALUE}, a ByteBuffer's limit). The
   * block holds the device: it stays usable, and is to be closed, also after the device is
   * closed.
   *
   * <p>When the pool is full but holds closed blocks whose {@link PinnedBuffer#buffer()} may
   * still be reachable, this asks the garbage collector for them and retries for up to a second
   * (five while blocks keep coming back), as the JDK does for direct memory.
   *
   * @throws FunnelException with code HOST_OUT_OF_MEMORY when the pool cannot hold it
   */
  public PinnedBuffer allocate(long size) {
    if (size < 0 || size > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("pinned buffer size " + size + " out of [0, 2^31)");
    }
    return device.call(dev -> {
      long address;
      try {
        address = nativeAlloc(dev, size);
      } catch (FunnelException e) {
        if (e.code() != FunnelException.Code.HOST_OUT_OF_MEMORY) {
          throw e;
        }
        address = allocateAfterCollecting(dev, size, e);
      }
      return new PinnedBuffer(this, dev, address, size, nativeWrap(address, size));
    });
  }

  /** An allocation's address, or empty when the pool has no room for it. */
  private static OptionalLong tryAlloc(long dev, long size) {
    try {
      return OptionalLong.of(nativeAlloc(dev, size));
    } catch (FunnelException e) {
      if (e.code() != FunnelException.Code.HOST_OUT_OF_MEMORY) {
        throw e;
      }
      return OptionalLong.empty();
    }
  }

  /**
   * Retries an allocation while the cleaner gives back blocks the collector found unreachable: for
   * up to a second, and on for up to five while blocks keep coming back (on a loaded host the
   * cleaner's thread may take that long to run); then once more before it gives up, as blocks may
   * have come back since the last try: the cleaner can give back every retired block between a
   * failed allocation and the look at what is retired (a CI run of PinnedPoolTest failed so).
   */
  private long allocateAfterCollecting(long dev, long size, FunnelException first) {
    long sleepMs = 1;
    long start = System.nanoTime();
    long progress = start; // when a block last came back
    long last = retired.get();
    while (true) {
      long now = System.nanoTime();
      long before = retired.get();
      if (before < last) {
        progress = now;
      }
      last = before;
      if (before == 0 || now - start > 5_000_000_000L || now - progress > 1_000_000_000L) {
        break;
      }
      System.gc();
      try {
        Thread.sleep(sleepMs);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
      sleepMs = Math.min(2 * sleepMs, 256);
      OptionalLong address = tryAlloc(dev, size);
      if (address.isPresent()) {
        return address.getAsLong();
      }
    }
    return tryAlloc(dev, size).orElseThrow(() -> first);
  }

  void retire(long size) {
    retired.addAndGet(size);
  }

  void reclaimed(long size) {
    retired.addAndGet(-size);
  }

  /**
   * Bytes of the pool in use: by open blocks, by closed blocks whose buffer is still reachable,
   * and by reads staging pageable partitions.
   */
  public long inUse() {
    return device.call(PinnedPool::nativeInUse);
  }

  /** Bytes of closed blocks that wait for their ByteBuffer to become unreachable. */
  public long retiredBytes() {
    return retired.get();
  }

  private static native long nativeAlloc(long device, long size);

  static native void nativeFree(long device, long address, long size);

  private static native long nativeInUse(long device);

  private static native ByteBuffer nativeWrap(long address, long size);
}
