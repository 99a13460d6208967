package dev.funnel.spark;

import com.github.luben.zstd.Zstd;
import com.github.luben.zstd.ZstdCompressCtx;
import java.lang.ref.Cleaner;
import org.apache.arrow.compression.ZstdCompressionCodec;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.LargeMemoryUtil;
import org.apache.arrow.vector.compression.CompressionUtil;

/**
 * Arrow IPC's ZSTD codec as Arrow Java's compression module has it (zstd-jni, each buffer one
 * Zstandard frame; decoding is that module's), compressing with a context each thread keeps:
 * Arrow's codec compresses with zstd-jni's one-shot call, which makes and frees a context for
 * every buffer, 7 us a buffer of tens of bytes, and a map task of the Spark regime compresses
 * thousands of them. The frames are the same bytes (ZstdFrameCodecTest compares them).
 */
final class ZstdFrameCodec extends ZstdCompressionCodec {
  /** Arrow Java's default level. */
  static final int DEFAULT_LEVEL = 3;

  private static final Cleaner CLEANER = Cleaner.create();

  /**
   * A thread's context (native memory, a few MiB at most, that zstd-jni frees only when closed):
   * closed once its thread has ended and the holder is unreachable, as Spark's task threads end
   * when idle.
   */
  private static final class Context {
    final ZstdCompressCtx zstd = new ZstdCompressCtx();

    Context() {
      CLEANER.register(this, zstd::close); // the action holds the context, not its holder
    }
  }

  private static final ThreadLocal<Context> CONTEXT = ThreadLocal.withInitial(Context::new);

  private final int level;

  ZstdFrameCodec(int level) {
    super(level);
    this.level = level;
  }

  @Override
  protected ArrowBuf doCompress(BufferAllocator allocator, ArrowBuf uncompressed) {
    int length = LargeMemoryUtil.checkedCastToInt(uncompressed.writerIndex());
    int bound = LargeMemoryUtil.checkedCastToInt(Zstd.compressBound(length));
    long prefix = CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH;
    ArrowBuf compressed = allocator.buffer(prefix + bound);
    try {
      ZstdCompressCtx context = CONTEXT.get().zstd;
      context.setLevel(level);
      int size = context.compressDirectByteBuffer(compressed.nioBuffer(prefix, bound), 0, bound,
          uncompressed.nioBuffer(0, length), 0, length);
      writeUncompressedLength(compressed, length);
      compressed.writerIndex(prefix + size);
      return compressed;
    } catch (RuntimeException e) {
      compressed.close();
      throw e;
    }
  }
}
