/* JNI glue for dev.funnel.FunnelReader: one call per read, for all the
 * partitions. */
#include <stdio.h>
#include <stdlib.h>

#include "jni_util.h"

JNIEXPORT jlong JNICALL Java_dev_funnel_FunnelReader_create(JNIEnv *env, jclass cls, jlong dev,
                                                           jbyteArray schema) {
  (void)cls;
  if (funnel_jni_null_handle(env, dev, "FunnelDevice")) return 0;
  jbyte *bytes = NULL;
  jsize len = 0;
  if (schema != NULL) {
    len = (*env)->GetArrayLength(env, schema);
    bytes = (*env)->GetByteArrayElements(env, schema, NULL);
    if (bytes == NULL) return 0;
  }
  struct funnel_reader *reader = NULL;
  struct funnel_error error;
  funnel_status st = funnel_reader_create(FUNNEL_JNI_PTR(struct funnel_device, dev), bytes,
                                          (size_t)len, &reader, &error);
  if (bytes != NULL) (*env)->ReleaseByteArrayElements(env, schema, bytes, JNI_ABORT);
  if (st != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return FUNNEL_JNI_HANDLE(reader);
}

JNIEXPORT void JNICALL Java_dev_funnel_FunnelReader_free(JNIEnv *env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  funnel_reader_free(FUNNEL_JNI_PTR(struct funnel_reader, h));
}

JNIEXPORT void JNICALL Java_dev_funnel_FunnelReader_setOption(JNIEnv *env, jclass cls, jlong h,
                                                             jint option, jlong value) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelReader")) return;
  struct funnel_error error;
  if (funnel_reader_set_option(FUNNEL_JNI_PTR(struct funnel_reader, h), option, value, &error) !=
      FUNNEL_OK)
    funnel_jni_throw(env, &error);
}

static jlong read(JNIEnv *env, jlong h, struct funnel_partition *parts, size_t n, jlong stream) {
  struct funnel_table *table = NULL;
  struct funnel_error error;
  funnel_status st = funnel_reader_read_async(FUNNEL_JNI_PTR(struct funnel_reader, h), parts, n,
                                              (uintptr_t)stream, &table, &error);
  free(parts);
  if (st != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return FUNNEL_JNI_HANDLE(table);
}

static struct funnel_partition *alloc_parts(JNIEnv *env, jsize n) {
  struct funnel_partition *parts = calloc(n > 0 ? (size_t)n : 1, sizeof(*parts));
  if (parts == NULL) funnel_jni_throw_code(env, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  return parts;
}

/* Partitions given as raw addresses and lengths (Java checked the arrays). */
JNIEXPORT jlong JNICALL Java_dev_funnel_FunnelReader_readAddresses(JNIEnv *env, jclass cls, jlong h,
                                                                  jlongArray addresses,
                                                                  jlongArray lengths, jlong stream) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelReader")) return 0;
  jsize n = (*env)->GetArrayLength(env, addresses);
  struct funnel_partition *parts = alloc_parts(env, n);
  if (parts == NULL) return 0;
  jlong *a = (*env)->GetLongArrayElements(env, addresses, NULL);
  jlong *l = a ? (*env)->GetLongArrayElements(env, lengths, NULL) : NULL;
  if (l == NULL) {
    if (a) (*env)->ReleaseLongArrayElements(env, addresses, a, JNI_ABORT);
    free(parts);
    return 0;
  }
  for (jsize i = 0; i < n; i++) {
    parts[i].data = (const void *)(uintptr_t)a[i];
    parts[i].length = (size_t)l[i];
  }
  (*env)->ReleaseLongArrayElements(env, addresses, a, JNI_ABORT);
  (*env)->ReleaseLongArrayElements(env, lengths, l, JNI_ABORT);
  return read(env, h, parts, (size_t)n, stream);
}

/* Partitions given as direct ByteBuffers, each read from `positions[i]` for
 * `lengths[i]` bytes (Java checked the bounds). */
JNIEXPORT jlong JNICALL Java_dev_funnel_FunnelReader_readBuffers(JNIEnv *env, jclass cls, jlong h,
                                                                jobjectArray buffers,
                                                                jlongArray positions,
                                                                jlongArray lengths, jlong stream) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "FunnelReader")) return 0;
  jsize n = (*env)->GetArrayLength(env, buffers);
  struct funnel_partition *parts = alloc_parts(env, n);
  if (parts == NULL) return 0;
  jlong *pos = (*env)->GetLongArrayElements(env, positions, NULL);
  jlong *len = pos ? (*env)->GetLongArrayElements(env, lengths, NULL) : NULL;
  if (len == NULL) {
    if (pos) (*env)->ReleaseLongArrayElements(env, positions, pos, JNI_ABORT);
    free(parts);
    return 0;
  }
  int ok = 1;
  for (jsize i = 0; i < n && ok; i++) {
    jobject buf = (*env)->GetObjectArrayElement(env, buffers, i);
    char *base = buf ? (*env)->GetDirectBufferAddress(env, buf) : NULL;
    if (buf) (*env)->DeleteLocalRef(env, buf);
    if (base == NULL && len[i] > 0) {
      struct funnel_error e = {FUNNEL_ERR_INVALID_ARGUMENT, i, -1, -1, ""};
      snprintf(e.message, sizeof(e.message), "partition %d: not a direct ByteBuffer", (int)i);
      funnel_jni_throw(env, &e);
      ok = 0;
      break;
    }
    parts[i].data = base ? base + pos[i] : NULL;
    parts[i].length = (size_t)len[i];
  }
  (*env)->ReleaseLongArrayElements(env, positions, pos, JNI_ABORT);
  (*env)->ReleaseLongArrayElements(env, lengths, len, JNI_ABORT);
  if (!ok) {
    free(parts);
    return 0;
  }
  return read(env, h, parts, (size_t)n, stream);
}
