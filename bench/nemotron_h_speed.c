/* Nemotron-H's layer kernels at Nemotron 3.5 Transcribe's shapes (hidden 2688;
 * Mamba-2 64 heads × 64, 8 groups of 128 states, conv 4 over 6144 channels;
 * attention 32 heads over 2 of 128; 128 experts of 1856, top 6, BF16 weights),
 * over a prompt of t tokens and for one token: the routed experts one GEMV per
 * (token, expert) pair against grouped by expert, the selective scan, the conv,
 * attention over t keys. Each op is recorded `reps` times into one submission;
 * the best of 3 counts. On lavapipe only the ratios mean anything (and its
 * 128 MiB buffers hold 13 experts: give `experts` 8 there).
 * Build and run: bench/nemotron_h_speed.sh [t] [reps] [experts]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gqa.h"
#include "gpu/moe.h"
#include "gpu/ssm.h"
#include "steno.h"

enum { H = 2688, I = 1856, K = 6, HEADS = 64, P = 64, N = 128, G = 8, CH = 6144 };
static uint32_t E = 128; /* experts (fewer where a device's buffers are small, e.g. lavapipe's 128 MiB) */

typedef struct {
  uint32_t t;
  gpu_linear up, down;
  gpu_buffer *x, *idx, *wts, *eh, *list, *count, *ey, *c; /* experts */
  gpu_buffer *u, *dt, *par, *state, *y, *cw, *cb, *cstate; /* Mamba-2 */
  gpu_buffer *q, *kv, *o;                                   /* attention */
} work;

static void die(const char *what) {
  fprintf(stderr, "%s: %s\n", what, steno_last_error());
  exit(1);
}

static uint32_t rng = 2463534242u;
static float uniform(void) { /* xorshift32: the expert weights are 1.3 GB */
  rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
  return (float)(rng >> 8) / 16777216.0f * 2 - 1;
}

static gpu_buffer *random_buffer(gpu_device *d, size_t n, float scale) {
  float *v = malloc(n * sizeof *v);
  if (!v) exit(1);
  for (size_t i = 0; i < n; i++) v[i] = uniform() * scale;
  gpu_buffer *b;
  if (gpu_buffer_from(d, v, n * sizeof *v, &b)) die("buffer");
  free(v);
  return b;
}

/* E experts of `rows` × k as BF16 (the checkpoint's type). */
static void experts(gpu_device *d, uint32_t rows, uint32_t k, gpu_linear *out) {
  size_t n = (size_t)E * rows * k;
  uint16_t *w = malloc(n * sizeof *w);
  if (!w) exit(1);
  for (size_t i = 0; i < n; i++) {
    float f = uniform() * 0.03f;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    w[i] = (uint16_t)(bits >> 16);
  }
  gpu_weight part = {w, E * rows};
  if (gpu_linear_new(d, GPU_BF16, k, &part, 1, NULL, 0, out)) die("experts");
  free(w);
}

/* Every token picks K distinct experts (j·E/K apart), spread over all. */
static gpu_buffer *routes(gpu_device *d, uint32_t t) {
  uint32_t *idx = malloc((size_t)t * K * sizeof *idx);
  if (!idx) exit(1);
  for (uint32_t r = 0; r < t; r++)
    for (uint32_t j = 0; j < K; j++) idx[r * K + j] = (r * 37 + j * (E / K)) % E;
  gpu_buffer *b;
  if (gpu_buffer_from(d, idx, (size_t)t * K * sizeof *idx, &b)) die("routes");
  free(idx);
  return b;
}

static void op_pairs(gpu_rec *rec, work *w) {
  gpu_moe_up(rec, &w->up, I, K, w->x, 0, H, w->idx, w->eh, w->t);
  gpu_moe_down(rec, &w->down, H, K, w->eh, w->idx, w->wts, w->c, 0, H, w->t);
}

static void op_grouped(gpu_rec *rec, work *w) {
  gpu_moe_lists(rec, E, K, w->idx, w->list, w->count, w->t);
  gpu_moe_up_grouped(rec, &w->up, I, K, w->x, 0, H, w->list, w->count, w->eh, w->t);
  gpu_moe_down_grouped(rec, &w->down, H, K, w->eh, w->list, w->count, w->wts, w->ey, w->c, 0, H,
                       w->t);
}

static void op_scan(gpu_rec *rec, work *w) {
  gpu_scan_state s = {w->par, w->state, HEADS, P, N, G};
  gpu_ssm_scan(rec, &s, true, 1e-3f, w->u, 0, CH, HEADS * P, HEADS * P + G * N, w->dt, 0, HEADS,
               w->y, 0, HEADS * P, w->t);
}

static void op_conv(gpu_rec *rec, work *w) {
  gpu_conv_state c = {w->cw, w->cb, w->cstate, CH, 4};
  gpu_ssm_conv(rec, &c, true, w->u, 0, CH, w->y, 0, CH, w->t);
}

static void op_attention(gpu_rec *rec, work *w) {
  gpu_gqa a = {.q = w->q, .q_stride = 32 * 128, .kv = w->kv, .k_off = 0, .v_off = 256,
               .kv_stride = 512, .o = w->o, .o_stride = 32 * 128, .nq = w->t, .pos = 0,
               .heads = 32, .kv_heads = 2, .hd = 128};
  gpu_gqa_attend(rec, &a);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double time_op(gpu_device *d, void (*op)(gpu_rec *, work *), work *w, int reps) {
  gpu_rec *rec;
  if (gpu_rec_new(d, &rec)) exit(1);
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    if (gpu_rec_begin(rec)) exit(1);
    for (int i = 0; i < reps; i++) op(rec, w);
    double t0 = now();
    if (gpu_rec_run(rec)) die("run");
    double dt = now() - t0;
    best = dt < best ? dt : best;
  }
  gpu_rec_free(rec);
  return best / reps;
}

static void buffers(gpu_device *d, work *w, uint32_t t) {
  size_t n = t;
  w->x = random_buffer(d, n * H, 1), w->c = random_buffer(d, n * H, 1);
  w->wts = random_buffer(d, n * K, 0.5f), w->eh = random_buffer(d, n * K * I, 1);
  w->list = random_buffer(d, (size_t)E * n, 0), w->count = random_buffer(d, E, 0);
  w->ey = random_buffer(d, n * K * H, 1);
  w->u = random_buffer(d, n * CH, 1), w->dt = random_buffer(d, n * HEADS, 1);
  w->par = random_buffer(d, 3 * HEADS, 1), w->state = random_buffer(d, (size_t)HEADS * P * N, 1);
  w->y = random_buffer(d, n * CH, 1), w->cw = random_buffer(d, (size_t)CH * 4, 0.5f);
  w->cb = random_buffer(d, CH, 0.1f), w->cstate = random_buffer(d, 3 * CH, 1);
  w->q = random_buffer(d, n * 32 * 128, 1), w->kv = random_buffer(d, n * 512, 1);
  w->o = random_buffer(d, n * 32 * 128, 1);
}

int main(int argc, char **argv) {
  uint32_t t = argc > 1 ? (uint32_t)atoi(argv[1]) : 400;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  if (argc > 3) E = (uint32_t)atoi(argv[3]);
  gpu_device *d;
  if (t < 1 || t > 10000 || reps < 1 || E < K || E > 1024)
    return fprintf(stderr, "usage: nemotron_h_speed [t ≤ 10000] [reps] [experts 6..1024]\n"), 1;
  if (gpu_open(NULL, &d)) die("device");
  work w = {.t = t};
  experts(d, I, H, &w.up);
  experts(d, H, I, &w.down);
  buffers(d, &w, t);
  w.idx = routes(d, t);
  printf("t = %u tokens, %u experts, %s\n", t, E, gpu_device_info(d)->name);
  double pairs = time_op(d, op_pairs, &w, reps), grouped = time_op(d, op_grouped, &w, reps);
  printf("experts up+down, per pair %9.3f ms  grouped %9.3f ms  %.2fx\n", pairs * 1e3,
         grouped * 1e3, pairs / grouped);
  printf("ssm_scan t rows    %9.3f ms\n", time_op(d, op_scan, &w, reps) * 1e3);
  printf("ssm_conv t rows    %9.3f ms\n", time_op(d, op_conv, &w, reps) * 1e3);
  printf("gqa_attend t × t   %9.3f ms\n", time_op(d, op_attention, &w, reps) * 1e3);
  w.t = 1; /* one generated token */
  double one = time_op(d, op_pairs, &w, reps), scan = time_op(d, op_scan, &w, reps);
  printf("one token: experts per pair %.3f ms, scan %.3f ms\n", one * 1e3, scan * 1e3);
  gpu_close(d);
  return 0;
}
