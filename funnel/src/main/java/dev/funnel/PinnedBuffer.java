package dev.funnel;

import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;

/**
 * A block of the device's {@link PinnedPool}. Write into it with {@link #write} or through {@link
 * #buffer()}, read partitions that lie in it, close it to give it back.
 *
 * <p>Closing never frees memory the device may still read: a read of partitions that lie in the
 * block holds it (in the native library) until that read's work has completed, and the block
 * holds its device, so it may be closed after the device.
 *
 * <p>Closing never frees memory Java code can still write either. Java cannot revoke a direct
 * ByteBuffer, so once {@link #buffer()} has handed one out, the block goes back to the pool only
 * when that buffer (and every slice or duplicate of it) has become unreachable: a stale buffer
 * then writes into memory no one else has, never into another block. A block written only
 * through {@link #write} goes back at once. A block never closed is given back when it becomes
 * unreachable, and counted as a leak.
 */
public final class PinnedBuffer implements AutoCloseable {
  private static final Cleaner CLEANER = Cleaner.create();

  private final PinnedPool pool;
  private final long address;
  private final long size;
  private final Block block;
  private final Cleaner.Cleanable cleanable;
  private ByteBuffer buffer; // null once closed
  private boolean exposed; // buffer() handed it out

  PinnedBuffer(PinnedPool pool, long device, long address, long size, ByteBuffer buffer) {
    this.pool = pool;
    this.address = address;
    this.size = size;
    this.buffer = buffer;
    this.block = new Block(pool, device, address, size);
    Handles.opened(Handles.Kind.PINNED);
    // the buffer, not this object: slices and duplicates keep the original buffer reachable
    this.cleanable = CLEANER.register(buffer, block);
  }

  /**
   * The memory as a direct ByteBuffer (position 0, limit = size). From now on the block goes back
   * to the pool only once this buffer is unreachable, after {@link #close()}.
   *
   * @throws IllegalStateException when the block is closed
   */
  public synchronized ByteBuffer buffer() {
    open();
    exposed = true;
    return buffer;
  }

  /**
   * Copies {@code src}'s remaining bytes into the block at {@code offset}, without handing out a
   * buffer; {@code src}'s position moves to its limit.
   *
   * @throws IllegalStateException when the block is closed
   * @throws IndexOutOfBoundsException when the bytes do not fit
   */
  public synchronized void write(long offset, ByteBuffer src) {
    open();
    int n = src.remaining();
    if (offset < 0 || offset > size - n) {
      throw new IndexOutOfBoundsException(
          n + " bytes at " + offset + " do not fit in a " + size + "-byte pinned buffer");
    }
    buffer.duplicate().position((int) offset).put(src);
  }

  /** {@link #write(long, ByteBuffer)} of {@code src[from, from + length)}. */
  public void write(long offset, byte[] src, int from, int length) {
    write(offset, ByteBuffer.wrap(src, from, length));
  }

  /** The host address of the block. */
  public long address() {
    return address;
  }

  /** Bytes in the block. */
  public long size() {
    return size;
  }

  /** Whether {@link #close()} was called. */
  public synchronized boolean isClosed() {
    return buffer == null;
  }

  private void open() {
    if (buffer == null) {
      throw new IllegalStateException("PinnedBuffer is closed");
    }
  }

  /**
   * Gives the block back: at once, once no read uses it, unless {@link #buffer()} handed out a
   * ByteBuffer, which defers it until that buffer is unreachable. Idempotent; any thread; also
   * after the device is closed.
   */
  @Override
  public void close() {
    boolean now;
    synchronized (this) {
      if (buffer == null) {
        return;
      }
      buffer = null;
      now = !exposed;
      block.closed();
    }
    if (now) {
      cleanable.clean();
    }
  }

  @Override
  public String toString() {
    return "PinnedBuffer[" + size + " bytes" + (isClosed() ? ", closed" : "") + "]";
  }

  /** The block's native side, freed once: by close, or when its buffer is unreachable. */
  private static final class Block implements Runnable {
    private final PinnedPool pool;
    private final long device;
    private final long address;
    private final long size;
    private boolean closed;

    Block(PinnedPool pool, long device, long address, long size) {
      this.pool = pool;
      this.device = device;
      this.address = address;
      this.size = size;
    }

    synchronized void closed() {
      closed = true;
      pool.retire(size);
    }

    @Override
    public void run() {
      boolean leaked;
      synchronized (this) {
        leaked = !closed;
      }
      // waits for reads of the block still in flight; the block holds the native device
      PinnedPool.nativeFree(device, address, size);
      // only now: an allocation that finds the pool full retries while blocks are retired, and
      // must not see none while this one's bytes are not back yet
      if (!leaked) {
        pool.reclaimed(size);
      }
      Handles.closed(Handles.Kind.PINNED, leaked);
    }
  }
}
