package dev.funnel;

/** A partition's bytes are not valid Arrow IPC: truncated, a corrupt flatbuffer, buffers outside the body. */
public class MalformedPartitionException extends InvalidPartitionException {
  private static final long serialVersionUID = 1L;

  public MalformedPartitionException(Code code, long partition, long column, long offset, String message) {
    super(code, partition, column, offset, message);
  }
}
