package dev.funnel.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import net.jpountz.lz4.LZ4FrameInputStream;
import net.jpountz.lz4.LZ4FrameOutputStream;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.LargeMemoryUtil;
import org.apache.arrow.vector.compression.AbstractCompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;

/**
 * Arrow IPC's LZ4_FRAME codec on lz4-java, which Spark ships (its own LZ4 codec): each buffer one
 * LZ4 frame of 64 KiB independent blocks and no checksums, Arrow C++'s default, which any LZ4
 * frame decoder reads.
 *
 * <p>Not Arrow Java's own LZ4 codec: that one compresses with commons-compress, whose matcher
 * took 3.9 s for 4 MiB of consecutive ints (lz4-java: 17 ms), and so a map task minutes for a
 * skewed partition's frames. Arrow's {@link AbstractCompressionCodec} keeps a buffer raw (length
 * -1) when its frame would be larger.
 */
final class Lz4FrameCodec extends AbstractCompressionCodec {
  @Override
  protected ArrowBuf doCompress(BufferAllocator allocator, ArrowBuf uncompressed) {
    int length = LargeMemoryUtil.checkedCastToInt(uncompressed.writerIndex());
    byte[] in = new byte[length];
    uncompressed.getBytes(0, in);
    ByteArrayOutputStream out = new ByteArrayOutputStream(length / 2 + 64);
    try (LZ4FrameOutputStream lz4 =
        new LZ4FrameOutputStream(out, LZ4FrameOutputStream.BLOCKSIZE.SIZE_64KB)) {
      lz4.write(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e); // a ByteArrayOutputStream does not fail
    }
    byte[] frame = out.toByteArray();
    long prefix = CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH;
    ArrowBuf compressed = allocator.buffer(prefix + frame.length);
    writeUncompressedLength(compressed, length);
    compressed.setBytes(prefix, frame);
    compressed.writerIndex(prefix + frame.length);
    return compressed;
  }

  @Override
  protected ArrowBuf doDecompress(BufferAllocator allocator, ArrowBuf compressed) {
    long prefix = CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH;
    long length = readUncompressedLength(compressed);
    byte[] frame = new byte[LargeMemoryUtil.checkedCastToInt(compressed.writerIndex() - prefix)];
    compressed.getBytes(prefix, frame);
    byte[] out;
    try (LZ4FrameInputStream lz4 = new LZ4FrameInputStream(new ByteArrayInputStream(frame))) {
      out = lz4.readNBytes(LargeMemoryUtil.checkedCastToInt(length));
    } catch (IOException e) {
      throw new IllegalArgumentException("an LZ4 frame that does not decode: " + e.getMessage(), e);
    }
    if (out.length != length) {
      throw new IllegalArgumentException(
          "an LZ4 frame of " + out.length + " bytes, its buffer says " + length);
    }
    ArrowBuf decompressed = allocator.buffer(length);
    decompressed.setBytes(0, out);
    decompressed.writerIndex(length);
    return decompressed;
  }

  @Override
  public CodecType getCodecType() {
    return CodecType.LZ4_FRAME;
  }
}
