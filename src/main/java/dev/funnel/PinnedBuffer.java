package dev.funnel;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * A block of the device's {@link PinnedPool}, as a direct ByteBuffer. Close it to give the block
 * back. A read of partitions that lie in it holds it until the read's work has completed: {@link
 * #close()} waits for such reads (their tables need not be closed), so the device never copies
 * from a block given back and handed out again.
 */
public final class PinnedBuffer implements AutoCloseable {
  private final PinnedPool pool;
  private final long address;
  private final long size;
  private ByteBuffer buffer;
  private int entering; // reads between finding this buffer and their table
  private final List<DeviceTable> readers = new ArrayList<>(); // tables whose work may read it

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

  /** A read found this buffer among its partitions and is about to enqueue. */
  synchronized void enter() {
    entering++;
  }

  /** That read made {@code table}, or failed (null): its work is known from now on. */
  synchronized void entered(DeviceTable table) {
    entering--;
    if (table != null) {
      readers.add(table);
    }
    notifyAll();
  }

  /** The work of {@code table} has completed. */
  synchronized void done(DeviceTable table) {
    readers.remove(table);
  }

  /**
   * Gives the block back to the pool, after waiting for the work of every read that was given it
   * (their tables stay open and valid). Idempotent.
   */
  @Override
  public void close() {
    List<DeviceTable> waitFor;
    synchronized (this) {
      if (buffer == null) {
        return;
      }
      pool.forget(this); // no read finds it from now on
      boolean interrupted = false;
      while (entering > 0) {
        try {
          wait();
        } catch (InterruptedException e) {
          interrupted = true; // the block must not go while a read may use it
        }
      }
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
      waitFor = new ArrayList<>(readers);
    }
    for (DeviceTable t : waitFor) {
      t.awaitWork();
    }
    synchronized (this) {
      if (buffer != null) {
        buffer = null;
        readers.clear();
        pool.free(address, size);
      }
    }
  }
}
