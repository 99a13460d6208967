package dev.funnel;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The JVM of {@link CompressedBadInputTest}'s library cases, started with FUNNEL_LZ4_LIBRARY or
 * FUNNEL_ZSTD_LIBRARY naming a library that will not do: {@code CodecLibraryChild FILE...} reads
 * each file alone, twice, with one reader, and prints "FILE: rows N" or "FILE: ExceptionClass
 * message" for each read.
 */
final class CodecLibraryChild {
  private CodecLibraryChild() {}

  public static void main(String[] args) throws Exception {
    try (FunnelDevice device = FunnelDevice.open(System.getProperty("funnel.backend", "cpu"));
        FunnelReader reader = new FunnelReader(device)) {
      for (int k = 0; k < 2; k++) {
        for (String file : args) {
          byte[] b = Files.readAllBytes(Path.of(file));
          ByteBuffer part = ByteBuffer.allocateDirect(b.length).put(b).flip();
          try (DeviceTable table = reader.read(part)) {
            table.waitReady();
            System.out.println(file + ": rows " + table.numRows());
          } catch (FunnelException e) {
            System.out.println(file + ": " + e.getClass().getSimpleName() + " " + e.getMessage());
          }
        }
      }
    }
  }
}
