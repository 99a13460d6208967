package dev.funnel.spark;

import java.io.Serializable;

/**
 * Where one reduce task's read went, as {@link ShuffleReads#read(java.util.Iterator,
 * org.apache.arrow.vector.types.pojo.Schema, ReduceTimes)} measures it on the task's thread:
 *
 * <ul>
 *   <li>{@link #fetchNanos()}: waiting for the next frame from Spark's shuffle (Spark fetches the
 *       map outputs, local or remote, and {@link FrameSerializer} hands each frame over as bytes);
 *   <li>{@link #stagingNanos()}: copying the frames, back to back, into pinned blocks;
 *   <li>{@link #readNanos()}: funnel's read of every frame in one call, until it returns (the
 *       table may still be on its way: waiting for it is the caller's, see {@link
 *       dev.funnel.DeviceTable#waitReady()}).
 * </ul>
 *
 * <p>{@link #startNanos()} is {@link System#nanoTime()} when the task asked for its first frame,
 * so that the caller can tell the rest of its task's time.
 */
public final class ReduceTimes implements Serializable {
  private static final long serialVersionUID = 1L;

  long startNanos;
  long fetchNanos;
  long stagingNanos;
  long readNanos;
  int frames;
  long bytes;

  /** {@link System#nanoTime()} when the task asked for its first frame. */
  public long startNanos() {
    return startNanos;
  }

  /** Waiting for frames from Spark's shuffle, nanoseconds. */
  public long fetchNanos() {
    return fetchNanos;
  }

  /** Copying the frames into pinned blocks, nanoseconds. */
  public long stagingNanos() {
    return stagingNanos;
  }

  /** Funnel's read call, nanoseconds. */
  public long readNanos() {
    return readNanos;
  }

  /** Frames the task read (the partitions of its funnel read). */
  public int frames() {
    return frames;
  }

  /** Bytes of those frames. */
  public long bytes() {
    return bytes;
  }

  @Override
  public String toString() {
    return String.format(java.util.Locale.ROOT,
        "%d frames, %d bytes: fetch %.3f ms, staging %.3f ms, read %.3f ms", frames, bytes,
        fetchNanos / 1e6, stagingNanos / 1e6, readNanos / 1e6);
  }
}
