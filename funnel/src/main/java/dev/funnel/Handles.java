package dev.funnel;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The native objects the Java objects hold and have not freed, by kind, counted as cudf Java's
 * MemoryCleaner counts its resources: a test sees a leak as a count that does not come back, and
 * {@link #leaked()} counts those a cleaner had to free because their owner was never closed.
 */
final class Handles {
  /** The kinds of native object, with the Java class that holds one. */
  enum Kind {
    DEVICE("FunnelDevice"),
    READER("FunnelReader"),
    TABLE("DeviceTable"),
    STREAM("DeviceStream"),
    SHARED("SharedTable"),
    PINNED("PinnedBuffer");

    final String className;

    Kind(String className) {
      this.className = className;
    }
  }

  private static final AtomicLongArray LIVE = new AtomicLongArray(Kind.values().length);
  private static final AtomicLongArray LEAKED = new AtomicLongArray(Kind.values().length);

  private Handles() {}

  static void opened(Kind kind) {
    LIVE.incrementAndGet(kind.ordinal());
  }

  static void closed(Kind kind, boolean leaked) {
    LIVE.decrementAndGet(kind.ordinal());
    if (leaked) {
      LEAKED.incrementAndGet(kind.ordinal());
    }
  }

  /** Objects alive, one count per {@link Kind}, in its order. */
  static long[] live() {
    return snapshot(LIVE);
  }

  /** Objects freed by a cleaner because their owner became unreachable unclosed, per kind. */
  static long[] leaked() {
    return snapshot(LEAKED);
  }

  private static long[] snapshot(AtomicLongArray a) {
    long[] v = new long[a.length()];
    for (int i = 0; i < v.length; i++) {
      v[i] = a.get(i);
    }
    return v;
  }
}
