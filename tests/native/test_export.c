/* test_export.c: tables through the Arrow C Device Data Interface.
 *
 * The consumer here reads only the ArrowDeviceArray and ArrowSchema, as a
 * consumer that knows nothing of funnel would: the format strings are
 * checked against the spec's table written out by hand below, and the
 * buffers (copied to the host by the consumer's own CUDA calls on cuda,
 * after waiting on sync_event in its own stream) against the source rows.
 * Lifetimes: an exported array outlives funnel_table_free and
 * funnel_device_close, children can be moved out, and nothing is left
 * once everything is released. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "device.h" /* funnel__cuda_ordinal */
#include "ipc_writer.h"
#include "tables.h"

/* The C Data Interface's format string of each field of every_schema, from
 * the specification's table. */
static const char *const FORMATS[] = {
    "c", "s", "i", "l", "C", "S", "I", "L", "f", "g", "b", "b", "tdD", "tdm", "tss:",
    "tsm:UTC", "tsu:Europe/Paris", "tsn:", "d:38,9", "u", "z", "U", "Z", "w:5"};
enum { N_FIELDS = sizeof(FORMATS) / sizeof(FORMATS[0]) };
#define SCHEMA every_schema
#define FIELDS table_every_type

static bool on_cuda(void) { return strncmp(check_backend(), "cuda", 4) == 0; }
/* The CUDA device the tests run on: cuda:N's N, else 0. */
static int cuda_ordinal(void) {
  const int n = funnel__cuda_ordinal(check_backend());
  return n >= 0 ? n : 0;
}

/* ------------------------------------------- the consumer's own CUDA calls */

/* Only what a consumer needs, from the driver, by hand: no funnel code. */
struct consumer_cuda {
  void *lib;
  int (*init)(unsigned);
  int (*device_get)(int *, int);
  int (*primary_retain)(void **, int);
  int (*ctx_set_current)(void *);
  int (*stream_create)(void **, unsigned);
  int (*stream_wait_event)(void *, void *, unsigned);
  int (*copy_d2h)(void *, uint64_t, size_t, void *);
  int (*stream_sync)(void *);
  int (*stream_destroy)(void *);
  void *stream;
};

/* The consumer works on the device the arrays name (device_id, checked in
 * check_array to be the one the tests run on): cuda:N's N, not device 0. */
static bool consumer_open(struct consumer_cuda *cu) {
  memset(cu, 0, sizeof(*cu));
  cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cu->lib == NULL) return false;
  *(void **)&cu->init = dlsym(cu->lib, "cuInit");
  *(void **)&cu->device_get = dlsym(cu->lib, "cuDeviceGet");
  *(void **)&cu->primary_retain = dlsym(cu->lib, "cuDevicePrimaryCtxRetain");
  *(void **)&cu->ctx_set_current = dlsym(cu->lib, "cuCtxSetCurrent");
  *(void **)&cu->stream_create = dlsym(cu->lib, "cuStreamCreate");
  *(void **)&cu->stream_wait_event = dlsym(cu->lib, "cuStreamWaitEvent");
  *(void **)&cu->copy_d2h = dlsym(cu->lib, "cuMemcpyDtoHAsync_v2");
  *(void **)&cu->stream_sync = dlsym(cu->lib, "cuStreamSynchronize");
  *(void **)&cu->stream_destroy = dlsym(cu->lib, "cuStreamDestroy_v2");
  int dev = 0;
  void *ctx = NULL;
  return CHECK(cu->init && cu->device_get && cu->primary_retain && cu->ctx_set_current &&
               cu->stream_create && cu->stream_wait_event && cu->copy_d2h && cu->stream_sync &&
               cu->stream_destroy) &&
         CHECK_EQ_I64(cu->init(0), 0) && CHECK_EQ_I64(cu->device_get(&dev, cuda_ordinal()), 0) &&
         CHECK_EQ_I64(cu->primary_retain(&ctx, dev), 0) &&
         CHECK_EQ_I64(cu->ctx_set_current(ctx), 0) &&
         CHECK_EQ_I64(cu->stream_create(&cu->stream, 1 /* non-blocking */), 0);
}

static void consumer_close(struct consumer_cuda *cu) {
  if (cu->stream != NULL) cu->stream_destroy(cu->stream);
  if (cu->lib != NULL) dlclose(cu->lib);
}

/* The bytes of a buffer of the array, on the host (malloc'd). */
static uint8_t *fetch(struct consumer_cuda *cu, const void *buffer, int64_t size) {
  uint8_t *host = malloc((size_t)size + 1);
  if (size == 0) return host;
  if (!on_cuda()) {
    memcpy(host, buffer, (size_t)size);
  } else if (!CHECK_EQ_I64(cu->copy_d2h(host, (uint64_t)(uintptr_t)buffer, (size_t)size, cu->stream), 0) ||
             !CHECK_EQ_I64(cu->stream_sync(cu->stream), 0)) {
    memset(host, 0, (size_t)size);
  }
  return host;
}

/* ------------------------------------------------------------- the checks */

/* The schema as a consumer reads it. */
static void check_schema(const struct ArrowSchema *s) {
  CHECK_EQ_STR(s->format, "+s");
  if (!CHECK_EQ_I64(s->n_children, N_FIELDS)) return;
  for (int c = 0; c < N_FIELDS; c++) {
    check_context("field %d", c);
    const struct ArrowSchema *f = s->children[c];
    CHECK_EQ_STR(f->format, FORMATS[c]);
    CHECK_EQ_STR(f->name, FIELDS[c].name);
    CHECK_EQ_I64(f->flags, FIELDS[c].nullable ? ARROW_FLAG_NULLABLE : 0);
    CHECK_EQ_I64(f->n_children, 0);
    CHECK(f->dictionary == NULL && f->release != NULL);
  }
  check_context("%s", "");
}

/* One child array against the source rows. */
static void check_child(struct consumer_cuda *cu, const struct ArrowArray *a, const struct iw_col *c,
                        int64_t rows) {
  const struct iw_field *f = &c->field;
  const int ow = iw_offset_width(f), w = iw_value_width(f);
  CHECK_EQ_I64(a->length, rows);
  CHECK_EQ_I64(a->offset, 0);
  CHECK_EQ_I64(a->n_children, 0);
  if (!CHECK_EQ_I64(a->n_buffers, ow ? 3 : 2)) return;
  /* funnel_column is only the shape check_column reads the bytes by; the
   * sizes come from the rows and the spec's layout, not from funnel */
  struct funnel_column col = {.name = f->name, .type_id = f->type, .nullable = f->nullable,
                              .byte_width = ow || f->type == FUNNEL_TYPE_BOOL ? 0 : w,
                              .offset_width = ow, .time_unit = f->time_unit,
                              .timezone = f->timezone ? f->timezone : "",
                              .decimal_precision = f->precision, .decimal_scale = f->scale,
                              .length = a->length, .null_count = a->null_count};
  col.validity.size = a->buffers[0] != NULL ? (rows + 7) / 8 : 0;
  col.offsets.size = ow ? (rows + 1) * ow : 0;
  uint8_t *validity = fetch(cu, a->buffers[0], col.validity.size);
  uint8_t *offsets = fetch(cu, ow ? a->buffers[1] : NULL, col.offsets.size);
  if (ow) {
    int64_t last = 0;
    if (ow == 4) {
      int32_t v;
      memcpy(&v, offsets + 4 * rows, 4);
      last = v;
    } else {
      memcpy(&last, offsets + 8 * rows, 8);
    }
    col.data.size = last;
  } else {
    col.data.size = f->type == FUNNEL_TYPE_BOOL ? (rows + 7) / 8 : rows * w;
  }
  uint8_t *data = fetch(cu, a->buffers[ow ? 2 : 1], col.data.size);
  check_column(&col, c, rows, validity, offsets, data);
  free(validity);
  free(offsets);
  free(data);
}

/* The whole array, waited for as a consumer waits: on sync_event, in its
 * own stream. */
static void check_array(struct consumer_cuda *cu, const struct ArrowDeviceArray *d,
                        const struct table_src *src) {
  if (on_cuda()) {
    CHECK_EQ_I64(d->device_type, ARROW_DEVICE_CUDA);
    CHECK_EQ_I64(d->device_id, cuda_ordinal());
    if (d->sync_event != NULL)
      CHECK_EQ_I64(cu->stream_wait_event(cu->stream, *(void **)d->sync_event, 0), 0);
  } else {
    CHECK_EQ_I64(d->device_type, ARROW_DEVICE_CPU);
    CHECK_EQ_I64(d->device_id, -1);
    CHECK(d->sync_event == NULL);
  }
  const struct ArrowArray *a = &d->array;
  CHECK_EQ_I64(a->length, src->rows);
  CHECK_EQ_I64(a->null_count, 0);
  CHECK_EQ_I64(a->n_buffers, 1);
  CHECK(a->buffers[0] == NULL);
  if (!CHECK_EQ_I64(a->n_children, N_FIELDS)) return;
  for (int c = 0; c < N_FIELDS; c++) {
    check_context("column %d '%s'", c, FIELDS[c].name);
    check_child(cu, a->children[c], &src->cols[c], src->rows);
  }
  check_context("%s", "");
}

/* A device, reader and table of `rows` rows in `parts` partitions. */
struct fixture {
  struct funnel_device *dev;
  struct funnel_reader *rd;
  struct funnel_table *t;
  struct table_src src;
  struct funnel_partition *p;
  int parts;
};

static bool fixture_read(struct fixture *fx, int64_t rows, int parts, uint64_t seed) {
  struct funnel_error err;
  memset(fx, 0, sizeof(*fx));
  fx->src = table_random(&SCHEMA, rows, 200, seed);
  fx->parts = parts;
  fx->p = table_partitions(&fx->src, parts);
  struct iw_buf sb = {0};
  iw_schema_message(&sb, &SCHEMA, NULL, NULL);
  bool ok = CHECK_OK(check_device_open(&fx->dev, &err), &err) &&
            CHECK_OK(funnel_reader_create(fx->dev, sb.data, sb.len, &fx->rd, &err), &err) &&
            CHECK_OK(funnel_reader_read_async(fx->rd, fx->p, (size_t)parts, 0, &fx->t, &err), &err);
  iw_buf_free(&sb);
  return ok;
}

/* Frees what the fixture still holds; the partitions once the table's
 * work is known complete (the export's release or the table's free). */
static void fixture_free(struct fixture *fx) {
  funnel_table_free(fx->t);
  funnel_reader_free(fx->rd);
  funnel_device_close(fx->dev);
  table_partitions_free(fx->p, fx->parts);
  table_src_free(&fx->src);
}

static bool same_live(struct funnel__live a, struct funnel__live b) {
  return a.allocs == b.allocs && a.events == b.events && a.host_allocs == b.host_allocs;
}

/* ------------------------------------------------------------------ tests */

static void export_every_type_as_a_consumer_reads_it(void) {
  struct consumer_cuda cu = {0};
  if (on_cuda() && !consumer_open(&cu)) return;
  struct fixture fx;
  struct funnel_error err;
  if (fixture_read(&fx, 5003, 7, 11)) {
    struct ArrowDeviceArray d;
    struct ArrowSchema s;
    if (CHECK_OK(funnel_table_export_device(fx.t, &d, &s, &err), &err)) {
      check_schema(&s);
      check_array(&cu, &d, &fx.src);
      s.release(&s);
      CHECK(s.release == NULL);
      d.array.release(&d.array);
      CHECK(d.array.release == NULL);
    }
  }
  fixture_free(&fx);
  consumer_close(&cu);
}

/* The export keeps the table and the device: the owner frees both first. */
static void export_outlives_table_and_device(void) {
  struct consumer_cuda cu = {0};
  if (on_cuda() && !consumer_open(&cu)) return;
  const struct funnel__live live0 = funnel__live_now();
  struct fixture fx;
  struct funnel_error err;
  struct ArrowDeviceArray d;
  bool exported = fixture_read(&fx, 20000, 3, 12) &&
                  CHECK_OK(funnel_table_export_device(fx.t, &d, NULL, &err), &err);
  /* the owner is done: its handles go, the consumer's array stays */
  funnel_table_free(fx.t);
  funnel_reader_free(fx.rd);
  funnel_device_close(fx.dev);
  fx.t = NULL, fx.rd = NULL, fx.dev = NULL;
  if (exported) {
    check_array(&cu, &d, &fx.src);
    CHECK(funnel__live_now().allocs > live0.allocs); /* the table's memory is still there */
    d.array.release(&d.array);
  }
  CHECK(same_live(funnel__live_now(), live0));
  fixture_free(&fx);
  consumer_close(&cu);
}

/* A consumer may move a child out and release the parent first. */
static void moved_child_outlives_its_parent(void) {
  struct consumer_cuda cu = {0};
  if (on_cuda() && !consumer_open(&cu)) return;
  const struct funnel__live live0 = funnel__live_now();
  struct fixture fx;
  struct funnel_error err;
  struct ArrowDeviceArray d;
  if (fixture_read(&fx, 4000, 2, 13) &&
      CHECK_OK(funnel_table_export_device(fx.t, &d, NULL, &err), &err)) {
    if (d.sync_event != NULL) CHECK_EQ_I64(cu.stream_wait_event(cu.stream, *(void **)d.sync_event, 0), 0);
    int c = 0;
    while (strcmp(FIELDS[c].name, "str") != 0) c++; /* three buffers */
    struct ArrowArray moved = *d.array.children[c];
    d.array.children[c]->release = NULL; /* moved, as the spec says */
    funnel_table_free(fx.t);
    fx.t = NULL;
    d.array.release(&d.array);
    check_child(&cu, &moved, &fx.src.cols[c], fx.src.rows);
    CHECK(funnel__live_now().allocs > live0.allocs);
    moved.release(&moved);
    CHECK(moved.release == NULL);
  }
  fixture_free(&fx);
  CHECK(same_live(funnel__live_now(), live0));
  consumer_close(&cu);
}

/* On cuda the event is the one recorded after the concat: until it
 * completes sync_event points to it; the cpu backend has none and waits. */
static void sync_event_is_the_reads_event(void) {
  struct fixture fx;
  struct funnel_error err;
  if (fixture_read(&fx, 200000, 50, 14)) {
    struct ArrowDeviceArray d;
    if (CHECK_OK(funnel_table_export_device(fx.t, &d, NULL, &err), &err)) {
      if (on_cuda()) {
        printf("  sync_event %s at export\n", d.sync_event ? "set" : "NULL (the read had completed)");
        CHECK(d.sync_event == NULL || *(void **)d.sync_event != NULL);
      } else {
        CHECK(d.sync_event == NULL);
        CHECK_EQ_I64(funnel_table_is_ready(fx.t), 1); /* the export waited */
      }
      d.array.release(&d.array);
    }
    /* once the read is done, nothing is pending */
    CHECK_OK(funnel_table_wait(fx.t, &err), &err);
    if (CHECK_OK(funnel_table_export_device(fx.t, &d, NULL, &err), &err)) {
      CHECK(d.sync_event == NULL);
      d.array.release(&d.array);
    }
  }
  fixture_free(&fx);
}

static void export_of_an_empty_table(void) {
  struct consumer_cuda cu = {0};
  if (on_cuda() && !consumer_open(&cu)) return;
  struct fixture fx;
  struct funnel_error err;
  if (fixture_read(&fx, 0, 1, 15)) {
    struct ArrowDeviceArray d;
    struct ArrowSchema s;
    if (CHECK_OK(funnel_table_export_device(fx.t, &d, &s, &err), &err)) {
      check_schema(&s);
      CHECK_EQ_I64(d.array.length, 0);
      for (int c = 0; c < N_FIELDS; c++) CHECK_EQ_I64(d.array.children[c]->length, 0);
      s.release(&s);
      d.array.release(&d.array);
    }
  }
  fixture_free(&fx);
  consumer_close(&cu);
}

static void export_rejects_null_arguments(void) {
  struct funnel_error err;
  struct ArrowDeviceArray d;
  CHECK_STATUS(funnel_table_export_device(NULL, &d, NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT, &err);
  struct fixture fx;
  if (fixture_read(&fx, 10, 1, 16))
    CHECK_STATUS(funnel_table_export_device(fx.t, NULL, NULL, &err), FUNNEL_ERR_INVALID_ARGUMENT,
                 &err);
  fixture_free(&fx);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(export_every_type_as_a_consumer_reads_it),
      CHECK_TEST(export_outlives_table_and_device),
      CHECK_TEST(moved_child_outlives_its_parent),
      CHECK_TEST(sync_event_is_the_reads_event),
      CHECK_TEST(export_of_an_empty_table),
      CHECK_TEST(export_rejects_null_arguments),
  };
  return CHECK_MAIN(argc, argv, tests);
}
