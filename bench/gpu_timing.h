/* The GPU benchmarks' timing of recorded work: the best of 3 submissions of
 * `reps` calls, each recorded by fn(rec, arg), in µs per call, after 200 ms
 * of the same submissions. The warm-up matters: the H200's clocks drop while
 * the host makes a new kernel's pipeline, and a few short submissions right
 * after ran at a fraction of the speed (docs/perf.md, thirteenth session).
 * Header-only, as timing.h. */
#ifndef STENO_BENCH_GPU_TIMING_H
#define STENO_BENCH_GPU_TIMING_H

#include <stdio.h>
#include <stdlib.h>

#include "gpu/gpu.h"
#include "steno.h"
#include "timing.h"

typedef void (*bench_record_fn)(gpu_rec *rec, const void *arg);

static inline void bench_gpu_record(gpu_rec *rec, bench_record_fn fn, const void *arg, int reps) {
  if (gpu_rec_begin(rec)) exit(1);
  for (int i = 0; i < reps; i++) fn(rec, arg);
}

static inline void bench_gpu_run(gpu_rec *rec) {
  if (gpu_rec_run(rec)) exit(fprintf(stderr, "the GPU run failed: %s\n", steno_last_error()));
}

/* The submissions' run alone is timed, not their recording. */
static inline double bench_gpu_best_us(gpu_device *d, bench_record_fn fn, const void *arg, int reps) {
  gpu_rec *rec;
  if (gpu_rec_new(d, &rec)) exit(1);
  for (double w0 = bench_now_ms(); bench_now_ms() - w0 < 200;) {
    bench_gpu_record(rec, fn, arg, reps);
    bench_gpu_run(rec);
  }
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    bench_gpu_record(rec, fn, arg, reps);
    double t0 = bench_now_ms();
    bench_gpu_run(rec);
    double dt = bench_now_ms() - t0;
    best = dt < best ? dt : best;
  }
  gpu_rec_free(rec);
  return best / reps * 1e3;
}

#endif
