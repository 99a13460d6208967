/* JNI glue for dev.funnel.DeviceStream. */
#include "jni_util.h"

JNIEXPORT void JNICALL Java_dev_funnel_DeviceStream_nativeDestroy(JNIEnv *env, jclass cls, jlong id) {
  (void)cls;
  struct funnel_error error;
  if (funnel_stream_destroy((uintptr_t)id, &error) != FUNNEL_OK) funnel_jni_throw(env, &error);
}
