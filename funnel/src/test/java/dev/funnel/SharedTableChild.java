package dev.funnel;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;

/**
 * The importing JVM of {@link SharedTableTest}: {@code SharedTableChild MODE DESCRIPTOR
 * PARTITION...} imports the shared table, copies it back and compares it row by row with Arrow
 * Java's reading of the partition files. MODE: verify (import, compare, close); hold (import,
 * print "imported", wait for a line on stdin, compare, close). Exits 0 when the table matched, 3
 * with the FunnelException's code and message on stdout when the import failed, 1 otherwise.
 */
final class SharedTableChild {
  private SharedTableChild() {}

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    byte[] descriptor = Files.readAllBytes(Path.of(args[1]));
    List<byte[]> parts = new ArrayList<>();
    for (int i = 2; i < args.length; i++) {
      parts.add(Files.readAllBytes(Path.of(args[i])));
    }
    int status = 0;
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice()) {
      DeviceTable table;
      try {
        table = device.importShared(descriptor);
      } catch (FunnelException e) {
        System.out.println("import failed: " + e.code() + ": " + e.getMessage());
        System.out.flush();
        System.exit(3);
        return;
      }
      try (table) {
        if (mode.equals("hold")) {
          System.out.println("imported");
          System.out.flush();
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        }
        try (VectorSchemaRoot root = table.toArrow(allocator)) {
          TestSupport.assertRowsMatch(root, parts, null, allocator);
        }
        try {
          table.share();
          System.out.println("an imported table was shared again");
          status = 1;
        } catch (FunnelException expected) {
          // read only: shared from its own process only
        }
      }
    } catch (Throwable t) {
      t.printStackTrace(System.out);
      status = 1;
    }
    System.out.println(status == 0 ? "matched" : "failed");
    System.exit(status);
  }
}
