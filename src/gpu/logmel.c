#include "gpu/logmel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pool.h"

/* logmel.comp's invocations a workgroup; the words of a clip's header in its
 * input (sample offset, samples, valid frames, 0). */
enum { LOGMEL_WG = 64, HEADER = 4 };

/* logmel.comp's shared memory for n_fft N: N complex doubles, N/2 twiddles,
 * two power spectra of f32. */
static uint64_t shared_bytes(uint32_t n) { return 16ull * n + 8ull * (n / 2) + 8ull * (n / 2 + 1); }

struct gpu_logmel {
  gpu_logmel_config c; /* its arrays not kept */
  gpu_buffer *tw, *bank;
};

bool gpu_logmel_offered(const gpu_device *dev, uint32_t n_fft) {
  const gpu_info *i = gpu_device_info(dev);
  return i->float64 && n_fft >= 16 && n_fft <= 1024 && !(n_fft & (n_fft - 1)) &&
         shared_bytes(n_fft) <= i->max_shared_memory;
}

/* A frontend's shape and filters, checked: what both kernels read. */
static int check_frontend(const char *what, uint32_t n_fft, uint32_t hop, uint32_t F,
                          const double *window, const int *first, const int *start,
                          const float *weights) {
  if (hop < 1 || F < 1 || F > 65535u * 32 || !window || !first || !start || !weights ||
      start[0] != 0)
    return err_set(STENO_ERR_INVALID, "%s on the GPU: hop %u, %u mels", what, hop, F);
  for (uint32_t m = 0; m < F; m++)
    if (first[m] < 0 || start[m + 1] < start[m] ||
        first[m] + (start[m + 1] - start[m]) > (int)(n_fft / 2 + 1))
      return err_set(STENO_ERR_INVALID, "%s on the GPU: filter %u leaves the spectrum", what, m);
  return 0;
}

/* The sparse filterbank as the kernels read it: first bins, starts, weights. */
static int bank_buffer(gpu_device *dev, uint32_t F, const int *first, const int *start,
                       const float *weights, gpu_buffer **out) {
  size_t nw = (size_t)start[F];
  uint32_t *bank = mem_alloc(2 * (size_t)F + 1 + nw, sizeof *bank);
  if (!bank) return STENO_ERR_NOMEM;
  for (uint32_t m = 0; m < F; m++) bank[m] = (uint32_t)first[m];
  for (uint32_t m = 0; m <= F; m++) bank[F + m] = (uint32_t)start[m];
  memcpy(bank + 2 * F + 1, weights, nw * sizeof *weights);
  int st = gpu_buffer_from(dev, bank, (2 * (size_t)F + 1 + nw) * sizeof *bank, out);
  free(bank);
  return st;
}

/* `count` twiddles e^(−2πik/N) as (re, im) pairs, then the window [N]. */
static int twiddle_buffer(gpu_device *dev, uint32_t N, uint32_t count, const double *window,
                          gpu_buffer **out) {
  double *tw = mem_alloc(2 * (size_t)count + N, sizeof *tw);
  if (!tw) return STENO_ERR_NOMEM;
  for (uint32_t k = 0; k < count; k++) {
    double a = -2.0 * M_PI * k / N;
    tw[2 * k] = cos(a), tw[2 * k + 1] = sin(a);
  }
  memcpy(tw + 2 * count, window, N * sizeof *tw);
  int st = gpu_buffer_from(dev, tw, (2 * (size_t)count + N) * sizeof *tw, out);
  free(tw);
  return st;
}

int gpu_logmel_new(gpu_device *dev, const gpu_logmel_config *c, gpu_logmel **out) {
  *out = NULL;
  if (!gpu_logmel_offered(dev, c->n_fft))
    return err_set(STENO_ERR_UNSUPPORTED, "log-mel on the GPU: n_fft %u on a device %s doubles",
                   c->n_fft, gpu_device_info(dev)->float64 ? "with" : "without");
  TRY(check_frontend("log-mel", c->n_fft, c->hop, c->n_mels, c->window, c->first, c->start,
                     c->weights));
  gpu_logmel *lm = calloc(1, sizeof *lm);
  if (!lm) return STENO_ERR_NOMEM;
  lm->c = *c;
  lm->c.window = NULL, lm->c.first = lm->c.start = NULL, lm->c.weights = NULL;
  int st = twiddle_buffer(dev, c->n_fft, c->n_fft / 2, c->window, &lm->tw);
  if (!st) st = bank_buffer(dev, c->n_mels, c->first, c->start, c->weights, &lm->bank);
  if (st) {
    gpu_logmel_free(lm);
    return st;
  }
  *out = lm;
  return 0;
}

void gpu_logmel_free(gpu_logmel *lm) {
  if (!lm) return;
  gpu_buffer_free(lm->tw);
  gpu_buffer_free(lm->bank);
  free(lm);
}

size_t gpu_logmel_input_floats(uint32_t clips, size_t samples) {
  return (size_t)HEADER * clips + samples;
}

static float word(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

typedef struct {
  const float *const *pcm;
  const size_t *n;
  float *host;
} input_job;

/* Clip i's samples to where its header says (the clips side by side on the
 * threads lent to the caller). */
static void input_clip(void *ctx, int i) {
  const input_job *j = ctx;
  uint32_t at;
  memcpy(&at, &j->host[HEADER * i], sizeof at);
  memcpy(j->host + at, j->pcm[i], j->n[i] * sizeof *j->host);
}

void gpu_logmel_input(const gpu_logmel *lm, const float *const *pcm, const size_t *n,
                      uint32_t clips, float *host) {
  size_t at = (size_t)HEADER * clips;
  for (uint32_t i = 0; i < clips; i++) {
    host[HEADER * i] = word((uint32_t)at);
    host[HEADER * i + 1] = word((uint32_t)n[i]);
    host[HEADER * i + 2] = word((uint32_t)(n[i] / lm->c.hop));
    host[HEADER * i + 3] = 0;
    at += n[i];
  }
  input_job j = {pcm, n, host};
  if (clips == 1) input_clip(&j, 0);
  else pool_run_lent((int)clips, input_clip, &j);
}

void gpu_logmel_record(gpu_rec *rec, const gpu_logmel *lm, gpu_buffer *in, uint32_t clips,
                       uint32_t pitch, gpu_buffer *y) {
  uint32_t F = lm ? lm->c.n_mels : 0;
  uint64_t out = (uint64_t)clips * pitch * F;
  if (!lm || !in || !y || clips == 0 || clips > 65535 || pitch == 0 ||
      gpu_buffer_size(in) < (uint64_t)HEADER * clips * sizeof(float) ||
      gpu_buffer_size(in) / sizeof(float) > UINT32_MAX || out > UINT32_MAX ||
      gpu_buffer_size(y) < out * sizeof(float)) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "logmel: bad shape (%u clips of %u frames, %u mels) or buffers",
                              clips, pitch, F));
    return;
  }
  uint32_t N = lm->c.n_fft, logn = 0;
  while ((1u << logn) < N) logn++;
  uint32_t spec[] = {LOGMEL_WG, N, logn};
  gpu_kernel *k = gpu_rec_kernel(rec, "logmel", spec, 3);
  struct {
    uint32_t pitch, F, hop;
    float pre;
  } push = {pitch, F, lm->c.hop, lm->c.preemphasis};
  gpu_buffer *bufs[] = {in, lm->tw, lm->bank, y};
  uint32_t pairs = pitch / 2 + pitch % 2;
  gpu_dispatch(rec, k, bufs, 4, &push, sizeof push, pairs < 65535 ? pairs : 65535, clips, 1);
  if (!lm->c.normalize) return;
  struct {
    uint32_t pitch, F;
  } np = {pitch, F};
  gpu_buffer *nb[] = {in, y};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "logmel_norm", NULL, 0), nb, 2, &np, sizeof np,
               (F + 31) / 32, clips, 1);
}

/* ---- Whisper's ---- */

struct gpu_wmel {
  gpu_wmel_config c; /* its arrays not kept */
  gpu_buffer *tw, *bank, *pad;
};

/* wmel.comp's shared memory for n_fft N: N twiddles, the first stage's N
 * values, the frame, the power spectrum, the workgroup's maxima. */
static uint64_t wmel_shared(uint32_t n) { return 32ull * n + 8ull * n + 8ull * (n / 2 + 1) + 256; }

/* wmel.comp's split N = N1·N2: N1 the divisor nearest √N from below (1 for a prime). */
static uint32_t wmel_n1(uint32_t n) {
  uint32_t best = 1;
  for (uint32_t d = 1; d * d <= n; d++)
    if (n % d == 0) best = d;
  return best;
}

bool gpu_wmel_offered(const gpu_device *dev, uint32_t n_fft) {
  const gpu_info *i = gpu_device_info(dev);
  return i->float64 && n_fft >= 16 && n_fft <= 1024 && wmel_shared(n_fft) <= i->max_shared_memory;
}

int gpu_wmel_new(gpu_device *dev, const gpu_wmel_config *c, gpu_wmel **out) {
  *out = NULL;
  if (!gpu_wmel_offered(dev, c->n_fft))
    return err_set(STENO_ERR_UNSUPPORTED,
                   "Whisper's log-mel on the GPU: n_fft %u on a device %s doubles", c->n_fft,
                   gpu_device_info(dev)->float64 ? "with" : "without");
  TRY(check_frontend("Whisper's log-mel", c->n_fft, c->hop, c->n_mels, c->window, c->first,
                     c->start, c->weights));
  if (!c->pad) return err_set(STENO_ERR_INVALID, "Whisper's log-mel on the GPU: no padding frame");
  gpu_wmel *wm = calloc(1, sizeof *wm);
  if (!wm) return STENO_ERR_NOMEM;
  wm->c = *c;
  wm->c.window = NULL, wm->c.first = wm->c.start = NULL, wm->c.weights = wm->c.pad = NULL;
  int st = twiddle_buffer(dev, c->n_fft, c->n_fft, c->window, &wm->tw);
  if (!st) st = bank_buffer(dev, c->n_mels, c->first, c->start, c->weights, &wm->bank);
  if (!st) st = gpu_buffer_from(dev, c->pad, c->n_mels * sizeof *c->pad, &wm->pad);
  if (st) {
    gpu_wmel_free(wm);
    return st;
  }
  *out = wm;
  return 0;
}

void gpu_wmel_free(gpu_wmel *wm) {
  if (!wm) return;
  gpu_buffer_free(wm->tw);
  gpu_buffer_free(wm->bank);
  gpu_buffer_free(wm->pad);
  free(wm);
}

void gpu_wmel_record(gpu_rec *rec, const gpu_wmel *wm, gpu_buffer *x, uint32_t n, uint32_t len,
                     uint32_t audio, uint32_t frames, uint32_t all, gpu_buffer *top,
                     gpu_buffer *y) {
  uint32_t F = wm ? wm->c.n_mels : 0;
  uint64_t out = (uint64_t)all * F;
  if (!wm || !x || !y || !top || n == 0 || len < n || len > INT32_MAX / 2 || audio == 0 ||
      audio > frames || frames > all || out > UINT32_MAX ||
      gpu_buffer_size(x) < (uint64_t)n * sizeof(float) ||
      gpu_buffer_size(top) < (uint64_t)audio * sizeof(float) ||
      gpu_buffer_size(y) < out * sizeof(float) ||
      (uint64_t)(audio - 1) * wm->c.hop > (uint64_t)len + wm->c.n_fft / 2) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "wmel: bad shape (%u samples padded to %u, %u of %u frames, %u rows, "
                              "%u mels) or buffers",
                              n, len, audio, frames, all, F));
    return;
  }
  uint32_t N = wm->c.n_fft, n1 = wmel_n1(N), spec[] = {N, n1, N / n1};
  struct {
    uint32_t n, len, frames, F, hop;
  } push = {n, len, audio, F, wm->c.hop};
  gpu_buffer *bufs[] = {x, wm->tw, wm->bank, y, top};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "wmel", spec, 3), bufs, 5, &push, sizeof push,
               audio < 65535 ? audio : 65535, 1, 1);
  struct {
    uint32_t audio, frames, all, F;
    float pad_top;
  } np = {audio, frames, all, F, wm->c.pad_top};
  gpu_buffer *nb[] = {top, wm->pad, y};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "wmel_norm", NULL, 0), nb, 3, &np, sizeof np,
               all < 1024 ? all : 1024, 1, 1);
}
