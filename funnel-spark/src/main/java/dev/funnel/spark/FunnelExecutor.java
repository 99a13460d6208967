package dev.funnel.spark;

import dev.funnel.DeviceStream;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelReader;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.resource.ResourceInformation;
import scala.Option;

/**
 * What the funnel shuffle shares within one executor JVM: the devices, each opened on first use,
 * and the thread that gives staging memory back once the reads of it have completed.
 *
 * <p>Which device a task reads on: {@code spark.funnel.backend} (auto, cpu or cuda; default
 * auto) and, when the task was assigned a GPU ({@code spark.executor.resource.gpu.amount} and
 * {@code spark.task.resource.gpu.amount}, with a discovery script), that GPU: the first address
 * of {@code TaskContext.get().resources().get("gpu")} is the CUDA device ordinal ("cuda:N").
 * Spark does not set {@code CUDA_VISIBLE_DEVICES}, so the discovery script's addresses are the
 * ordinals CUDA sees (nvidia-smi's indexes). Without an assigned GPU, "cuda" is the device of the
 * thread's current CUDA context, else device 0. {@code spark.funnel.backend=cpu} ignores the GPU.
 */
public final class FunnelExecutor {
  /** The Spark configuration key naming the backend. */
  public static final String BACKEND_CONF = "spark.funnel.backend";

  /** The Spark resource name of a GPU. */
  public static final String GPU_RESOURCE = "gpu";

  /** Open devices by the kind they were opened with ("cpu", "cuda:1", ...). */
  private static final Map<String, FunnelDevice> DEVICES = new HashMap<>();

  /**
   * Readers by device and schema, shared by the tasks (a reader is thread-safe): opening one
   * serializes the schema and parses it again natively, which a task of small frames would
   * otherwise pay each time.
   */
  private static final Map<FunnelDevice, Map<Schema, FunnelReader>> READERS = new HashMap<>();

  /** Schemas a device keeps readers for; a task of another schema opens and closes its own. */
  static final int MAX_READERS = 64;

  /**
   * Streams no task holds, by device: a task reads on a stream of its own (the reads of
   * concurrent tasks run side by side, and a read that waits inside waits for no other task's
   * work) without creating one each time.
   */
  private static final Map<FunnelDevice, ArrayDeque<DeviceStream>> IDLE_STREAMS = new HashMap<>();

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

  /**
   * The device of the calling task (see the class comment), opened on first use; the JVM's one
   * device of {@code spark.funnel.backend} outside a task.
   *
   * @throws dev.funnel.NoDeviceException when cuda is asked for and the GPU is not there
   */
  public static FunnelDevice device() {
    return device(deviceKind());
  }

  /** What {@link #device()} opens for the calling task: "auto", "cpu", "cuda" or "cuda:N". */
  public static String deviceKind() {
    SparkEnv env = SparkEnv.get();
    String backend = env == null ? "auto" : env.conf().get(BACKEND_CONF, "auto");
    return kind(backend, TaskContext.get());
  }

  /** The device kind a task opens: the backend, with the task's GPU ordinal when it has one. */
  static String kind(String backend, TaskContext task) {
    if (backend.equals("cpu") || backend.startsWith("cuda:") || task == null) {
      return backend;
    }
    Option<ResourceInformation> gpu = task.resources().get(GPU_RESOURCE);
    if (gpu.isEmpty() || gpu.get().addresses().length == 0) {
      return backend;
    }
    String address = gpu.get().addresses()[0];
    if (!address.matches("[0-9]{1,9}")) {
      throw new IllegalArgumentException("the task's GPU address '" + address + "' is not a CUDA "
          + "device ordinal: the GPU discovery script should report nvidia-smi's indexes");
    }
    return "cuda:" + address;
  }

  private static synchronized FunnelDevice device(String kind) {
    return DEVICES.computeIfAbsent(kind, FunnelDevice::open);
  }

  /**
   * The device's reader of {@code schema}, shared by the tasks and closed by {@link
   * #closeDevices()}; null when the device keeps {@link #MAX_READERS} readers of other schemas
   * already (the caller opens and closes its own).
   */
  static synchronized FunnelReader sharedReader(FunnelDevice device, Schema schema) {
    Map<Schema, FunnelReader> readers = READERS.computeIfAbsent(device, d -> new HashMap<>());
    FunnelReader r = readers.get(schema);
    if (r == null && readers.size() < MAX_READERS) {
      r = new FunnelReader(device, schema);
      readers.put(schema, r);
    }
    return r;
  }

  /** A stream of the device for one task's read: give it back with {@link #giveBack}. */
  static DeviceStream takeStream(FunnelDevice device) {
    synchronized (FunnelExecutor.class) {
      ArrayDeque<DeviceStream> idle = IDLE_STREAMS.get(device);
      if (idle != null && !idle.isEmpty()) {
        return idle.pop();
      }
    }
    return device.createStream();
  }

  /**
   * Gives back a stream from {@link #takeStream} once nothing of the task runs on it any more
   * (its table closed); closes it when its device has been closed since.
   */
  static void giveBack(DeviceStream stream) {
    synchronized (FunnelExecutor.class) {
      if (DEVICES.containsValue(stream.device())) {
        IDLE_STREAMS.computeIfAbsent(stream.device(), d -> new ArrayDeque<>()).push(stream);
        return;
      }
    }
    stream.close();
  }

  /**
   * Closes this JVM's devices, if open, with the readers and idle streams the tasks shared; the
   * next {@link #device()} opens them again. Every table
   * read from them must be closed first (tasks close theirs as they end). For tests and for
   * embedders that stop Spark and go on.
   */
  public static synchronized void closeDevices() {
    List<AutoCloseable> all = shared();
    all.addAll(DEVICES.values()); // last: readers and streams first let go of them
    DEVICES.clear();
    closeEach(all);
  }

  /**
   * Closes the readers and idle streams the tasks shared, keeping the devices open (tests count
   * the handles a job leaves). Tasks that run after open them again.
   */
  static synchronized void closeShared() {
    closeEach(shared());
  }

  /** The shared readers and idle streams, forgotten. */
  private static List<AutoCloseable> shared() {
    List<AutoCloseable> all = new ArrayList<>();
    READERS.values().forEach(m -> all.addAll(m.values()));
    IDLE_STREAMS.values().forEach(all::addAll);
    READERS.clear();
    IDLE_STREAMS.clear();
    return all;
  }

  private static void closeEach(List<AutoCloseable> all) {
    RuntimeException first = null;
    for (AutoCloseable c : all) {
      try {
        c.close();
      } catch (Exception e) {
        if (first == null) {
          first = e instanceof RuntimeException r ? r : new RuntimeException(e);
        } else {
          first.addSuppressed(e);
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }
}
