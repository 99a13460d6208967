package dev.funnel.tools;

import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelReader;
import dev.funnel.ReadStats;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.DateUnit;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * The main job until the shuffle benchmark lands: writes sample shuffle partitions with Arrow Java,
 * reads them into one table through funnel, checks every value against Arrow Java's own reading of
 * the partitions, and prints what it did.
 */
final class Demo {
  private Demo() {}

  private static long seed(String[] args, int i) {
    String v = Main.value(args, i);
    try {
      return Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw new Main.UsageException(args[i] + " needs an integer, got '" + v + "'");
    }
  }

  static int run(String[] args, PrintStream out) {
    String backend = "auto";
    int partitions = 200;
    int rows = 5000;
    long seed = 42;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--backend" -> backend = Main.value(args, i++);
        case "--partitions" -> partitions = positive(args, i++);
        case "--rows" -> rows = positive(args, i++);
        case "--seed" -> seed = seed(args, i++);
        default -> throw new Main.UsageException("unknown demo option " + args[i]);
      }
    }
    Schema schema =
        new Schema(
            List.of(
                new Field("id", FieldType.notNullable(new ArrowType.Int(64, true)), null),
                Field.nullable(
                    "price", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
                Field.nullable("flag", ArrowType.Bool.INSTANCE),
                Field.nullable("day", new ArrowType.Date(DateUnit.DAY)),
                Field.nullable("name", ArrowType.Utf8.INSTANCE)));
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = FunnelDevice.open(backend);
        FunnelReader reader = new FunnelReader(device)) {
      Random random = new Random(seed);
      List<ByteBuffer> parts = new ArrayList<>();
      long ipcBytes = 0;
      int empty = 0;
      for (int p = 0; p < partitions; p++) {
        // about one map task in ten has no rows for this reduce partition
        int n = random.nextInt(10) == 0 ? 0 : random.nextInt(2 * rows + 1);
        ByteBuffer b = n == 0 ? ByteBuffer.allocateDirect(0) : write(schema, allocator, random, n, p);
        empty += n == 0 ? 1 : 0;
        ipcBytes += b.remaining();
        parts.add(b);
      }
      out.printf("funnel demo: backend %s%n", device.backend());
      out.printf(
          "  %d shuffle partitions (%d empty blocks), %d columns, %.1f MiB of Arrow IPC%n",
          partitions, empty, schema.getFields().size(), ipcBytes / 1048576.0);

      long t0 = System.nanoTime();
      try (DeviceTable table = reader.read(parts)) {
        table.waitReady();
        long t1 = System.nanoTime();
        ReadStats s = table.stats();
        // many small partitions: the device parses the headers, and the parse step is its
        // copies and launches; few large ones: the host, without a device call
        boolean onDevice = s.deviceParsed() > 0 && s.deviceLeft() == 0;
        out.printf(
            "  one read: %d rows in %.2f ms; %d host-to-device cop%s, %d launch%s; %s%n",
            table.numRows(), (t1 - t0) / 1e6, s.h2dCopies(), s.h2dCopies() == 1 ? "y" : "ies",
            s.concatLaunches(), s.concatLaunches() == 1 ? "" : "es",
            onDevice
                ? "headers parsed on the device (" + s.deviceCallsParse()
                    + " device calls in that step, its copies and launches; one wait, for the"
                    + " table's shape)"
                : "headers parsed on the host (" + (s.deviceCallsParse() + s.deviceCallsPlan())
                    + " device calls while parsing and planning)");
        try (VectorSchemaRoot result = table.toArrow(allocator)) {
          long checked = verify(parts, result, allocator);
          out.printf(
              "  verified: all %d rows x %d columns equal Arrow Java's own reading of the partitions%n",
              checked, result.getFieldVectors().size());
          out.println("  first rows:");
          for (int r = 0; r < Math.min(5, result.getRowCount()); r++) {
            StringBuilder line = new StringBuilder("    ");
            for (FieldVector v : result.getFieldVectors()) {
              line.append(v.getName()).append('=').append(v.getObject(r)).append("  ");
            }
            out.println(line.toString().stripTrailing());
          }
        }
        out.println("  stats: " + s.toJson());
      }
      return 0;
    }
  }

  private static int positive(String[] args, int i) {
    String v = Main.value(args, i);
    try {
      int n = Integer.parseInt(v);
      if (n > 0) {
        return n;
      }
    } catch (NumberFormatException ignored) {
      // reported below
    }
    throw new Main.UsageException(args[i] + " needs a positive integer, got '" + v + "'");
  }

  private static ByteBuffer write(
      Schema schema, BufferAllocator allocator, Random random, int n, int partition) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      BigIntVector id = (BigIntVector) root.getVector("id");
      Float8Vector price = (Float8Vector) root.getVector("price");
      BitVector flag = (BitVector) root.getVector("flag");
      DateDayVector day = (DateDayVector) root.getVector("day");
      VarCharVector name = (VarCharVector) root.getVector("name");
      root.allocateNew();
      for (int i = 0; i < n; i++) {
        id.setSafe(i, (long) partition << 32 | i);
        if (random.nextInt(10) == 0) {
          price.setNull(i);
        } else {
          price.setSafe(i, random.nextInt(1_000_000) / 100.0);
        }
        flag.setSafe(i, random.nextBoolean() ? 1 : 0);
        day.setSafe(i, 19000 + random.nextInt(1000));
        if (random.nextInt(10) == 0) {
          name.setNull(i);
        } else {
          byte[] s = new byte[8 + random.nextInt(17)];
          for (int k = 0; k < s.length; k++) {
            s[k] = (byte) ('a' + random.nextInt(26));
          }
          name.setSafe(i, s);
        }
      }
      root.setRowCount(n);
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(bytes))) {
        writer.start();
        writer.writeBatch();
        writer.end();
      }
      byte[] a = bytes.toByteArray();
      return ByteBuffer.allocateDirect(a.length).put(a).flip();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Compares every value of `result` with Arrow Java's reading of the partitions, in order. */
  private static long verify(List<ByteBuffer> parts, VectorSchemaRoot result, BufferAllocator a) {
    long row = 0;
    for (int p = 0; p < parts.size(); p++) {
      ByteBuffer b = parts.get(p).duplicate();
      if (!b.hasRemaining()) {
        continue;
      }
      byte[] bytes = new byte[b.remaining()];
      b.get(bytes);
      try (ArrowStreamReader r =
          new ArrowStreamReader(new java.io.ByteArrayInputStream(bytes), a)) {
        while (r.loadNextBatch()) {
          VectorSchemaRoot in = r.getVectorSchemaRoot();
          for (int i = 0; i < in.getRowCount(); i++, row++) {
            for (int c = 0; c < in.getFieldVectors().size(); c++) {
              Object want = in.getVector(c).getObject(i);
              Object got = result.getVector(c).getObject((int) row);
              if (!Objects.equals(String.valueOf(want), String.valueOf(got))) {
                throw new IllegalStateException(
                    "partition " + p + " row " + i + " column " + c + ": funnel gave " + got
                        + ", Arrow Java reads " + want);
              }
            }
          }
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    if (row != result.getRowCount()) {
      throw new IllegalStateException(
          "funnel gave " + result.getRowCount() + " rows, the partitions hold " + row);
    }
    return row;
  }

}
