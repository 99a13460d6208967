package dev.funnel;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The JVM of {@link JvmFlagsTest}, started without {@code --add-opens}: {@code NoFlagsChild
 * PARTITION...} reads the partition files through funnel and prints "rows N", "nulls a,b,..."
 * (per column), then "head: " and the message of what head(1) threw, twice (or "head ok").
 * Touches no Arrow Java allocator before head.
 */
final class NoFlagsChild {
  private NoFlagsChild() {}

  public static void main(String[] args) throws Exception {
    ByteBuffer[] parts = new ByteBuffer[args.length];
    for (int i = 0; i < args.length; i++) {
      byte[] b = Files.readAllBytes(Path.of(args[i]));
      parts[i] = ByteBuffer.allocateDirect(b.length).put(b).flip();
    }
    try (FunnelDevice device = FunnelDevice.open(System.getProperty("funnel.backend", "cpu"));
        FunnelReader reader = new FunnelReader(device);
        DeviceTable table = reader.read(parts)) {
      table.waitReady();
      System.out.println("rows " + table.numRows());
      StringBuilder nulls = new StringBuilder();
      for (DeviceColumn c : table.columns()) {
        nulls.append(nulls.length() == 0 ? "" : ",").append(c.nullCount());
      }
      System.out.println("nulls " + nulls);
      for (int k = 0; k < 2; k++) {
        try {
          table.head(1);
          System.out.println("head ok");
        } catch (RuntimeException e) {
          System.out.println("head: " + e.getMessage());
        }
      }
    }
  }
}
