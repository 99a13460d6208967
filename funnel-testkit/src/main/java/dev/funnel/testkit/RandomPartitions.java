package dev.funnel.testkit;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.DateMilliVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.LargeVarBinaryVector;
import org.apache.arrow.vector.LargeVarCharVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.UInt1Vector;
import org.apache.arrow.vector.UInt2Vector;
import org.apache.arrow.vector.UInt4Vector;
import org.apache.arrow.vector.UInt8Vector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Random shuffle partitions for a schema, written by Arrow Java as IPC streams: what a plugin's
 * unit test reads through funnel. Each partition is, at random, an empty shuffle block (zero
 * bytes), a stream with no batch, or a stream of one or more batches (some of zero rows), with
 * nullable columns null at {@link #nullRate}. Seeded: the same builder gives the same bytes.
 *
 * <pre>{@code
 * List<ByteBuffer> parts = RandomPartitions.of(schema).partitions(50).seed(7).buffers();
 * try (DeviceTable table = reader.read(parts)) {
 *   TableAssert.assertTableEquals(parts, table);
 * }
 * }</pre>
 *
 * Types: the ones funnel reads (signed and unsigned ints, floats, bool, date, timestamp,
 * decimal128, utf8, binary, their large forms, fixed_size_binary). Arrow Java writes the bytes,
 * so the JVM needs {@code --add-opens=java.base/java.nio=ALL-UNNAMED}.
 */
public final class RandomPartitions {
  private final Schema schema;
  private long seed = 1;
  private int partitions = 20;
  private int maxBatches = 3;
  private int maxRowsPerBatch = 100;
  private double nullRate = 0.1;
  private double emptyRate = 0.1;

  private RandomPartitions(Schema schema) {
    this.schema = Objects.requireNonNull(schema, "schema");
  }

  /** Partitions of {@code schema}; the defaults: 20 partitions, up to 3 batches of 100 rows. */
  public static RandomPartitions of(Schema schema) {
    return new RandomPartitions(schema);
  }

  public RandomPartitions seed(long seed) {
    this.seed = seed;
    return this;
  }

  public RandomPartitions partitions(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("partitions(" + n + "): negative");
    }
    this.partitions = n;
    return this;
  }

  /** At most this many RecordBatches a partition (at least 1). */
  public RandomPartitions maxBatches(int n) {
    if (n < 1) {
      throw new IllegalArgumentException("maxBatches(" + n + "): at least 1");
    }
    this.maxBatches = n;
    return this;
  }

  /** At most this many rows a batch (0 or more). */
  public RandomPartitions maxRowsPerBatch(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("maxRowsPerBatch(" + n + "): negative");
    }
    this.maxRowsPerBatch = n;
    return this;
  }

  /** How often a value of a nullable column is null, 0 to 1. */
  public RandomPartitions nullRate(double rate) {
    if (!(rate >= 0 && rate <= 1)) {
      throw new IllegalArgumentException("nullRate(" + rate + "): not in [0, 1]");
    }
    this.nullRate = rate;
    return this;
  }

  /** How often a partition is empty (zero bytes, or a stream with no batch), 0 to 1. */
  public RandomPartitions emptyRate(double rate) {
    if (!(rate >= 0 && rate <= 1)) {
      throw new IllegalArgumentException("emptyRate(" + rate + "): not in [0, 1]");
    }
    this.emptyRate = rate;
    return this;
  }

  /** The partitions' bytes. */
  public List<byte[]> bytes() {
    Random random = new Random(seed);
    List<byte[]> out = new ArrayList<>(partitions);
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      for (int p = 0; p < partitions; p++) {
        if (random.nextDouble() < emptyRate) {
          out.add(random.nextBoolean() ? new byte[0] : stream(root, random, new int[0]));
          continue;
        }
        int[] batches = new int[1 + random.nextInt(maxBatches)];
        for (int b = 0; b < batches.length; b++) {
          batches[b] = random.nextInt(10) == 0 ? 0 : random.nextInt(maxRowsPerBatch + 1);
        }
        out.add(stream(root, random, batches));
      }
    }
    return out;
  }

  /** The partitions in direct ByteBuffers, as {@code FunnelReader.read} takes them. */
  public List<ByteBuffer> buffers() {
    List<ByteBuffer> out = new ArrayList<>(partitions);
    for (byte[] b : bytes()) {
      out.add(ByteBuffer.allocateDirect(b.length).put(b).flip());
    }
    return out;
  }

  private byte[] stream(VectorSchemaRoot root, Random random, int[] batches) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
      writer.start();
      for (int rows : batches) {
        fill(root, rows, random);
        writer.writeBatch();
      }
      writer.end();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  private void fill(VectorSchemaRoot root, int rows, Random random) {
    root.clear();
    root.allocateNew();
    for (FieldVector v : root.getFieldVectors()) {
      boolean nullable = v.getField().isNullable();
      for (int i = 0; i < rows; i++) {
        if (nullable && random.nextDouble() < nullRate) {
          v.setNull(i);
        } else {
          set(v, i, random);
        }
      }
      v.setValueCount(rows);
    }
    root.setRowCount(rows);
  }

  private static final String[] TEXT = {"a", "b", "z", "0", " ", "é", "ß", "中", "😀", "\n"};

  private static void set(FieldVector v, int i, Random r) {
    if (v instanceof TinyIntVector x) {
      x.setSafe(i, (byte) r.nextInt());
    } else if (v instanceof SmallIntVector x) {
      x.setSafe(i, (short) r.nextInt());
    } else if (v instanceof IntVector x) {
      x.setSafe(i, r.nextInt());
    } else if (v instanceof BigIntVector x) {
      x.setSafe(i, r.nextLong());
    } else if (v instanceof UInt1Vector x) {
      x.setSafe(i, r.nextInt(256));
    } else if (v instanceof UInt2Vector x) {
      x.setSafe(i, r.nextInt(65536));
    } else if (v instanceof UInt4Vector x) {
      x.setSafe(i, r.nextInt());
    } else if (v instanceof UInt8Vector x) {
      x.setSafe(i, r.nextLong());
    } else if (v instanceof Float4Vector x) {
      x.setSafe(i, (r.nextFloat() - 0.5f) * 1e6f);
    } else if (v instanceof Float8Vector x) {
      x.setSafe(i, r.nextGaussian() * 1e9);
    } else if (v instanceof BitVector x) {
      x.setSafe(i, r.nextBoolean() ? 1 : 0);
    } else if (v instanceof DateDayVector x) {
      x.setSafe(i, r.nextInt(80_000) - 20_000);
    } else if (v instanceof DateMilliVector x) {
      x.setSafe(i, (r.nextInt(80_000) - 20_000) * 86_400_000L);
    } else if (v instanceof TimeStampVector x) {
      x.setSafe(i, r.nextInt() * 1_000L + r.nextInt(1_000));
    } else if (v instanceof DecimalVector x) {
      BigInteger unscaled = new BigInteger(Math.min(100, 3 * x.getPrecision()), r)
          .mod(BigInteger.TEN.pow(x.getPrecision()));
      x.setSafe(i, new BigDecimal(r.nextBoolean() ? unscaled : unscaled.negate(), x.getScale()));
    } else if (v instanceof VarCharVector x) {
      x.setSafe(i, text(r));
    } else if (v instanceof LargeVarCharVector x) {
      x.setSafe(i, text(r));
    } else if (v instanceof VarBinaryVector x) {
      x.setSafe(i, bytes(r, r.nextInt(24)));
    } else if (v instanceof LargeVarBinaryVector x) {
      x.setSafe(i, bytes(r, r.nextInt(24)));
    } else if (v instanceof FixedSizeBinaryVector x) {
      x.setSafe(i, bytes(r, x.getByteWidth()));
    } else {
      ArrowType t = v.getField().getType();
      throw new IllegalArgumentException("column '" + v.getName() + "': no random values of "
          + t + " (funnel does not read it)");
    }
  }

  private static byte[] text(Random r) {
    StringBuilder s = new StringBuilder();
    int n = r.nextInt(10) == 0 ? 0 : r.nextInt(16);
    for (int k = 0; k < n; k++) {
      s.append(TEXT[r.nextInt(TEXT.length)]);
    }
    return s.toString().getBytes(StandardCharsets.UTF_8);
  }

  private static byte[] bytes(Random r, int n) {
    byte[] b = new byte[n];
    r.nextBytes(b);
    return b;
  }
}
