/* cuda_probe.c: the cuda backend's entry point in a build without nvcc
 * (FUNNEL_WITH_CUDA off or not found). It looks for the driver the way the
 * backend does, so "auto" and "cuda" say what is missing. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>

#include "backend.h"

int funnel__cuda_backend_init(struct funnel_backend *be, struct funnel_error *error) {
  return funnel__cuda_backend_open(be, -1, error);
}

int funnel__cuda_backend_open(struct funnel_backend *be, int ordinal, struct funnel_error *error) {
  (void)be;
  (void)ordinal;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *why = dlerror();
    return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE, "cuda backend: no CUDA driver found (%s)",
                      why ? why : "libcuda.so.1 not found");
  }
  dlclose(lib);
  return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE,
                    "cuda backend: a CUDA driver is present but this build of funnel has no "
                    "cuda backend (built without nvcc)");
}
