/* JNI glue for dev.funnel.Faults: the tests' view of the backend wrappers'
 * fault injection and of what they keep alive (backend.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdlib.h>

#include "backend.h"
#include "jni_util.h"

JNIEXPORT void JNICALL Java_dev_funnel_Faults_arm(JNIEnv *env, jclass cls, jint kind, jlong k) {
  (void)env;
  (void)cls;
  funnel__fault_arm(kind, k);
}

JNIEXPORT jlong JNICALL Java_dev_funnel_Faults_calls(JNIEnv *env, jclass cls, jint kind) {
  (void)env;
  (void)cls;
  return (jlong)funnel__fault_calls(kind);
}

/* allocations, pinned allocations, events, streams */
JNIEXPORT jlongArray JNICALL Java_dev_funnel_Faults_nativeLive(JNIEnv *env, jclass cls) {
  (void)cls;
  const struct funnel__live l = funnel__live_now();
  const jlong v[4] = {l.allocs, l.host_allocs, l.events, l.streams};
  jlongArray out = (*env)->NewLongArray(env, 4);
  if (out != NULL) (*env)->SetLongArrayRegion(env, out, 0, 4, v);
  return out;
}

/* A caller's allocator for the tests (cpu backend: host memory): it counts,
 * and refuses the k-th allocation from its arming (k < 0: every one). */
static _Atomic int64_t ta_allocs, ta_frees, ta_live_bytes, ta_refused, ta_refuse_at, ta_seen;

static int test_allocate(void *context, size_t size, void *stream, uint64_t *out) {
  (void)context;
  (void)stream;
  const int64_t n = atomic_fetch_add(&ta_seen, 1) + 1, at = atomic_load(&ta_refuse_at);
  if (at < 0 || n == at) {
    atomic_fetch_add(&ta_refused, 1);
    return 2;
  }
  void *p = aligned_alloc(64, (size + 63) / 64 * 64);
  if (p == NULL) return 1;
  atomic_fetch_add(&ta_allocs, 1);
  atomic_fetch_add(&ta_live_bytes, (int64_t)size);
  *out = (uint64_t)(uintptr_t)p;
  return 0;
}

static void test_deallocate(void *context, uint64_t ptr, size_t size, void *stream) {
  (void)context;
  (void)stream;
  atomic_fetch_add(&ta_frees, 1);
  atomic_fetch_sub(&ta_live_bytes, (int64_t)size);
  free((void *)(uintptr_t)ptr);
}

static const struct funnel_allocator test_allocator = {test_allocate, test_deallocate, NULL};

JNIEXPORT jlong JNICALL Java_dev_funnel_Faults_testAllocator(JNIEnv *env, jclass cls, jlong refuse_at) {
  (void)env;
  (void)cls;
  atomic_store(&ta_seen, 0);
  atomic_store(&ta_refuse_at, refuse_at);
  return (jlong)(uintptr_t)&test_allocator;
}

/* allocations, frees, bytes live, refusals */
JNIEXPORT jlongArray JNICALL Java_dev_funnel_Faults_testAllocatorCounts(JNIEnv *env, jclass cls) {
  (void)cls;
  const jlong v[4] = {atomic_load(&ta_allocs), atomic_load(&ta_frees), atomic_load(&ta_live_bytes),
                      atomic_load(&ta_refused)};
  jlongArray out = (*env)->NewLongArray(env, 4);
  if (out != NULL) (*env)->SetLongArrayRegion(env, out, 0, 4, v);
  return out;
}
