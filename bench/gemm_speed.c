/* GEMM speed, portable vs each fast variant (cooperative matrices) that passed
 * its probe, side by side in one run, at the shapes Parakeet 0.6B and Whisper
 * turbo use and at large m. For each shape and weight type: milliseconds and
 * TFLOP/s (2·m·n·k per call) of each kernel, and the largest difference from
 * the portable kernel's output relative to the largest output (the fast ones
 * round W to f16; gemm_coop and gemm_tiled split a into f16 halves, gemm_tc
 * rounds it to f16).
 * Each shape is recorded `reps` times into one submission; the best of 3
 * submissions counts, after 200 ms of the same (gpu_timing.h). On the CPU machine (lavapipe) there is no
 * cooperative-matrix path; `gemm_speed REPS cpu` times gemm_cpu there.
 * `gemm_speed REPS ONLY` times only the shapes whose label holds ONLY
 * (e.g. "square 4096": the slowest, which a time limit may not reach).
 * Build and run: bench/gemm_speed.sh [reps] [cpu | ONLY]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/linear.h"
#include "support/quant.h"
#include "gpu_timing.h"

static float *random_floats(size_t n, float scale) {
  float *v = malloc(n * sizeof *v);
  if (!v) exit(1);
  for (size_t i = 0; i < n; i++) v[i] = ((float)rand() / RAND_MAX * 2 - 1) * scale;
  return v;
}

/* One gpu_gemm call as time_gemm records it. */
typedef struct {
  gpu_buffer *a, *c;
  const gpu_linear *l;
  uint32_t m;
} gemm_call;

static void record_gemm(gpu_rec *rec, const void *arg) {
  const gemm_call *g = arg;
  gpu_gemm(rec, g->a, g->l, g->c, g->m, GPU_EPI_BIAS, 1.0f);
}

/* Best time of one call in seconds (gpu_timing.h: warmed first), and the
 * output of the last one into out. */
static double time_gemm(gpu_device *d, gpu_buffer *a, const gpu_linear *l, gpu_buffer *c,
                        uint32_t m, int reps, float *out) {
  double us = bench_gpu_best_us(d, record_gemm, &(gemm_call){a, c, l, m}, reps);
  if (gpu_download(c, 0, out, (size_t)m * gpu_linear_width(l) * sizeof *out)) exit(1);
  return us * 1e-6;
}

typedef struct {
  const char *what;
  uint32_t m, n, k;
} shape;

/* One shape's buffers: a (m × k), c (m × n), two outputs to compare. */
typedef struct {
  gpu_buffer *a, *c;
  float *out[2];
} shape_io;

/* Largest |x − y| over the largest |x|. */
static double rel_diff(const float *x, const float *y, size_t count) {
  double top = 0, diff = 0;
  for (size_t i = 0; i < count; i++) {
    top = fmax(top, fabs(x[i]));
    diff = fmax(diff, fabs(x[i] - y[i]));
  }
  return diff / top;
}

/* Calls fn for each shape and weight type on a random layer (a ~ 1, W ~ 0.05,
 * bias ~ 0.1) of that type. */
typedef void layer_fn(gpu_device *d, const shape *sh, gpu_wtype t, const gpu_linear *l,
                      shape_io *io, int reps);
static void each_layer(gpu_device *d, const shape *shapes, size_t ns, const gpu_wtype *types,
                       size_t nt, int reps, layer_fn *fn, const char *only) {
  for (size_t s = 0; s < ns; s++) {
    if (only && !strstr(shapes[s].what, only)) continue;
    uint32_t m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
    float *x = random_floats((size_t)m * k, 1.0f), *w = random_floats((size_t)n * k, 0.05f);
    float *bias = random_floats(n, 0.1f);
    shape_io io = {NULL, NULL, {malloc((size_t)m * n * sizeof(float)), malloc((size_t)m * n * sizeof(float))}};
    if (!io.out[0] || !io.out[1] || gpu_buffer_from(d, x, (size_t)m * k * sizeof *x, &io.a) ||
        gpu_buffer_new(d, (size_t)m * n * sizeof(float), &io.c))
      exit(1);
    for (size_t t = 0; t < nt; t++) {
      uint8_t *bytes = quant_encode(types[t], w, (size_t)n * k);
      gpu_linear l;
      if (gpu_linear_new(d, types[t], k, &(gpu_weight){bytes, n}, 1, bias, n, &l)) exit(1);
      fn(d, &shapes[s], types[t], &l, &io, reps);
      fflush(stdout);
      gpu_linear_free(&l);
      free(bytes);
    }
    gpu_buffer_free(io.c);
    gpu_buffer_free(io.a);
    free(x), free(w), free(bias), free(io.out[0]), free(io.out[1]);
  }
}

/* The portable kernel (gemm.comp's shared-memory tile) against gemm_cpu (a
 * block of outputs per subgroup, no shared memory) where gpu_gemm takes it. */
static void cpu_layer(gpu_device *d, const shape *sh, gpu_wtype t, const gpu_linear *l,
                      shape_io *io, int reps) {
  uint32_t m = sh->m, n = sh->n, k = sh->k;
  double ms[2], gmac = (double)m * n * k * 1e-9;
  gpu_gemm_plan plan;
  gpu_set_fast(d, true);
  gpu_gemm_plan_for(d, l, k, m, &plan);
  if (!plan.cpu) {
    printf("%-22s %-4s: gemm_cpu not used here\n", sh->what, quant_names[t]);
    return;
  }
  for (int fast = 0; fast < 2; fast++) {
    gpu_set_fast(d, fast);
    ms[fast] = time_gemm(d, io->a, l, io->c, m, reps, io->out[fast]) * 1e3;
  }
  printf("%-22s %5u×%5u×%5u %-4s portable %8.3f ms %6.2f GMAC/s  gemm_cpu %8.3f ms %6.2f GMAC/s"
         "  %.2fx  max diff %.1e\n", sh->what, m, n, k, quant_names[t], ms[0], gmac / ms[0] * 1e3,
         ms[1], gmac / ms[1] * 1e3, ms[0] / ms[1], rel_diff(io->out[0], io->out[1], (size_t)m * n));
}

/* The portable kernel, then each fast variant that passed its probe. */
static void fast_layer(gpu_device *d, const shape *sh, gpu_wtype t, const gpu_linear *l,
                       shape_io *io, int reps) {
  uint32_t m = sh->m, n = sh->n, k = sh->k;
  double flop = 2.0 * m * n * k;
  gpu_set_fast(d, false);
  double slow = time_gemm(d, io->a, l, io->c, m, reps, io->out[0]);
  printf("%-24s %5u×%5u×%5u %-4s portable %8.3f ms %6.1f TFLOP/s", sh->what, m, n, k,
         quant_names[t], slow * 1e3, flop / slow * 1e-12);
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++) {
    if (!gpu_gemm_variant_ok(d, (gpu_gemm_variant)v)) continue;
    gpu_set_fast(d, true);
    gpu_gemm_force(d, (gpu_gemm_variant)v);
    double fast = time_gemm(d, io->a, l, io->c, m, reps, io->out[1]);
    const gpu_gemm_tile *g = &gpu_gemm_tiles[v];
    printf("\n    %s %u×%u/%u %8.3f ms %6.1f TFLOP/s  %.2fx  max diff %.1e", g->kernel,
           g->sg_m * g->tm * 16, g->sg_n * g->tn * 16, g->sg_m * g->sg_n, fast * 1e3,
           flop / fast * 1e-12, slow / fast, rel_diff(io->out[0], io->out[1], (size_t)m * n));
  }
  gpu_gemm_force(d, GPU_GEMM_AUTO);
  printf("\n");
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 10;
  gpu_device *d;
  if (reps < 1 || gpu_open(NULL, &d)) return 1;
  if (argc > 2 && !strcmp(argv[2], "cpu")) {
    /* The bundled tiny model's shapes and one of Parakeet 0.6B's, for CPU
     * devices such as lavapipe. */
    static const shape tiny[] = {
        {"tiny 3.4 s out", 43, 192, 192},    {"tiny 3.4 s q|k|v", 43, 576, 192},
        {"tiny 3.4 s ffn up", 43, 768, 192}, {"tiny 3.4 s ffn down", 43, 192, 768},
        {"parakeet 11 s ffn up", 138, 4096, 1024},
    };
    const gpu_wtype types[] = {GPU_F32, GPU_F16, GPU_Q8_0};
    printf("%s: the portable GEMM against gemm_cpu\n", gpu_device_info(d)->name);
    each_layer(d, tiny, sizeof tiny / sizeof *tiny, types, 3, reps, cpu_layer, NULL);
    gpu_close(d);
    return 0;
  }
  static const shape shapes[] = {
      {"parakeet 11 s q|k|v", 138, 3072, 1024}, {"parakeet 11 s ffn up", 138, 4096, 1024},
      {"parakeet 11 s ffn down", 138, 1024, 4096}, {"parakeet 2 min ffn up", 1500, 4096, 1024},
      {"parakeet 2 min ffn down", 1500, 1024, 4096}, {"whisper 30 s q|k|v", 1500, 3840, 1280},
      {"whisper 30 s out", 1500, 1280, 1280}, {"whisper 30 s ffn up", 1500, 5120, 1280},
      {"whisper 30 s ffn down", 1500, 1280, 5120},
      {"parakeet 64×11 s ffn up", 8832, 4096, 1024}, {"square 2048", 2048, 2048, 2048},
      {"square 4096", 4096, 4096, 4096},
  };
  const gpu_wtype types[] = {GPU_F16, GPU_Q8_0};
  gpu_set_fast(d, true);
  printf("%s; fast GEMM %s\n", gpu_device_info(d)->name,
         gpu_using_fast(d) ? "available" : "not available (portable only)");
  each_layer(d, shapes, sizeof shapes / sizeof *shapes, types, 2, reps, fast_layer,
             argc > 2 ? argv[2] : NULL);
  gpu_close(d);
  return 0;
}
