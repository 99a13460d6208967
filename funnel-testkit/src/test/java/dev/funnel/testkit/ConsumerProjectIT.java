package dev.funnel.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A plugin author's project, built by Maven against the artifacts this build made, installed
 * into a repository of the test's own (target/consumer/repo; everything else resolves from the
 * build's local repository, then Maven Central): it depends on funnel as the README says,
 * compiles and runs the README's Java example, and its dependency list is checked: one Arrow
 * version, no logging provider, no charting, and beside Spark (provided) nothing of funnel's but
 * funnel's own jars.
 */
class ConsumerProjectIT {
  private static final String VERSION = System.getProperty("funnel.version");
  private static final Path ROOT = Path.of(System.getProperty("funnel.root", "..")).toAbsolutePath()
      .normalize();
  private static final Path WORK = Path.of(System.getProperty("funnel.testkit.target", "target"),
      "consumer").toAbsolutePath();
  private static final Path REPO = WORK.resolve("repo");

  @BeforeAll
  static void install() throws IOException {
    deleteTree(WORK);
    install("funnel-parent", "pom", ROOT.resolve("pom.xml"), null);
    for (String a : List.of("funnel", "funnel-testkit", "funnel-spark", "funnel-tools")) {
      Path jar = ROOT.resolve(a).resolve("target").resolve(a + "-" + VERSION + ".jar");
      assertTrue(Files.isRegularFile(jar), "built: " + jar);
      install(a, "jar", ROOT.resolve(a).resolve("pom.xml"), jar);
    }
  }

  /** What maven-install-plugin lays out for an artifact in a local repository. */
  private static void install(String artifact, String packaging, Path pom, Path jar)
      throws IOException {
    Path dir = Files.createDirectories(REPO.resolve("dev/funnel").resolve(artifact).resolve(VERSION));
    Files.copy(pom, dir.resolve(artifact + "-" + VERSION + ".pom"));
    if (jar != null) {
      Files.copy(jar, dir.resolve(artifact + "-" + VERSION + "." + packaging));
    }
  }

  @Test
  void theReadmeExampleBuildsAndRunsAgainstTheInstalledArtifacts() throws Exception {
    Path project = copyProject("consumer");
    String build = mvn(project, "compile", "dependency:build-classpath",
        "-Dmdep.outputFile=cp.txt", "-Dmdep.includeScope=runtime");
    String cp = project.resolve("target/classes") + File.pathSeparator
        + Files.readString(project.resolve("cp.txt")).strip();
    String out = run(List.of(java(), "--add-opens=java.base/java.nio=ALL-UNNAMED", "-cp", cp,
        "example.ReadmeExample"), project);
    assertTrue(out.contains("the table equals Arrow Java's reading of the partitions"),
        build + out);

    Set<String> deps = dependencies(project);
    assertEquals(Set.of("18.3.0"), versions(deps, "org.apache.arrow:"), deps.toString());
    for (String d : deps) {
      assertFalse(d.startsWith("org.jfree:") || d.startsWith("org.slf4j:slf4j-nop")
          || d.startsWith("org.slf4j:slf4j-simple") || d.startsWith("ch.qos.logback:")
          || d.startsWith("org.apache.logging.log4j:log4j-slf4j"),
          "funnel brings " + d + ": no logging provider, no charting");
    }
    assertTrue(deps.stream().noneMatch(d -> d.startsWith("dev.funnel:funnel-tools")), deps + "");
  }

  @Test
  void besideSparkFunnelSparkBringsOnlyFunnelsJars() throws Exception {
    Path project = copyProject("spark-consumer");
    Set<String> deps = dependencies(project);
    Set<String> notProvided = new TreeSet<>();
    for (String d : deps) {
      if (!d.endsWith(":provided")) {
        notProvided.add(d);
      }
    }
    assertEquals(Set.of("dev.funnel:funnel-spark:jar:" + VERSION + ":compile",
        "dev.funnel:funnel:jar:" + VERSION + ":compile"), notProvided, deps.toString());
    assertEquals(Set.of("18.3.0"), versions(deps, "org.apache.arrow:"),
        "one Arrow, Spark's: " + deps);
  }

  private static Set<String> dependencies(Path project) throws Exception {
    // the tree, not the list: Maven resolves the graph without fetching Spark's jars
    mvn(project, "dependency:tree", "-DoutputFile=deps.txt");
    Set<String> deps = new TreeSet<>();
    List<String> lines = Files.readAllLines(project.resolve("deps.txt"));
    for (String line : lines.subList(1, lines.size())) { // the first line is the project
      String d = line.replaceFirst("^[-+|\\\\ ]*", "").strip();
      if (d.matches("[^ :]+:[^ :]+:.+")) {
        deps.add(d);
      }
    }
    assertFalse(deps.isEmpty(), "dependency:list");
    return deps;
  }

  /** The versions of the dependencies whose coordinates start with {@code prefix}. */
  private static Set<String> versions(Set<String> deps, String prefix) {
    Set<String> v = new TreeSet<>();
    for (String d : deps) {
      if (d.startsWith(prefix)) {
        String[] f = d.split(":");
        v.add(f[f.length - 2]);
      }
    }
    return v;
  }

  private static Path copyProject(String name) throws IOException {
    Path from = ROOT.resolve("funnel-testkit/src/test").resolve(name);
    Path to = WORK.resolve(name);
    try (Stream<Path> files = Files.walk(from)) {
      for (Path f : files.toList()) {
        Path t = to.resolve(from.relativize(f).toString());
        if (Files.isDirectory(f)) {
          Files.createDirectories(t);
        } else {
          Files.copy(f, t, StandardCopyOption.REPLACE_EXISTING);
        }
      }
    }
    Path pom = to.resolve("pom.xml");
    Files.writeString(pom, Files.readString(pom).replace("@funnel.version@", VERSION)
        .replace("@spark.version@", System.getProperty("spark.version")));
    return to;
  }

  /**
   * Runs Maven on the project with the test's repository as its local one; what is not there
   * comes from the build's own local repository (a file repository), then Maven Central.
   */
  private static String mvn(Path project, String... goals) throws Exception {
    Path settings = WORK.resolve("settings.xml");
    if (!Files.exists(settings)) {
      String url = Path.of(System.getProperty("maven.repo.local")).toUri().toString();
      String repo = "<id>build-local</id><url>" + url + "</url>"
          + "<releases><enabled>true</enabled></releases><snapshots><enabled>false</enabled>"
          + "</snapshots>";
      Files.writeString(settings, "<settings><profiles><profile><id>build-local</id>"
          + "<repositories><repository>" + repo + "</repository></repositories>"
          + "<pluginRepositories><pluginRepository>" + repo + "</pluginRepository>"
          + "</pluginRepositories></profile></profiles><activeProfiles><activeProfile>"
          + "build-local</activeProfile></activeProfiles></settings>");
    }
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("maven.home"), "bin", "mvn").toString(), "-B", "-q",
        "-s", settings.toString(), "-Dmaven.repo.local=" + REPO));
    cmd.addAll(List.of(goals));
    return run(cmd, project);
  }

  private static String run(List<String> cmd, Path dir) throws Exception {
    Path log = Files.createTempFile(WORK, "run", ".log");
    Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true)
        .redirectOutput(log.toFile()).start();
    boolean ended = p.waitFor(300, TimeUnit.SECONDS);
    if (!ended) {
      p.destroyForcibly().waitFor();
    }
    String out = Files.readString(log, StandardCharsets.UTF_8);
    assertTrue(ended, String.join(" ", cmd) + ": did not end in 300 s\n" + out);
    assertEquals(0, p.exitValue(), String.join(" ", cmd) + "\n" + out);
    return out;
  }

  private static String java() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }

  private static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    if (Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      try (Stream<Path> s = Files.list(p)) {
        for (Path c : s.toList()) {
          deleteTree(c);
        }
      }
    }
    Files.delete(p);
  }
}
