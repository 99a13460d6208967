package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.arrow.c.ArrowArray;
import org.apache.arrow.c.ArrowSchema;
import org.apache.arrow.c.Data;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;

/**
 * The Arrow C Device Data Interface export (issue 6, item 2), checked by a consumer that shares no
 * code with funnel: Arrow Java's C Data importer. On the cpu backend the export is imported into a
 * VectorSchemaRoot, after the DeviceTable, its reader and its device are closed, and compared row
 * by row with Arrow Java's reading of the partitions; on cuda (device memory Arrow Java cannot
 * read) the structs are read and released through Arrow Java's ArrowArray. Nothing is left after
 * the release: native allocations and events, Java handles, Arrow memory.
 */
class DeviceArrayExportTest extends DeviceTestCase {
  /** struct ArrowDeviceArray: the ArrowArray (80 bytes), device_id, device_type, sync_event. */
  private static final int DEVICE_ARRAY_BYTES = 128;

  private static final int DEVICE_ID = 80;
  private static final int DEVICE_TYPE = 88;
  private static final int SYNC_EVENT = 96;

  private List<byte[]> partitions(Random random, int n) {
    List<byte[]> parts = new ArrayList<>();
    for (int p = 0; p < n; p++) {
      parts.add(
          TestSupport.randomStream(
              TestSupport.allTypesSchema(), allocator, random, 0.2, random.nextInt(400)));
    }
    return parts;
  }

  /** Reads the partitions and exports the table into the given structs; closes everything else. */
  private void readAndExport(List<byte[]> parts, ArrowBuf deviceArray, long schemaAddress) {
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = TestSupport.read(reader, parts)) {
      table.exportTo(deviceArray.memoryAddress(), schemaAddress);
    }
    device.close(); // the export holds what it needs
    device = null;
  }

  @Test
  void arrowJavaImportsTheCpuExportAfterTheTableIsClosed() {
    assumeTrue(TestSupport.BACKEND.equals("cpu"), "Arrow Java reads host memory only: cpu backend");
    List<byte[]> parts = partitions(new Random(61), 9);
    long[] native0 = Faults.nativeLive();
    long[] handles0 = Handles.live();
    try (ArrowBuf deviceArray = allocator.buffer(DEVICE_ARRAY_BYTES);
        ArrowSchema schema = ArrowSchema.allocateNew(allocator)) {
      deviceArray.setZero(0, DEVICE_ARRAY_BYTES);
      readAndExport(parts, deviceArray, schema.memoryAddress());
      assertEquals(1, deviceArray.getInt(DEVICE_TYPE), "device_type ARROW_DEVICE_CPU");
      assertEquals(-1, deviceArray.getLong(DEVICE_ID), "device_id of the CPU");
      assertEquals(0, deviceArray.getLong(SYNC_EVENT), "no event on the CPU");
      assertNotEquals(native0[0], Faults.nativeLive()[0], "the export holds the table's memory");
      ArrowArray array = ArrowArray.wrap(deviceArray.memoryAddress());
      try (VectorSchemaRoot root = Data.importVectorSchemaRoot(allocator, array, schema, null)) {
        TestSupport.Expectation e = TestSupport.assertRowsMatch(root, parts, null, allocator);
        assertEquals(withoutMetadata(e.schema()), withoutMetadata(root.getSchema()), "schema");
      }
    }
    assertArrayEquals(
        Arrays.copyOf(native0, 3), Arrays.copyOf(Faults.nativeLive(), 3),
        "native allocations, pinned allocations and events left after the release");
    long[] handlesAfter = handles0.clone();
    handlesAfter[Handles.Kind.DEVICE.ordinal()]--; // the device was closed
    assertArrayEquals(handlesAfter, Handles.live(), "Java handles left");
  }

  @Test
  void cudaExportIsDeviceMemoryWithItsEvent() {
    assumeTrue(TestSupport.BACKEND.equals("cuda"), "the CUDA case runs with the cuda backend");
    Random random = new Random(62);
    List<byte[]> parts = partitions(random, 5);
    long[] native0 = Faults.nativeLive();
    try (ArrowBuf deviceArray = allocator.buffer(DEVICE_ARRAY_BYTES)) {
      deviceArray.setZero(0, DEVICE_ARRAY_BYTES);
      readAndExport(parts, deviceArray, 0);
      assertEquals(2, deviceArray.getInt(DEVICE_TYPE), "device_type ARROW_DEVICE_CUDA");
      assertEquals(0, deviceArray.getLong(DEVICE_ID), "the CUDA device's ordinal");
      ArrowArray array = ArrowArray.wrap(deviceArray.memoryAddress());
      ArrowArray.Snapshot top = array.snapshot();
      long rows = 0;
      for (byte[] p : parts) {
        rows += TestSupport.arrowRows(p, null, allocator);
      }
      assertEquals(rows, top.length, "rows");
      assertEquals(TestSupport.allTypesSchema().getFields().size(), top.n_children, "columns");
      array.release();
      array.close();
    }
    assertArrayEquals(
        Arrays.copyOf(native0, 3), Arrays.copyOf(Faults.nativeLive(), 3),
        "native allocations, pinned allocations and events left after the release");
  }

  private static Schema withoutMetadata(Schema s) {
    return new Schema(s.getFields());
  }
}
