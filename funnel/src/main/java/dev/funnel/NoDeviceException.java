package dev.funnel;

/** The requested backend has no driver or device on this host. */
public class NoDeviceException extends DeviceException {
  private static final long serialVersionUID = 1L;

  public NoDeviceException(Code code, long partition, long column, long offset, String message) {
    super(code, partition, column, offset, message);
  }
}
