package dev.funnel.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import net.jpountz.lz4.LZ4Compressor;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4FrameInputStream;
import net.jpountz.xxhash.XXHashFactory;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.LargeMemoryUtil;
import org.apache.arrow.vector.compression.AbstractCompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;

/**
 * Arrow IPC's LZ4_FRAME codec on lz4-java, which Spark ships (its own LZ4 codec): each buffer one
 * LZ4 frame of 64 KiB independent blocks and no checksums, Arrow C++'s default, which any LZ4
 * frame decoder reads. The blocks are lz4-java's block compressor's; the frame around them is
 * written here, byte for byte as lz4-java's LZ4FrameOutputStream writes it.
 *
 * <p>Not Arrow Java's own LZ4 codec: that one compresses with commons-compress, whose matcher
 * took 3.9 s for 4 MiB of consecutive ints (lz4-java: 17 ms), and so a map task minutes for a
 * skewed partition's frames. Arrow's {@link AbstractCompressionCodec} keeps a buffer raw (length
 * -1) when its frame would be larger.
 */
final class Lz4FrameCodec extends AbstractCompressionCodec {
  /** The frames' blocks: at most 64 KiB of content each, compressed on their own. */
  static final int BLOCK = 64 << 10;

  private static final LZ4Compressor COMPRESSOR = LZ4Factory.fastestInstance().fastCompressor();

  /**
   * A frame's header: the magic number; FLG (version 01, independent blocks, no block or content
   * checksum, no content size, no dictionary); BD (64 KiB blocks); HC, the second byte of the
   * xxHash32 of FLG and BD.
   */
  private static final byte[] HEADER = header();

  private static byte[] header() {
    byte flg = 0x60;
    byte bd = 0x40;
    int hash = XXHashFactory.fastestInstance().hash32().hash(new byte[] {flg, bd}, 0, 2, 0);
    return new byte[] {0x04, 0x22, 0x4D, 0x18, flg, bd, (byte) (hash >> 8)};
  }

  /**
   * The buffer as one LZ4 frame, written here as lz4-java's LZ4FrameOutputStream writes it (the
   * header, each block compressed, or stored when that is not smaller, the end mark), without the
   * stream: it allocates and clears 64 KiB buffers for every buffer it compresses, 7 us a buffer
   * of tens of bytes, and a map task of the Spark regime compresses thousands of them.
   */
  @Override
  protected ArrowBuf doCompress(BufferAllocator allocator, ArrowBuf uncompressed) {
    int length = LargeMemoryUtil.checkedCastToInt(uncompressed.writerIndex());
    byte[] in = new byte[length];
    uncompressed.getBytes(0, in);
    int blocks = (length + BLOCK - 1) / BLOCK;
    long bound = HEADER.length + 4; // and the end mark
    for (int b = 0; b < blocks; b++) {
      bound += 4 + COMPRESSOR.maxCompressedLength(Math.min(BLOCK, length - b * BLOCK));
    }
    if (bound > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(
          "a buffer of " + length + " bytes: its LZ4 frame may not fit in a Java array");
    }
    int most = (int) bound;
    byte[] frame = new byte[most];
    System.arraycopy(HEADER, 0, frame, 0, HEADER.length);
    int at = HEADER.length;
    for (int from = 0; from < length; from += BLOCK) {
      int n = Math.min(BLOCK, length - from);
      int size = COMPRESSOR.compress(in, from, n, frame, at + 4, most - at - 4);
      int word = size;
      if (size >= n) { // stored: its high bit set
        System.arraycopy(in, from, frame, at + 4, n);
        size = n;
        word = n | 0x80000000;
      }
      putIntLittleEndian(frame, at, word);
      at += 4 + size;
    }
    putIntLittleEndian(frame, at, 0); // the end mark
    at += 4;
    long prefix = CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH;
    ArrowBuf compressed = allocator.buffer(prefix + at);
    writeUncompressedLength(compressed, length);
    compressed.setBytes(prefix, frame, 0, at);
    compressed.writerIndex(prefix + at);
    return compressed;
  }

  private static void putIntLittleEndian(byte[] b, int at, int v) {
    b[at] = (byte) v;
    b[at + 1] = (byte) (v >> 8);
    b[at + 2] = (byte) (v >> 16);
    b[at + 3] = (byte) (v >> 24);
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
