package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A read needs no JVM flag: the partitions' addresses come from JNI (GetDirectBufferAddress) and
 * the schema is read from bytes, so only copying back through Arrow Java's allocator needs
 * {@code --add-opens=java.base/java.nio=ALL-UNNAMED}, and funnel names the flag when it fails.
 */
class JvmFlagsTest {
  @TempDir Path dir;

  @Test
  void readNeedsNoAddOpensAndCopyingBackNamesTheFlag() throws Exception {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(17);
    List<String> files = new ArrayList<>();
    long rows = 0;
    long[] nulls = new long[schema.getFields().size()];
    try (BufferAllocator allocator = new RootAllocator()) {
      for (int p = 0; p < 3; p++) {
        byte[] part = TestSupport.randomStream(schema, allocator, random, 0.2, 40, 0, 7);
        Path f = dir.resolve("p" + p + ".arrows");
        Files.write(f, part);
        files.add(f.toString());
        try (ArrowReader r = TestSupport.arrowReader(part, null, allocator)) {
          while (r.loadNextBatch()) {
            rows += r.getVectorSchemaRoot().getRowCount();
            List<FieldVector> vs = r.getVectorSchemaRoot().getFieldVectors();
            for (int c = 0; c < vs.size(); c++) {
              nulls[c] += vs.get(c).getNullCount();
            }
          }
        }
      }
    }
    StringBuilder want = new StringBuilder();
    for (long n : nulls) {
      want.append(want.length() == 0 ? "" : ",").append(n);
    }

    Process p = ForkedJvm.start(NoFlagsChild.class, Map.of(), false, List.of(),
        files.toArray(new String[0]));
    ForkedJvm.Result r = ForkedJvm.finish(p, 120);
    // Arrow Java prints its own stack trace the first time; the child's lines are the rest
    String[] lines = r.output().lines()
        .filter(l -> l.startsWith("rows ") || l.startsWith("nulls ") || l.startsWith("head"))
        .toArray(String[]::new);
    assertEquals(0, r.exitCode(), r.output());
    assertEquals("rows " + rows, lines[0], r.output());
    assertEquals("nulls " + want, lines[1], r.output());
    assertEquals(4, lines.length, r.output());
    for (int k = 2; k < 4; k++) {
      assertTrue(lines[k].startsWith("head: ")
          && lines[k].contains("--add-opens=java.base/java.nio=ALL-UNNAMED"),
          "each failure to copy back names the flag:\n" + r.output());
    }
  }
}
