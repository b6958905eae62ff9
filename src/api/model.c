/* The public model API: loading (the family from general.architecture), freeing
 * and what a model tells about itself. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timer.h"
#include "gpu/gpu.h"
#include "io/gguf.h"
#include "models/whisper/whisper.h"
#include "steno.h"

steno_model_params steno_model_default_params(void) { return (steno_model_params){.device = -1}; }

/* whisper.cpp's legacy ggml .bin files start with "ggml" (0x67676d6c, little-endian). */
static int legacy_bin(const char *path, uint8_t **image, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0; /* gguf_open says why */
  uint8_t magic[4] = {0};
  size_t got = fread(magic, 1, 4, f);
  fclose(f);
  if (got == 4 && magic[0] == 0x6c && magic[1] == 0x6d && magic[2] == 0x67 && magic[3] == 0x67)
    return whisper_bin_image(path, image, size);
  return 0;
}

/* The device opens on a thread of its own while the file is read and mapped:
 * the two take about as long as each other. */
typedef struct {
  steno_model_params params;
  gpu_device *dev;
  int status;
  char message[1024]; /* its error message (error messages are per thread) */
} device_opener;

static void *open_device(void *arg) {
  device_opener *o = arg;
  o->status = gpu_open(&o->params, &o->dev);
  if (o->status) snprintf(o->message, sizeof o->message, "%s", err_message());
  return NULL;
}

int steno_model_load(const char *path, const steno_model_params *params, steno_model **out) {
  if (!out || !path) return err_set(STENO_ERR_INVALID, "steno_model_load: NULL argument");
  *out = NULL;
  steno_model_params mp = params ? *params : steno_model_default_params();
  if (mp.threads < 0) return err_set(STENO_ERR_INVALID, "threads %d: must be 0 (one per CPU) or more", mp.threads);
  gguf_file *f;
  uint8_t *image = NULL; /* a legacy whisper.cpp .bin, rebuilt as a GGUF image */
  size_t size = 0;
  double t0 = time_now();
  device_opener opener = {.params = mp};
  pthread_t thread;
  bool started = pthread_create(&thread, NULL, open_device, &opener) == 0;
  int opened = legacy_bin(path, &image, &size);
  if (!opened) opened = image ? gguf_open_memory(&f, image, size, path) : gguf_open(&f, path);
  if (opened) {
    if (started) pthread_join(thread, NULL);
    gpu_close(opener.dev);
    free(image);
    return opened;
  }
  const char *arch;
  int st = gguf_get_str(f, "general.architecture", &arch);
  steno_model *m = st ? NULL : mem_alloc(1, sizeof *m);
  if (!st && !m) st = STENO_ERR_NOMEM;
  if (!st && !(m->fam = family_find(arch)))
    st = err_set(STENO_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (yet): steno runs %s",
                 path, arch, family_names());
  if (!st) {
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    m->threads = mp.threads;
  }
  if (started) pthread_join(thread, NULL);
  else if (!st) open_device(&opener);
  if (m) m->dev = opener.dev;
  else gpu_close(opener.dev);
  if (!st && opener.status) st = err_set(opener.status, "%s", opener.message);
  double t1 = time_now();
  /* Uploads batched: one submission per 32 MiB of weights, not one per tensor. */
  if (!st) st = gpu_upload_batch(m->dev, true);
  if (!st) st = m->fam->load(m->dev, f, &m->impl);
  if (m && m->dev) {
    int bs = gpu_upload_batch(m->dev, false);
    if (!st) st = bs;
  }
  if (!st) log_info("%s loaded in %.1f ms: file and device %.1f ms, weights %.1f ms", path,
                    (time_now() - t0) * 1e3, (t1 - t0) * 1e3, (time_now() - t1) * 1e3);
  gguf_close(f);
  free(image);
  if (st) {
    steno_model_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void steno_model_free(steno_model *m) {
  if (!m) return;
  int open = atomic_load(&m->sessions);
  if (open) { /* freeing now would leave them pointing at freed weights */
    log_error("steno_model_free: %d session%s of this model still open: free them first; the "
              "model stays loaded", open, open == 1 ? "" : "s");
    return;
  }
  steno_session_free(m->own);
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
