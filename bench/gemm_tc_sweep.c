/* gemm_tc's tile shapes and split-k counts at few rows (the encoder of one
 * clip: m ≈ 138), side by side in one run: for each shape, each tile
 * (SG_M × SG_N subgroups of TM × TN 16×16 matrices) and each split count, the
 * best of 3 submissions of `reps` calls (the split's gemm_reduce included),
 * µs per call and TFLOP/s, and the largest difference from gpu_gemm's own
 * choice relative to the largest output (a wrong configuration shows there).
 * Needs gemm_tc (NVIDIA cooperative matrices): on lavapipe it says so and stops.
 * Build: bench/build_benches.sh BUILD; run: BUILD/gemm_tc_sweep [reps] [m]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpu/internal.h"
#include "gpu/linear.h"
#include "support/quant.h"
#include "timing.h"

static float *random_floats(size_t n, float scale) {
  float *v = malloc(n * sizeof *v);
  if (!v) exit(1);
  for (size_t i = 0; i < n; i++) v[i] = ((float)rand() / RAND_MAX * 2 - 1) * scale;
  return v;
}

typedef struct {
  uint32_t sg_m, sg_n, tm, tn;
} tile;

/* One gemm_tc call with tile t and `splits` pieces of k (as gpu_gemm records it). */
static void record(gpu_rec *rec, const tile *t, gpu_buffer *a, const gpu_linear *l, gpu_buffer *c,
                   gpu_buffer *part, uint32_t m, uint32_t splits) {
  uint32_t threads = 32 * t->sg_m * t->sg_n;
  uint32_t spec[6] = {GPU_F16, t->sg_m, t->sg_n, t->tm, t->tn, threads};
  uint32_t bm = t->sg_m * t->tm * 16, bn = t->sg_n * t->tn * 16;
  uint32_t kc = (l->k + splits - 1) / splits;
  kc = (kc + 31) / 32 * 32;
  splits = (l->k + kc - 1) / kc;
  struct {
    uint32_t m, n, k, mode;
    float alpha;
    uint32_t dual, lda, wk, splits, kc;
  } push = {m, l->n, l->k, GPU_EPI_BIAS, 1.0f, l->dual, l->k, l->wk, splits, kc};
  gpu_buffer *bufs[] = {a, l->bias, c, l->w, l->bias, splits > 1 ? part : c};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_tc", spec, 6), bufs, 6, &push, sizeof push,
               (l->n + bn - 1) / bn, (m + bm - 1) / bm, splits);
  if (splits == 1) return;
  struct {
    uint32_t m, n, splits, mode;
    float alpha;
    uint32_t dual;
  } rpush = {m, l->n, splits, GPU_EPI_BIAS, 1.0f, l->dual};
  gpu_buffer *rbufs[] = {part, l->bias, c};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_reduce", NULL, 0), rbufs, 3, &rpush, sizeof rpush,
               (l->n + 255) / 256, m, 1);
}

/* Best µs per call of `reps` calls per submission (t NULL: gpu_gemm's choice). */
static double timed(gpu_device *d, const tile *t, gpu_buffer *a, const gpu_linear *l,
                    gpu_buffer *c, gpu_buffer *part, uint32_t m, uint32_t splits, int reps) {
  gpu_rec *rec;
  if (gpu_rec_new(d, &rec)) exit(1);
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    if (gpu_rec_begin(rec)) exit(1);
    for (int i = 0; i < reps; i++) {
      if (t) record(rec, t, a, l, c, part, m, splits);
      else gpu_gemm(rec, a, l, c, m, GPU_EPI_BIAS, 1.0f);
    }
    double t0 = bench_now_ms();
    if (gpu_rec_run(rec)) exit(fprintf(stderr, "gemm_tc_sweep: the GPU run failed\n"));
    double dt = bench_now_ms() - t0;
    best = dt < best ? dt : best;
  }
  gpu_rec_free(rec);
  return best / reps * 1e3; /* ms → µs */
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 20;
  uint32_t rows = argc > 2 ? (uint32_t)atoi(argv[2]) : 138;
  gpu_device *d;
  if (reps < 1 || gpu_open(NULL, &d)) return 1;
  if (!gpu_gemm_variant_ok(d, GPU_GEMM_TC128)) {
    printf("%s: gemm_tc not available\n", gpu_device_info(d)->name);
    gpu_close(d);
    return 0;
  }
  static const uint32_t shapes[][2] = {{3072, 1024}, {4096, 1024}, {1024, 4096}, {1024, 1024},
                                       {2048, 1024}};
  static const tile tiles[] = {{2, 4, 4, 2}, {2, 2, 2, 4}, {2, 2, 2, 2}, {1, 4, 2, 2}, {1, 4, 1, 2},
                               {2, 4, 2, 2}, {1, 2, 2, 4}, {2, 2, 1, 2}, {4, 2, 1, 2}};
  static const uint32_t split_counts[] = {1, 2, 3, 4, 6, 8, 12, 16};
  gpu_buffer *part = gpu_device_scratch(d, (size_t)32 << 20);
  printf("%s, m = %u, best of 3 submissions of %d calls, µs per call (TFLOP/s)\n",
         gpu_device_info(d)->name, rows, reps);
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    uint32_t m = rows, n = shapes[s][0], k = shapes[s][1];
    float *x = random_floats((size_t)m * k, 1.0f), *w = random_floats((size_t)n * k, 0.05f);
    float *bias = random_floats(n, 0.1f), *ref = malloc((size_t)m * n * 4), *out = malloc((size_t)m * n * 4);
    gpu_buffer *a, *c;
    uint8_t *bytes = quant_encode(GPU_F16, w, (size_t)n * k);
    gpu_linear l;
    if (!ref || !out || gpu_buffer_from(d, x, (size_t)m * k * 4, &a) ||
        gpu_buffer_new(d, (size_t)m * n * 4, &c) ||
        gpu_linear_new(d, GPU_F16, k, &(gpu_weight){bytes, n}, 1, bias, n, &l))
      exit(1);
    double flop = 2.0 * m * n * k;
    double us = timed(d, NULL, a, &l, c, part, m, 1, reps);
    if (gpu_download(c, 0, ref, (size_t)m * n * 4)) exit(1);
    double top = 0;
    for (size_t i = 0; i < (size_t)m * n; i++) top = fmax(top, fabs(ref[i]));
    printf("%u×%u×%u  gpu_gemm's choice %.1f µs (%.1f)\n", m, n, k, us, flop / us * 1e-6);
    for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
      const tile *tl = &tiles[t];
      printf("  %3u×%-3u (%u×%u sg, %u×%u)", tl->sg_m * tl->tm * 16, tl->sg_n * tl->tn * 16, tl->sg_m,
             tl->sg_n, tl->tm, tl->tn);
      for (size_t q = 0; q < sizeof split_counts / sizeof *split_counts; q++) {
        uint32_t sp = split_counts[q];
        if (k / sp < 64 || (size_t)sp * m * n * 4 > ((size_t)32 << 20)) continue;
        double u = timed(d, tl, a, &l, c, part, m, sp, reps);
        if (gpu_download(c, 0, out, (size_t)m * n * 4)) exit(1);
        double diff = 0;
        for (size_t i = 0; i < (size_t)m * n; i++) diff = fmax(diff, fabs(out[i] - ref[i]));
        printf("  s%u %.1f (%.0f)%s", sp, u, flop / u * 1e-6, diff > 1e-3 * top ? " WRONG" : "");
      }
      printf("\n");
      fflush(stdout);
    }
    gpu_linear_free(&l);
    gpu_buffer_free(a), gpu_buffer_free(c);
    free(bytes), free(x), free(w), free(bias), free(ref), free(out);
  }
  gpu_close(d);
  return 0;
}
