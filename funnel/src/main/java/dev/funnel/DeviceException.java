package dev.funnel;

/** A device call failed. The message names the call and the device's error; code {@link Code#FATAL} means the device is unusable for this process. */
public class DeviceException extends FunnelException {
  private static final long serialVersionUID = 1L;

  public DeviceException(Code code, long partition, long column, long offset, String message) {
    super(code, partition, column, offset, message);
  }
}
