/* test_misuse.c: what funnel does when a caller breaks the rules of
 * funnel.h, or races calls that funnel.h says may race: a clear error, or
 * a wait, never a crash or a free under the device. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "funnel.h"

/* A backend filled for another layout of the vtable is refused, naming the
 * backend and both versions. */
static void backend_of_another_vtable_version_is_refused(void) {
  struct funnel_backend be;
  struct funnel_error err;
  if (!CHECK_OK(funnel__cpu_backend_init(&be, &err), &err)) return;
  CHECK_OK(funnel__backend_check(&be, &err), &err);
  be.version = FUNNEL_BACKEND_VERSION + 40;
  CHECK_STATUS(funnel__backend_check(&be, &err), FUNNEL_ERR_UNSUPPORTED, &err);
  char want[128];
  snprintf(want, sizeof(want), "backend cpu fills vtable version %d; this funnel knows version %d",
           FUNNEL_BACKEND_VERSION + 40, FUNNEL_BACKEND_VERSION);
  CHECK_EQ_STR(err.message, want);
  funnel__dev_release(&be);
}

static void direct_max_bytes_option_is_checked(void) {
  struct funnel_device *dev = NULL;
  struct funnel_reader *rd = NULL;
  struct funnel_error err;
  if (!CHECK_OK(check_device_open(&dev, &err), &err)) return;
  if (CHECK_OK(funnel_reader_create(dev, NULL, 0, &rd, &err), &err)) {
    CHECK_STATUS(funnel_reader_set_option(rd, FUNNEL_OPTION_DIRECT_MAX_BYTES, -1, &err),
                 FUNNEL_ERR_INVALID_ARGUMENT, &err);
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DIRECT_MAX_BYTES, 0, &err), &err);
    CHECK_OK(funnel_reader_set_option(rd, FUNNEL_OPTION_DIRECT_MAX_BYTES, INT64_MAX, &err), &err);
  }
  funnel_reader_free(rd);
  funnel_device_close(dev);
}

int main(int argc, char **argv) {
  static const struct check_test tests[] = {
      CHECK_TEST(backend_of_another_vtable_version_is_refused),
      CHECK_TEST(direct_max_bytes_option_is_checked),
  };
  return CHECK_MAIN(argc, argv, tests);
}
