package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.arrow.vector.compression.CompressionUtil.CodecType;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/** The codec setting's values, and when Spark's stream compression would compress frames again. */
class FrameCompressionTest {
  @Test
  void rejectsAValueThatNamesNoCodecNamingTheSetting() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> FrameCompression.of("lz4_raw"));
    assertEquals("spark.funnel.compression.codec=lz4_raw is not a codec of the funnel shuffle:"
        + " lz4, zstd or none", e.getMessage());
  }

  @Test
  void valuesInAnyCaseNameArrowsCodecs() {
    assertEquals(FrameCompression.LZ4, FrameCompression.of("LZ4"));
    assertEquals(FrameCompression.ZSTD, FrameCompression.of(" zstd "));
    assertEquals(FrameCompression.NONE, FrameCompression.of("none"));
    assertEquals(CodecType.LZ4_FRAME, FrameCompression.LZ4.arrowType());
    assertEquals(CodecType.ZSTD, FrameCompression.ZSTD.arrowType());
    assertEquals(CodecType.NO_COMPRESSION, FrameCompression.NONE.arrowType());
    assertEquals(FrameCompression.LZ4, FrameCompression.DEFAULT);
  }

  @Test
  void sparksShuffleCompressionCompressesCompressedFramesTwice() {
    SparkConf byDefault = new SparkConf(false);
    SparkConf off = new SparkConf(false).set("spark.shuffle.compress", "false");
    assertTrue(FrameCompression.compressedTwice(byDefault, FrameCompression.LZ4));
    assertTrue(FrameCompression.compressedTwice(byDefault, FrameCompression.ZSTD));
    assertFalse(FrameCompression.compressedTwice(byDefault, FrameCompression.NONE));
    assertFalse(FrameCompression.compressedTwice(off, FrameCompression.LZ4));
    assertFalse(FrameCompression.compressedTwice(off, FrameCompression.ZSTD));
  }
}
