package dev.funnel;

/** Device memory ran out. Nothing was leaked: free device memory (spill) and retry the read. */
public class DeviceOutOfMemoryException extends DeviceException {
  private static final long serialVersionUID = 1L;

  public DeviceOutOfMemoryException(Code code, long partition, long column, long offset, String message) {
    super(code, partition, column, offset, message);
  }
}
