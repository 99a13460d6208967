package dev.funnel.spark;

import dev.funnel.DeviceStream;
import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelException;
import dev.funnel.FunnelReader;
import dev.funnel.PinnedBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;

/**
 * The reduce side of the funnel shuffle: a reduce task's fetched frames (every map output of its
 * partition) become one {@link DeviceTable} in one {@link FunnelReader#read} call.
 */
public final class ShuffleReads {
  /** The first staging block's size; each next one is twice the last, up to the largest. */
  static final int FIRST_STAGING_BLOCK = 1 << 20;

  static final int LARGEST_STAGING_BLOCK = 64 << 20;

  private ShuffleReads() {}

  /**
   * Reads a reduce task's frames into one table on this executor's device ({@link
   * FunnelExecutor#device()}).
   *
   * <p>The frames are copied, back to back, as they are fetched, into blocks of the device's
   * pinned pool (of direct memory when the pool is full), so that no more than one fetched frame
   * is held on the heap, and read in one call; each frame is one partition of the read, so an
   * error names the frame by its index in {@code frames}. The blocks are given back as soon as
   * the read's work has completed, off the task's thread. In a task, the read is made by the
   * executor's reader of {@code schema}, shared by its tasks, on a stream the task holds until it
   * ends ({@link FunnelExecutor}). The table is the task's: it is closed
   * when the task ends, by a task completion listener, and must not be used after. Without a task
   * (outside Spark) the caller closes the table.
   *
   * @param schema the frames' schema; a task with no frames gets an empty table of it
   * @throws dev.funnel.FunnelException when a frame is not valid Arrow IPC of {@code schema} (the
   *     task fails with funnel's message)
   */
  public static DeviceTable read(Iterator<byte[]> frames, Schema schema) {
    return read(frames, schema, null);
  }

  /**
   * {@link #read(Iterator, Schema)}, recording into {@code times} (when not null) where the
   * task's time went: waiting for frames, staging them, and funnel's read.
   */
  public static DeviceTable read(Iterator<byte[]> frames, Schema schema, ReduceTimes times) {
    FunnelDevice device = FunnelExecutor.device();
    Staging staging = new Staging(device);
    TaskContext task = TaskContext.get();
    FunnelReader own = null; // a reader of this read alone, when none is shared
    DeviceStream stream = null; // the task's, from the executor's idle ones
    DeviceTable table;
    try {
      long t0 = System.nanoTime();
      long fetch = 0;
      long staged = 0;
      long bytes = 0;
      if (times != null) {
        times.startNanos = t0;
      }
      while (frames.hasNext()) {
        byte[] frame = frames.next();
        long t1 = System.nanoTime();
        staging.add(frame);
        long t2 = System.nanoTime();
        fetch += t1 - t0;
        staged += t2 - t1;
        bytes += frame.length;
        t0 = t2;
      }
      long t1 = System.nanoTime();
      fetch += t1 - t0; // the last hasNext
      FunnelReader reader = task != null ? FunnelExecutor.sharedReader(device, schema) : null;
      if (reader == null) {
        reader = own = new FunnelReader(device, schema);
      } else {
        stream = FunnelExecutor.takeStream(device);
      }
      table = reader.read(stream, staging.addresses(), staging.lengths());
      if (times != null) {
        times.fetchNanos = fetch;
        times.stagingNanos = staged;
        times.readNanos = System.nanoTime() - t1;
        times.frames = staging.frames;
        times.bytes = bytes;
      }
    } catch (RuntimeException | Error e) {
      closeAll(e, null, own, staging.blocks());
      if (stream != null) {
        FunnelExecutor.giveBack(stream); // nothing of this read runs on it
      }
      throw e;
    }
    if (task != null) {
      FunnelReader r = own;
      DeviceStream s = stream;
      task.addTaskCompletionListener(
          (TaskCompletionListener) c -> {
            try {
              closeAll(null, table, r, staging.blocks());
            } finally {
              if (s != null) {
                FunnelExecutor.giveBack(s); // the table closed: no work of the task on it
              }
            }
          });
    } else {
      own.close(); // its tables stay valid
      if (!staging.offHeap.isEmpty()) { // no task to free them: once the work is done
        FunnelExecutor.RELEASER.execute(() -> {
          try {
            table.waitReady();
          } catch (IllegalStateException closed) {
            table.close(); // returns once the close in progress has waited for the work
          }
          staging.offHeap.forEach(ArrowBuf::close);
        });
      }
    }
    for (PinnedBuffer block : staging.pinned) {
      FunnelExecutor.RELEASER.execute(() -> close(block)); // waits for the read's work
    }
    return table;
  }

  /**
   * Frames copied back to back into blocks that grow, one (address, length) per frame. Pinned
   * blocks are written through {@link PinnedBuffer#write}, never through a ByteBuffer, so each goes
   * back to the pool as soon as it is closed and no read uses it.
   */
  private static final class Staging {
    final FunnelDevice device;
    final List<PinnedBuffer> pinned = new ArrayList<>(); // closing waits for the reads of them
    final List<ArrowBuf> offHeap = new ArrayList<>(); // to free once the read's work is done
    private long[] addresses = new long[64];
    private long[] lengths = new long[64];
    private int frames;
    private Block block;
    private int nextSize = FIRST_STAGING_BLOCK;

    Staging(FunnelDevice device) {
      this.device = device;
    }

    void add(byte[] frame) {
      if (block == null || block.size - block.used < frame.length) {
        block = allocate(Math.max(nextSize, frame.length));
        nextSize = (int) Math.min(2L * nextSize, LARGEST_STAGING_BLOCK);
      }
      if (frames == addresses.length) {
        addresses = Arrays.copyOf(addresses, 2 * frames);
        lengths = Arrays.copyOf(lengths, 2 * frames);
      }
      block.write(frame);
      addresses[frames] = block.address + block.used - frame.length;
      lengths[frames++] = frame.length;
    }

    /** Every block, each once: closed after the table. */
    List<AutoCloseable> blocks() {
      List<AutoCloseable> all = new ArrayList<>(pinned);
      all.addAll(offHeap);
      return all;
    }

    long[] addresses() {
      return Arrays.copyOf(addresses, frames);
    }

    long[] lengths() {
      return Arrays.copyOf(lengths, frames);
    }

    private Block allocate(int size) {
      try {
        PinnedBuffer b = device.pinnedPool().allocate(size);
        pinned.add(b);
        return new Block(b.address(), size, (at, frame) -> b.write(at, frame, 0, frame.length));
      } catch (FunnelException e) {
        if (e.code() != FunnelException.Code.HOST_OUT_OF_MEMORY) {
          throw e;
        }
        // the pool is full: off-heap memory that funnel stages itself, freed with the table
        ArrowBuf b = FunnelExecutor.offHeap().buffer(size);
        offHeap.add(b);
        return new Block(b.memoryAddress(), size, (at, frame) -> b.setBytes(at, frame));
      }
    }
  }

  /** A staging block: where it lies, how full it is, and how to write into it. */
  private static final class Block {
    interface Writer {
      void write(long at, byte[] frame);
    }

    final long address;
    final long size;
    final Writer writer;
    long used;

    Block(long address, long size, Writer writer) {
      this.address = address;
      this.size = size;
      this.writer = writer;
    }

    void write(byte[] frame) {
      writer.write(used, frame);
      used += frame.length;
    }
  }

  private static void closeAll(
      Throwable failure, AutoCloseable table, AutoCloseable reader, List<AutoCloseable> staging) {
    List<AutoCloseable> all = new ArrayList<>();
    all.add(table); // first: closing it waits for the work that reads the staging blocks
    all.add(reader);
    all.addAll(staging);
    RuntimeException first = null;
    for (AutoCloseable c : all) {
      try {
        if (c != null) {
          c.close();
        }
      } catch (Exception e) {
        if (failure != null) {
          failure.addSuppressed(e);
        } else if (first == null) {
          first = e instanceof RuntimeException ? (RuntimeException) e : new RuntimeException(e);
        } else {
          first.addSuppressed(e);
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }

  private static void close(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // the task's listener closes it again and reports
    }
  }
}
