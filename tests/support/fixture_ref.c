#include "fixture_ref.h"

#include <math.h>
#include <stdio.h>

#include "check.h"

const float *ref_tensor(const gguf_file *ref, const char *clip, const char *what, size_t *n) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s", clip, what);
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32, "reference tensor %s", name);
  if (!t) return NULL;
  *n = t->nelem;
  return t->data;
}

const gguf_kv *ref_key(const gguf_file *ref, const char *clip, const char *what) {
  char name[128];
  snprintf(name, sizeof name, "ref.%s.%s", clip, what);
  const gguf_kv *kv = gguf_find(ref, name);
  CHECK(kv != NULL, "reference key %s", name);
  return kv;
}

float max_abs(const float *got, const float *want, size_t n) {
  float e = 0;
  for (size_t i = 0; i < n; i++) e = fmaxf(e, fabsf(got[i] - want[i]));
  return e;
}
