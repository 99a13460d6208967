package dev.funnel.tools;

import dev.funnel.DeviceTable;
import dev.funnel.FunnelDevice;
import dev.funnel.FunnelException;
import dev.funnel.FunnelReader;
import dev.funnel.ReadStats;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;

/**
 * The command line.
 *
 * <pre>
 * java -jar funnel.jar demo [--backend auto|cpu|cuda] [--partitions N] [--rows N]
 * java -jar funnel.jar concat [--backend auto|cpu|cuda] [--stats] -o OUT.arrows IN.arrows...
 * java -jar funnel.jar show [--backend auto|cpu|cuda] [--rows N] FILE.arrows...
 * java -jar funnel.jar bench --workloads DIR [--backend auto|cpu|cuda] [--reps N] [--csv OUT.csv]
 *                            [--c-results C.csv] [--jit-warmup-ms MS]
 * java -jar funnel.jar chart [-o OUT.png] [--mix int64|mixed|strings|nested] RESULTS.csv...
 * </pre>
 */
public final class Main {
  private Main() {}

  /** Thrown for a wrong command line; exits 2. */
  static final class UsageException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  static final String USAGE =
      "usage: funnel demo [--backend auto|cpu|cuda] [--partitions N] [--rows N] [--seed N]\n"
          + "       funnel concat [--backend auto|cpu|cuda] [--stats] -o OUT.arrows IN.arrows...\n"
          + "       funnel show [--backend auto|cpu|cuda] [--rows N] FILE.arrows...\n"
          + "       funnel bench --workloads DIR [--backend auto|cpu|cuda] [--reps N] [--csv OUT.csv]\n"
          + "                    [--c-results C.csv] [--jit-warmup-ms MS]\n"
          + "       funnel chart [-o OUT.png] [--mix int64|mixed|strings|nested] RESULTS.csv...";

  public static void main(String[] args) {
    // Arrow logs through SLF4J, and funnel brings no logging provider: SLF4J's three-line
    // warning about it would come before every one-line error. Arrow logs nothing the command
    // line needs, so the warning is silenced (the user's -D setting wins)
    if (System.getProperty("slf4j.internal.verbosity") == null) {
      System.setProperty("slf4j.internal.verbosity", "ERROR");
    }
    System.exit(run(args, System.out, System.err));
  }

  /** Runs a command; returns the exit status. */
  public static int run(String[] args, PrintStream out, PrintStream err) {
    if (args.length == 0 || args[0].equals("-h") || args[0].equals("--help")) {
      (args.length == 0 ? err : out).println(USAGE);
      return args.length == 0 ? 2 : 0;
    }
    String[] rest = java.util.Arrays.copyOfRange(args, 1, args.length);
    if (java.util.Arrays.asList(rest).contains("--help")
        || java.util.Arrays.asList(rest).contains("-h")) {
      String usage = usage(args[0]);
      if (usage != null) {
        out.println(usage);
        return 0;
      }
    }
    try {
      switch (args[0]) {
        case "concat":
          return concat(rest, out, err);
        case "show":
          return show(rest, out, err);
        case "demo":
          return Demo.run(rest, out);
        case "bench":
          return Bench.run(rest, out, err);
        case "chart":
          return Chart.run(rest, out, err);
        default:
          throw new UsageException("unknown command '" + args[0] + "'");
      }
    } catch (UsageException e) {
      err.println("funnel: " + e.getMessage());
      err.println(USAGE);
      return 2;
    } catch (FunnelException e) {
      err.println("funnel: " + oneLine(e.getMessage()));
      return 1;
    }
  }

  /** The usage lines of one command (its line of USAGE and those continuing it), or null. */
  static String usage(String command) {
    StringBuilder b = new StringBuilder();
    boolean in = false;
    for (String line : USAGE.split("\n")) {
      String body = line.replaceFirst("^usage: ", "").strip();
      if (body.startsWith("funnel ")) {
        in = body.startsWith("funnel " + command + " ") || body.equals("funnel " + command);
      }
      if (in) {
        b.append(b.length() == 0 ? "usage: " + body : "\n       " + line.strip());
      }
    }
    return b.length() == 0 ? null : b.toString();
  }

  static String oneLine(String s) {
    return s == null ? "" : s.replace('\n', ' ');
  }

  static String value(String[] args, int i) {
    if (i + 1 >= args.length) {
      throw new UsageException(args[i] + " needs a value");
    }
    return args[i + 1];
  }

  private static int concat(String[] args, PrintStream out, PrintStream err) {
    String backend = "auto";
    boolean stats = false;
    Path output = null;
    List<Path> inputs = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--backend":
          backend = value(args, i++);
          break;
        case "--stats":
          stats = true;
          break;
        case "-o":
        case "--output":
          output = Path.of(value(args, i++));
          break;
        default:
          if (args[i].startsWith("-") && !args[i].equals("-")) {
            throw new UsageException("unknown option " + args[i]);
          }
          inputs.add(Path.of(args[i]));
      }
    }
    if (output == null) {
      throw new UsageException("concat needs -o OUT.arrows");
    }
    if (inputs.isEmpty()) {
      throw new UsageException("concat needs at least one input file");
    }

    CliFiles.Problem bad = CliFiles.checkOutput(output);
    if (bad != null) {
      err.println("funnel: " + oneLine(bad.getMessage()));
      return 1;
    }
    List<ByteBuffer> partitions = mapAll(inputs, err);
    if (partitions == null) {
      return 1;
    }

    try (FunnelDevice device = FunnelDevice.open(backend);
        FunnelReader reader = new FunnelReader(device);
        BufferAllocator allocator = new RootAllocator()) {
      ReadStats readStats;
      try (DeviceTable table = reader.read(partitions);
          VectorSchemaRoot root = table.toArrow(allocator)) {
        readStats = table.stats();
        CliFiles.write(output, os -> {
          try (ArrowStreamWriter writer =
              new ArrowStreamWriter(root, null, Channels.newChannel(os))) {
            writer.start();
            writer.writeBatch();
            writer.end();
          }
        });
      }
      if (stats) {
        String json = readStats.toJson();
        out.println("{\"backend\": \"" + device.backend() + "\", " + json.substring(1));
      }
      return 0;
    } catch (FunnelException e) {
      return failed(e, inputs, err);
    } catch (IllegalStateException e) {
      // toArrow: more rows than an Arrow Java vector holds (funnel reads them, the writer cannot)
      err.println("funnel: " + oneLine(e.getMessage()));
      return 1;
    } catch (CliFiles.Problem e) {
      err.println("funnel: " + oneLine(e.getMessage()));
      return 1;
    } catch (IOException e) {
      err.println("funnel: " + output + ": " + oneLine(e.toString()));
      return 1;
    }
  }

  /** The files mapped read-only, one partition each; null (the error printed) when one fails. */
  private static List<ByteBuffer> mapAll(List<Path> inputs, PrintStream err) {
    List<ByteBuffer> partitions = new ArrayList<>();
    for (Path in : inputs) {
      try {
        partitions.add(CliFiles.map(in));
      } catch (CliFiles.Problem e) {
        err.println("funnel: " + oneLine(e.getMessage()));
        return null;
      }
    }
    return partitions;
  }

  /** Prints a read's failure on one line, naming the file of the partition at fault; returns 1. */
  private static int failed(FunnelException e, List<Path> inputs, PrintStream err) {
    String where = "";
    if (e.partition() >= 0 && e.partition() < inputs.size()) {
      where = inputs.get((int) e.partition()) + ": ";
    }
    err.println("funnel: " + where + oneLine(e.getMessage()));
    return 1;
  }

  /**
   * show: reads the files as the partitions of one read and prints the schema with each column's
   * null count, the row count, and the first rows ({@link DeviceTable#head}).
   */
  private static int show(String[] args, PrintStream out, PrintStream err) {
    String backend = "auto";
    int rows = 20;
    List<Path> inputs = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--backend":
          backend = value(args, i++);
          break;
        case "--rows":
          rows = count(args, i++);
          break;
        default:
          if (args[i].startsWith("-") && !args[i].equals("-")) {
            throw new UsageException("unknown option " + args[i]);
          }
          inputs.add(Path.of(args[i]));
      }
    }
    if (inputs.isEmpty()) {
      throw new UsageException("show needs at least one file");
    }

    List<ByteBuffer> partitions = mapAll(inputs, err);
    if (partitions == null) {
      return 1;
    }

    try (FunnelDevice device = FunnelDevice.open(backend);
        FunnelReader reader = new FunnelReader(device);
        DeviceTable table = reader.read(partitions)) {
      // the rows first: a read that fails on the device fails before anything is printed
      String head = table.head(rows);
      out.println(String.format(Locale.ROOT, "%,d", table.numRows())
          + (table.numRows() == 1 ? " row" : " rows")
          + " in " + inputs.size() + (inputs.size() == 1 ? " partition" : " partitions")
          + ", backend " + device.backend());
      out.println();
      out.print(table.describeColumns());
      out.println();
      out.print(head);
      return 0;
    } catch (FunnelException e) {
      return failed(e, inputs, err);
    }
  }

  /** The non-negative int after option {@code args[i]}. */
  private static int count(String[] args, int i) {
    String v = value(args, i);
    try {
      int n = Integer.parseInt(v);
      if (n >= 0) {
        return n;
      }
    } catch (NumberFormatException e) {
      // said below
    }
    throw new UsageException(args[i] + " needs a number of 0 or more, not '" + v + "'");
  }
}
