package dev.funnel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;

/**
 * Every byte of a small all-types partition written by Arrow Java, flipped a few ways, read
 * through funnel: each outcome is a {@link FunnelException} naming partition 0, raised by funnel's
 * own parser (not by the Java side's last line of defence), or a table whose {@code toArrow()}
 * equals Arrow Java's own reading of the same flipped bytes (and whose {@code head} prints).
 * Anything else is a finding, and nothing may leak.
 *
 * <p>Before the parser checked schemas as Arrow Java reads them, 3,313 of the 67,536 inputs
 * failed: 2,922 passed the parser and threw in DeviceTable's constructor (Arrow Java's
 * IndexOutOfBoundsException, IllegalArgumentException "Invalid UTF-8", ArrayIndexOutOfBounds),
 * 4 in toArrow (ArithmeticException: fixed_size_binary(0)), 16 were read by funnel where Arrow
 * Java's stream reader fails (metadata versions past V5) and 371 read differently (null counts
 * that the validity bits contradict); then 2 in head (a decimal scale near -2^31, which
 * TablePrinter printed in plain form).
 */
class ByteFlipTest extends DeviceTestCase {
  /** xor values per byte: each bit alone, and all of them */
  private static final int[] FLIPS = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff};

  private static final String ACCEPTED = "accepted, as Arrow Java reads it";

  /** Findings listed in the failure message, per kind. */
  private static final int EXAMPLES = 4;

  @Test
  void everyFlippedByteIsRejectedByFunnelOrReadAsArrowJavaReadsIt() {
    byte[] good =
        TestSupport.randomStream(TestSupport.allTypesSchema(), allocator, new Random(11), 0.3, 3, 2);
    Map<String, Integer> outcomes = new TreeMap<>();
    Map<String, List<String>> findings = new TreeMap<>();
    ByteBuffer input = ByteBuffer.allocateDirect(good.length);
    long[] handles0 = Handles.live();
    long[] native0;
    long[] nativeAfter;
    try (FunnelReader reader = new FunnelReader(device)) {
      input.put(good).flip();
      Outcome unflipped = outcome(reader, input, good); // warm: the pools exist
      assertEquals(ACCEPTED, unflipped.kind(), "the partition as written: " + unflipped.finding());
      native0 = Faults.nativeLive();
      for (int at = 0; at < good.length; at++) {
        for (int flip : FLIPS) {
          byte[] bad = good.clone();
          bad[at] ^= (byte) flip;
          input.clear();
          input.put(bad).flip();
          Outcome o = outcome(reader, input, bad);
          outcomes.merge(o.kind(), 1, Integer::sum);
          if (o.finding() != null) {
            List<String> list = findings.computeIfAbsent(o.kind(), k -> new ArrayList<>());
            if (list.size() < EXAMPLES) {
              list.add(String.format("byte %d (%s) ^ 0x%02x: %s", at, where(good, at), flip,
                  o.finding()));
            }
          }
        }
      }
      nativeAfter = Faults.nativeLive();
    }
    System.out.println("ByteFlipTest: " + good.length + " bytes x " + FLIPS.length + " flips: "
        + outcomes);
    StringBuilder report = new StringBuilder();
    findings.forEach((kind, list) -> {
      report.append("\n").append(kind).append(" (").append(outcomes.get(kind)).append("):");
      list.forEach(f -> report.append("\n  ").append(f));
    });
    assertTrue(findings.isEmpty(), "outcomes " + outcomes + "; findings:" + report);
    assertArrayEquals(native0, nativeAfter, "native memory, events or streams left");
    assertArrayEquals(handles0, Handles.live(), "Java handles left");
  }

  /** "Schema metadata +12", "RecordBatch 1 body +40": where byte {@code at} of a stream is. */
  private static String where(byte[] stream, int at) {
    int batch = 0;
    for (TestSupport.Span s : TestSupport.messages(stream)) {
      String m = s.eos() ? "end-of-stream" : s.headerType() == MessageHeader.Schema ? "Schema" : "RecordBatch " + batch++;
      if (at < s.metaStart()) {
        return m + " prefix +" + (at - s.start());
      }
      if (at < s.bodyStart()) {
        return m + " metadata +" + (at - s.metaStart());
      }
      if (at < s.end()) {
        return m + " body +" + (at - s.bodyStart());
      }
    }
    return "past the end";
  }

  /** What happened to one input: its kind, and what is wrong with it (null when nothing). */
  private record Outcome(String kind, String finding) {}

  private Outcome outcome(FunnelReader reader, ByteBuffer input, byte[] bytes) {
    DeviceTable table;
    try {
      table = reader.read(input);
    } catch (FunnelException e) {
      return rejected(e);
    } catch (RuntimeException e) {
      return new Outcome("read threw " + e.getClass().getSimpleName(), e.toString());
    }
    String step = "toArrow";
    try (table) {
      String diff;
      try (VectorSchemaRoot got = table.toArrow(allocator)) {
        diff = differenceFromArrowJava(got, table.schema(), bytes);
      }
      step = "head"; // funnel show's path: the first rows, printed
      table.head(3);
      return diff == null ? new Outcome(ACCEPTED, null)
          : new Outcome("accepted, Arrow Java " + diff.substring(0, diff.indexOf(':')), diff);
    } catch (FunnelException e) {
      return rejected(e);
    } catch (RuntimeException e) {
      return new Outcome(step + " threw " + e.getClass().getSimpleName(), e.toString());
    }
  }

  private static Outcome rejected(FunnelException e) {
    String kind = "rejected: " + e.getClass().getSimpleName();
    if (e.getCause() != null) {
      return new Outcome(kind + " by the Java side, not funnel's parser",
          e.getMessage() + " (cause " + e.getCause() + ")");
    }
    if (e.partition() != 0) {
      return new Outcome(kind + " naming partition " + e.partition(), e.getMessage());
    }
    return new Outcome(kind, null);
  }

  /**
   * Null when {@code got} (and {@code schema}, the table's) hold what Arrow Java reads from {@code
   * bytes}; else "fails: ..." or "differs: ...".
   */
  private String differenceFromArrowJava(VectorSchemaRoot got, Schema schema, byte[] bytes) {
    try (ArrowStreamReader r = new ArrowStreamReader(new ByteArrayInputStream(bytes), allocator)) {
      VectorSchemaRoot in = r.getVectorSchemaRoot();
      if (!in.getSchema().equals(schema) || !in.getSchema().equals(got.getSchema())) {
        return "differs: schema " + schema + ", Arrow Java reads " + in.getSchema();
      }
      int row = 0;
      while (r.loadNextBatch()) {
        int n = in.getRowCount();
        if (row + n > got.getRowCount()) {
          return "differs: funnel read " + got.getRowCount() + " rows, Arrow Java more";
        }
        for (int c = 0; c < in.getFieldVectors().size(); c++) {
          FieldVector want = in.getVector(c);
          FieldVector have = got.getVector(c);
          for (int i = 0; i < n; i++) {
            Object w = want.isNull(i) ? null : want.getObject(i);
            Object h = have.isNull(row + i) ? null : have.getObject(row + i);
            if (want.isNull(i) != have.isNull(row + i) || !TestSupport.valuesEqual(w, h)) {
              return "differs: column " + c + " row " + (row + i) + ": funnel " + h
                  + ", Arrow Java " + w;
            }
          }
        }
        row += n;
      }
      if (row != got.getRowCount()) {
        return "differs: funnel read " + got.getRowCount() + " rows, Arrow Java " + row;
      }
      return null;
    } catch (Exception e) {
      return "fails with " + e.getClass().getSimpleName() + ": " + e.getMessage();
    }
  }
}
