/* jni_util.h: what the <JavaClass>Jni.c files share: turning a funnel_error
 * into a Java exception, and handle conversion. JNI types stay in
 * native/jni. */
#ifndef FUNNEL_JNI_UTIL_H
#define FUNNEL_JNI_UTIL_H

#include <jni.h>
#include <stdint.h>

#include "funnel.h"

/* Throws the FunnelException subclass for `error` (through the Java factory
 * FunnelException.fromNative, so the mapping lives in one place). */
void funnel_jni_throw(JNIEnv *env, const struct funnel_error *error);

/* Throws a FunnelException with `code` and `message`. */
void funnel_jni_throw_code(JNIEnv *env, int code, const char *message);

#define FUNNEL_JNI_PTR(type, handle) ((type *)(uintptr_t)(handle))
#define FUNNEL_JNI_HANDLE(ptr) ((jlong)(uintptr_t)(ptr))

/* Null handle check: throws and returns nonzero when `handle` is 0. */
int funnel_jni_null_handle(JNIEnv *env, jlong handle, const char *what);

#endif
