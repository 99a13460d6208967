package dev.funnel;

/**
 * For tests: the native backend wrappers' fault injection (the k-th call of a kind fails, its
 * error naming the step) and what native code keeps alive. Not part of the API.
 */
final class Faults {
  static {
    NativeLibrary.load();
  }

  /** Kinds, as backend.h's enum funnel__fault_kind. */
  static final int ALLOC = 0;
  static final int PINNED = 1;
  static final int COPY = 2;
  static final int LAUNCH = 3;
  static final int EVENT = 4;
  static final int KINDS = 5;

  private Faults() {}

  /** The k-th call of {@code kind} from now on fails; k <= 0 disarms. */
  static native void arm(int kind, long k);

  /** Calls of {@code kind} made since it was armed. */
  static native long calls(int kind);

  /** Native device allocations, pinned allocations, events and streams alive. */
  static native long[] nativeLive();

  /**
   * The address of a test allocator (a struct funnel_allocator; cpu backend) that counts, and
   * refuses the k-th allocation from now (k < 0: every one; 0: none).
   */
  static native long testAllocator(long refuseAt);

  /** The test allocator's allocations, frees, bytes live and refusals, since the JVM started. */
  static native long[] testAllocatorCounts();
}
