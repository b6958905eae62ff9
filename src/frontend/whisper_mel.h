/* Whisper's log-mel frontend (OpenAI's log_mel_spectrogram, transformers'
 * WhisperFeatureExtractor): a clip of at most one window is zero-padded to the
 * window's samples first (frames wholly in those zeros are not transformed:
 * they get a frame of zeros' log-mel, the same bits); reflect-padded centred
 * frames of n_fft samples with a periodic Hann window; power spectrum; the
 * model's mel filterbank; log10 with a 1e-10 floor; the last frame dropped;
 * then, over the whole clip, a floor at (max − 8) and (x + 4) / 4. Arithmetic
 * in double. */
#ifndef STENO_FRONTEND_WHISPER_MEL_H
#define STENO_FRONTEND_WHISPER_MEL_H

#include <stddef.h>

#include "frontend/fft.h"
#include "frontend/melbank.h"

typedef struct {
  int n_fft, hop, n_mels, bins; /* bins = n_fft/2 + 1 */
  size_t n_samples;             /* a window's samples: shorter clips are padded to it */
  melbank bank;                 /* the model's filters */
  double *window;               /* [n_fft] */
  fft_plan fft;
  float *pad;                   /* [n_mels]: the log-mel of a frame wholly in the zero
                                   padding, through the same transform as any frame */
  float pad_top;                /* its largest value */
} wmel;

/* Copies the filterbank [n_mels][n_fft/2 + 1] and the window [n_fft]. */
int wmel_init(wmel *m, int n_fft, int hop, int n_mels, size_t n_samples, const float *filters,
              const float *window);
void wmel_free(wmel *m);

/* Mel frames of an n-sample clip: max(n, n_samples) / hop. */
size_t wmel_frames(const wmel *m, size_t n);

/* Frames [0, that) of an n-sample clip are computed: those that read one of
 * its samples at least, rounded up to a whole FFT pair; the others lie wholly
 * in the zero padding. */
size_t wmel_audio_frames(const wmel *m, size_t n);

/* The normalized log-mel of the whole clip, frame-major [frames][n_mels] in a
 * new array (*out); *frames as wmel_frames. Frames from wmel_audio_frames on
 * are m->pad normalized: what computing them gives, bit for bit. */
int wmel_compute(const wmel *m, const float *pcm, size_t n, float **out, size_t *frames);

#endif
