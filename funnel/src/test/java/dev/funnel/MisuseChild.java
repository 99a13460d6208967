package dev.funnel;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * The hostile sequences of {@link MisuseTest}, each run in a JVM of its own: a crash or a hang
 * there fails that test instead of the whole run. Prints "ok" and exits 0 when every outcome was
 * one the API allows; prints what went wrong and exits 3 otherwise.
 *
 * <p>Allowed outcomes of a call racing a close: it completes with the right answer, or it throws
 * {@link IllegalStateException} naming the closed object. Nothing else: no other exception, no
 * wrong data, no crash, no hang.
 */
public final class MisuseChild {
  private static final int SCALE = Integer.getInteger("funnel.misuse.scale", 1);

  private MisuseChild() {}

  public static void main(String[] args) throws Exception {
    try {
      switch (args[0]) {
        case "toArrowVsClose" -> toArrowVsClose();
        case "headVsClose" -> racesClose(MisuseChild::head);
        case "queriesVsClose" -> racesClose(MisuseChild::queries);
        case "readsVsReaderClose" -> readsVsReaderClose();
        case "pinnedAfterDeviceClose" -> pinnedAfterDeviceClose();
        case "stalePinnedBuffer" -> stalePinnedBuffer();
        case "streams" -> streams();
        case "readsVsStreamClose" -> readsVsStreamClose();
        case "rawAddresses" -> rawAddresses();
        case "droppedWithItsReadInFlight" -> droppedWithItsReadInFlight();
        case "interruptedThread" -> interruptedThread();
        case "pinnedOfAnotherDeviceVsClose" -> pinnedOfAnotherDeviceVsClose();
        default -> throw new IllegalArgumentException("no scenario " + args[0]);
      }
    } catch (Throwable t) {
      System.out.println("FAILED: " + t);
      t.printStackTrace(System.out);
      System.out.flush();
      System.exit(3);
    }
    System.out.println("ok");
  }

  // ------------------------------------------------------------------ data

  private static final Schema SCHEMA =
      new Schema(List.of(Field.nullable("v", new ArrowType.Int(64, true))));

  /**
   * A partition of {@code rows} int64 values v[i] = seed + i (every 7th null), as Arrow Java writes
   * it, in a direct buffer.
   */
  static ByteBuffer partition(BufferAllocator allocator, int rows, long seed) {
    try (VectorSchemaRoot root = VectorSchemaRoot.create(SCHEMA, allocator)) {
      BigIntVector v = (BigIntVector) root.getVector(0);
      v.allocateNew(rows);
      for (int i = 0; i < rows; i++) {
        if (i % 7 == 3) {
          v.setNull(i);
        } else {
          v.set(i, seed + i);
        }
      }
      root.setRowCount(rows);
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowStreamWriter w = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
        w.start();
        w.writeBatch();
        w.end();
      }
      byte[] bytes = out.toByteArray();
      return ByteBuffer.allocateDirect(bytes.length).put(bytes).flip();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Checks a copy of the partitions' rows: value i of partition p is p * 1e9 + i. */
  static void check(VectorSchemaRoot root, int parts, int rows) {
    if (root.getRowCount() != parts * rows) {
      throw new AssertionError(root.getRowCount() + " rows, expected " + parts * rows);
    }
    BigIntVector v = (BigIntVector) root.getVector(0);
    for (int p = 0; p < parts; p++) {
      for (int i = 0; i < rows; i++) {
        int r = p * rows + i;
        boolean isNull = i % 7 == 3;
        if (v.isNull(r) != isNull || (!isNull && v.get(r) != p * 1_000_000_000L + i)) {
          throw new AssertionError("row " + r + " is " + v.getObject(r));
        }
      }
    }
  }

  static ByteBuffer[] partitions(BufferAllocator allocator, int parts, int rows) {
    ByteBuffer[] b = new ByteBuffer[parts];
    for (int p = 0; p < parts; p++) {
      b[p] = partition(allocator, rows, p * 1_000_000_000L);
    }
    return b;
  }

  /** An IllegalStateException must name the closed object; anything else is a failure. */
  static void closedOk(IllegalStateException e, String what) {
    if (e.getMessage() == null || !e.getMessage().contains(what + " is closed")) {
      throw new AssertionError("unexpected IllegalStateException", e);
    }
  }

  // ------------------------------------------------------- forgotten, interrupted

  /**
   * Reads whose tables and input buffers are dropped at once, their work still queued: the
   * cleaner frees each table, which waits for that work, and the direct buffers must stay until
   * it has (a hostile test, 2026-11-29: the JDK freed a 32 MiB buffer in the same collection and
   * the cpu backend's copy of it crashed the JVM, 5 runs of 5).
   */
  static void droppedWithItsReadInFlight() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(device)) {
      long before = Handles.leaked()[Handles.Kind.TABLE.ordinal()];
      for (int round = 0; round < 3; round++) {
        readAndDrop(reader, partition(allocator, 4 << 20, 0));
        for (int i = 0; i < 20; i++) {
          System.gc();
          Thread.sleep(20);
        }
      }
      // the tables were freed by the cleaner (counted as leaks), not kept
      long leaked = Handles.leaked()[Handles.Kind.TABLE.ordinal()] - before;
      if (leaked < 1) {
        throw new AssertionError("no dropped table was freed by the cleaner: " + leaked);
      }
    }
  }

  private static void readAndDrop(FunnelReader reader, ByteBuffer part) {
    reader.read(part); // the table, and with it the last reference to part, dropped at once
  }

  /**
   * A read, and a reader of a schema, made on a thread whose interrupt is pending (a Spark task
   * being cancelled): they work, and the interrupt is left for the caller (a hostile test,
   * 2026-11-29: the read threw MalformedPartitionException naming the valid partition 0, from
   * Arrow Java's ClosedByInterruptException).
   */
  static void interruptedThread() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(device)) {
      ByteBuffer part = partition(allocator, 100, 0);
      Thread.currentThread().interrupt();
      try (DeviceTable t = reader.read(part.duplicate());
          FunnelReader withSchema = new FunnelReader(device, SCHEMA);
          DeviceTable u = withSchema.read(part.duplicate())) {
        if (!Thread.currentThread().isInterrupted()) {
          throw new AssertionError("the read took the thread's interrupt");
        }
        Thread.interrupted(); // Arrow Java's copy back is the caller's own business
        for (DeviceTable table : List.of(t, u)) {
          try (VectorSchemaRoot root = table.toArrow(allocator)) {
            check(root, 1, 100);
          }
        }
      } finally {
        Thread.interrupted();
      }
    }
  }

  /**
   * A partition in a pinned block of device B read by a reader of device A, the block closed
   * while the read's work is queued: after B was closed (the block's close then frees B and its
   * pool), or with B open and the bytes where the partition was overwritten by B's next block.
   * The read holds the block, so the rows are the partition's (a hostile test, 2026-11-29: the
   * read held blocks of its own device only: SIGSEGV, or wrong rows).
   */
  static void pinnedOfAnotherDeviceVsClose() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice a = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(a)) {
      int rows = 1 << 20; // 8 MiB of int64
      ByteBuffer part = partition(allocator, rows, 0);
      int n = part.remaining();
      for (boolean closeB : new boolean[] {true, false, true, false}) {
        FunnelDevice b = TestSupport.openDevice();
        PinnedBuffer block = b.pinnedPool().allocate(n);
        block.write(0, part.duplicate());
        if (closeB) {
          b.close(); // the block holds B
        }
        DeviceTable t = reader.read(new long[] {block.address()}, new long[] {n});
        block.close(); // waits for the read's work
        PinnedBuffer other = closeB ? null : b.pinnedPool().allocate(n);
        if (other != null) {
          other.write(0, new byte[n], 0, n); // zeros, where the partition may have been
        }
        try (VectorSchemaRoot root = t.toArrow(allocator)) {
          check(root, 1, rows);
        } finally {
          t.close();
          if (other != null) {
            other.close();
          }
          b.close();
        }
      }
    }
  }

  // ------------------------------------------------------- table vs close

  /** toArrow on one thread, close of the same table on another: 256 MiB, then many small. */
  static void toArrowVsClose() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(device)) {
      // 32 Mi int64 rows: 256 MiB of values
      ByteBuffer[] big = partitions(allocator, 4, 8 << 20);
      for (int i = 0; i < 4; i++) {
        race(reader.read(big), t -> copyAndCheck(t, allocator, 4, 8 << 20), i % 2 == 0 ? 0 : 20);
      }
      big = null;
      ByteBuffer[] small = partitions(allocator, 8, 500);
      for (int i = 0; i < 1000 * SCALE; i++) {
        race(reader.read(small), t -> copyAndCheck(t, allocator, 8, 500), i % 3);
      }
    }
  }

  private static void copyAndCheck(DeviceTable t, BufferAllocator allocator, int parts, int rows) {
    try (VectorSchemaRoot root = t.toArrow(allocator)) {
      check(root, parts, rows);
    }
  }

  /** {@code use} on a new thread against {@code table.close()} here, after {@code delayMs}. */
  static void race(DeviceTable table, Consumer<DeviceTable> use, int delayMs) throws Exception {
    AtomicReference<Throwable> failure = new AtomicReference<>();
    CountDownLatch started = new CountDownLatch(1);
    Thread t = new Thread(() -> {
      started.countDown();
      try {
        use.accept(table);
      } catch (IllegalStateException e) {
        try {
          closedOk(e, "DeviceTable");
        } catch (Throwable bad) {
          failure.set(bad);
        }
      } catch (Throwable e) {
        failure.set(e);
      }
    });
    t.start();
    started.await();
    if (delayMs > 0) {
      Thread.sleep(ThreadLocalRandom.current().nextInt(delayMs));
    }
    table.close();
    t.join();
    if (failure.get() != null) {
      throw new AssertionError("the racing call failed", failure.get());
    }
  }

  /** Many small tables, each used by another thread while closed here. */
  static void racesClose(Consumer<DeviceTable> use) throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(device)) {
      ByteBuffer[] parts = partitions(allocator, 8, 500);
      for (int i = 0; i < 2000 * SCALE; i++) {
        race(reader.read(parts), use, i % 3);
      }
    }
  }

  private static void head(DeviceTable t) {
    String s = t.head(5);
    if (!s.contains("null") || !s.contains("4")) { // rows of partition 0: 0, 1, 2, null, 4
      throw new AssertionError("head(5) printed " + s);
    }
  }

  private static void queries(DeviceTable t) {
    for (int k = 0; k < 20; k++) {
      t.isReady();
      if (t.stats().partitions() != 8) {
        throw new AssertionError("stats: " + t.stats());
      }
      t.waitReady();
    }
  }

  // ------------------------------------------------------- reader vs close

  /** Reads on 1 and on 16 threads while another closes the reader: no hang, every table right. */
  static void readsVsReaderClose() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice()) {
      ByteBuffer[] parts = partitions(allocator, 4, 300);
      for (int round = 0; round < 100 * SCALE; round++) {
        int threads = round % 2 == 0 ? 1 : 16;
        FunnelReader reader = new FunnelReader(device);
        readWhileClosing(threads, reader::close, () -> reader.read(parts), allocator, 4, 300,
            "FunnelReader");
      }
    }
  }

  interface Read {
    DeviceTable read();
  }

  /** {@code threads} threads read until {@code close} makes them fail; every table is checked. */
  static void readWhileClosing(int threads, Runnable close, Read read, BufferAllocator allocator,
      int parts, int rows, String closed) throws Exception {
    AtomicReference<Throwable> failure = new AtomicReference<>();
    CountDownLatch reading = new CountDownLatch(threads);
    List<Thread> all = new ArrayList<>();
    for (int k = 0; k < threads; k++) {
      Thread t = new Thread(() -> {
        java.util.ArrayDeque<DeviceTable> tables = new java.util.ArrayDeque<>();
        try {
          try {
            for (int n = 0; ; n++) {
              tables.add(read.read());
              if (n == 0) {
                reading.countDown();
              }
              if (tables.size() > 4) { // a few reads in flight each, not an ever longer queue
                verify(tables.poll(), allocator, parts, rows);
              }
            }
          } catch (IllegalStateException e) {
            closedOk(e, closed);
          }
          while (!tables.isEmpty()) {
            verify(tables.poll(), allocator, parts, rows);
          }
        } catch (Throwable e) {
          failure.compareAndSet(null, e);
        } finally {
          tables.forEach(DeviceTable::close);
          if (reading.getCount() > 0) {
            reading.countDown();
          }
        }
      });
      all.add(t);
      t.start();
    }
    reading.await();
    close.run();
    for (Thread t : all) {
      t.join();
    }
    if (failure.get() != null) {
      throw new AssertionError("a reading thread failed", failure.get());
    }
  }

  /** Waits for a table (never hangs: its work was enqueued), checks its rows, closes it. */
  private static void verify(DeviceTable table, BufferAllocator allocator, int parts, int rows) {
    try (table) {
      table.waitReady();
      try (VectorSchemaRoot root = table.toArrow(allocator)) {
        check(root, parts, rows);
      }
    }
  }

  // ---------------------------------------------------------------- pinned

  /**
   * Writing into a pinned block after its device is closed, and closing it then: no crash, no
   * exception, and the block (and with the last one, the device's pool) is given back.
   */
  static void pinnedAfterDeviceClose() throws Exception {
    long[] native0 = Faults.nativeLive();
    FunnelDevice device = TestSupport.openDevice();
    PinnedBuffer block = device.pinnedPool().allocate(1 << 20);
    ByteBuffer b = block.buffer();
    PinnedBuffer unexposed = device.pinnedPool().allocate(4096);
    device.close();
    for (int i = 0; i < b.capacity(); i += 4096) {
      b.put(i, (byte) i); // the pool is still mapped: the block holds the device
    }
    unexposed.write(0, new byte[] {1, 2, 3}, 0, 3);
    block.close();
    unexposed.close();
    block.close(); // idempotent
    try {
      block.buffer();
      throw new AssertionError("buffer() of a closed block");
    } catch (IllegalStateException e) {
      closedOk(e, "PinnedBuffer");
    }
    b.put(0, (byte) 1); // a stale buffer still writes into memory no one else has
    b = null;
    awaitNative(native0, "the pool and the device, after the last block went");
  }

  /** Waits (collecting garbage) until the native objects alive are back to {@code expected}. */
  static void awaitNative(long[] expected, String what) throws InterruptedException {
    long deadline = System.nanoTime() + 20_000_000_000L;
    while (!java.util.Arrays.equals(expected, Faults.nativeLive())) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(what + ": native objects alive "
            + java.util.Arrays.toString(Faults.nativeLive()) + ", expected "
            + java.util.Arrays.toString(expected));
      }
      System.gc();
      Thread.sleep(10);
    }
  }

  /**
   * A stale buffer of a closed block writes nowhere another block lives: not into a new device's
   * pool, not into a block of the same pool allocated after the close.
   */
  static void stalePinnedBuffer() throws Exception {
    final int size = 1 << 20;
    FunnelDevice first = TestSupport.openDevice();
    PinnedBuffer old = first.pinnedPool().allocate(size);
    ByteBuffer stale = old.buffer();
    old.close();
    first.close();
    try (FunnelDevice second = TestSupport.openDevice()) {
      List<PinnedBuffer> fresh = new ArrayList<>();
      for (int k = 0; k < 8; k++) { // fill the new pool's first blocks
        PinnedBuffer p = second.pinnedPool().allocate(size);
        p.write(0, new byte[size], 0, size);
        fresh.add(p);
      }
      ByteBuffer stale2;
      try (PinnedBuffer again = second.pinnedPool().allocate(size)) {
        stale2 = again.buffer();
      }
      for (int k = 0; k < 4; k++) { // allocated after `again` closed, while stale2 is reachable
        PinnedBuffer p = second.pinnedPool().allocate(size);
        p.write(0, new byte[size], 0, size);
        fresh.add(p);
      }
      Random r = new Random(1);
      for (int i = 0; i < size; i++) { // scribble through both stale buffers
        stale.put(i, (byte) (1 + r.nextInt(255)));
        stale2.put(i, (byte) (1 + r.nextInt(255)));
      }
      try (BufferAllocator allocator = new RootAllocator();
          FunnelReader reader = new FunnelReader(second)) {
        for (PinnedBuffer p : fresh) {
          long a = p.address();
          if (overlaps(a, size, stale2, size) || overlaps(a, size, stale, size)) {
            throw new AssertionError("a block allocated after a close lies under its stale buffer");
          }
          ByteBuffer part = partition(allocator, 1000, 0);
          int n = part.remaining();
          p.write(0, part);
          try (DeviceTable t = reader.read(new long[] {a}, new long[] {n});
              VectorSchemaRoot root = t.toArrow(allocator)) {
            check(root, 1, 1000);
          }
          for (int i = 0; i < size; i += 4096) {
            stale.put(i, (byte) 0x5a);
            stale2.put(i, (byte) 0x5a);
          }
          try (DeviceTable t = reader.read(new long[] {a}, new long[] {n});
              VectorSchemaRoot root = t.toArrow(allocator)) {
            check(root, 1, 1000); // unchanged by the scribbles
          }
        }
      } finally {
        fresh.forEach(PinnedBuffer::close);
      }
    }
  }

  private static boolean overlaps(long a, long n, ByteBuffer b, long m) {
    long base = org.apache.arrow.memory.util.MemoryUtil.getByteBufferAddress(b);
    return a < base + m && base < a + n;
  }

  // --------------------------------------------------------------- streams

  /**
   * Streams as objects: a closed stream, a twice-closed one, one of another device, one closed
   * after its device.
   */
  static void streams() throws Exception {
    long[] native0 = Faults.nativeLive();
    try (BufferAllocator allocator = new RootAllocator()) {
      ByteBuffer[] parts = partitions(allocator, 3, 100);
      FunnelDevice device = TestSupport.openDevice();
      FunnelDevice other = TestSupport.openDevice();
      FunnelReader reader = new FunnelReader(device);
      DeviceStream stream = device.createStream();
      try (DeviceTable t = reader.read(stream, parts); VectorSchemaRoot root = t.toArrow(allocator)) {
        check(root, 3, 100);
      }
      stream.close();
      stream.close(); // twice: nothing
      try {
        reader.read(stream, parts).close();
        throw new AssertionError("a read on a closed stream");
      } catch (IllegalStateException e) {
        closedOk(e, "DeviceStream");
      }
      try (DeviceStream foreign = other.createStream()) {
        reader.read(foreign, parts).close();
        throw new AssertionError("a read on another device's stream");
      } catch (IllegalArgumentException e) {
        if (!e.getMessage().contains("another device")) {
          throw e;
        }
      }
      DeviceStream late = device.createStream();
      DeviceTable pending = reader.read(late, parts);
      reader.close();
      device.close();
      other.close();
      late.close(); // after its device: completes its work, ends its worker
      try (VectorSchemaRoot root = pending.toArrow(allocator)) {
        check(root, 3, 100);
      }
      pending.close();
    }
    awaitNative(native0, "streams, tables and devices");
  }

  /** Reads on 1 and 16 threads on a caller's stream while another thread closes the stream. */
  static void readsVsStreamClose() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(device)) {
      ByteBuffer[] parts = partitions(allocator, 4, 300);
      for (int round = 0; round < 100 * SCALE; round++) {
        DeviceStream stream = device.createStream();
        readWhileClosing(round % 2 == 0 ? 1 : 16, stream::close, () -> reader.read(stream, parts),
            allocator, 4, 300, "DeviceStream");
      }
    }
  }

  // --------------------------------------------------------- raw addresses

  /** Obviously invalid raw addresses are refused before the native code sees them. */
  static void rawAddresses() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        FunnelDevice device = TestSupport.openDevice();
        FunnelReader reader = new FunnelReader(device)) {
      long[][] bad = {{0x1234L, 16}, {-1L, 16}, {0L, 16}, {Long.MAX_VALUE - 4, 16}, {1L << 20, -1}};
      for (long[] b : bad) {
        try {
          reader.read(new long[] {b[0]}, new long[] {b[1]}).close();
          throw new AssertionError("read of address " + b[0] + " length " + b[1]);
        } catch (IllegalArgumentException expected) {
          // refused in Java
        }
      }
      try (DeviceTable t = reader.read(partitions(allocator, 1, 10))) {
        long[][] exports = {{0, 0}, {0x1234, 0}, {-8, 0}, {1L << 20 | 4, 0}, {1L << 20, 3},
          {1L << 20, -8}};
        for (long[] e : exports) {
          try {
            t.exportTo(e[0], e[1]);
            throw new AssertionError("export to " + e[0] + ", " + e[1]);
          } catch (IllegalArgumentException expected) {
            // refused in Java
          }
        }
      }
    }
  }
}
