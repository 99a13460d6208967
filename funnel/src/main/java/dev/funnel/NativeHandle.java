package dev.funnel;

import java.lang.ref.Cleaner;
import java.util.function.LongFunction;
import java.util.function.LongPredicate;
import java.util.function.LongUnaryOperator;

/**
 * The one lifetime mechanism of every native object a Java object holds (device, reader, table,
 * stream, shared table; pinned blocks add a rule of their own, see {@link PinnedBuffer}), as cudf
 * Java's reference counting and MemoryCleaner do it:
 *
 * <ul>
 *   <li>every native call runs inside {@link #call}: while it runs, the native object cannot be
 *       freed;
 *   <li>{@link #close()} makes later calls fail with {@link IllegalStateException} ("DeviceTable is
 *       closed"), waits for the calls in flight, then frees the object, once; it is idempotent and
 *       safe from any thread;
 *   <li>an owner that becomes unreachable without being closed is freed by a {@link Cleaner} (and
 *       counted as leaked in {@link Handles}), so a forgotten close costs memory for a while, not
 *       forever.
 * </ul>
 *
 * <p>The handle holds no reference to its owner, so the cleaner can run. A call in flight keeps
 * the native object alive even when the JIT lets the owner itself become unreachable during the
 * call: the cleaner's free waits for the call like any close.
 */
final class NativeHandle implements Runnable {
  /** What frees a native object; returns false when it could not (it then stays open). */
  interface Free extends LongPredicate {}

  private static final Cleaner CLEANER = Cleaner.create();

  private final Handles.Kind kind;
  private final Free free;
  private final Cleaner.Cleanable cleanable;
  private long handle; // 0 once freed
  private int calls; // native calls in flight
  private boolean closing; // new calls fail from now on
  private boolean explicit; // closed by the owner, not by the cleaner
  private boolean freed; // the cleaning action has run to its end

  /**
   * Takes ownership of {@code handle} (non-zero) for {@code owner}; {@code free} releases it.
   *
   * @param free called once, with no call in flight; returns whether the object is gone
   */
  NativeHandle(Object owner, Handles.Kind kind, long handle, Free free) {
    if (handle == 0) {
      throw new IllegalStateException(kind.className + ": native call returned no object");
    }
    this.kind = kind;
    this.free = free;
    this.handle = handle;
    Handles.opened(kind);
    this.cleanable = CLEANER.register(owner, this);
  }

  /** Runs {@code f} on the native handle, which stays alive until {@code f} returns. */
  <T> T call(LongFunction<T> f) {
    long h = enter();
    try {
      return f.apply(h);
    } finally {
      exit();
    }
  }

  /** {@link #call} for a primitive result. */
  long callLong(LongUnaryOperator f) {
    long h = enter();
    try {
      return f.applyAsLong(h);
    } finally {
      exit();
    }
  }

  /**
   * The handle, kept alive until the matching {@link #exit()}: for a call that spans several
   * objects (a read on a caller's stream holds the reader and the stream).
   */
  synchronized long enter() {
    if (closing) {
      throw new IllegalStateException(kind.className + " is closed");
    }
    calls++;
    return handle;
  }

  synchronized void exit() {
    if (--calls == 0 && closing) {
      notifyAll();
    }
  }

  /** Whether close has begun (calls fail from then on). */
  synchronized boolean isClosed() {
    return closing;
  }

  /**
   * Closes: later calls fail, calls in flight are waited for, then the object is freed. Returns
   * once it is freed, also when another thread's close was in progress.
   */
  void close() {
    synchronized (this) {
      explicit = true;
    }
    cleanable.clean(); // runs run() at most once; a second caller returns at once
    synchronized (this) {
      await(() -> freed);
    }
  }

  /**
   * Closes with {@code tryFree} instead of the usual free: when it returns false the object stays
   * open (calls work again) and this returns false. For a close that may be refused, as a shared
   * table's while importers hold it.
   */
  boolean close(Free tryFree) {
    long h;
    synchronized (this) {
      if (handle == 0) {
        return true;
      }
      if (closing) { // another close is in progress: wait for its verdict
        awaitNoCloser();
        return handle == 0 || close(tryFree);
      }
      closing = true;
      awaitCalls();
      h = handle;
    }
    boolean gone = false;
    try {
      gone = tryFree.test(h);
    } finally {
      synchronized (this) {
        if (gone) {
          handle = 0;
          explicit = true;
          Handles.closed(kind, false);
        } else {
          closing = false;
        }
        notifyAll();
      }
    }
    if (gone) {
      cleanable.clean(); // nothing left to free: run() sees handle 0
    }
    return gone;
  }

  /** The cleaning action: from {@link #close()} or from the cleaner, once. */
  @Override
  public void run() {
    long h;
    boolean leaked;
    synchronized (this) {
      if (handle == 0) {
        freed = true;
        notifyAll();
        return;
      }
      if (closing) { // a refusable close is in progress
        awaitNoCloser();
        if (handle == 0) {
          freed = true;
          notifyAll();
          return;
        }
      }
      closing = true;
      awaitCalls();
      h = handle;
      leaked = !explicit;
    }
    boolean gone = free.test(h);
    synchronized (this) {
      handle = gone ? 0 : handle; // a free that failed leaves the object leaked, never reused
      freed = true;
      Handles.closed(kind, leaked);
      notifyAll();
    }
  }

  private void awaitCalls() {
    await(() -> calls == 0); // the object must not go while a call uses it
  }

  private void awaitNoCloser() {
    await(() -> !closing || handle == 0);
  }

  /**
   * Waits on this handle's monitor (held by the caller) until {@code done}; an interrupt is kept
   * for the caller, not obeyed: what is waited for must not be cut short.
   */
  private void await(java.util.function.BooleanSupplier done) {
    boolean interrupted = false;
    while (!done.getAsBoolean()) {
      try {
        wait();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
