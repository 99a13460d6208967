package dev.funnel;

/** A partition's schema differs from the first one's (or the reader's); {@link #column()} is the first differing field. */
public class SchemaMismatchException extends InvalidPartitionException {
  private static final long serialVersionUID = 1L;

  public SchemaMismatchException(Code code, long partition, long column, long offset, String message) {
    super(code, partition, column, offset, message);
  }
}
