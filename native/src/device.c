/* device.c: opening and closing a device, and its configuration (funnel.h,
 * "device"); the streams callers make are stream.c's, the pinned blocks
 * they allocate pinned.c's. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

int funnel__cuda_ordinal(const char *kind) {
  if (strcmp(kind, "cuda") == 0) return -1;
  if (strncmp(kind, "cuda:", 5) != 0 || kind[5] == '\0') return -2;
  long n = 0;
  for (const char *c = kind + 5; *c; c++) {
    if (*c < '0' || *c > '9' || n > (INT_MAX - 9) / 10) return -2;
    n = 10 * n + (*c - '0');
  }
  return (int)n;
}

/* Opens the backend `kind` asks for ("auto": cuda when it opens, else cpu;
 * "cuda:N": the cuda device of ordinal N). */
static int open_backend(const char *kind, struct funnel_backend *be, struct funnel_error *error) {
  const int ordinal = funnel__cuda_ordinal(kind);
  const bool want_cuda = ordinal >= -1, want_cpu = strcmp(kind, "cpu") == 0;
  if (!want_cuda && !want_cpu && strcmp(kind, "auto") != 0)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "unknown backend '%s': expected auto, cpu, cuda or cuda:N (N a device "
                      "ordinal)",
                      kind);
  if (!want_cpu) {
    struct funnel_error probe;
    const int st = funnel__cuda_backend_open(be, want_cuda ? ordinal : -1, &probe);
    if (st == FUNNEL_OK || want_cuda) {
      if (st != FUNNEL_OK && error != NULL) *error = probe;
      return st;
    }
  }
  return funnel__cpu_backend_init(be, error);
}

static int64_t env_int(const char *name, int64_t otherwise) {
  const char *v = getenv(name);
  return v != NULL && *v ? strtoll(v, NULL, 10) : otherwise;
}

static void read_config(const struct funnel_backend *be, struct funnel__config *c) {
  const int64_t pool = env_int("FUNNEL_PINNED_POOL_BYTES", be->default_pinned_pool_bytes);
  const int64_t chunk = env_int("FUNNEL_SEGMENT_CHUNK_BYTES", 0);
  const char *batch = getenv("FUNNEL_BATCH_COPY");
  c->pinned_pool_bytes = pool > 0 ? pool : 0;
  c->stage_pageable = env_int("FUNNEL_STAGE_PAGEABLE", be->stage_pageable) != 0;
  c->direct_max_bytes = env_int("FUNNEL_DIRECT_MAX_BYTES", FUNNEL__DIRECT_MAX_DEFAULT);
  c->segment_chunk_bytes = chunk <= 0 ? FUNNEL__SEGMENT_CHUNK_BYTES
                           : chunk < FUNNEL__SEGMENT_CHUNK_MAX ? chunk
                                                               : FUNNEL__SEGMENT_CHUNK_MAX;
  c->batch_copy = batch != NULL && strcmp(batch, "1") == 0;
  c->overlap_min_bytes = env_int("FUNNEL_OVERLAP_MIN_BYTES", FUNNEL__OVERLAP_MIN_BYTES);
  c->overlap_min_parts = env_int("FUNNEL_OVERLAP_MIN_PARTS", FUNNEL__OVERLAP_MIN_PARTS);
  c->zoverlap_min_bytes = env_int("FUNNEL_ZOVERLAP_MIN_BYTES", FUNNEL__ZOVERLAP_MIN_BYTES);
  const int64_t zparts = env_int("FUNNEL_ZOVERLAP_PARTS", FUNNEL__ZOVERLAP_PARTS);
  c->zoverlap_parts = zparts < 2                            ? 2
                      : zparts > FUNNEL__ZOVERLAP_MAX_PARTS ? FUNNEL__ZOVERLAP_MAX_PARTS
                                                            : (int)zparts;
  c->lz4_large_device = env_int("FUNNEL_LZ4_LARGE_DEVICE", 1) != 0;
  const int64_t task = env_int("FUNNEL_STAGE_TASK_BYTES", FUNNEL__STAGE_TASK);
  c->stage_task_bytes = task > 0 ? task : FUNNEL__STAGE_TASK;
  const int64_t round = env_int("FUNNEL_STAGE_ROUND_BYTES", FUNNEL__STAGE_ROUND_MIN);
  c->stage_round_bytes = round > 0 ? round : FUNNEL__STAGE_ROUND_MIN;
  const char *parse = getenv("FUNNEL_PARSE");
  c->parse = parse == NULL ? FUNNEL_PARSE_AUTO
             : strcmp(parse, "host") == 0 ? FUNNEL_PARSE_HOST
             : strcmp(parse, "device") == 0 ? FUNNEL_PARSE_DEVICE
                                            : FUNNEL_PARSE_AUTO;
  const char *decode = getenv("FUNNEL_DECODE");
  c->decode = decode == NULL ? FUNNEL_DECODE_AUTO
              : strcmp(decode, "host") == 0 ? FUNNEL_DECODE_HOST
              : strcmp(decode, "device") == 0 ? FUNNEL_DECODE_DEVICE
                                              : FUNNEL_DECODE_AUTO;
}

funnel_status funnel_device_open(const char *kind, struct funnel_device **out,
                                 struct funnel_error *error) {
  return funnel_device_open_with_allocator(kind, NULL, out, error);
}

funnel_status funnel_device_open_with_allocator(const char *kind,
                                                const struct funnel_allocator *allocator,
                                                struct funnel_device **out,
                                                struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(kind != NULL && out != NULL, "funnel_device_open: kind and out must not be NULL");
  FUNNEL_CHECK_ARG(allocator == NULL || (allocator->allocate != NULL && allocator->deallocate != NULL),
                   "funnel_device_open_with_allocator: allocate and deallocate must not be NULL");
  struct funnel_device *dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  int st = open_backend(kind, &dev->be, error);
  if (st != FUNNEL_OK) {
    free(dev);
    return st;
  }
  st = funnel__backend_check(&dev->be, error);
  if (st == FUNNEL_OK && allocator != NULL) st = funnel__dev_use_allocator(&dev->be, allocator, error);
  if (st == FUNNEL_OK) st = funnel__dev_pool_events(&dev->be, error);
  if (st == FUNNEL_OK) st = funnel__dev_stream_create(&dev->be, &dev->stream, error);
  if (st != FUNNEL_OK) {
    funnel__dev_release(&dev->be);
    free(dev);
    return st;
  }
  read_config(&dev->be, &dev->config);
  funnel__pool_init(&dev->pool, &dev->be, dev->config.pinned_pool_bytes);
  atomic_init(&dev->refs, 1);
  *out = dev;
  return FUNNEL_OK;
}

const char *funnel_device_backend(const struct funnel_device *dev) {
  return dev ? dev->be.name : "none";
}

struct funnel_device *funnel__device_ref(struct funnel_device *dev) {
  atomic_fetch_add(&dev->refs, 1);
  return dev;
}

void funnel__device_unref(struct funnel_device *dev) {
  if (dev == NULL || atomic_fetch_sub(&dev->refs, 1) != 1) return;
  funnel__dev_stream_destroy(&dev->be, dev->stream);
  funnel__pool_release(&dev->pool);
  funnel__dev_release(&dev->be);
  free(dev);
}

void funnel_device_close(struct funnel_device *dev) { funnel__device_unref(dev); }
