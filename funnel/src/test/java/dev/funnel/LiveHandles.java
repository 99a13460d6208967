package dev.funnel;

/** Test access, from other packages, to the native handles alive ({@link Handles}). */
public final class LiveHandles {
  private LiveHandles() {}

  /** Devices, readers and tables alive. */
  public static long[] live() {
    return Handles.live();
  }
}
