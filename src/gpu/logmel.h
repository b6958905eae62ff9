/* Log-mel features on the GPU, written where the encoder reads them: NeMo's
 * (logmel.comp, logmel_norm.comp: src/frontend/mel.c's mel_compute, FFT in
 * double, clips side by side) and Whisper's (wmel.comp, wmel_norm.comp:
 * src/frontend/whisper_mel.c's wmel_compute, a direct DFT in double). The
 * family's frontend gives the constants (window, sparse filterbank), so this
 * layer needs no frontend. */
#ifndef STENO_GPU_LOGMEL_H
#define STENO_GPU_LOGMEL_H

#include "gpu/gpu.h"

typedef struct {
  uint32_t n_fft, hop, n_mels;
  float preemphasis; /* 0: none */
  bool normalize;    /* per-feature normalization over each clip's valid frames */
  const double *window;  /* [n_fft]: the window centred, zeros around */
  const int *first;      /* [n_mels]: each filter's first bin */
  const int *start;      /* [n_mels + 1]: filter m's weights are weights[start[m] … start[m + 1]) */
  const float *weights;
} gpu_logmel_config;

typedef struct gpu_logmel gpu_logmel;

/* Whether the device can run it for frames of n_fft: doubles in shaders, and
 * n_fft a power of two from 16 to 1 024. */
bool gpu_logmel_offered(const gpu_device *dev, uint32_t n_fft);

/* The constants on the device; STENO_ERR_UNSUPPORTED where not offered. */
int gpu_logmel_new(gpu_device *dev, const gpu_logmel_config *c, gpu_logmel **out);
void gpu_logmel_free(gpu_logmel *lm);

/* Floats of the input of `clips` clips of `samples` samples in all. */
size_t gpu_logmel_input_floats(uint32_t clips, size_t samples);

/* The input (a header per clip, then the samples) into `host`
 * (gpu_logmel_input_floats of them): clip i's n[i] samples pcm[i], whose
 * valid frames are n[i] / hop. */
void gpu_logmel_input(const gpu_logmel *lm, const float *const *pcm, const size_t *n,
                      uint32_t clips, float *host);

/* Records the features of the input's clips into y [clips][pitch][n_mels]:
 * rows below a clip's valid frames its log-mel (normalized where the config
 * says), the rest up to pitch 0. pitch must hold every clip's valid frames. */
void gpu_logmel_record(gpu_rec *rec, const gpu_logmel *lm, gpu_buffer *in, uint32_t clips,
                       uint32_t pitch, gpu_buffer *y);

/* ---- Whisper's ---- */

typedef struct {
  uint32_t n_fft, hop, n_mels;
  const double *window;  /* [n_fft] */
  const int *first, *start;
  const float *weights;  /* the sparse filterbank, as gpu_logmel_config's */
  const float *pad;      /* [n_mels]: the log-mel of a frame wholly in the zero padding */
  float pad_top;         /* its largest value */
} gpu_wmel_config;

typedef struct gpu_wmel gpu_wmel;

/* Whether the device can run it: doubles in shaders, n_fft from 16 to 1 024. */
bool gpu_wmel_offered(const gpu_device *dev, uint32_t n_fft);

int gpu_wmel_new(gpu_device *dev, const gpu_wmel_config *c, gpu_wmel **out);
void gpu_wmel_free(gpu_wmel *wm);

/* Records the normalized log-mel of a clip of n samples (x: [n] f32) padded
 * to len ≥ n into y [all][n_mels]: frames [0, audio) computed, [audio,
 * frames) the padding's frame, [frames, all) 0, as wmel_compute with its
 * frames and audio frames (wmel_frames, wmel_audio_frames); top: scratch of
 * `audio` floats. */
void gpu_wmel_record(gpu_rec *rec, const gpu_wmel *wm, gpu_buffer *x, uint32_t n, uint32_t len,
                     uint32_t audio, uint32_t frames, uint32_t all, gpu_buffer *top, gpu_buffer *y);

#endif
