package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.apache.arrow.compression.ZstdCompressionCodec;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.compression.CompressionCodec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ZstdFrameCodecTest {
  /**
   * Each buffer compresses to the bytes Arrow Java's own ZSTD codec writes (its one-shot call at
   * the same level), whatever the thread's context compressed before (several sizes and levels in
   * turn on one thread), and decodes back to the buffer.
   */
  @ParameterizedTest
  @ValueSource(ints = {1, 3, 9})
  void framesAreArrowJavasBytes(int level) {
    Random r = new Random(level);
    try (BufferAllocator allocator = new RootAllocator()) {
      for (int length : new int[] {1, 8, 100, 4096, 70_000, 1 << 20, 37}) {
        for (String kind : new String[] {"zeros", "runs", "random"}) {
          byte[] in = new byte[length];
          for (int i = 0; i < length; i++) {
            in[i] = switch (kind) {
              case "zeros" -> 0;
              case "runs" -> (byte) (i / 37);
              default -> (byte) r.nextInt();
            };
          }
          byte[] want = compress(new ZstdCompressionCodec(level), allocator, in);
          byte[] got = compress(new ZstdFrameCodec(level), allocator, in);
          assertArrayEquals(want, got, kind + ", " + length + " bytes, level " + level);
          ArrowBuf c = allocator.buffer(got.length);
          c.setBytes(0, got);
          c.writerIndex(got.length);
          try (ArrowBuf back = new ZstdCompressionCodec().decompress(allocator, c)) { // takes c
            byte[] out = new byte[length];
            back.getBytes(0, out);
            assertArrayEquals(in, out, kind + ": decodes back");
          }
        }
      }
    }
  }

  /**
   * A thread's Zstandard context (native memory) is freed once the thread has ended: 1,500 more
   * threads that each compress a buffer once leave the process's resident memory within 200 MiB
   * (without freeing, about 0.5 MiB stays a thread here: 800 MiB).
   */
  @Test
  void aThreadsContextIsFreedAfterTheThread() throws Exception {
    Path status = Path.of("/proc/self/status");
    assumeTrue(Files.isReadable(status), "reads the resident size from /proc");
    try (BufferAllocator allocator = new RootAllocator()) {
      Runnable once = () -> {
        byte[] in = new byte[1 << 16];
        for (int i = 0; i < in.length; i++) {
          in[i] = (byte) (i / 7);
        }
        compress(new ZstdFrameCodec(ZstdFrameCodec.DEFAULT_LEVEL), allocator, in);
      };
      long before = 0;
      for (int round = 0; round < 4; round++) {
        for (int t = 0; t < 500; t++) {
          Thread thread = new Thread(once);
          thread.start();
          thread.join();
        }
        for (int g = 0; g < 3; g++) {
          System.gc();
          Thread.sleep(100); // the cleaner's thread closes what the collection found
        }
        if (round == 0) {
          before = residentKiB(status);
        }
      }
      long grew = residentKiB(status) - before;
      assertTrue(grew < 200 << 10, "resident memory grew by " + (grew >> 10) + " MiB");
    }
  }

  private static long residentKiB(Path status) throws IOException {
    for (String line : Files.readAllLines(status)) {
      if (line.startsWith("VmRSS:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    }
    throw new IllegalStateException("no VmRSS in " + status);
  }

  /** The codec's whole output for in: the 8-byte length prefix, then the frame or the raw bytes. */
  private static byte[] compress(CompressionCodec codec, BufferAllocator allocator, byte[] in) {
    ArrowBuf buf = allocator.buffer(in.length);
    buf.setBytes(0, in);
    buf.writerIndex(in.length);
    try (ArrowBuf c = codec.compress(allocator, buf)) { // takes buf
      byte[] out = new byte[(int) c.writerIndex()];
      c.getBytes(0, out);
      return out;
    }
  }
}
