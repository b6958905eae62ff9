/* Probes of the fast kernels: each runs on the device once, at open, and is
 * used only if it reports the subgroup layout it was written for and computes
 * a small problem as the portable kernel does. A driver that offers a feature
 * but gets it wrong keeps the portable path. */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/half.h"
#include "base/log.h"
#include "gpu/attention.h"
#include "gpu/conv.h"
#include "gpu/internal.h"
#include "gpu/linear.h"
#include "gpu/norm.h"

/* A 70×96·(96×64)ᵀ GEMM with F16 weights by fast variant v against the same
 * math on the CPU (70 rows: a partial row tile; 64 columns: a partial column
 * tile for the 128-wide one; 96: three k steps). */
static bool gemm_probe(gpu_device *d, gpu_gemm_variant v) {
  enum { M = 70, N = 64, K = 96 };
  float a[M * K], wf[N * K], want[M * N], got[M * N], layout[2] = {0, 0};
  uint16_t wh[N * K];
  uint32_t s = 12345;
  for (int i = 0; i < M * K; i++) a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
  for (int i = 0; i < N * K; i++) {
    wh[i] = f32_to_f16((float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f);
    wf[i] = f16_to_f32(wh[i]);
  }
  for (int r = 0; r < M; r++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int x = 0; x < K; x++) acc += (double)a[r * K + x] * wf[j * K + x];
      want[r * N + j] = (float)acc;
    }
  const gpu_gemm_tile *t = &gpu_gemm_tiles[v];
  gpu_linear l = {0};
  gpu_weight part = {wh, N};
  gpu_buffer *ab = NULL, *cb = NULL;
  gpu_rec *rec = NULL;
  bool ok = !gpu_linear_new(d, GPU_F16, K, &part, 1, NULL, 0, &l) &&
            !gpu_buffer_from(d, a, sizeof a, &ab) && !gpu_buffer_new(d, sizeof got, &cb) &&
            !gpu_rec_new(d, &rec);
  d->fast_gemm = d->use_fast = true;
  d->gemm_ok[v] = true;
  d->gemm_force = v;
  /* An empty problem writes the subgroup size and count. */
  if (ok) ok = !gpu_rec_begin(rec);
  if (ok) {
    gpu_kernel *k = gpu_gemm_kernel(rec, v, GPU_F16);
    gpu_buffer *bufs[] = {ab, l.bias, cb, l.w, l.bias};
    uint32_t push[8] = {0, l.n, l.k, 0, 0, 0, l.k, l.wk};
    gpu_dispatch(rec, k, bufs, 5, push, sizeof push, 1, 1, 1);
    ok = !gpu_rec_run(rec) && !gpu_download(cb, 0, layout, sizeof layout) && layout[0] == 32 &&
         layout[1] == (float)(t->sg_m * t->sg_n);
  }
  if (ok) ok = !gpu_rec_begin(rec);
  if (ok) {
    gpu_gemm(rec, ab, &l, cb, M, GPU_EPI_BIAS, 0);
    ok = !gpu_rec_run(rec) && !gpu_download(cb, 0, got, sizeof got);
  }
  float worst = 0;
  for (int i = 0; ok && i < M * N; i++) worst = fmaxf(worst, fabsf(got[i] - want[i]));
  ok = ok && worst <= 1e-4f;
  d->fast_gemm = d->use_fast = false;
  d->gemm_ok[v] = false;
  d->gemm_force = GPU_GEMM_AUTO;
  gpu_rec_free(rec);
  gpu_buffer_free(ab);
  gpu_buffer_free(cb);
  gpu_linear_free(&l);
  log_info("fast GEMM probe, %s %u×%u tile: %s (subgroups %g × %g, max |error| %g)", t->kernel,
           t->sg_m * t->tm * 16, t->sg_n * t->tn * 16, ok ? "passed" : "failed", layout[1],
           layout[0], worst);
  return ok;
}

/* ---- the other fast kernels: each against its portable twin on the device ---- */

enum { PROBE_ROWS = 37, PROBE_COLS = 200, PROBE_KERNEL = 9 };

/* Random inputs for a probe: x [rows][2·cols] and three [cols·kernel] vectors. */
typedef struct {
  gpu_buffer *x, *g, *b, *w, *y, *mask;
} probe_bufs;

/* n values in [-2, 2), or zeros for seed 0. */
static float *probe_random(size_t n, uint32_t seed) {
  float *v = calloc(n, sizeof *v);
  for (size_t i = 0; v && seed && i < n; i++)
    v[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f * 4 - 2;
  return v;
}

static gpu_buffer *probe_buffer(gpu_device *d, size_t n, uint32_t seed) {
  float *v = probe_random(n, seed);
  gpu_buffer *b = NULL;
  if (v && gpu_buffer_from(d, v, n * sizeof *v, &b)) b = NULL;
  free(v);
  return b;
}

static void probe_norm(gpu_rec *rec, probe_bufs *b) {
  gpu_norm n = {b->g, b->b, 1e-5f};
  gpu_layer_norm(rec, b->x, 3, 2 * PROBE_COLS, &n, b->y, 0, PROBE_COLS, PROBE_ROWS, PROBE_COLS,
                 NULL, NULL);
}

static void probe_softmax(gpu_rec *rec, probe_bufs *b) {
  gpu_softmax(rec, (gpu_attn_slice){b->x, 1, 2 * PROBE_COLS},
              (gpu_attn_slice){b->y, 0, PROBE_COLS}, PROBE_ROWS, PROBE_COLS, 3.0f);
}

static void probe_conv_glu(gpu_rec *rec, probe_bufs *b) {
  gpu_dwconv dw = {b->w, b->b, PROBE_KERNEL};
  gpu_norm n = {b->g, b->b, 1e-5f};
  gpu_conv_glu(rec, b->x, 0, 2 * PROBE_COLS, &dw, &n, GPU_CONV_LAYER_NORM, b->y, 0, PROBE_COLS,
               PROBE_ROWS, PROBE_COLS);
}

/* The flash pipeline at both head sizes (HD 64 and 128), with a mask, t = 37
 * over three key blocks, into two parts of y (one head of 40, one of 100);
 * the portable path's scores go to b->w. */
static void probe_attention(gpu_rec *rec, probe_bufs *b) {
  enum { T = 37 };
  uint32_t at = 0;
  for (uint32_t hd = 40; hd <= 100; hd += 60) {
    gpu_attn a = {.q = {b->x, 0, 3 * hd}, .k = {b->x, hd, 3 * hd}, .v = {b->x, 2 * hd, 3 * hd},
                  .o = {b->y, at, hd}, .mask = b->mask, .scores = b->w, .t = T, .heads = 1,
                  .head_dim = hd};
    gpu_attention(rec, &a);
    at += T * hd;
  }
}

typedef void (*probe_op)(gpu_rec *rec, probe_bufs *b);

/* Runs `op` with fast kernel k off, then on, and compares: within 1e-5 of the
 * portable result's largest magnitude (the sums' order is all that differs). */
static bool twin_probe(gpu_device *d, gpu_fast_kernel k, probe_op op) {
  enum { N = PROBE_ROWS * PROBE_COLS };
  size_t xn = (size_t)PROBE_ROWS * 2 * PROBE_COLS + 3, vn = (size_t)PROBE_COLS * PROBE_KERNEL;
  uint32_t keys[PROBE_COLS];
  for (int j = 0; j < PROBE_COLS; j++) keys[j] = j % 3 != 1;
  probe_bufs b = {probe_buffer(d, xn, 1), probe_buffer(d, vn, 2), probe_buffer(d, vn, 3),
                  probe_buffer(d, vn, 4), probe_buffer(d, N, 0), NULL};
  if (gpu_buffer_from(d, keys, sizeof keys, &b.mask)) b.mask = NULL;
  float *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
  gpu_rec *rec = NULL;
  bool ok = b.x && b.g && b.b && b.w && b.y && b.mask && want && got && !gpu_rec_new(d, &rec);
  d->use_fast = true;
  for (int fast = 0; fast < 2 && ok; fast++) {
    d->fast[k] = fast;
    ok = !gpu_rec_begin(rec);
    if (ok) op(rec, &b);
    ok = ok && !gpu_rec_run(rec) && !gpu_download(b.y, 0, fast ? got : want, N * sizeof *got);
  }
  float worst = 0, scale = 0;
  for (int i = 0; ok && i < N; i++) {
    scale = fmaxf(scale, fabsf(want[i]));
    worst = fmaxf(worst, fabsf(got[i] - want[i]));
  }
  ok = ok && worst <= 1e-5f * scale && scale > 0;
  d->fast[k] = d->use_fast = false;
  gpu_rec_free(rec);
  gpu_buffer *all[] = {b.x, b.g, b.b, b.w, b.y, b.mask};
  for (int i = 0; i < 6; i++) gpu_buffer_free(all[i]);
  free(want), free(got);
  log_info("fast %s probe: %s (max |error| %g of %g)%s%s", gpu_fast_name(k),
           ok ? "passed" : "failed", worst, scale, ok || scale ? "" : ": ", ok || scale ? "" : err_message());
  return ok;
}

static const struct {
  const char *name;
  probe_op op;
  bool subgroups; /* needs subgroup arithmetic in compute shaders */
} fast_kernels[GPU_FAST_KINDS] = {
    [GPU_FAST_NORM] = {"layer_norm (subgroups)", probe_norm, true},
    [GPU_FAST_SOFTMAX] = {"softmax (subgroups)", probe_softmax, true},
    [GPU_FAST_CONV_GLU] = {"conv_glu (subgroups)", probe_conv_glu, true},
    [GPU_FAST_ATTENTION] = {"flash attention", probe_attention, false},
};

const char *gpu_fast_name(gpu_fast_kernel k) { return fast_kernels[k].name; }
bool gpu_fast_passed(const gpu_device *d, gpu_fast_kernel k) { return d->fast[k]; }
bool gpu_fast_used(const gpu_device *d, gpu_fast_kernel k) { return d->use_fast && d->fast[k]; }

uint32_t gpu_subgroup_row_groups(const gpu_device *d, uint32_t rows) {
  uint32_t sg = d->info.subgroup_size, per = sg && sg < 64 ? 64 / sg : 1;
  return gpu_row_groups(rows / per + (rows % per != 0));
}

void gpu_probe_fast(gpu_device *d) {
  bool gemm_ok[GPU_GEMM_VARIANTS] = {false};
  for (int v = 1; d->coop && v < GPU_GEMM_VARIANTS; v++) gemm_ok[v] = gemm_probe(d, (gpu_gemm_variant)v);
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++) d->fast_gemm |= d->gemm_ok[v] = gemm_ok[v];
  bool passed[GPU_FAST_KINDS] = {false};
  for (int k = 0; k < GPU_FAST_KINDS; k++)
    if (fast_kernels[k].op && (d->info.subgroup_arithmetic || !fast_kernels[k].subgroups))
      passed[k] = twin_probe(d, (gpu_fast_kernel)k, fast_kernels[k].op);
  for (int k = 0; k < GPU_FAST_KINDS; k++) d->fast[k] = passed[k];
}
