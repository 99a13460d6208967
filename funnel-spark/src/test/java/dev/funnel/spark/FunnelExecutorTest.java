package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Properties;
import org.apache.spark.TaskContext;
import org.apache.spark.TaskContextImpl;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.resource.ResourceInformation;
import org.junit.jupiter.api.Test;
import scala.collection.immutable.Map;
import scala.collection.immutable.Map$;

/**
 * The device a task reads on: the GPU Spark assigned it (TaskContext.resources(), as a worker's
 * executor with spark.executor.resource.gpu.amount gets from its worker) is the CUDA ordinal.
 */
class FunnelExecutorTest {
  /** A task's context as the executor makes it, with these GPU addresses (none: no "gpu"). */
  static TaskContext task(String... gpus) {
    Map<String, ResourceInformation> resources = Map$.MODULE$.empty();
    if (gpus.length > 0) {
      resources = resources.updated(FunnelExecutor.GPU_RESOURCE,
          new ResourceInformation(FunnelExecutor.GPU_RESOURCE, gpus));
    }
    return new TaskContextImpl(0, 0, 0, 0L, 0, 1, null, new Properties(), null, new TaskMetrics(),
        1, resources);
  }

  @Test
  void aTaskWithAGpuReadsOnThatGpu() {
    assertEquals("cuda:1", FunnelExecutor.kind("cuda", task("1")));
    assertEquals("cuda:0", FunnelExecutor.kind("cuda", task("0")));
    assertEquals("cuda:1", FunnelExecutor.kind("auto", task("1")));
    // a task of several GPUs reads on the first
    assertEquals("cuda:2", FunnelExecutor.kind("cuda", task("2", "3")));
  }

  @Test
  void theBackendDecidesWithoutAGpuOrWhenItNamesTheDevice() {
    assertEquals("cpu", FunnelExecutor.kind("cpu", task("1")));
    assertEquals("cuda:3", FunnelExecutor.kind("cuda:3", task("1")));
    assertEquals("cuda", FunnelExecutor.kind("cuda", task()));
    assertEquals("auto", FunnelExecutor.kind("auto", task()));
    assertEquals("cuda", FunnelExecutor.kind("cuda", null));
  }

  @Test
  void anAddressThatIsNoOrdinalIsAnError() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> FunnelExecutor.kind("cuda", task("GPU-8f6c")));
    assertEquals("the task's GPU address 'GPU-8f6c' is not a CUDA device ordinal: the GPU "
        + "discovery script should report nvidia-smi's indexes", e.getMessage());
  }
}
