package dev.funnel;

/**
 * A failure reported by funnel. Carries the native error code and, where the failure is about one
 * place in the input, the partition index, the column index and the byte offset within that
 * partition (each -1 when not known).
 *
 * <p>Subclasses say what kind of failure it is: {@link InvalidPartitionException} (the input is
 * wrong: {@link MalformedPartitionException}, {@link UnsupportedTypeException}, {@link
 * SchemaMismatchException}), {@link DeviceException} (the device failed: {@link
 * DeviceOutOfMemoryException}, which a plugin can catch to spill and retry, and {@link
 * NoDeviceException}).
 */
public class FunnelException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The codes of funnel.h's {@code enum funnel_code}, by value. */
  public enum Code {
    OK,
    INVALID_ARGUMENT,
    MALFORMED,
    UNSUPPORTED,
    SCHEMA_MISMATCH,
    NO_SCHEMA,
    LIMIT,
    HOST_OUT_OF_MEMORY,
    DEVICE_OUT_OF_MEMORY,
    DEVICE,
    NO_DEVICE,
    FATAL,
    IN_USE,
    UNKNOWN;

    static Code of(int value) {
      Code[] all = values();
      return value >= 0 && value < all.length - 1 ? all[value] : UNKNOWN;
    }
  }

  private final Code code;
  private final long partition;
  private final long column;
  private final long offset;

  public FunnelException(Code code, long partition, long column, long offset, String message) {
    super(message);
    this.code = code;
    this.partition = partition;
    this.column = column;
    this.offset = offset;
  }

  /** The error code. */
  public Code code() {
    return code;
  }

  /** Index of the partition at fault in the read's input, or -1. */
  public long partition() {
    return partition;
  }

  /** Index of the column at fault, or -1. */
  public long column() {
    return column;
  }

  /** Byte offset within the partition where the fault is, or -1. */
  public long offset() {
    return offset;
  }

  /** Called by the JNI glue: the one place where codes map to classes. */
  static FunnelException fromNative(
      int value, long partition, long column, long offset, String message) {
    Code code = Code.of(value);
    switch (code) {
      case MALFORMED:
        return new MalformedPartitionException(code, partition, column, offset, message);
      case UNSUPPORTED:
        return new UnsupportedTypeException(code, partition, column, offset, message);
      case SCHEMA_MISMATCH:
        return new SchemaMismatchException(code, partition, column, offset, message);
      case NO_SCHEMA:
      case LIMIT:
        return new InvalidPartitionException(code, partition, column, offset, message);
      case DEVICE_OUT_OF_MEMORY:
        return new DeviceOutOfMemoryException(code, partition, column, offset, message);
      case NO_DEVICE:
        return new NoDeviceException(code, partition, column, offset, message);
      case DEVICE:
      case FATAL:
        return new DeviceException(code, partition, column, offset, message);
      default:
        return new FunnelException(code, partition, column, offset, message);
    }
  }
}
