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

  private final NativeHandle handle;
  private final byte[] descriptor;

  SharedTable(long handle) {
    // a share the owner forgot is freed by the cleaner only when no importer holds it
    this.handle = new NativeHandle(this, Handles.Kind.SHARED, handle, h -> close(h, 0));
    this.descriptor = this.handle.call(SharedTable::descriptor);
  }

  /** The descriptor another process imports the table from (a copy). */
  public byte[] descriptor() {
    return descriptor.clone();
  }

  /** Importers holding the table now (importers that died are not counted); 0 once closed. */
  public int importers() {
    try {
      return (int) handle.callLong(SharedTable::importers);
    } catch (IllegalStateException closed) {
      return 0;
    }
  }

  /**
   * Withdraws the table and waits up to {@code timeout} (null: without limit) for its importers to
   * close it, then frees it. Returns false when importers still hold it: it stays withdrawn, and
   * is to be closed again. True when it is closed (also when it already was).
   */
  public boolean close(Duration timeout) {
    long ms = timeout == null ? -1 : Math.max(0, timeout.toMillis());
    return handle.close(h -> close(h, ms));
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
