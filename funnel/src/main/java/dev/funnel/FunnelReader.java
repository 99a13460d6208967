package dev.funnel;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.util.List;
import java.util.Objects;
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
 * copies and the concat, and returns. A read whose headers the device parses ({@link #setParse})
 * enqueues the parse and the concat at once, then waits once inside, on its stream, for the
 * parse's sums, which give the table's shape (and so for what was enqueued on that stream before
 * it), and returns while the concat runs. The partitions' memory must stay valid and unchanged until
 * the table is ready ({@link DeviceTable#waitReady()}) or closed; the table keeps the ByteBuffers
 * it was given reachable until then, but memory passed as raw addresses is the caller's to keep.
 *
 * <p>Thread-safe: concurrent reads are ordered on the reader's stream.
 */
public final class FunnelReader implements AutoCloseable {
  static {
    NativeLibrary.load();
  }

  /** funnel.h's enum funnel_option (SharedConstantsTest checks them against the header). */
  static final int OPTION_TRANSFER = 1;

  static final int OPTION_TIME_KERNEL = 2;
  static final int OPTION_SHAREABLE = 3;
  static final int OPTION_DIRECT_MAX_BYTES = 4;
  static final int OPTION_PARSE = 5;
  static final int OPTION_DECODE = 6;

  /** Linux maps nothing below vm.mmap_min_addr, 64 KiB by default: such an address is a bug. */
  static final long LOWEST_ADDRESS = 1L << 16;

  private final FunnelDevice device;
  private final NativeHandle handle;

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
    this.handle = new NativeHandle(this, Handles.Kind.READER,
        device.call(d -> create(d, schemaIpc)), h -> {
          free(h);
          return true;
        });
  }

  /** The device this reader reads onto. */
  public FunnelDevice device() {
    return device;
  }

  /**
   * Reads partitions held in direct ByteBuffers, each from its position to its limit, in order.
   *
   * @throws IllegalArgumentException when a buffer is null or not direct
   * @throws IllegalStateException when the reader is closed
   * @throws InvalidPartitionException when a partition is not valid Arrow IPC, or is Arrow that
   *     funnel does not read; nothing was enqueued and nothing leaked
   */
  public DeviceTable read(ByteBuffer... partitions) {
    return read((DeviceStream) null, partitions);
  }

  /** {@link #read(ByteBuffer...)} on a list. */
  public DeviceTable read(List<ByteBuffer> partitions) {
    return read((DeviceStream) null, partitions.toArray(new ByteBuffer[0]));
  }

  /**
   * {@link #read(ByteBuffer...)} ordered on {@code stream} (null: the reader's own stream), one of
   * this reader's device.
   */
  public DeviceTable read(DeviceStream stream, ByteBuffer... partitions) {
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
    return onStream(stream, (h, s) -> new DeviceTable(readBuffers(h, held, positions, lengths, s),
        held));
  }

  /**
   * Reads partitions given as host addresses and lengths. The memory must stay valid and unchanged
   * until the returned table is ready or closed (partitions in a {@link PinnedBuffer} are held
   * for you: the block is not given back before the read's work has completed).
   *
   * @throws IllegalArgumentException for a length that is negative, or an address that is
   *     negative, in the lowest 64 KiB (which no process maps), or whose bytes would pass the end
   *     of the address space
   */
  public DeviceTable read(long[] addresses, long[] lengths) {
    return read(null, addresses, lengths);
  }

  /** {@link #read(long[], long[])} ordered on {@code stream} (null: the reader's own). */
  public DeviceTable read(DeviceStream stream, long[] addresses, long[] lengths) {
    Objects.requireNonNull(addresses, "addresses");
    Objects.requireNonNull(lengths, "lengths");
    if (addresses.length != lengths.length) {
      throw new IllegalArgumentException(
          addresses.length + " addresses but " + lengths.length + " lengths");
    }
    long[] a = addresses.clone();
    long[] l = lengths.clone();
    for (int i = 0; i < l.length; i++) {
      if (l[i] < 0) {
        throw new IllegalArgumentException("partition " + i + " has length " + l[i]);
      }
      if (l[i] > 0 && (a[i] < LOWEST_ADDRESS || a[i] + l[i] < 0)) {
        throw new IllegalArgumentException(
            "partition " + i + " has address 0x" + Long.toHexString(a[i]) + " and length " + l[i]
                + ": not host memory");
      }
    }
    return onStream(stream, (h, s) -> new DeviceTable(readAddresses(h, a, l, s), null));
  }

  private interface Read {
    DeviceTable apply(long reader, long stream);
  }

  /** Runs a read with the reader, and the stream when one is given, held for its duration. */
  private DeviceTable onStream(DeviceStream stream, Read read) {
    if (stream == null) {
      return handle.call(h -> read.apply(h, 0L));
    }
    if (stream.device() != device) {
      throw new IllegalArgumentException(
          stream + " belongs to another device than this reader's " + device);
    }
    long s = stream.handle().enter();
    try {
      return handle.call(h -> read.apply(h, s));
    } finally {
      stream.handle().exit();
    }
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
    return option(OPTION_TRANSFER, Objects.requireNonNull(transfer, "transfer").ordinal());
  }

  /**
   * Whether the following reads time the concat kernel on the device ({@link
   * ReadStats#kernelNanos()}); off by default, timing events cost a little.
   */
  public FunnelReader setTimeKernel(boolean on) {
    return option(OPTION_TIME_KERNEL, on ? 1 : 0);
  }

  /**
   * Whether the following reads allocate their tables so that {@link DeviceTable#share()} shares
   * them as they are, without a copy (cuda: a plain {@code cuMemAlloc} per read, which CUDA IPC
   * can share and funnel's stream-ordered pool cannot; cpu: POSIX shared memory). Off by default:
   * the pool's allocations are cheaper, and a table read without it is copied once when shared.
   */
  public FunnelReader setShareable(boolean on) {
    return option(OPTION_SHAREABLE, on ? 1 : 0);
  }

  /**
   * Tuning: {@link Transfer#AUTO} reads pinned partitions in place when they total at most this
   * many bytes (default 8 MiB, or {@code FUNNEL_DIRECT_MAX_BYTES} when the device opened).
   */
  public FunnelReader setDirectMaxBytes(long bytes) {
    if (bytes < 0) {
      throw new IllegalArgumentException("direct max bytes " + bytes + " is negative");
    }
    return option(OPTION_DIRECT_MAX_BYTES, bytes);
  }

  /** Where a read parses the partitions' IPC headers (funnel.h's enum funnel_parse). */
  public enum Parse {
    /**
     * {@link #DEVICE} for many small partitions (at least 128, or 64 of at most 16 KiB on average,
     * or 48 of LZ4 or ZSTD bodies the device decodes, of at most 256 KiB on average, 16 KiB for
     * ZSTD ones), {@link #HOST}
     * otherwise; the default, unless {@code FUNNEL_PARSE=host|device} was in the environment when
     * the device opened.
     */
    AUTO,
    /** The host parses and plans every partition; the read never waits inside. */
    HOST,
    /**
     * The partitions go up as raw bytes and the device parses them: no host work per partition.
     * The read enqueues the parse and the concat at once and waits once inside, for the sums that
     * give the table's shape. The output is allocated from an upper bound of its size (at most
     * about twice the partitions' bytes), in which the table's buffers lie.
     * Partitions that repeat the schema message byte for byte (or have none) and hold at most
     * one record batch stay on the device; any other, and any the device finds malformed, sends
     * the whole read to the host path, which gives the same table or the same exception as
     * {@link #HOST} ({@link ReadStats#deviceLeft()}).
     */
    DEVICE
  }

  /** Sets where the following reads parse the partitions' headers (default {@link Parse#AUTO}). */
  public FunnelReader setParse(Parse parse) {
    return option(OPTION_PARSE, Objects.requireNonNull(parse, "parse").ordinal());
  }

  /** Where a read decodes compressed record batch bodies (funnel.h's enum funnel_decode). */
  public enum Decode {
    /**
     * On a GPU: a read by the device path ({@link Parse}, many small partitions) decodes its LZ4
     * or ZSTD bodies on the device; the host path decodes there, codec by codec, LZ4 or ZSTD values of a
     * read with at least 8 MiB of them when the device looks faster (a warp decodes a buffer, or
     * an LZ4 frame's independent block, so a few long buffers decode faster on the host threads,
     * and many go faster on the device), on the host threads otherwise. On the cpu backend: {@link #HOST}. The
     * default, unless {@code FUNNEL_DECODE=host|device} was in the environment when the device
     * opened.
     */
    AUTO,
    /** The host threads decode every buffer (liblz4, libzstd) into pinned memory, which goes up. */
    HOST,
    /**
     * LZ4 and ZSTD frames go up compressed and the device decodes them: the link carries fewer
     * bytes. On the device path every frame (LZ4 or ZSTD, one codec a read); on
     * the host path those of the values (not the validity bitmaps
     * and offsets, which the read's checks read on the host), after which the read waits once
     * inside, for the decoder, before it launches the concat. A buffer the device cannot decode
     * goes to the host, which names what is wrong with it. The device verifies a frame's
     * checksums when it decodes the frame whole (a ZSTD frame's content checksum always); an LZ4
     * frame of several independent blocks that the
     * host path has decoded a block a warp keeps its content checksum unverified ({@link
     * ReadStats#deviceDecoded()}).
     */
    DEVICE
  }

  /** Sets where the following reads decode compressed bodies (default {@link Decode#AUTO}). */
  public FunnelReader setDecode(Decode decode) {
    return option(OPTION_DECODE, Objects.requireNonNull(decode, "decode").ordinal());
  }

  private FunnelReader option(int option, long value) {
    handle.call(h -> {
      setOption(h, option, value);
      return null;
    });
    return this;
  }

  /**
   * Frees the reader once the reads in progress on other threads have returned; later calls fail
   * with {@link IllegalStateException}. Tables it made stay valid. Idempotent.
   */
  @Override
  public void close() {
    handle.close();
  }

  private static byte[] serialize(Schema schema) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    // not Channels.newChannel's, which an interrupted thread closes (ClosedByInterruptException):
    // a reader made on a thread whose interrupt is pending, as a cancelled Spark task's
    WritableByteChannel channel = new WritableByteChannel() {
      private boolean open = true;

      @Override
      public int write(ByteBuffer src) {
        int n = src.remaining();
        byte[] bytes = new byte[n];
        src.get(bytes);
        out.write(bytes, 0, n);
        return n;
      }

      @Override
      public boolean isOpen() {
        return open;
      }

      @Override
      public void close() {
        open = false;
      }
    };
    try {
      MessageSerializer.serialize(new WriteChannel(channel), schema);
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
