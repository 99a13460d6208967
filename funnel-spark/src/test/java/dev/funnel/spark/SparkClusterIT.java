package dev.funnel.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.funnel.FunnelDevice;
import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The funnel shuffle on a real Spark cluster: a standalone Master and two Workers, each a JVM of
 * its own started from Spark's jars the way Spark's scripts start them (Spark's launcher builds
 * the command, as bin/spark-class does), on loopback only; the example submitted with
 * spark-submit as the README says (funnel's jar in --jars, funnel-spark's as the application),
 * its rows and nulls checked against Spark's own count of the same DataFrame, read on both
 * workers' executors. Everything it starts it stops; every wait is bounded.
 *
 * <p>The stand-in Spark installation is target/spark-cluster/spark-home: jars/ holds links to
 * the jars of the provided spark-sql dependency (this test's class path, less funnel's and the
 * test framework's), which is what a Spark 4.1.1 distribution's jars/ holds.
 *
 * <p>System properties: {@code funnel.cluster.gpus} (0, the default: the cpu backend, no GPU;
 * 2: each worker owns one GPU, worker w the one of index w-1, through Spark's standalone
 * resource scheduling: the worker's {@code spark.worker.resource.gpu.amount=1} and a discovery
 * script, the application's {@code spark.executor.resource.gpu.amount=1} and {@code
 * spark.task.resource.gpu.amount=1}; the executors read on cuda, and the test asks that the
 * devices were "cuda:0 (cuda), cuda:1 (cuda)", so that a run on the cpu backend or on one GPU
 * fails); {@code funnel.cluster.backend} (the executors' {@code spark.funnel.backend}: cuda with
 * GPUs, else cpu; ci/spark-gpu-prepare passes cpu with GPUs on a host that has none, to see the
 * resources handed out); {@code funnel.cluster.jvmOptions} (more options for every JVM the test
 * starts, split at blanks: ci/spark-gpu-prepare's class-load logging); {@code funnel.spark.jar}
 * (funnel-spark's jar, the application) and {@code funnel.spark.target} (the folder of
 * spark-cluster/; target).
 */
class SparkClusterIT {
  private static final long ROWS = 30_000;
  private static final int PARTITIONS = 12;
  private static final long STEP_SECONDS = 90;
  private static final int WORKERS = 2;
  /** GPUs of the cluster, one a worker; 0 for none. */
  private static final int GPUS =
      Integer.parseInt(System.getProperty("funnel.cluster.gpus", "0").strip());
  /** The executors' spark.funnel.backend. */
  private static final String BACKEND =
      System.getProperty("funnel.cluster.backend", GPUS > 0 ? "cuda" : "cpu");
  /** More options for every JVM started: Spark's launcher, the daemons, driver and executors. */
  private static final String JVM_OPTIONS =
      System.getProperty("funnel.cluster.jvmOptions", "").strip();

  private static Path root;
  private static Path sparkHome;
  private static int masterPort;
  private static final List<Process> daemons = new ArrayList<>();

  @BeforeAll
  static void startCluster() throws Exception {
    root = Path.of(System.getProperty("funnel.spark.target", "target"), "spark-cluster")
        .toAbsolutePath();
    assertTrue(GPUS == 0 || GPUS == WORKERS,
        "funnel.cluster.gpus is 0 or " + WORKERS + " (one a worker), not " + GPUS);
    assertTrue(BACKEND.equals("cpu") || BACKEND.equals("cuda"),
        "funnel.cluster.backend is cpu or cuda, not " + BACKEND);
    deleteTree(root);
    sparkHome = Files.createDirectories(root.resolve("spark-home"));
    Path jars = Files.createDirectories(sparkHome.resolve("jars"));
    for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
      Path p = Path.of(e);
      String s = p.toString();
      if (s.endsWith(".jar") && !s.contains("junit") && !s.contains("opentest4j")
          && !s.contains("apiguardian") && !p.getFileName().toString().startsWith("funnel")) {
        Path link = jars.resolve(p.getFileName());
        if (!Files.exists(link)) {
          Files.createSymbolicLink(link, p.toAbsolutePath());
        }
      }
    }
    Path conf = Files.createDirectories(sparkHome.resolve("conf"));
    Files.writeString(conf.resolve("log4j2.properties"), String.join("\n",
        "rootLogger.level = warn", "rootLogger.appenderRef.stdout.ref = console",
        "appender.console.type = Console", "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR", "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n",
        "logger.master.name = org.apache.spark.deploy", "logger.master.level = info",
        // the resources a worker found and an executor was given ("gpu -> [name: gpu, ...")
        "logger.resources.name = org.apache.spark.resource.ResourceUtils",
        "logger.resources.level = info", ""));

    masterPort = freePort();
    Process master = start("master", List.of("org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", String.valueOf(masterPort), "--webui-port", "0"));
    daemons.add(master);
    awaitLog("master", "I have been elected leader", master);
    for (int w = 1; w <= WORKERS; w++) {
      List<String> args = new ArrayList<>(List.of("org.apache.spark.deploy.worker.Worker",
          "--host", "127.0.0.1", "--webui-port", "0", "--cores", "1", "--memory", "1g",
          "--work-dir", root.resolve("work-" + w).toString()));
      if (GPUS > 0) {
        args.addAll(List.of("--properties-file", gpuConf(w).toString()));
      }
      args.add(masterUrl());
      Process worker = start("worker-" + w, args);
      daemons.add(worker);
      awaitLog("worker-" + w, "Successfully registered with master", worker);
    }
  }

  /**
   * Worker w's Spark properties with GPU w-1 its one GPU, as a worker's conf/spark-defaults.conf
   * (or SPARK_WORKER_OPTS' -D options) on a GPU host would say; the discovery script prints the
   * index, as a script over nvidia-smi's output would on a host with one GPU a worker.
   */
  private static Path gpuConf(int w) throws IOException {
    Path script = root.resolve("gpu-" + w + ".sh");
    Files.writeString(script, "#!/bin/sh\necho '{\"name\":\"gpu\",\"addresses\":[\""
        + (w - 1) + "\"]}'\n");
    Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
    Path conf = root.resolve("worker-" + w + ".conf");
    Files.writeString(conf, String.join("\n",
        "spark.worker.resource.gpu.amount=1",
        "spark.worker.resource.gpu.discoveryScript=" + script, ""));
    return conf;
  }

  @AfterAll
  static void stopCluster() throws Exception {
    // the workers' executors are their children: stopped with them, or killed after them
    List<ProcessHandle> all = new ArrayList<>();
    for (Process p : daemons) {
      p.descendants().forEach(all::add);
      all.add(p.toHandle());
    }
    for (int i = daemons.size() - 1; i >= 0; i--) {
      daemons.get(i).destroy();
    }
    for (ProcessHandle h : all) {
      try {
        h.onExit().get(20, TimeUnit.SECONDS);
      } catch (Exception e) {
        h.destroyForcibly();
      }
    }
    for (ProcessHandle h : all) {
      assertTrue(h.onExit().get(20, TimeUnit.SECONDS) != null, "stopped " + h.pid());
    }
  }

  @Test
  void theFunnelShuffleCountsWhatSparkCountsOnTwoWorkers() throws Exception {
    Path funnelJar = codeSource(FunnelDevice.class);
    Path appJar = Path.of(System.getProperty("funnel.spark.jar", "missing"));
    assertTrue(funnelJar.toString().endsWith(".jar") && Files.isRegularFile(appJar),
        "funnel's and funnel-spark's jars: " + funnelJar + ", " + appJar);
    List<String> gpus = GPUS == 0 ? List.of() : List.of(
        "--conf", "spark.executor.resource.gpu.amount=1",
        "--conf", "spark.task.resource.gpu.amount=1");
    List<String> jvm = JVM_OPTIONS.isEmpty() ? List.of()
        : List.of("--conf", "spark.executor.extraJavaOptions=" + JVM_OPTIONS);
    List<String> args = new ArrayList<>(List.of("org.apache.spark.deploy.SparkSubmit",
        "--master", masterUrl(),
        "--deploy-mode", "client",
        "--driver-memory", "512m",
        "--executor-memory", "512m",
        "--total-executor-cores", "2",
        "--executor-cores", "1",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=60s",
        "--conf", "spark.funnel.backend=" + BACKEND));
    args.addAll(gpus);
    args.addAll(jvm);
    args.addAll(List.of(
        "--jars", funnelJar.toString(),
        "--class", "dev.funnel.spark.SparkExample",
        appJar.toString(),
        "--rows", String.valueOf(ROWS), "--partitions", String.valueOf(PARTITIONS)));
    Process submit = start("submit", args);
    boolean ended = submit.waitFor(4 * STEP_SECONDS, TimeUnit.SECONDS);
    if (!ended) {
      submit.descendants().forEach(ProcessHandle::destroyForcibly);
      submit.destroyForcibly().waitFor();
    }
    String out = log("submit");
    assertTrue(ended, "spark-submit did not end in " + 4 * STEP_SECONDS + " s:\n" + out);
    assertEquals(0, submit.exitValue(), out);

    Matcher m = Pattern.compile("funnel shuffle on (.*): ([0-9,]+) rows of (\\d+) columns into "
        + "(\\d+) reduce partitions").matcher(out);
    assertTrue(m.find(), out);
    // with GPUs on cuda: each executor read on its worker's GPU, and on no other device
    String devices = GPUS > 0 && BACKEND.equals("cuda") ? "cuda:0 (cuda), cuda:1 (cuda)"
        : BACKEND + " (" + BACKEND + ")";
    assertEquals(devices, m.group(1), "the executors' devices:\n" + out);
    assertEquals(ROWS, Long.parseLong(m.group(2).replace(",", "")), out);
    assertEquals(PARTITIONS, Integer.parseInt(m.group(4)), out);
    Matcher s = Pattern.compile("Spark counts ([0-9,]+) rows, ([0-9,]+) nulls in i: (\\w+)")
        .matcher(out);
    assertTrue(s.find(), out);
    assertEquals(ROWS, Long.parseLong(s.group(1).replace(",", "")), out);
    assertEquals("same", s.group(3), out);
    Matcher e = Pattern.compile("read on (\\d+) executors?").matcher(out);
    assertTrue(e.find(), out);
    assertEquals(2, Integer.parseInt(e.group(1)), "reduce tasks ran on both workers:\n" + out);
    if (GPUS > 0) {
      for (int w = 1; w <= WORKERS; w++) {
        // Spark's own account: the worker found its GPU, its executor was given it
        String gpu = "gpu -> [name: gpu, addresses: " + (w - 1) + "]";
        assertTrue(log("worker-" + w).contains(gpu), "worker " + w + ": " + gpu + "\n"
            + log("worker-" + w));
        String executor = executorLogs(w);
        assertTrue(executor.contains("resources for spark.executor:") && executor.contains(gpu),
            "worker " + w + "'s executor: " + gpu + "\n" + executor);
      }
    }
  }

  /** The stderr of the executors worker w ran (its work dir: app-ID/EXECUTOR/stderr). */
  private static String executorLogs(int w) throws IOException {
    StringBuilder all = new StringBuilder();
    try (var files = Files.walk(root.resolve("work-" + w))) {
      for (Path f : files.filter(f -> f.getFileName().toString().equals("stderr")).sorted()
          .toList()) {
        all.append(Files.readString(f, StandardCharsets.UTF_8));
      }
    }
    return all.toString();
  }

  private static String masterUrl() {
    return "spark://127.0.0.1:" + masterPort;
  }

  /**
   * Starts a Spark class as bin/spark-class does: Spark's launcher prints the command (its JVM
   * options, Java 17's --add-opens included), which runs with the environment it names.
   */
  private static Process start(String name, List<String> classAndArgs) throws Exception {
    Map<String, String> env = sparkEnv();
    List<String> launcher = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx128m", "-cp",
        sparkHome.resolve("jars") + File.separator + "*"));
    launcher.addAll(jvmOptions());
    launcher.add("org.apache.spark.launcher.Main");
    launcher.addAll(classAndArgs);
    ProcessBuilder lb = new ProcessBuilder(launcher).redirectError(root.resolve(name + ".launcher"
        + ".log").toFile());
    lb.environment().putAll(env);
    Process l = lb.start();
    byte[] printed = l.getInputStream().readAllBytes();
    assertTrue(l.waitFor(STEP_SECONDS, TimeUnit.SECONDS) && l.exitValue() == 0,
        "Spark's launcher for " + name);
    List<String> cmd = new ArrayList<>();
    for (String arg : new String(printed, StandardCharsets.UTF_8).split("\0")) {
      if (!arg.isBlank()) {
        cmd.add(arg.strip()); // bin/spark-class reads NUL-separated arguments, blank lines apart
      }
    }
    if (cmd.get(0).equals("env")) { // env K=V ... command: the launcher's own environment
      cmd.remove(0);
      while (cmd.get(0).contains("=") && !cmd.get(0).startsWith("/")) {
        String kv = cmd.remove(0);
        env.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
      }
    }
    ProcessBuilder b = new ProcessBuilder(cmd).redirectErrorStream(true)
        .redirectOutput(root.resolve(name + ".log").toFile());
    b.environment().putAll(env);
    return b.start();
  }

  private static List<String> jvmOptions() {
    return JVM_OPTIONS.isEmpty() ? List.of() : List.of(JVM_OPTIONS.split("\\s+"));
  }

  private static Map<String, String> sparkEnv() {
    Map<String, String> env = new HashMap<>();
    if (!JVM_OPTIONS.isEmpty()) {
      env.put("SPARK_DAEMON_JAVA_OPTS", JVM_OPTIONS); // the Master's and Workers' JVMs
      env.put("SPARK_SUBMIT_OPTS", JVM_OPTIONS); // spark-submit's, the driver (client mode)
    }
    env.put("SPARK_HOME", sparkHome.toString());
    env.put("SPARK_CONF_DIR", sparkHome.resolve("conf").toString());
    env.put("SPARK_SCALA_VERSION", "2.13");
    env.put("JAVA_HOME", System.getProperty("java.home"));
    env.put("SPARK_LOCAL_IP", "127.0.0.1");
    env.put("SPARK_LOCAL_HOSTNAME", "localhost");
    env.put("SPARK_LOCAL_DIRS", root.resolve("local").toString());
    env.put("SPARK_DAEMON_MEMORY", "256m");
    env.put("SPARK_WORKER_DIR", root.resolve("work").toString());
    env.put("SPARK_NO_DAEMONIZE", "1");
    return env;
  }

  private static void awaitLog(String name, String line, Process p) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_SECONDS);
    while (System.nanoTime() < deadline) {
      if (log(name).contains(line)) {
        return;
      }
      if (!p.isAlive()) {
        fail(name + " exited (" + p.exitValue() + "):\n" + log(name));
      }
      Thread.sleep(100);
    }
    fail(name + " did not log '" + line + "' in " + STEP_SECONDS + " s:\n" + log(name));
  }

  private static String log(String name) throws IOException {
    Path f = root.resolve(name + ".log");
    return Files.exists(f) ? Files.readString(f, StandardCharsets.UTF_8) : "";
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  private static Path codeSource(Class<?> c) throws Exception {
    return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI());
  }

  private static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    if (Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      try (var s = Files.list(p)) {
        for (Path c : s.toList()) {
          deleteTree(c);
        }
      }
    }
    Files.delete(p);
  }
}
