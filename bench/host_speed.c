/* The host's share of a call outside the model's stages (steno bench's
 * "outside them"), piece by piece, on this machine's CPUs: the silence gate
 * (split_quiet) on the session's lent pool and on the caller alone. (The
 * samples' check, static in the pipeline, is in STENO_LOG=debug's "call:"
 * line.)
 *   host_speed AUDIO.wav [RUNS 200]
 * Medians in µs. Only ratios within one run count (docs/perf.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "audio/split.h"
#include "base/pool.h"
#include "steno.h"
#include "timing.h"

typedef double (*step_fn)(const float *pcm, size_t n, float *band, double *e);

static double gate(const float *pcm, size_t n, float *band, double *e) {
  return split_quiet(pcm, n, band, e);
}

static double timed(step_fn f, const float *pcm, size_t n, float *band, double *e, int runs,
                    double *sink) {
  double *t = malloc((size_t)runs * sizeof *t);
  if (!t) return NAN;
  for (int r = 0; r < runs; r++) {
    double a = bench_now_ms();
    *sink += f(pcm, n, band, e);
    t[r] = (bench_now_ms() - a) * 1e3;
  }
  double m = bench_median(t, runs);
  free(t);
  return m;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: host_speed AUDIO.wav [RUNS]\n");
    return 2;
  }
  int runs = argc > 2 ? atoi(argv[2]) : 200;
  if (runs < 1) runs = 1;
  float *pcm;
  size_t n;
  if (steno_audio_load(argv[1], &pcm, &n)) {
    fprintf(stderr, "host_speed: %s\n", steno_last_error());
    return 1;
  }
  float *band = malloc((n ? n : 1) * sizeof *band);
  double *e = malloc((n / SPLIT_FRAME + 1) * sizeof *e), sink = 0;
  pool *p = NULL;
  int workers = pool_default_workers();
  if (!band || !e || pool_new(workers, &p)) return 1;
  printf("audio %.2f s, %d workers + the caller\n", (double)n / SPLIT_RATE, workers);
  for (int pass = 0; pass < 2; pass++) {
    pool_lend(p);
    double lent_gate = timed(gate, pcm, n, band, e, runs, &sink);
    pool_lend(NULL);
    double alone_gate = timed(gate, pcm, n, band, e, runs, &sink);
    printf("gate on the pool %.1f µs, alone %.1f µs\n", lent_gate, alone_gate);
  }
  printf("(%g)\n", sink);
  pool_free(p);
  free(band), free(e);
  steno_audio_free(pcm);
  return 0;
}
