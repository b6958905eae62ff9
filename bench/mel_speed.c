/* Times the CPU log-mel frontends: Parakeet's (mel_compute, NeMo settings) on an
 * 11 s clip and Whisper's (wmel_compute, 128 mels) on one 30 s window, then on
 * an 11 s clip (its own frames only vs zero-padded to 30 s by hand, in turn);
 * prints the best ms per call over the repetitions. With a file name it also
 * writes two outputs there (f32, Parakeet's then Whisper's 30 s) so two builds
 * can be compared. Then a batch of 16 such clips (Parakeet's batch features)
 * one after another and side by side (frames_run_clips), the two timed in turn
 * in one run. Last, one call's CPU work (the gate, then Parakeet's features)
 * with a pool started per call and with a session's pool, in turn.
 *   [STENO_THREADS=N] mel_speed [reps] [dump_file] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio/split.h"
#include "base/pool.h"
#include "frontend/frames.h"
#include "frontend/mel.h"
#include "frontend/whisper_mel.h"

enum { RATE = 16000, WFFT = 400, WMELS = 128 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Speech-like test audio: a gliding harmonic tone plus a little noise. */
static void make_clip(float *pcm, size_t n) {
  uint32_t s = 12345;
  double phase = 0;
  for (size_t i = 0; i < n; i++) {
    double f0 = 120 + 80 * sin(2 * M_PI * 0.3 * i / RATE);
    phase += 2 * M_PI * f0 / RATE;
    s = s * 1664525u + 1013904223u;
    double noise = ((s >> 8) / 16777216.0 - 0.5) * 0.02;
    pcm[i] = (float)(0.2 * sin(phase) + 0.1 * sin(3 * phase) + 0.05 * sin(7 * phase) + noise);
  }
}

/* Triangular filters evenly spaced in Slaney mel over 0–8 kHz: the shape of
 * Whisper's filterbank (the exact weights do not change the work). */
static void whisper_filters(float *fb) {
  int bins = WFFT / 2 + 1;
  double hi = 15.0 + 27.0 * log(8.0) / log(6.4), pts[WMELS + 2];
  for (int i = 0; i < WMELS + 2; i++) {
    double m = hi * i / (WMELS + 1);
    pts[i] = m < 15.0 ? 200.0 * m / 3.0 : 1000.0 * exp(log(6.4) * (m - 15.0) / 27.0);
  }
  for (int m = 0; m < WMELS; m++)
    for (int k = 0; k < bins; k++) {
      double f = 8000.0 * k / (bins - 1);
      double w = fmin((f - pts[m]) / (pts[m + 1] - pts[m]), (pts[m + 2] - f) / (pts[m + 2] - pts[m + 1]));
      fb[m * bins + k] = (float)fmax(0.0, w * 2.0 / (pts[m + 2] - pts[m]));
    }
}

static double time_parakeet(int reps, const float *pcm, size_t n, FILE *dump) {
  mel_config c = {.sample_rate = RATE, .n_fft = 512, .win_length = 400, .hop = 160, .n_mels = 128,
                  .preemphasis = 0.97f, .f_min = 0, .f_max = 8000, .normalize = true};
  mel_frontend m;
  if (mel_init(&m, &c)) return -1;
  size_t frames = mel_frames(&m, n), valid;
  float *out = malloc(frames * c.n_mels * sizeof *out);
  double best = INFINITY;
  for (int r = 0; out && r < reps; r++) {
    double t0 = now_ms();
    if (mel_compute(&m, pcm, n, out, &valid)) break;
    best = fmin(best, now_ms() - t0);
  }
  if (out && dump) fwrite(out, sizeof *out, frames * c.n_mels, dump);
  free(out);
  mel_free(&m);
  return best;
}

enum { BATCH = 16 };

typedef struct {
  const mel_frontend *m;
  const float *pcm;
  size_t n;
  float *out; /* [BATCH][frames][mels] */
} batch_job;

static int batch_clip(void *ctx, int c) {
  batch_job *b = ctx;
  size_t valid, size = mel_frames(b->m, b->n) * (size_t)b->m->c.n_mels;
  return mel_compute(b->m, b->pcm, b->n, b->out + (size_t)c * size, &valid);
}

/* BATCH copies of the clip one after another (each over all threads) and side
 * by side, in turn; best ms of each into ms[0], ms[1]. */
static int time_batch(int reps, const float *pcm, size_t n, double ms[2]) {
  mel_config c = {.sample_rate = RATE, .n_fft = 512, .win_length = 400, .hop = 160, .n_mels = 128,
                  .preemphasis = 0.97f, .f_min = 0, .f_max = 8000, .normalize = true};
  mel_frontend m;
  if (mel_init(&m, &c)) return -1;
  batch_job b = {&m, pcm, n, malloc(BATCH * mel_frames(&m, n) * c.n_mels * sizeof(float))};
  int st = b.out ? 0 : -1;
  ms[0] = ms[1] = INFINITY;
  for (int r = 0; !st && r < reps; r++) {
    double t0 = now_ms();
    for (int k = 0; !st && k < BATCH; k++) st = batch_clip(&b, k);
    double t1 = now_ms();
    if (!st) st = frames_run_clips(BATCH, batch_clip, &b);
    ms[0] = fmin(ms[0], t1 - t0), ms[1] = fmin(ms[1], now_ms() - t1);
  }
  free(b.out);
  mel_free(&m);
  return st;
}

/* One call's CPU work before the GPU's, for one 11 s clip: the gate
 * (split_quiet) then Parakeet's features, with a pool started for each call
 * (as before sessions kept one) and with a session's pool lent, in turn; best
 * ms of each into ms[0], ms[1] and the gate's share of them into gate[]. */
static int time_call(int reps, const float *pcm, size_t n, double ms[2], double gate[2]) {
  mel_config c = {.sample_rate = RATE, .n_fft = 512, .win_length = 400, .hop = 160, .n_mels = 128,
                  .preemphasis = 0.97f, .f_min = 0, .f_max = 8000, .normalize = true};
  mel_frontend m;
  if (mel_init(&m, &c)) return -1;
  float *out = malloc(mel_frames(&m, n) * c.n_mels * sizeof *out), *band = malloc(n * sizeof *band);
  double *e = malloc((n / 160 + 1) * sizeof *e);
  /* Syllables: the clip's steady tone rising and falling 3 times a second
   * (the gate finds a steady tone quiet: no frame stands over its floor). */
  float *syl = malloc(n * sizeof *syl);
  for (size_t i = 0; syl && i < n; i++)
    syl[i] = pcm[i] * (float)(0.05 + 0.95 * fmax(0.0, sin(2 * M_PI * 3 * i / RATE)));
  pool *session = NULL;
  int st = out && band && e && syl && !pool_new(pool_default_workers(), &session) ? 0 : -1;
  ms[0] = ms[1] = gate[0] = gate[1] = INFINITY;
  for (int r = 0; !st && r < 2 * reps; r++) {
    int lend = r % 2;
    pool *before = pool_lend(lend ? session : NULL);
    size_t valid;
    double t0 = now_ms();
    bool quiet = split_quiet(syl, n, band, e);
    double t1 = now_ms();
    if (quiet || mel_compute(&m, syl, n, out, &valid)) st = -1;
    ms[lend] = fmin(ms[lend], now_ms() - t0), gate[lend] = fmin(gate[lend], t1 - t0);
    pool_lend(before);
  }
  pool_free(session);
  free(out), free(band), free(e), free(syl);
  mel_free(&m);
  return st;
}

static int whisper_init(wmel *m) {
  float fb[WMELS * (WFFT / 2 + 1)], window[WFFT];
  whisper_filters(fb);
  for (int j = 0; j < WFFT; j++) window[j] = (float)(0.5 - 0.5 * cos(2 * M_PI * j / WFFT));
  return wmel_init(m, WFFT, 160, WMELS, 30 * RATE, fb, window);
}

/* One wmel_compute of n samples; its ms folded into *best; the output to dump. */
static int whisper_call(const wmel *m, const float *pcm, size_t n, double *best, FILE *dump) {
  float *out;
  size_t frames;
  double t0 = now_ms();
  if (wmel_compute(m, pcm, n, &out, &frames)) return -1;
  *best = fmin(*best, now_ms() - t0);
  if (dump) fwrite(out, sizeof *out, frames * WMELS, dump);
  free(out);
  return 0;
}

static double time_whisper(int reps, const float *pcm, size_t n, FILE *dump) {
  wmel m;
  if (whisper_init(&m)) return -1;
  double best = INFINITY;
  for (int r = 0; r < reps; r++)
    if (whisper_call(&m, pcm, n, &best, r == reps - 1 ? dump : NULL)) break;
  wmel_free(&m);
  return best;
}

/* An 11 s clip as Whisper takes it: the clip itself (only the frames that
 * read it are computed) and the clip zero-padded by hand to 30 s (every
 * frame computed, as before), the two in turn; best ms of each into ms[0],
 * ms[1]. The outputs are the same bits (tests/test_whisper_mel.c). */
static int time_whisper_11(int reps, const float *pcm, double ms[2]) {
  size_t n = 11 * RATE, len = 30 * RATE;
  float *padded = calloc(len, sizeof *padded);
  wmel m;
  int st = padded && !whisper_init(&m) ? 0 : -1;
  if (st) {
    free(padded);
    return st;
  }
  memcpy(padded, pcm, n * sizeof *pcm);
  ms[0] = ms[1] = INFINITY;
  for (int r = 0; !st && r < reps; r++) {
    st = whisper_call(&m, pcm, n, &ms[0], NULL);
    if (!st) st = whisper_call(&m, padded, len, &ms[1], NULL);
  }
  wmel_free(&m);
  free(padded);
  return st;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 20;
  /* STENO_THREADS: the threads the frontends and the gate may take (0: one per CPU). */
  const char *threads = getenv("STENO_THREADS");
  if (threads) pool_limit_threads(atoi(threads));
  FILE *dump = argc > 2 ? fopen(argv[2], "wb") : NULL;
  if (reps < 1 || (argc > 2 && !dump)) {
    fprintf(stderr, "usage: mel_speed [reps] [dump_file]\n");
    return 2;
  }
  size_t n = 30 * RATE;
  float *pcm = malloc(n * sizeof *pcm);
  if (!pcm) return 1;
  make_clip(pcm, n);
  double p = time_parakeet(reps, pcm, 11 * RATE, dump);
  double w = time_whisper(reps, pcm, n, dump);
  printf("parakeet mel, 11 s clip:    %8.3f ms\nwhisper mel, 30 s window:   %8.3f ms\n", p, w);
  double w11[2];
  int wst = time_whisper_11(reps, pcm, w11);
  if (!wst)
    printf("whisper mel, 11 s clip:     %8.3f ms its frames only, %8.3f ms all 3000 (%.2f×)\n",
           w11[0], w11[1], w11[1] / w11[0]);
  double b[2];
  int st = time_batch(reps, pcm, 11 * RATE, b);
  if (!st)
    printf("parakeet mel, %d × 11 s:    %8.3f ms one after another, %8.3f ms side by side\n", BATCH,
           b[0], b[1]);
  double call[2], gate[2];
  int cst = time_call(reps, pcm, 11 * RATE, call, gate);
  if (!cst)
    printf("gate + parakeet mel, 11 s:  %8.3f ms (gate %.3f) a pool per call, %8.3f ms (gate %.3f) "
           "the session's pool, %d threads (%.2f×)\n",
           call[0], gate[0], call[1], gate[1], pool_default_workers() + 1, call[0] / call[1]);
  free(pcm);
  if (dump) fclose(dump);
  return p < 0 || w < 0 || wst || st || cst;
}
