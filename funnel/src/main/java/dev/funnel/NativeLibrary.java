package dev.funnel;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads libfunnel.so once per class loader: from the path in the system property
 * {@code funnel.library} when set, otherwise from inside the jar (copied to a temporary file, since
 * the dynamic loader needs a file).
 */
final class NativeLibrary {
  private static final String RESOURCE =
      "/dev/funnel/native/" + System.getProperty("os.arch") + "/libfunnel.so";
  private static volatile boolean loaded;

  private NativeLibrary() {}

  static void load() {
    if (loaded) {
      return;
    }
    synchronized (NativeLibrary.class) {
      if (loaded) {
        return;
      }
      String explicit = System.getProperty("funnel.library");
      if (explicit != null && !explicit.isEmpty()) {
        System.load(Path.of(explicit).toAbsolutePath().toString());
      } else {
        System.load(extract().toString());
      }
      loaded = true;
    }
  }

  private static Path extract() {
    try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new UnsatisfiedLinkError(
            "funnel: no native library for "
                + System.getProperty("os.name")
                + "/"
                + System.getProperty("os.arch")
                + " in the jar (looked for "
                + RESOURCE
                + ")");
      }
      Path file = Files.createTempFile("libfunnel", ".so");
      file.toFile().deleteOnExit();
      Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
      return file;
    } catch (IOException e) {
      throw new UncheckedIOException("funnel: cannot extract the native library", e);
    }
  }
}
