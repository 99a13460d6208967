#include <string.h>

#include "jni_util.h"

void funnel_jni_throw(JNIEnv *env, const struct funnel_error *error) {
  if ((*env)->ExceptionCheck(env)) return;
  jclass cls = (*env)->FindClass(env, "dev/funnel/FunnelException");
  if (cls == NULL) return; /* NoClassDefFoundError pending */
  jmethodID make = (*env)->GetStaticMethodID(
      env, cls, "fromNative", "(IJJJLjava/lang/String;)Ldev/funnel/FunnelException;");
  if (make == NULL) return;
  jstring msg = (*env)->NewStringUTF(env, error->message);
  if (msg == NULL) return;
  jobject ex = (*env)->CallStaticObjectMethod(env, cls, make, (jint)error->code,
                                              (jlong)error->partition, (jlong)error->column,
                                              (jlong)error->offset, msg);
  if (ex != NULL && !(*env)->ExceptionCheck(env)) (*env)->Throw(env, (jthrowable)ex);
}

void funnel_jni_throw_code(JNIEnv *env, int code, const char *message) {
  struct funnel_error e;
  e.code = code;
  e.partition = e.column = e.offset = -1;
  strncpy(e.message, message, sizeof(e.message) - 1);
  e.message[sizeof(e.message) - 1] = '\0';
  funnel_jni_throw(env, &e);
}

int funnel_jni_null_handle(JNIEnv *env, jlong handle, const char *what) {
  if (handle != 0) return 0;
  char buf[128];
  strncpy(buf, what, sizeof(buf) - 32);
  buf[sizeof(buf) - 32] = '\0';
  strcat(buf, " is closed");
  funnel_jni_throw_code(env, FUNNEL_ERR_INVALID_ARGUMENT, buf);
  return 1;
}
