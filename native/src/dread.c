/* dread.c: a read by the device path (dpath.h). The host places every
 * partition's bytes (transfer.c: runs of pinned partitions, staging for
 * pageable ones), allocates the output from an upper bound of its size
 * (output_bound), uploads one small table of (address, length) a partition
 * with the read's schema, and enqueues it all at once: the parse, which
 * sums rows, null counts and string bytes, the layout of the output from
 * those sums (funnel__dp_layout, on the device), the copy back of the sums,
 * and the concat, which takes every piece from where the parse found it.
 * Then it waits for the sums (a few dozen bytes) while the concat runs,
 * and lays the output out on the host as well (funnel__plan_layout), which
 * must agree with the device's. Per partition the host only writes its
 * address and length.
 *
 * Device memory of the attempt (t->dp_scratch) and the pinned host block
 * that mirrors its head:
 *
 *   args | columns | bit buffers | inputs | schema | template | summary (zeroed)
 *     | args2 | summary2 (a read of LZ4 bodies)            uploaded before the parse
 *   pieces | rows | string bytes | tiles | jobs  device only (jobs: a read of
 *                                                LZ4 bodies, dpath.h)
 *
 * and, in the host block only, the summary the device sends back: written
 * there by the kernel that lays the output out when the block is mapped
 * pinned memory (the pool's), else copied back. */
#include <string.h>

#include "dpath.h"
#include "read.h"
#include "workers.h"

#define OUT_OF_MEMORY(error) FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory")

/* Offsets of the attempt's tables (the layout above). */
struct dp_layout {
  int64_t args, columns, bitbufs, inputs, schema, tmpl, summary, head; /* head: bytes uploaded */
  int64_t args2, summary2; /* a read of LZ4 bodies in one go: its second pass's, else -1 */
  int64_t tmpl_max;
  int64_t pieces, rows, chars, tiles, device; /* device: the allocation's size */
  int64_t zjobs; /* a read of LZ4 bodies, else -1 */
  int64_t slices; /* a nested read's, else -1 */
  int64_t n_tiles, parse_lanes;
  int64_t summary_back, host;             /* host: the host block's size */
  int64_t summary_bytes;
  int n_var; /* string columns */
};

static struct dp_layout lay_out(int64_t n, int n_cols, int n_var, int n_buffers,
                                int64_t schema_length, bool nested, bool z) {
  struct dp_layout l;
  int64_t at = 0;
  l.args = funnel__carve(&at, (int64_t)sizeof(struct funnel__dp_args));
  l.columns = funnel__carve(&at, n_cols * (int64_t)sizeof(struct funnel__dp_column));
  l.bitbufs = funnel__carve(&at, 2 * n_cols * (int64_t)sizeof(struct funnel__dp_bitbuf));
  l.inputs = funnel__carve(&at, n * (int64_t)sizeof(struct funnel__dp_input));
  l.schema = funnel__carve(&at, schema_length);
  l.tmpl_max = funnel__dp_template_max(schema_length, n_cols, n_buffers);
  l.tmpl = funnel__carve(&at, l.tmpl_max);
  l.summary_bytes = (int64_t)sizeof(struct funnel__dp_summary) + 8 * (int64_t)(n_cols + n_var);
  l.summary = funnel__carve(&at, l.summary_bytes);
  l.args2 = z ? funnel__carve(&at, (int64_t)sizeof(struct funnel__dp_args)) : -1;
  l.summary2 = z ? funnel__carve(&at, l.summary_bytes) : -1;
  l.head = at;
  int64_t host = at;
  l.summary_back = funnel__carve(&host, l.summary_bytes);
  l.host = host;
  l.pieces = funnel__carve(&at, n * n_cols * (int64_t)sizeof(struct funnel__dp_piece));
  l.slices = nested ? funnel__carve(&at, n * n_cols * (int64_t)sizeof(struct funnel__dp_slice)) : -1;
  l.rows = funnel__carve(&at, (n + 1) * 8);
  l.chars = funnel__carve(&at, n_var * (n + 1) * 8);
  l.parse_lanes = funnel__dp_parse_lanes(n);
  const int64_t tile = FUNNEL__DPATH_THREADS / l.parse_lanes;
  l.n_tiles = (n + tile - 1) / tile;
  l.tiles = funnel__carve(&at, (1 + n_var) * (l.n_tiles > 0 ? l.n_tiles : 1) * 8);
  l.zjobs = z ? funnel__carve(&at, n * n_buffers * (int64_t)sizeof(struct funnel__lz4_job)) : -1;
  l.device = at;
  l.n_var = n_var;
  return l;
}

/* The layout of a read of n partitions of `schema` (`z`: of LZ4 bodies). */
static struct dp_layout lay_out_read(int64_t n, const struct funnel__schema *schema, bool z) {
  int n_var = 0, n_buffers = 0;
  for (int c = 0; c < schema->n_fields; c++) {
    n_var += schema->fields[c].offset_width != 0;
    n_buffers += schema->fields[c].n_buffers;
  }
  return lay_out(n, schema->n_fields, n_var, n_buffers, schema->ipc_length, schema->nested, z);
}

/* The most bytes the output of `bytes` bytes of partitions can take, so it
 * is allocated before the device has counted anything. Every row of a
 * partition holds its value in every column's buffers, W/8 bytes a row
 * counted in eighths of a byte (w8: 8 a byte of a fixed-width value or of
 * a string offset, 1 for a boolean), so the rows are at most 8 * bytes / W;
 * the output's values, offsets and string bytes are at most the
 * partitions' own (bodies included in their bytes), plus one offset a
 * string column; a validity bitmap is at most rows / 8 + 1 bytes a column;
 * and every buffer is padded to FUNNEL__ALIGN. */
static int64_t output_bound(const struct funnel__schema *schema, int64_t bytes) {
  if (schema->nested) {
    /* a nested column's rows are its node's, not the table's: each of its
     * output buffers is at most the partitions' buffers it comes from
     * (offsets: one more a column), and a column's bitmap at most one bit
     * a row of it, which a partition holds in some buffer of its own (a
     * column whose rows hold no bit, a struct of nothing, lays out larger
     * than this only with nulls, and such a read takes the host path) */
    const int64_t n = schema->n_fields;
    if (bytes > FUNNEL__MAX_OUTPUT_BYTES / 2) return FUNNEL__MAX_OUTPUT_BYTES;
    const int64_t bound = 2 * bytes + n * (3 * (int64_t)FUNNEL__ALIGN + 16) + n * 8;
    return bound > FUNNEL__MAX_OUTPUT_BYTES ? FUNNEL__MAX_OUTPUT_BYTES : bound;
  }
  int64_t w8 = 0;
  const int n_cols = schema->n_fields;
  for (int c = 0; c < n_cols; c++) {
    const struct funnel__field *f = &schema->fields[c];
    w8 += f->offset_width != 0 ? 8 * f->offset_width
          : f->type_id == FUNNEL_TYPE_BOOL ? 1 : 8 * (int64_t)f->byte_width;
  }
  /* each column counts at least 1, so n_cols * rows / 8 <= bytes + 2 * n_cols */
  if (bytes > FUNNEL__MAX_OUTPUT_BYTES || w8 < n_cols) return FUNNEL__MAX_OUTPUT_BYTES;
  const int64_t rows = bytes / w8 * 8 + 8; /* 8 * bytes / w8, rounded up, without overflow */
  const int64_t bitmaps = n_cols * (rows / 8 + 1);
  const int64_t pads = n_cols * (3 * (int64_t)FUNNEL__ALIGN + 8);
  const int64_t bound = bytes + bitmaps + pads;
  return bound > FUNNEL__MAX_OUTPUT_BYTES ? FUNNEL__MAX_OUTPUT_BYTES : bound;
}

/* a compressed read small enough for one block goes in one go */
_Static_assert(FUNNEL__ONE_BLOCK_MAX_BYTES <= FUNNEL__LZ4_ONE_GO_MAX_BYTES,
               "one block's reads must fit the one go");

int64_t funnel__dpath_reserve(const struct funnel__read_options *o, size_t count, int64_t bytes,
                              bool compressed, const struct funnel__schema *schema) {
  if (o->shareable || bytes > FUNNEL__ONE_BLOCK_MAX_BYTES) return 0;
  const struct dp_layout l = lay_out_read((int64_t)count, schema, compressed);
  return funnel__align_up(l.device, FUNNEL__ALIGN) +
         funnel__align_up(output_bound(schema, bytes), FUNNEL__ALIGN);
}

bool funnel__dpath_guess_raw(const struct funnel_device *dev, int codec) {
  return codec != FUNNEL__CODEC_NONE && atomic_load(&dev->last_raw[codec]) == 1;
}

/* Whether AUTO's read of partitions like parts[first] (parsed into `pv`)
 * would be left to the host by the device: one writer's partitions look
 * alike, so one that the device would leave sends the read to the host
 * path now, not after a round trip. */
static bool left_alike(const struct funnel_partition *part, const struct funnel__partition *pv,
                       const struct funnel__schema *known) {
  static const uint8_t magic[6] = {'A', 'R', 'R', 'O', 'W', '1'};
  const uint8_t *b = part->data;
  if (part->length >= 8 && memcmp(b, magic, 6) == 0) return true; /* an IPC file */
  if (part->length >= 4 && funnel__ld32(b) != 0xFFFFFFFFu) return true; /* legacy framing */
  if (pv->n_batches > 1) return true;
  return known != NULL && pv->schema != NULL && pv->schema != known; /* written otherwise */
}

/* Whether the host path would split the LZ4 frames of a read of `parts`
 * (funnel__lz4_blocks_split) as partition `first` (parsed into `pv`, under
 * `schema`) says, or the first of the next few non-empty ones that holds
 * a frame of values; no when none does. */
static bool lz4_split(const struct funnel_partition *parts, size_t count, int64_t first,
                      const struct funnel__partition *pv, const struct funnel__schema *schema,
                      struct funnel__arena *arena) {
  int split = funnel__lz4_blocks_split(pv, schema);
  for (size_t p = (size_t)first + 1, asked = 0; split < 0 && p < count && asked < 4; p++) {
    if (parts[p].length == 0) continue;
    asked++;
    struct funnel__partition next;
    if (funnel__partition_parse_known(parts[p].data, (int64_t)parts[p].length, (int64_t)p, schema,
                                      arena, &next, NULL) == FUNNEL_OK)
      split = funnel__lz4_blocks_split(&next, schema);
  }
  return split > 0;
}

bool funnel__dpath_wanted(struct funnel_table *t, const struct funnel__read_options *o,
                          const struct funnel_partition *parts, size_t count,
                          const struct funnel__parts_scan *scan, int codec,
                          const struct funnel__schema *known,
                          const struct funnel__schema *seen,
                          const struct funnel__schema **schema) {
  *schema = NULL;
  if (o->parse == FUNNEL_PARSE_HOST || t->dev->be.launch_dpath == NULL || count == 0) return false;
  if (scan->bad) return false; /* the host path names what is wrong */
  const bool automatic = o->parse == FUNNEL_PARSE_AUTO;
  /* compressed bodies the device decodes unless the host is asked to (on
   * the cpu backend AUTO leaves decoding to the host threads, as parse.c
   * does) */
  if (codec != FUNNEL__CODEC_NONE &&
      (o->decode == FUNNEL_DECODE_HOST ||
       (o->decode == FUNNEL_DECODE_AUTO && t->dev->be.arrow_device_type == ARROW_DEVICE_CPU)))
    return false;
  const int64_t bytes = scan->bytes, first = scan->first;
  const int64_t min_parts =
      codec != FUNNEL__CODEC_NONE                         ? FUNNEL__DPATH_MIN_PARTS_LZ4
      : bytes <= FUNNEL__DPATH_SMALL_AVG * (int64_t)count ? FUNNEL__DPATH_MIN_PARTS_SMALL
                                                          : FUNNEL__DPATH_MIN_PARTS;
  const int64_t max_avg =
      codec == FUNNEL__CODEC_ZSTD ? FUNNEL__DPATH_MAX_AVG_ZSTD : FUNNEL__DPATH_MAX_AVG;
  /* LZ4 bodies of larger partitions too (FUNNEL_LZ4_LARGE_DEVICE=0 says
   * not: device.h), when the device path decodes them while they are
   * copied or stages them all (the host path's decoding on the device
   * waits for the whole copy, and its parse for the host's), if the
   * device's decoding pays and the frames do not split (both below).
   * Measured on the H100 (bench/RESULTS.md, session 56): 0.47 to 0.91 of
   * the host path's time on reads of 64 to 1,000 such partitions, pinned
   * and pageable */
  const bool large = automatic && bytes > max_avg * (int64_t)count;
  if (automatic && ((int64_t)count < min_parts ||
                    (large && (codec != FUNNEL__CODEC_LZ4_FRAME || !t->dev->config.lz4_large_device ||
                               o->transfer == FUNNEL_TRANSFER_DIRECT ||
                               (!funnel__stages_all(t->dev, parts, count, scan) &&
                                funnel__zoverlap_parts(t->dev, count, scan) == 0)))))
    return false;
  if (first >= 0 && (known == NULL || automatic)) {
    /* a partition that opens with the Schema message an earlier read of
     * the reader found, byte for byte, is read with that schema: its
     * message is not parsed again (as parse_known does with `known`) */
    const struct funnel_partition *part = &parts[first];
    const struct funnel__schema *hint = known;
    if (hint == NULL && seen != NULL && part->length >= (size_t)seen->ipc_length &&
        memcmp(part->data, seen->ipc, (size_t)seen->ipc_length) == 0)
      hint = seen;
    struct funnel__partition pv;
    if (funnel__partition_parse_known(part->data, (int64_t)part->length, first, hint, &t->arena,
                                      &pv, NULL) != FUNNEL_OK)
      return false; /* the host path says what is wrong */
    if (automatic && left_alike(part, &pv, known)) return false;
    if (known == NULL) known = pv.schema;
    /* a large read of few partitions whose frames the host path splits
     * into blocks (tuning.h, FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS): the
     * device path's jobs, a buffer each, are then fewer than the
     * decoder's wave and each longer than the host path's, which
     * outweighs the overlap. The first partition's frames say, or the
     * next few's where it holds none (a schema alone, no rows) */
    if (large && (int64_t)count - scan->empty < FUNNEL__LZ4_SPLIT_DEVICE_MIN_PARTS &&
        known != NULL && lz4_split(parts, count, first, &pv, known, &t->arena))
      return false;
  }
  if (known == NULL || known->n_fields == 0 || (known->nested && !funnel__dp_nested_fits(known)))
    return false;
  /* what only the device path would need: its tables of pieces (and of a
   * compressed read's jobs, a buffer each, 48 bytes), a scan launch's grid
   * of string columns */
  int n_var = 0, n_buffers = 0;
  for (int c = 0; c < known->n_fields; c++) {
    n_var += known->fields[c].offset_width != 0;
    n_buffers += known->fields[c].n_buffers;
  }
  if ((int64_t)count > FUNNEL__DPATH_MAX_PIECES / known->n_fields || n_var >= FUNNEL__CONCAT_MAX_BLOCKS ||
      (codec != FUNNEL__CODEC_NONE && n_buffers > 0 &&
       (int64_t)count > FUNNEL__DPATH_MAX_PIECES / n_buffers))
    return false;
  /* large partitions: the device path decodes each buffer whole, a job,
   * where the host path would decode them on the host threads when that is
   * faster (parse.c, funnel__device_pays: few long buffers). Estimated
   * from the compressed bytes alone (the ratio scales both ways alike),
   * each partition's split evenly over the buffers that hold values */
  if (large && o->decode == FUNNEL_DECODE_AUTO) {
    int64_t per = 0; /* jobs a partition */
    for (int c = 0; c < known->n_fields; c++)
      for (int j = 0; j < known->fields[c].n_buffers; j++)
        per += funnel__buffer_holds_values(&known->fields[c], j);
    if (per == 0) per = 1;
    if (!funnel__device_pays(&t->dev->be, codec, bytes, bytes, (int64_t)count * per,
                             bytes / (int64_t)count / per))
      return false;
  }
  *schema = known;
  return true;
}

/* The table of the partitions' device addresses and lengths, written in
 * parts on the host threads when there are many (workers.h). */
struct inputs_job {
  const struct funnel_table *t;
  const struct funnel__transfer *tr;
  const struct funnel_partition *parts;
  size_t count;
  int64_t n;
  struct funnel__dp_input *in;
};

static void inputs_task(void *ctx, int64_t i) {
  const struct inputs_job *j = ctx;
  const struct funnel__transfer *tr = j->tr;
  const uint64_t scratch = j->t->scratch;
  for (size_t p = funnel__pass_from(j->count, j->n, i); p < funnel__pass_from(j->count, j->n, i + 1); p++) {
    const int64_t len = (int64_t)j->parts[p].length;
    /* no in_scratch: the early copy mirrors the partitions' span */
    const uint64_t at = len == 0                 ? 0
                        : tr->in_scratch == NULL ? scratch + ((uintptr_t)j->parts[p].data - tr->mirror)
                        : tr->in_scratch[p] >= 0 ? scratch + (uint64_t)tr->in_scratch[p]
                                                 : tr->in_base[p];
    j->in[p] = (struct funnel__dp_input){at, len};
  }
}

/* Whether the partition (`bytes`, `len`) the read's template `a->tmpl`
 * was made from holds a frame: a buffer whose prefix declares decoded
 * bytes (not -1, raw, nor 0, empty). A buffer whose prefix does not lie in
 * the partition counts as one (the parse says what is wrong), and so does
 * a partition that is not compressed: it says nothing of the others. */
static bool template_frames(const struct funnel__dp_args *a, const uint8_t *bytes, int64_t len) {
  const struct funnel__dp_template *tm = &a->tmpl;
  if (tm->length == 0 || !tm->compressed) return true;
  for (int32_t k = 0; k < a->n_buffers; k++) {
    const int64_t off = (int64_t)funnel__ld64(bytes + tm->buffers + 16 * k);
    const int64_t n = (int64_t)funnel__ld64(bytes + tm->buffers + 16 * k + 8);
    if (n == 0) continue;
    if (off < 0 || n < 8 || off > len - tm->length - 8) return true;
    if ((int64_t)funnel__ld64(bytes + tm->length + off) > 0) return true;
  }
  return false;
}

/* Writes the host block's head (what the parse reads); returns whether the partition the read's
 * template was made from holds a frame (template_frames), or true when
 * none gave one. */
static bool write_head(const struct funnel_table *t, const struct funnel__transfer *tr,
                       const struct funnel_partition *parts, int64_t n,
                       const struct funnel__schema *schema, const struct dp_layout *l,
                       int64_t out_capacity, uint64_t dev, uint64_t summary_back,
                       int codec, uint8_t *host) {
  const bool z = l->zjobs >= 0;
  const int n_cols = schema->n_fields;
  struct funnel__dp_column *cols = (struct funnel__dp_column *)(host + l->columns);
  int n_var, n_buffers;
  funnel__dp_columns_of(schema, cols, &n_var, &n_buffers);
  struct inputs_job j = {t, tr, parts, (size_t)n, funnel__pass_parts((size_t)n),
                         (struct funnel__dp_input *)(host + l->inputs)};
  funnel__parallel_for(j.n, inputs_task, &j);
  memcpy(host + l->schema, schema->ipc, (size_t)schema->ipc_length);
  struct funnel__dp_summary *s = (struct funnel__dp_summary *)(host + l->summary);
  memset(s, 0, (size_t)l->summary_bytes);
  s->first_left = n;
  struct funnel__dp_args *a = (struct funnel__dp_args *)(host + l->args);
  *a = (struct funnel__dp_args){
      .inputs = dev + (uint64_t)l->inputs, .columns = dev + (uint64_t)l->columns,
      .schema = dev + (uint64_t)l->schema, .pieces = dev + (uint64_t)l->pieces,
      .rows = dev + (uint64_t)l->rows, .chars = dev + (uint64_t)l->chars,
      .summary = dev + (uint64_t)l->summary, .bitbufs = dev + (uint64_t)l->bitbufs,
      .tiles = dev + (uint64_t)l->tiles, .n_tiles = l->n_tiles, .parse_lanes = l->parse_lanes,
      .out = t->out, .out_capacity = out_capacity,
      .n_parts = n, .schema_length = schema->ipc_length, .max_rows = FUNNEL__MAX_ROWS,
      .n_cols = n_cols, .n_var = n_var, .n_buffers = n_buffers,
      .tmpl_bytes = dev + (uint64_t)l->tmpl, .summary_back = summary_back,
      .slices = l->slices >= 0 ? dev + (uint64_t)l->slices : 0,
      .zmode = z ? FUNNEL_DP_UNPACK : FUNNEL_DP_PLAIN, .zcodec = z ? codec : 0,
      .zjobs = z ? dev + (uint64_t)l->zjobs : 0};
  /* the template from the first of the first few non-empty partitions
   * that gives one (funnel__dp_template_of says which do not) */
  for (int64_t p = 0, tries = 0; p < n && tries < FUNNEL__DP_TEMPLATE_TRIES; p++) {
    if (parts[p].length == 0) continue;
    tries++;
    if (funnel__dp_template_of(a, schema->ipc, parts[p].data, (int64_t)parts[p].length,
                               host + l->tmpl))
      return template_frames(a, parts[p].data, (int64_t)parts[p].length);
  }
  return true;
}

/* The first pass's summary to the host's copy, after the work `w` holds
 * (`st`: its enqueues' status so far); waits for it all. */
static int first_summary_back(struct funnel_table *t, struct funnel__work *w, int st,
                              const struct dp_layout *l, uint8_t *host, void *stream,
                              struct funnel_error *error) {
  if (st == FUNNEL_OK)
    st = funnel__work_enqueued(
        w, funnel__dev_copy_d2h_async(&t->dev->be, host + l->summary_back,
                                      t->dp_scratch + (uint64_t)l->summary,
                                      (size_t)l->summary_bytes, stream, error));
  bool abandoned;
  st = funnel__work_finish(w, st, true, &abandoned, error);
  if (abandoned) funnel__table_abandon(t);
  return st;
}

/* A read of LZ4 bodies, its first pass: the copies, the upload of the
 * head (both made already when `placed`: a read whose one pass found a
 * frame, its first pass's args and summary in the head as uploaded), the
 * unpack (dpath.h: the buffers' jobs, the decoded buffers'
 * size), the copy back of the summary; waits for it all. A read in parts
 * (t->n_overlap) unpacks each part once its bytes are there, and, when it
 * decodes while it copies (t->zaux, `zgate` not 0: the args of the room
 * made for the decoded buffers), decodes the part's jobs after
 * (parse_overlapped). */
static int parse_overlapped(struct funnel_table *t, struct funnel__work *w,
                            const struct dp_layout *l, const uint8_t *host, int nested,
                            void *stream, uint64_t zgate, bool *lost,
                            struct funnel_error *error);

static int unpack_on_device(struct funnel_table *t, struct funnel__transfer *tr,
                            const struct dp_layout *l, uint8_t *host, void *stream,
                            uint64_t zgate, bool placed, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, be, stream, &t->event, error));
  w.enqueued = funnel__early(t) || placed;
  const int nested = l->slices >= 0 ? FUNNEL_DP_STAGE_NESTED : 0;
  if (t->n_overlap > 0) {
    /* parsed while copied, and decoded too when there is room */
    bool lost;
    int st = parse_overlapped(t, &w, l, host, nested, stream, zgate, &lost, error);
    st = first_summary_back(t, &w, st, l, host, stream, error);
    if (lost) funnel__table_abandon(t);
    return st;
  }
  int st = tr->early || placed ? FUNNEL_OK : funnel__enqueue_transfer(t, tr, &w, error);
  if (st == FUNNEL_OK && !placed)
    st = funnel__work_enqueued(&w, funnel__dev_copy_h2d_async(be, t->dp_scratch, host,
                                                              (size_t)l->head, stream, error));
  if (st == FUNNEL_OK)
    st = funnel__work_enqueued(&w, funnel__dev_launch_dpath(be, FUNNEL_DP_PARSE | nested,
                                                            t->dp_scratch, t->plan.n_parts,
                                                            l->parse_lanes, stream, error));
  return first_summary_back(t, &w, st, l, host, stream, error);
}

/* `stream` joins the work of `aux`, a second stream: an event recorded
 * there, which `stream` waits for; if that cannot be enqueued, the host
 * waits for it (*lost when neither could be done). Returns st, else the
 * join's error. */
static int join_stream(struct funnel_table *t, void *aux, void **join, void *stream, int st,
                       bool *lost, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  struct funnel_error e;
  struct funnel_error *err = st == FUNNEL_OK ? error : &e;
  int js = *join == NULL ? funnel__dev_event_take(be, join, err) : FUNNEL_OK;
  if (js == FUNNEL_OK) js = funnel__dev_event_record(be, *join, aux, err);
  if (js == FUNNEL_OK) js = funnel__dev_stream_wait(be, stream, *join, err);
  if (js == FUNNEL_OK) return st;
  if (st == FUNNEL_OK) st = js;
  /* once more, and the host waits for the second stream's work itself */
  *lost = (*join == NULL && funnel__dev_event_take(be, join, &e) != FUNNEL_OK) ||
          funnel__dev_event_record(be, *join, aux, &e) != FUNNEL_OK ||
          funnel__dev_event_wait(be, *join, &e) != FUNNEL_OK;
  return st;
}

/* join_stream of the reader's second stream (t->aux) */
static int join_aux(struct funnel_table *t, void **join, void *stream, int st, bool *lost,
                    struct funnel_error *error) {
  return join_stream(t, t->aux, join, stream, st, lost, error);
}

/* Part j's parse (partitions t->overlap_part[j] to [j + 1]) on the
 * reader's second stream, once `ev`, recorded on the read's stream after
 * the part's bytes, is there. */
static int parse_part_after(struct funnel_table *t, int j, void *ev, int nested, int64_t lanes,
                            struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  const int64_t *part = t->overlap_part;
  int st = funnel__dev_stream_wait(be, t->aux, ev, error);
  if (st == FUNNEL_OK)
    st = funnel__dev_launch_dpath_from(be, FUNNEL_DP_PARSE | nested, t->dp_scratch, part[j],
                                       part[j + 1] - part[j], lanes, t->aux, error);
  return st;
}

/* The launch_dpath stage that decodes a read of `zcodec` bodies: the
 * ways (lz4dec.h, FUNNEL_DP_STAGE_LZ4_WAYS) for a read of LZ4 partitions
 * over FUNNEL__DPATH_MAX_AVG on average, where they were measured (tuning.h,
 * FUNNEL__LZ4_WAYS_WAVES); a read of smaller ones (Spark's few KiB), whose
 * buffers are a block or less, would only get idle blocks from them, as
 * the host path's jobs of a block each did (1.04 to 1.16 of the time). */
static int decoder_stage(const struct funnel_table *t, int zcodec) {
  if (zcodec == FUNNEL__CODEC_ZSTD) return FUNNEL_DP_STAGE_ZSTD;
  return t->parts_aligned > FUNNEL__DPATH_MAX_AVG * t->plan.n_parts ? FUNNEL_DP_STAGE_LZ4_WAYS
                                                                     : FUNNEL_DP_STAGE_LZ4;
}

/* Part j's jobs decoded (a read of compressed bodies that decodes while
 * it copies) on its stream of t->zaux, once its parse, on t->aux, is done
 * (an event there, *done), unless the gate at `zgate` is shut by then
 * (parse_overlapped). A part's decoding takes as long as its longest job,
 * so the parts' go on streams of their own, not after one another. */
static int decode_part_after(struct funnel_table *t, int j, const struct dp_layout *l,
                             const struct funnel__dp_args *a, uint64_t zgate, void **done,
                             struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  const int64_t *part = t->overlap_part;
  const int64_t nb = a->n_buffers;
  const int stage = decoder_stage(t, (int)a->zcodec);
  void *zs = t->zaux[j]; /* a part a stream: the parts are at most t->n_zaux */
  int st = *done == NULL ? funnel__dev_event_take(be, done, error) : FUNNEL_OK;
  if (st == FUNNEL_OK) st = funnel__dev_event_record(be, *done, t->aux, error);
  if (st == FUNNEL_OK) st = funnel__dev_stream_wait(be, zs, *done, error);
  if (st == FUNNEL_OK)
    st = funnel__dev_launch_dpath_from(
        be, stage,
        t->dp_scratch + (uint64_t)l->zjobs +
            (uint64_t)(part[j] * nb) * (uint64_t)sizeof(struct funnel__lz4_job),
        (int64_t)zgate, (part[j + 1] - part[j]) * nb, (int64_t)t->zscratch, zs, error);
  return st;
}

/* The parse of a read's partitions while they are copied (t->n_overlap
 * parts; transfer.c, plan_overlap): on `stream`, after the first part's
 * bytes (the early copy), the head, then the other parts' bytes, an
 * event after each part's; on the reader's second stream (t->aux), each
 * part's parse once its event is there; then `stream` waits for the
 * parses. One copy engine takes the copies in turn, so the head goes
 * before the bytes it would otherwise queue behind. Whatever fails,
 * `stream` is made to wait for what the second stream was given (or the
 * host waits for it), so the read's event still follows all of its work;
 * *lost when neither could be done.
 * The first pass of a read of compressed bodies (FUNNEL_DP_UNPACK) that
 * decodes while it copies (t->zaux) decodes each part's jobs once the
 * part is parsed, on the part's stream of t->zaux, unless `zgate` (the
 * device address of args that funnel__dp_shut reads: the first pass's
 * summary and the room made for the decoded buffers) is 0 or shut by then;
 * `stream` waits for those streams too. */
static int parse_overlapped(struct funnel_table *t, struct funnel__work *w,
                            const struct dp_layout *l, const uint8_t *host, int nested,
                            void *stream, uint64_t zgate, bool *lost,
                            struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  const int m = t->n_overlap;
  const int64_t *byte = t->overlap_byte;
  void **ev = t->overlap_ev;
  *lost = false;
  int st = funnel__work_enqueued(w, funnel__dev_copy_h2d_async(be, t->dp_scratch, host,
                                                               (size_t)l->head, stream, error));
  for (int j = 0; j < m && st == FUNNEL_OK; j++) {
    const int64_t from = byte[j], len = byte[j + 1] - byte[j];
    const void *src = (const void *)(t->early_base + (uintptr_t)from);
    if (j > 0 && len > 0)
      st = funnel__work_enqueued(w, funnel__dev_copy_h2d_async(be, t->scratch + (uint64_t)from, src,
                                                               (size_t)len, stream, error));
    if (st == FUNNEL_OK && ev[j] == NULL) st = funnel__dev_event_take(be, &ev[j], error);
    if (st == FUNNEL_OK) st = funnel__dev_event_record(be, ev[j], stream, error);
  }
  bool aux_used = false;
  int zused = 0; /* the decoding streams given work: the first zused */
  for (int j = 0; j < m && st == FUNNEL_OK; j++) {
    st = parse_part_after(t, j, ev[j], nested, l->parse_lanes, error);
    aux_used |= st == FUNNEL_OK;
    if (st == FUNNEL_OK && zgate != 0) {
      st = decode_part_after(t, j, l, (const struct funnel__dp_args *)(host + l->args), zgate,
                             &ev[m + 1 + j], error);
      zused = j + 1;
    }
  }
  if (st == FUNNEL_OK) t->stats.overlap_parts = m;
  if (aux_used) st = join_aux(t, &ev[m], stream, st, lost, error);
  for (int k = 0; k < zused; k++) {
    bool gone = false;
    st = join_stream(t, t->zaux[k], &ev[2 * m + 1 + k], stream, st, &gone, error);
    *lost |= gone;
  }
  return st;
}

/* The parse of a read staged round by round (transfer.c) while its later
 * rounds are staged and copied: its partitions in parts of about equal
 * count (from multiples of the parse's tile), as many as the rounds up to
 * FUNNEL__STAGED_PARSE_PARTS, each launched on the reader's second stream
 * once the copy of the round that completes its bytes is enqueued, after
 * an event there. */
struct staged_parse {
  struct funnel_table *t;
  const struct dp_layout *l;
  int nested;
  void *stream;
  int m, next;   /* the parts (t->overlap_part); the next to launch */
  int64_t *end;  /* per part: where its bytes end in the staging block */
  bool aux_used; /* a parse was enqueued there */
};

static int launch_staged_part(struct staged_parse *sp, int j, struct funnel_error *error) {
  struct funnel_table *t = sp->t;
  struct funnel_backend *be = &t->dev->be;
  void **ev = &t->overlap_ev[j];
  int st = *ev == NULL ? funnel__dev_event_take(be, ev, error) : FUNNEL_OK;
  if (st == FUNNEL_OK) st = funnel__dev_event_record(be, *ev, sp->stream, error);
  if (st == FUNNEL_OK) st = parse_part_after(t, j, *ev, sp->nested, sp->l->parse_lanes, error);
  sp->aux_used |= st == FUNNEL_OK;
  return st;
}

/* transfer.c's on_round: the parts whose bytes are all sent */
static int staged_round(void *ctx, int64_t sent, struct funnel_error *error) {
  struct staged_parse *sp = ctx;
  int st = FUNNEL_OK;
  while (st == FUNNEL_OK && sp->next < sp->m && sp->end[sp->next] <= sent)
    st = launch_staged_part(sp, sp->next++, error);
  return st;
}

/* Whether the read parses while it is staged (t->aux given by
 * funnel__overlap_fits, every partition staged into one block: one run),
 * and its parts if so (t->n_overlap, t->overlap_part, t->overlap_ev). */
static bool plan_staged_parse(struct funnel_table *t, const struct funnel__transfer *tr,
                              const struct dp_layout *l, const uint8_t *host, int nested,
                              void *stream, struct staged_parse *sp) {
  const struct funnel__stage_plan *stg = &tr->staging;
  if (t->aux == NULL || tr->early || stg->tasks == 0 || stg->block == NULL || tr->n_runs != 1 ||
      tr->runs[0].src != stg->block)
    return false;
  const int64_t n = t->plan.n_parts, base = tr->runs[0].scratch;
  const struct funnel__dp_input *in = (const struct funnel__dp_input *)(host + l->inputs);
  const int64_t tile = FUNNEL__DPATH_THREADS / l->parse_lanes;
  /* a part a round, about: each round's copy is followed by its part's parse */
  const int64_t rounds = funnel__stage_rounds(stg);
  const int pieces = rounds < FUNNEL__STAGED_PARSE_PARTS ? (int)rounds : FUNNEL__STAGED_PARSE_PARTS;
  if (pieces < 2) return false;
  int64_t *part = funnel__arena_alloc(&t->arena, (size_t)(pieces + 1) * sizeof(int64_t));
  int64_t *end = funnel__arena_alloc(&t->arena, (size_t)pieces * sizeof(int64_t));
  void **ev = funnel__arena_calloc(&t->arena, (size_t)(pieces + 1), sizeof(void *));
  if (part == NULL || end == NULL || ev == NULL) return false; /* parsed after the copies */
  int m = 0;
  part[0] = 0;
  for (int64_t j = 1; j < pieces; j++) {
    const int64_t p = n * j / pieces / tile * tile;
    if (p > part[m]) part[++m] = p;
  }
  if (n > part[m]) part[++m] = n;
  if (m < 2) return false;
  for (int j = 0; j < m; j++) { /* its last partition with bytes, else the part before's end */
    int64_t p = part[j + 1] - 1;
    while (p >= part[j] && tr->in_scratch[p] < 0) p--;
    end[j] = p >= part[j] ? tr->in_scratch[p] - base + (int64_t)in[p].length
                          : (j > 0 ? end[j - 1] : 0);
  }
  *sp = (struct staged_parse){t, l, nested, stream, m, 0, end, false};
  t->n_overlap = m;
  t->n_overlap_ev = m + 1;
  t->overlap_part = part;
  t->overlap_byte = NULL;
  t->overlap_ev = ev;
  return true;
}

/* run_on_device's decoding, on the work `w` holds: a read in one go
 * whose both passes go at once (`gated`) makes its first pass, then
 * every buffer's job, unless the gate is shut; a second pass uploads its
 * args and the summary again, then decodes every buffer's job, a warp a
 * job, the SKIPs done at once (unless they were, while the partitions
 * were copied). */
static int enqueue_decoding(struct funnel_table *t, struct funnel__work *w,
                            const struct dp_layout *l, const uint8_t *host, bool gated,
                            int nested, void *stream, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  const int64_t n = t->plan.n_parts;
  const struct funnel__dp_args *a =
      (const struct funnel__dp_args *)(host + (gated ? l->args2 : l->args));
  const int zstage = decoder_stage(t, (int)a->zcodec);
  const uint64_t zjobs = t->dp_scratch + (uint64_t)l->zjobs;
  int st = FUNNEL_OK;
  if (gated) {
    st = funnel__work_enqueued(w, funnel__dev_launch_dpath(be, FUNNEL_DP_PARSE | nested,
                                                           t->dp_scratch, n, l->parse_lanes,
                                                           stream, error));
    if (st == FUNNEL_OK)
      st = funnel__work_enqueued(
          w, funnel__dev_launch_dpath_from(be, zstage, zjobs,
                                           (int64_t)(t->dp_scratch + (uint64_t)l->args2),
                                           n * a->n_buffers, (int64_t)t->zscratch, stream,
                                           error));
    return st;
  }
  st = funnel__work_enqueued(
      w, funnel__dev_copy_h2d_async(be, t->dp_scratch + (uint64_t)l->args, host + l->args,
                                    sizeof(*a), stream, error));
  if (st == FUNNEL_OK)
    st = funnel__work_enqueued(
        w, funnel__dev_copy_h2d_async(be, t->dp_scratch + (uint64_t)l->summary,
                                      host + l->summary, (size_t)l->summary_bytes, stream, error));
  if (st == FUNNEL_OK && !t->zdecoded)
    st = funnel__work_enqueued(w, funnel__dev_launch_dpath(be, zstage, zjobs, n * a->n_buffers,
                                                           (int64_t)t->zscratch, stream, error));
  return st;
}

/* run_on_device's end, on the work `w` holds, after the pass that lays
 * the output out (args `a`, at device address `args`): the sums back (by a
 * copy unless that kernel writes them where the host reads them), their
 * event, the kernel's start when it is timed, the concat of every piece
 * and then one item a column (the last string offset; a flat read with
 * string columns by the kernel held to fewer registers), and its end. */
static int enqueue_concat(struct funnel_table *t, const struct funnel__read_options *o,
                          struct funnel__work *w, const struct dp_layout *l, const uint8_t *host,
                          const struct funnel__dp_args *a, uint64_t args, int n_var, int nested,
                          int64_t lanes, void *stream, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  const int64_t n = t->plan.n_parts, n_cols = t->plan.schema->n_fields;
  int st = FUNNEL_OK;
  if (a->summary_back == 0)
    st = funnel__work_enqueued(
        w, funnel__dev_copy_d2h_async(be, (uint8_t *)host + l->summary_back, a->summary,
                                      (size_t)l->summary_bytes, stream, error));
  if (st == FUNNEL_OK && t->ev_sums == NULL) st = funnel__dev_event_take(be, &t->ev_sums, error);
  if (st == FUNNEL_OK)
    st = funnel__work_enqueued(w, funnel__dev_event_record(be, t->ev_sums, stream, error));
  if (st == FUNNEL_OK && o->time_kernel) {
    /* made once a read: the second pass of a read in one go whose gate
     * shut records the first pass's again */
    if (t->ev_start == NULL) st = funnel__dev_event_create_timed(be, &t->ev_start, error);
    if (st == FUNNEL_OK && t->ev_end == NULL)
      st = funnel__dev_event_create_timed(be, &t->ev_end, error);
    if (st == FUNNEL_OK)
      st = funnel__work_enqueued(w, funnel__dev_event_record(be, t->ev_start, stream, error));
  }
  const int concat = FUNNEL_DP_CONCAT | (nested ? nested : n_var > 0 ? FUNNEL_DP_STAGE_VAR : 0);
  if (st == FUNNEL_OK)
    st = funnel__work_enqueued(w, funnel__dev_launch_dpath(be, concat, args, n * n_cols + n_cols,
                                                           lanes, stream, error));
  if (st == FUNNEL_OK && t->ev_end != NULL)
    st = funnel__dev_event_record(be, t->ev_end, stream, error);
  return st;
}

/* How run_on_device goes: on args, a plain read's or a second pass's; on
 * args2, a read of compressed bodies in one go (dpath.h, arm_one_go): both
 * passes, the second gated by the first, or one pass, which reads every
 * buffer raw. */
enum dp_go { GO_ARGS = 0, GO_GATED = 1, GO_RAW = 2 };

/* Enqueues the whole read: the copies, the upload, the parse, the scan
 * (which lay the output out), the copy back of the sums, then the concat
 * (timed when asked) and the table's event; then waits for the sums, which
 * the concat follows on the device. The second pass of a read of LZ4
 * bodies (zmode FUNNEL_DP_DECODED: the copies made, the head uploaded)
 * uploads its args and the summary again and decodes before the parse. A
 * read of LZ4 bodies in one go (`go`, dpath.h) parses on args2: GO_GATED
 * makes its first pass after the upload, then decodes and makes its second
 * pass, each stage after the first pass held back by args2's gate;
 * GO_RAW makes its one pass (FUNNEL_DP_RAW), as a plain read does. */
static int run_on_device(struct funnel_table *t, const struct funnel__read_options *o,
                         struct funnel__transfer *tr, const struct dp_layout *l,
                         const uint8_t *host, int n_var, int64_t lanes, enum dp_go go,
                         void *stream, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, be, stream, &t->event, error));
  w.enqueued = funnel__early(t);
  const int64_t n = t->plan.n_parts;
  const int nested = l->slices >= 0 ? FUNNEL_DP_STAGE_NESTED : 0; /* its kernels */
  /* the args of the pass that lays the output out, and where they lie */
  const bool gated = go == GO_GATED, one_go = go != GO_ARGS;
  const int64_t at = one_go ? l->args2 : l->args;
  const struct funnel__dp_args *a = (const struct funnel__dp_args *)(host + at);
  const uint64_t args = t->dp_scratch + (uint64_t)at;
  const bool decoded = a->zmode == FUNNEL_DP_DECODED && !one_go; /* the second of two passes */
  /* the parse while the partitions are copied: pinned ones, the early
   * copy's parts (the head goes up there), or staged ones, a part after
   * each round that completes it (the head goes up first) */
  const bool overlapped = !decoded && !one_go && t->n_overlap > 0;
  struct staged_parse sp;
  const bool staged = !decoded && !one_go && !overlapped &&
                      plan_staged_parse(t, tr, l, host, nested, stream, &sp);
  /* else one launch parses them all, and scans them too when they are few
   * (FUNNEL__DP_PARSE_SCANS); a read parsed in parts is scanned after */
  const bool whole = !overlapped && !staged;
  int st = FUNNEL_OK;
  if (!decoded && !overlapped)
    st = funnel__work_enqueued(&w, funnel__dev_copy_h2d_async(be, t->dp_scratch, host,
                                                              (size_t)l->head, stream, error));
  if (staged) {
    tr->on_round = staged_round;
    tr->round_ctx = &sp;
  }
  if (st == FUNNEL_OK && !tr->early && !decoded) st = funnel__enqueue_transfer(t, tr, &w, error);
  tr->on_round = NULL;
  bool lost = false;
  if (staged) {
    while (st == FUNNEL_OK && sp.next < sp.m) st = launch_staged_part(&sp, sp.next++, error);
    if (st == FUNNEL_OK) t->stats.overlap_parts = sp.m;
    if (sp.aux_used) st = join_aux(t, &t->overlap_ev[sp.m], stream, st, &lost, error);
  }
  if (st == FUNNEL_OK && overlapped)
    st = parse_overlapped(t, &w, l, host, nested, stream, 0, &lost, error);
  if (st == FUNNEL_OK && (gated || decoded))
    st = enqueue_decoding(t, &w, l, host, gated, nested, stream, error);
  const int gate = gated ? FUNNEL_DP_STAGE_GATED : 0;
  if (st == FUNNEL_OK && whole)
    st = funnel__work_enqueued(&w, funnel__dev_launch_dpath(be, FUNNEL_DP_PARSE | nested | gate,
                                                            args, n, l->parse_lanes, stream, error));
  if (st == FUNNEL_OK && !(whole && FUNNEL__DP_PARSE_SCANS(n, 0, n)))
    st = funnel__work_enqueued(&w, funnel__dev_launch_dpath(be, FUNNEL_DP_SCAN | nested | gate,
                                                            args, 1 + n_var, n, stream, error));
  if (st == FUNNEL_OK)
    st = enqueue_concat(t, o, &w, l, host, a, args, n_var, nested, lanes, stream, error);
  bool abandoned;
  st = funnel__work_finish(&w, st, false, &abandoned, error);
  abandoned |= lost;
  if (st == FUNNEL_OK) {
    st = funnel__dev_event_wait(be, t->ev_sums, error);
    /* the rest of the work must be over before anything it touches goes */
    abandoned = st != FUNNEL_OK && funnel__dev_event_wait(be, t->event, NULL) != FUNNEL_OK;
  }
  if (abandoned) funnel__table_abandon(t);
  return st;
}

/* Lanes a piece of the concat, 1 to 32, by the mean piece's bytes, and
 * more while the pieces' lanes would not fill the device: up to
 * FUNNEL__DP_PARSE_THREADS threads in all, and up to FUNNEL__DP_CONCAT_FILL
 * with at most 4 times the lanes the size asks for (1000x10x10 mixed,
 * 10,000 pieces of 58 bytes: 7.5 us at 8 lanes, 9.3 at 32). A partition's
 * body, shared by its columns, stands for its pieces: with the read's
 * template, a partition's bytes but the template's and an end marker's;
 * without one, all of its bytes (the bytes alone gave 16 lanes to pieces
 * of one row in partitions of 700 bytes, nearly all of them metadata: ncu,
 * 50000x10x10 mixed, the concat 156 -> 76 us with 8). A lane copies 8-byte
 * words in a loop unrolled 8 times, so pieces of a few hundred bytes copy
 * fastest with few lanes, each with words in flight, and more pieces a
 * warp; a read with string columns wants a warp once its pieces are larger
 * (the lanes' shifted words and the bytes at either end of a piece's
 * string bytes go faster spread). Measured on the H100 (session 36,
 * bench/RESULTS.md; the kernel alone, us for 2 to 32 lanes a piece):
 * 50000x4x100 mixed, a mean piece of 519 bytes: 256, 140, 157, 164, 203;
 * 50000x10x27 mixed (150): 227, 173, 200, 262, 343; 50000x10x10 strings
 * (232): 299, 261, 284, 340, 437; 50000x10x27 strings (610): 835, 616,
 * 606, 607, 549; 10000x4x100 mixed, 40,000 pieces: 50, 41, 37, 35, 41.
 * Between the sizes measured the steps are guesses. A piece that wants a
 * warp takes more, up to FUNNEL__DP_CONCAT_MAX_LANES, while the pieces'
 * lanes number fewer than FUNNEL__DP_PARSE_THREADS (fewer than 2,048 such
 * pieces), not up to FUNNEL__DP_CONCAT_FILL: the kernel alone on the H100
 * (session 54, us at 32, 64 and 128 lanes a piece): 200x10x1000 strings
 * (2,000 pieces of 8 to 40 KB) 90, 60, 60 (64 taken); 200x4x1000 strings
 * 68, 41, 29 (128); 200x4x1000 int64 12, 10, 9 (128); 200x10x100 strings
 * 12, 11, 10 (64); but 1000x4x100 strings (4,000 pieces of 2 KB, left at
 * 32) 13, 15, 16. */
static int64_t concat_lanes(int64_t bytes, int64_t n, int n_cols, int n_var, int64_t tmpl_length) {
  int64_t body = bytes / (n > 0 ? n : 1);
  if (tmpl_length > 0) body = body > tmpl_length + 8 ? body - tmpl_length - 8 : 0;
  const int64_t mean = body / n_cols, pieces = n * n_cols;
  const int64_t want = n_var > 0 ? (mean < 48 ? 2 : mean < 384 ? 4 : 32)
                                 : (mean < 16 ? 1 : mean < 100 ? 2 : mean < 1024 ? 4 : 32);
  /* a piece that wants a warp may take a few while the pieces are few */
  const int64_t most = want == 32 ? FUNNEL__DP_CONCAT_MAX_LANES : 32;
  int64_t lanes = 1;
  while (lanes < most &&
         (lanes < want || pieces * lanes < FUNNEL__DP_PARSE_THREADS ||
          (pieces * lanes < FUNNEL__DP_CONCAT_FILL && lanes < 4 * want && lanes < 32)))
    lanes *= 2;
  return lanes;
}

/* The attempt in progress, between funnel__dpath_parse and
 * funnel__dpath_plan: kept in the table's arena. */
struct funnel__dpath {
  struct dp_layout l;
  uint8_t *host;
};

/* The attempt's end when the device left partitions to the host (`s`,
 * its summary, says how many): the host path reads them all, and says
 * what is wrong if anything is; the device's work (which copied nothing
 * into the output) is over first. */
static int leave_to_host(struct funnel_table *t, const struct funnel__dp_summary *s, int64_t n,
                         struct funnel_error *error) {
  t->stats.device_left = s->left > 0 ? s->left : n;
  t->stats.compressed_partitions = t->stats.bytes_compressed = t->stats.bytes_decoded = 0;
  t->stats.device_decoded = t->stats.bytes_device_decoded = 0; /* the host path's to count */
  const int st = funnel__dev_event_wait(&t->dev->be, t->event, error);
  if (st != FUNNEL_OK) {
    funnel__table_abandon(t);
    return st;
  }
  funnel__table_drop_attempt(t, funnel__early(t));
  memset(&t->plan, 0, sizeof(t->plan));
  return FUNNEL_OK;
}

/* A read of LZ4 bodies' counts (its first pass's, `s`), for its stats. */
static void count_decoded(struct funnel_table *t, const struct funnel__dp_summary *s) {
  t->stats.compressed_partitions = s->zparts;
  t->stats.bytes_compressed = s->zin;
  t->stats.bytes_decoded = s->zout;
  t->stats.device_decoded = s->zframes;
  t->stats.bytes_device_decoded = s->zframe_bytes;
}

/* The room a read of compressed bodies of `bytes` bytes of partitions makes for
 * its decoded buffers before its first pass, so that both passes go in one
 * go (dpath.h, one_go_fits); 0: two passes, a wait between. The
 * guess: 1.5 times what the device's last read of the codec's bodies
 * decoded a byte of its partitions, plus an eighth of the bytes, or before any
 * such read twice the bytes; *expect, the bytes it expects. The output is
 * laid out from the guess and held with the table, so a guess over
 * FUNNEL__LZ4_ONE_GO_MAX_RATIO times the bytes (the last read's frames
 * decoded to several times theirs, as a column of zeros does) makes two
 * passes instead: a small table never holds much more than its partitions'
 * bytes a few times over (a hostile test: a 100 KB read after one of
 * zeros held 32.8 MB). */
static int64_t room_guess(const struct funnel_table *t, int codec, int64_t bytes,
                          int64_t *expect) {
  const int64_t per_k = atomic_load(&t->dev->per_k[codec]);
  *expect = per_k > 0 ? bytes / 1024 * per_k + bytes % 1024 * per_k / 1024 : bytes;
  const int64_t guess = per_k > 0 ? *expect / 2 * 3 + bytes / 8 : 2 * bytes;
  return guess > FUNNEL__LZ4_ONE_GO_MAX_RATIO * bytes ? 0 : funnel__align_up(guess + 4096, 8);
}

/* Whether a read of compressed bodies of `bytes` bytes of partitions may
 * go in one go: not a large read, whose wait costs it little and whose
 * guess would hold much memory; not a shared output, allocated once; and
 * the summary sent back by the kernels (`summary_back`). */
static bool one_go_fits(const struct funnel__read_options *o, int64_t bytes,
                        uint64_t summary_back) {
  return summary_back != 0 && !o->shareable && bytes <= FUNNEL__LZ4_ONE_GO_MAX_BYTES;
}

/* The room a read that decodes while it copies (t->zaux; tuning.h,
 * FUNNEL__ZOVERLAP_*) makes for its decoded buffers before its first pass,
 * guessed as for a read in one go (room_guess), but for a read of any
 * size: it is freed with the read's inputs (the output is allocated after
 * the first pass, to its size). 0: no room (a guess too large); the read decodes after
 * its first pass, as others do. The args at `args2` (unused by a read of
 * two passes) are the gate of the parts' decoding: funnel__dp_shut's. */
static void arm_room(const struct dp_layout *l, uint8_t *host, int64_t room) {
  const struct funnel__dp_args *a = (const struct funnel__dp_args *)(host + l->args);
  struct funnel__dp_args *g = (struct funnel__dp_args *)(host + l->args2);
  *g = *a;
  g->gate = a->summary;
  g->zguess = room;
}

/* What a read of the codec's bodies decoded (its decoded buffers' bytes,
 * its frames), for the next one's guess (a ratio a codec: ZSTD's frames of
 * zeros decode to far more than LZ4's). */
static void learn_decoded(struct funnel_table *t, int codec, int64_t bytes, int64_t zbytes,
                          int64_t zframes) {
  if (bytes <= 0) return;
  atomic_store(&t->dev->last_raw[codec], zframes == 0);
  const double per_k = (double)zbytes * 1024.0 / (double)bytes;
  atomic_store(&t->dev->per_k[codec],
               per_k < 1.0 ? 1 : per_k > 1e12 ? (int64_t)1e12 : (int64_t)per_k);
}

/* A read of LZ4 bodies in one go (dpath.h): args2, as the first pass's
 * args but laying the output out in t->out (`capacity`) and sending its
 * summary back; its own summary, zeroed but for the host's mark; and the
 * host's copy of it, zeroed, so that it shows whether it came. With a
 * `zguess` (GO_GATED), the second pass, decoding into `zguess` bytes at
 * t->zscratch, gated by the first's summary. With none (GO_RAW), the
 * read's one pass (FUNNEL_DP_RAW): the read guesses it holds no frame
 * (neither the device's last read of its codec held one, as the read
 * found when it began, funnel__dpath_guess_raw, nor the partition its
 * template was made from does, as one writer's partitions of a row or a
 * few do not: every buffer stored raw), so it parses as a plain read
 * does, with no decoder and no first pass; a frame leaves its partition,
 * and the read goes on as one of two passes, from the first pass's args
 * and summary, which the head uploaded as written. */
static void arm_one_go(const struct funnel_table *t, const struct dp_layout *l, uint8_t *host,
                       int64_t capacity, uint64_t summary_back, int64_t zguess) {
  const struct funnel__dp_args *a = (const struct funnel__dp_args *)(host + l->args);
  struct funnel__dp_args *a2 = (struct funnel__dp_args *)(host + l->args2);
  *a2 = *a;
  a2->zmode = zguess > 0 ? FUNNEL_DP_DECODED : FUNNEL_DP_RAW;
  a2->zscratch = t->zscratch;
  a2->out = t->out;
  a2->out_capacity = capacity;
  a2->summary = t->dp_scratch + (uint64_t)l->summary2;
  a2->summary_back = summary_back;
  a2->gate = zguess > 0 ? a->summary : 0;
  a2->zguess = zguess;
  struct funnel__dp_summary *s2 = (struct funnel__dp_summary *)(host + l->summary2);
  memset(s2, 0, (size_t)l->summary_bytes);
  s2->first_left = a->n_parts;
  s2->sent = 1;
  memset(host + l->summary_back, 0, (size_t)l->summary_bytes);
}

/* The tables (l->device bytes), the `zguess` bytes of decoded buffers and
 * the output (`capacity`) of a small read of LZ4 or ZSTD bodies in one
 * go, in one device allocation (t->out_block), which then goes with the
 * output: two allocations and two frees fewer, about 2 us each allocation
 * on the H100 host, before the read's head can go up (tuning.h,
 * FUNNEL__ONE_BLOCK_MAX_BYTES, the same trade for uncompressed reads; on
 * the H100, 4% off a pageable read of 200 partitions, 1% off a pinned
 * one: bench/RESULTS.md, session 58).
 * When the device has no room for it, nothing is set, and the read makes
 * its allocations one by one, as larger reads do. */
static int alloc_z_block(struct funnel_table *t, const struct dp_layout *l, int64_t zguess,
                         int64_t capacity, void *stream, struct funnel_error *error) {
  const int64_t tables = funnel__align_up(l->device, FUNNEL__ALIGN);
  const int64_t decoded = funnel__align_up(zguess, FUNNEL__ALIGN);
  uint64_t block = 0;
  const int st = funnel__dev_alloc(&t->dev->be, (size_t)(tables + decoded + capacity), stream,
                                   &block, error);
  if (st == FUNNEL_ERR_DEVICE_OUT_OF_MEMORY) {
    funnel__error_clear(error);
    return FUNNEL_OK;
  }
  if (st != FUNNEL_OK) return st;
  t->dp_scratch = block;
  t->zscratch = zguess > 0 ? block + (uint64_t)tables : 0;
  t->out = block + (uint64_t)(tables + decoded);
  t->out_bytes = capacity;
  t->out_block = block;
  return FUNNEL_OK;
}

/* After a read in one go that goes on as one of two passes: the guess's
 * allocations given back (in an out_block, the tables' allocation keeps
 * their room, unused, until it goes with the inputs). */
static void drop_one_go_room(struct funnel_table *t, void *stream) {
  if (t->out_block != 0) {
    funnel__table_forget_out_room(t);
    return;
  }
  funnel__dev_free(&t->dev->be, t->zscratch, stream);
  funnel__dev_free(&t->dev->be, t->out, stream);
  t->zscratch = t->out = 0;
  t->out_bytes = 0;
}

/* After a read in one go whose gate was shut: the first pass's summary,
 * to the host's copy (the rest of the read's work waited for), and the
 * guess's allocations given back, for the two passes' way on. */
static int after_shut_gate(struct funnel_table *t, const struct dp_layout *l, uint8_t *host,
                           void *stream, struct funnel_error *error) {
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, &t->dev->be, stream, &t->event, error));
  w.enqueued = true; /* the one go's */
  FUNNEL_RETURN_NOT_OK(first_summary_back(t, &w, FUNNEL_OK, l, host, stream, error));
  drop_one_go_room(t, stream);
  return FUNNEL_OK;
}

/* What an attempt decided before its passes (funnel__dpath_parse): where
 * its partitions go, and for a read of compressed bodies its way. */
struct attempt {
  struct funnel__transfer tr;
  uint64_t summary_back; /* where the kernels send the sums back (0: copied back) */
  int64_t capacity;      /* the output's bound */
  /* a small read in one go (one_go_fits): guessing no frame, one pass
   * (`raw`); else both passes, into `zguess` bytes of room for the decoded
   * buffers; 0 and false: two passes, a wait between */
  bool raw;
  int64_t zguess;
  int64_t zroom;   /* a read decoding while copied: room made before its first pass */
  int64_t zexpect; /* the decoded bytes the guesses expect */
};

/* The attempt's start: its arena's records, the plan's head, the
 * transfer's layout, the tables' layout and their host block (pinned and
 * mapped when the pool has room: the kernel writes the sums there
 * itself). */
static int begin_attempt(struct funnel_table *t, const struct funnel__read_options *o,
                         const struct funnel_partition *parts, int64_t n,
                         const struct funnel__schema *schema, bool z,
                         struct funnel__dpath **attempt, struct attempt *at,
                         struct funnel_error *error) {
  struct funnel__dpath *d = funnel__arena_calloc(&t->arena, 1, sizeof(*d));
  /* room for a staging block each (pageable partitions when the pool has
   * no room for one block of them all) and this attempt's; written as
   * they are taken, so not cleared */
  t->staged = funnel__arena_alloc(&t->arena, ((size_t)n + 4) * sizeof(*t->staged));
  if (d == NULL || t->staged == NULL) return OUT_OF_MEMORY(error);
  t->plan = (struct funnel__plan){.schema = schema, .raw = parts, .n_parts = n};
  t->stats.device_parsed = n;
  FUNNEL_RETURN_NOT_OK(funnel__layout_transfer(t, o, &at->tr, error));
  d->l = lay_out_read(n, schema, z);
  d->host = funnel__pool_alloc(&t->dev->pool, d->l.host);
  at->summary_back = 0;
  if (d->host != NULL) {
    funnel__table_hold_staged(t, d->host, d->l.host);
    at->summary_back = funnel__pool_device_address(&t->dev->pool, d->host);
    if (at->summary_back != 0) at->summary_back += (uint64_t)d->l.summary_back;
  } else {
    d->host = funnel__arena_alloc(&t->arena, (size_t)d->l.host);
  }
  if (d->host == NULL) return OUT_OF_MEMORY(error);
  *attempt = d;
  return FUNNEL_OK;
}

/* The attempt's device memory: its tables, its output unless it is
 * compressed (sized once unpacked) or goes in one go (sized from the
 * guess), the partitions' scratch, and the room a read in one go or one
 * decoding while copied makes for its decoded buffers (at->zguess,
 * at->zroom: 0, and at->raw false, when the device has no room for them). */
static int alloc_attempt(struct funnel_table *t, const struct funnel__read_options *o,
                         const struct dp_layout *l, size_t count, int64_t bytes,
                         const struct funnel__schema *schema, bool z, struct attempt *at,
                         void *stream, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  int st = FUNNEL_OK;
  if ((!z || at->raw) && t->reserve > 0 &&
      t->reserve == funnel__dpath_reserve(o, count, bytes, z, schema) &&
      (t->reserved != 0 || t->scratch == 0)) {
    /* one allocation: the partitions' (the early copies made it, or it is
     * made here for the transfer's scratch), then the tables, the output */
    if (t->reserved == 0) {
      const int64_t room = funnel__align_up(at->tr.scratch_size, FUNNEL__ALIGN);
      st = funnel__dev_alloc(be, (size_t)(room + t->reserve), stream, &t->scratch, error);
      if (st != FUNNEL_OK) return st;
      t->reserved = t->scratch + (uint64_t)room;
    }
    t->dp_scratch = t->reserved;
    t->out = t->reserved + (uint64_t)funnel__align_up(l->device, FUNNEL__ALIGN);
    t->out_bytes = at->capacity;
    t->out_block = t->scratch;
  } else {
    /* a read of LZ4 bodies knows its output's bound once unpacked */
    if (!z) st = funnel__alloc_out(t, o, at->capacity, stream, error);
    if (st == FUNNEL_OK && !at->tr.early && at->tr.scratch_size > 0)
      st = funnel__dev_alloc(be, (size_t)at->tr.scratch_size, stream, &t->scratch, error);
    /* ... or, to go in one go, from the guess of its decoded buffers (none
     * in one pass, over FUNNEL__ONE_BLOCK_MAX_BYTES of partitions): a small
     * read's tables, decoded buffers and output in one allocation, when the
     * decoded buffers it then holds with the output are as few bytes as an
     * uncompressed read's partitions may be */
    if (st == FUNNEL_OK && (at->zguess > 0 || at->raw) &&
        at->zguess <= FUNNEL__ONE_BLOCK_MAX_BYTES)
      st = alloc_z_block(t, l, at->zguess, output_bound(schema, bytes + at->zguess), stream,
                         error);
    if (st == FUNNEL_OK && t->dp_scratch == 0)
      st = funnel__dev_alloc(be, (size_t)l->device, stream, &t->dp_scratch, error);
    if (st != FUNNEL_OK) return st;
  }
  if (at->zguess > 0 || at->raw) {
    at->capacity = output_bound(schema, bytes + at->zguess);
    if (t->out_block == 0) {
      if (at->zguess > 0)
        st = funnel__dev_alloc(be, (size_t)at->zguess, stream, &t->zscratch, error);
      if (st == FUNNEL_OK) st = funnel__alloc_out(t, o, at->capacity, stream, error);
    }
    if (st == FUNNEL_ERR_DEVICE_OUT_OF_MEMORY) { /* two passes, each sized */
      funnel__error_clear(error);
      funnel__dev_free(be, t->zscratch, stream);
      t->zscratch = 0;
      at->zguess = 0;
      at->raw = false;
      st = FUNNEL_OK;
    }
    if (st != FUNNEL_OK) return st;
  }
  if (at->zroom > 0) {
    st = funnel__dev_alloc(be, (size_t)at->zroom, stream, &t->zscratch, error);
    if (st == FUNNEL_ERR_DEVICE_OUT_OF_MEMORY) { /* decoded after the first pass */
      funnel__error_clear(error);
      at->zroom = 0;
      st = FUNNEL_OK;
    }
  }
  return st;
}

/* A read of compressed bodies after its one go, or from the start: its
 * first pass (unless the one go made it), the wait for its sums, then its
 * decoded buffers and output allocated to their size and the second pass's
 * args armed (*zbytes: the decoded bytes). *left: the device left the read
 * to the host (leave_to_host has ended the attempt). */
static int size_decoded(struct funnel_table *t, const struct funnel__read_options *o,
                        struct funnel__dpath *d, struct attempt *at, int codec, int64_t bytes,
                        bool made, bool placed, void *stream, int64_t *zbytes, bool *left,
                        struct funnel_error *error) {
  const struct dp_layout *l = &d->l;
  const int64_t n = t->plan.n_parts;
  struct funnel_backend *be = &t->dev->be;
  struct funnel__dp_args *a = (struct funnel__dp_args *)(d->host + l->args);
  const struct funnel__dp_summary *s = (const struct funnel__dp_summary *)(d->host + l->summary_back);
  *left = false;
  if (!made) {
    const uint64_t zgate = at->zroom > 0 ? t->dp_scratch + (uint64_t)l->args2 : 0;
    FUNNEL_RETURN_NOT_OK(unpack_on_device(t, &at->tr, l, d->host, stream, zgate, placed, error));
  }
  t->stats.decode_waits++;
  *left = s->left > 0 || s->zbytes > FUNNEL__MAX_OUTPUT_BYTES;
  if (*left) return leave_to_host(t, s, n, error);
  *zbytes = s->zbytes;
  learn_decoded(t, codec, bytes, *zbytes, s->zframes);
  /* decoded while copied when the room held every job (the gate was
   * open for each part's then: its sums only grow); else decoded now,
   * into room of the size the first pass counted */
  t->zdecoded = at->zroom > 0 && *zbytes <= at->zroom;
  int st = FUNNEL_OK;
  if (!t->zdecoded) {
    funnel__dev_free(be, t->zscratch, stream); /* the room that fell short, if any */
    t->zscratch = 0;
    if (*zbytes > 0) st = funnel__dev_alloc(be, (size_t)*zbytes, stream, &t->zscratch, error);
  }
  at->capacity = output_bound(t->plan.schema, bytes + *zbytes);
  if (st == FUNNEL_OK) st = funnel__alloc_out(t, o, at->capacity, stream, error);
  /* no room for the decoded buffers and the output's bound: the host
   * path, which needs the output alone (and names a bomb) */
  if (st == FUNNEL_ERR_DEVICE_OUT_OF_MEMORY) {
    funnel__error_clear(error);
    *left = true;
    return leave_to_host(t, s, n, error);
  }
  if (st != FUNNEL_OK) return st;
  a->zmode = FUNNEL_DP_DECODED;
  a->zscratch = t->zscratch;
  a->out = t->out;
  a->out_capacity = at->capacity;
  a->summary_back = at->summary_back;
  struct funnel__dp_summary *fresh = (struct funnel__dp_summary *)(d->host + l->summary);
  memset(fresh, 0, (size_t)l->summary_bytes);
  fresh->first_left = n;
  count_decoded(t, s);
  return FUNNEL_OK;
}

int funnel__dpath_parse(struct funnel_table *t, const struct funnel__read_options *o,
                        const struct funnel_partition *parts, size_t count, int64_t bytes,
                        int codec, const struct funnel__schema *schema, void *stream,
                        struct funnel__dpath **out, struct funnel_error *error) {
  *out = NULL;
  const bool z = codec != FUNNEL__CODEC_NONE; /* LZ4 bodies (funnel__dpath_wanted) */
  const int64_t n = (int64_t)count;
  struct funnel__dpath *d = NULL;
  struct attempt at = {.capacity = output_bound(schema, bytes)};
  FUNNEL_RETURN_NOT_OK(begin_attempt(t, o, parts, n, schema, z, &d, &at, error));
  const struct dp_layout *l = &d->l;
  /* a read in parts (transfer.c's early copy) makes two passes, its first
   * part by part as the parts are copied, decoding each into room made
   * now when it can (t->zaux) */
  const bool zparts = z && t->n_overlap > 0;
  /* a small read in one go: guessing no frame, one pass, as a plain read
   * makes (the early copies set its tables and output aside, t->reserve,
   * or the device's last read of the codec held none); else both passes,
   * into room guessed for the decoded buffers */
  const bool go = z && !zparts && one_go_fits(o, bytes, at.summary_back);
  at.raw = go && (t->reserve > 0 || funnel__dpath_guess_raw(t->dev, codec));
  at.zguess = go && !at.raw ? room_guess(t, codec, bytes, &at.zexpect) : 0;
  at.zroom = zparts ? room_guess(t, codec, bytes, &at.zexpect) : 0;
  FUNNEL_RETURN_NOT_OK(alloc_attempt(t, o, l, count, bytes, schema, z, &at, stream, error));
  const bool tmpl_frames = write_head(t, &at.tr, parts, n, schema, l, z ? 0 : at.capacity,
                                      t->dp_scratch, z ? 0 : at.summary_back, codec, d->host);
  if (at.zroom > 0) arm_room(l, d->host, at.zroom);
  t->plan.raw = NULL; /* the caller's array: placed, and not kept past the read */
  const struct funnel__dp_args *a = (const struct funnel__dp_args *)(d->host + l->args);
  const struct funnel__dp_summary *s = (const struct funnel__dp_summary *)(d->host + l->summary_back);
  bool placed = false; /* the copies and the head enqueued by a pass in one go */
  if (at.raw && tmpl_frames) {
    /* the partition the template was made from holds a frame: two
     * passes, the first sizing the decoded buffers (room guessed from a
     * read of none would fall short, and cost a second wait) */
    drop_one_go_room(t, stream);
    at.raw = false;
  }
  if (at.zguess > 0 || at.raw) {
    /* both passes at once; the second's summary comes back unless its
     * gate was shut, and then the two passes' way goes on from the first;
     * or, guessing no frame, one pass, which a frame sends that way too */
    arm_one_go(t, l, d->host, at.capacity, at.summary_back, at.zguess);
    const int64_t lanes =
        concat_lanes(bytes + at.zexpect, n, schema->n_fields, l->n_var, a->tmpl.length);
    FUNNEL_RETURN_NOT_OK(run_on_device(t, o, &at.tr, l, d->host, l->n_var, lanes,
                                       at.raw ? GO_RAW : GO_GATED, stream, error));
    /* the one pass found a frame: its summary came, but the first pass's is to come */
    const bool frames = at.raw && !s->laid_out && s->zframes > 0;
    if (s->sent && !frames) {
      /* zbytes comes with the layout's summary (funnel__dp_layout_end) */
      if (!s->laid_out) return leave_to_host(t, s, n, error);
      count_decoded(t, s);
      learn_decoded(t, codec, bytes, s->zbytes, s->zframes);
      *out = d;
      return FUNNEL_OK;
    }
    t->stats.decode_waits = 1; /* the one go's, and the first pass's below */
    if (frames) {
      /* its first pass is still to make, the partitions and head in place */
      drop_one_go_room(t, stream);
      at.zguess = 0;
      placed = true;
    } else {
      FUNNEL_RETURN_NOT_OK(after_shut_gate(t, l, d->host, stream, error));
    }
  }
  int64_t zbytes = 0;
  if (z) {
    /* the first pass (unless the one go made it, its gate shut); then the
     * decoded buffers and the output, sized */
    bool left;
    FUNNEL_RETURN_NOT_OK(size_decoded(t, o, d, &at, codec, bytes, at.zguess > 0, placed, stream,
                                      &zbytes, &left, error));
    if (left) return FUNNEL_OK;
  }
  const int64_t lanes =
      concat_lanes(bytes + zbytes, n, schema->n_fields, l->n_var, a->tmpl.length);
  FUNNEL_RETURN_NOT_OK(run_on_device(t, o, &at.tr, l, d->host, l->n_var, lanes, GO_ARGS, stream,
                                     error));
  if (!s->laid_out) return leave_to_host(t, s, n, error);
  *out = d;
  return FUNNEL_OK;
}

int funnel__dpath_plan(struct funnel_table *t, struct funnel__dpath *d,
                       struct funnel_error *error) {
  struct funnel__plan *plan = &t->plan;
  const struct funnel__schema *schema = plan->schema;
  const int n_cols = schema->n_fields;
  const struct funnel__dp_summary *s = (const struct funnel__dp_summary *)(d->host + d->l.summary_back);
  const int64_t *nulls = (const int64_t *)(s + 1), *var_chars = nulls + n_cols;
  plan->rows = s->rows;
  plan->batches = s->batches;
  plan->columns = funnel__arena_calloc(&t->arena, (size_t)n_cols, sizeof(*plan->columns));
  int64_t *chars = funnel__arena_calloc(&t->arena, (size_t)n_cols, sizeof(int64_t));
  if (plan->columns == NULL || chars == NULL) return OUT_OF_MEMORY(error);
  for (int c = 0, v = 0; c < n_cols; c++) {
    plan->columns[c].null_count = nulls[c];
    if (schema->fields[c].offset_width != 0) chars[c] = var_chars[v++];
  }
  /* a column's rows: the table's, or a list's child rows, times the sizes
   * of the fixed_size_lists between (as the device laid them out) */
  const struct funnel__dp_column *dcols = (const struct funnel__dp_column *)(d->host + d->l.columns);
  for (int c = 0; c < n_cols; c++)
    plan->columns[c].length =
        (dcols[c].domain < 0 ? plan->rows : var_chars[dcols[c].domain]) * dcols[c].mult;
  FUNNEL_RETURN_NOT_OK(funnel__plan_layout(schema, plan->columns, chars, &plan->out_size, error));
  if (plan->out_size != s->out_size)
    return FUNNEL_ERR(error, FUNNEL_ERR_LIMIT,
                      "internal error: the device laid out %lld bytes of output, the host %lld",
                      (long long)s->out_size, (long long)plan->out_size);
  return FUNNEL_OK;
}
