package dev.funnel;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Reads a reduce task's shuffle partitions (Arrow IPC bytes in host memory) into one {@link
 * DeviceTable}, with one native call for all of them.
 *
 * <p>A partition is Arrow IPC streaming-format bytes: a whole stream (Schema, RecordBatch
 * messages, optional end-of-stream marker), or bare RecordBatch messages when the reader was given
 * the schema. A zero-length partition is an empty shuffle block and contributes no rows.
 *
 * <p>Reads are asynchronous: {@code read} parses and plans on the calling thread, enqueues the
 * copies and the concat, and returns. The partitions' memory must stay valid and unchanged until
 * the table is ready ({@link DeviceTable#waitReady()}) or closed; the table keeps the ByteBuffers
 * it was given reachable until then, but memory passed as raw addresses is the caller's to keep.
 *
 * <p>Thread-safe: concurrent reads are ordered on the reader's stream.
 */
public final class FunnelReader implements AutoCloseable {
  static {
    NativeLibrary.load();
  }

  private final FunnelDevice device;
  private volatile long handle; // 0 once closed

  /** A reader whose partitions carry their schema (whole IPC streams). */
  public FunnelReader(FunnelDevice device) {
    this(device, (byte[]) null);
  }

  /**
   * A reader given the schema once: partitions may be bare RecordBatch messages, and a read of
   * only empty partitions gives an empty table of this schema.
   */
  public FunnelReader(FunnelDevice device, Schema schema) {
    this(device, serialize(Objects.requireNonNull(schema, "schema")));
  }

  private FunnelReader(FunnelDevice device, byte[] schemaIpc) {
    this.device = Objects.requireNonNull(device, "device");
    this.handle = create(device.handle(), schemaIpc);
    Handles.reader(1);
  }

  /** The device this reader reads onto. */
  public FunnelDevice device() {
    return device;
  }

  /**
   * Reads partitions held in direct ByteBuffers, each from its position to its limit, in order.
   *
   * @throws IllegalArgumentException when a buffer is null or not direct
   * @throws InvalidPartitionException when a partition is not valid Arrow IPC, or is Arrow that
   *     funnel does not read; nothing was enqueued and nothing leaked
   */
  public DeviceTable read(ByteBuffer... partitions) {
    return read(0L, partitions);
  }

  /** {@link #read(ByteBuffer...)} on a list. */
  public DeviceTable read(List<ByteBuffer> partitions) {
    return read(0L, partitions.toArray(new ByteBuffer[0]));
  }

  /**
   * {@link #read(ByteBuffer...)} on a caller's stream (0: the reader's own stream), such as one
   * from {@link FunnelDevice#createStream()} or, on cuda, a CUstream handle.
   */
  public DeviceTable read(long stream, ByteBuffer... partitions) {
    Objects.requireNonNull(partitions, "partitions");
    int n = partitions.length;
    long[] positions = new long[n];
    long[] lengths = new long[n];
    ByteBuffer[] held = partitions.clone();
    for (int i = 0; i < n; i++) {
      ByteBuffer b = held[i];
      if (b == null) {
        throw new IllegalArgumentException("partition " + i + " is null");
      }
      if (!b.isDirect()) {
        throw new IllegalArgumentException(
            "partition " + i + " is a heap ByteBuffer: funnel reads direct buffers only");
      }
      positions[i] = b.position();
      lengths[i] = b.remaining();
    }
    long[] addresses = new long[n];
    for (int i = 0; i < n; i++) {
      addresses[i] = MemoryUtil.getByteBufferAddress(held[i]) + positions[i];
    }
    List<PinnedBuffer> blocks = device.pinnedPool().holding(addresses, lengths);
    return holding(
        blocks, () -> new DeviceTable(readBuffers(handle(), held, positions, lengths, stream), held));
  }

  /**
   * Makes the table of a read whose partitions lie in {@code blocks}: each block is held from
   * before the read enqueues until its work has completed, so that closing the block waits.
   */
  private static DeviceTable holding(List<PinnedBuffer> blocks, Supplier<DeviceTable> read) {
    for (PinnedBuffer b : blocks) {
      b.enter();
    }
    DeviceTable table = null;
    try {
      table = read.get();
      table.holding(blocks);
      return table;
    } finally {
      for (PinnedBuffer b : blocks) {
        b.entered(table);
      }
    }
  }

  /**
   * Reads partitions given as host addresses and lengths. The memory must stay valid and unchanged
   * until the returned table is ready or closed; partitions in a {@link PinnedBuffer} are held
   * for you (its close waits for this read).
   */
  public DeviceTable read(long[] addresses, long[] lengths) {
    return read(0L, addresses, lengths);
  }

  /** {@link #read(long[], long[])} on a caller's stream (0: the reader's own). */
  public DeviceTable read(long stream, long[] addresses, long[] lengths) {
    Objects.requireNonNull(addresses, "addresses");
    Objects.requireNonNull(lengths, "lengths");
    if (addresses.length != lengths.length) {
      throw new IllegalArgumentException(
          addresses.length + " addresses but " + lengths.length + " lengths");
    }
    for (int i = 0; i < lengths.length; i++) {
      if (lengths[i] < 0) {
        throw new IllegalArgumentException("partition " + i + " has length " + lengths[i]);
      }
      if (addresses[i] == 0 && lengths[i] > 0) {
        throw new IllegalArgumentException("partition " + i + " has address 0");
      }
    }
    long[] a = addresses.clone();
    long[] l = lengths.clone();
    List<PinnedBuffer> blocks = device.pinnedPool().holding(a, l);
    return holding(blocks, () -> new DeviceTable(readAddresses(handle(), a, l, stream), null));
  }

  /** How a read moves partition bytes to the device (funnel.h's {@code enum funnel_transfer}). */
  public enum Transfer {
    /**
     * Partitions all in the pinned pool: {@link #COPY}, the copies enqueued before parsing so they
     * overlap the host's work. Otherwise by size: {@link #DIRECT} for a few MiB of pinned
     * partitions, {@link #COPY} above.
     */
    AUTO,
    /**
     * Copy to device memory (partitions back to back in pinned memory in one copy), then concat;
     * all pinned: copied before parsing.
     */
    COPY,
    /** The kernel reads partitions in the pinned pool straight from host memory: no copy. */
    DIRECT
  }

  /** Sets how the following reads move partition bytes (default {@link Transfer#AUTO}). */
  public FunnelReader setTransfer(Transfer transfer) {
    setOption(handle(), 1, Objects.requireNonNull(transfer, "transfer").ordinal());
    return this;
  }

  /**
   * Whether the following reads time the concat kernel on the device ({@link
   * ReadStats#kernelNanos()}); off by default, timing events cost a little.
   */
  public FunnelReader setTimeKernel(boolean on) {
    setOption(handle(), 2, on ? 1 : 0);
    return this;
  }

  /**
   * Whether the following reads allocate their tables so that {@link DeviceTable#share()} shares
   * them as they are, without a copy (cuda: a plain {@code cuMemAlloc} per read, which CUDA IPC
   * can share and funnel's stream-ordered pool cannot; cpu: POSIX shared memory). Off by default:
   * the pool's allocations are cheaper, and a table read without it is copied once when shared.
   */
  public FunnelReader setShareable(boolean on) {
    setOption(handle(), 3, on ? 1 : 0);
    return this;
  }

  private long handle() {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException("FunnelReader is closed");
    }
    return h;
  }

  /** Frees the reader. Tables it made stay valid. Idempotent. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      free(handle);
      handle = 0;
      Handles.reader(-1);
    }
  }

  private static byte[] serialize(Schema schema) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      MessageSerializer.serialize(new WriteChannel(Channels.newChannel(out)), schema);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  private static native long create(long device, byte[] schemaIpc);

  private static native void free(long handle);

  private static native void setOption(long handle, int option, long value);

  private static native long readBuffers(
      long handle, ByteBuffer[] buffers, long[] positions, long[] lengths, long stream);

  private static native long readAddresses(
      long handle, long[] addresses, long[] lengths, long stream);
}
