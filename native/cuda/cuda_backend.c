/* cuda_backend.c: the backend on the CUDA Driver API.
 *
 * The driver is loaded at run time (dlopen("libcuda.so.1"), every entry
 * point through cuGetProcAddress at the ABI version funnel was written
 * for), so libfunnel.so has no link-time CUDA dependency and loads on hosts
 * without a GPU. The device's primary context is used, so cudf, RMM and
 * other CUDA users in the same JVM share it; it is made current on entry to
 * every call (JVM threads carry none) and the caller's is restored on exit.
 * Nothing here synchronizes a device, a context or a stream except
 * event_wait, which is the caller's explicit wait. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "lz4dec.h"
#include "zstddec.h"
#include "dpath.h"
#include "tuning.h"

/* the kernels, a fatbin embedded by the build (fatbin.S) */
extern const unsigned char funnel__fatbin[];

/* CUDA version whose ABI each entry point is requested at */
#define ABI 12000

#define DRIVER_FUNCTIONS(X)                                                  \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet)       \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuCtxGetCurrent) X(cuCtxGetDevice) \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                 \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuGetErrorName) X(cuGetErrorString) \
  X(cuMemHostAlloc) X(cuMemFreeHost)             \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamWaitEvent) X(cuMemcpyHtoDAsync)                \
  X(cuMemcpyDtoHAsync) X(cuModuleLoadData) X(cuModuleUnload)               \
  X(cuModuleGetFunction) X(cuLaunchKernel) X(cuEventCreate) X(cuEventRecord) \
  X(cuEventQuery) X(cuEventSynchronize) X(cuEventDestroy) X(cuMemPoolCreate)  \
  X(cuMemPoolDestroy) X(cuMemPoolSetAttribute) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync) \
  X(cuMemPoolTrimTo) X(cuMemcpyDtoDAsync) X(cuEventElapsedTime) X(cuMemHostGetDevicePointer) \
  X(cuMemAlloc) X(cuMemFree) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle)      \
  X(cuIpcCloseMemHandle) X(cuIpcGetEventHandle) X(cuIpcOpenEventHandle) X(cuDeviceGetUuid) \
  X(cuDeviceCanAccessPeer)

struct cuda {
  void *lib;
#define DECLARE(name) __typeof__(&name) name;
  DRIVER_FUNCTIONS(DECLARE)
#undef DECLARE
  CUdevice device;
  CUcontext ctx;
  CUmodule module;
  CUmemoryPool mempool; /* funnel's own stream-ordered pool: no sync on free */
  CUfunction concat;
  CUfunction dpath[6]; /* by enum funnel__dp_stage; then the nested reads' (concat.cu) */
  CUfunction concat_var; /* FUNNEL_DP_STAGE_VAR */
  CUfunction lz4;      /* FUNNEL_DP_STAGE_LZ4 */
  CUfunction zstd;     /* FUNNEL_DP_STAGE_ZSTD */
  /* CUDA 13 drivers: many copies in one call (NULL on older drivers) */
  __typeof__(&cuMemcpyBatchAsync) cuMemcpyBatchAsync;
  int fatal; /* a sticky error was seen: the context is unusable */
  char device_name[128];
  int multiprocessors; /* its SMs, 0: unknown */
  /* the most ways of an LZ4 job of frames (FUNNEL_LZ4_WAYS in the
   * environment, 1 to FUNNEL_LZ4_WAYS_MAX, else the most) */
  int lz4_ways;
};

/* Turns a CUresult into a status naming the call. */
static int check(struct cuda *cu, CUresult r, const char *call, struct funnel_error *error) {
  if (r == CUDA_SUCCESS) return FUNNEL_OK;
  const char *name = NULL, *text = NULL;
  if (cu->cuGetErrorName) cu->cuGetErrorName(r, &name);
  if (cu->cuGetErrorString) cu->cuGetErrorString(r, &text);
  int code = FUNNEL_ERR_DEVICE;
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: code = FUNNEL_ERR_DEVICE_OUT_OF_MEMORY; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
      cu->fatal = 1;
      code = FUNNEL_ERR_FATAL;
      break;
    default: break;
  }
  return FUNNEL_ERR(error, code, "[%s] %s: %s%s", call, name ? name : "CUDA_ERROR_UNKNOWN",
                    text ? text : "unknown error",
                    code == FUNNEL_ERR_FATAL ? " (sticky: the CUDA context is unusable, restart "
                                               "the process)" : "");
}

#define CU(call, args) check(cu, cu->call args, #call, error)

/* Makes the primary context current for the duration of a call. */
static int enter(struct cuda *cu, struct funnel_error *error) {
  if (cu->fatal)
    return FUNNEL_ERR(error, FUNNEL_ERR_FATAL,
                      "cuda backend: an earlier sticky CUDA error left the context unusable");
  return CU(cuCtxPushCurrent, (cu->ctx));
}

static void leave(struct cuda *cu) {
  CUcontext popped;
  cu->cuCtxPopCurrent(&popped);
}

#define CUDA(be) ((struct cuda *)(be)->private_data)

/* Device memory comes from funnel's own stream-ordered pool: allocation
 * and free are enqueued on a stream, cost little once the pool is warm, and
 * never synchronize the device (cuMemFree does). */
static int cuda_alloc(struct funnel_backend *be, size_t size, void *stream, uint64_t *out,
                      struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUdeviceptr p = 0;
  CUresult r = cu->cuMemAllocFromPoolAsync(&p, size ? size : 1, cu->mempool, (CUstream)stream);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    /* memory the pool keeps but nobody uses may be what others need: give
     * it back to the device and try once more */
    cu->cuMemPoolTrimTo(cu->mempool, 0);
    r = cu->cuMemAllocFromPoolAsync(&p, size ? size : 1, cu->mempool, (CUstream)stream);
  }
  leave(cu);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE_OUT_OF_MEMORY,
                      "[cuMemAllocFromPoolAsync] CUDA_ERROR_OUT_OF_MEMORY: cannot allocate %zu "
                      "bytes of device memory", size);
  int st = check(cu, r, "cuMemAllocFromPoolAsync", error);
  if (st == FUNNEL_OK) *out = (uint64_t)p;
  return st;
}

static void cuda_free(struct funnel_backend *be, uint64_t ptr, void *stream) {
  struct cuda *cu = CUDA(be);
  if (enter(cu, NULL) != FUNNEL_OK) return;
  cu->cuMemFreeAsync((CUdeviceptr)ptr, (CUstream)stream);
  leave(cu);
}

static int cuda_host_alloc(struct funnel_backend *be, size_t size, void **out,
                           struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  /* mapped, so kernels can read it in place (FUNNEL_TRANSFER_DIRECT) */
  int st = CU(cuMemHostAlloc, (out, size ? size : 1,
                               CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  leave(cu);
  return st;
}

static void cuda_host_free(struct funnel_backend *be, void *ptr) {
  struct cuda *cu = CUDA(be);
  if (enter(cu, NULL) != FUNNEL_OK) return;
  cu->cuMemFreeHost(ptr);
  leave(cu);
}

static int cuda_host_device_address(struct funnel_backend *be, void *host, uint64_t *out,
                                    struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUdeviceptr d = 0;
  int st = CU(cuMemHostGetDevicePointer, (&d, host, 0));
  leave(cu);
  if (st == FUNNEL_OK) *out = (uint64_t)d;
  return st;
}

static int cuda_stream_create(struct funnel_backend *be, void **out, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUstream s = NULL;
  int st = CU(cuStreamCreate, (&s, CU_STREAM_NON_BLOCKING));
  leave(cu);
  if (st == FUNNEL_OK) *out = s;
  return st;
}

static void cuda_stream_destroy(struct funnel_backend *be, void *stream) {
  struct cuda *cu = CUDA(be);
  if (enter(cu, NULL) != FUNNEL_OK) return;
  cu->cuStreamDestroy((CUstream)stream); /* queued work still completes */
  leave(cu);
}

static int cuda_stream_wait(struct funnel_backend *be, void *stream, void *event,
                            struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  int st = CU(cuStreamWaitEvent, ((CUstream)stream, (CUevent)event, 0));
  leave(cu);
  return st;
}

static int cuda_copy_h2d(struct funnel_backend *be, uint64_t dst, const void *src, size_t size,
                         void *stream, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  int st = CU(cuMemcpyHtoDAsync, ((CUdeviceptr)dst, src, size, (CUstream)stream));
  leave(cu);
  return st;
}

static int cuda_copy_d2h(struct funnel_backend *be, void *dst, uint64_t src, size_t size,
                         void *stream, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  int st = CU(cuMemcpyDtoHAsync, (dst, (CUdeviceptr)src, size, (CUstream)stream));
  leave(cu);
  return st;
}

static int cuda_copy_d2d(struct funnel_backend *be, uint64_t dst, uint64_t src, size_t size,
                         void *stream, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  int st = CU(cuMemcpyDtoDAsync, ((CUdeviceptr)dst, (CUdeviceptr)src, size, (CUstream)stream));
  leave(cu);
  return st;
}

/* One cuMemcpyBatchAsync: every source is read in stream order, like a
 * cuMemcpyHtoDAsync's. */
static int cuda_copy_h2d_batch(struct funnel_backend *be, const uint64_t *dst,
                               const void *const *src, const size_t *size, size_t n, void *stream,
                               struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUmemcpyAttributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_HOST;
  attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
  attr.dstLocHint.id = (int)cu->device;
  size_t attr_index = 0;
  int st = CU(cuMemcpyBatchAsync, ((CUdeviceptr *)dst, (CUdeviceptr *)(uintptr_t)src, (size_t *)size,
                                   n, &attr, &attr_index, 1, (CUstream)stream));
  leave(cu);
  return st;
}

static int cuda_launch(struct funnel_backend *be, uint64_t segments, int64_t count, void *stream,
                       struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUdeviceptr segs = (CUdeviceptr)segments;
  void *args[] = {&segs, &count};
  const unsigned blocks =
      count < FUNNEL__CONCAT_MAX_BLOCKS ? (unsigned)count : FUNNEL__CONCAT_MAX_BLOCKS;
  int st = CU(cuLaunchKernel, (cu->concat, blocks ? blocks : 1, 1, 1, FUNNEL__CONCAT_THREADS, 1,
                               1, 0, (CUstream)stream, args, NULL));
  leave(cu);
  return st;
}

/* The device path's grids (dpath.h): m lanes a partition for the parse
 * (funnel__dp_parse_lanes) of partitions [first, first + n), a block a
 * tile of an array for the scan, m lanes a piece for the concat, whose bit
 * words stride over its grid. */
static int cuda_launch_dpath(struct funnel_backend *be, int stage, uint64_t args, int64_t first,
                             int64_t n, int64_t m, void *stream, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  if (stage == FUNNEL_DP_STAGE_ZSTD) {
    /* a warp a block, a block a job (its tables fill a block's shared
     * memory); the blocks stride over the jobs */
    if (n <= 0) return FUNNEL_OK;
    int64_t gx = n < FUNNEL__CONCAT_MAX_BLOCKS ? n : FUNNEL__CONCAT_MAX_BLOCKS;
    FUNNEL_RETURN_NOT_OK(enter(cu, error));
    CUdeviceptr a = (CUdeviceptr)args, gate = (CUdeviceptr)first;
    uint64_t base = (uint64_t)m;
    void *params[] = {&a, &n, &base, &gate};
    int st = CU(cuLaunchKernel, (cu->zstd, (unsigned)gx, 1, 1, 32, 1, 1, 0, (CUstream)stream,
                                 params, NULL));
    leave(cu);
    return st;
  }
  if (stage == FUNNEL_DP_STAGE_LZ4 || stage == FUNNEL_DP_STAGE_LZ4_WAYS) {
    /* a job a block of two warps: the jobs spread evenly over the SMs (a
     * read has a few thousand, too few to fill the device); with
     * FUNNEL_DP_STAGE_LZ4_WAYS, a job of frames in as many ways (lz4dec.h,
     * funnel__lz4_frames_way) as make FUNNEL__LZ4_WAYS_WAVES of the
     * device's blocks at once, at most cu->lz4_ways: the other ways of a
     * job that does not split end at once */
    if (n <= 0) return FUNNEL_OK;
    const int64_t at_once = (int64_t)(cu->multiprocessors > 0 ? cu->multiprocessors : 1) *
                            FUNNEL_LZ4_PAIR_BLOCKS * FUNNEL__LZ4_WAYS_WAVES;
    int64_t w = stage == FUNNEL_DP_STAGE_LZ4_WAYS ? (at_once + n - 1) / n : 1;
    if (w > cu->lz4_ways) w = cu->lz4_ways;
    unsigned ways = (unsigned)w;
    int64_t gx = n * ways;
    if (gx > FUNNEL__CONCAT_MAX_BLOCKS) gx = FUNNEL__CONCAT_MAX_BLOCKS; /* the warps stride */
    FUNNEL_RETURN_NOT_OK(enter(cu, error));
    CUdeviceptr a = (CUdeviceptr)args, gate = (CUdeviceptr)first;
    uint64_t base = (uint64_t)m;
    void *params[] = {&a, &n, &base, &gate, &ways};
    int st = CU(cuLaunchKernel, (cu->lz4, (unsigned)gx, 1, 1, 64, 1, 1, 0, (CUstream)stream,
                                 params, NULL));
    leave(cu);
    return st;
  }
  const int kernel = (stage & FUNNEL_DP_STAGE_NESTED) ? 3 : 0; /* the nested read's kernels */
  const bool var = (stage & FUNNEL_DP_STAGE_VAR) != 0;
  int64_t gated = (stage & FUNNEL_DP_STAGE_GATED) != 0;
  stage &= ~(FUNNEL_DP_STAGE_NESTED | FUNNEL_DP_STAGE_VAR | FUNNEL_DP_STAGE_GATED);
  if (stage < 0 || stage > FUNNEL_DP_CONCAT)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT, "cuda backend: no device-path stage %d",
                      stage);
  if (n <= 0) return FUNNEL_OK;
  const int64_t threads = FUNNEL__DPATH_THREADS;
  int64_t gx = 1, gy = 1;
  switch (stage) {
    case FUNNEL_DP_PARSE: /* m lanes a partition: no striding */
      if (m < 1 || m > 32 || (m & (m - 1)) != 0 || first < 0 || first % (threads / m) != 0)
        return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                          "cuda backend: a parse of %lld lanes a partition from partition %lld",
                          (long long)m, (long long)first);
      gx = (n * m + threads - 1) / threads;
      break;
    case FUNNEL_DP_SCAN: /* a block a tile of an array */
      gx = (m + threads - 1) / threads;
      gy = n;
      break;
    default: /* the concat: m lanes a piece (in one block); the bits stride over the grid */
      if (m < 1 || m > threads || (m & (m - 1)) != 0) m = 32;
      gx = (n * m + threads - 1) / threads;
      if (gx > FUNNEL__CONCAT_MAX_BLOCKS) gx = FUNNEL__CONCAT_MAX_BLOCKS;
      break;
  }
  if (gx < 1) gx = 1;
  if (gx > INT32_MAX || gy > FUNNEL__CONCAT_MAX_BLOCKS)
    return FUNNEL_ERR(error, FUNNEL_ERR_LIMIT, "cuda backend: a device-path grid of %lld x %lld blocks",
                      (long long)gx, (long long)gy);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUdeviceptr a = (CUdeviceptr)args;
  void *params[] = {&a, &n, &m};
  void *scan_params[] = {&a, &n, &m, &gated};
  void *parse_params[] = {&a, &first, &n, &m, &gated};
  const CUfunction f =
      var && stage == FUNNEL_DP_CONCAT && kernel == 0 ? cu->concat_var : cu->dpath[kernel + stage];
  int st = CU(cuLaunchKernel, (f, (unsigned)gx, (unsigned)gy, 1, (unsigned)threads,
                               1, 1, 0, (CUstream)stream,
                               stage == FUNNEL_DP_PARSE  ? parse_params
                               : stage == FUNNEL_DP_SCAN ? scan_params
                                                         : params,
                               NULL));
  leave(cu);
  return st;
}

static int cuda_event_create(struct funnel_backend *be, void **out, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUevent e = NULL;
  int st = CU(cuEventCreate, (&e, CU_EVENT_DISABLE_TIMING));
  leave(cu);
  if (st == FUNNEL_OK) *out = e;
  return st;
}

static int cuda_event_create_timed(struct funnel_backend *be, void **out,
                                   struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUevent e = NULL;
  int st = CU(cuEventCreate, (&e, CU_EVENT_DEFAULT));
  leave(cu);
  if (st == FUNNEL_OK) *out = e;
  return st;
}

static int cuda_event_elapsed(struct funnel_backend *be, void *start, void *end, int64_t *ns,
                              struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  float ms = 0;
  int st = CU(cuEventElapsedTime, (&ms, (CUevent)start, (CUevent)end));
  leave(cu);
  if (st == FUNNEL_OK) *ns = (int64_t)((double)ms * 1e6);
  return st;
}

static int cuda_event_record(struct funnel_backend *be, void *event, void *stream,
                             struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  int st = CU(cuEventRecord, ((CUevent)event, (CUstream)stream));
  leave(cu);
  return st;
}

static int cuda_event_query(struct funnel_backend *be, void *event, int *done,
                            struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUresult r = cu->cuEventQuery((CUevent)event);
  leave(cu);
  *done = r == CUDA_SUCCESS;
  return r == CUDA_ERROR_NOT_READY ? FUNNEL_OK : check(cu, r, "cuEventQuery", error);
}

static int cuda_event_wait(struct funnel_backend *be, void *event, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  int st = CU(cuEventSynchronize, ((CUevent)event));
  leave(cu);
  return st;
}

static void cuda_event_destroy(struct funnel_backend *be, void *event) {
  struct cuda *cu = CUDA(be);
  if (enter(cu, NULL) != FUNNEL_OK) return;
  cu->cuEventDestroy((CUevent)event);
  leave(cu);
}

/* Sharing: CUDA IPC works on cuMemAlloc allocations (not on those of a
 * stream-ordered pool without handle types), so shared memory is a plain
 * allocation, its IPC handle the handle. */
static int cuda_shared_alloc(struct funnel_backend *be, size_t size, uint64_t *out,
                             struct funnel__ipc_handle *handle, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUdeviceptr p = 0;
  CUipcMemHandle h;
  int st = CU(cuMemAlloc, (&p, size ? size : 1));
  if (st == FUNNEL_OK) {
    st = CU(cuIpcGetMemHandle, (&h, p));
    if (st != FUNNEL_OK) cu->cuMemFree(p);
  }
  leave(cu);
  if (st != FUNNEL_OK) return st;
  _Static_assert(sizeof(h) == sizeof(handle->bytes), "CUipcMemHandle is 64 bytes");
  memcpy(handle->bytes, &h, sizeof(h));
  *out = (uint64_t)p;
  return FUNNEL_OK;
}

static void cuda_shared_free(struct funnel_backend *be, uint64_t ptr, size_t size,
                             const struct funnel__ipc_handle *handle) {
  (void)size;
  (void)handle;
  struct cuda *cu = CUDA(be);
  if (enter(cu, NULL) != FUNNEL_OK) return;
  cu->cuMemFree((CUdeviceptr)ptr);
  leave(cu);
}

static int cuda_shared_open(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                            size_t size, uint64_t *out, struct funnel_error *error) {
  (void)size;
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUipcMemHandle h;
  memcpy(&h, handle->bytes, sizeof(h));
  CUdeviceptr p = 0;
  int st = CU(cuIpcOpenMemHandle, (&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  leave(cu);
  if (st == FUNNEL_OK) *out = (uint64_t)p;
  return st;
}

static void cuda_shared_close(struct funnel_backend *be, uint64_t ptr, size_t size) {
  (void)size;
  struct cuda *cu = CUDA(be);
  if (enter(cu, NULL) != FUNNEL_OK) return;
  cu->cuIpcCloseMemHandle((CUdeviceptr)ptr);
  leave(cu);
}

static int cuda_ipc_event_create(struct funnel_backend *be, void **out,
                                 struct funnel__ipc_handle *handle, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUevent e = NULL;
  CUipcEventHandle h;
  int st = CU(cuEventCreate, (&e, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS));
  if (st == FUNNEL_OK) {
    st = CU(cuIpcGetEventHandle, (&h, e));
    if (st != FUNNEL_OK) cu->cuEventDestroy(e);
  }
  leave(cu);
  if (st != FUNNEL_OK) return st;
  _Static_assert(sizeof(h) == sizeof(handle->bytes), "CUipcEventHandle is 64 bytes");
  memcpy(handle->bytes, &h, sizeof(h));
  *out = e;
  return FUNNEL_OK;
}

static int cuda_ipc_event_open(struct funnel_backend *be, const struct funnel__ipc_handle *handle,
                               void **out, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  CUipcEventHandle h;
  memcpy(&h, handle->bytes, sizeof(h));
  CUevent e = NULL;
  int st = CU(cuIpcOpenEventHandle, (&e, h));
  leave(cu);
  if (st == FUNNEL_OK) *out = e;
  return st;
}

static int cuda_device_uuid(struct funnel_backend *be, uint8_t uuid[16],
                            struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  CUuuid u;
  FUNNEL_RETURN_NOT_OK(CU(cuDeviceGetUuid, (&u, cu->device)));
  memcpy(uuid, u.bytes, 16);
  return FUNNEL_OK;
}

static int cuda_peer(struct funnel_backend *be, const uint8_t uuid[16], int *ordinal,
                     int *can_access, struct funnel_error *error) {
  struct cuda *cu = CUDA(be);
  int count = 0;
  *ordinal = -1;
  *can_access = 0;
  FUNNEL_RETURN_NOT_OK(CU(cuDeviceGetCount, (&count)));
  for (int i = 0; i < count; i++) {
    CUdevice d;
    CUuuid u;
    FUNNEL_RETURN_NOT_OK(CU(cuDeviceGet, (&d, i)));
    FUNNEL_RETURN_NOT_OK(CU(cuDeviceGetUuid, (&u, d)));
    if (memcmp(u.bytes, uuid, 16) != 0) continue;
    *ordinal = i;
    return d == cu->device ? FUNNEL_OK : CU(cuDeviceCanAccessPeer, (can_access, cu->device, d));
  }
  return FUNNEL_OK;
}

static void cuda_release(struct funnel_backend *be) {
  struct cuda *cu = CUDA(be);
  if (cu == NULL) return;
  if (cu->module != NULL && enter(cu, NULL) == FUNNEL_OK) {
    cu->cuModuleUnload(cu->module);
    if (cu->mempool != NULL) cu->cuMemPoolDestroy(cu->mempool);
    leave(cu);
  }
  if (cu->ctx != NULL) cu->cuDevicePrimaryCtxRelease(cu->device);
  dlclose(cu->lib);
  free(cu);
  be->private_data = NULL;
  be->release = NULL;
}

static int load_driver(struct cuda *cu, struct funnel_error *error) {
  cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cu->lib == NULL) {
    const char *why = dlerror();
    return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE, "cuda backend: no CUDA driver found (%s)",
                      why ? why : "libcuda.so.1 not found");
  }
  typedef CUresult (*get_proc_t)(const char *, void **, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult *);
  get_proc_t get_proc = NULL;
  *(void **)&get_proc = dlsym(cu->lib, "cuGetProcAddress_v2");
  if (get_proc == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE,
                      "cuda backend: the CUDA driver is older than 12.0 (no cuGetProcAddress_v2)");
#define RESOLVE(name)                                                                    \
  {                                                                                      \
    CUdriverProcAddressQueryResult found;                                                \
    void *fn = NULL;                                                                     \
    if (get_proc(#name, &fn, ABI, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || \
        fn == NULL)                                                                      \
      return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE,                                     \
                        "cuda backend: the CUDA driver has no %s", #name);               \
    *(void **)&cu->name = fn;                                                            \
  }
  DRIVER_FUNCTIONS(RESOLVE)
#undef RESOLVE
  {
    CUdriverProcAddressQueryResult found;
    void *fn = NULL;
    if (get_proc("cuMemcpyBatchAsync", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
            CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS)
      *(void **)&cu->cuMemcpyBatchAsync = fn;
  }
  return FUNNEL_OK;
}

/* ordinal: a device ordinal, or -1 for the device of the calling thread's
 * current context (a plugin's cudaSetDevice), else device 0 */
static int open_device(struct cuda *cu, int ordinal, struct funnel_error *error) {
  CUresult r = cu->cuInit(0);
  int count = 0;
  if (r == CUDA_SUCCESS) r = cu->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    const char *name = NULL;
    if (r != CUDA_SUCCESS) cu->cuGetErrorName(r, &name);
    return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE, "cuda backend: no CUDA device found (%s)",
                      r != CUDA_SUCCESS && name ? name : "0 devices");
  }
  if (ordinal >= count)
    return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE,
                      "cuda backend: no CUDA device %d: this process sees %d (ordinals 0 to %d, "
                      "after CUDA_VISIBLE_DEVICES)",
                      ordinal, count, count - 1);
  if (ordinal < 0) { /* asked only when there is a context: no failing call */
    CUcontext ctx = NULL;
    CUdevice current;
    ordinal = cu->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != NULL &&
                      cu->cuCtxGetDevice(&current) == CUDA_SUCCESS
                  ? (int)current
                  : 0;
  }
  FUNNEL_RETURN_NOT_OK(CU(cuDeviceGet, (&cu->device, ordinal)));
  cu->cuDeviceGetName(cu->device_name, (int)sizeof(cu->device_name), cu->device);
  const char *ways_env = getenv("FUNNEL_LZ4_WAYS");
  const int ways = ways_env != NULL ? atoi(ways_env) : 0;
  cu->lz4_ways = ways >= 1 && ways <= FUNNEL_LZ4_WAYS_MAX ? ways : FUNNEL_LZ4_WAYS_MAX;
  /* for the decoder's estimate (parse.c) and its ways; unknown (0) is allowed */
  if (cu->cuDeviceGetAttribute(&cu->multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                               cu->device) != CUDA_SUCCESS)
    cu->multiprocessors = 0;
  FUNNEL_RETURN_NOT_OK(CU(cuDevicePrimaryCtxRetain, (&cu->ctx, cu->device)));
  FUNNEL_RETURN_NOT_OK(enter(cu, error));
  int st = CU(cuModuleLoadData, (&cu->module, funnel__fatbin));
  if (st == FUNNEL_OK) st = CU(cuModuleGetFunction, (&cu->concat, cu->module, "funnel_concat"));
  static const char *const dpath_kernels[6] = {"funnel_dp_parse",        "funnel_dp_scan",
                                               "funnel_dp_concat",       "funnel_dp_parse_nested",
                                               "funnel_dp_scan_nested",  "funnel_dp_concat_nested"};
  for (int k = 0; k < 6 && st == FUNNEL_OK; k++)
    st = CU(cuModuleGetFunction, (&cu->dpath[k], cu->module, dpath_kernels[k]));
  if (st == FUNNEL_OK) st = CU(cuModuleGetFunction, (&cu->lz4, cu->module, "funnel_lz4_decode"));
  if (st == FUNNEL_OK) st = CU(cuModuleGetFunction, (&cu->zstd, cu->module, "funnel_zstd_decode"));
  if (st == FUNNEL_OK)
    st = CU(cuModuleGetFunction, (&cu->concat_var, cu->module, "funnel_dp_concat_var"));
  if (st == FUNNEL_OK) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = (int)cu->device;
    st = CU(cuMemPoolCreate, (&cu->mempool, &props));
  }
  if (st == FUNNEL_OK) {
    /* keep freed memory in the pool rather than giving it back at every
     * synchronization: reads come back for it */
    cuuint64_t keep = UINT64_MAX;
    st = CU(cuMemPoolSetAttribute, (cu->mempool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  }
  leave(cu);
  return st;
}

/* Undoes what load_driver and open_device did, after a failure. */
static void unload(struct cuda *cu) {
  if (cu->mempool != NULL && enter(cu, NULL) == FUNNEL_OK) {
    cu->cuMemPoolDestroy(cu->mempool);
    leave(cu);
  }
  if (cu->module != NULL && enter(cu, NULL) == FUNNEL_OK) {
    cu->cuModuleUnload(cu->module);
    leave(cu);
  }
  if (cu->ctx != NULL) cu->cuDevicePrimaryCtxRelease(cu->device);
  if (cu->lib != NULL) dlclose(cu->lib);
  free(cu);
}

int funnel__cuda_backend_init(struct funnel_backend *be, struct funnel_error *error) {
  return funnel__cuda_backend_open(be, -1, error);
}

int funnel__cuda_backend_open(struct funnel_backend *be, int ordinal, struct funnel_error *error) {
  struct cuda *cu = calloc(1, sizeof(*cu));
  if (cu == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  memset(be, 0, sizeof(*be));
  be->private_data = cu;
  int st = load_driver(cu, error);
  if (st == FUNNEL_OK) st = open_device(cu, ordinal, error);
  if (st != FUNNEL_OK) {
    unload(cu);
    be->private_data = NULL;
    return st;
  }
  be->version = FUNNEL_BACKEND_VERSION;
  be->name = "cuda";
  be->arrow_device_type = ARROW_DEVICE_CUDA;
  be->default_pinned_pool_bytes = FUNNEL__POOL_BYTES_CUDA;
  be->ipc_backend_id = FUNNEL__IPC_BACKEND_CUDA;
  be->native_streams = 1;
  be->multiprocessors = cu->multiprocessors;
  be->stage_pageable = 1;
  be->alloc = cuda_alloc;
  be->free = cuda_free;
  be->host_alloc = cuda_host_alloc;
  be->host_free = cuda_host_free;
  be->host_device_address = cuda_host_device_address;
  be->stream_create = cuda_stream_create;
  be->stream_destroy = cuda_stream_destroy;
  be->stream_wait = cuda_stream_wait;
  be->copy_h2d_async = cuda_copy_h2d;
  be->copy_d2h_async = cuda_copy_d2h;
  be->copy_d2d_async = cuda_copy_d2d;
  if (cu->cuMemcpyBatchAsync != NULL) be->copy_h2d_batch_async = cuda_copy_h2d_batch;
  be->launch_concat = cuda_launch;
  be->launch_dpath = cuda_launch_dpath;
  be->event_create = cuda_event_create;
  be->event_create_timed = cuda_event_create_timed;
  be->event_elapsed_ns = cuda_event_elapsed;
  be->event_record = cuda_event_record;
  be->event_query = cuda_event_query;
  be->event_wait = cuda_event_wait;
  be->event_destroy = cuda_event_destroy;
  be->shared_alloc = cuda_shared_alloc;
  be->shared_free = cuda_shared_free;
  be->shared_open = cuda_shared_open;
  be->shared_close = cuda_shared_close;
  be->ipc_event_create = cuda_ipc_event_create;
  be->ipc_event_open = cuda_ipc_event_open;
  be->device_uuid = cuda_device_uuid;
  be->peer = cuda_peer;
  be->device_id = (int64_t)cu->device;
  be->release = cuda_release;
  return FUNNEL_OK;
}
