#include "models/logmel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"

/* The load's check: the GPU's features within this of the CPU's (absolute, on
 * log-mel values or normalized ones); test_logmel sees 4.5e-5 at most on lavapipe
 * (a 2-frame clip's normalization), ~1e-6 elsewhere. */
#define CHECK_TOL 1e-3
#define CHECK_SAMPLES 9600 /* 0.6 s */

void logmel_config(const mel_frontend *mel, gpu_logmel_config *c) {
  *c = (gpu_logmel_config){.n_fft = (uint32_t)mel->c.n_fft,
                           .hop = (uint32_t)mel->c.hop,
                           .n_mels = (uint32_t)mel->c.n_mels,
                           .preemphasis = mel->c.preemphasis,
                           .normalize = mel->c.normalize,
                           .window = mel->window,
                           .first = mel->bank.first,
                           .start = mel->bank.start,
                           .weights = mel->bank.weights};
}

/* Tones, a gap of silence and a little noise: every path of the frames. */
static void test_signal(float *x, size_t n) {
  uint32_t s = 12345;
  for (size_t i = 0; i < n; i++) {
    double t = (double)i / 16000.0;
    s = s * 1664525u + 1013904223u;
    double noise = ((double)(s >> 8) / 16777216.0 - 0.5) * 2e-3;
    double tone = 0.3 * sin(2 * M_PI * 310 * t) + 0.1 * sin(2 * M_PI * 1234.5 * t) +
                  0.02 * sin(2 * M_PI * 4100 * t);
    x[i] = i > n / 3 && i < n / 2 ? 0.0f : (float)(tone + noise);
  }
}

/* The largest |got − want| over n values, want's past n_want taken as 0 (a
 * NaN stays the answer). */
static double worst_diff(const float *got, const float *want, size_t n_want, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (i < n_want ? want[i] : 0.0));
    if (!(d <= worst)) worst = d;
  }
  return worst;
}

double logmel_check(gpu_device *dev, const mel_frontend *mel, const gpu_logmel *lm, size_t samples) {
  size_t frames = mel_frames(mel, samples), valid = 0, F = (size_t)mel->c.n_mels;
  size_t in_floats = gpu_logmel_input_floats(1, samples);
  float *pcm = mem_alloc(samples, sizeof *pcm), *want = mem_alloc(frames * F, sizeof *want);
  float *host = mem_alloc(in_floats, sizeof *host), *got = mem_alloc(frames * F, sizeof *got);
  gpu_buffer *in = NULL, *y = NULL;
  gpu_rec *rec = NULL;
  int st = pcm && want && host && got ? 0 : STENO_ERR_NOMEM;
  if (!st) {
    test_signal(pcm, samples);
    st = mel_compute(mel, pcm, samples, want, &valid);
  }
  if (!st) {
    const float *clip = pcm;
    gpu_logmel_input(lm, &clip, &samples, 1, host);
    st = gpu_buffer_from(dev, host, in_floats * sizeof *host, &in);
  }
  if (!st) st = gpu_buffer_new(dev, frames * F * sizeof(float), &y);
  if (!st) st = gpu_rec_new(dev, &rec);
  if (!st) st = gpu_rec_begin(rec);
  if (!st) {
    gpu_logmel_record(rec, lm, in, 1, (uint32_t)frames, y);
    st = gpu_rec_run(rec);
  }
  if (!st) st = gpu_download(y, 0, got, frames * F * sizeof *got);
  double worst = st ? 0 : worst_diff(got, want, frames * F, frames * F);
  gpu_rec_free(rec);
  gpu_buffer_free(in);
  gpu_buffer_free(y);
  free(pcm), free(want), free(host), free(got);
  return st ? -(double)st : worst;
}

/* Whether a family's features are to be made on dev (offered: it can make
 * them for frames of n_fft): gpu_work_here's rule for STENO_FEATURES. */
static bool wanted(gpu_device *dev, bool offered, int n_fft) {
  bool forced;
  if (!gpu_work_here(dev, "STENO_FEATURES", &forced)) return false;
  if (!offered && forced)
    log_warn("STENO_FEATURES=gpu: %s cannot make these features (n_fft %d, doubles: %s); "
             "the CPU makes them", gpu_device_info(dev)->name, n_fft,
             gpu_device_info(dev)->float64 ? "yes" : "no");
  return offered;
}

/* The load's check of `what`: a status where it could not run (worst < 0),
 * else 0 with *ok whether it passed (within CHECK_TOL; a warning if not). */
static int judged(gpu_device *dev, const char *what, double worst, bool *ok) {
  *ok = worst >= 0 && worst <= CHECK_TOL;
  if (worst < 0) return (int)-worst;
  if (!*ok)
    log_warn("%s: %s on the GPU off by %g from the CPU's; the CPU makes them",
             gpu_device_info(dev)->name, what, worst);
  return 0;
}

int logmel_for_model(gpu_device *dev, const mel_frontend *mel, gpu_logmel **out) {
  *out = NULL;
  if (!wanted(dev, gpu_logmel_offered(dev, (uint32_t)mel->c.n_fft), mel->c.n_fft)) return 0;
  gpu_logmel_config c;
  logmel_config(mel, &c);
  gpu_logmel *lm;
  TRY(gpu_logmel_new(dev, &c, &lm));
  bool ok;
  int st = judged(dev, "log-mel features", logmel_check(dev, mel, lm, CHECK_SAMPLES), &ok);
  if (st || !ok) gpu_logmel_free(lm);
  else *out = lm;
  return st;
}

void wmel_gpu_config(const wmel *mel, gpu_wmel_config *c) {
  *c = (gpu_wmel_config){.n_fft = (uint32_t)mel->n_fft,
                         .hop = (uint32_t)mel->hop,
                         .n_mels = (uint32_t)mel->n_mels,
                         .window = mel->window,
                         .first = mel->bank.first,
                         .start = mel->bank.start,
                         .weights = mel->bank.weights,
                         .pad = mel->pad,
                         .pad_top = mel->pad_top};
}

double wmel_check(gpu_device *dev, const wmel *mel, const gpu_wmel *wm, size_t samples) {
  size_t len = samples > mel->n_samples ? samples : mel->n_samples, F = (size_t)mel->n_mels;
  size_t T = wmel_frames(mel, samples), A = wmel_audio_frames(mel, samples), all = T + 1;
  float *pcm = mem_alloc(samples, sizeof *pcm), *want = NULL, *got = mem_alloc(all * F, sizeof *got);
  gpu_buffer *x = NULL, *top = NULL, *y = NULL;
  gpu_rec *rec = NULL;
  size_t frames = 0;
  int st = pcm && got && A ? 0 : STENO_ERR_NOMEM;
  if (!st) {
    test_signal(pcm, samples);
    st = wmel_compute(mel, pcm, samples, &want, &frames);
  }
  if (!st) st = gpu_buffer_from(dev, pcm, samples * sizeof *pcm, &x);
  if (!st) st = gpu_buffer_new(dev, A * sizeof(float), &top);
  if (!st) st = gpu_buffer_new(dev, all * F * sizeof(float), &y);
  if (!st) st = gpu_rec_new(dev, &rec);
  if (!st) st = gpu_rec_begin(rec);
  if (!st) {
    gpu_wmel_record(rec, wm, x, (uint32_t)samples, (uint32_t)len, (uint32_t)A, (uint32_t)T,
                    (uint32_t)all, top, y);
    st = gpu_rec_run(rec);
  }
  if (!st) st = gpu_download(y, 0, got, all * F * sizeof *got);
  double worst = st ? 0 : worst_diff(got, want, T * F, all * F); /* the frame past T: zeros */
  gpu_rec_free(rec);
  gpu_buffer_free(x), gpu_buffer_free(top), gpu_buffer_free(y);
  free(pcm), free(want), free(got);
  return st ? -(double)st : worst;
}

int wmel_for_model(gpu_device *dev, const wmel *mel, gpu_wmel **out) {
  *out = NULL;
  if (!wanted(dev, gpu_wmel_offered(dev, (uint32_t)mel->n_fft), mel->n_fft)) return 0;
  gpu_wmel_config c;
  wmel_gpu_config(mel, &c);
  gpu_wmel *wm;
  TRY(gpu_wmel_new(dev, &c, &wm));
  bool ok;
  int st = judged(dev, "Whisper's log-mel features", wmel_check(dev, mel, wm, CHECK_SAMPLES), &ok);
  if (st || !ok) gpu_wmel_free(wm);
  else *out = wm;
  return st;
}
