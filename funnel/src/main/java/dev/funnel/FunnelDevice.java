package dev.funnel;

/**
 * A backend of funnel on this host: "cuda" (a GPU) or "cpu" (the reference backend; device memory
 * is host memory). Thread-safe.
 *
 * <p>Closing it releases the caller's hold: readers, tables, streams and pinned blocks made from
 * it keep the native device alive until they are closed too, so closing in any order is safe.
 * Calls on a closed device fail with {@link IllegalStateException}.
 */
public final class FunnelDevice implements AutoCloseable {
  static {
    NativeLibrary.load();
  }

  private final NativeHandle handle;
  private final String backend;
  private final PinnedPool pinnedPool = new PinnedPool(this);

  private FunnelDevice(long handle) {
    this.handle = new NativeHandle(this, Handles.Kind.DEVICE, handle, h -> {
      nativeClose(h);
      return true;
    });
    this.backend = this.handle.call(FunnelDevice::nativeBackend);
  }

  /** The device's pinned host memory pool. */
  public PinnedPool pinnedPool() {
    return pinnedPool;
  }

  /**
   * Opens a backend.
   *
   * @param kind "auto" (cuda when a CUDA driver and device are present, else cpu), "cpu", "cuda"
   *     (the device of the calling thread's current CUDA context, else device 0) or "cuda:N" (the
   *     device of ordinal N, counted among those CUDA_VISIBLE_DEVICES leaves visible)
   * @throws NoDeviceException when cuda is asked for on a host without a CUDA driver or device,
   *     or for an ordinal this process does not see (the message says how many it sees)
   * @throws FunnelException {@link FunnelException.Code#INVALID_ARGUMENT} for another kind
   */
  public static FunnelDevice open(String kind) {
    return open(kind, 0);
  }

  /**
   * Opens a backend whose reads allocate their device memory (output, scratch, segment table)
   * through the caller's allocator, not funnel's pool: a plugin's RMM resource, say, so that
   * funnel's memory is the plugin's to account and spill. {@code allocator} is the address of a
   * C {@code struct funnel_allocator} (funnel.h: allocate and deallocate on a stream, and a
   * context) that the plugin's native code keeps valid until every table, export and reader of
   * the device is closed. When it refuses, the read throws {@link DeviceOutOfMemoryException}
   * having freed what it allocated.
   *
   * @param allocator the struct's address; 0 for funnel's own pool ({@link #open(String)})
   */
  public static FunnelDevice open(String kind, long allocator) {
    if (kind == null) {
      throw new IllegalArgumentException("backend kind is null: use auto, cpu, cuda or cuda:N");
    }
    if (allocator != 0 && (allocator & 7) != 0) {
      throw new IllegalArgumentException("allocator 0x" + Long.toHexString(allocator)
          + " is not the address of a struct funnel_allocator (8-byte aligned)");
    }
    return new FunnelDevice(nativeOpen(kind, allocator));
  }

  /** The backend actually opened: "cpu" or "cuda". */
  public String backend() {
    return backend;
  }

  /**
   * Creates a stream of this backend (a worker thread on cpu, a non-blocking CUstream on cuda)
   * for {@link FunnelReader#read(DeviceStream, java.nio.ByteBuffer...)}. Close it when done; it
   * may outlive this device's close.
   */
  public DeviceStream createStream() {
    return handle.call(h -> new DeviceStream(this, nativeStreamCreate(h)));
  }

  /**
   * Lets reads run on a CUstream the caller owns (cudf Java's {@code Cuda.Stream} handle, for
   * example). Closing the returned stream forgets it; funnel never destroys the CUstream, which
   * must stay valid until then.
   *
   * @throws FunnelException on the cpu backend, which has no native streams to wrap
   * @throws IllegalArgumentException when {@code cuStream} is 0
   */
  public DeviceStream wrapStream(long cuStream) {
    if (cuStream == 0) {
      throw new IllegalArgumentException("cuStream is 0: a read without a stream uses the reader's");
    }
    return handle.call(h -> new DeviceStream(this, nativeStreamWrap(h, cuStream)));
  }

  /**
   * Opens a table another process shared ({@link DeviceTable#share()}), from its descriptor, as a
   * read-only table of this process: its columns point into the sharing process's memory, and
   * closing it tells that process it is done. A table shared from another GPU of the host opens
   * in place when this GPU has peer access to that one (its buffers stay there).
   *
   * @throws FunnelException {@link FunnelException.Code#INVALID_ARGUMENT} when the table was
   *     shared from another backend, from a GPU this one has no peer access to (the message
   *     names both), or by this very process; {@link
   *     MalformedPartitionException} for bytes that are not a descriptor; {@link
   *     FunnelException.Code#IN_USE} when the sharing process has withdrawn it
   */
  public DeviceTable importShared(byte[] descriptor) {
    if (descriptor == null) {
      throw new IllegalArgumentException("descriptor is null");
    }
    return handle.call(h -> new DeviceTable(nativeImport(h, descriptor), null));
  }

  /** The native device, alive for the duration of {@code f}. */
  <T> T call(java.util.function.LongFunction<T> f) {
    return handle.call(f);
  }

  /** Releases the caller's hold on the device. Idempotent. */
  @Override
  public void close() {
    handle.close();
  }

  @Override
  public String toString() {
    return "FunnelDevice[" + backend + (handle.isClosed() ? ", closed" : "") + "]";
  }

  private static native long nativeOpen(String kind, long allocator);

  private static native String nativeBackend(long handle);

  private static native void nativeClose(long handle);

  private static native long nativeStreamCreate(long handle);

  private static native long nativeStreamWrap(long handle, long cuStream);

  private static native long nativeImport(long handle, byte[] descriptor);
}
