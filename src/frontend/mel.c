#include "frontend/mel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pool.h"
#include "frontend/fft.h"
#include "frontend/frames.h"

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
static bool slaney_filters(const mel_config *c, float *out) {
  int bins = c->n_fft / 2 + 1, n = c->n_mels;
  double lo = hz_to_mel(c->f_min), hi = hz_to_mel(c->f_max);
  double *pts = malloc((size_t)(n + 2) * sizeof *pts);
  if (!pts) return false;
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
  return true;
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
  float *dense = mem_alloc((size_t)c->n_mels * (nfft / 2 + 1), sizeof *dense);
  m->window = mem_alloc((size_t)nfft, sizeof *m->window);
  size_t nbank = (size_t)c->n_mels * (nfft / 2 + 1);
  if (dense && c->filters) memcpy(dense, c->filters, nbank * sizeof *dense);
  int st = dense && m->window && (c->filters || slaney_filters(c, dense)) ? 0 : STENO_ERR_NOMEM;
  if (!st) st = melbank_init(&m->bank, dense, c->n_mels, nfft / 2 + 1);
  if (!st) st = fft_plan_init(&m->fft, nfft);
  free(dense);
  if (st) {
    mel_free(m);
    return st;
  }
  /* torch.hann_window(win, periodic=False), centred in n_fft as torch.stft pads it. */
  int off = (nfft - c->win_length) / 2;
  for (int k = 0; k < c->win_length; k++) {
    double hann = (double)(float)(0.5 - 0.5 * cos(2.0 * M_PI * k / (c->win_length - 1)));
    m->window[off + k] = c->window ? (double)c->window[k] : hann;
  }
  m->c.window = m->c.filters = NULL; /* the caller's arrays need not outlive init */
  return 0;
}

void mel_free(mel_frontend *m) {
  melbank_free(&m->bank);
  free(m->window);
  fft_plan_free(&m->fft);
  memset(m, 0, sizeof *m);
}

/* Per-feature normalization over the first `valid` frames: (x − mean) /
 * (unbiased std + 1e-5). Each feature's sums run over the frames in order;
 * the features go in groups of NORM_GROUP (a 64-byte line of each row) that
 * run side by side on the lent pool, in turn where there is none (the same
 * bits either way). Reading src and writing dst (which may be src) spares a
 * caller that keeps both a copy. */
enum { NORM_GROUP = 16 };

typedef struct {
  float *dst;
  const float *src;
  size_t valid;
  int n_mels;
} norm_job;

static void norm_group(void *ctx, int group) {
  const norm_job *j = ctx;
  size_t M = (size_t)j->n_mels, m0 = (size_t)group * NORM_GROUP;
  size_t w = M - m0 < NORM_GROUP ? M - m0 : NORM_GROUP;
  double sum[NORM_GROUP] = {0}, sq[NORM_GROUP] = {0};
  float mean[NORM_GROUP], scale[NORM_GROUP];
  const float *src = j->src + m0;
  float *dst = j->dst + m0;
  for (size_t t = 0; t < j->valid; t++)
    for (size_t m = 0; m < w; m++) sum[m] += src[t * M + m];
  for (size_t m = 0; m < w; m++) mean[m] = (float)(sum[m] / (double)j->valid);
  for (size_t t = 0; t < j->valid; t++)
    for (size_t m = 0; m < w; m++) {
      double d = src[t * M + m] - mean[m];
      sq[m] += d * d;
    }
  for (size_t m = 0; m < w; m++) scale[m] = (float)sqrt(sq[m] / (double)(j->valid - 1)) + 1e-5f;
  for (size_t t = 0; t < j->valid; t++)
    for (size_t m = 0; m < w; m++) dst[t * M + m] = (src[t * M + m] - mean[m]) / scale[m];
}

int mel_normalize_into(float *dst, const float *src, size_t valid, int n_mels) {
  if (n_mels < 1) return err_set(STENO_ERR_INVALID, "normalizing %d features", n_mels);
  norm_job j = {dst, src, valid, n_mels};
  pool_run_lent((n_mels + NORM_GROUP - 1) / NORM_GROUP, norm_group, &j);
  return 0;
}

int mel_normalize(float *x, size_t valid, int n_mels) { return mel_normalize_into(x, x, valid, n_mels); }

/* Frame t of the pre-emphasized signal, zero outside the clip: samples
 * t·hop − n_fft/2 … + n_fft. */
static void frame_samples(const mel_config *c, const float *pcm, size_t n, size_t t, float *out) {
  long s0 = (long)(t * (size_t)c->hop) - c->n_fft / 2;
  float pre = c->preemphasis;
  if (s0 >= 1 && s0 + c->n_fft <= (long)n && pre != 0) {
    for (int j = 0; j < c->n_fft; j++) out[j] = pcm[s0 + j] - pre * pcm[s0 + j - 1];
    return;
  }
  for (int j = 0; j < c->n_fft; j++) {
    long s = s0 + j;
    float v = 0;
    if (s >= 0 && (size_t)s < n) v = s > 0 && pre != 0 ? pcm[s] - pre * pcm[s - 1] : pcm[s];
    out[j] = v;
  }
}

/* log(mel energies + 2^-24) of one power spectrum, rounded to f32 first as
 * transformers' f32 STFT does. */
static void log_mel(const mel_frontend *m, double *power, double *energy, float *out) {
  for (int k = 0; k <= m->c.n_fft / 2; k++) power[k] = (float)power[k];
  melbank_apply(&m->bank, power, energy);
  for (int b = 0; b < m->c.n_mels; b++) out[b] = logf((float)energy[b] + 5.960464477539063e-08f);
}

typedef struct {
  const mel_frontend *m;
  const float *pcm;
  size_t n;
  float *out;
} mel_job;

/* Frames [t0, t1) from t0 even, two per complex transform (the second is
 * zeros past the last frame). Scratch: n_fft·8 + bins·2 + n_mels doubles. */
static void mel_chunk(void *ctx, size_t t0, size_t t1, int chunk, double *buf) {
  (void)chunk;
  const mel_job *j = ctx;
  const mel_config *c = &j->m->c;
  int nfft = c->n_fft, bins = nfft / 2 + 1;
  float *a = (float *)(buf + 6 * nfft), *b = a + nfft;
  double *pa = buf + 7 * nfft, *pb = pa + bins, *energy = pb + bins;
  size_t M = (size_t)c->n_mels;
  for (size_t t = t0; t < t1; t += 2) {
    bool pair = t + 1 < t1;
    frame_samples(c, j->pcm, j->n, t, a);
    if (pair) frame_samples(c, j->pcm, j->n, t + 1, b);
    fft_power_pair(&j->m->fft, a, pair ? b : NULL, j->m->window, buf, pa, pb);
    log_mel(j->m, pa, energy, j->out + t * M);
    if (pair) log_mel(j->m, pb, energy, j->out + (t + 1) * M);
  }
}

int mel_compute(const mel_frontend *m, const float *pcm, size_t n, float *out, size_t *valid) {
  const mel_config *c = &m->c;
  size_t frames = mel_frames(m, n), M = (size_t)c->n_mels;
  *valid = n / (size_t)c->hop;
  if (*valid < 2) return err_set(STENO_ERR_INVALID, "audio of %zu samples is too short", n);
  size_t nfft = (size_t)c->n_fft;
  mel_job job = {m, pcm, n, out};
  TRY(frames_run(frames, 8 * nfft + 2 * (nfft / 2 + 1) + M, mel_chunk, &job));
  memset(out + *valid * M, 0, (frames - *valid) * M * sizeof *out);
  return c->normalize ? mel_normalize(out, *valid, c->n_mels) : 0;
}
