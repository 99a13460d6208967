package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.util.Random;
import org.apache.arrow.compression.ZstdCompressionCodec;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.compression.CompressionCodec;
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
