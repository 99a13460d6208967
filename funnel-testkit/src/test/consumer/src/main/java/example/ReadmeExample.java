package example;

import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelReader;
import dev.funnel.ReadStats;
import dev.funnel.testkit.RandomPartitions;
import dev.funnel.testkit.TableAssert;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/** The README's Java example, as a plugin's code would hold it. */
public final class ReadmeExample {
  public static void main(String[] args) {
    Schema schema = new Schema(List.of(
        Field.nullable("key", new ArrowType.Int(32, true)),
        Field.nullable("name", ArrowType.Utf8.INSTANCE)));
    List<ByteBuffer> partitions = RandomPartitions.of(schema).partitions(200).seed(1).buffers();

    try (FunnelDevice device = FunnelDevice.open("auto");   // cuda if there is a GPU, else cpu
         FunnelReader reader = new FunnelReader(device);     // or new FunnelReader(device, schema)
         DeviceTable table = reader.read(partitions)) {      // direct ByteBuffers, or addresses + lengths
      table.numRows(); table.column(0).nullCount();          // known at once
      ReadStats stats = table.stats();                       // copies, launches, device calls per phase
      System.out.print(table.head(20));                      // waits; first rows as text (toString: one line)
      try (BufferAllocator allocator = new RootAllocator();
           VectorSchemaRoot root = table.toArrow(allocator)) {  // waits, copies back in one pass
        System.out.println("rows " + root.getRowCount() + ", launches " + stats.concatLaunches());
      }
      TableAssert.assertTableEquals(partitions, table);
      System.out.println("the table equals Arrow Java's reading of the partitions");
    }
  }
}
