#include "frontend/whisper_mel.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "frontend/frames.h"

size_t wmel_frames(const wmel *m, size_t n) {
  return (n > m->n_samples ? n : m->n_samples) / (size_t)m->hop;
}

/* Frame t reads samples t·hop − n_fft/2 … + n_fft, so it reads the clip
 * when t·hop < n + n_fft/2. Past the padded end, torch's reflection reads
 * back from len − 2 down to 2·len − 1 − (t·hop + n_fft − n_fft/2), which for
 * a frame before len/hop is never below its own start: a frame that reaches
 * the clip through the reflection reaches it directly too. Rounded up to a
 * whole pair (frames share one FFT two at a time, which can move the last
 * bit of each). */
size_t wmel_audio_frames(const wmel *m, size_t n) {
  size_t T = wmel_frames(m, n), hop = (size_t)m->hop;
  if (!n) return 0;
  size_t a = (n + (size_t)(m->n_fft / 2) + hop - 1) / hop;
  a += a % 2;
  return a < T ? a : T;
}

/* Sample i of the clip zero-padded to `len`, reflected at both ends as
 * torch.stft(center=True, pad_mode="reflect") does (the edge not repeated). */
static double sample(const float *pcm, size_t n, size_t len, long i) {
  if (i < 0) i = -i;
  if (i >= (long)len) i = 2 * ((long)len - 1) - i;
  return i >= 0 && (size_t)i < n ? pcm[i] : 0.0;
}

/* Frame t: samples t·hop − n_fft/2 … + n_fft, straight from pcm where they
 * lie inside it, else gathered into buf. */
static const float *frame_samples(const wmel *m, const float *pcm, size_t n, size_t len, size_t t,
                                  float *buf) {
  long start = (long)(t * (size_t)m->hop) - m->n_fft / 2;
  if (start >= 0 && start + m->n_fft <= (long)n) return pcm + start;
  for (int j = 0; j < m->n_fft; j++) buf[j] = (float)sample(pcm, n, len, start + j);
  return buf;
}

/* log10 of the mel energies of one power spectrum, floored at 1e-10. */
static float log_mel(const wmel *m, const double *power, double *energy, float *out) {
  melbank_apply(&m->bank, power, energy);
  float top = -INFINITY;
  for (int b = 0; b < m->n_mels; b++) {
    out[b] = (float)log10(energy[b] > 1e-10 ? energy[b] : 1e-10);
    top = fmaxf(top, out[b]);
  }
  return top;
}

/* A frame of the zero padding, paired with another as the full computation
 * pairs them, through the FFT and filterbank like any frame (so the bits are
 * those it would get; a frame of zeros has no power, so log10 of the floor). */
static int pad_frame(wmel *m) {
  size_t nfft = (size_t)m->n_fft;
  m->pad = mem_alloc((size_t)m->n_mels, sizeof *m->pad);
  double *buf = mem_alloc(7 * nfft + 2 * (size_t)m->bins + (size_t)m->n_mels, sizeof *buf);
  if (!m->pad || !buf) {
    free(buf);
    return STENO_ERR_NOMEM;
  }
  float *zeros = (float *)(buf + 6 * nfft);
  double *pa = buf + 7 * nfft, *pb = pa + m->bins, *energy = pb + m->bins;
  memset(zeros, 0, 2 * nfft * sizeof *zeros);
  fft_power_pair(&m->fft, zeros, zeros + nfft, m->window, buf, pa, pb);
  m->pad_top = log_mel(m, pa, energy, m->pad);
  free(buf);
  return 0;
}

int wmel_init(wmel *m, int n_fft, int hop, int n_mels, size_t n_samples, const float *filters,
              const float *window) {
  memset(m, 0, sizeof *m);
  if (n_fft < 16 || n_fft > 8192 || hop < 1 || hop > n_fft || n_mels < 1 || n_mels > 1024 ||
      n_samples < (size_t)n_fft || n_samples > ((size_t)1 << 32))
    return err_set(STENO_ERR_FORMAT, "whisper frontend: n_fft %d, hop %d, %d mels, %zu samples",
                   n_fft, hop, n_mels, n_samples);
  m->n_fft = n_fft, m->hop = hop, m->n_mels = n_mels, m->bins = n_fft / 2 + 1;
  m->n_samples = n_samples;
  m->window = mem_alloc((size_t)n_fft, sizeof *m->window);
  int st = m->window ? 0 : STENO_ERR_NOMEM;
  if (!st) st = melbank_init(&m->bank, filters, n_mels, m->bins);
  if (!st) st = fft_plan_init(&m->fft, n_fft);
  if (st) {
    wmel_free(m);
    return st;
  }
  for (int j = 0; j < n_fft; j++) m->window[j] = window[j];
  st = pad_frame(m);
  if (st) wmel_free(m);
  return st;
}

void wmel_free(wmel *m) {
  melbank_free(&m->bank);
  free(m->window);
  free(m->pad);
  fft_plan_free(&m->fft);
  memset(m, 0, sizeof *m);
}

typedef struct {
  const wmel *m;
  const float *pcm;
  size_t n, len;
  float *x;
  float top[FRAMES_MAX_CHUNKS]; /* each chunk's largest log-mel */
} wmel_job;

/* Frames [t0, t1) from t0 even, two per complex transform (the second is
 * zeros past the last frame). Scratch: n_fft·7 + bins·2 + n_mels doubles. */
static void wmel_chunk(void *ctx, size_t t0, size_t t1, int chunk, double *buf) {
  wmel_job *j = ctx;
  const wmel *m = j->m;
  size_t nfft = (size_t)m->n_fft, M = (size_t)m->n_mels;
  float *fa = (float *)(buf + 6 * nfft), *fb = fa + nfft;
  double *pa = buf + 7 * nfft, *pb = pa + m->bins, *energy = pb + m->bins;
  float top = -INFINITY;
  for (size_t t = t0; t < t1; t += 2) {
    bool pair = t + 1 < t1;
    const float *a = frame_samples(m, j->pcm, j->n, j->len, t, fa);
    const float *b = pair ? frame_samples(m, j->pcm, j->n, j->len, t + 1, fb) : NULL;
    fft_power_pair(&m->fft, a, b, m->window, buf, pa, pb);
    top = fmaxf(top, log_mel(m, pa, energy, j->x + t * M));
    if (pair) top = fmaxf(top, log_mel(m, pb, energy, j->x + (t + 1) * M));
  }
  j->top[chunk] = top;
}

static float normalized(float x, float top) { return (fmaxf(x, top - 8.0f) + 4.0f) / 4.0f; }

/* normalized() over frames [0, A) in place, and the padding's frame so into
 * frames [A, T). */
static void normalize(const wmel *m, float *x, size_t A, size_t T, float top) {
  size_t M = (size_t)m->n_mels;
  for (size_t i = 0; i < A * M; i++) x[i] = normalized(x[i], top);
  if (A == T) return;
  float *row = x + A * M;
  for (size_t b = 0; b < M; b++) row[b] = normalized(m->pad[b], top);
  for (size_t t = A + 1; t < T; t++) memcpy(x + t * M, row, M * sizeof *x);
}

int wmel_compute(const wmel *m, const float *pcm, size_t n, float **out, size_t *frames) {
  *out = NULL;
  /* A clip shorter than a window is padded to one before the STFT (its
   * reflection then mirrors zeros); a longer one is not padded. Only the
   * frames that read the clip are computed; the rest are the padding's. */
  size_t len = n > m->n_samples ? n : m->n_samples;
  size_t T = len / (size_t)m->hop, A = wmel_audio_frames(m, n), M = (size_t)m->n_mels;
  size_t nfft = (size_t)m->n_fft;
  *frames = T;
  wmel_job job = {m, pcm, n, len, mem_alloc(T, M * sizeof *job.x), {0}};
  if (!job.x) return STENO_ERR_NOMEM;
  for (int c = 0; c < FRAMES_MAX_CHUNKS; c++) job.top[c] = -INFINITY;
  int st = A ? frames_run(A, 7 * nfft + 2 * (size_t)m->bins + M, wmel_chunk, &job) : 0;
  if (st) {
    free(job.x);
    return st;
  }
  float top = A < T ? m->pad_top : -INFINITY;
  for (int c = 0; c < FRAMES_MAX_CHUNKS; c++) top = fmaxf(top, job.top[c]);
  normalize(m, job.x, A, T, top);
  *out = job.x;
  return 0;
}
