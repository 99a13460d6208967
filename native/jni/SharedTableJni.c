/* JNI glue for dev.funnel.SharedTable. */
#include "jni_util.h"

#define SHARE(h) FUNNEL_JNI_PTR(struct funnel_share, h)

JNIEXPORT jbyteArray JNICALL Java_dev_funnel_SharedTable_descriptor(JNIEnv *env, jclass cls,
                                                                  jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "SharedTable")) return NULL;
  size_t len = 0;
  const void *bytes = funnel_share_descriptor(SHARE(h), &len);
  jbyteArray out = (*env)->NewByteArray(env, (jsize)len);
  if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, (jsize)len, bytes);
  return out;
}

JNIEXPORT jint JNICALL Java_dev_funnel_SharedTable_importers(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "SharedTable")) return 0;
  return funnel_share_importers(SHARE(h));
}

/* true: closed and freed; false: importers still hold it (withdrawn). */
JNIEXPORT jboolean JNICALL Java_dev_funnel_SharedTable_close(JNIEnv *env, jclass cls, jlong h,
                                                            jlong timeout_ms) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "SharedTable")) return JNI_FALSE;
  struct funnel_error error;
  const funnel_status st = funnel_share_close(SHARE(h), timeout_ms, &error);
  if (st == FUNNEL_ERR_IN_USE) return JNI_FALSE;
  if (st != FUNNEL_OK) funnel_jni_throw(env, &error);
  return st == FUNNEL_OK ? JNI_TRUE : JNI_FALSE;
}
