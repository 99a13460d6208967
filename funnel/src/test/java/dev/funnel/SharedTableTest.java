package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sharing a table with another JVM (issue 6, item 3): a real second process ({@link
 * SharedTableChild}) imports the descriptor and compares the table with Arrow Java's reading of
 * the partitions. On the cpu backend the memory is POSIX shared memory, on cuda CUDA IPC. Covered:
 * the data (validity masks, strings at offsets into one allocation), close waiting for a live
 * importer and refusing new ones once withdrawn, an importer killed while it holds the table, and
 * opening in the sharing process or from bytes that are not a descriptor.
 */
class SharedTableTest extends DeviceTestCase {
  @TempDir Path dir;

  private final List<Path> partitionFiles = new ArrayList<>();
  private final List<byte[]> parts = new ArrayList<>();

  private SharedTable share(long seed) throws IOException {
    return share(seed, false);
  }

  private SharedTable share(long seed, boolean shareable) throws IOException {
    Random random = new Random(seed);
    for (int p = 0; p < 6; p++) {
      byte[] bytes =
          TestSupport.randomStream(
              TestSupport.allTypesSchema(), allocator, random, 0.2, 1 + random.nextInt(700));
      Path file = dir.resolve("part-" + p + ".arrows");
      Files.write(file, bytes);
      parts.add(bytes);
      partitionFiles.add(file);
    }
    try (FunnelReader reader = new FunnelReader(device).setShareable(shareable);
        DeviceTable table = TestSupport.read(reader, parts)) {
      table.waitReady();
      long allocs = Faults.nativeLive()[0];
      SharedTable shared = table.share();
      assertEquals(shareable ? 0 : 1, Faults.nativeLive()[0] - allocs,
          shareable ? "a shareable table is shared as it is" : "any other is copied once");
      Files.write(dir.resolve("descriptor"), shared.descriptor());
      return shared; // the table closes here: the shared copy is its own
    }
  }

  private Process child(String mode) throws IOException {
    List<String> args = new ArrayList<>();
    args.add(mode);
    args.add(dir.resolve("descriptor").toString());
    for (Path p : partitionFiles) {
      args.add(p.toString());
    }
    return ForkedJvm.start(SharedTableChild.class, List.of(), args.toArray(new String[0]));
  }

  /** Waits for the child; returns its exit code, its output in `out`. */
  private static int finish(Process p, StringBuilder out) throws Exception {
    ForkedJvm.Result r = ForkedJvm.finish(p, 120);
    out.append(r.output());
    return r.exitCode();
  }

  private static void assertMatched(Process p) throws Exception {
    StringBuilder out = new StringBuilder();
    assertEquals(0, finish(p, out), () -> "the importing JVM says:\n" + out);
  }

  @Test
  void anotherJvmReadsTheSharedTable() throws Exception {
    try (SharedTable shared = share(71)) {
      assertMatched(child("verify"));
      assertEquals(0, shared.importers());
      assertTrue(shared.close(Duration.ZERO));
    }
  }

  @Test
  void anotherJvmReadsASharedTableOfNestedColumns() throws Exception {
    Random random = new Random(77);
    for (int p = 0; p < 5; p++) {
      byte[] bytes = NestedReadTest.stream(NestedReadTest.nestedSchema(), allocator, random, 0.2,
          1 + random.nextInt(60));
      Path file = dir.resolve("part-" + p + ".arrows");
      Files.write(file, bytes);
      parts.add(bytes);
      partitionFiles.add(file);
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = TestSupport.read(reader, parts);
        SharedTable shared = table.share()) {
      Files.write(dir.resolve("descriptor"), shared.descriptor());
      assertMatched(child("verify"));
    }
  }

  @Test
  void aShareableTableIsSharedWithoutACopy() throws Exception {
    long allocs;
    try (SharedTable shared = share(76, true)) { // the table is closed: the share holds it
      assertMatched(child("verify"));
      allocs = Faults.nativeLive()[0];
    }
    assertEquals(allocs - 1, Faults.nativeLive()[0], "the table's memory goes with the share");
  }

  @Test
  void closeWaitsForTheImporterAndRefusesNewOnes() throws Exception {
    try (SharedTable shared = share(72)) {
      Process holder = child("hold");
      BufferedReader lines =
          new BufferedReader(new InputStreamReader(holder.getInputStream(), StandardCharsets.UTF_8));
      assertEquals("imported", lines.readLine());
      assertEquals(1, shared.importers());
      assertFalse(shared.close(Duration.ofMillis(50)), "closed while an importer holds it");
      StringBuilder refused = new StringBuilder();
      assertEquals(3, finish(child("verify"), refused), refused::toString);
      assertTrue(refused.toString().contains("IN_USE") && refused.toString().contains("withdrawn"),
          refused::toString);
      try (Writer w = new OutputStreamWriter(holder.getOutputStream(), StandardCharsets.UTF_8)) {
        w.write("go\n");
      }
      assertTrue(shared.close(Duration.ofSeconds(120)), "close waits for the holder to finish");
      StringBuilder out = new StringBuilder();
      for (String line; (line = lines.readLine()) != null; ) {
        out.append(line).append('\n');
      }
      assertTrue(holder.waitFor(60, TimeUnit.SECONDS));
      assertEquals(0, holder.exitValue(), out::toString);
    }
  }

  @Test
  void anImporterKilledHoldingTheTableIsNoticed() throws Exception {
    try (SharedTable shared = share(73)) {
      Process holder = child("hold");
      BufferedReader lines =
          new BufferedReader(new InputStreamReader(holder.getInputStream(), StandardCharsets.UTF_8));
      assertEquals("imported", lines.readLine());
      assertEquals(1, shared.importers());
      holder.destroyForcibly(); // SIGKILL: it never closes
      assertTrue(holder.waitFor(60, TimeUnit.SECONDS));
      assertEquals(0, shared.importers());
      assertTrue(shared.close(Duration.ZERO));
    }
  }

  @Test
  void theSharingProcessCannotImportItsOwnTable() throws Exception {
    long[] shared0;
    try (SharedTable shared = share(74)) {
      shared0 = Faults.nativeLive();
      FunnelException e =
          assertThrows(FunnelException.class, () -> device.importShared(shared.descriptor()));
      assertEquals(FunnelException.Code.INVALID_ARGUMENT, e.code());
      assertTrue(e.getMessage().contains("shared by this process"), e.getMessage());
      assertArrayEquals(shared0, Faults.nativeLive(), "native objects left by the failed import");
    }
    assertEquals(shared0[0] - 1, Faults.nativeLive()[0], "the shared memory is freed by close");
  }

  @Test
  void bytesThatAreNotADescriptorAreMalformed() throws Exception {
    try (SharedTable shared = share(75)) {
      byte[] d = shared.descriptor();
      d[0] ^= 1;
      MalformedPartitionException e =
          assertThrows(MalformedPartitionException.class, () -> device.importShared(d));
      assertTrue(e.getMessage().contains("bad magic at byte 0"), e.getMessage());
      byte[] cut = java.util.Arrays.copyOf(shared.descriptor(), 50);
      e = assertThrows(MalformedPartitionException.class, () -> device.importShared(cut));
      assertTrue(e.getMessage().contains("truncated"), e.getMessage());
    }
  }
}
