/* JNI glue for dev.funnel.DeviceTable. */
#include <stdlib.h>
#include <string.h>

#include "jni_util.h"

#define TABLE(h) FUNNEL_JNI_PTR(struct funnel_table, h)

JNIEXPORT void JNICALL Java_dev_funnel_DeviceTable_waitReady(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return;
  struct funnel_error error;
  if (funnel_table_wait(TABLE(h), &error) != FUNNEL_OK) funnel_jni_throw(env, &error);
}

JNIEXPORT jboolean JNICALL Java_dev_funnel_DeviceTable_isReady(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return JNI_FALSE;
  return funnel_table_is_ready(TABLE(h)) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jlong JNICALL Java_dev_funnel_DeviceTable_numRows(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return 0;
  return (jlong)funnel_table_num_rows(TABLE(h));
}

/* Per column: type id, length, null count, then address and size of the
 * validity, offsets and data buffers. */
#define COLUMN_LONGS 9

JNIEXPORT jlongArray JNICALL Java_dev_funnel_DeviceTable_columns(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return NULL;
  int n = funnel_table_num_columns(TABLE(h));
  jlong *v = calloc((size_t)(n > 0 ? n : 1) * COLUMN_LONGS, sizeof(jlong));
  if (v == NULL) {
    funnel_jni_throw_code(env, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    return NULL;
  }
  for (int c = 0; c < n; c++) {
    struct funnel_column col;
    struct funnel_error error;
    if (funnel_table_column(TABLE(h), c, &col, &error) != FUNNEL_OK) {
      free(v);
      funnel_jni_throw(env, &error);
      return NULL;
    }
    jlong *o = v + (size_t)c * COLUMN_LONGS;
    o[0] = col.type_id;
    o[1] = col.length;
    o[2] = col.null_count;
    o[3] = (jlong)col.validity.address;
    o[4] = col.validity.size;
    o[5] = (jlong)col.offsets.address;
    o[6] = col.offsets.size;
    o[7] = (jlong)col.data.address;
    o[8] = col.data.size;
  }
  jlongArray out = (*env)->NewLongArray(env, n * COLUMN_LONGS);
  if (out != NULL) (*env)->SetLongArrayRegion(env, out, 0, n * COLUMN_LONGS, v);
  free(v);
  return out;
}

JNIEXPORT jbyteArray JNICALL Java_dev_funnel_DeviceTable_schemaIpc(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return NULL;
  size_t len = 0;
  const void *bytes = funnel_table_schema_ipc(TABLE(h), &len);
  jbyteArray out = (*env)->NewByteArray(env, (jsize)len);
  if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, (jsize)len, bytes);
  return out;
}

/* The fields of struct funnel_read_stats, in the order ReadStats reads them. */
JNIEXPORT jlongArray JNICALL Java_dev_funnel_DeviceTable_stats(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return NULL;
  struct funnel_read_stats s;
  struct funnel_error error;
  if (funnel_table_stats(TABLE(h), &s, &error) != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return NULL;
  }
  /* every field is an int64_t, in the order ReadStats declares its components
   * (SharedConstantsTest reads the struct from funnel.h) */
  _Static_assert(sizeof(struct funnel_read_stats) % sizeof(int64_t) == 0,
                 "struct funnel_read_stats holds int64_t fields only");
  jlong v[sizeof(struct funnel_read_stats) / sizeof(int64_t)];
  memcpy(v, &s, sizeof(s));
  const jsize n = (jsize)(sizeof(v) / sizeof(v[0]));
  jlongArray out = (*env)->NewLongArray(env, n);
  if (out != NULL) (*env)->SetLongArrayRegion(env, out, 0, n, v);
  return out;
}

/* `dst` holds 3 host addresses per column (validity, offsets, data; 0 to
 * skip), each with room for the size DeviceTable.columns reported. */
JNIEXPORT void JNICALL Java_dev_funnel_DeviceTable_copyToHost(JNIEnv *env, jclass cls, jlong h,
                                                             jlongArray dst) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return;
  int n = funnel_table_num_columns(TABLE(h));
  if ((*env)->GetArrayLength(env, dst) != 3 * n) {
    funnel_jni_throw_code(env, FUNNEL_ERR_INVALID_ARGUMENT, "copyToHost: need 3 addresses per column");
    return;
  }
  struct funnel_host_column *cols = calloc((size_t)(n > 0 ? n : 1), sizeof(*cols));
  jlong *a = cols ? (*env)->GetLongArrayElements(env, dst, NULL) : NULL;
  if (a == NULL) {
    free(cols);
    if (!(*env)->ExceptionCheck(env))
      funnel_jni_throw_code(env, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    return;
  }
  for (int c = 0; c < n; c++) {
    cols[c].validity = (void *)(uintptr_t)a[3 * c];
    cols[c].offsets = (void *)(uintptr_t)a[3 * c + 1];
    cols[c].data = (void *)(uintptr_t)a[3 * c + 2];
  }
  (*env)->ReleaseLongArrayElements(env, dst, a, JNI_ABORT);
  struct funnel_error error;
  funnel_status st = funnel_table_copy_to_host(TABLE(h), cols, &error);
  free(cols);
  if (st != FUNNEL_OK) funnel_jni_throw(env, &error);
}

JNIEXPORT void JNICALL Java_dev_funnel_DeviceTable_free(JNIEnv *env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  funnel_table_free(TABLE(h));
}

/* Fills the caller's ArrowDeviceArray (and ArrowSchema when `schema` is not
 * 0) at the given addresses. */
JNIEXPORT void JNICALL Java_dev_funnel_DeviceTable_exportDevice(JNIEnv *env, jclass cls, jlong h,
                                                               jlong array, jlong schema) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return;
  if (array == 0) {
    funnel_jni_throw_code(env, FUNNEL_ERR_INVALID_ARGUMENT,
                          "exportDevice: the ArrowDeviceArray address is 0");
    return;
  }
  struct funnel_error error;
  if (funnel_table_export_device(TABLE(h), FUNNEL_JNI_PTR(struct ArrowDeviceArray, array),
                                 FUNNEL_JNI_PTR(struct ArrowSchema, schema), &error) != FUNNEL_OK)
    funnel_jni_throw(env, &error);
}

JNIEXPORT jlong JNICALL Java_dev_funnel_DeviceTable_share(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return 0;
  struct funnel_share *sh = NULL;
  struct funnel_error error;
  if (funnel_table_share(TABLE(h), &sh, &error) != FUNNEL_OK) {
    funnel_jni_throw(env, &error);
    return 0;
  }
  return FUNNEL_JNI_HANDLE(sh);
}

/* `ranges` holds 5 longs per range: column, buffer (0 validity, 1 offsets,
 * 2 data), byte offset, length, host address. */
JNIEXPORT void JNICALL Java_dev_funnel_DeviceTable_copyRanges(JNIEnv *env, jclass cls, jlong h,
                                                             jlongArray ranges) {
  (void)cls;
  if (funnel_jni_null_handle(env, h, "DeviceTable")) return;
  const jsize n = (*env)->GetArrayLength(env, ranges) / 5;
  struct funnel_host_range *r = calloc((size_t)n + 1, sizeof(*r));
  jlong *v = r ? (*env)->GetLongArrayElements(env, ranges, NULL) : NULL;
  if (v == NULL) {
    free(r);
    if (!(*env)->ExceptionCheck(env))
      funnel_jni_throw_code(env, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
    return;
  }
  for (jsize i = 0; i < n; i++)
    r[i] = (struct funnel_host_range){(int)v[5 * i], (int)v[5 * i + 1], v[5 * i + 2],
                                      v[5 * i + 3], (void *)(uintptr_t)v[5 * i + 4]};
  (*env)->ReleaseLongArrayElements(env, ranges, v, JNI_ABORT);
  struct funnel_error error;
  const funnel_status st = funnel_table_copy_ranges_to_host(TABLE(h), r, (size_t)n, &error);
  free(r);
  if (st != FUNNEL_OK) funnel_jni_throw(env, &error);
}
