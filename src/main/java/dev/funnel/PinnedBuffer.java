package dev.funnel;

import java.nio.ByteBuffer;

/**
 * A block of the device's {@link PinnedPool}, as a direct ByteBuffer. Close it to give the block
 * back, and only once no read that was given it is in flight (close the tables, or wait for them,
 * first): the device may still be copying from it until then.
 */
public final class PinnedBuffer implements AutoCloseable {
  private final PinnedPool pool;
  private final long address;
  private final long size;
  private ByteBuffer buffer;

  PinnedBuffer(PinnedPool pool, long address, long size, ByteBuffer buffer) {
    this.pool = pool;
    this.address = address;
    this.size = size;
    this.buffer = buffer;
  }

  /** The memory as a direct ByteBuffer (position 0, limit = size). */
  public synchronized ByteBuffer buffer() {
    if (buffer == null) {
      throw new IllegalStateException("PinnedBuffer is closed");
    }
    return buffer;
  }

  /** The host address of the block. */
  public long address() {
    return address;
  }

  /** Bytes in the block. */
  public long size() {
    return size;
  }

  /** Gives the block back to the pool. Idempotent. */
  @Override
  public synchronized void close() {
    if (buffer != null) {
      buffer = null;
      pool.free(address, size);
    }
  }
}
