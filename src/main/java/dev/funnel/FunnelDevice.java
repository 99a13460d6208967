package dev.funnel;

/**
 * A backend of funnel on this host: "cuda" (a GPU) or "cpu" (the reference backend; device memory
 * is host memory). Thread-safe. Close it after every reader and table made from it.
 */
public final class FunnelDevice implements AutoCloseable {
  static {
    NativeLibrary.load();
  }

  private volatile long handle; // 0 once closed
  private final String backend;
  private final PinnedPool pinnedPool = new PinnedPool(this);

  private FunnelDevice(long handle) {
    this.handle = handle;
    Handles.device(1);
    this.backend = nativeBackend(handle);
  }

  /** The device's pinned host memory pool. */
  public PinnedPool pinnedPool() {
    return pinnedPool;
  }

  /**
   * Opens a backend.
   *
   * @param kind "auto" (cuda when a CUDA driver and device are present, else cpu), "cpu" or "cuda"
   * @throws NoDeviceException when "cuda" is asked for on a host without a CUDA driver or device
   */
  public static FunnelDevice open(String kind) {
    if (kind == null) {
      throw new IllegalArgumentException("backend kind is null: use auto, cpu or cuda");
    }
    return new FunnelDevice(nativeOpen(kind));
  }

  /** The backend actually opened: "cpu" or "cuda". */
  public String backend() {
    return backend;
  }

  /**
   * Creates a stream of this backend that the caller owns (a CUstream handle on cuda). Pass it to
   * {@link FunnelReader#read(long, java.nio.ByteBuffer...)}; destroy it with {@link
   * #destroyStream(long)}.
   */
  public long createStream() {
    return nativeStreamCreate(handle());
  }

  /** Destroys a stream from {@link #createStream()}, completing the work queued on it first. */
  public void destroyStream(long stream) {
    nativeStreamDestroy(handle(), stream);
  }

  /**
   * Opens a table another process shared ({@link DeviceTable#share()}), from its descriptor, as a
   * read-only table of this process: its columns point into the sharing process's memory, and
   * closing it tells that process it is done.
   *
   * @throws FunnelException {@link FunnelException.Code#INVALID_ARGUMENT} when the table was
   *     shared from another backend or device, or by this very process; {@link
   *     MalformedPartitionException} for bytes that are not a descriptor; {@link
   *     FunnelException.Code#IN_USE} when the sharing process has withdrawn it
   */
  public DeviceTable importShared(byte[] descriptor) {
    if (descriptor == null) {
      throw new IllegalArgumentException("descriptor is null");
    }
    return new DeviceTable(nativeImport(handle(), descriptor), null);
  }

  long handle() {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException("FunnelDevice is closed");
    }
    return h;
  }

  @Override
  public synchronized void close() {
    if (handle != 0) {
      nativeClose(handle);
      handle = 0;
      Handles.device(-1);
    }
  }

  @Override
  public String toString() {
    return "FunnelDevice[" + backend + "]";
  }

  private static native long nativeOpen(String kind);

  private static native String nativeBackend(long handle);

  private static native void nativeClose(long handle);

  private static native long nativeStreamCreate(long handle);

  private static native void nativeStreamDestroy(long handle, long stream);

  private static native long nativeImport(long handle, byte[] descriptor);
}
