/* test_concat.c: funnel__concat_segments, the cpu concat that every device
 * kernel is held to, one segment kind at a time, against bit-by-bit and
 * value-by-value loops. Every buffer is malloc'd at exactly the bytes a
 * segment may touch, so ASan catches a read or write past them, and every
 * destination starts as random bytes, so a changed bit outside the range
 * shows. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "segment.h"

static uint64_t rng = 42;

static uint8_t *random_bytes(size_t n) {
  uint8_t *p = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)check_rand(&rng);
  return p;
}

static int get_bit(const uint8_t *p, uint64_t i) { return (p[i / 8] >> (i % 8)) & 1; }
static void set_bit(uint8_t *p, uint64_t i, int v) {
  if (v) p[i / 8] |= (uint8_t)(1u << (i % 8));
  else p[i / 8] &= (uint8_t)~(1u << (i % 8));
}

static size_t bytes_for_bits(uint64_t bits) { return (size_t)((bits + 7) / 8); }

static void run1(struct funnel__segment s) { funnel__concat_segments(&s, 1); }

/* One BITS segment; returns 1 when the destination is as expected. */
static int bits_case(uint32_t src_bit, uint64_t dst_bit, uint64_t count) {
  const size_t src_len = bytes_for_bits(src_bit + count), dst_len = bytes_for_bits(dst_bit + count);
  uint8_t *src = random_bytes(src_len), *dst = random_bytes(dst_len);
  uint8_t *want = malloc(dst_len ? dst_len : 1);
  memcpy(want, dst, dst_len);
  for (uint64_t i = 0; i < count; i++) set_bit(want, dst_bit + i, get_bit(src, src_bit + i));
  run1((struct funnel__segment){.kind = FUNNEL_SEG_BITS, .src = (uintptr_t)src, .dst = (uintptr_t)dst,
                                .count = count, .dst_bit = dst_bit, .src_bit = src_bit});
  int ok = CHECK_MEM(dst, want, dst_len);
  free(src);
  free(dst);
  free(want);
  return ok;
}

static void concat_bits_every_offset(void) {
  for (uint32_t sb = 0; sb < 8; sb++)
    for (uint64_t db = 0; db < 64; db++)
      for (uint64_t n = 0; n <= 70; n++) {
        check_context("src_bit %u dst_bit %llu count %llu", sb, (unsigned long long)db, (unsigned long long)n);
        if (!bits_case(sb, db, n)) return;
      }
}

static void concat_bits_long_runs(void) {
  static const uint64_t counts[] = {63, 64, 65, 127, 128, 500, 1000, 4096, 4099, 65537};
  static const uint64_t dst_bits[] = {0, 1, 7, 8, 9, 64, 65, 1000, 1003};
  for (uint32_t sb = 0; sb < 8; sb++)
    for (size_t d = 0; d < sizeof(dst_bits) / sizeof(dst_bits[0]); d++)
      for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        check_context("src_bit %u dst_bit %llu count %llu", sb, (unsigned long long)dst_bits[d],
                      (unsigned long long)counts[c]);
        if (!bits_case(sb, dst_bits[d], counts[c])) return;
      }
}

static int fill_case(int kind, uint64_t dst_bit, uint64_t count) {
  const size_t dst_len = bytes_for_bits(dst_bit + count);
  uint8_t *dst = random_bytes(dst_len);
  uint8_t *want = malloc(dst_len ? dst_len : 1);
  memcpy(want, dst, dst_len);
  for (uint64_t i = 0; i < count; i++) set_bit(want, dst_bit + i, kind == FUNNEL_SEG_ONES);
  run1((struct funnel__segment){.kind = (uint32_t)kind, .dst = (uintptr_t)dst, .count = count, .dst_bit = dst_bit});
  int ok = CHECK_MEM(dst, want, dst_len);
  free(dst);
  free(want);
  return ok;
}

static void concat_ones_and_zeros_every_offset(void) {
  static const uint64_t long_counts[] = {127, 128, 129, 1000, 4096, 10007};
  for (int kind = FUNNEL_SEG_ONES; kind <= FUNNEL_SEG_ZEROS; kind++) {
    for (uint64_t db = 0; db < 64; db++) {
      for (uint64_t n = 0; n <= 70; n++) {
        check_context("kind %d dst_bit %llu count %llu", kind, (unsigned long long)db, (unsigned long long)n);
        if (!fill_case(kind, db, n)) return;
      }
      for (size_t c = 0; c < sizeof(long_counts) / sizeof(long_counts[0]); c++) {
        check_context("kind %d dst_bit %llu count %llu", kind, (unsigned long long)db,
                      (unsigned long long)long_counts[c]);
        if (!fill_case(kind, db, long_counts[c])) return;
      }
    }
  }
}

/* How the plan uses bit segments: pieces of a bitmap written one after
 * another into one destination (sharing bytes), ONES for pieces without a
 * validity buffer, ZEROS for the padding, all in one call. */
static void concat_bitmap_from_pieces_in_one_launch(void) {
  for (int iter = 0; iter < 2000; iter++) {
    check_context("iteration %d", iter);
    int n_pieces = 1 + (int)check_rand_below(&rng, 12);
    struct funnel__segment segs[14];
    uint8_t *srcs[12] = {0};
    uint64_t total = 0;
    for (int i = 0; i < n_pieces; i++) total += check_rand_below(&rng, 40);
    const size_t dst_len = bytes_for_bits(total) + (check_rand_below(&rng, 2) ? 8 : 0);
    uint8_t *dst = random_bytes(dst_len), *want = malloc(dst_len ? dst_len : 1);
    memcpy(want, dst, dst_len);
    uint64_t row = 0;
    uint64_t remaining = total;
    int n = 0;
    for (int i = 0; i < n_pieces; i++) {
      uint64_t len = i == n_pieces - 1 ? remaining : check_rand_below(&rng, remaining + 1);
      remaining -= len;
      if (len == 0) continue;
      if (check_rand_below(&rng, 4) == 0) {
        segs[n++] = (struct funnel__segment){.kind = FUNNEL_SEG_ONES, .dst = (uintptr_t)dst, .count = len, .dst_bit = row};
        for (uint64_t k = 0; k < len; k++) set_bit(want, row + k, 1);
      } else {
        uint32_t sb = (uint32_t)check_rand_below(&rng, 8);
        srcs[i] = random_bytes(bytes_for_bits(sb + len));
        segs[n++] = (struct funnel__segment){.kind = FUNNEL_SEG_BITS, .src = (uintptr_t)srcs[i], .dst = (uintptr_t)dst,
                                             .count = len, .dst_bit = row, .src_bit = sb};
        for (uint64_t k = 0; k < len; k++) set_bit(want, row + k, get_bit(srcs[i], sb + k));
      }
      row += len;
    }
    const uint64_t pad = bytes_for_bits(total) * 8 - total;
    if (pad > 0) {
      segs[n++] = (struct funnel__segment){.kind = FUNNEL_SEG_ZEROS, .dst = (uintptr_t)dst, .count = pad, .dst_bit = total};
      for (uint64_t k = 0; k < pad; k++) set_bit(want, total + k, 0);
    }
    funnel__concat_segments(segs, n);
    int ok = CHECK_MEM(dst, want, dst_len);
    for (int i = 0; i < n_pieces; i++) free(srcs[i]);
    free(dst);
    free(want);
    if (!ok) return;
  }
}

static void concat_offsets32_rebase(void) {
  static const int64_t rebases[] = {0, 1, -1, 7, -1000, 123456, -123456, 1 << 30};
  for (size_t r = 0; r < sizeof(rebases) / sizeof(rebases[0]); r++)
    for (uint64_t n = 0; n <= 40; n++)
      for (int misalign = 0; misalign < 4; misalign++) {
        check_context("rebase %lld count %llu misalign %d", (long long)rebases[r], (unsigned long long)n, misalign);
        /* offsets from a partition may sit at any byte: the source starts
         * `misalign` bytes into its allocation */
        uint8_t *in = malloc(4 * n + (size_t)misalign + 1), *out = malloc(4 * n + 1);
        int32_t v = 200000 + (int32_t)check_rand_below(&rng, 1000);
        for (uint64_t k = 0; k < n; k++) {
          memcpy(in + misalign + 4 * k, &v, 4);
          v += (int32_t)check_rand_below(&rng, 50);
        }
        run1((struct funnel__segment){.kind = FUNNEL_SEG_OFFSETS32, .src = (uintptr_t)(in + misalign),
                                      .dst = (uintptr_t)out, .count = n, .value = rebases[r]});
        int64_t bad = -1;
        for (uint64_t k = 0; k < n && bad < 0; k++) {
          int32_t a, b;
          memcpy(&a, in + misalign + 4 * k, 4);
          memcpy(&b, out + 4 * k, 4);
          if ((int64_t)b != (int64_t)a + rebases[r]) bad = (int64_t)k;
        }
        int ok = CHECK_EQ_I64(bad, -1);
        free(in);
        free(out);
        if (!ok) return;
      }
}

static void concat_offsets64_rebase(void) {
  static const int64_t rebases[] = {0, 1, -1, -5000000000, 5000000000, INT64_C(1) << 40};
  for (size_t r = 0; r < sizeof(rebases) / sizeof(rebases[0]); r++)
    for (uint64_t n = 0; n <= 40; n++)
      for (int misalign = 0; misalign < 8; misalign += 3) {
        check_context("rebase %lld count %llu misalign %d", (long long)rebases[r], (unsigned long long)n, misalign);
        uint8_t *in = malloc(8 * n + (size_t)misalign + 1), *out = malloc(8 * n + 1);
        int64_t v = INT64_C(6000000000) + (int64_t)check_rand_below(&rng, 1000);
        for (uint64_t k = 0; k < n; k++) {
          memcpy(in + misalign + 8 * k, &v, 8);
          v += (int64_t)check_rand_below(&rng, 50);
        }
        run1((struct funnel__segment){.kind = FUNNEL_SEG_OFFSETS64, .src = (uintptr_t)(in + misalign),
                                      .dst = (uintptr_t)out, .count = n, .value = rebases[r]});
        int64_t bad = -1;
        for (uint64_t k = 0; k < n && bad < 0; k++) {
          int64_t a, b;
          memcpy(&a, in + misalign + 8 * k, 8);
          memcpy(&b, out + 8 * k, 8);
          if (b != a + rebases[r]) bad = (int64_t)k;
        }
        int ok = CHECK_EQ_I64(bad, -1);
        free(in);
        free(out);
        if (!ok) return;
      }
}

static void concat_put_stores_one_value(void) {
  static const int64_t values[] = {0, 1, -1, INT32_MAX, INT32_MIN, 0x12345678};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    check_context("value %lld", (long long)values[i]);
    uint8_t *d4 = malloc(4), *d8 = malloc(8);
    run1((struct funnel__segment){.kind = FUNNEL_SEG_PUT32, .dst = (uintptr_t)d4, .value = values[i]});
    int32_t v32;
    memcpy(&v32, d4, 4);
    CHECK_EQ_I64(v32, values[i]);
    run1((struct funnel__segment){.kind = FUNNEL_SEG_PUT64, .dst = (uintptr_t)d8, .value = values[i] * 3});
    int64_t v64;
    memcpy(&v64, d8, 8);
    CHECK_EQ_I64(v64, values[i] * 3);
    free(d4);
    free(d8);
  }
  /* PUT64 of a value past 32 bits, at an odd address inside a buffer whose
   * neighbouring bytes must stay */
  uint8_t buf[24];
  for (int i = 0; i < 24; i++) buf[i] = (uint8_t)(0xA0 + i);
  uint8_t want[24];
  memcpy(want, buf, 24);
  const int64_t big = INT64_C(0x0102030405060708);
  memcpy(want + 5, &big, 8);
  run1((struct funnel__segment){.kind = FUNNEL_SEG_PUT64, .dst = (uintptr_t)(buf + 5), .value = big});
  CHECK_MEM(buf, want, 24);
  const int32_t small = -123456;
  memcpy(want + 17, &small, 4);
  run1((struct funnel__segment){.kind = FUNNEL_SEG_PUT32, .dst = (uintptr_t)(buf + 17), .value = small});
  CHECK_MEM(buf, want, 24);
}

static void concat_bytes_copies_exactly(void) {
  for (uint64_t n = 0; n <= 300; n += (n < 40 ? 1 : 37)) {
    check_context("count %llu", (unsigned long long)n);
    uint8_t *src = random_bytes(n), *dst = random_bytes(n);
    run1((struct funnel__segment){.kind = FUNNEL_SEG_BYTES, .src = (uintptr_t)src, .dst = (uintptr_t)dst, .count = n});
    int ok = CHECK_MEM(dst, src, n);
    free(src);
    free(dst);
    if (!ok) return;
  }
}

/* Segments of a string column as the plan makes them: offsets rebased
 * piece by piece, bytes appended, the final offset put. */
static void concat_string_column_from_pieces(void) {
  const int n_pieces = 5;
  int32_t *offs[5];
  uint8_t *chars[5];
  int64_t lens[5], firsts[5], lasts[5];
  int64_t rows = 0, total = 0;
  for (int p = 0; p < n_pieces; p++) {
    lens[p] = 1 + (int64_t)check_rand_below(&rng, 10);
    firsts[p] = (int64_t)check_rand_below(&rng, 20); /* offsets need not start at 0 */
    offs[p] = malloc(sizeof(int32_t) * (size_t)(lens[p] + 1));
    int64_t v = firsts[p];
    for (int64_t k = 0; k <= lens[p]; k++) {
      offs[p][k] = (int32_t)v;
      v += (int64_t)check_rand_below(&rng, 6);
    }
    lasts[p] = offs[p][lens[p]];
    chars[p] = random_bytes((size_t)lasts[p]);
    rows += lens[p];
    total += lasts[p] - firsts[p];
  }
  int32_t *out_offs = malloc(sizeof(int32_t) * (size_t)(rows + 1));
  uint8_t *out_chars = malloc((size_t)total + 1);
  struct funnel__segment segs[11];
  int n = 0;
  int64_t row = 0, base = 0;
  for (int p = 0; p < n_pieces; p++) {
    segs[n++] = (struct funnel__segment){.kind = FUNNEL_SEG_OFFSETS32, .src = (uintptr_t)offs[p],
                                         .dst = (uintptr_t)(out_offs + row), .count = (uint64_t)lens[p],
                                         .value = base - firsts[p]};
    segs[n++] = (struct funnel__segment){.kind = FUNNEL_SEG_BYTES, .src = (uintptr_t)(chars[p] + firsts[p]),
                                         .dst = (uintptr_t)(out_chars + base),
                                         .count = (uint64_t)(lasts[p] - firsts[p])};
    row += lens[p];
    base += lasts[p] - firsts[p];
  }
  segs[n++] = (struct funnel__segment){.kind = FUNNEL_SEG_PUT32, .dst = (uintptr_t)(out_offs + rows), .value = base};
  funnel__concat_segments(segs, n);
  /* the expected column: each row's bytes, one after another */
  int64_t r = 0, at = 0;
  for (int p = 0; p < n_pieces; p++)
    for (int64_t k = 0; k < lens[p]; k++, r++) {
      CHECK_EQ_I64(out_offs[r], at);
      int64_t len = offs[p][k + 1] - offs[p][k];
      CHECK_MEM(out_chars + at, chars[p] + offs[p][k], len);
      at += len;
    }
  CHECK_EQ_I64(out_offs[rows], at);
  CHECK_EQ_I64(at, total);
  for (int p = 0; p < n_pieces; p++) {
    free(offs[p]);
    free(chars[p]);
  }
  free(out_offs);
  free(out_chars);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(concat_bits_every_offset),
      CHECK_TEST(concat_bits_long_runs),
      CHECK_TEST(concat_ones_and_zeros_every_offset),
      CHECK_TEST(concat_bitmap_from_pieces_in_one_launch),
      CHECK_TEST(concat_offsets32_rebase),
      CHECK_TEST(concat_offsets64_rebase),
      CHECK_TEST(concat_put_stores_one_value),
      CHECK_TEST(concat_bytes_copies_exactly),
      CHECK_TEST(concat_string_column_from_pieces),
  };
  return CHECK_MAIN(argc, argv, tests);
}
