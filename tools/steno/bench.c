#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub.h"
#include "params.h"
#include "steno.h"

static const char usage[] =
    "usage: steno bench MODEL AUDIO [-n RUNS]\n"
    "  Loads the model, transcribes AUDIO once (first call) and RUNS more times\n"
    "  (default 10), and prints load time, first-call and warm latency (median,\n"
    "  min, max), the stages' medians, × realtime and peak GPU memory.\n";

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

int bench_main(int argc, char **argv) {
  const char *model = NULL, *audio = NULL;
  int runs = 10;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 100000) {
        fprintf(stderr, "steno bench: -n takes a count from 1 to 100000\n");
        return 2;
      }
      runs = (int)v;
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
  double *wall = calloc((size_t)runs + 1, sizeof *wall), *stage[3];
  for (int s = 0; s < 3; s++) stage[s] = calloc((size_t)runs + 1, sizeof *stage[s]);
  int st = 0;
  for (int r = 0; r <= runs && !st; r++) {
    steno_result *res;
    double a = now();
    st = steno_transcribe(m, pcm, n, NULL, &res);
    if (st) break;
    wall[r] = (now() - a) * 1e3;
    steno_timings t = steno_result_timings(res);
    stage[0][r] = t.features_ms, stage[1][r] = t.encoder_ms, stage[2][r] = t.decoder_ms;
    steno_result_free(res);
  }
  if (st) {
    fprintf(stderr, "steno bench: %s\n", steno_last_error());
  } else {
    double seconds = (double)n / 16000, first = wall[0];
    double lo = wall[1], hi = wall[1];
    for (int r = 1; r <= runs; r++) lo = wall[r] < lo ? wall[r] : lo, hi = wall[r] > hi ? wall[r] : hi;
    double warm = median(wall + 1, runs);
    size_t peak;
    int fast;
    steno_model_memory(m, NULL, &peak);
    const char *dev = steno_model_device(m, &fast);
    printf("model      %s (%s)\n", model, steno_model_architecture(m));
    printf("device     %s, %s kernels\n", dev, fast ? "fast" : "portable");
    printf("audio      %s, %.2f s\n", audio, seconds);
    printf("load       %.1f ms\n", load * 1e3);
    printf("first call %.2f ms\n", first);
    printf("warm       %.2f ms median of %d (min %.2f, max %.2f)\n", warm, runs, lo, hi);
    printf("stages     features %.2f ms, encoder %.2f ms, decoder %.2f ms (medians)\n",
           median(stage[0] + 1, runs), median(stage[1] + 1, runs), median(stage[2] + 1, runs));
    printf("speed      %.0f× realtime\n", seconds / (warm / 1e3));
    printf("GPU memory %.1f MiB peak\n", (double)peak / (1 << 20));
  }
  free(wall);
  for (int s = 0; s < 3; s++) free(stage[s]);
  steno_model_free(m);
  steno_audio_free(pcm);
  return st ? 1 : 0;
}
