#include "frontend/mel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "frontend/fft.h"

/* Slaney's mel scale: linear below 1 kHz, logarithmic above (librosa, htk=False). */
static double hz_to_mel(double f) {
  return f < 1000.0 ? 3.0 * f / 200.0 : 15.0 + 27.0 * log(f / 1000.0) / log(6.4);
}
static double mel_to_hz(double m) {
  return m < 15.0 ? 200.0 * m / 3.0 : 1000.0 * exp(log(6.4) * (m - 15.0) / 27.0);
}

/* Triangular filters between n_mels + 2 points evenly spaced in mel, each
 * scaled to unit area (Slaney normalization), computed in double as librosa
 * and transformers do, stored as f32. */
static void slaney_filters(const mel_config *c, float *out) {
  int bins = c->n_fft / 2 + 1, n = c->n_mels;
  double lo = hz_to_mel(c->f_min), hi = hz_to_mel(c->f_max);
  double *pts = malloc((size_t)(n + 2) * sizeof *pts);
  if (!pts) return;
  for (int i = 0; i < n + 2; i++) pts[i] = mel_to_hz(lo + (hi - lo) * i / (n + 1));
  for (int m = 0; m < n; m++) {
    double norm = 2.0 / (pts[m + 2] - pts[m]);
    for (int k = 0; k < bins; k++) {
      double f = (double)c->sample_rate / 2 * k / (bins - 1);
      double down = (f - pts[m]) / (pts[m + 1] - pts[m]);
      double up = (pts[m + 2] - f) / (pts[m + 2] - pts[m + 1]);
      double w = fmax(0.0, fmin(down, up));
      out[(size_t)m * bins + k] = (float)(w * norm);
    }
  }
  free(pts);
}

int mel_init(mel_frontend *m, const mel_config *c) {
  memset(m, 0, sizeof *m);
  int nfft = c->n_fft;
  if (nfft < 16 || nfft > 8192 || (nfft & (nfft - 1)) || c->win_length < 2 ||
      c->win_length > nfft || c->hop < 1 || c->n_mels < 1 || c->n_mels > 1024 ||
      c->sample_rate < 1000 || !(c->f_max > c->f_min) || c->f_min < 0)
    return err_set(STENO_ERR_FORMAT,
                   "mel frontend: n_fft %d, win %d, hop %d, %d mels, %d Hz, %g–%g Hz is not valid",
                   nfft, c->win_length, c->hop, c->n_mels, c->sample_rate, c->f_min, c->f_max);
  m->c = *c;
  m->filters = mem_alloc((size_t)c->n_mels * (nfft / 2 + 1), sizeof *m->filters);
  m->window = mem_alloc((size_t)nfft, sizeof *m->window);
  m->twiddle = mem_alloc((size_t)nfft, sizeof *m->twiddle);
  if (!m->filters || !m->window || !m->twiddle) {
    mel_free(m);
    return STENO_ERR_NOMEM;
  }
  slaney_filters(c, m->filters);
  /* torch.hann_window(win, periodic=False), centred in n_fft as torch.stft pads it. */
  int off = (nfft - c->win_length) / 2;
  for (int k = 0; k < c->win_length; k++)
    m->window[off + k] = (double)(float)(0.5 - 0.5 * cos(2.0 * M_PI * k / (c->win_length - 1)));
  fft_twiddles(m->twiddle, nfft);
  return 0;
}

void mel_free(mel_frontend *m) {
  free(m->filters);
  free(m->window);
  free(m->twiddle);
  memset(m, 0, sizeof *m);
}

/* Per-feature normalization over the first `valid` frames: (x − mean) /
 * (unbiased std + 1e-5); frames past them are zeroed. */
static void normalize(float *x, size_t frames, size_t valid, int n_mels, bool on) {
  for (int m = 0; on && m < n_mels; m++) {
    double sum = 0, sq = 0;
    for (size_t t = 0; t < valid; t++) sum += x[t * n_mels + m];
    float mean = (float)(sum / (double)valid);
    for (size_t t = 0; t < valid; t++) {
      double d = x[t * n_mels + m] - mean;
      sq += d * d;
    }
    float std = (float)sqrt(sq / (double)(valid - 1));
    for (size_t t = 0; t < valid; t++) x[t * n_mels + m] = (x[t * n_mels + m] - mean) / (std + 1e-5f);
  }
  memset(x + valid * n_mels, 0, (frames - valid) * n_mels * sizeof *x);
}

int mel_compute(const mel_frontend *m, const float *pcm, size_t n, float *out, size_t *valid) {
  const mel_config *c = &m->c;
  size_t frames = mel_frames(m, n);
  *valid = n / (size_t)c->hop;
  if (*valid < 2) return err_set(STENO_ERR_INVALID, "audio of %zu samples is too short", n);
  int nfft = c->n_fft, bins = nfft / 2 + 1, half = nfft / 2;
  double *buf = mem_alloc((size_t)nfft * 2 + (size_t)bins, sizeof *buf);
  if (!buf) return STENO_ERR_NOMEM;
  double *power = buf + 2 * nfft;
  for (size_t t = 0; t < frames; t++) {
    for (int j = 0; j < nfft; j++) {
      /* Sample t·hop + j − n_fft/2 of the pre-emphasized signal, zero outside. */
      long s = (long)(t * (size_t)c->hop) + j - half;
      float v = 0;
      if (s >= 0 && (size_t)s < n)
        v = s > 0 && c->preemphasis != 0 ? pcm[s] - c->preemphasis * pcm[s - 1] : pcm[s];
      buf[2 * j] = v * m->window[j];
      buf[2 * j + 1] = 0;
    }
    fft_complex(buf, nfft, m->twiddle);
    for (int k = 0; k < bins; k++)
      power[k] = (double)(float)(buf[2 * k] * buf[2 * k] + buf[2 * k + 1] * buf[2 * k + 1]);
    for (int b = 0; b < c->n_mels; b++) {
      const float *f = m->filters + (size_t)b * bins;
      double acc = 0;
      for (int k = 0; k < bins; k++) acc += f[k] * power[k];
      out[t * c->n_mels + b] = logf((float)acc + 5.960464477539063e-08f);
    }
  }
  free(buf);
  normalize(out, frames, *valid, c->n_mels, c->normalize);
  return 0;
}
