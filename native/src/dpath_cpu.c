/* dpath_cpu.c: the device path's stages (dpath.h) on the cpu backend's
 * stream thread: the same functions the kernels run, one lane at a time. */
#include <string.h>

#include "dpath.h"
#include "dpath_cpu.h"
#include "tuning.h"

/* Exclusive scan of n values in place; the total lands at [n]. */
static int64_t scan(int64_t *v, int64_t n) {
  int64_t sum = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t x = v[i];
    v[i] = sum;
    sum += x;
  }
  v[n] = sum;
  return sum;
}

static void scan_all(const struct funnel__dp_args *a, int64_t arrays) {
  struct funnel__dp_summary *s = (struct funnel__dp_summary *)(uintptr_t)a->summary;
  int64_t *chars = (int64_t *)(s + 1) + a->n_cols;
  for (int64_t k = 0; k < arrays; k++) {
    if (k == 0) s->rows = scan((int64_t *)(uintptr_t)a->rows, a->n_parts);
    else chars[k - 1] = scan((int64_t *)(uintptr_t)a->chars + (k - 1) * (a->n_parts + 1), a->n_parts);
  }
}

/* Lays the output out, then hands the summary to the host where it reads
 * it, as the kernels do. */
static void layout(struct funnel__dp_args *a) {
  funnel__dp_layout(a);
  if (a->summary_back != 0)
    memcpy((void *)(uintptr_t)a->summary_back, (const void *)(uintptr_t)a->summary,
           (size_t)funnel__dp_summary_bytes(a));
}

void funnel__dp_run_cpu(int stage, struct funnel__dp_args *a, int64_t first, int64_t n,
                        int64_t m) {
  /* a gated pass's parse and scan, as the kernels ask (dpath.h); its concat
   * copies nothing unless the layout ran */
  if ((stage & FUNNEL_DP_STAGE_GATED) && funnel__dp_shut(a)) return;
  switch (stage & ~FUNNEL_DP_STAGE_GATED) {
    case FUNNEL_DP_PARSE: {
      /* the metadata walked in a copy, as the kernel walks it */
      uint64_t stage[FUNNEL__DP_STAGE_BYTES / 8];
      for (int64_t p = first; p < first + n; p++)
        if (!funnel__dp_parse_short(a, p, 0, 1, (uint8_t *)stage, FUNNEL__DP_STAGE_BYTES))
          funnel__dp_parse(a, p, 0, 1, (uint8_t *)stage, FUNNEL__DP_STAGE_BYTES);
      (void)m; /* one lane */
      /* as the kernel does: a read of so few partitions is parsed whole */
      if (FUNNEL__DP_PARSE_SCANS(a->n_parts, first, n) && a->zmode != FUNNEL_DP_UNPACK) {
        scan_all(a, 1 + a->n_var);
        layout(a);
      }
      break;
    }
    case FUNNEL_DP_SCAN:
      scan_all(a, n);
      layout(a);
      break;
    case FUNNEL_DP_CONCAT: {
      if (!funnel__dp_laid_out(a)) break;
      for (int64_t i = 0; i < n; i++) funnel__dp_piece_copy(a, i, 0, 1, INT64_MAX);
      const int64_t rows = ((const int64_t *)(uintptr_t)a->rows)[a->n_parts];
      const int64_t words = FUNNEL__DP_WORDS(funnel__dp_bit_rows(a));
      const double per_row = rows > 0 ? (double)a->n_parts / (double)rows : 0.0;
      for (int64_t b = 0; b < a->n_bitbufs; b++)
        for (int64_t w = 0; w < words; w++) funnel__dp_bits_word(a, b, w, per_row, 0, 1);
      break;
    }
    default:
      break;
  }
}
