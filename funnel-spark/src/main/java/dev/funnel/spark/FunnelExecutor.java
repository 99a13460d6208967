package dev.funnel.spark;

import dev.funnel.FunnelDevice;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.SparkEnv;

/**
 * What the funnel shuffle shares within one executor JVM: the device, opened on first use from
 * {@code spark.funnel.backend} (auto, cpu or cuda; default auto), and the thread that gives
 * staging memory back once the reads of it have completed.
 */
public final class FunnelExecutor {
  /** The Spark configuration key naming the backend. */
  public static final String BACKEND_CONF = "spark.funnel.backend";

  private static FunnelDevice device;

  /** Staging memory when the pinned pool is full (Arrow's allocator: no JVM flag needed). */
  private static final BufferAllocator OFF_HEAP = new RootAllocator();

  /** Gives staging blocks back as reads complete, off the task threads. */
  static final ExecutorService RELEASER =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "funnel-shuffle-release");
            t.setDaemon(true);
            return t;
          });

  private FunnelExecutor() {}

  static BufferAllocator offHeap() {
    return OFF_HEAP;
  }

  /** This JVM's device, opened on first use. */
  public static synchronized FunnelDevice device() {
    if (device == null) {
      SparkEnv env = SparkEnv.get();
      String backend = env == null ? "auto" : env.conf().get(BACKEND_CONF, "auto");
      device = FunnelDevice.open(backend);
    }
    return device;
  }

  /**
   * Closes this JVM's device, if open; the next {@link #device()} opens it again. Every table read
   * from it must be closed first (tasks close theirs as they end). For tests and for embedders
   * that stop Spark and go on.
   */
  public static synchronized void closeDevice() {
    if (device != null) {
      device.close();
      device = null;
    }
  }
}
