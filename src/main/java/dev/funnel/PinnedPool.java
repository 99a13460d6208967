package dev.funnel;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;

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
  /** The buffers handed out and not closed, by address: a read finds those it reads from. */
  private final ConcurrentSkipListMap<Long, PinnedBuffer> live = new ConcurrentSkipListMap<>();

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
    PinnedBuffer b = new PinnedBuffer(this, address, size, nativeWrap(address, size));
    live.put(address, b);
    return b;
  }

  /**
   * The live buffers that partitions [address, address + length) lie in, each once; a read holds
   * them until its work has completed (see {@link PinnedBuffer#close()}).
   */
  List<PinnedBuffer> holding(long[] addresses, long[] lengths) {
    List<PinnedBuffer> found = new ArrayList<>();
    for (int i = 0; i < addresses.length; i++) {
      if (lengths[i] == 0) {
        continue;
      }
      Map.Entry<Long, PinnedBuffer> e = live.floorEntry(addresses[i]);
      if (e != null && addresses[i] + lengths[i] <= e.getKey() + e.getValue().size()
          && !found.contains(e.getValue())) {
        found.add(e.getValue());
      }
    }
    return found;
  }

  void forget(PinnedBuffer b) {
    live.remove(b.address(), b);
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
