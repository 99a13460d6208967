package dev.funnel;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.OutOfMemoryException;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BitVectorHelper;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.Types.MinorType;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;

/**
 * The result of a read: one table in device memory, in Arrow layout.
 *
 * <p>Its shape (rows, columns, null counts) is known at once; its data once the read's work has
 * completed. Methods that need the data ({@link #toArrow}, {@link #head}) wait for it; {@link
 * #waitReady()} waits explicitly. Until then the table keeps the read's input buffers reachable.
 * Closing waits for work in flight, then frees the device memory; close is idempotent.
 */
public final class DeviceTable implements AutoCloseable {
  static {
    NativeLibrary.load();
  }

  /** funnel.h's enum funnel_buffer_kind: a column's buffers, in this order. */
  static final int VALIDITY = 0;

  static final int OFFSETS = 1;
  static final int DATA = 2;

  private final NativeHandle handle;
  /**
   * The read's input buffers, reachable until its work has completed (waitReady, close), and from
   * the handle's free too: a table dropped with its read in flight keeps them until the cleaner's
   * free has waited for that read, or the JDK could free a direct buffer under it.
   */
  private final AtomicReference<ByteBuffer[]> inputs;
  private final long numRows;
  private final Schema schema;
  private final List<DeviceColumn> columns;
  /** The columns and their children, depth first: the native table's columns. */
  private final List<DeviceColumn> nodes;

  DeviceTable(long handle, ByteBuffer[] inputs) {
    AtomicReference<ByteBuffer[]> kept = new AtomicReference<>(inputs);
    this.inputs = kept;
    this.handle = new NativeHandle(this, Handles.Kind.TABLE, handle, h -> {
      free(h); // waits for the read's work
      kept.set(null);
      return true;
    });
    try {
      this.numRows = numRows(handle);
      byte[] ipc = schemaIpc(handle);
      this.schema = readSchema(ipc, inputs);
      long[] info = columns(handle);
      // the native table's columns are the schema's nodes, depth first
      List<DeviceColumn> flat = new ArrayList<>();
      List<DeviceColumn> cols = new ArrayList<>();
      int[] next = {0};
      for (Field f : schema.getFields()) {
        cols.add(node(f, info, next, flat));
      }
      if (9 * next[0] != info.length) {
        throw unreadable(-1, -1, "the table has " + info.length / 9 + " columns and nested "
            + "columns, its schema " + next[0], null);
      }
      this.columns = Collections.unmodifiableList(cols);
      this.nodes = Collections.unmodifiableList(flat);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** Field {@code f}'s column from the native column {@code next[0]}, its children after it. */
  private static DeviceColumn node(Field f, long[] info, int[] next, List<DeviceColumn> flat) {
    int o = 9 * next[0]++;
    if (o + 9 > info.length) {
      throw unreadable(-1, -1, "the table has fewer columns than its schema's nodes", null);
    }
    int at = flat.size();
    flat.add(null);
    List<DeviceColumn> kids = new ArrayList<>();
    for (Field c : f.getChildren()) {
      kids.add(node(c, info, next, flat));
    }
    DeviceColumn col = new DeviceColumn(f, info[o + 1], info[o + 2], info[o + 3], info[o + 4],
        info[o + 5], info[o + 6], info[o + 7], info[o + 8], List.copyOf(kids));
    flat.set(at, col);
    return col;
  }

  /** Rows of the table. */
  public long numRows() {
    return numRows;
  }

  /** Columns of the table. */
  public int numColumns() {
    return columns.size();
  }

  /** The table's schema: the partitions' (or the reader's), as Arrow Java reads it. */
  public Schema schema() {
    return schema;
  }

  /**
   * Column {@code i}.
   *
   * @throws IllegalStateException when the table is closed (its addresses would be freed memory)
   */
  public DeviceColumn column(int i) {
    open();
    return columns.get(i);
  }

  /** All columns, in schema order; {@link IllegalStateException} when the table is closed. */
  public List<DeviceColumn> columns() {
    open();
    return columns;
  }

  /** What the read did. */
  public ReadStats stats() {
    return ReadStats.of(handle.call(DeviceTable::stats));
  }

  /** True when the read's copies and concat have completed. Never blocks. */
  public boolean isReady() {
    return handle.call(h -> isReady(h));
  }

  /** Blocks until the read's work has completed; the inputs are then released. */
  public void waitReady() {
    handle.call(h -> {
      waitReady(h);
      return null;
    });
    inputs.set(null);
  }

  private void open() {
    if (handle.isClosed()) {
      throw new IllegalStateException("DeviceTable is closed");
    }
  }

  /**
   * Copies the table back into Arrow Java vectors allocated from {@code allocator}, in one pass.
   * The caller closes the returned root.
   *
   * @throws IllegalStateException when the table has more rows than an Arrow Java vector holds
   */
  public VectorSchemaRoot toArrow(BufferAllocator allocator) {
    if (numRows > Integer.MAX_VALUE) {
      throw new IllegalStateException(
          numRows + " rows do not fit in Arrow Java vectors (at most " + Integer.MAX_VALUE + ")");
    }
    waitReady();
    List<ArrowBuf> buffers = new ArrayList<>();
    List<ArrowFieldNode> fieldNodes = new ArrayList<>();
    long[] addresses = new long[3 * nodes.size()];
    try {
      for (int c = 0; c < nodes.size(); c++) {
        DeviceColumn col = nodes.get(c);
        if (col.length() > Integer.MAX_VALUE) {
          throw new IllegalStateException("column '" + col.name() + "' has " + col.length()
              + " values, more than an Arrow Java vector holds (" + Integer.MAX_VALUE + ")");
        }
        fieldNodes.add(new ArrowFieldNode(col.length(), col.nullCount()));
        addresses[3 * c + VALIDITY] = add(buffers, allocator, col.validitySize());
        if (hasOffsets(col.field())) {
          addresses[3 * c + OFFSETS] = add(buffers, allocator, col.offsetsSize());
        }
        if (hasData(col.field())) {
          addresses[3 * c + DATA] = add(buffers, allocator, col.dataSize());
        }
      }
      handle.call(h -> {
        copyToHost(h, addresses);
        return null;
      });
      return load(allocator, (int) numRows, fieldNodes, buffers);
    } catch (ExceptionInInitializerError | NoClassDefFoundError e) {
      throw new IllegalStateException("toArrow: Arrow Java's memory module cannot start: run the "
          + "JVM with " + ARROW_FLAG + " (funnel's read itself needs no flag)", e);
    } finally {
      for (ArrowBuf b : buffers) {
        b.close();
      }
    }
  }

  /** A root of the table's schema holding {@code rows} rows of the host buffers given. */
  private VectorSchemaRoot load(
      BufferAllocator allocator, int rows, List<ArrowFieldNode> nodes, List<ArrowBuf> buffers) {
    VectorSchemaRoot root = null;
    try (ArrowRecordBatch batch = new ArrowRecordBatch(rows, nodes, buffers)) {
      root = VectorSchemaRoot.create(schema, allocator);
      new VectorLoader(root).load(batch);
      return root;
    } catch (RuntimeException e) {
      if (root != null) {
        root.close();
      }
      if (e instanceof OutOfMemoryException) {
        throw e;
      }
      // the parser refuses what Arrow Java cannot hold; should some input still get through
      throw unreadable(-1, -1, "Arrow Java cannot hold the table funnel read", e);
    }
  }

  private static long add(List<ArrowBuf> buffers, BufferAllocator allocator, long size) {
    ArrowBuf b = allocator.buffer(size);
    buffers.add(b);
    return size > 0 ? b.memoryAddress() : 0;
  }

  private static boolean hasOffsets(Field field) {
    MinorType t = org.apache.arrow.vector.types.Types.getMinorTypeForArrowType(field.getType());
    return t == MinorType.VARCHAR
        || t == MinorType.VARBINARY
        || t == MinorType.LARGEVARCHAR
        || t == MinorType.LARGEVARBINARY
        || isList(field);
  }

  /** A list, large_list or map: offsets into its child, no data buffer. */
  private static boolean isList(Field field) {
    ArrowType t = field.getType();
    return t instanceof ArrowType.List || t instanceof ArrowType.LargeList
        || t instanceof ArrowType.Map;
  }

  /** Whether the column has a data buffer: every one but the nested. */
  private static boolean hasData(Field field) {
    ArrowType t = field.getType();
    return !(isList(field) || t instanceof ArrowType.Struct
        || t instanceof ArrowType.FixedSizeList);
  }



  /**
   * Exports the table, without copying it, through the Arrow C Device Data Interface: fills the
   * caller's {@code struct ArrowDeviceArray} at {@code deviceArrayAddress} with a struct array (one
   * child per column) and, unless {@code schemaAddress} is 0, the caller's {@code struct
   * ArrowSchema} with its schema.
   *
   * <p>On cuda the device type is CUDA and {@code sync_event} points to a {@code CUevent} the
   * consumer waits on before reading (NULL when the read has completed); on the cpu backend the
   * device type is CPU and the export waits for the read first. The array holds the table's memory
   * until the consumer calls its release callback, also after this table and its device are
   * closed. Arrow Java imports the CPU case with {@code Data.importVectorSchemaRoot} (the {@code
   * ArrowArray} is the first member of the device array, at the same address).
   */
  public void exportTo(long deviceArrayAddress, long schemaAddress) {
    if (deviceArrayAddress < FunnelReader.LOWEST_ADDRESS || deviceArrayAddress % 8 != 0) {
      throw new IllegalArgumentException("exportTo: 0x" + Long.toHexString(deviceArrayAddress)
          + " is not the address of an ArrowDeviceArray (non-zero, 8-byte aligned)");
    }
    if (schemaAddress != 0
        && (schemaAddress < FunnelReader.LOWEST_ADDRESS || schemaAddress % 8 != 0)) {
      throw new IllegalArgumentException("exportTo: 0x" + Long.toHexString(schemaAddress)
          + " is not the address of an ArrowSchema (8-byte aligned, or 0 for none)");
    }
    handle.call(h -> {
      exportDevice(h, deviceArrayAddress, schemaAddress);
      return null;
    });
  }

  /**
   * Shares the table with other processes on this host and device: see {@link SharedTable}. Waits
   * for the read, then copies the table's buffers once into shareable memory. An imported table
   * cannot be shared again.
   */
  public SharedTable share() {
    return handle.call(h -> new SharedTable(share(h)));
  }

  /**
   * Waits for work in flight (the read's, and calls on other threads such as a copy back), then
   * frees the device memory; later calls fail with {@link IllegalStateException}. Idempotent.
   */
  @Override
  public void close() {
    handle.close();
    inputs.set(null);
  }

  /**
   * The first {@code n} rows as an aligned text table: a line of column names, a line of types, a
   * rule, one line per row, and "... 999,990 more rows" when there are more; {@code null} for
   * nulls, strings quoted, binary in hex, long values cut to a few dozen characters with "...".
   * For people (a log, a debugger, {@code funnel show}), not for parsing.
   *
   * <p>Waits for the read, then copies back only what the first {@code n} rows take (their
   * validity bits, offsets and values, the string bytes they cover): a look at the head of a large
   * table costs little. {@code head(0)} and an empty table copy nothing.
   *
   * @throws IllegalArgumentException when {@code n} is negative
   * @throws IllegalStateException when the table is closed
   * @throws FunnelException when the read or the copy back fails
   */
  public String head(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("head(" + n + "): the number of rows is negative");
    }
    open();
    int shown = (int) Math.min(n, numRows);
    String last = shown < numRows ? TablePrinter.moreRows(numRows - shown)
        : numRows == 0 ? "(0 rows)" : null;
    try (BufferAllocator allocator = rootAllocator("head");
        VectorSchemaRoot root =
            shown == 0 ? VectorSchemaRoot.create(schema, allocator) : firstRows(allocator, shown)) {
      return TablePrinter.rows(root, shown, last);
    }
  }

  /** The JVM flag Arrow Java's memory module needs on Java 17 (a read does not). */
  static final String ARROW_FLAG = "--add-opens=java.base/java.nio=ALL-UNNAMED";

  /**
   * An Arrow allocator for copying back. Arrow Java's memory module reads java.nio internals:
   * without {@link #ARROW_FLAG} its first use fails (its own message names the flag, but only
   * the first time: later ones are a bare NoClassDefFoundError), so funnel names it every time.
   */
  static BufferAllocator rootAllocator(String what) {
    try {
      return new RootAllocator();
    } catch (LinkageError | RuntimeException e) {
      throw new IllegalStateException(what + " copies the table back into Arrow Java vectors, and "
          + "Arrow Java's memory module cannot start: run the JVM with " + ARROW_FLAG
          + " (funnel's read itself needs no flag)", e);
    }
  }

  /**
   * The first {@code k} rows (1 <= k <= numRows) in Arrow Java vectors, copied back in passes:
   * validity, offsets and fixed-width values of the rows known, then what their offsets reach (a
   * string's bytes, a list's child rows), and so on down a nested column: a flat table takes two
   * passes, a nested one a pass a level more. The table's offsets start at 0, so the rows a
   * column's first rows reach in a child are the child's first rows.
   */
  private VectorSchemaRoot firstRows(BufferAllocator allocator, int k) {
    int n = nodes.size();
    ArrowBuf[][] bufs = new ArrowBuf[n][3];
    long[] rows = new long[n]; // the rows of each column the first k reach; -1: not known yet
    java.util.Arrays.fill(rows, -1);
    boolean[] valuesDone = new boolean[n]; // validity, offsets and fixed-width values copied
    boolean[] done = new boolean[n];
    int[] parent = new int[n];
    java.util.Arrays.fill(parent, -1);
    for (int c = 0; c < n; c++) {
      for (int j = 0, child = c + 1; j < nodes.get(c).children().size(); j++) {
        parent[child] = c;
        child = subtreeEnd(child);
      }
    }
    for (int c = 0; c < n; c++) {
      if (parent[c] < 0) {
        rows[c] = k;
      }
    }
    try {
      for (boolean progress = true; progress; ) {
        progress = false;
        long[] ranges = new long[5 * 3 * n];
        int r = 0;
        for (int c = 0; c < n; c++) { // what the rows known so far need
          DeviceColumn col = nodes.get(c);
          if (rows[c] < 0 || done[c]) {
            continue;
          }
          long m = rows[c];
          if (!valuesDone[c]) {
            long[] len = new long[3];
            len[VALIDITY] = col.nullCount() > 0 ? (m + 7) / 8 : 0;
            if (hasOffsets(col.field())) {
              len[OFFSETS] = m == 0 ? 0 : (m + 1) * (col.offsetsSize() / (col.length() + 1));
            } else if (col.field().getType() instanceof ArrowType.Bool) {
              len[DATA] = (m + 7) / 8;
            } else if (hasData(col.field()) && m > 0) {
              len[DATA] = m * (col.dataSize() / col.length());
            }
            for (int b = 0; b < 3; b++) {
              bufs[c][b] = allocator.buffer(len[b]);
              r = range(ranges, r, c, b, len[b], bufs[c][b]);
            }
            valuesDone[c] = true;
            progress = true;
          } else { // the offsets are in: the bytes or child rows they reach
            long end = 0;
            if (hasOffsets(col.field()) && m > 0) {
              boolean large = col.offsetsSize() / (col.length() + 1) == 8;
              end = large ? bufs[c][OFFSETS].getLong(8L * m) : bufs[c][OFFSETS].getInt(4L * m);
            }
            if (hasOffsets(col.field()) && hasData(col.field())) {
              bufs[c][DATA].close();
              bufs[c][DATA] = allocator.buffer(end);
              r = range(ranges, r, c, DATA, end, bufs[c][DATA]);
            }
            for (int j = 0, child = c + 1; j < col.children().size(); j++) {
              ArrowType t = col.field().getType();
              rows[child] = t instanceof ArrowType.FixedSizeList f ? m * f.getListSize()
                  : t instanceof ArrowType.Struct ? m : end;
              child = subtreeEnd(child);
            }
            done[c] = true;
            progress = true;
          }
        }
        copyRanges(java.util.Arrays.copyOf(ranges, r));
      }
      List<ArrowFieldNode> fieldNodes = new ArrayList<>();
      List<ArrowBuf> buffers = new ArrayList<>();
      for (int c = 0; c < n; c++) {
        DeviceColumn col = nodes.get(c);
        int m = (int) rows[c];
        int nulls = col.nullCount() > 0 ? BitVectorHelper.getNullCount(bufs[c][VALIDITY], m) : 0;
        fieldNodes.add(new ArrowFieldNode(m, nulls));
        buffers.add(bufs[c][VALIDITY]);
        if (hasOffsets(col.field())) {
          buffers.add(bufs[c][OFFSETS]);
        }
        if (hasData(col.field())) {
          buffers.add(bufs[c][DATA]);
        }
      }
      return load(allocator, k, fieldNodes, buffers);
    } finally {
      for (ArrowBuf[] col : bufs) {
        for (ArrowBuf b : col) {
          if (b != null) {
            b.close();
          }
        }
      }
    }
  }

  /** The index of the column after column c's subtree, among the nodes. */
  private int subtreeEnd(int c) {
    int next = c + 1;
    for (int j = 0; j < nodes.get(c).children().size(); j++) {
      next = subtreeEnd(next);
    }
    return next;
  }

  private void copyRanges(long[] ranges) {
    handle.call(h -> {
      copyRanges(h, ranges);
      return null;
    });
  }

  /** Appends a range (column, buffer, from byte 0, length, destination) when it has bytes. */
  private static int range(long[] ranges, int r, int column, int buffer, long length, ArrowBuf b) {
    if (length == 0) {
      return r;
    }
    long[] v = {column, buffer, 0, length, b.memoryAddress()};
    System.arraycopy(v, 0, ranges, r, 5);
    return r + 5;
  }

  /**
   * One line per column, aligned, for people: name, type, nullability and null count, under a
   * header line. Never touches the device.
   */
  public String describeColumns() {
    return TablePrinter.columns(columns);
  }

  /**
   * A one-line summary that never touches the device and never blocks: rows, then each column's
   * name, type and null count ("not null" for a column that cannot hold nulls), e.g.
   * {@code DeviceTable[1,000 rows: id int64 not null, name utf8 12 nulls]}. {@link #head(int)}
   * shows rows.
   */
  @Override
  public String toString() {
    StringBuilder b = new StringBuilder("DeviceTable[");
    if (handle.isClosed()) {
      b.append("closed, ");
    }
    b.append(TablePrinter.count(numRows)).append(numRows == 1 ? " row" : " rows");
    for (int c = 0; c < columns.size(); c++) {
      DeviceColumn col = columns.get(c);
      b.append(c == 0 ? ": " : ", ").append(col.name()).append(' ')
          .append(TablePrinter.typeName(col.field()));
      if (!col.field().isNullable()) {
        b.append(" not null");
      } else {
        long k = col.nullCount();
        b.append(' ').append(TablePrinter.count(k)).append(k == 1 ? " null" : " nulls");
      }
    }
    return b.append(']').toString();
  }

  /**
   * The schema message funnel's parser accepted, as Arrow Java reads it. The parser refuses what
   * Arrow Java cannot read; should some input still get through, this is the last line of
   * defence: a {@link MalformedPartitionException} (its cause Arrow Java's exception) naming the
   * first of {@code inputs} (may be null) that holds the message, and where, never an exception
   * of Arrow Java's without a partition.
   */
  static Schema readSchema(byte[] ipc, ByteBuffer[] inputs) {
    try {
      // not Channels.newChannel's, which an interrupted thread closes: a Spark task cancelled
      // mid-read would have its valid partition called malformed
      return MessageSerializer.deserializeSchema(
          new ReadChannel(new ByteArrayReadableSeekableByteChannel(ipc)));
    } catch (IOException | RuntimeException e) {
      long partition = -1;
      long offset = -1;
      for (int p = 0; inputs != null && p < inputs.length && partition < 0; p++) {
        offset = indexOf(inputs[p], ipc);
        partition = offset >= 0 ? p : -1;
      }
      String where = partition >= 0
          ? "partition " + partition + ": the Schema message at offset " + offset
          : "the table's Schema message";
      throw unreadable(partition, offset, where + " passed funnel's parser but Arrow Java cannot "
          + "read it", e);
    }
  }

  private static MalformedPartitionException unreadable(
      long partition, long offset, String what, Exception cause) {
    MalformedPartitionException e = new MalformedPartitionException(
        FunnelException.Code.MALFORMED, partition, -1, offset,
        what + ": " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
    e.initCause(cause);
    return e;
  }

  /** Where {@code bytes} first lies in {@code b} (from its position), or -1. */
  private static long indexOf(ByteBuffer b, byte[] bytes) {
    ByteBuffer v = b.duplicate();
    int base = v.position();
    int last = v.limit() - bytes.length;
    for (int i = base; i <= last; i++) {
      int k = 0;
      while (k < bytes.length && v.get(i + k) == bytes[k]) {
        k++;
      }
      if (k == bytes.length) {
        return i - base;
      }
    }
    return -1;
  }

  private static native void waitReady(long handle);

  private static native boolean isReady(long handle);

  private static native long numRows(long handle);

  private static native long[] columns(long handle);

  private static native byte[] schemaIpc(long handle);

  private static native long[] stats(long handle);

  private static native void copyToHost(long handle, long[] addresses);

  private static native void copyRanges(long handle, long[] ranges);

  private static native void free(long handle);

  private static native void exportDevice(long handle, long array, long schema);

  private static native long share(long handle);
}
