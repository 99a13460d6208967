/* JNI glue for dev.funnel.Faults: the tests' view of the backend wrappers'
 * fault injection and of what they keep alive (backend.h). */
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
