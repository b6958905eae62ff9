#include "frontend/whisper_mel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

int wmel_init(wmel *m, int n_fft, int hop, int n_mels, size_t n_samples, const float *filters,
              const float *window) {
  memset(m, 0, sizeof *m);
  if (n_fft < 16 || n_fft > 8192 || hop < 1 || hop > n_fft || n_mels < 1 || n_mels > 1024 ||
      n_samples < (size_t)n_fft || n_samples > ((size_t)1 << 32))
    return err_set(STENO_ERR_FORMAT, "whisper frontend: n_fft %d, hop %d, %d mels, %zu samples",
                   n_fft, hop, n_mels, n_samples);
  m->n_fft = n_fft, m->hop = hop, m->n_mels = n_mels, m->bins = n_fft / 2 + 1;
  m->n_samples = n_samples;
  size_t nf = (size_t)n_mels * m->bins;
  m->filters = mem_alloc(nf, sizeof *m->filters);
  m->lo = mem_alloc((size_t)n_mels, sizeof *m->lo);
  m->hi = mem_alloc((size_t)n_mels, sizeof *m->hi);
  m->window = mem_alloc((size_t)n_fft, sizeof *m->window);
  int st = m->filters && m->lo && m->hi && m->window ? 0 : STENO_ERR_NOMEM;
  if (!st) st = fft_plan_init(&m->fft, n_fft);
  if (st) {
    wmel_free(m);
    return st;
  }
  memcpy(m->filters, filters, nf * sizeof *filters);
  for (int b = 0; b < n_mels; b++) {
    const float *f = m->filters + (size_t)b * m->bins;
    int lo = 0, hi = m->bins;
    while (lo < hi && f[lo] == 0) lo++;
    while (hi > lo && f[hi - 1] == 0) hi--;
    m->lo[b] = lo, m->hi[b] = hi;
  }
  for (int j = 0; j < n_fft; j++) m->window[j] = window[j];
  return 0;
}

void wmel_free(wmel *m) {
  free(m->filters);
  free(m->lo);
  free(m->hi);
  free(m->window);
  fft_plan_free(&m->fft);
  memset(m, 0, sizeof *m);
}

size_t wmel_frames(const wmel *m, size_t n) {
  return (n > m->n_samples ? n : m->n_samples) / (size_t)m->hop;
}

/* Sample i of the clip zero-padded to `len`, reflected at both ends as
 * torch.stft(center=True, pad_mode="reflect") does (the edge not repeated). */
static double sample(const float *pcm, size_t n, size_t len, long i) {
  if (i < 0) i = -i;
  if (i >= (long)len) i = 2 * ((long)len - 1) - i;
  return i >= 0 && (size_t)i < n ? pcm[i] : 0.0;
}

/* log10 of the mel energies of frame t into out[n_mels]. */
static void frame(const wmel *m, const float *pcm, size_t n, size_t len, size_t t, double *buf,
                  float *out) {
  int nfft = m->n_fft;
  double *x = buf, *X = buf + 2 * nfft, *power = buf + 4 * nfft;
  long start = (long)(t * (size_t)m->hop) - nfft / 2;
  for (int j = 0; j < nfft; j++) {
    x[2 * j] = sample(pcm, n, len, start + j) * m->window[j];
    x[2 * j + 1] = 0;
  }
  fft_plan_run(&m->fft, x, X);
  for (int k = 0; k < m->bins; k++) power[k] = X[2 * k] * X[2 * k] + X[2 * k + 1] * X[2 * k + 1];
  for (int b = 0; b < m->n_mels; b++) {
    const float *f = m->filters + (size_t)b * m->bins;
    double acc = 0;
    for (int k = m->lo[b]; k < m->hi[b]; k++) acc += f[k] * power[k];
    out[b] = (float)log10(acc > 1e-10 ? acc : 1e-10);
  }
}

int wmel_compute(const wmel *m, const float *pcm, size_t n, float **out, size_t *frames) {
  *out = NULL;
  /* A clip shorter than a window is padded to one before the STFT (its
   * reflection then mirrors zeros); a longer one is not padded. */
  size_t len = n > m->n_samples ? n : m->n_samples;
  size_t T = len / (size_t)m->hop, M = (size_t)m->n_mels;
  *frames = T;
  float *x = mem_alloc(T, M * sizeof *x);
  double *buf = mem_alloc(5 * (size_t)m->n_fft, sizeof *buf);
  if (!x || !buf) {
    free(x);
    free(buf);
    return STENO_ERR_NOMEM;
  }
  float top = -INFINITY;
  for (size_t t = 0; t < T; t++) {
    frame(m, pcm, n, len, t, buf, x + t * M);
    for (size_t b = 0; b < M; b++) top = fmaxf(top, x[t * M + b]);
  }
  free(buf);
  for (size_t i = 0; i < T * M; i++) x[i] = (fmaxf(x[i], top - 8.0f) + 4.0f) / 4.0f;
  *out = x;
  return 0;
}
