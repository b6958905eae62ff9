/* Nemotron 3.5 Transcribe end to end on one recording, in stages: the audio
 * towers (features, ASR encoder, diarization, speaker embedding, projector:
 * nt_audio_run_in in the session's arena, which the first run grows), the
 * decoder's prompt with one greedy token (prefill), and
 * greedy decoding with no end token (so every run decodes the same count).
 * Decoding speed is (prompt + 1 + N tokens) − (prompt + 1 token), over N.
 * Prints one JSON object (times in ms: first run, then the median of the
 * rest) with the generated ids, for bench/nemotron_transcribe_real.py to set
 * beside transformers on the same weights.
 *   nemotron_transcribe_speed MODEL.gguf AUDIO.wav [tokens 64] [runs 5]
 * With --hidden IDS REF instead of AUDIO: the decoder's residual stream after
 * each layer for the int32 ids in IDS against REF's f32 [layers][n][d] (the
 * reference's hidden states; its first layers only if it holds fewer), one line per layer: the largest difference
 * relative to the largest reference value, the largest value, non-finite count.
 * STENO_FAST=off|all|auto picks the kernels as the CLI does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "models/nemotron_transcribe/transcribe.h"
#include "steno.h"
#include "timing.h"

static void die(const char *what) {
  fprintf(stderr, "nemotron_transcribe_speed: %s: %s\n", what, steno_last_error());
  exit(1);
}

/* Greedy decoding of `count` tokens after the prompt, no end token; ms. */
static double greedy(ntx_session *s, const int *ids, const float *rows, uint32_t n, uint32_t count,
                     int *out) {
  uint32_t got;
  nemotron_h_reset(s->lm);
  double t = bench_now_ms();
  if (nemotron_h_greedy(s->lm, ids, rows, n, count, NULL, 0, out, &got)) die("decode");
  t = bench_now_ms() - t;
  if (got != count) {
    fprintf(stderr, "nemotron_transcribe_speed: %u tokens of %u\n", got, count);
    exit(1);
  }
  return t;
}

static void *read_all(const char *path, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) die(path);
  fseek(f, 0, SEEK_END);
  *bytes = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc(*bytes + 1);
  if (!p || fread(p, 1, *bytes, f) != *bytes) exit(1);
  fclose(f);
  return p;
}

/* --hidden: the residual after each layer against the reference's. */
static int hidden(const ntx_model *m, ntx_session *s, const char *ids_path, const char *ref_path) {
  size_t ib, rb;
  int *ids = read_all(ids_path, &ib);
  float *ref = read_all(ref_path, &rb);
  uint32_t n = (uint32_t)(ib / sizeof *ids), d = m->lm->d.d;
  size_t per = (size_t)n * d * sizeof *ref; /* the reference may hold the first layers only */
  uint32_t layers = per ? (uint32_t)(rb / per) : 0;
  if (!n || rb % per || layers < 1 || layers > m->lm->layers) {
    fprintf(stderr, "nemotron_transcribe_speed: %zu reference bytes for %u tokens × %u of %u layers\n",
            rb, n, d, m->lm->layers);
    return 1;
  }
  float *h = malloc((size_t)n * d * sizeof *h);
  double *row = malloc(n * sizeof *row);
  if (!h || !row) exit(1);
  for (uint32_t l = 1; l <= layers; l++) {
    nemotron_h_reset(s->lm);
    if (nemotron_h_hidden(s->lm, ids, n, l, h)) die("hidden");
    const float *r = ref + (size_t)(l - 1) * n * d;
    double top = 0, diff = 0, big = 0;
    size_t bad = 0, far = 0;
    for (uint32_t t = 0; t < n; t++) { /* per token: its own largest difference and value */
      double rt = 0, dt = 0;
      for (size_t i = (size_t)t * d; i < (size_t)(t + 1) * d; i++) {
        if (!isfinite(h[i])) {
          bad++;
          continue;
        }
        rt = fmax(rt, fabs(r[i])), big = fmax(big, fabs(h[i])), dt = fmax(dt, fabs(h[i] - r[i]));
      }
      row[t] = rt > 0 ? dt / rt : dt;
      far += row[t] > 0.05;
      top = fmax(top, rt), diff = fmax(diff, dt);
    }
    double med = bench_median(row, (int)n);
    printf("layer %2u (%c): max|diff|/max|ref| %.3e  per token: median %.3e, %zu of %u over 5%%  "
           "max|ref| %.3g  max|steno| %.3g  non-finite %zu\n",
           l, "M*-E"[m->lm->kind[l - 1]], diff / top, med, far, n, top, big, bad);
  }
  free(h), free(row), free(ids), free(ref);
  return 0;
}

static steno_model_params params(void) {
  steno_model_params p = steno_model_default_params();
  const char *f = getenv("STENO_FAST");
  if (f && !strcmp(f, "off")) p.fast = STENO_FAST_OFF;
  if (f && !strcmp(f, "all")) p.fast = STENO_FAST_ALL;
  return p;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[2], "--hidden")) {
    steno_model *model;
    steno_model_params mp = params();
    if (steno_model_load(argv[1], &mp, &model)) die(argv[1]);
    ntx_session *s;
    if (ntx_session_new(model->impl, &s)) die("session");
    int st = hidden(model->impl, s, argv[3], argv[4]);
    ntx_session_free(s);
    steno_model_free(model);
    return st;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.gguf AUDIO.wav [tokens 64] [runs 5]\n", argv[0]);
    return 2;
  }
  uint32_t tokens = argc > 3 ? (uint32_t)atoi(argv[3]) : 64;
  int runs = argc > 4 ? atoi(argv[4]) : 5;
  if (tokens < 1 || tokens > 4096 || runs < 1 || runs > 1000) {
    fprintf(stderr, "nemotron_transcribe_speed: tokens 1..4096, runs 1..1000\n");
    return 2;
  }
  float *pcm;
  size_t n;
  if (steno_audio_load(argv[2], &pcm, &n)) die(argv[2]);
  double t = bench_now_ms();
  steno_model *model;
  steno_model_params mp = params();
  if (steno_model_load(argv[1], &mp, &model)) die(argv[1]);
  double load = bench_now_ms() - t;
  if (strcmp(steno_model_architecture(model), "nemotron3_5_transcribe")) {
    fprintf(stderr, "nemotron_transcribe_speed: %s is %s\n", argv[1], steno_model_architecture(model));
    return 1;
  }
  const ntx_model *m = model->impl;
  ntx_session *s;
  if (ntx_session_new(m, &s)) die("session");

  double *tw = calloc((size_t)runs + 1, sizeof *tw), *t1 = calloc((size_t)runs + 1, sizeof *t1),
         *tn = calloc((size_t)runs + 1, sizeof *tn);
  int *out = calloc(tokens + 1, sizeof *out);
  nt_audio a;
  int *ids = NULL;
  float *rows = NULL;
  uint32_t np = 0;
  for (int r = 0; r <= runs; r++) {
    memset(&a, 0, sizeof a);
    t = bench_now_ms();
    if (nt_audio_run_in(s->towers, pcm, n, &a)) die("towers");
    tw[r] = bench_now_ms() - t;
    if (r < runs) nt_audio_free(&a);
  }
  if (ntx_prompt_rows(m, &a, NULL, &ids, &rows, &np)) die("prompt");
  for (int r = 0; r <= runs; r++) {
    t1[r] = greedy(s, ids, rows, np, 1, out);
    tn[r] = greedy(s, ids, rows, np, tokens + 1, out);
  }
  double first_tw = tw[0], first_t1 = t1[0];
  double mw = bench_median(tw + 1, runs), m1 = bench_median(t1 + 1, runs);
  double mn = bench_median(tn + 1, runs);
  size_t peak;
  int fast;
  steno_model_memory(model, NULL, &peak);
  printf("{\"device\": \"%s\", \"load_ms\": %.1f, \"audio_s\": %.3f, \"audio_tokens\": %u, "
         "\"prompt_tokens\": %u, \"towers_first_ms\": %.2f, \"towers_ms\": %.2f, "
         "\"prefill_first_ms\": %.2f, \"prefill_ms\": %.2f, \"decode_tokens\": %u, "
         "\"decode_total_ms\": %.2f, \"decode_ms_per_token\": %.3f, \"tokens_per_s\": %.1f, "
         "\"gpu_peak_mib\": %.0f, \"runs\": %d, \"ids\": [",
         steno_model_device(model, &fast), load, (double)n / 16000, a.tokens, np, first_tw, mw,
         first_t1, m1, tokens, mn, (mn - m1) / tokens, tokens / ((mn - m1) / 1e3),
         (double)peak / (1 << 20), runs);
  for (uint32_t i = 0; i <= tokens; i++) printf("%s%d", i ? ", " : "", out[i]);
  printf("]}\n");
  nt_audio_free(&a);
  free(ids), free(rows), free(out), free(tw), free(t1), free(tn);
  ntx_session_free(s);
  steno_model_free(model);
  steno_audio_free(pcm);
  return 0;
}
