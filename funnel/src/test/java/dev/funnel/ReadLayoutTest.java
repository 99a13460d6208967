package dev.funnel;

import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.bareBatch;
import static dev.funnel.TestSupport.concat;
import static dev.funnel.TestSupport.endOfStream;
import static dev.funnel.TestSupport.nullable;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static dev.funnel.TestSupport.schemaMessage;
import static dev.funnel.TestSupport.streamOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.stream.IntStream;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseLargeVariableWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.BitVectorHelper;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.types.MetadataVersion;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.TransferPair;
import org.junit.jupiter.api.Test;

/**
 * Layouts of the input that move bits and offsets around: sliced vectors, partition boundaries at
 * every bit offset of the output bitmaps, offsets that do not start at 0, other framings.
 */
class ReadLayoutTest extends DeviceTestCase {

  /** bool, nullable fixed-width and variable-width columns: the bitmaps are what moves. */
  private static Schema bitSchema() {
    return new Schema(
        List.of(
            nullable("flag", ArrowType.Bool.INSTANCE),
            nullable("n", new ArrowType.Int(32, true)),
            nullable("s", ArrowType.Utf8.INSTANCE),
            nullable("b", ArrowType.LargeBinary.INSTANCE),
            TestSupport.notNull("bit", ArrowType.Bool.INSTANCE)));
  }

  @Test
  void slicedVectorsWithUnalignedStartsConcatenate() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(11);
    List<byte[]> parts = new ArrayList<>();
    try (VectorSchemaRoot full = VectorSchemaRoot.create(schema, allocator)) {
      TestSupport.fill(full, 400, random, 0.3);
      int[][] ranges = {{1, 13}, {3, 5}, {7, 1}, {9, 64}, {13, 0}, {21, 37}, {250, 150}, {5, 8},
          {63, 2}, {100, 99}, {399, 1}};
      for (int[] range : ranges) {
        List<FieldVector> sliced = new ArrayList<>();
        for (FieldVector v : full.getFieldVectors()) {
          TransferPair tp = v.getTransferPair(allocator);
          tp.splitAndTransfer(range[0], range[1]);
          sliced.add((FieldVector) tp.getTo());
        }
        try (VectorSchemaRoot slice = new VectorSchemaRoot(sliced)) {
          assertEquals(range[1], slice.getRowCount());
          parts.add(streamOf(slice));
        }
      }
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void partitionsOf1To17RowsPutBoundariesAtEveryBitOffset() {
    Schema schema = bitSchema();
    Random random = new Random(12);
    List<Integer> sizes = new ArrayList<>(IntStream.rangeClosed(1, 17).boxed().toList());
    List<List<Integer>> orders = new ArrayList<>();
    orders.add(new ArrayList<>(sizes));
    Collections.reverse(sizes);
    orders.add(new ArrayList<>(sizes));
    for (int k = 0; k < 4; k++) {
      Collections.shuffle(sizes, random);
      orders.add(new ArrayList<>(sizes));
    }
    double[] nullRates = {0.5, 0.0, 1.0, 0.1};
    try (FunnelReader reader = new FunnelReader(device)) {
      for (List<Integer> order : orders) {
        List<byte[]> parts = new ArrayList<>();
        for (int p = 0; p < order.size(); p++) {
          parts.add(randomStream(schema, allocator, random, nullRates[p % 4], order.get(p)));
        }
        try (DeviceTable table = read(reader, parts)) {
          assertEquals(153, table.numRows());
          assertTableMatches(table, parts, null, allocator);
        }
      }
    }
  }

  @Test
  void everyRunOfOneRowPartitionsFillsTheBitmapsBitByBit() {
    Schema schema = bitSchema();
    Random random = new Random(13);
    try (FunnelReader reader = new FunnelReader(device)) {
      for (int n = 1; n <= 17; n++) {
        List<byte[]> parts = new ArrayList<>();
        for (int p = 0; p < n; p++) {
          // nulls only in the last partition: every earlier bit comes from an all-valid piece
          parts.add(randomStream(schema, allocator, random, p == n - 1 ? 1.0 : 0.0, 1));
        }
        try (DeviceTable table = read(reader, parts)) {
          assertTableMatches(table, parts, null, allocator);
        }
      }
    }
  }

  @Test
  void offsetsNotStartingAtZeroAreRebased() {
    Schema schema = bitSchema();
    Random random = new Random(14);
    List<byte[]> parts = new ArrayList<>();
    try (VectorSchemaRoot full = VectorSchemaRoot.create(schema, allocator)) {
      TestSupport.fill(full, 120, random, 0.3);
      int[][] ranges = {{5, 20}, {8, 8}, {1, 1}, {33, 0}, {77, 43}, {0, 120}};
      for (int[] range : ranges) {
        try (ArrowRecordBatch batch = rangeBatch(full, range[0], range[1])) {
          byte[] bare = bareBatch(batch);
          parts.add(concat(schemaMessage(schema), bare, endOfStream()));
        }
      }
    }
    // the written offsets really do not start at 0 (else this test tests nothing new)
    assertNotEquals(0, firstUtf8Offset(parts.get(0)));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void ipcFilePartitionsReadLikeTheirStreams() throws IOException {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(15);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 6; p++) {
      if (p % 2 == 0) {
        parts.add(randomStream(schema, allocator, random, 0.2, random.nextInt(50), 3));
        continue;
      }
      try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (ArrowFileWriter writer = new ArrowFileWriter(root, null, Channels.newChannel(out))) {
          writer.start();
          for (int b = 0; b < p; b++) {
            TestSupport.fill(root, random.nextInt(40), random, 0.2);
            writer.writeBatch();
          }
          writer.end();
        }
        parts.add(out.toByteArray());
      }
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void legacyFramingWithoutContinuationMarkersReads() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(16);
    IpcOption legacy = new IpcOption(true, MetadataVersion.V4);
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < 5; p++) {
      IpcOption option = p % 2 == 0 ? legacy : IpcOption.DEFAULT;
      parts.add(randomStream(schema, allocator, random, 0.2, option, random.nextInt(30), 7));
    }
    assertNotEquals(-1, TestSupport.getInt(parts.get(0), 0), "legacy framing has no marker");
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void partitionHoldingSeveralConcatenatedStreamsReadsThemAll() {
    // a map task's spills merged by concatenating their streams: one block, several streams
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(17);
    List<byte[]> streams = new ArrayList<>();
    for (int s = 0; s < 4; s++) {
      streams.add(randomStream(schema, allocator, random, 0.2, random.nextInt(40), 2));
    }
    byte[] block = concat(streams.toArray(new byte[0][]));
    List<byte[]> parts = List.of(streams.get(0), block, streams.get(3));
    List<byte[]> asArrowJavaReadsThem = new ArrayList<>();
    asArrowJavaReadsThem.add(streams.get(0));
    asArrowJavaReadsThem.addAll(streams);
    asArrowJavaReadsThem.add(streams.get(3));
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, parts)) {
      assertTableMatches(table, asArrowJavaReadsThem, null, allocator);
    }
  }

  /**
   * Rows [start, start + length) of `full` as one RecordBatch that Arrow Java's writer would never
   * produce: offsets sliced in place (so they start at offsets[start], not 0) over the whole data
   * buffer, fixed-width data sliced, bitmaps rebuilt from start by plain loops.
   */
  private ArrowRecordBatch rangeBatch(VectorSchemaRoot full, int start, int length) {
    List<ArrowFieldNode> nodes = new ArrayList<>();
    List<ArrowBuf> buffers = new ArrayList<>();
    List<ArrowBuf> owned = new ArrayList<>();
    try {
      for (FieldVector v : full.getFieldVectors()) {
        int nulls = 0;
        ArrowBuf validity = allocator.buffer(Math.max(1, (length + 7) / 8));
        owned.add(validity);
        validity.setZero(0, validity.capacity());
        for (int i = 0; i < length; i++) {
          if (v.isNull(start + i)) {
            nulls++;
          } else {
            BitVectorHelper.setBit(validity, i);
          }
        }
        nodes.add(new ArrowFieldNode(length, nulls));
        buffers.add(validity.slice(0, (length + 7) / 8));
        if (v instanceof BaseVariableWidthVector x) {
          buffers.add(x.getOffsetBuffer().slice(4L * start, 4L * (length + 1)));
          buffers.add(x.getDataBuffer());
        } else if (v instanceof BaseLargeVariableWidthVector x) {
          buffers.add(x.getOffsetBuffer().slice(8L * start, 8L * (length + 1)));
          buffers.add(x.getDataBuffer());
        } else if (v instanceof BitVector x) {
          ArrowBuf bits = allocator.buffer(Math.max(1, (length + 7) / 8));
          owned.add(bits);
          bits.setZero(0, bits.capacity());
          for (int i = 0; i < length; i++) {
            if (!x.isNull(start + i) && x.get(start + i) == 1) {
              BitVectorHelper.setBit(bits, i);
            }
          }
          buffers.add(bits.slice(0, (length + 7) / 8));
        } else if (v instanceof BaseFixedWidthVector x) {
          long width = x.getTypeWidth();
          buffers.add(x.getDataBuffer().slice(width * start, width * length));
        } else {
          throw new IllegalArgumentException("rangeBatch: " + v.getField());
        }
      }
      return new ArrowRecordBatch(length, nodes, buffers);
    } finally {
      for (ArrowBuf b : owned) {
        b.close(); // the batch holds its own references
      }
    }
  }

  /** The first offset of column 's' in a stream's first RecordBatch, as written. */
  private static long firstUtf8Offset(byte[] stream) {
    TestSupport.Span span = TestSupport.first(stream, MessageHeader.RecordBatch);
    org.apache.arrow.flatbuf.RecordBatch rb =
        (org.apache.arrow.flatbuf.RecordBatch)
            TestSupport.message(stream, span).header(new org.apache.arrow.flatbuf.RecordBatch());
    // buffers: flag (2), n (2), then s: validity, offsets, data
    int offsetsBuffer = 2 + 2 + 1;
    long at = span.bodyStart() + rb.buffers(offsetsBuffer).offset();
    return TestSupport.getInt(stream, (int) at);
  }
}
