#include "frontend/gigaam_mel.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "frontend/frames.h"

int gmel_init(gmel *m, int n_fft, int hop, int n_mels, const float *filters, const float *window) {
  memset(m, 0, sizeof *m);
  if (n_fft < 16 || n_fft > 8192 || hop < 1 || hop > n_fft || n_mels < 1 || n_mels > 1024)
    return err_set(STENO_ERR_FORMAT, "gigaam frontend: n_fft %d, hop %d, %d mels", n_fft, hop,
                   n_mels);
  m->n_fft = n_fft, m->hop = hop, m->n_mels = n_mels, m->bins = n_fft / 2 + 1;
  m->window = mem_alloc((size_t)n_fft, sizeof *m->window);
  int st = m->window ? 0 : STENO_ERR_NOMEM;
  if (!st) st = melbank_init(&m->bank, filters, n_mels, m->bins);
  if (!st) st = fft_plan_init(&m->fft, n_fft);
  if (st) {
    gmel_free(m);
    return st;
  }
  for (int j = 0; j < n_fft; j++) m->window[j] = window[j];
  return 0;
}

void gmel_free(gmel *m) {
  melbank_free(&m->bank);
  free(m->window);
  fft_plan_free(&m->fft);
  memset(m, 0, sizeof *m);
}

size_t gmel_frames(const gmel *m, size_t n) {
  return n < (size_t)m->n_fft ? 0 : (n - (size_t)m->n_fft) / (size_t)m->hop + 1;
}

/* ln of the mel energies of one power spectrum, clamped to [1e-9, 1e9] as
 * GigaAM's SpecScaler does. */
static void log_mel(const gmel *m, const double *power, double *energy, float *out) {
  melbank_apply(&m->bank, power, energy);
  for (int b = 0; b < m->n_mels; b++) {
    double e = energy[b] < 1e-9 ? 1e-9 : energy[b] > 1e9 ? 1e9 : energy[b];
    out[b] = (float)log(e);
  }
}

typedef struct {
  const gmel *m;
  const float *pcm;
  float *x;
} gmel_job;

/* Frames [t0, t1) from t0 even, two per complex transform. Scratch:
 * n_fft·6 + bins·2 + n_mels doubles. Every frame lies inside the clip. */
static void gmel_chunk(void *ctx, size_t t0, size_t t1, int chunk, double *buf) {
  (void)chunk;
  gmel_job *j = ctx;
  const gmel *m = j->m;
  size_t nfft = (size_t)m->n_fft, M = (size_t)m->n_mels, hop = (size_t)m->hop;
  double *pa = buf + 6 * nfft, *pb = pa + m->bins, *energy = pb + m->bins;
  for (size_t t = t0; t < t1; t += 2) {
    bool pair = t + 1 < t1;
    const float *a = j->pcm + t * hop, *b = pair ? j->pcm + (t + 1) * hop : NULL;
    fft_power_pair(&m->fft, a, b, m->window, buf, pa, pb);
    log_mel(m, pa, energy, j->x + t * M);
    if (pair) log_mel(m, pb, energy, j->x + (t + 1) * M);
  }
}

int gmel_compute(const gmel *m, const float *pcm, size_t n, float **out, size_t *frames) {
  *out = NULL;
  size_t T = gmel_frames(m, n), M = (size_t)m->n_mels;
  *frames = T;
  if (T == 0) return 0;
  gmel_job job = {m, pcm, mem_alloc(T, M * sizeof *job.x)};
  if (!job.x) return STENO_ERR_NOMEM;
  int st = frames_run(T, 6 * (size_t)m->n_fft + 2 * (size_t)m->bins + M, gmel_chunk, &job);
  if (st) {
    free(job.x);
    return st;
  }
  *out = job.x;
  return 0;
}
