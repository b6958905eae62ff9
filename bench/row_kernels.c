/* Portable vs fast kernels on the same shapes, side by side in one run:
 * layer_norm, softmax, conv_glu, attention (flash) at Parakeet 0.6B widths (d 1024, 8 heads),
 * t frames. Each op is recorded `reps` times into one submission; the best of
 * 3 submissions counts, after 200 ms of the same (gpu_timing.h). On the CPU machine (lavapipe) only the ratio counts.
 * Build and run: bench/row_kernels.sh [t] [reps]. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu/attention.h"
#include "gpu/conv.h"
#include "gpu/norm.h"
#include "gpu_timing.h"

typedef struct {
  gpu_buffer *x, *y, *g, *b, *w, *s;
  uint32_t t;
} work;

static gpu_buffer *random_buffer(gpu_device *d, size_t n) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = (float)rand() / RAND_MAX * 2 - 1;
  gpu_buffer *b;
  if (gpu_buffer_from(d, v, n * sizeof *v, &b)) exit(1);
  free(v);
  return b;
}

static void op_norm(gpu_rec *rec, work *w) {
  gpu_norm n = {w->g, w->b, 1e-5f};
  gpu_layer_norm(rec, w->x, 0, 1024, &n, w->y, 0, 1024, w->t, 1024, NULL, NULL);
}

static void op_softmax(gpu_rec *rec, work *w) {
  gpu_attn_slice s = {w->s, 0, w->t};
  gpu_softmax(rec, s, s, 8 * w->t, w->t, 1.0f); /* the attention's scores: 8 heads */
}

static void op_conv_glu(gpu_rec *rec, work *w) {
  gpu_dwconv dw = {w->w, w->b, 9, false};
  gpu_norm n = {w->g, w->b, 1e-5f};
  gpu_conv_glu(rec, w->x, 0, 2048, &dw, &n, GPU_CONV_LAYER_NORM, w->y, 0, 1024, w->t / 2, 1024);
}

static void op_attention(gpu_rec *rec, work *w) {
  /* 8 heads of 128 over the first 1024 columns of x (q = k = v), into y. */
  gpu_attn a = {.q = {w->x, 0, 1024}, .k = {w->x, 0, 1024}, .v = {w->x, 0, 1024},
                .o = {w->y, 0, 1024}, .scores = w->s, .t = w->t, .heads = 8, .head_dim = 128};
  gpu_attention(rec, &a);
}

/* One op as time_op records it. */
typedef struct {
  void (*op)(gpu_rec *, work *);
  work *w;
} op_call;

static void record_op(gpu_rec *rec, const void *arg) {
  const op_call *o = arg;
  o->op(rec, o->w);
}

/* Best time of one op in seconds (gpu_timing.h: warmed first). */
static double time_op(gpu_device *d, void (*op)(gpu_rec *, work *), work *w, int reps) {
  return bench_gpu_best_us(d, record_op, &(op_call){op, w}, reps) * 1e-6;
}

int main(int argc, char **argv) {
  uint32_t t = argc > 1 ? (uint32_t)atoi(argv[1]) : 138;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  gpu_device *d;
  if (t < 2 || reps < 1 || gpu_open(NULL, &d)) return 1;
  work w = {random_buffer(d, (size_t)t * 1024), random_buffer(d, (size_t)t * 1024),
            random_buffer(d, 1024), random_buffer(d, 1024), random_buffer(d, 1024 * 9),
            random_buffer(d, (size_t)8 * t * t), t};
  const struct {
    const char *name;
    void (*op)(gpu_rec *, work *);
    gpu_fast_kernel k;
  } ops[] = {{"layer_norm t×1024", op_norm, GPU_FAST_NORM},
             {"softmax 8·t×t", op_softmax, GPU_FAST_SOFTMAX},
             {"conv_glu t/2×1024 k9", op_conv_glu, GPU_FAST_CONV_GLU},
             {"attention 8×t×128", op_attention, GPU_FAST_ATTENTION}};
  printf("t = %u, %s\n", t, gpu_device_info(d)->name);
  for (int i = 0; i < (int)(sizeof ops / sizeof ops[0]); i++) {
    if (!gpu_fast_passed(d, ops[i].k)) {
      printf("%-22s fast kernel not available\n", ops[i].name);
      continue;
    }
    gpu_set_fast(d, false);
    double slow = time_op(d, ops[i].op, &w, reps);
    gpu_set_fast(d, true);
    double fast = time_op(d, ops[i].op, &w, reps);
    printf("%-22s portable %8.3f ms  fast %8.3f ms  %.2fx\n", ops[i].name, slow * 1e3, fast * 1e3,
           slow / fast);
  }
  gpu_close(d);
  return 0;
}
