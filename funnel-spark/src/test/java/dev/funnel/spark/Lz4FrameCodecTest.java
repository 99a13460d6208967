package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Arrays;
import java.util.Random;
import net.jpountz.lz4.LZ4FrameOutputStream;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class Lz4FrameCodecTest {
  /**
   * Each buffer's frame is byte for byte what lz4-java's own LZ4FrameOutputStream writes (64 KiB
   * independent blocks, no checksum): the header, compressed and stored blocks, several blocks,
   * none; and decodes back to the buffer.
   */
  @ParameterizedTest
  @ValueSource(ints = {1, 7, 8, 100, 4096, 65535, 65536, 65537, 200_000, 3 << 16})
  void framesAreWhatLz4JavasStreamWrites(int length) throws IOException {
    Random r = new Random(length);
    Lz4FrameCodec codec = new Lz4FrameCodec();
    try (BufferAllocator allocator = new RootAllocator()) {
      for (String kind : new String[] {"zeros", "runs", "random", "mixed"}) {
        byte[] in = new byte[length];
        for (int i = 0; i < length; i++) {
          in[i] = switch (kind) {
            case "zeros" -> 0;
            case "runs" -> (byte) (i / 37);
            case "random" -> (byte) r.nextInt();
            default -> (byte) ((i / 65536) % 2 == 0 ? r.nextInt() : i % 5); // a block of each
          };
        }
        ByteArrayOutputStream want = new ByteArrayOutputStream();
        try (LZ4FrameOutputStream lz4 =
            new LZ4FrameOutputStream(want, LZ4FrameOutputStream.BLOCKSIZE.SIZE_64KB)) {
          lz4.write(in);
        }
        ArrowBuf buf = allocator.buffer(length);
        buf.setBytes(0, in);
        buf.writerIndex(length);
        try (ArrowBuf compressed = codec.compress(allocator, buf)) { // takes buf
          long prefix = CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH;
          byte[] got = new byte[(int) (compressed.writerIndex() - prefix)];
          compressed.getBytes(prefix, got);
          long declared = compressed.getLong(0);
          if (declared == CompressionUtil.NO_COMPRESSION_LENGTH) {
            // Arrow keeps a buffer raw when its frame is no smaller
            assertEquals(true, want.size() >= length, kind + ": kept raw, frame " + want.size());
            assertArrayEquals(in, got, kind);
          } else {
            assertEquals(length, declared, kind);
            assertArrayEquals(want.toByteArray(), got, kind + ": " + length + " bytes");
          }
          compressed.getReferenceManager().retain();
          try (ArrowBuf back = codec.decompress(allocator, compressed)) {
            byte[] out = new byte[length];
            back.getBytes(0, out);
            assertEquals(true, Arrays.equals(in, out), kind + ": decodes back");
          }
        }
      }
    }
  }
}
