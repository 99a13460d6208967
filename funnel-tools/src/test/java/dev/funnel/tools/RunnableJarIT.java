package dev.funnel.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.junit.jupiter.api.Test;

/**
 * target/funnel.jar, the runnable jar: it carries funnel, Arrow (the API's own types, the version
 * Spark ships) and, relocated under dev.funnel.tools.shaded, everything else, so no class of it
 * clashes on a Spark classpath; and it runs with one line on stderr at most, no SLF4J warning.
 */
class RunnableJarIT {
  private static final Path JAR = Path.of(System.getProperty("funnel.root", ".."), "target",
      "funnel.jar");

  @Test
  void everyClassIsFunnelsArrowsOrRelocated() throws Exception {
    List<String> foreign = new ArrayList<>();
    try (JarFile jar = new JarFile(JAR.toFile())) {
      for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
        String name = e.nextElement().getName().replaceFirst("^META-INF/versions/\\d+/", "");
        boolean service = name.startsWith("META-INF/services/") && !name.endsWith("/");
        String what = service ? name.substring("META-INF/services/".length()).replace('.', '/')
            : name;
        if ((service || name.endsWith(".class")) && !what.startsWith("dev/funnel/")
            && !what.startsWith("org/apache/arrow/")) {
          foreign.add(name);
        }
      }
    }
    assertEquals(List.of(), foreign, "classes and services outside dev.funnel and Arrow");
  }

  @Test
  void theJarRunsWithoutALoggingWarning() throws Exception {
    Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java")
        .toString(), "-jar", JAR.toString(), "demo", "--backend", "cpu", "--partitions", "5",
        "--rows", "10").start();
    byte[] out = p.getInputStream().readAllBytes();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), err);
    assertEquals("", err, "nothing on stderr");
    assertTrue(new String(out, StandardCharsets.UTF_8).contains("stats:"));
    assertTrue(Files.size(JAR) > 0);
  }
}
