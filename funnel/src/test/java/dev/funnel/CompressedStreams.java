package dev.funnel;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.ArrowWriter;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;

/**
 * Partitions with compressed bodies, written by Arrow Java's own codecs (arrow-compression:
 * LZ4_FRAME through commons-compress, ZSTD through zstd-jni), and the independent answer for
 * them: Arrow Java's reading of the same bytes with those codecs, written back uncompressed so
 * that {@link TestSupport}'s comparisons take it.
 */
final class CompressedStreams {
  private CompressedStreams() {}

  /** Fills a root's vectors with `rows` rows. */
  interface Filler {
    void fill(VectorSchemaRoot root, int rows);
  }

  /** Random values of every type (flat ones as TestSupport, nested as NestedReadTest). */
  static Filler random(Random r, double nullRate) {
    return (root, rows) -> {
      root.clear();
      root.allocateNew();
      for (FieldVector v : root.getFieldVectors()) {
        for (int i = 0; i < rows; i++) {
          setRandom(v, i, r, nullRate);
        }
      }
      root.setRowCount(rows);
    };
  }

  /**
   * Values that compress: five random rows, repeated (validity, offsets and values repeat too),
   * so Arrow Java keeps the compressed frames instead of the raw bytes it writes for random rows.
   */
  static Filler repetitive(Random r, double nullRate, BufferAllocator allocator) {
    return (root, rows) -> {
      try (VectorSchemaRoot five = VectorSchemaRoot.create(root.getSchema(), allocator)) {
        random(r, nullRate).fill(five, 5);
        root.clear();
        root.allocateNew();
        for (int c = 0; c < root.getFieldVectors().size(); c++) {
          FieldVector to = root.getVector(c);
          FieldVector from = five.getVector(c);
          for (int i = 0; i < rows; i++) {
            to.copyFromSafe(i % 5, i, from);
          }
          to.setValueCount(rows);
        }
        root.setRowCount(rows);
      }
    };
  }

  private static void setRandom(FieldVector v, int i, Random r, double nullRate) {
    if (isNested(v.getField())) {
      NestedReadTest.fill(v, i, r, nullRate);
    } else if (v.getField().isNullable() && r.nextDouble() < nullRate) {
      v.setNull(i);
    } else {
      TestSupport.setRandom(v, i, r);
    }
  }

  static boolean isNested(Field f) {
    return !f.getChildren().isEmpty();
  }

  /**
   * Every type funnel reads: TestSupport's flat catalogue, then NestedReadTest's nested columns
   * (list, large_list, fixed_size_list, struct, map, and nested in each other).
   */
  static Schema everyTypeSchema() {
    List<Field> fields = new ArrayList<>(TestSupport.supportedFields());
    for (Field f : NestedReadTest.nestedSchema().getFields()) {
      if (isNested(f)) {
        fields.add(f);
      }
    }
    return new Schema(fields);
  }

  // --------------------------------------------------------------- writing

  /** An IPC stream of `schema` compressed with `codec`, one RecordBatch per entry of batchRows. */
  static byte[] stream(Schema schema, BufferAllocator allocator, CodecType codec, Filler filler,
      int... batchRows) {
    return write(schema, allocator, codec, filler, false, batchRows);
  }

  /** {@link #stream} uncompressed (no BodyCompression), of the same rows. */
  static byte[] plain(Schema schema, BufferAllocator allocator, Filler filler, int... batchRows) {
    return write(schema, allocator, null, filler, false, batchRows);
  }

  /** {@link #stream} as an IPC file (ARROW1, a footer). */
  static byte[] file(Schema schema, BufferAllocator allocator, CodecType codec, Filler filler,
      int... batchRows) {
    return write(schema, allocator, codec, filler, true, batchRows);
  }

  private static byte[] write(Schema schema, BufferAllocator allocator, CodecType codec,
      Filler filler, boolean file, int... batchRows) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowWriter writer = codec == null
          ? new ArrowStreamWriter(root, null, Channels.newChannel(out))
          : file
          ? new ArrowFileWriter(root, null, Channels.newChannel(out), null, IpcOption.DEFAULT,
              CommonsCompressionFactory.INSTANCE, codec)
          : new ArrowStreamWriter(root, null, Channels.newChannel(out), IpcOption.DEFAULT,
              CommonsCompressionFactory.INSTANCE, codec)) {
        writer.start();
        for (int rows : batchRows) {
          filler.fill(root, rows);
          writer.writeBatch();
        }
        writer.end();
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  // ---------------------------------------------------- the independent answer

  /** Arrow Java's reader of a (possibly compressed) stream or file, with Arrow Java's codecs. */
  static ArrowReader reader(byte[] partition, BufferAllocator allocator) {
    if (partition.length >= 6
        && new String(partition, 0, 6, StandardCharsets.US_ASCII).equals("ARROW1")) {
      return new ArrowFileReader(new ByteArrayReadableSeekableByteChannel(partition), allocator,
          CommonsCompressionFactory.INSTANCE);
    }
    return new ArrowStreamReader(new ByteArrayInputStream(partition), allocator,
        CommonsCompressionFactory.INSTANCE);
  }

  /**
   * What Arrow Java reads from `partition` (a whole stream or file), batch by batch, written back
   * as an uncompressed stream; a zero-length partition stays empty.
   */
  static byte[] decoded(byte[] partition, BufferAllocator allocator) {
    if (partition.length == 0) {
      return partition;
    }
    try (ArrowReader in = reader(partition, allocator)) {
      VectorSchemaRoot root = in.getVectorSchemaRoot();
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
        writer.start();
        while (in.loadNextBatch()) {
          writer.writeBatch();
        }
        writer.end();
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static List<byte[]> decoded(List<byte[]> partitions, BufferAllocator allocator) {
    List<byte[]> out = new ArrayList<>();
    for (byte[] p : partitions) {
      out.add(decoded(p, allocator));
    }
    return out;
  }

  // ------------------------------------------------------------------ census

  /**
   * What a partition's RecordBatch messages hold, read from Arrow's flatbuffers and the buffers'
   * 8-byte prefixes: the compressed batches, their buffers by kind (a frame, raw bytes after a -1
   * prefix, an empty buffer as an 8-byte 0), their bytes, the uncompressed bytes they declare,
   * and the uncompressed batches' bodies.
   */
  record Census(
      int compressedBatches,
      int plainBatches,
      long frames,
      long raw,
      long emptyPrefixed,
      long bytesCompressed,
      long bytesDeclared,
      long plainBodyBytes) {
    Census plus(Census o) {
      return new Census(compressedBatches + o.compressedBatches, plainBatches + o.plainBatches,
          frames + o.frames, raw + o.raw, emptyPrefixed + o.emptyPrefixed,
          bytesCompressed + o.bytesCompressed, bytesDeclared + o.bytesDeclared,
          plainBodyBytes + o.plainBodyBytes);
    }

    long buffers() {
      return frames + raw + emptyPrefixed;
    }

    /** Whether a compressed batch declares bytes to decode (one with rows does). */
    boolean decodes() {
      return bytesDeclared > 0;
    }
  }

  static final Census NONE = new Census(0, 0, 0, 0, 0, 0, 0, 0);

  /** The census of one partition (a stream, or bare messages; an IPC file's are not walked). */
  static Census census(byte[] partition) {
    Census c = NONE;
    if (partition.length == 0) {
      return c;
    }
    for (TestSupport.Span s : TestSupport.messages(partition)) {
      if (s.eos() || s.headerType() != MessageHeader.RecordBatch) {
        continue;
      }
      RecordBatch rb =
          (RecordBatch) TestSupport.message(partition, s).header(new RecordBatch());
      if (rb.compression() == null) {
        c = c.plus(new Census(0, 1, 0, 0, 0, 0, 0, s.bodyLength()));
        continue;
      }
      long frames = 0;
      long raw = 0;
      long empty = 0;
      long bytes = 0;
      long declared = 0;
      for (int k = 0; k < rb.buffersLength(); k++) {
        long len = rb.buffers(k).length();
        if (len < 8) {
          continue;
        }
        int at = (int) (s.bodyStart() + rb.buffers(k).offset());
        long prefix = TestSupport.getLong(partition, at);
        bytes += len;
        if (prefix == -1) {
          raw++;
          declared += len - 8;
        } else if (prefix == 0 && len == 8) {
          empty++;
        } else {
          frames++;
          declared += prefix;
        }
      }
      c = c.plus(new Census(1, 0, frames, raw, empty, bytes, declared, 0));
    }
    return c;
  }

  /** The census of several partitions, summed. */
  static Census census(List<byte[]> partitions) {
    Census c = NONE;
    for (byte[] p : partitions) {
      c = c.plus(census(p));
    }
    return c;
  }
}
