/* Log-mel features as NeMo (and transformers' ParakeetFeatureExtractor)
 * compute them: pre-emphasis, zero-padded centred frames, a symmetric Hann
 * window inside an n_fft FFT, power spectrum, Slaney mel filters, log with a
 * 2^-24 guard, and per-feature normalization over the valid frames. */
#ifndef STENO_FRONTEND_MEL_H
#define STENO_FRONTEND_MEL_H

#include <stdbool.h>
#include <stddef.h>

#include "frontend/fft.h"
#include "frontend/melbank.h"

typedef struct {
  int sample_rate, n_fft, win_length, hop, n_mels;
  float preemphasis; /* 0: none */
  float f_min, f_max;
  bool normalize;    /* per_feature; else raw log-mel */
  /* Optional constants a checkpoint carries (copied at init; NULL: computed):
   * the window [win_length] and the filterbank [n_mels][n_fft/2 + 1]. */
  const float *window, *filters;
} mel_config;

typedef struct {
  mel_config c;
  melbank bank;   /* Slaney filters */
  double *window; /* [n_fft]: the Hann window centred, zeros around */
  fft_plan fft;   /* n_fft */
} mel_frontend;

int mel_init(mel_frontend *m, const mel_config *c);
void mel_free(mel_frontend *m);

/* Frames n_samples / hop + 1, of which n_samples / hop are valid (the rest 0). */
static inline size_t mel_frames(const mel_frontend *m, size_t n) { return n / (size_t)m->c.hop + 1; }

/* Features of n samples into out [frames][n_mels]; *valid gets the valid frames. */
int mel_compute(const mel_frontend *m, const float *pcm, size_t n, float *out, size_t *valid);

/* Per-feature normalization of the first `valid` rows of x [rows][n_mels]
 * (mean, unbiased std + 1e-5), as mel_compute does with c.normalize. */
int mel_normalize(float *x, size_t valid, int n_mels);

/* The same from src into dst (which may be src): the same bits as
 * mel_normalize on a copy of src's first `valid` rows; dst's other rows are
 * left as they are. */
int mel_normalize_into(float *dst, const float *src, size_t valid, int n_mels);

#endif
