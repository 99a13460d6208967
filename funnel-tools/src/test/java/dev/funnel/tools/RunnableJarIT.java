package dev.funnel.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * target/funnel.jar, the runnable jar: it carries funnel, Arrow (the API's own types, the version
 * Spark ships) and, relocated under dev.funnel.tools.shaded, everything else but zstd-jni, so no
 * class of it clashes on a Spark classpath; and it runs with one line on stderr at most, no SLF4J
 * warning. zstd-jni keeps its names (its native library binds to them) at the version Spark
 * ships; the benchmark's Java driver decodes compressed workloads with it and commons-compress.
 */
class RunnableJarIT {
  private static final Path JAR = Path.of(System.getProperty("funnel.root", ".."), "target",
      "funnel.jar");

  @Test
  void everyClassIsFunnelsArrowsOrRelocated() throws Exception {
    List<String> foreign = new ArrayList<>();
    try (JarFile jar = new JarFile(JAR.toFile())) {
      for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
        String name = e.nextElement().getName().replaceFirst("^META-INF/versions/\\d+/", "");
        boolean service = name.startsWith("META-INF/services/") && !name.endsWith("/");
        String what = service ? name.substring("META-INF/services/".length()).replace('.', '/')
            : name;
        if ((service || name.endsWith(".class")) && !what.startsWith("dev/funnel/")
            && !what.startsWith("org/apache/arrow/")
            && !what.startsWith("com/github/luben/zstd/")) {
          foreign.add(name);
        }
      }
    }
    assertEquals(List.of(), foreign,
        "classes and services outside dev.funnel, Arrow and zstd-jni");
  }

  @Test
  void theJarsBenchChecksCompressedWorkloadsWithArrowJavasCodecs(@TempDir Path dir)
      throws Exception {
    Path dump = Files.createDirectory(dir.resolve("dump"));
    try (BufferAllocator allocator = new RootAllocator()) {
      writeWorkload(dump, CodecType.LZ4_FRAME, "lz4", allocator);
      writeWorkload(dump, CodecType.ZSTD, "zstd", allocator);
    }
    Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java")
        .toString(), "-jar", JAR.toString(), "bench", "--workloads", dump.toString(),
        "--backend", "cpu", "--reps", "1", "--jit-warmup-ms", "0", "--csv",
        dir.resolve("java.csv").toString()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), out);
    assertTrue(out.contains("every result verified"), out);
    assertTrue(out.contains("4x1x50") && out.contains("int64/lz4") && out.contains("int64/zstd"),
        out);
  }

  /** A workload as funnel_bench --dump writes it: 4 partitions of 50 int64s, every 7th null. */
  private static void writeWorkload(Path dump, CodecType codec, String name,
      BufferAllocator allocator) throws Exception {
    Schema schema = new Schema(List.of(Field.nullable("v", new ArrowType.Int(64, true))));
    ByteArrayOutputStream bin = new ByteArrayOutputStream();
    List<String> offsets = new ArrayList<>();
    List<String> lengths = new ArrayList<>();
    long nulls = 0;
    for (int part = 0; part < 4; part++) {
      while (bin.size() % 64 != 0) {
        bin.write(0);
      }
      offsets.add(Integer.toString(bin.size()));
      ByteArrayOutputStream stream = new ByteArrayOutputStream();
      try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator);
          ArrowStreamWriter w = new ArrowStreamWriter(root, null, Channels.newChannel(stream),
              IpcOption.DEFAULT, CommonsCompressionFactory.INSTANCE, codec)) {
        BigIntVector v = (BigIntVector) root.getVector(0);
        v.allocateNew(50);
        for (int i = 0; i < 50; i++) {
          if ((part * 50 + i) % 7 == 0) {
            v.setNull(i);
            nulls++;
          } else {
            v.set(i, part * 1000L + i);
          }
        }
        root.setRowCount(50);
        w.start();
        w.writeBatch();
        w.end();
      }
      bin.write(stream.toByteArray());
      lengths.add(Integer.toString(stream.size()));
    }
    Path d = Files.createDirectory(dump.resolve("4x1x50-int64-" + name));
    Files.write(d.resolve("partitions.bin"), bin.toByteArray());
    long bytes = lengths.stream().mapToLong(Long::parseLong).sum();
    Files.writeString(d.resolve("workload.properties"), "partitions=4\ncolumns=1\n"
        + "rows_per_partition=50\nmix=int64\ncompression=" + name + "\nbytes=" + bytes
        + "\nrows=200\noffsets=" + String.join(",", offsets) + "\nlengths="
        + String.join(",", lengths) + "\nnulls=" + nulls + "\n");
  }

  @Test
  void theJarRunsWithoutALoggingWarning() throws Exception {
    Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java")
        .toString(), "-jar", JAR.toString(), "demo", "--backend", "cpu", "--partitions", "5",
        "--rows", "10").start();
    byte[] out = p.getInputStream().readAllBytes();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), err);
    assertEquals("", err, "nothing on stderr");
    assertTrue(new String(out, StandardCharsets.UTF_8).contains("stats:"));
    assertTrue(Files.size(JAR) > 0);
  }
}
