package dev.funnel;

/** Valid Arrow that funnel does not read yet: a column type (dictionary, list, struct, view types), compressed bodies, big-endian data. */
public class UnsupportedTypeException extends InvalidPartitionException {
  private static final long serialVersionUID = 1L;

  public UnsupportedTypeException(Code code, long partition, long column, long offset, String message) {
    super(code, partition, column, offset, message);
  }
}
