package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.spark.serializer.DeserializationStream;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.SerializerInstance;
import org.junit.jupiter.api.Test;
import scala.Tuple2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/** The shuffle's record format: raw bytes, read back as written, and a cut block is an error. */
class FrameSerializerTest {
  static final ClassTag<Object> ANY = ClassTag$.MODULE$.Any();
  final SerializerInstance serializer = new FrameSerializer().newInstance();

  byte[] write(Object... keysAndValues) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    SerializationStream out = serializer.serializeStream(bytes);
    for (int i = 0; i < keysAndValues.length; i += 2) {
      out.writeKey(keysAndValues[i], ANY);
      out.writeValue(keysAndValues[i + 1], ANY);
    }
    out.close();
    return bytes.toByteArray();
  }

  List<Tuple2<Object, Object>> read(byte[] block) {
    DeserializationStream in = serializer.deserializeStream(new ByteArrayInputStream(block));
    List<Tuple2<Object, Object>> out = new ArrayList<>();
    in.asKeyValueIterator().foreach(out::add);
    return out;
  }

  @Test
  void cutBlockIsAnErrorNotFewerRecords() {
    byte[] block = write(3, new byte[] {1, 2, 3, 4, 5}, 4, new byte[] {6});
    for (int cut = 1; cut < block.length; cut++) {
      if (cut == 4 + 4 + 5) {
        continue; // between the two records: a shorter block, which Spark's block checks catch
      }
      byte[] part = Arrays.copyOf(block, cut);
      IOException e = assertThrows(IOException.class, () -> read(part), "cut at " + cut);
      assertTrue(e.getMessage().contains("truncated"), e.getMessage());
    }
  }

  @Test
  void negativeLengthIsCorrupt() throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    out.writeInt(0);
    out.writeInt(-2);
    IOException e = assertThrows(IOException.class, () -> read(bytes.toByteArray()));
    assertTrue(e.getMessage().contains("frame length -2"), e.getMessage());
  }

  @Test
  void writeRejectsWhatIsNotAPartitionAndAFrame() {
    assertThrows(IllegalArgumentException.class, () -> write("3", new byte[1]));
    assertThrows(IllegalArgumentException.class, () -> write(3, "frame"));
    assertThrows(IllegalArgumentException.class, () -> write(3, null));
  }

  @Test
  void recordsAreRawBytes() {
    byte[] block = write(0x01020304, new byte[] {9, 8, 7});
    assertArrayEquals(new byte[] {1, 2, 3, 4, 0, 0, 0, 3, 9, 8, 7}, block);
  }

  @Test
  void roundTripAndRelocation() {
    byte[] a = write(0, new byte[0], 199, new byte[] {5, 6});
    byte[] b = write(7, new byte[70_000]);
    // the serialized sort shuffle concatenates records: the format allows it
    assertTrue(new FrameSerializer().supportsRelocationOfSerializedObjects());
    byte[] ab = new byte[a.length + b.length];
    System.arraycopy(a, 0, ab, 0, a.length);
    System.arraycopy(b, 0, ab, a.length, b.length);
    List<Tuple2<Object, Object>> got = read(ab);
    assertEquals(3, got.size());
    assertEquals(0, got.get(0)._1());
    assertArrayEquals(new byte[0], (byte[]) got.get(0)._2());
    assertEquals(199, got.get(1)._1());
    assertArrayEquals(new byte[] {5, 6}, (byte[]) got.get(1)._2());
    assertEquals(7, got.get(2)._1());
    assertArrayEquals(new byte[70_000], (byte[]) got.get(2)._2());
    assertFalse(read(new byte[0]).iterator().hasNext());
  }

  /**
   * Records read back whatever the stream says it holds (the reader sizes its buffer by that):
   * all of the block, less than its first record, nothing; frames of 0 bytes to several buffers.
   */
  @Test
  void recordsReadWhateverTheStreamSaysItHolds() {
    Random r = new Random(5);
    byte[][] frames = {new byte[0], new byte[1], new byte[100], new byte[70_000], new byte[200_000]};
    for (byte[] f : frames) {
      r.nextBytes(f);
    }
    byte[] block = write(1, frames[0], 2, frames[1], 3, frames[2], 4, frames[3], 5, frames[4]);
    for (int says : new int[] {-1, 0, 5, 64, 100_000}) {
      InputStream in = new FilterInputStream(new ByteArrayInputStream(block)) {
        @Override
        public int available() throws IOException {
          return says < 0 ? super.available() : says;
        }
      };
      List<Tuple2<Object, Object>> got = new ArrayList<>();
      serializer.deserializeStream(in).asKeyValueIterator().foreach(got::add);
      assertEquals(frames.length, got.size(), "available() says " + says);
      for (int i = 0; i < frames.length; i++) {
        assertEquals(i + 1, got.get(i)._1(), "available() says " + says);
        assertArrayEquals(frames[i], (byte[]) got.get(i)._2(), "available() says " + says);
      }
    }
  }
}
