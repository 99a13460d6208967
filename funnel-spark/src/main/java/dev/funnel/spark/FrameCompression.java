package dev.funnel.spark;

import java.util.Locale;
import org.apache.arrow.vector.compression.CompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.RuntimeConfig;

/**
 * How the funnel shuffle compresses its frames: Arrow IPC body compression (RecordBatch
 * compression, method BUFFER), each buffer of a RecordBatch compressed on its own, LZ4 frame or
 * Zstandard; funnel's read decodes them. LZ4 frames are lz4-java's ({@link Lz4FrameCodec}),
 * Zstandard is Arrow Java's compression module's (zstd-jni; {@link ZstdFrameCodec}), libraries
 * Spark ships. The RecordBatch header stays as it is, so a frame's rows and layout read as
 * without compression.
 *
 * <p>The codec is {@value #CONF} ({@code lz4}, the default, {@code zstd} or {@code none}), read
 * from the DataFrame's session when the shuffle is built on the driver ({@code --conf}, the
 * session builder's {@code config}, or {@code spark.conf().set} before {@link
 * FunnelShuffle#repartition}) and carried to the map tasks with the shuffle.
 *
 * <p>Spark compresses every shuffle's streams itself when {@value #SPARK_SHUFFLE_COMPRESS} is
 * true (its default), with {@code spark.io.compression.codec}, for all the shuffles of an
 * application alike: it has no switch for one shuffle. Frames compressed here would be
 * compressed a second time, for little gain, and decompressed on the reduce task's CPU before
 * funnel reads them. So with {@code lz4} or {@code zstd}, set {@code spark.shuffle.compress=false}
 * (Spark's own row shuffles then move uncompressed too), or keep Spark's compression and set
 * {@value #CONF}{@code =none}. {@link FunnelShuffle} logs a warning, once, when it finds both on;
 * it changes no setting itself.
 */
public enum FrameCompression {
  /** Bodies as they are: frames byte for byte as before compression existed. */
  NONE(CodecType.NO_COMPRESSION),
  /** Each buffer an LZ4 frame (lz4-java), the default. */
  LZ4(CodecType.LZ4_FRAME),
  /** Each buffer Zstandard at Arrow Java's default level, 3 (zstd-jni). */
  ZSTD(CodecType.ZSTD);

  /** The Spark setting naming the funnel shuffle's codec. */
  public static final String CONF = "spark.funnel.compression.codec";

  /** Spark's own switch for compressing shuffle streams (default true). */
  public static final String SPARK_SHUFFLE_COMPRESS = "spark.shuffle.compress";

  /** The codec when {@value #CONF} is not set. */
  public static final FrameCompression DEFAULT = LZ4;

  private final CodecType arrowType;

  FrameCompression(CodecType arrowType) {
    this.arrowType = arrowType;
  }

  /** The codecs of the three: lz4-java's LZ4 frames, Arrow Java's Zstandard, none. */
  private static final CompressionCodec.Factory CODECS =
      new CompressionCodec.Factory() {
        @Override
        public CompressionCodec createCodec(CodecType type) {
          return switch (type) {
            case LZ4_FRAME -> new Lz4FrameCodec();
            case ZSTD -> new ZstdFrameCodec(ZstdFrameCodec.DEFAULT_LEVEL);
            case NO_COMPRESSION -> NoCompressionCodec.INSTANCE;
          };
        }

        @Override
        public CompressionCodec createCodec(CodecType type, int level) {
          return type == CodecType.ZSTD ? new ZstdFrameCodec(level) : createCodec(type);
        }
      };

  /** The RecordBatch compression codec of Arrow IPC that frames carry (none for {@link #NONE}). */
  public CodecType arrowType() {
    return arrowType;
  }

  /** The factory of the codecs frames are written with, for a writer or a reader of them. */
  public CompressionCodec.Factory factory() {
    return CODECS;
  }

  /** The setting's value for this codec: lz4, zstd or none. */
  public String confValue() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * The codec {@code value} of {@value #CONF} names, in any case.
   *
   * @throws IllegalArgumentException naming the setting and the values it takes
   */
  public static FrameCompression of(String value) {
    for (FrameCompression c : values()) {
      if (c.confValue().equalsIgnoreCase(value.trim())) {
        return c;
      }
    }
    throw new IllegalArgumentException(
        CONF + "=" + value + " is not a codec of the funnel shuffle: lz4, zstd or none");
  }

  /** The codec {@code conf} sets ({@link #DEFAULT} when it sets none). */
  public static FrameCompression of(RuntimeConfig conf) {
    return of(conf.get(CONF, DEFAULT.confValue()));
  }

  /** Whether Spark's stream compression would compress frames of {@code codec} again. */
  static boolean compressedTwice(SparkConf conf, FrameCompression codec) {
    return codec != NONE && conf.getBoolean(SPARK_SHUFFLE_COMPRESS, true);
  }
}
