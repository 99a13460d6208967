package dev.funnel;

/**
 * A stream reads can be ordered on: one made by {@link FunnelDevice#createStream()} (funnel's
 * own), or a caller's CUstream wrapped by {@link FunnelDevice#wrapStream(long)}. Reads on one
 * stream run in the order they were made; reads on different streams may overlap.
 *
 * <p>Closing it completes the work queued on it (a stream funnel made is then destroyed; a wrapped
 * CUstream is only forgotten). A read in progress on another thread keeps it alive until the read
 * has enqueued its work. It may be closed after its device. Idempotent.
 */
public final class DeviceStream implements AutoCloseable {
  static {
    NativeLibrary.load();
  }

  private final FunnelDevice device;
  private final NativeHandle handle;

  DeviceStream(FunnelDevice device, long id) {
    this.device = device;
    this.handle = new NativeHandle(this, Handles.Kind.STREAM, id, h -> {
      nativeDestroy(h);
      return true;
    });
  }

  /** The device the stream belongs to. */
  public FunnelDevice device() {
    return device;
  }

  NativeHandle handle() {
    return handle;
  }

  @Override
  public void close() {
    handle.close();
  }

  @Override
  public String toString() {
    return "DeviceStream[" + device.backend() + (handle.isClosed() ? ", closed" : "") + "]";
  }

  private static native void nativeDestroy(long id);
}
