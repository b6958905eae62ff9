/* GigaAM's log-mel frontend (torchaudio's MelSpectrogram as GigaAM v3 sets it
 * up, transcribe.cpp's gigaam mel): frames of n_fft samples every hop with no
 * padding at all (center = false), times the model's stored window, power
 * spectrum, the model's stored filterbank (HTK mel filters), then
 * ln(clamp(x, 1e-9, 1e9)). No pre-emphasis, dither or normalisation.
 * Arithmetic in double. */
#ifndef STENO_FRONTEND_GIGAAM_MEL_H
#define STENO_FRONTEND_GIGAAM_MEL_H

#include <stddef.h>

#include "frontend/fft.h"
#include "frontend/melbank.h"

typedef struct {
  int n_fft, hop, n_mels, bins; /* bins = n_fft/2 + 1 */
  melbank bank;
  double *window; /* [n_fft] */
  fft_plan fft;
} gmel;

/* Copies the filterbank [n_mels][n_fft/2 + 1] and the window [n_fft]. */
int gmel_init(gmel *m, int n_fft, int hop, int n_mels, const float *filters, const float *window);
void gmel_free(gmel *m);

/* Frames of an n-sample clip: (n − n_fft)/hop + 1, or 0 when n < n_fft. */
size_t gmel_frames(const gmel *m, size_t n);

/* The log-mel of the clip, frame-major [frames][n_mels] in a new array (*out,
 * NULL when there are no frames); *frames as gmel_frames. */
int gmel_compute(const gmel *m, const float *pcm, size_t n, float **out, size_t *frames);

#endif
