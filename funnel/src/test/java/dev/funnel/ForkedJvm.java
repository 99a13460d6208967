package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;

/**
 * A second JVM running a test's main class on this JVM's class path and backend: for tests whose
 * failure may be a crash (a crash of a forked JVM fails the test, not the run) and for tests that
 * need another process.
 */
final class ForkedJvm {
  private ForkedJvm() {}

  /** The output and exit code of a child that ended. */
  record Result(int exitCode, String output) {}

  /** Starts {@code main} with {@code args}, the given extra JVM options first. */
  static Process start(Class<?> main, List<String> jvmOptions, String... args) throws IOException {
    return start(main, java.util.Map.of(), jvmOptions, args);
  }

  /** {@link #start(Class, List, String...)} with more environment variables. */
  static Process start(Class<?> main, java.util.Map<String, String> env, List<String> jvmOptions,
      String... args) throws IOException {
    return start(main, env, true, jvmOptions, args);
  }

  /**
   * {@link #start(Class, java.util.Map, List, String...)}, with or without Arrow's {@code --add-opens}.
   * SLF4J finds no provider (funnel brings none): its warning would be the child's first line.
   */
  static Process start(Class<?> main, java.util.Map<String, String> env, boolean addOpens,
      List<String> jvmOptions, String... args) throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(ProcessHandle.current().info().command().orElse("java"));
    if (addOpens) {
      cmd.add("--add-opens=java.base/java.nio=ALL-UNNAMED");
    }
    cmd.add("-Dslf4j.internal.verbosity=ERROR");
    cmd.add("-Dfunnel.backend=" + TestSupport.BACKEND);
    cmd.addAll(jvmOptions);
    cmd.add("-cp");
    cmd.add(classPath(main));
    cmd.add(main.getName());
    cmd.addAll(Arrays.asList(args));
    ProcessBuilder b = new ProcessBuilder(cmd).redirectErrorStream(true);
    b.environment().putAll(env);
    return b.start();
  }

  /**
   * Waits up to {@code seconds} for the child, collecting its output; a child still running then
   * is killed (a hang) and the assertion fails.
   */
  static Result finish(Process p, long seconds) throws Exception {
    StringBuilder out = new StringBuilder();
    Thread drain = new Thread(() -> {
      try (BufferedReader r =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = r.readLine()) != null; ) {
          synchronized (out) {
            out.append(line).append('\n');
          }
        }
      } catch (IOException e) {
        // the child was killed
      }
    });
    drain.start();
    boolean ended = p.waitFor(seconds, TimeUnit.SECONDS);
    if (!ended) {
      p.destroyForcibly().waitFor();
    }
    drain.join(10_000);
    String output;
    synchronized (out) {
      output = out.toString();
    }
    assertTrue(ended, () -> "the child JVM did not end within " + seconds + " s (a hang):\n"
        + output);
    return new Result(p.exitValue(), output);
  }

  /** This JVM's class path, and where the classes a child needs come from. */
  private static String classPath(Class<?> main) {
    Set<String> entries = new LinkedHashSet<>();
    for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
      entries.add(e);
    }
    for (Class<?> c :
        new Class<?>[] {main, FunnelDevice.class, VectorSchemaRoot.class, BufferAllocator.class,
          RootAllocator.class, org.junit.jupiter.api.Test.class}) {
      try {
        entries.add(Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString());
      } catch (Exception e) {
        throw new IllegalStateException("where " + c + " comes from", e);
      }
    }
    return String.join(File.pathSeparator, entries);
  }
}
