package dev.funnel;

import dev.funnel.tools.Main;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/** Runs the command line in process, keeping what the last run printed to stdout and stderr. */
final class CliCapture {
  private final ByteArrayOutputStream stdout = new ByteArrayOutputStream();
  private final ByteArrayOutputStream stderr = new ByteArrayOutputStream();

  /** {@code Main.run(args)}: its exit status. */
  int run(String... args) {
    stdout.reset();
    stderr.reset();
    try (PrintStream out = new PrintStream(stdout, true, StandardCharsets.UTF_8);
        PrintStream err = new PrintStream(stderr, true, StandardCharsets.UTF_8)) {
      return Main.run(args, out, err);
    }
  }

  /** What the last run printed to stdout. */
  String out() {
    return stdout.toString(StandardCharsets.UTF_8);
  }

  /** What the last run printed to stderr. */
  String err() {
    return stderr.toString(StandardCharsets.UTF_8);
  }
}
