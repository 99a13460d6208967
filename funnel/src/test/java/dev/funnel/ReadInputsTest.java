package dev.funnel;

import static dev.funnel.TestSupport.assertTableMatches;
import static dev.funnel.TestSupport.checked;
import static dev.funnel.TestSupport.direct;
import static dev.funnel.TestSupport.randomStream;
import static dev.funnel.TestSupport.read;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Where the partitions' bytes come from: ByteBuffers, raw addresses, the caller's stream. */
class ReadInputsTest extends DeviceTestCase {
  private List<byte[]> parts;

  @BeforeEach
  void writePartitions() {
    Schema schema = TestSupport.allTypesSchema();
    Random random = new Random(21);
    parts = new ArrayList<>();
    for (int p = 0; p < 25; p++) {
      parts.add(p % 6 == 3 ? new byte[0]
          : randomStream(schema, allocator, random, 0.2, random.nextInt(80), random.nextInt(5)));
    }
  }

  @Test
  void readsPartitionsAtAddressesOfArrowBufs() {
    List<ArrowBuf> bufs = new ArrayList<>();
    try {
      long[] addresses = new long[parts.size()];
      long[] lengths = new long[parts.size()];
      for (int i = 0; i < parts.size(); i++) {
        byte[] p = parts.get(i);
        if (p.length > 0) {
          ArrowBuf b = TestSupport.arrowBuf(allocator, p);
          bufs.add(b);
          addresses[i] = b.memoryAddress();
        }
        lengths[i] = p.length;
      }
      try (FunnelReader reader = new FunnelReader(device);
          DeviceTable table = checked(reader.read(addresses, lengths), parts.size())) {
        assertTableMatches(table, parts, null, allocator);
      }
    } finally {
      bufs.forEach(ArrowBuf::close);
    }
  }

  @Test
  void readsPartitionsAtAddressesOfDirectByteBuffers() {
    ByteBuffer[] buffers = direct(parts);
    long[] addresses = new long[parts.size()];
    long[] lengths = new long[parts.size()];
    for (int i = 0; i < buffers.length; i++) {
      addresses[i] = parts.get(i).length == 0 ? 0 : MemoryUtil.getByteBufferAddress(buffers[i]);
      lengths[i] = parts.get(i).length;
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = checked(reader.read(addresses, lengths), parts.size())) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void tableOwnsItsDataOnceReady() {
    List<ArrowBuf> bufs = new ArrayList<>();
    long[] addresses = new long[parts.size()];
    long[] lengths = new long[parts.size()];
    for (int i = 0; i < parts.size(); i++) {
      ArrowBuf b = TestSupport.arrowBuf(allocator, parts.get(i));
      bufs.add(b);
      addresses[i] = parts.get(i).length == 0 ? 0 : b.memoryAddress();
      lengths[i] = parts.get(i).length;
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = checked(reader.read(addresses, lengths), parts.size())) {
      table.waitReady();
      // after waitReady the partitions may be released: scribble over them, then free them
      for (ArrowBuf b : bufs) {
        b.setOne(0, b.capacity());
        b.close();
      }
      bufs.clear();
      assertTableMatches(table, parts, null, allocator);
    } finally {
      bufs.forEach(ArrowBuf::close);
    }
  }

  @Test
  void readsOnTheCallersStream() {
    try (DeviceStream stream = device.createStream();
        FunnelReader reader = new FunnelReader(device)) {
      ByteBuffer[] buffers = direct(parts);
      try (DeviceTable table = checked(reader.read(stream, buffers), parts.size())) {
        table.waitReady();
        assertTableMatches(table, parts, null, allocator);
      }
      long[] addresses = new long[parts.size()];
      long[] lengths = new long[parts.size()];
      for (int i = 0; i < buffers.length; i++) {
        addresses[i] = parts.get(i).length == 0 ? 0 : MemoryUtil.getByteBufferAddress(buffers[i]);
        lengths[i] = parts.get(i).length;
      }
      try (DeviceTable table = checked(reader.read(stream, addresses, lengths), parts.size())) {
        assertTableMatches(table, parts, null, allocator);
      }
    }
  }

  @Test
  void readsAListOfByteBuffers() {
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = checked(reader.read(Arrays.asList(direct(parts))), parts.size())) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void readsEachBufferFromItsPositionToItsLimit() {
    Random random = new Random(22);
    ByteBuffer[] buffers = new ByteBuffer[parts.size()];
    for (int i = 0; i < buffers.length; i++) {
      byte[] p = parts.get(i);
      int before = 1 + random.nextInt(13);
      int after = 1 + random.nextInt(13);
      ByteBuffer b = ByteBuffer.allocateDirect(before + p.length + after);
      byte[] junk = TestSupport.randomBytes(random, before + p.length + after);
      b.put(junk).position(before);
      b.put(p);
      b.position(before).limit(before + p.length);
      // every other one as a slice, whose own position is 0
      buffers[i] = i % 2 == 0 ? b : b.slice();
    }
    try (FunnelReader reader = new FunnelReader(device);
        DeviceTable table = read(reader, buffers)) {
      assertTableMatches(table, parts, null, allocator);
    }
  }

  @Test
  void concurrentReadsOnOneReaderAreEachRight() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try (FunnelReader reader = new FunnelReader(device)) {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < 16; t++) {
        List<byte[]> mine = parts.subList(t % 5, parts.size() - t % 3);
        done.add(pool.submit(() -> {
          try (DeviceTable table = read(reader, mine)) {
            assertTableMatches(table, mine, null, allocator);
          }
        }));
      }
      for (Future<?> f : done) {
        f.get(2, TimeUnit.MINUTES);
      }
    } finally {
      pool.shutdownNow();
      assertTrue(pool.awaitTermination(1, TimeUnit.MINUTES));
    }
  }

  @Test
  void rejectsBadArgumentsBeforeReading() {
    byte[] p = parts.get(0);
    ByteBuffer good = direct(p);
    try (FunnelReader reader = new FunnelReader(device)) {
      assertThrows(IllegalArgumentException.class,
          () -> reader.read(good, ByteBuffer.wrap(p)), "heap ByteBuffer");
      assertThrows(IllegalArgumentException.class,
          () -> reader.read(good, null), "null ByteBuffer");
      assertThrows(IllegalArgumentException.class,
          () -> reader.read(new long[] {1, 2}, new long[] {1}), "arrays of different lengths");
      assertThrows(IllegalArgumentException.class,
          () -> reader.read(new long[] {MemoryUtil.getByteBufferAddress(good)}, new long[] {-1}),
          "negative length");
      assertThrows(IllegalArgumentException.class,
          () -> reader.read(new long[] {0}, new long[] {p.length}), "address 0 with bytes");
      try (DeviceTable table = read(reader, good)) {
        assertTableMatches(table, List.of(p), null, allocator);
      }
      assertEquals(0, allocator.getAllocatedMemory());
    }
  }
}
