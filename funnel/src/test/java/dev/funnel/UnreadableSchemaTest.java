package dev.funnel;

import static dev.funnel.TestSupport.breakUtf8;
import static dev.funnel.TestSupport.concat;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.endOfStream;
import static dev.funnel.TestSupport.nullable;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.schemaMessage;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Schemas funnel's parser once accepted and Arrow Java cannot read (DeviceTable's constructor
 * threw Arrow Java's IndexOutOfBoundsException, IllegalArgumentException or ArithmeticException,
 * naming no partition): the parser itself now refuses each, with a {@link FunnelException} naming
 * partition, column and byte, and no cause (an exception with a cause came from the Java side's
 * last line of defence, which is checked on its own here). Nothing leaks.
 */
class UnreadableSchemaTest extends DeviceTestCase {
  private static final Schema SCHEMA = new Schema(List.of(
      nullable("a", new ArrowType.Int(32, true)),
      nullable("broken_name", ArrowType.Utf8.INSTANCE),
      new Field("f", new FieldType(true, ArrowType.Bool.INSTANCE, null,
          Map.of("origin", "spark_value")), null)),
      Map.of("writer", "somebody_else"));

  private byte[] good;
  private FunnelReader reader;
  private long[] handles0;
  private long[] native0;

  @BeforeEach
  void readAGoodPartition() {
    good = randomStream(SCHEMA, allocator, new Random(90), 0.5, 8);
    reader = new FunnelReader(device);
    try (DeviceTable table = reader.read(direct(good))) { // warm: the pools exist
      TestSupport.assertTableMatches(table, List.of(good), null, allocator);
    }
    handles0 = Handles.live();
    native0 = Faults.nativeLive();
  }

  @AfterEach
  void closeReader() {
    reader.close();
  }

  /** Reads {@code bad} as partition 1 of three; returns what funnel's parser threw. */
  private <T extends FunnelException> T rejected(Class<T> type, byte[] bad, long column) {
    T e = assertThrows(type, () -> reader.read(direct(good), direct(bad), direct(good)).close());
    assertNull(e.getCause(), "funnel's parser refuses it, not the Java side: " + e);
    assertEquals(1, e.partition(), e.getMessage());
    assertEquals(column, e.column(), e.getMessage());
    assertTrue(e.getMessage().startsWith("partition 1: "), e.getMessage());
    assertArrayEquals(handles0, Handles.live(), "Java handles left");
    assertArrayEquals(native0, Faults.nativeLive(), "native objects left");
    return e;
  }

  @Test
  void readRejectsFieldNameThatIsNotUtf8() {
    byte[] bad = good.clone();
    int at = breakUtf8(bad, "broken_name");
    MalformedPartitionException e = rejected(MalformedPartitionException.class, bad, 1);
    assertEquals(at, e.offset());
    assertTrue(e.getMessage().contains("column 1 name is not valid UTF-8 at byte " + at),
        e.getMessage());
  }

  @Test
  void readRejectsMetadataThatIsNotUtf8() {
    byte[] bad = good.clone();
    int at = breakUtf8(bad, "spark_value");
    MalformedPartitionException e = rejected(MalformedPartitionException.class, bad, 2);
    assertEquals(at, e.offset());
    assertTrue(e.getMessage().contains("column 2 metadata value 0 is not valid UTF-8"),
        e.getMessage());

    bad = good.clone();
    at = breakUtf8(bad, "somebody_else");
    e = rejected(MalformedPartitionException.class, bad, -1);
    assertEquals(at, e.offset());
    assertTrue(e.getMessage().contains("schema metadata value 0 is not valid UTF-8"),
        e.getMessage());
  }

  @Test
  void readRejectsFixedSizeBinaryOfWidth0() {
    UnsupportedTypeException e = rejected(UnsupportedTypeException.class,
        TestSupport.fixedSizeBinary0Partition(), 1);
    assertEquals(0, e.offset(), "the Schema message");
    assertTrue(e.getMessage().contains("fixed_size_binary(0) is not supported"), e.getMessage());
  }

  @Test
  void readRejectsDecimalPrecisionOutside1To38() {
    for (int precision : new int[] {0, 39}) {
      byte[] bad = concat(schemaMessage(new Schema(List.of(
          nullable("d", new ArrowType.Decimal(precision, 2, 128))))), endOfStream());
      MalformedPartitionException e = rejected(MalformedPartitionException.class, bad, 0);
      assertTrue(e.getMessage().contains("precision " + precision), e.getMessage());
    }
  }

  @Test
  void readRejectsMetadataVersionPastV5() {
    for (short version : new short[] {5, 4096, -1}) { // V5 is 4
      byte[] bad = good.clone();
      TestSupport.Span schema = TestSupport.first(bad, MessageHeader.Schema);
      int at = schema.metaStart() + TestSupport.fieldPosition(TestSupport.message(bad, schema), 0);
      ByteBuffer.wrap(bad).order(ByteOrder.LITTLE_ENDIAN).putShort(at, version);
      UnsupportedTypeException e = rejected(UnsupportedTypeException.class, bad, -1);
      assertEquals(0, e.offset(), "the Schema message");
      assertTrue(e.getMessage().contains("metadata version"), e.getMessage());
    }
  }

  /**
   * Arrow Java reads a validity buffer that has bytes whatever the null count says: a count the
   * bits contradict was read one way by funnel and another by Arrow Java.
   */
  @Test
  void readRejectsNullCountTheValidityBitsContradict() {
    byte[] bad = good.clone();
    TestSupport.Span batch = TestSupport.first(bad, MessageHeader.RecordBatch);
    RecordBatch rb = (RecordBatch) TestSupport.message(bad, batch).header(new RecordBatch());
    int[] validity = {0, 2, 5}; // each column's validity buffer: int32, utf8, bool
    int c = 0;
    while (rb.nodes(c).nullCount() == 0) {
      c++;
    }
    int nullCount = batch.metaStart() + TestSupport.vectorPosition(rb, 1) + 16 * c + 8;
    TestSupport.putLong(bad, nullCount, 0);
    MalformedPartitionException e = rejected(MalformedPartitionException.class, bad, c);
    assertEquals(batch.bodyStart() + rb.buffers(validity[c]).offset(), e.offset(),
        "the validity buffer");
    assertTrue(e.getMessage().contains("null count 0, but the validity buffer"), e.getMessage());
  }

  /**
   * The last line of defence, for what the parser might still let through: Arrow Java's failure
   * to read a schema message becomes a MalformedPartitionException naming the first partition
   * that holds the message, and where (from the buffer's position).
   */
  @Test
  void schemaArrowJavaCannotReadIsAMalformedPartitionNamingWhereItIs() {
    byte[] ipc = schemaMessage(SCHEMA);
    breakUtf8(ipc, "broken_name");
    ByteBuffer holder = direct(concat(new byte[5], new byte[16], ipc, endOfStream()));
    holder.position(5);
    ByteBuffer[] inputs = {direct(good), holder, direct(ipc)};

    MalformedPartitionException e = assertThrows(MalformedPartitionException.class,
        () -> DeviceTable.readSchema(ipc, inputs));
    assertEquals(1, e.partition());
    assertEquals(16, e.offset());
    assertEquals(-1, e.column());
    assertInstanceOf(IllegalArgumentException.class, e.getCause(), "Arrow Java's Invalid UTF-8");
    assertTrue(e.getMessage().startsWith("partition 1: the Schema message at offset 16 "),
        e.getMessage());

    e = assertThrows(MalformedPartitionException.class, () -> DeviceTable.readSchema(ipc, null));
    assertEquals(-1, e.partition(), "addresses, not buffers: no partition to name");
    assertEquals(FunnelException.Code.MALFORMED, e.code());
  }
}
