package dev.funnel;

/** The input of a read is wrong: not Arrow IPC, or Arrow that funnel does not read, or partitions that disagree. */
public class InvalidPartitionException extends FunnelException {
  private static final long serialVersionUID = 1L;

  public InvalidPartitionException(Code code, long partition, long column, long offset, String message) {
    super(code, partition, column, offset, message);
  }
}
