package dev.funnel.tools;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The command line's files: inputs mapped read-only, outputs written beside their name and moved
 * into place. Every problem is one line naming the file ({@link Problem}), never a stack trace.
 */
final class CliFiles {
  private CliFiles() {}

  /** A file the command cannot use; its message names the file and says why. */
  static final class Problem extends IOException {
    private static final long serialVersionUID = 1L;

    Problem(Path file, String why) {
      super(file + ": " + why);
    }
  }

  /** A whole input file, mapped read-only (at most 2 GiB - 1: one Java mapping). */
  static ByteBuffer map(Path in) throws Problem {
    if (!Files.exists(in)) {
      throw new Problem(in, "no such file");
    }
    if (Files.isDirectory(in)) {
      throw new Problem(in, "is a directory, not an Arrow IPC file");
    }
    if (!Files.isRegularFile(in)) {
      // opening a FIFO would wait for a writer; the command maps its inputs
      throw new Problem(in, "is not a regular file (a FIFO, socket or device): give a file");
    }
    try (FileChannel ch = FileChannel.open(in, StandardOpenOption.READ)) {
      long size = ch.size();
      if (size > Integer.MAX_VALUE) {
        throw new Problem(in, String.format(Locale.ROOT,
            "is %,d bytes; the command line reads files of at most %,d bytes (2 GiB - 1, one "
                + "Java mapping): split it, or read it through the API by address",
            size, Integer.MAX_VALUE));
      }
      return ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
    } catch (Problem e) {
      throw e;
    } catch (AccessDeniedException e) {
      throw new Problem(in, "permission denied");
    } catch (IOException e) {
      throw new Problem(in, String.valueOf(e.getMessage()));
    }
  }

  /** Why {@code output} cannot be written, checked before any work; null when it can. */
  static Problem checkOutput(Path output) {
    Path dir = output.toAbsolutePath().getParent();
    if (Files.isDirectory(output)) {
      return new Problem(output, "is a directory");
    }
    if (!Files.isDirectory(dir)) {
      return new Problem(output, Files.exists(dir) ? dir + " is not a directory"
          : "no such directory " + dir);
    }
    if (!Files.isWritable(dir)) {
      return new Problem(output, "directory " + dir + " is not writable");
    }
    return null;
  }

  /** Writes a file's contents. */
  interface Body {
    void write(OutputStream out) throws IOException;
  }

  /**
   * Writes {@code output} through a temporary file beside it, then moves it into place: no
   * half-written output, and the file's mode follows the user's umask (a file made by
   * Files.createTempFile would stay 0600).
   */
  static void write(Path output, Body body) throws IOException {
    Problem p = checkOutput(output);
    if (p != null) {
      throw p;
    }
    Path dir = output.toAbsolutePath().getParent();
    Path tmp = dir.resolve("." + output.getFileName() + "."
        + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".tmp");
    try {
      try (OutputStream os = Files.newOutputStream(tmp, StandardOpenOption.CREATE_NEW,
          StandardOpenOption.WRITE)) {
        body.write(os);
      }
      Files.move(tmp, output, StandardCopyOption.REPLACE_EXISTING,
          StandardCopyOption.ATOMIC_MOVE);
    } catch (NoSuchFileException | AccessDeniedException e) {
      throw new Problem(output, e instanceof NoSuchFileException ? "no such directory " + dir
          : "permission denied");
    } finally {
      Files.deleteIfExists(tmp);
    }
  }
}
