package dev.funnel.spark;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import org.apache.spark.serializer.DeserializationStream;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;
import scala.reflect.ClassTag;

/**
 * The funnel shuffle's Spark {@link Serializer}: records are (reduce partition, frame) pairs, an
 * {@code Integer} key and a {@code byte[]} value, written as raw bytes with no Java or Kryo
 * serialization: {@code [int32 partition][int32 length][length bytes]}, big-endian.
 *
 * <p>Records are self-contained, so Spark may move serialized records around (its serialized
 * sort shuffle, above {@code spark.shuffle.sort.bypassMergeThreshold} partitions). A block that
 * ends inside a record is an {@link IOException} naming where, never a silently shorter block.
 */
public final class FrameSerializer extends Serializer implements Serializable {
  private static final long serialVersionUID = 1L;

  @Override
  public SerializerInstance newInstance() {
    return new Instance();
  }

  @Override
  public boolean supportsRelocationOfSerializedObjects() {
    return true;
  }

  private static final class Instance extends SerializerInstance {
    @Override
    public <T> ByteBuffer serialize(T t, ClassTag<T> tag) {
      throw new UnsupportedOperationException("funnel frames are written as shuffle streams only");
    }

    @Override
    public <T> T deserialize(ByteBuffer bytes, ClassTag<T> tag) {
      throw new UnsupportedOperationException("funnel frames are read as shuffle streams only");
    }

    @Override
    public <T> T deserialize(ByteBuffer bytes, ClassLoader loader, ClassTag<T> tag) {
      return deserialize(bytes, tag);
    }

    @Override
    public SerializationStream serializeStream(OutputStream s) {
      return new FrameOutput(s);
    }

    @Override
    public DeserializationStream deserializeStream(InputStream s) {
      return new FrameInput(s);
    }
  }

  private static final class FrameOutput extends SerializationStream {
    private final DataOutputStream out;

    FrameOutput(OutputStream s) {
      this.out = new DataOutputStream(s);
    }

    @Override
    public <T> SerializationStream writeKey(T key, ClassTag<T> tag) {
      if (!(key instanceof Integer)) {
        throw new IllegalArgumentException(
            "funnel shuffle key must be an Integer reduce partition, not " + describe(key));
      }
      try {
        out.writeInt((Integer) key);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return this;
    }

    @Override
    public <T> SerializationStream writeValue(T value, ClassTag<T> tag) {
      if (!(value instanceof byte[])) {
        throw new IllegalArgumentException(
            "funnel shuffle value must be a byte[] frame, not " + describe(value));
      }
      byte[] frame = (byte[]) value;
      try {
        out.writeInt(frame.length);
        out.write(frame);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return this;
    }

    @Override
    public <T> SerializationStream writeObject(T t, ClassTag<T> tag) {
      throw new UnsupportedOperationException(
          "funnel shuffle streams hold (Integer, byte[]) pairs: use writeKey and writeValue");
    }

    @Override
    public void flush() {
      try {
        out.flush();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    @Override
    public void close() {
      try {
        out.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /**
   * The end of a block, where Spark's key-value iterator stops reading: without a stack trace,
   * whose filling took about 3 us a block in a shallow test's stack, more under a task's (a
   * reduce task of the Spark regime reads a thousand blocks).
   */
  private static final class EndOfBlock extends EOFException {
    private static final long serialVersionUID = 1L;

    @Override
    public synchronized Throwable fillInStackTrace() {
      return this;
    }
  }

  private static final class FrameInput extends DeserializationStream {
    private final DataInputStream in;
    private long offset; // bytes of the block read so far

    FrameInput(InputStream s) {
      this.in = new DataInputStream(new BufferedInputStream(s, bufferSize(s)));
    }

    /**
     * A buffer the size of the block when the stream says how much it holds (a local shuffle
     * block does), at most 64 KiB, else 8 KiB (as Spark's own row serializer): a reduce task of
     * the Spark regime reads a thousand blocks of about a kilobyte, and a 64 KiB buffer each, made
     * and zeroed, took 6 us a block. A frame larger than the buffer is read past it.
     */
    private static int bufferSize(InputStream s) {
      int available;
      try {
        available = s.available();
      } catch (IOException e) {
        available = 0; // the first read says what is wrong
      }
      return available > 0 ? Math.min(Math.max(available, 64), 64 << 10) : 8 << 10;
    }

    /** The next record's key; {@link EOFException} only where the block ends between records. */
    @Override
    @SuppressWarnings("unchecked")
    public <T> T readKey(ClassTag<T> tag) {
      try {
        int first = in.read();
        if (first < 0) {
          throw new EndOfBlock(); // Spark's iterators stop here
        }
        int key = (first << 24) | readBytes(3, "partition");
        offset += 4;
        return (T) Integer.valueOf(key);
      } catch (IOException e) {
        throw sneaky(e);
      }
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> T readValue(ClassTag<T> tag) {
      try {
        int length = readBytes(4, "length");
        if (length < 0) {
          throw new IOException(
              "funnel shuffle block corrupt: frame length " + length + " at byte " + offset);
        }
        offset += 4;
        byte[] frame = new byte[length];
        int n = in.readNBytes(frame, 0, length);
        if (n < length) {
          throw new IOException(
              "funnel shuffle block truncated: frame at byte " + offset + " has " + n + " of its "
                  + length + " bytes");
        }
        offset += length;
        return (T) frame;
      } catch (IOException e) {
        throw sneaky(e);
      }
    }

    /** The next {@code n} bytes (n <= 4) as a big-endian int; the block may not end among them. */
    private int readBytes(int n, String what) throws IOException {
      int v = 0;
      for (int i = 0; i < n; i++) {
        int b = in.read();
        if (b < 0) {
          throw new IOException(
              "funnel shuffle block truncated: it ends inside the " + what + " of the record at"
                  + " byte " + offset);
        }
        v = (v << 8) | b;
      }
      return v;
    }

    @Override
    public <T> T readObject(ClassTag<T> tag) {
      throw new UnsupportedOperationException(
          "funnel shuffle streams hold (Integer, byte[]) pairs: use readKey and readValue");
    }

    @Override
    public void close() {
      try {
        in.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  private static String describe(Object o) {
    return o == null ? "null" : o.getClass().getName();
  }

  /** Throws a checked IOException unchecked, as Scala callers (which catch EOFException) expect. */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }
}
