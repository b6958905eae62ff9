/* Attention side by side in one run: the portable path (scores, softmax,
 * values: three dispatches and a heads·t² buffer) against flash attention on
 * the tensor cores (flash_tc.comp) and the portable path's scores and values
 * on the tensor cores (mm: attention_scores_tc, attention_values_tc; plain
 * attention only; then its other scores and values tiles,
 * gpu_attention_mm_tile) and in one dispatch (flash_mm: plain, head sizes
 * up to 64; then its other shapes, and its default shape with hi + lo
 * scores only and with f16 alone, gpu_attention_mm_precision), each
 * where its probe passed, at the encoders' shapes:
 * Parakeet 0.6B's relative attention (8 heads of 128) for 11 s and 60 s and
 * a batch of 64 × 11 s, Whisper turbo's plain attention (20 heads of 64,
 * t = 1500), the device-open timing's shape (t = 1000, 8 heads of 64) and
 * plain attention at Parakeet's head size (t = 138, 750, 1500, a batch of
 * 64 × 138). A path that does not take a shape says n/a. Each call is
 * recorded `reps` times into one submission, the best of 3 submissions
 * counts; each fast path's largest difference from the portable output is
 * printed with the largest portable output. All paths use the softmax the
 * device chose. On the CPU machine (lavapipe, no tensor cores) it says so
 * and stops.
 * With a second argument "x", flash_tc's parts are also timed apart (its
 * SKIP experiments: each leaves a part out) at each unbatched shape. With
 * "acc" instead, only the mm path's accuracy, forced on even where its
 * probe failed: at each precision (gpu_attention_mm_precision: f16 alone,
 * hi + lo scores, hi + lo scores and values) head 0's scores against double
 * and the output against the portable path's, at sharp and mild scores.
 * Build: bench/build_benches.sh BUILD; run: BUILD/attention_speed [reps [x|acc]]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/attention.h"
#include "gpu/internal.h"
#include "gpu_timing.h"

static bool experiments; /* argv[2] "x": flash_tc's parts timed apart */

typedef struct {
  const char *name;
  uint32_t t, heads, hd, batch;
  bool relative;
} shape;

/* n random floats in ±r (the caller frees them). */
static float *random_floats(size_t n, float r) {
  float *v = malloc(n * sizeof *v);
  if (!v) exit(1);
  for (size_t i = 0; i < n; i++) v[i] = ((float)rand() / RAND_MAX * 2 - 1) * r;
  return v;
}

static gpu_buffer *random_buffer(gpu_device *d, size_t n) {
  float *v = random_floats(n, 1.0f);
  gpu_buffer *b;
  if (gpu_buffer_from(d, v, n * sizeof *v, &b)) exit(1);
  free(v);
  return b;
}

/* One call recorded: attention by the path the device chooses, or flash_tc
 * with keys per block kb and experiment bits `skip` (flash_tc.comp's SKIP:
 * parts left out, so the time of each shows). */
typedef struct {
  const gpu_attn *a;
  bool relative, experiment;
  uint32_t kb, skip;
} call;

static void record(gpu_rec *rec, const void *arg) {
  const call *c = arg;
  if (c->experiment) gpu_flash_tc_experiment(rec, c->a, c->relative, c->kb, c->skip);
  else if (c->relative) gpu_rel_attention(rec, c->a);
  else gpu_attention(rec, c->a);
}

/* Best µs per call of `reps` calls in one submission (gpu_timing.h: warmed first). */
static double timed(gpu_device *d, const call *c, int reps) { return bench_gpu_best_us(d, record, c, reps); }

static void variants(const gpu_attn *a, gpu_device *d, bool relative, int reps) {
  static const uint32_t skips[] = {0, 1, 2, 4, 16, 7};
  static const char *what[] = {"whole", "no softmax lanes", "no score MMAs", "no P·V MMAs",
                               "one pass", "packing + loop only"};
  static const uint32_t kbs[] = {16, 32};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof skips / sizeof skips[0]; i++) {
      call c = {a, relative, true, kbs[k], skips[i]};
      printf("    KB %2u %-24s %9.1f µs\n", kbs[k], what[i], timed(d, &c, reps));
    }
  fflush(stdout);
}

/* The paths side by side: the portable kernels, then each fast one where
 * it passed its probe (alone; the softmax the device chose for all). */
static const struct {
  const char *name;
  int kind; /* gpu_fast_kernel, or -1: the portable path */
  gpu_attn_path path;
} paths[] = {{"portable", -1, GPU_ATTN_PORTABLE},
             {"flash_tc", GPU_FAST_ATTENTION_TC, GPU_ATTN_FLASH_TC},
             {"mm", GPU_FAST_ATTENTION_MM, GPU_ATTN_MM},
             {"flash_mm", GPU_FAST_ATTENTION_MM, GPU_ATTN_FLASH_MM}};
enum { PATHS = sizeof paths / sizeof paths[0] };
static bool passed[GPU_FAST_KINDS];

static void use_path(gpu_device *d, int kind, gpu_attn_path path) {
  gpu_set_fast(d, true);
  gpu_attention_mm_flash(path == GPU_ATTN_FLASH_MM);
  d->fast[GPU_FAST_SOFTMAX] = gpu_fast_chosen(d, GPU_FAST_SOFTMAX);
  d->fast[GPU_FAST_ATTENTION] = false;
  d->fast[GPU_FAST_ATTENTION_TC] = kind == GPU_FAST_ATTENTION_TC;
  d->fast[GPU_FAST_ATTENTION_MM] = kind == GPU_FAST_ATTENTION_MM;
}

static void run(gpu_device *d, const shape *s, int reps) {
  uint32_t n = s->batch ? s->batch : 1, D = s->heads * s->hd, rows = n * s->t;
  gpu_buffer *x = random_buffer(d, (size_t)rows * 4 * D), *pos = random_buffer(d, (size_t)(2 * s->t - 1) * D);
  gpu_buffer *o, *scores, *lens = NULL;
  if (gpu_buffer_new(d, (size_t)rows * D * 4, &o) ||
      gpu_buffer_new(d, ((size_t)n * gpu_attention_scratch(s->t, s->heads) + (size_t)4 * rows * D +
                            (size_t)2 * s->t * D) * 4, &scores)) /* + flash_tc's f16 copies */
    exit(1);
  if (s->batch) { /* lengths from t down to t/2 */
    uint32_t *l = malloc(n * sizeof *l);
    for (uint32_t i = 0; i < n; i++) l[i] = s->t - i * (s->t / 2) / n;
    if (gpu_buffer_from(d, l, n * sizeof *l, &lens)) exit(1);
    free(l);
  }
  gpu_attn a = {.q = {x, 0, 4 * D}, .k = {x, D, 4 * D}, .v = {x, 2 * D, 4 * D}, .o = {o, 0, D},
                .scores = scores, .t = s->t, .heads = s->heads, .head_dim = s->hd,
                .batch = n > 1 ? n : 0, .lens = lens};
  if (s->relative) a.qv = (gpu_attn_slice){x, 3 * D, 4 * D}, a.pos = (gpu_attn_slice){pos, 0, D};
  size_t on = (size_t)rows * D;
  float *want = malloc(on * sizeof(float)), *got = malloc(on * sizeof(float));
  if (!want || !got) exit(1);
  printf("%-36s", s->name);
  double base = 0;
  for (int i = 0; i < PATHS; i++) {
    if (i && !passed[paths[i].kind]) continue;
    use_path(d, paths[i].kind, paths[i].path);
    if (gpu_attention_path(d, &a, s->relative) != paths[i].path) { /* e.g. mm: plain only */
      printf("  %s n/a", paths[i].name);
      continue;
    }
    double us = timed(d, &(call){&a, s->relative, false, 0, 0}, reps);
    if (gpu_download(o, 0, i ? got : want, on * sizeof(float))) exit(1);
    if (!i) {
      base = us;
      printf("  portable %8.1f µs", us);
      continue;
    }
    double big = 0, diff = 0;
    for (size_t e = 0; e < on; e++) {
      big = fmax(big, fabs(want[e]));
      diff = fmax(diff, fabs(want[e] - got[e]));
    }
    printf("  %s %8.1f µs %5.2fx (max |diff| %.1e of %.2f)", paths[i].name, us, base / us, diff, big);
    /* flash_mm's other shapes. */
    for (uint32_t f = 1; paths[i].path == GPU_ATTN_FLASH_MM && f < gpu_attention_mm_flash_shapes(); f++) {
      const char *name = gpu_attention_mm_flash_shape(f);
      double ut = timed(d, &(call){&a, s->relative, false, 0, 0}, reps);
      if (gpu_download(o, 0, got, on * sizeof(float))) exit(1);
      double dt = 0;
      for (size_t e = 0; e < on; e++) dt = fmax(dt, fabs(want[e] - got[e]));
      printf("\n    %s %8.1f µs (max |diff| %.1e)", name, ut, dt);
      gpu_attention_mm_flash_shape(0);
    }
    /* flash_mm's default shape with fewer hi + lo products. */
    for (uint32_t prec = 2; paths[i].path == GPU_ATTN_FLASH_MM && prec >= 1; prec--) {
      gpu_attention_mm_precision(prec);
      double ut = timed(d, &(call){&a, s->relative, false, 0, 0}, reps);
      if (gpu_download(o, 0, got, on * sizeof(float))) exit(1);
      double dt = 0;
      for (size_t e = 0; e < on; e++) dt = fmax(dt, fabs(want[e] - got[e]));
      printf("\n    %s %8.1f µs (max |diff| %.1e)",
             prec == 2 ? "hi + lo scores, f16 p and v" : "f16 alone", ut, dt);
      gpu_attention_mm_precision(3);
    }
    /* The mm path's other scores tiles, then its other values tiles, each
     * against the portable output. */
    for (uint32_t tile = 1; paths[i].path == GPU_ATTN_MM && tile < gpu_attention_mm_tile_pairs(); tile++) {
      uint32_t sc, va;
      gpu_attention_mm_tile_pair(tile, &sc, &va);
      gpu_attention_mm_tile(sc, va);
      double ut = timed(d, &(call){&a, s->relative, false, 0, 0}, reps);
      if (gpu_download(o, 0, got, on * sizeof(float))) exit(1);
      double dt = 0;
      for (size_t e = 0; e < on; e++) dt = fmax(dt, fabs(want[e] - got[e]));
      printf("  %s %u %8.1f µs (max |diff| %.1e)", va ? "values" : "scores", va ? va : sc, ut, dt);
      gpu_attention_mm_tile(0, 0);
    }
  }
  printf("\n");
  fflush(stdout);
  if (experiments && !s->batch && passed[GPU_FAST_ATTENTION_TC]) {
    use_path(d, GPU_FAST_ATTENTION_TC, GPU_ATTN_FLASH_TC);
    variants(&a, d, s->relative, reps);
  }
  gpu_buffer_free(x), gpu_buffer_free(pos), gpu_buffer_free(o), gpu_buffer_free(scores);
  gpu_buffer_free(lens);
  free(want), free(got);
}

/* The mm path's accuracy per precision (argv[2]
 * "acc"): head 0's raw scores against scale·q·k in double, and the output
 * against the portable path's, each relative to its largest magnitude. */
static void accuracy(gpu_device *d) {
  static const struct {
    const char *name;
    uint32_t t, heads, hd;
    float range, scale; /* inputs in ±range; scale 0: 1/√hd */
  } cases[] = {{"t 37, 1×48, ±2, scale 2 (the probe's)", 37, 1, 48, 2, 2},
               {"t 300, 2×64, ±1, scale 3 (test's sharp)", 300, 2, 64, 1, 3},
               {"t 300, 3×128, ±1, scale 3", 300, 3, 128, 1, 3},
               {"t 300, 2×64, ±1, 1/√hd", 300, 2, 64, 1, 0},
               {"t 1500, 20×64, ±1, 1/√hd (Whisper)", 1500, 20, 64, 1, 0}};
  enum { NV = 3 };
  printf("mm accuracy (forced on): scores | outputs, max |diff| relative to the largest, with f16\n"
         "alone, hi + lo scores, hi + lo scores and values (the default)\n");
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    uint32_t t = cases[c].t, hd = cases[c].hd, D = cases[c].heads * hd;
    size_t xn = (size_t)t * 3 * D, on = (size_t)t * D;
    float *xh = random_floats(xn, cases[c].range), *want = malloc(on * sizeof(float));
    float *got = malloc(on * sizeof(float)), *s = malloc((size_t)t * t * sizeof *s);
    if (!want || !got || !s) exit(1);
    gpu_buffer *x, *o, *scores;
    if (gpu_buffer_from(d, xh, xn * sizeof *xh, &x) || gpu_buffer_new(d, on * 4, &o) ||
        gpu_buffer_new(d, gpu_attention_scratch(t, cases[c].heads) * 4, &scores))
      exit(1);
    double scale = cases[c].scale ? cases[c].scale : 1 / sqrt((double)hd), stop = 0;
    double *ref = malloc((size_t)t * t * sizeof *ref);
    if (!ref) exit(1);
    for (uint32_t i = 0; i < t; i++)
      for (uint32_t j = 0; j < t; j++) {
        double dot = 0;
        for (uint32_t e = 0; e < hd; e++) dot += (double)xh[(size_t)i * 3 * D + e] * xh[(size_t)j * 3 * D + D + e];
        ref[(size_t)i * t + j] = scale * dot;
        stop = fmax(stop, fabs(scale * dot));
      }
    gpu_attn a = {.q = {x, 0, 3 * D}, .k = {x, D, 3 * D}, .v = {x, 2 * D, 3 * D}, .o = {o, 0, D},
                  .scores = scores, .t = t, .heads = cases[c].heads, .head_dim = hd,
                  .scale = cases[c].scale};
    printf("%-42s", cases[c].name);
    for (int v = -1; v < NV; v++) {
      use_path(d, v >= 0 ? GPU_FAST_ATTENTION_MM : -1, GPU_ATTN_MM); /* the scores: the two products' */
      if (v >= 0) gpu_attention_mm_precision((uint32_t)v + 1);
      timed(d, &(call){&a, false, false, 0, 0}, 1);
      if (gpu_download(o, 0, v >= 0 ? got : want, on * sizeof(float))) exit(1);
      if (v < 0) continue;
      if (gpu_download(scores, 0, s, (size_t)t * t * sizeof *s)) exit(1);
      double sdiff = 0, big = 0, diff = 0;
      for (size_t e = 0; e < (size_t)t * t; e++) sdiff = fmax(sdiff, fabs(s[e] - ref[e]));
      for (size_t e = 0; e < on; e++) {
        big = fmax(big, fabs(want[e]));
        diff = fmax(diff, fabs(want[e] - got[e]));
      }
      printf("  %.1e|%.1e", sdiff / stop, diff / big);
    }
    printf("\n");
    gpu_attention_mm_precision(3);
    gpu_buffer_free(x), gpu_buffer_free(o), gpu_buffer_free(scores);
    free(xh), free(want), free(got), free(s), free(ref);
  }
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 10;
  experiments = argc > 2 && argv[2][0] == 'x';
  bool acc = argc > 2 && !strcmp(argv[2], "acc");
  gpu_device *d;
  if (reps < 1 || gpu_open(NULL, &d)) return 1;
  printf("%s, %d calls per submission\n", gpu_device_info(d)->name, reps);
  for (int k = 0; k < GPU_FAST_KINDS; k++) passed[k] = gpu_fast_passed(d, (gpu_fast_kernel)k);
  if (acc) {
    if (d->coop) accuracy(d);
    else printf("no cooperative matrices here\n");
    gpu_close(d);
    return 0;
  }
  if (!passed[GPU_FAST_ATTENTION_TC] && !passed[GPU_FAST_ATTENTION_MM]) {
    printf("neither flash_tc nor mm passed its probe here (no cooperative matrices?)\n");
    gpu_close(d);
    return 0;
  }
  printf("softmax: %s\n", gpu_fast_chosen(d, GPU_FAST_SOFTMAX) ? "subgroups" : "portable");
  const shape shapes[] = {
      {"Parakeet 11 s: rel, t 138, 8×128", 138, 8, 128, 0, true},
      {"Parakeet 60 s: rel, t 750, 8×128", 750, 8, 128, 0, true},
      {"Parakeet 64 × 11 s: rel, batched", 138, 8, 128, 64, true},
      {"Whisper turbo: t 1500, 20×64", 1500, 20, 64, 0, false},
      {"probe's timing: t 1000, 8×64", 1000, 8, 64, 0, false},
      {"plain t 138, 8×128", 138, 8, 128, 0, false},
      {"plain t 750, 8×128", 750, 8, 128, 0, false},
      {"plain 64 × t 138, 8×128, batched", 138, 8, 128, 64, false},
      {"plain t 1500, 8×128", 1500, 8, 128, 0, false},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run(d, &shapes[i], reps);
  gpu_close(d);
  return 0;
}
