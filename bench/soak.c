/* soak.c: issue 5, item 7. Many reads of random shapes in one process;
 * process memory (resident set), what funnel keeps alive (allocations,
 * events, streams, pinned bytes) and, on cuda, the device's memory in use
 * are sampled as it goes, and must be flat after the warm-up. Recorded in
 * bench/RESULTS.md, not a timed test.
 *
 *   build/funnel_soak [--backend auto|cpu|cuda] [--reads N] [--every N]
 *
 * The shapes: 32 tables of random schemas (1 to 8 columns of int64, int32,
 * float64, bool, utf8, with nulls), each cut into 32 partitions of 0 to 400
 * rows, written once; each read takes a random run of one table's
 * partitions, from pinned or pageable memory, with a random transfer mode,
 * and is checked against the rows and null counts the writer made. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "ipc_writer.h"

enum { TABLES = 32, PARTS = 32, MAX_COLS = 8, MAX_ROWS = 400 };

struct table {
  struct iw_field fields[MAX_COLS];
  struct iw_schema schema;
  int n_cols;
  struct funnel_partition pageable[PARTS], pinned[PARTS];
  int64_t rows[PARTS];
  int64_t nulls[PARTS][MAX_COLS];
  void *block;
  size_t block_size;
};

static void die(const char *what) {
  fprintf(stderr, "funnel_soak: %s\n", what);
  exit(2);
}

static void table_make(struct funnel_device *dev, struct table *t, uint64_t *rng) {
  static const int TYPES[5] = {FUNNEL_TYPE_INT64, FUNNEL_TYPE_INT32, FUNNEL_TYPE_FLOAT64,
                               FUNNEL_TYPE_BOOL, FUNNEL_TYPE_UTF8};
  static const char *const NAMES[MAX_COLS] = {"a", "b", "c", "d", "e", "f", "g", "h"};
  memset(t, 0, sizeof(*t));
  t->n_cols = 1 + (int)check_rand_below(rng, MAX_COLS);
  for (int c = 0; c < t->n_cols; c++)
    t->fields[c] = (struct iw_field){.type = TYPES[check_rand_below(rng, 5)], .name = NAMES[c],
                                     .nullable = 1};
  t->schema = (struct iw_schema){t->n_cols, t->fields, 0};
  size_t total = 0;
  struct iw_buf bufs[PARTS];
  for (int p = 0; p < PARTS; p++) {
    t->rows[p] = (int64_t)check_rand_below(rng, MAX_ROWS + 1);
    struct iw_col cols[MAX_COLS];
    for (int c = 0; c < t->n_cols; c++) {
      iw_col_random(&cols[c], &t->fields[c], t->rows[p], 100, rng);
      for (int64_t r = 0; r < t->rows[p]; r++) t->nulls[p][c] += !cols[c].valid[r];
    }
    memset(&bufs[p], 0, sizeof(bufs[p]));
    iw_schema_message(&bufs[p], &t->schema, NULL, NULL);
    iw_batch_from_cols(&bufs[p], &t->schema, cols, 0, t->rows[p], NULL, NULL);
    iw_eos(&bufs[p], NULL);
    for (int c = 0; c < t->n_cols; c++) iw_col_free(&cols[c]);
    total += (bufs[p].len + 63) / 64 * 64;
  }
  struct funnel_error err;
  t->block_size = total;
  if (funnel_device_pinned_alloc(dev, total, &t->block, &err) != FUNNEL_OK) t->block = NULL;
  size_t at = 0;
  for (int p = 0; p < PARTS; p++) {
    t->pageable[p] = (struct funnel_partition){bufs[p].data, bufs[p].len};
    if (t->block != NULL) {
      memcpy((uint8_t *)t->block + at, bufs[p].data, bufs[p].len);
      t->pinned[p] = (struct funnel_partition){(uint8_t *)t->block + at, bufs[p].len};
      at += (bufs[p].len + 63) / 64 * 64;
    }
  }
}

static int64_t rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The device's memory in use, by nvidia-smi, on cuda; -1 elsewhere. */
static int64_t device_mib(const char *backend) {
  if (strcmp(backend, "cuda") != 0) return -1;
  FILE *p = popen("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null", "r");
  long mib = -1;
  if (p == NULL) return -1;
  if (fscanf(p, "%ld", &mib) != 1) mib = -1;
  pclose(p);
  return mib;
}

struct sample {
  int64_t reads, rss_kib, device_mib, pinned_in_use;
  struct funnel__live live;
};

static struct sample sample_now(int64_t reads, struct funnel_device *dev, const char *backend) {
  return (struct sample){reads, rss_kib(), device_mib(backend), funnel_device_pinned_in_use(dev),
                         funnel__live_now()};
}

static void print_sample(const struct sample *s) {
  printf("%8lld %10lld %10lld %12lld %8lld %8lld %8lld\n", (long long)s->reads,
         (long long)s->rss_kib, (long long)s->device_mib, (long long)s->pinned_in_use,
         (long long)s->live.allocs, (long long)s->live.events, (long long)s->live.streams);
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *want = "auto";
  int64_t reads = 10000, every = 1000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) want = argv[++i];
    else if (strcmp(argv[i], "--reads") == 0 && i + 1 < argc) reads = atoll(argv[++i]);
    else if (strcmp(argv[i], "--every") == 0 && i + 1 < argc) every = atoll(argv[++i]);
    else die("usage: funnel_soak [--backend auto|cpu|cuda] [--reads N] [--every N]");
  }
  if (reads <= 0 || every <= 0) die("--reads and --every must be positive");
  struct funnel_device *dev = NULL;
  struct funnel_error err;
  if (funnel_device_open(want, &dev, &err) != FUNNEL_OK) die(err.message);
  const char *backend = funnel_device_backend(dev);
  struct funnel_reader *rd = NULL;
  if (funnel_reader_create(dev, NULL, 0, &rd, &err) != FUNNEL_OK) die(err.message);
  uint64_t rng = 20261123;
  static struct table tables[TABLES];
  for (int i = 0; i < TABLES; i++) table_make(dev, &tables[i], &rng);

  printf("funnel_soak: backend %s, %lld reads of random shapes, a sample every %lld\n", backend,
         (long long)reads, (long long)every);
  printf("%8s %10s %10s %12s %8s %8s %8s\n", "reads", "rss KiB", "device MiB", "pinned bytes",
         "allocs", "events", "streams");
  struct sample first = sample_now(0, dev, backend), warm = first, last = first;
  print_sample(&first);
  int64_t failures = 0, rows_read = 0;
  static const int MODES[3] = {FUNNEL_TRANSFER_AUTO, FUNNEL_TRANSFER_COPY, FUNNEL_TRANSFER_DIRECT};
  for (int64_t i = 1; i <= reads; i++) {
    struct table *t = &tables[check_rand_below(&rng, TABLES)];
    const int lo = (int)check_rand_below(&rng, PARTS), n = 1 + (int)check_rand_below(&rng, PARTS - lo);
    const int pinned = t->block != NULL && check_rand_below(&rng, 2);
    funnel_reader_set_option(rd, FUNNEL_OPTION_TRANSFER, MODES[check_rand_below(&rng, 3)], NULL);
    struct funnel_table *tab = NULL;
    int st = funnel_reader_read_async(rd, (pinned ? t->pinned : t->pageable) + lo, (size_t)n, 0, &tab,
                                      &err);
    if (st == FUNNEL_OK) st = funnel_table_wait(tab, &err);
    if (st != FUNNEL_OK) {
      if (failures++ < 5) fprintf(stderr, "read %lld failed: %s\n", (long long)i, err.message);
    } else {
      int64_t rows = 0, nulls[MAX_COLS] = {0};
      for (int p = lo; p < lo + n; p++) {
        rows += t->rows[p];
        for (int c = 0; c < t->n_cols; c++) nulls[c] += t->nulls[p][c];
      }
      int ok = funnel_table_num_rows(tab) == rows;
      for (int c = 0; c < t->n_cols && ok; c++) {
        struct funnel_column col;
        ok = funnel_table_column(tab, c, &col, NULL) == FUNNEL_OK && col.null_count == nulls[c];
      }
      if (!ok && failures++ < 5) fprintf(stderr, "read %lld: wrong rows or null counts\n", (long long)i);
      rows_read += rows;
    }
    funnel_table_free(tab);
    if (i % every == 0) {
      last = sample_now(i, dev, backend);
      print_sample(&last);
      if (i == every) warm = last;
    }
  }
  funnel_reader_free(rd);
  printf("%lld reads, %lld rows, %lld failures; after the warm-up (%lld reads): resident set %+lld "
         "KiB, device %+lld MiB, pinned %+lld bytes, allocations %+lld, events %+lld\n",
         (long long)reads, (long long)rows_read, (long long)failures, (long long)warm.reads,
         (long long)(last.rss_kib - warm.rss_kib),
         (long long)(last.device_mib >= 0 ? last.device_mib - warm.device_mib : 0),
         (long long)(last.pinned_in_use - warm.pinned_in_use),
         (long long)(last.live.allocs - warm.live.allocs),
         (long long)(last.live.events - warm.live.events));
  for (int i = 0; i < TABLES; i++) {
    for (int p = 0; p < PARTS; p++) free((void *)tables[i].pageable[p].data);
    funnel_device_pinned_free(dev, tables[i].block, tables[i].block_size, NULL);
  }
  funnel_device_close(dev);
  return failures ? 1 : 0;
}
