/* The public model API: picks the family from general.architecture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/split.h"
#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/pool.h"
#include "base/timer.h"
#include "gpu/gpu.h"
#include "io/gguf.h"
#include "models/family.h"
#include "models/whisper/whisper.h"
#include "text/result.h"
#include "steno.h"

struct steno_model {
  char arch[32];
  const family *fam;
  gpu_device *dev;
  void *impl;
  int threads; /* steno_model_params.threads */
};

steno_model_params steno_model_default_params(void) { return (steno_model_params){.device = -1}; }

steno_transcribe_params steno_transcribe_default_params(void) {
  return (steno_transcribe_params){0};
}

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

int steno_model_load(const char *path, const steno_model_params *params, steno_model **out) {
  if (!out || !path) return err_set(STENO_ERR_INVALID, "steno_model_load: NULL argument");
  *out = NULL;
  steno_model_params mp = params ? *params : steno_model_default_params();
  if (mp.threads < 0) return err_set(STENO_ERR_INVALID, "threads %d: must be 0 (one per CPU) or more", mp.threads);
  gguf_file *f;
  uint8_t *image = NULL; /* a legacy whisper.cpp .bin, rebuilt as a GGUF image */
  size_t size = 0;
  double t0 = time_now();
  TRY(legacy_bin(path, &image, &size));
  int opened = image ? gguf_open_memory(&f, image, size, path) : gguf_open(&f, path);
  if (opened) {
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
    st = gpu_open(&mp, &m->dev);
  }
  double t1 = time_now();
  if (!st) st = m->fam->load(m->dev, f, &m->impl);
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

/* The piece length: the caller's, or the family's window. A family with
 * full attention and no window of its own (0: Parakeet) gets 60 s, the
 * length wavo measured best for Parakeet (30 s pieces hallucinated, 120 s
 * ones skipped a sentence), and at most 300 s: the attention scores grow as
 * heads·t²·4 bytes with t = 12.5 frames/s, 18 MB at 60 s and 450 MB at 300 s
 * for Parakeet 0.6B's 8 heads. */
static int piece_seconds(const family *f, double want, double *out) {
  double most = f->window > 0 ? f->window : 300;
  *out = want ? want : f->window > 0 ? f->window : 60;
  if (want && !(want >= 5 && want <= most))
    return err_set(STENO_ERR_INVALID, "piece_seconds %g: must be 5 to %g s for %s", want, most, f->arch);
  return 0;
}

static int check_finite(const float *pcm, size_t n, size_t offset) {
  for (size_t i = 0; i < n; i++)
    if (!(pcm[i] == pcm[i]) || pcm[i] > 1e6f || pcm[i] < -1e6f)
      return err_set(STENO_ERR_INVALID, "sample %zu (at %.3f s) is not a finite audio value (%g)",
                     offset + i, (double)(offset + i) / SPLIT_RATE, pcm[i]);
  return 0;
}

/* Splits what `read` delivers into pieces and transcribes them in turn:
 * quiet ones are skipped, the others' results appended with their offset.
 * total_seconds (0: unknown) is for progress only. */
static int transcribe_pieces(steno_model *m, split_read_fn read, void *user, double total_seconds,
                             const steno_transcribe_params *p, steno_result **out) {
  double seconds;
  TRY(piece_seconds(m->fam, p->piece_seconds, &seconds));
  splitter s;
  TRY(split_init(&s, seconds, read, user));
  /* The CPU work below (features, a CPU decoder) runs on this thread and its pools. */
  int threads = pool_limit_threads(m->threads);
  steno_result *all;
  int st = result_empty(0, &all);
  for (;;) {
    if (!st && p->abort && p->abort(p->abort_user)) st = err_set(STENO_ERR_ABORTED, "aborted");
    const float *pcm;
    size_t n = 0, offset;
    bool quiet;
    if (!st) st = split_next(&s, &pcm, &n, &offset, &quiet);
    if (st || !n) break;
    if (!(st = check_finite(pcm, n, offset)) && !quiet) {
      steno_result *r;
      st = m->fam->transcribe(m->impl, pcm, n, p, &r);
      if (!st) st = result_append(all, r, (int64_t)(offset / (SPLIT_RATE / 1000)));
    }
    if (st) break;
    all->duration = (double)(offset + n) / SPLIT_RATE;
    if (p->progress && total_seconds > 0) {
      double done = all->duration / total_seconds;
      p->progress(done < 0.999 ? (float)done : 0.999f, p->progress_user);
    }
  }
  split_free(&s);
  pool_limit_threads(threads);
  if (st) {
    steno_result_free(all);
    return st;
  }
  if (p->progress) p->progress(1.0f, p->progress_user);
  *out = all;
  return 0;
}

typedef struct {
  const float *pcm;
  size_t n, at;
} memory_source;

static int memory_read(void *user, float *pcm, size_t max, size_t *got) {
  memory_source *src = user;
  *got = src->n - src->at < max ? src->n - src->at : max;
  memcpy(pcm, src->pcm + src->at, *got * sizeof *pcm);
  src->at += *got;
  return 0;
}

static int stream_read(void *user, float *pcm, size_t max, size_t *got) {
  return steno_audio_read(user, pcm, max, got);
}

int steno_transcribe(steno_model *m, const float *pcm, size_t n,
                     const steno_transcribe_params *params, steno_result **out) {
  if (!m || !out || (!pcm && n)) return err_set(STENO_ERR_INVALID, "steno_transcribe: NULL argument");
  *out = NULL;
  steno_transcribe_params p = params ? *params : steno_transcribe_default_params();
  memory_source src = {pcm, n, 0};
  return transcribe_pieces(m, memory_read, &src, (double)n / SPLIT_RATE, &p, out);
}

int steno_transcribe_audio(steno_model *m, steno_audio *a, const steno_transcribe_params *params,
                           steno_result **out) {
  if (!m || !a || !out) return err_set(STENO_ERR_INVALID, "steno_transcribe_audio: NULL argument");
  *out = NULL;
  steno_transcribe_params p = params ? *params : steno_transcribe_default_params();
  return transcribe_pieces(m, stream_read, a, steno_audio_duration(a), &p, out);
}
