/* cuda_probe.c: the cuda backend's entry point until the backend itself
 * lands (issue "The cuda backend"). It looks for the driver the way the
 * backend will (dlopen at run time, no link-time CUDA dependency), so
 * "auto" and "cuda" already behave as they will on a host without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <string.h>

#include "backend.h"

int funnel__cuda_backend_init(struct funnel_backend *be, struct funnel_error *error) {
  (void)be;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *why = dlerror();
    return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE,
                      "cuda backend: no CUDA driver found (%s)", why ? why : "libcuda.so.1 not found");
  }
  dlclose(lib);
  return FUNNEL_ERR(error, FUNNEL_ERR_NO_DEVICE,
                    "cuda backend: a CUDA driver is present but this build of funnel has no "
                    "cuda backend yet");
}
