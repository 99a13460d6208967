package dev.funnel.spark;

import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelException;
import dev.funnel.FunnelReader;
import dev.funnel.PinnedBuffer;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;

/**
 * The reduce side of the funnel shuffle: a reduce task's fetched frames (every map output of its
 * partition) become one {@link DeviceTable} in one {@link FunnelReader#read} call.
 */
public final class ShuffleReads {
  /** Frames are staged in blocks of at most this many bytes (a ByteBuffer holds < 2 GiB). */
  static final int MAX_STAGING_BLOCK = 1 << 30;

  private ShuffleReads() {}

  /**
   * Reads a reduce task's frames into one table on this executor's device ({@link
   * FunnelExecutor#device()}).
   *
   * <p>The frames are copied, back to back, into the device's pinned pool (into direct memory
   * when the pool is full) and read in one call; each frame is one partition of the read, so an
   * error names the frame by its index in {@code frames}. The staging memory is given back as
   * soon as the read's work has completed, off the task's thread. The table is the task's: it is
   * closed when the task ends, with a task completion listener, and must not be used after.
   * Without a task (outside Spark) the caller closes the table, and the staging memory goes when
   * the read completes as in a task.
   *
   * @param schema the frames' schema; a task with no frames gets an empty table of it
   * @throws dev.funnel.FunnelException when a frame is not valid Arrow IPC of {@code schema} (the
   *     task fails with funnel's message)
   */
  public static DeviceTable read(Iterator<byte[]> frames, Schema schema) {
    List<byte[]> all = new ArrayList<>();
    while (frames.hasNext()) {
      all.add(frames.next());
    }
    FunnelDevice device = FunnelExecutor.device();
    List<AutoCloseable> staging = new ArrayList<>();
    FunnelReader reader = null;
    DeviceTable table = null;
    try {
      ByteBuffer[] partitions = stage(device, all, staging);
      all = null; // the fetched frames can go: the read uses the staged copy
      reader = new FunnelReader(device, schema);
      table = reader.read(partitions);
    } catch (RuntimeException | Error e) {
      closeAll(e, reader, staging);
      throw e;
    }
    TaskContext task = TaskContext.get();
    if (task != null) {
      DeviceTable t = table;
      FunnelReader r = reader;
      task.addTaskCompletionListener((TaskCompletionListener) c -> closeAll(null, t, r, staging));
    } else {
      reader.close(); // its tables stay valid
    }
    for (AutoCloseable block : staging) {
      FunnelExecutor.RELEASER.execute(() -> close(block)); // waits for the read's work
    }
    return table;
  }

  /**
   * Copies the frames back to back into staging blocks; returns one ByteBuffer per frame. Pinned
   * blocks go into {@code staging}; direct ByteBuffers are kept by the table until its read is done.
   */
  private static ByteBuffer[] stage(
      FunnelDevice device, List<byte[]> frames, List<AutoCloseable> staging) {
    ByteBuffer[] out = new ByteBuffer[frames.size()];
    int f = 0;
    while (f < frames.size()) {
      long size = 0;
      int end = f;
      while (end < frames.size() && size + frames.get(end).length <= MAX_STAGING_BLOCK) {
        size += frames.get(end++).length;
      }
      if (end == f) { // a frame of 1 GiB or more: a block of its own
        size = frames.get(end++).length;
      }
      ByteBuffer block = allocate(device, size, staging);
      for (; f < end; f++) {
        byte[] frame = frames.get(f);
        int at = block.position();
        block.put(frame);
        out[f] = block.duplicate().position(at).limit(at + frame.length).slice();
      }
    }
    return out;
  }

  private static ByteBuffer allocate(FunnelDevice device, long size, List<AutoCloseable> staging) {
    try {
      PinnedBuffer pinned = device.pinnedPool().allocate(size);
      staging.add(pinned);
      return pinned.buffer().duplicate();
    } catch (FunnelException e) {
      if (e.code() != FunnelException.Code.HOST_OUT_OF_MEMORY) {
        throw e;
      }
      return ByteBuffer.allocateDirect((int) size); // the pool is full: funnel stages it itself
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

  private static void closeAll(Throwable failure, FunnelReader reader, List<AutoCloseable> staging) {
    closeAll(failure, null, reader, staging);
  }

  private static void close(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // the task's listener closes it again and reports
    }
  }
}
