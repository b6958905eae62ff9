/* The public model API: picks the family from general.architecture. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/gpu.h"
#include "io/gguf.h"
#include "models/family.h"
#include "steno.h"

struct steno_model {
  char arch[32];
  const family *fam;
  gpu_device *dev;
  void *impl;
};

steno_model_params steno_model_default_params(void) { return (steno_model_params){0}; }

steno_transcribe_params steno_transcribe_default_params(void) {
  return (steno_transcribe_params){0};
}

int steno_model_load(const char *path, const steno_model_params *params, steno_model **out) {
  (void)params;
  if (!out || !path) return err_set(STENO_ERR_INVALID, "steno_model_load: NULL argument");
  *out = NULL;
  gguf_file *f;
  TRY(gguf_open(&f, path));
  const char *arch;
  int st = gguf_get_str(f, "general.architecture", &arch);
  steno_model *m = st ? NULL : mem_alloc(1, sizeof *m);
  if (!st && !m) st = STENO_ERR_NOMEM;
  if (!st && !(m->fam = family_find(arch)))
    st = err_set(STENO_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (yet): steno runs %s",
                 path, arch, family_names());
  if (!st) {
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    st = gpu_open(&m->dev);
  }
  if (!st) st = m->fam->load(m->dev, f, &m->impl);
  gguf_close(f);
  if (st) {
    steno_model_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void steno_model_free(steno_model *m) {
  if (!m) return;
  if (m->impl) m->fam->free(m->impl);
  gpu_close(m->dev);
  free(m);
}

const char *steno_model_architecture(const steno_model *m) { return m->arch; }

void steno_model_memory(const steno_model *m, size_t *used, size_t *peak) {
  if (used) *used = gpu_memory_used(m->dev);
  if (peak) *peak = gpu_memory_peak(m->dev);
}

const char *steno_model_device(const steno_model *m, int *fast) {
  if (fast) *fast = gpu_using_fast(m->dev);
  return gpu_device_info(m->dev)->name;
}

int steno_transcribe(steno_model *m, const float *pcm, size_t n,
                     const steno_transcribe_params *params, steno_result **out) {
  if (!m || !out || (!pcm && n)) return err_set(STENO_ERR_INVALID, "steno_transcribe: NULL argument");
  *out = NULL;
  steno_transcribe_params p = params ? *params : steno_transcribe_default_params();
  if (p.abort && p.abort(p.abort_user)) return err_set(STENO_ERR_ABORTED, "aborted");
  for (size_t i = 0; i < n; i++)
    if (!(pcm[i] == pcm[i]) || pcm[i] > 1e6f || pcm[i] < -1e6f)
      return err_set(STENO_ERR_INVALID, "sample %zu is not a finite audio value (%g)", i, pcm[i]);
  int st = m->fam->transcribe(m->impl, pcm, n, &p, out);
  if (!st && p.progress) p.progress(1.0f, p.progress_user);
  return st;
}
