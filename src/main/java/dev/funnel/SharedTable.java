package dev.funnel;

import java.time.Duration;

/**
 * A {@link DeviceTable} shared with other processes on the same host and device: a copy of its
 * buffers in memory they can open (CUDA IPC on cuda, POSIX shared memory on the cpu backend), and
 * a self-describing {@link #descriptor()} that another process passes to {@link
 * FunnelDevice#importShared(byte[])}. Made by {@link DeviceTable#share()}.
 *
 * <p>The protocol keeps the memory alive while importers use it: each importer holds a slot in a
 * control block from its import until it closes its table; {@link #close()} first withdraws the
 * table (later imports fail with {@link FunnelException.Code#IN_USE}), then waits until no
 * importer holds it, and only then frees the memory. An importer that dies without closing is
 * noticed (its process is gone) and no longer counted. The table this was shared from may be
 * closed at once: the copy is the shared table's own.
 */
public final class SharedTable implements AutoCloseable {
  static {
    NativeLibrary.load();
  }

  private long handle; // 0 once closed
  private final byte[] descriptor;

  SharedTable(long handle) {
    this.handle = handle;
    this.descriptor = descriptor(handle);
  }

  /** The descriptor another process imports the table from (a copy). */
  public byte[] descriptor() {
    return descriptor.clone();
  }

  /** Importers holding the table now (importers that died are not counted). */
  public synchronized int importers() {
    return handle == 0 ? 0 : importers(handle);
  }

  /**
   * Withdraws the table and waits up to {@code timeout} for its importers to close it, then frees
   * it. Returns false when importers still hold it: it stays withdrawn, and is to be closed again.
   * True when it is closed (also when it already was).
   */
  public synchronized boolean close(Duration timeout) {
    if (handle == 0) {
      return true;
    }
    if (!close(handle, timeout == null ? -1 : Math.max(0, timeout.toMillis()))) {
      return false;
    }
    handle = 0;
    return true;
  }

  /** Withdraws the table, waits without limit until no importer holds it, then frees it. */
  @Override
  public void close() {
    close(null);
  }

  @Override
  public String toString() {
    return "SharedTable[" + descriptor.length + "-byte descriptor, " + importers() + " importers]";
  }

  private static native byte[] descriptor(long handle);

  private static native int importers(long handle);

  private static native boolean close(long handle, long timeoutMs);
}
