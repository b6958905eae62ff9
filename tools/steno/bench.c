#include "bench.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub.h"
#include "params.h"
#include "steno.h"

static const char usage[] =
    "usage: steno bench MODEL AUDIO [-n RUNS] [--batch N]\n"
    "  Loads the model, transcribes AUDIO once (first call) and RUNS more times\n"
    "  (default 10), and prints load time, first-call and warm latency (median,\n"
    "  min, max), the stages' medians (and the time outside them), × realtime and\n"
    "  peak GPU memory.\n"
    "  --batch N: each call is one steno_transcribe_batch of N copies of AUDIO\n"
    "  (Parakeet: one padded GPU pass as far as memory allows); × realtime\n"
    "  counts all N, and every copy's text is checked against one plain call's.\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A count from 1 to max after option `opt`, or -1 after a message. */
static long count_arg(const char *opt, const char *v, long max) {
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || n < 1 || n > max) {
    fprintf(stderr, "steno bench: %s takes a count from 1 to %ld\n", opt, max);
    return -1;
  }
  return n;
}

/* One timed call: steno_transcribe, or steno_transcribe_batch of `batch`
 * copies (stages summed over the copies); *text gets the first result's text
 * (malloc'd) and *same whether all copies' texts equal it. */
static int one_call(steno_model *m, steno_session *s, const float *pcm, size_t n, int batch,
                    double *ms, double stage[3], char **text, bool *same) {
  steno_result **res = calloc((size_t)batch, sizeof *res);
  const float **pcms = calloc((size_t)batch, sizeof *pcms);
  size_t *ns = calloc((size_t)batch, sizeof *ns);
  if (!res || !pcms || !ns) {
    free(res), free(pcms), free(ns);
    return STENO_ERR_NOMEM;
  }
  for (int i = 0; i < batch; i++) pcms[i] = pcm, ns[i] = n;
  double a = now();
  int st = s ? steno_transcribe_batch(s, pcms, ns, (size_t)batch, NULL, res)
             : steno_transcribe(m, pcm, n, NULL, &res[0]);
  *ms = (now() - a) * 1e3;
  stage[0] = stage[1] = stage[2] = 0;
  *same = true;
  for (int i = 0; !st && i < batch; i++) {
    steno_timings t = steno_result_timings(res[i]);
    stage[0] += t.features_ms, stage[1] += t.encoder_ms, stage[2] += t.decoder_ms;
    if (i == 0) *text = strdup(steno_result_text(res[0]));
    else *same = *same && !strcmp(*text, steno_result_text(res[i]));
  }
  for (int i = 0; !st && i < batch; i++) steno_result_free(res[i]);
  free(res), free(pcms), free(ns);
  return st;
}

int bench_main(int argc, char **argv) {
  const char *model = NULL, *audio = NULL;
  int runs = 10, batch = 0;
  for (int i = 2; i < argc; i++) {
    long v;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      if ((v = count_arg("-n", argv[++i], 100000)) < 0) return 2;
      runs = (int)v;
    } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
      if ((v = count_arg("--batch", argv[++i], 4096)) < 0) return 2;
      batch = (int)v;
    } else if (!model) model = argv[i];
    else if (!audio) audio = argv[i];
    else {
      fputs(usage, stderr);
      return 2;
    }
  }
  if (!model || !audio) {
    fputs(usage, stderr);
    return 2;
  }
  /* MODEL may be a path or a downloaded model's name (steno pull). */
  if (!(model = hub_resolve(model))) return 1;
  float *pcm;
  size_t n;
  if (steno_audio_load(audio, &pcm, &n)) {
    fprintf(stderr, "steno bench: %s\n", steno_last_error());
    return 1;
  }
  double t0 = now();
  steno_model *m;
  steno_model_params mp;
  if (cli_model_params(&mp)) {
    steno_audio_free(pcm);
    return 1;
  }
  if (steno_model_load(model, &mp, &m)) {
    fprintf(stderr, "steno bench: %s\n", steno_last_error());
    steno_audio_free(pcm);
    return 1;
  }
  double load = now() - t0;
  /* stage[3]: each call's time outside the three stages (splitting, the
   * silence gate, joining results; the library's own work around the family's). */
  double *wall = calloc((size_t)runs + 1, sizeof *wall), *stage[4];
  for (int s = 0; s < 4; s++) stage[s] = calloc((size_t)runs + 1, sizeof *stage[s]);
  steno_session *session = NULL;
  char *one = NULL, *text = NULL;
  bool same = true, alone_same = true;
  double ignore, st3[3];
  /* --batch: the copies' texts against one plain call's. */
  bool room = wall && stage[0] && stage[1] && stage[2] && stage[3];
  int st = room ? 0 : STENO_ERR_NOMEM;
  if (!room) fprintf(stderr, "steno bench: out of memory for %d runs\n", runs);
  if (!st && batch) st = one_call(m, NULL, pcm, n, 1, &ignore, st3, &one, &same);
  if (!st && batch) st = steno_session_new(m, &session);
  for (int r = 0; r <= runs && !st; r++) {
    bool all_same;
    st = one_call(m, session, pcm, n, batch ? batch : 1, &wall[r], st3, &text, &all_same);
    for (int k = 0; !st && k < 3; k++) stage[k][r] = st3[k];
    if (!st) stage[3][r] = wall[r] - st3[0] - st3[1] - st3[2];
    if (!st) same = same && all_same, alone_same = alone_same && (!one || !strcmp(one, text));
    free(text);
    text = NULL;
  }
  if (st) {
    if (room) fprintf(stderr, "steno bench: %s\n", steno_last_error());
  } else {
    int copies = batch ? batch : 1;
    double seconds = (double)n / 16000 * copies, first = wall[0];
    double lo = wall[1], hi = wall[1];
    for (int r = 1; r <= runs; r++) lo = wall[r] < lo ? wall[r] : lo, hi = wall[r] > hi ? wall[r] : hi;
    double warm = median(wall + 1, runs);
    size_t peak;
    int fast;
    steno_model_memory(m, NULL, &peak);
    const char *dev = steno_model_device(m, &fast);
    printf("model      %s (%s)\n", model, steno_model_architecture(m));
    printf("device     %s, %s kernels\n", dev, fast ? "fast" : "portable");
    printf("audio      %s, %.2f s\n", audio, seconds / copies);
    if (batch)
      printf("batch      %d copies per steno_transcribe_batch call (%.2f s of audio); texts %s\n",
             batch, seconds, same && alone_same ? "all equal to one plain call's" : "DIFFER");
    printf("load       %.1f ms\n", load * 1e3);
    printf("first call %.2f ms\n", first);
    printf("warm       %.2f ms median of %d (min %.2f, max %.2f)\n", warm, runs, lo, hi);
    printf("stages     features %.2f ms, encoder %.2f ms, decoder %.2f ms, outside them %.2f ms "
           "(medians)\n",
           median(stage[0] + 1, runs), median(stage[1] + 1, runs), median(stage[2] + 1, runs),
           median(stage[3] + 1, runs));
    printf("speed      %.0f× realtime\n", seconds / (warm / 1e3));
    if (batch) printf("per copy   %.3f ms\n", warm / copies);
    printf("GPU memory %.1f MiB peak\n", (double)peak / (1 << 20));
  }
  free(wall);
  for (int s = 0; s < 4; s++) free(stage[s]);
  free(one);
  steno_session_free(session);
  steno_model_free(m);
  steno_audio_free(pcm);
  return st ? 1 : 0;
}
