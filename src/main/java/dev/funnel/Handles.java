package dev.funnel;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The native handles the Java objects hold and have not freed (devices, readers, tables), counted
 * as cudf Java's MemoryCleaner counts its resources: a test sees a leak as a count that does not
 * come back.
 */
final class Handles {
  private static final AtomicLong DEVICES = new AtomicLong();
  private static final AtomicLong READERS = new AtomicLong();
  private static final AtomicLong TABLES = new AtomicLong();

  private Handles() {}

  static void device(int delta) {
    DEVICES.addAndGet(delta);
  }

  static void reader(int delta) {
    READERS.addAndGet(delta);
  }

  static void table(int delta) {
    TABLES.addAndGet(delta);
  }

  /** Devices, readers and tables alive. */
  static long[] live() {
    return new long[] {DEVICES.get(), READERS.get(), TABLES.get()};
  }
}
