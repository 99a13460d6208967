/* JNI glue for dev.funnel.FunnelDevice. */
#include "jni_util.h"

/* allocator: the address of a caller's struct funnel_allocator, or 0 */
JNIEXPORT jlong JNICALL Java_dev_funnel_FunnelDevice_nativeOpen(JNIEnv *env, jclass cls, jstring kind,
                                                               jlong allocator) {
  (void)cls;
  const char *k = (*env)->GetStringUTFChars(env, kind, NULL);
  if (k == NULL) return 0;
  struct funnel_device *dev = NULL;
  struct funnel_error error;
  funnel_status st = funnel_device_open_with_allocator(
      k, (const struct funnel_allocator *)(uintptr_t)allocator, &dev, &error);
  (*env)->ReleaseStringUTFChars(env, kind, k);
  if (st != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return FUNNEL_JNI_HANDLE(dev);
}

JNIEXPORT jstring JNICALL Java_dev_funnel_FunnelDevice_nativeBackend(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelDevice")) return NULL;
  return (*env)->NewStringUTF(env, funnel_device_backend(FUNNEL_JNI_PTR(struct funnel_device, h)));
}

JNIEXPORT void JNICALL Java_dev_funnel_FunnelDevice_nativeClose(JNIEnv *env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  funnel_device_close(FUNNEL_JNI_PTR(struct funnel_device, h));
}

JNIEXPORT jlong JNICALL Java_dev_funnel_FunnelDevice_nativeStreamCreate(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelDevice")) return 0;
  uintptr_t s = 0;
  struct funnel_error error;
  if (funnel_device_stream_create(FUNNEL_JNI_PTR(struct funnel_device, h), &s, &error) != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return (jlong)s;
}

JNIEXPORT jlong JNICALL Java_dev_funnel_FunnelDevice_nativeStreamWrap(JNIEnv *env, jclass cls, jlong h,
                                                                    jlong native_stream) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelDevice")) return 0;
  uintptr_t s = 0;
  struct funnel_error error;
  if (funnel_device_stream_wrap(FUNNEL_JNI_PTR(struct funnel_device, h), (uintptr_t)native_stream,
                                &s, &error) != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return (jlong)s;
}

JNIEXPORT jlong JNICALL Java_dev_funnel_PinnedPool_nativeAlloc(JNIEnv *env, jclass cls, jlong h,
                                                              jlong size) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelDevice")) return 0;
  void *p = NULL;
  struct funnel_error error;
  if (funnel_device_pinned_alloc(FUNNEL_JNI_PTR(struct funnel_device, h), (size_t)size, &p,
                                 &error) != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return (jlong)(uintptr_t)p;
}

JNIEXPORT void JNICALL Java_dev_funnel_PinnedPool_nativeFree(JNIEnv *env, jclass cls, jlong h,
                                                            jlong address, jlong size) {
  (void)cls;
  struct funnel_error error;
  if (funnel_device_pinned_free(FUNNEL_JNI_PTR(struct funnel_device, h), (void *)(uintptr_t)address,
                                (size_t)size, &error) != FUNNEL_OK)
    funnel_jni_throw(env, &error);
}

JNIEXPORT jlong JNICALL Java_dev_funnel_PinnedPool_nativeInUse(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelDevice")) return 0;
  return (jlong)funnel_device_pinned_in_use(FUNNEL_JNI_PTR(struct funnel_device, h));
}

JNIEXPORT jobject JNICALL Java_dev_funnel_PinnedPool_nativeWrap(JNIEnv *env, jclass cls,
                                                               jlong address, jlong size) {
  (void)cls;
  return (*env)->NewDirectByteBuffer(env, (void *)(uintptr_t)address, size);
}

JNIEXPORT jlong JNICALL Java_dev_funnel_FunnelDevice_nativeImport(JNIEnv *env, jclass cls, jlong h,
                                                                  jbyteArray descriptor) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelDevice")) return 0;
  const jsize n = (*env)->GetArrayLength(env, descriptor);
  jbyte *bytes = (*env)->GetByteArrayElements(env, descriptor, NULL);
  if (bytes == NULL) return 0;
  struct funnel_table *t = NULL;
  struct funnel_error error;
  const funnel_status st =
      funnel_table_import(FUNNEL_JNI_PTR(struct funnel_device, h), bytes, (size_t)n, &t, &error);
  (*env)->ReleaseByteArrayElements(env, descriptor, bytes, JNI_ABORT);
  if (st != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return FUNNEL_JNI_HANDLE(t);
}
