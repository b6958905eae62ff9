/* Probes of the fast kernels: each runs on the device once, at open, and is
 * used only if it reports the subgroup layout it was written for and computes
 * a small problem as the portable kernel does. A driver that offers a feature
 * but gets it wrong keeps the portable path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/half.h"
#include "base/log.h"
#include "gpu/attention.h"
#include "gpu/conv.h"
#include "gpu/decode.h"
#include "gpu/internal.h"
#include "gpu/linear.h"
#include "gpu/norm.h"

/* A 70×96·(96×64)ᵀ GEMM with F16 weights by fast variant v against the same
 * math on the CPU (70 rows: a partial row tile; 64 columns: a partial column
 * tile for the 128-wide ones; 96: three k steps), with a rounded to f16 where
 * the variant rounds it. gemm_cm2u takes only whole column tiles and trips
 * of k: 70×256·(256×128)ᵀ (its 70 rows still a partial row tile). */
static bool gemm_probe(gpu_device *d, gpu_gemm_variant v) {
  const gpu_gemm_tile *t = &gpu_gemm_tiles[v];
  bool whole = gpu_gemm_is_cm2u(v);
  const int M = 70, N = whole ? 128 : 64, K = whole ? 256 : 96;
  float *a = malloc(sizeof(float) * (size_t)(M * K + N * K + 2 * M * N)), layout[2] = {0, 0};
  uint16_t *wh = malloc(sizeof(uint16_t) * (size_t)(N * K));
  if (!a || !wh) {
    free(a), free(wh);
    return false;
  }
  float *wf = a + M * K, *want = wf + N * K, *got = want + M * N;
  size_t got_bytes = sizeof(float) * (size_t)(M * N);
  uint32_t s = 12345;
  for (int i = 0; i < M * K; i++) a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
  for (int i = 0; i < N * K; i++) {
    wh[i] = f32_to_f16((float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f);
    wf[i] = f16_to_f32(wh[i]);
  }
  for (int r = 0; r < M; r++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int x = 0; x < K; x++)
        acc += (double)(t->a16 ? f16_round(a[r * K + x]) : a[r * K + x]) * wf[j * K + x];
      want[r * N + j] = (float)acc;
    }
  gpu_linear l = {0};
  gpu_weight part = {wh, (uint32_t)N};
  gpu_buffer *ab = NULL, *cb = NULL;
  gpu_rec *rec = NULL;
  bool ok = !gpu_linear_new(d, GPU_F16, (uint32_t)K, &part, 1, NULL, 0, &l) &&
            !gpu_buffer_from(d, a, sizeof(float) * (size_t)(M * K), &ab) && !gpu_buffer_new(d, got_bytes, &cb) &&
            !gpu_rec_new(d, &rec);
  d->fast_gemm = true;
  d->use_fast = GPU_FAST_ALL;
  d->gemm_ok[v] = true;
  d->gemm_force = v;
  /* An empty problem writes the subgroup size and count (gemm_cm2's
   * workgroup-scope matrices have no layout of ours to check). */
  bool layout_check = !gpu_gemm_is_cm2(v);
  if (!layout_check) layout[0] = 32, layout[1] = (float)(t->sg_m * t->sg_n);
  if (ok && layout_check) ok = !gpu_rec_begin(rec);
  if (ok && layout_check) {
    gpu_kernel *k = gpu_gemm_kernel(rec, v, GPU_F16);
    gpu_buffer *bufs[] = {ab, l.bias, cb, l.w, l.bias};
    uint32_t push[8] = {0, l.n, l.k, 0, 0, 0, l.k, l.wk};
    gpu_dispatch(rec, k, bufs, 5, push, sizeof push, 1, 1, 1);
    ok = !gpu_rec_run(rec) && !gpu_download(cb, 0, layout, sizeof layout) && layout[0] == 32 &&
         layout[1] == (float)(t->sg_m * t->sg_n);
  }
  if (ok) ok = !gpu_rec_begin(rec);
  if (ok) {
    gpu_gemm(rec, ab, &l, cb, (uint32_t)M, GPU_EPI_BIAS, 0);
    ok = !gpu_rec_run(rec) && !gpu_download(cb, 0, got, got_bytes);
  }
  float worst = 0;
  for (int i = 0; ok && i < M * N; i++) worst = fmaxf(worst, fabsf(got[i] - want[i]));
  ok = ok && worst <= 1e-4f;
  d->fast_gemm = false;
  d->use_fast = GPU_FAST_OFF;
  d->gemm_ok[v] = false;
  d->gemm_force = GPU_GEMM_AUTO;
  gpu_rec_free(rec);
  gpu_buffer_free(ab);
  gpu_buffer_free(cb);
  gpu_linear_free(&l);
  free(a), free(wh);
  log_info("fast GEMM probe, %s %u×%u tile%s: %s (subgroups %g × %g, max |error| %g)", t->kernel,
           t->sg_m * t->tm * 16, t->sg_n * t->tn * 16, t->bk == 64 ? ", k by 64" : "",
           ok ? "passed" : "failed", layout[1], layout[0], worst);
  return ok;
}

/* ---- the other fast kernels: each against its portable twin on the device ---- */

enum { PROBE_ROWS = 37, PROBE_COLS = 200, PROBE_KERNEL = 9 };

/* Inputs for a probe of `rows` × `cols`: x [rows][2·cols] (+3), w of `wn`
 * values (the depthwise kernel, or the portable attention's scores), g and b
 * of cols·kernel, the output y [rows][cols] and a key mask of cols. `timing`:
 * the model's shape (attention: 8 heads over all of a row) rather than the
 * check's small one; w then holds zeros (scratch for the attention timings,
 * 32 MB for flash_tc's: no need to draw random numbers for it). */
typedef struct {
  gpu_buffer *x, *g, *b, *w, *y, *mask;
  uint32_t rows, cols;
  bool timing;
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

static void probe_bufs_free(probe_bufs *b) {
  gpu_buffer *all[] = {b->x, b->g, b->b, b->w, b->y, b->mask};
  for (int i = 0; i < 6; i++) gpu_buffer_free(all[i]);
}

static bool probe_bufs_new(gpu_device *d, uint32_t rows, uint32_t cols, size_t wn, bool timing,
                           probe_bufs *b) {
  size_t vn = (size_t)cols * PROBE_KERNEL;
  *b = (probe_bufs){probe_buffer(d, (size_t)rows * 2 * cols + 3, 1), probe_buffer(d, vn, 2),
                    probe_buffer(d, vn, 3), probe_buffer(d, wn > vn ? wn : vn, timing ? 0 : 4),
                    probe_buffer(d, (size_t)rows * cols, 0), NULL, rows, cols, timing};
  uint32_t *keys = malloc(cols * sizeof *keys);
  for (uint32_t j = 0; keys && j < cols; j++) keys[j] = j % 3 != 1;
  if (!keys || gpu_buffer_from(d, keys, cols * sizeof *keys, &b->mask)) b->mask = NULL;
  free(keys);
  if (b->x && b->g && b->b && b->w && b->y && b->mask) return true;
  probe_bufs_free(b);
  return false;
}

static void probe_norm(gpu_rec *rec, probe_bufs *b) {
  gpu_norm n = {b->g, b->b, 1e-5f};
  gpu_layer_norm(rec, b->x, 3, 2 * b->cols, &n, b->y, 0, b->cols, b->rows, b->cols, NULL, NULL);
}

static void probe_softmax(gpu_rec *rec, probe_bufs *b) {
  gpu_softmax(rec, (gpu_attn_slice){b->x, 1, 2 * b->cols}, (gpu_attn_slice){b->y, 0, b->cols},
              b->rows, b->cols, 3.0f);
}

static void probe_conv_glu(gpu_rec *rec, probe_bufs *b) {
  gpu_dwconv dw = {b->w, b->b, PROBE_KERNEL};
  gpu_norm n = {b->g, b->b, 1e-5f};
  gpu_conv_glu(rec, b->x, 0, 2 * b->cols, &dw, &n, GPU_CONV_LAYER_NORM, b->y, 0, b->cols, b->rows,
               b->cols);
}

/* Check: the flash pipeline at both head sizes (HD 64 and 128), with a mask,
 * t = 37 over three key blocks, into two parts of y (one head of 40, one of
 * 100). Timing: 8 heads of cols/8 over t = rows, q = k. The portable path's
 * scores go to b->w. */
static void probe_attention(gpu_rec *rec, probe_bufs *b) {
  if (b->timing) {
    uint32_t c = b->cols, w = 2 * c;
    gpu_attn a = {.q = {b->x, 0, w}, .k = {b->x, 0, w}, .v = {b->x, c, w}, .o = {b->y, 0, c},
                  .scores = b->w, .t = b->rows, .heads = 8, .head_dim = c / 8};
    gpu_attention(rec, &a);
    return;
  }
  enum { T = 37 };
  uint32_t at = 0;
  for (uint32_t hd = 48; hd <= 112; hd += 64) { /* flash.comp: multiples of 16 */
    gpu_attn a = {.q = {b->x, 0, 3 * hd}, .k = {b->x, hd, 3 * hd}, .v = {b->x, 2 * hd, 3 * hd},
                  .o = {b->y, at, hd}, .mask = b->mask, .scores = b->w, .t = T, .heads = 1,
                  .head_dim = hd};
    gpu_attention(rec, &a);
    at += T * hd;
  }
}

/* flash_tc: plain attention at head size 48 with the mask and relative
 * attention at Parakeet's head size 128 (its shared memory's tightest case),
 * t = 37 over several key blocks, into two parts of y. Timing: relative, 8
 * heads of cols/8 over t = rows (Parakeet's shape), v = k and q+v = q. */
static void probe_attention_tc(gpu_rec *rec, probe_bufs *b) {
  uint32_t c = b->cols, w = 2 * c, t = b->rows;
  if (b->timing) {
    gpu_attn a = {.q = {b->x, 0, w}, .k = {b->x, c, w}, .v = {b->x, c, w}, .o = {b->y, 0, c},
                  .qv = {b->x, 0, w}, .pos = {b->x, 0, c}, .scores = b->w, .t = t,
                  .heads = 8, .head_dim = c / 8};
    gpu_rel_attention(rec, &a);
    return;
  }
  gpu_attn a = {.q = {b->x, 0, 144}, .k = {b->x, 48, 144}, .v = {b->x, 96, 144},
                .o = {b->y, 0, 48}, .mask = b->mask, .scores = b->w, .t = t, .heads = 1,
                .head_dim = 48};
  gpu_attention(rec, &a);
  /* Rows of 400: q, k, v at 0, 128, 256, q+v overlapping them at 140; pos
   * (2t − 1 rows of 128) over the same values. */
  gpu_attn r = {.q = {b->x, 0, w}, .k = {b->x, 128, w}, .v = {b->x, 256, w},
                .o = {b->y, t * 48, 128}, .qv = {b->x, 140, w}, .pos = {b->x, 0, 128},
                .scores = b->w, .t = t, .heads = 1, .head_dim = 128};
  gpu_rel_attention(rec, &r);
}

/* The tensor-core attention: plain attention at head size 48 with the mask
 * over t = 37 at a sharp scale (flash_mm; f16 scores alone were 3e-3 off
 * there on the H200, f16 probabilities and values 4e-4: both fail the
 * tolerance), at 128 over t = 20 (attention_scores_tc and
 * attention_values_tc, 128 bits at a time), at 16 with the mask over t = 132
 * (flash_mm on 4 subgroups: three workgroups of 64 queries, the last key
 * block cut), into three parts of y. The call at 48 runs flash_mm on 8
 * subgroups: calls choose by their grid, so both shapes are used.
 * Timing: as probe_attention's (flash_mm at 8 heads of 64). */
static void probe_attention_mm(gpu_rec *rec, probe_bufs *b) {
  if (b->timing) {
    probe_attention(rec, b);
    return;
  }
  gpu_attn a = {.q = {b->x, 0, 144}, .k = {b->x, 48, 144}, .v = {b->x, 96, 144},
                .o = {b->y, 0, 48}, .mask = b->mask, .scores = b->w, .t = 37, .heads = 1,
                .head_dim = 48, .scale = 2.0f, .flash_subgroups = 8}; /* sharp scores: their rounding shows */
  gpu_attention(rec, &a);
  gpu_attn w = {.q = {b->x, 0, 384}, .k = {b->x, 128, 384}, .v = {b->x, 256, 384},
                .o = {b->y, 37 * 48, 128}, .scores = b->w, .t = 20, .heads = 1, .head_dim = 128};
  gpu_attention(rec, &w);
  gpu_attn l = {.q = {b->x, 0, 48}, .k = {b->x, 16, 48}, .v = {b->x, 32, 48},
                .o = {b->y, 37 * 48 + 20 * 128, 16}, .mask = b->mask, .scores = b->w, .t = 132,
                .heads = 1, .head_dim = 16, .flash_subgroups = 4};
  gpu_attention(rec, &l);
}

/* An F32 layer of n outputs × k over the probe's buffers: weights from w
 * (rows k apart, so k must be a multiple of 32 as wk), biases from g. */
static gpu_linear probe_layer(const probe_bufs *b, uint32_t n, uint32_t k) {
  return (gpu_linear){.n = n, .rows = n, .k = k, .wk = k, .type = GPU_F32, .w = b->w, .bias = b->g};
}

/* gemm_cpu (it runs only where the fast GEMM does not take the layer: F32
 * weights here, which the fast GEMM never takes). Check: two F32 layers of
 * 64 outputs read from w, biases from g, over 37 rows of x: k 96 with a's
 * rows 400 apart (read 4 at a time), then k 70 (its last chunk cut at k)
 * with rows 399 apart (read one at a time) added by the residual epilogue.
 * Timing: Parakeet's t = rows, k = cols, 256 outputs. */
static void probe_gemm_cpu(gpu_rec *rec, probe_bufs *b) {
  if (b->timing) {
    gpu_linear l = probe_layer(b, 256, b->cols);
    gpu_gemm_strided(rec, b->x, 2 * b->cols, &l, b->y, b->rows, GPU_EPI_BIAS, 1.0f);
    return;
  }
  gpu_linear l = probe_layer(b, 64, 96);
  gpu_gemm_strided(rec, b->x, 2 * b->cols, &l, b->y, b->rows, GPU_EPI_BIAS, 1.0f);
  l.k = 70;
  gpu_gemm_strided(rec, b->x, 2 * b->cols - 1, &l, b->y, b->rows, GPU_EPI_RESIDUAL, 0.5f);
}

/* gemv_fast. Check: an F32 layer of 128 rows from w, biases from g, k 96
 * from x's start into y; then its first 64 rows at k 70 from x[3] (a read
 * one value at a time, the last chunk cut at k) added by the residual
 * epilogue into y from 64 on (what the first wrote: both runs of the probe
 * start from the same values), with 64 dual outputs after. Timing: a
 * decoder's cols × cols layer (Whisper turbo's 1280). */
static void probe_gemv(gpu_rec *rec, probe_bufs *b) {
  if (b->timing) {
    gpu_linear l = probe_layer(b, b->cols, b->cols);
    gpu_gemv(rec, b->x, 0, &l, b->y, 0, GPU_EPI_BIAS, 1.0f);
    return;
  }
  gpu_linear l = probe_layer(b, 128, 96);
  gpu_gemv(rec, b->x, 0, &l, b->y, 0, GPU_EPI_BIAS, 1.0f);
  l.n = l.rows = 64;
  l.k = 70;
  l.dual = 64;
  gpu_gemv(rec, b->x, 3, &l, b->y, 64, GPU_EPI_RESIDUAL, 0.5f);
}

/* attention_scores_cpu (the portable attention's other two dispatches as
 * they are). Check: relative attention at head size 64 (every read whole
 * vec4s), plain attention with the mask at 48, and relative attention at 36
 * with rows 111 floats apart (reads one at a time), t = 37, into three parts
 * of y. Timing: as probe_attention_tc's (Parakeet's relative shape). */
static void probe_attention_cpu(gpu_rec *rec, probe_bufs *b) {
  uint32_t t = b->rows;
  if (b->timing) {
    probe_attention_tc(rec, b);
    return;
  }
  gpu_attn r = {.q = {b->x, 0, 400}, .k = {b->x, 128, 400}, .v = {b->x, 256, 400},
                .o = {b->y, 0, 64}, .qv = {b->x, 140, 400}, .pos = {b->x, 0, 64},
                .scores = b->w, .t = t, .heads = 1, .head_dim = 64};
  gpu_rel_attention(rec, &r);
  gpu_attn a = {.q = {b->x, 0, 144}, .k = {b->x, 48, 144}, .v = {b->x, 96, 144},
                .o = {b->y, t * 64, 48}, .mask = b->mask, .scores = b->w, .t = t, .heads = 1,
                .head_dim = 48};
  gpu_attention(rec, &a);
  gpu_attn u = {.q = {b->x, 0, 111}, .k = {b->x, 37, 111}, .v = {b->x, 74, 111},
                .o = {b->y, t * 112, 36}, .qv = {b->x, 1, 111}, .pos = {b->x, 3, 37},
                .scores = b->w, .t = t, .heads = 1, .head_dim = 36};
  gpu_rel_attention(rec, &u);
}

typedef void (*probe_op)(gpu_rec *rec, probe_bufs *b);

/* Runs `op` with fast kernel k off, then on, and compares: within `tol` of
 * the portable result's largest magnitude (fast_kernels' tol for k). */
static bool twin_probe(gpu_device *d, gpu_fast_kernel k, probe_op op, float tol) {
  enum { N = PROBE_ROWS * PROBE_COLS };
  probe_bufs b;
  float *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
  gpu_rec *rec = NULL;
  /* w: also room for flash_tc's f16 copies of its inputs. */
  bool made = probe_bufs_new(d, PROBE_ROWS, PROBE_COLS, (size_t)1 << 15, false, &b);
  bool ok = made && want && got && !gpu_rec_new(d, &rec);
  d->use_fast = GPU_FAST_ALL;
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
  /* A path that rounds to f16 and matches the portable one exactly did not run. */
  ok = ok && worst <= tol * scale && scale > 0 && (tol <= 1e-5f || worst > 0);
  d->fast[k] = false;
  d->use_fast = GPU_FAST_OFF;
  gpu_rec_free(rec);
  if (made) probe_bufs_free(&b);
  free(want), free(got);
  log_info("fast %s probe: %s (max |error| %g of %g)%s%s", gpu_fast_name(k),
           ok ? "passed" : "failed", worst, scale, ok || scale ? "" : ": ", ok || scale ? "" : err_message());
  return ok;
}

/* ---- timing: a fast kernel is used only where it beats its portable twin ---- */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef void (*timed_op)(gpu_rec *rec, void *arg);

/* Seconds for `reps` calls of op recorded into one submission: the best of
 * two, after one that warms up (or < 0 if the device failed). */
static double op_seconds(gpu_device *d, timed_op op, void *arg, int reps) {
  gpu_rec *rec;
  if (gpu_rec_new(d, &rec)) return -1;
  double best = 1e30;
  for (int run = 0; run < 3 && best >= 0; run++) {
    if (gpu_rec_begin(rec)) best = -1;
    for (int i = 0; best >= 0 && i < reps; i++) op(rec, arg);
    double t0 = now_seconds();
    if (best >= 0 && gpu_rec_run(rec)) best = -1;
    double dt = now_seconds() - t0;
    if (run > 0 && best >= 0 && dt < best) best = dt;
  }
  gpu_rec_free(rec);
  return best;
}

typedef struct {
  probe_op op;
  probe_bufs *b;
} row_op;

static void run_row_op(gpu_rec *rec, void *arg) {
  row_op *r = arg;
  r->op(rec, r->b);
}

/* The model's shapes for timing (Parakeet 0.6B on 11 s: t = 138, d = 1024;
 * flash_tc, used only for long inputs, at t = 1000). */
static const struct {
  uint32_t rows, cols;
} timing_shape[GPU_FAST_KINDS] = {
    [GPU_FAST_NORM] = {138, 1024},         /* t × d */
    [GPU_FAST_SOFTMAX] = {8 * 138, 138},   /* heads·t × t */
    [GPU_FAST_CONV_GLU] = {138, 1024},     /* t × d */
    [GPU_FAST_ATTENTION] = {138, 1024},    /* t, 8 heads of 128 */
    [GPU_FAST_ATTENTION_TC] = {1000, 1024}, /* t, 8 heads of 128, relative */
    [GPU_FAST_ATTENTION_MM] = {1000, 512},  /* t, 8 heads of 64 (Whisper's head size) */
    [GPU_FAST_GEMM_CPU] = {138, 1024},      /* t × k, 256 outputs */
    [GPU_FAST_GEMV] = {1280, 1280},         /* a 1280 × 1280 layer (Whisper turbo's decoder) */
    [GPU_FAST_ATTENTION_CPU] = {138, 1024},  /* t, 8 heads of 128, relative */
};

/* flash.comp is written for lavapipe (one query per invocation, no shared
 * memory): on a GPU it is not used whatever its times — the H200 timed it
 * level with the portable path at 8 heads of 128, the choice flipping from
 * call to call, while at Whisper's 20 heads of 64 over 1500 frames it took
 * 5.0 ms against 0.8. gemm_cpu.comp too (a block of outputs per subgroup,
 * no shared memory): a GPU's shared-memory tiles are what it is not. */
const char *gpu_fast_untimed(const gpu_device *d, gpu_fast_kernel k) {
  bool gpu = !gpu_device_is_cpu(d);
  if ((k == GPU_FAST_ATTENTION || k == GPU_FAST_GEMM_CPU || k == GPU_FAST_ATTENTION_CPU) && gpu)
    return "written for CPU devices";
  /* flash_tc rounds q and k to f16 as the tensor-core attention did before
   * its hi + lo scores: at sharp scores (test_attention's, scale 3) ~6e-3
   * off on the H200, where it was never timed faster anyway. */
  if (k == GPU_FAST_ATTENTION_TC) return "f16 scores, too far off at sharp attention; STENO_FAST=all uses it";
  return NULL;
}

/* Whether fast kernel k (probe passed) runs faster than its portable twin at
 * the model's shape on this device. */
static bool twin_faster(gpu_device *d, gpu_fast_kernel k, probe_op op) {
  uint32_t rows = timing_shape[k].rows, cols = timing_shape[k].cols;
  probe_bufs b;
  /* w: the portable path's scores (and the tensor-core path's row partials)
   * or flash_tc's f16 copies (3 t·cols floats), one at a time. */
  size_t scores = gpu_attention_scratch(rows, 8), copies = (size_t)3 * rows * cols;
  size_t wn = scores > copies ? scores : copies;
  if (!probe_bufs_new(d, rows, cols, wn, true, &b)) return false;
  row_op r = {op, &b};
  double t[2];
  /* The other attention paths off: each is timed against the portable one
   * (attend would otherwise take flash_tc, which comes first, both times). */
  static const gpu_fast_kernel attn[] = {GPU_FAST_ATTENTION, GPU_FAST_ATTENTION_TC,
                                         GPU_FAST_ATTENTION_MM};
  bool kept[3];
  for (int i = 0; i < 3; i++) kept[i] = d->fast[attn[i]], d->fast[attn[i]] &= attn[i] == k;
  d->use_fast = GPU_FAST_ALL;
  for (int fast = 0; fast < 2; fast++) {
    d->fast[k] = fast;
    t[fast] = op_seconds(d, run_row_op, &r, 5);
  }
  for (int i = 0; i < 3; i++) d->fast[attn[i]] = kept[i];
  d->fast[k] = true; /* it passed its probe: only the choice depends on the times */
  d->use_fast = GPU_FAST_OFF;
  probe_bufs_free(&b);
  bool faster = t[0] > 0 && t[1] > 0 && t[1] < t[0];
  log_info("fast %s at %u × %u: %.1f µs, portable %.1f µs: %s", gpu_fast_name(k), rows, cols,
           t[1] * 2e5, t[0] * 2e5, faster ? "used" : "not used");
  return faster;
}

typedef struct {
  gpu_buffer *a, *c;
  gpu_linear *l;
  uint32_t m;
} gemm_op;

static void run_gemm_op(gpu_rec *rec, void *arg) {
  gemm_op *g = arg;
  gpu_gemm(rec, g->a, g->l, g->c, g->m, GPU_EPI_BIAS, 1.0f);
}

/* The fastest GEMM for weights of type t at m × n × k among the portable
 * kernel (GPU_GEMM_AUTO) and the variants that passed their probes. */
static gpu_gemm_variant fastest_gemm(gpu_device *d, gpu_wtype t, uint32_t m, uint32_t n, uint32_t k) {
  float *w = probe_random((size_t)n * k, 5);
  uint8_t *bytes = malloc(gpu_wtype_bytes(t, (size_t)n * k));
  gpu_linear l = {0};
  gemm_op g = {probe_buffer(d, (size_t)m * k, 6), probe_buffer(d, (size_t)m * n, 0), &l, m};
  bool ok = w && bytes && g.a && g.c;
  if (ok) { /* F16 or Q8_0 (scale 1/127: the values are in [-2, 2)) */
    uint16_t *h = (uint16_t *)bytes;
    for (size_t i = 0; t == GPU_F16 && i < (size_t)n * k; i++) h[i] = f32_to_f16(w[i]);
    for (size_t blk = 0; t == GPU_Q8_0 && blk < (size_t)n * k / 32; blk++) {
      uint8_t *q = bytes + blk * 34;
      uint16_t scale = f32_to_f16(2.0f / 127);
      memcpy(q, &scale, 2);
      for (int i = 0; i < 32; i++) q[2 + i] = (uint8_t)(int8_t)lrintf(w[blk * 32 + i] * 63.5f);
    }
    ok = !gpu_linear_new(d, t, k, &(gpu_weight){bytes, n}, 1, NULL, 0, &l);
  }
  gpu_gemm_variant best = GPU_GEMM_AUTO;
  double best_s = 1e30;
  d->use_fast = GPU_FAST_ALL;
  for (int v = 0; ok && v < GPU_GEMM_VARIANTS; v++) {
    if (v && !d->gemm_ok[v]) continue;
    d->gemm_force = (gpu_gemm_variant)v;
    if (!v) d->use_fast = GPU_FAST_OFF;
    double s = op_seconds(d, run_gemm_op, &g, 3);
    d->use_fast = GPU_FAST_ALL;
    log_info("GEMM %s %u×%u×%u: %s%s %.1f µs", t == GPU_Q8_0 ? "Q8_0" : "F16", m, n, k,
             v ? gpu_gemm_tiles[v].kernel : "portable", gpu_gemm_tiles[v].bk == 64 ? " (k by 64)" : "",
             s * 1e6 / 3);
    if (s > 0 && s < best_s) best_s = s, best = (gpu_gemm_variant)v;
  }
  d->gemm_force = GPU_GEMM_AUTO;
  d->use_fast = GPU_FAST_OFF;
  gpu_linear_free(&l);
  gpu_buffer_free(g.a);
  gpu_buffer_free(g.c);
  free(w), free(bytes);
  return best;
}

enum { SG_ARITHMETIC = 1, SG_SHUFFLE = 2 };

static const struct {
  const char *name;
  probe_op op;
  unsigned subgroups; /* the subgroup operations it needs in compute shaders (SG_ bits) */
  bool coop;          /* needs cooperative matrices */
  float tol;          /* largest |fast − portable| in the probe, of the largest |portable| */
} fast_kernels[GPU_FAST_KINDS] = {
    /* Only the order of the sums differs from the portable twins... */
    [GPU_FAST_NORM] = {"layer_norm (subgroups)", probe_norm, SG_ARITHMETIC, false, 1e-5f},
    [GPU_FAST_SOFTMAX] = {"softmax (subgroups)", probe_softmax, SG_ARITHMETIC, false, 1e-5f},
    [GPU_FAST_CONV_GLU] = {"conv_glu (subgroups)", probe_conv_glu, SG_ARITHMETIC, false, 1e-5f},
    [GPU_FAST_ATTENTION] = {"flash attention", probe_attention, 0, false, 1e-5f},
    /* ... but flash_tc rounds q, k, v, q+v, pos and the probabilities to
     * f16: about 1e-3 of the largest output (test_attention). */
    [GPU_FAST_ATTENTION_TC] = {"flash attention (tensor cores)", probe_attention_tc, 0, true,
                               5e-3f},
    /* flash_mm and the two products take q, k, p and v as hi + lo f16
     * pairs: H200 1.8e-5 (a row's max and sum are combined across lanes by
     * shuffles). */
    [GPU_FAST_ATTENTION_MM] = {"attention on the tensor cores (hi + lo f16 products)",
                               probe_attention_mm, SG_SHUFFLE, true, 1e-4f},
    /* Its sums in another order: ~1e-6 of the largest output. */
    [GPU_FAST_GEMM_CPU] = {"GEMM for CPU devices (subgroups)", probe_gemm_cpu, SG_ARITHMETIC, false,
                           1e-5f},
    [GPU_FAST_GEMV] = {"gemv (subgroups)", probe_gemv, SG_ARITHMETIC, false, 1e-5f},
    /* Its sums in another order: ~1e-6 of the largest output. */
    [GPU_FAST_ATTENTION_CPU] = {"attention scores for CPU devices (subgroups)", probe_attention_cpu,
                                SG_ARITHMETIC, false, 1e-5f},
};

/* A fast kernel's tolerance: the tensor-core attention with f16 in its
 * products (gpu_attention_mm_precision below 3) takes flash_tc's. */
static float probe_tol(gpu_fast_kernel k) {
  if (k == GPU_FAST_ATTENTION_MM && gpu_attention_mm_precision_now() < 3)
    return fast_kernels[GPU_FAST_ATTENTION_TC].tol;
  return fast_kernels[k].tol;
}

const char *gpu_fast_name(gpu_fast_kernel k) { return fast_kernels[k].name; }
bool gpu_fast_offered(const gpu_device *d, gpu_fast_kernel k) {
  unsigned sg = fast_kernels[k].subgroups;
  return (d->info.subgroup_arithmetic || !(sg & SG_ARITHMETIC)) &&
         (d->info.subgroup_shuffle || !(sg & SG_SHUFFLE)) && (d->coop || !fast_kernels[k].coop);
}
bool gpu_fast_passed(const gpu_device *d, gpu_fast_kernel k) { return d->fast[k]; }
bool gpu_fast_chosen(const gpu_device *d, gpu_fast_kernel k) { return d->faster[k]; }
bool gpu_fast_used(const gpu_device *d, gpu_fast_kernel k) {
  return d->fast[k] && (d->use_fast == GPU_FAST_ALL || (d->use_fast == GPU_FAST_CHOSEN && d->faster[k]));
}

uint32_t gpu_subgroup_row_groups(const gpu_device *d, uint32_t rows) {
  uint32_t sg = d->info.subgroup_size, per = sg && sg < 64 ? 64 / sg : 1;
  return gpu_row_groups(rows / per + (rows % per != 0));
}

void gpu_probe_fast(gpu_device *d) {
  if (gpu_probe_cache_load(d)) return;
  bool gemm_ok[GPU_GEMM_VARIANTS] = {false};
  for (int v = 1; d->coop && v < GPU_GEMM_VARIANTS; v++)
    if (!gpu_gemm_is_cm2((gpu_gemm_variant)v) || d->coop2) gemm_ok[v] = gemm_probe(d, (gpu_gemm_variant)v);
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++) d->fast_gemm |= d->gemm_ok[v] = gemm_ok[v];
  bool passed[GPU_FAST_KINDS] = {false};
  for (int k = 0; k < GPU_FAST_KINDS; k++)
    if (fast_kernels[k].op && gpu_fast_offered(d, (gpu_fast_kernel)k))
      passed[k] = twin_probe(d, (gpu_fast_kernel)k, fast_kernels[k].op, probe_tol((gpu_fast_kernel)k));
  for (int k = 0; k < GPU_FAST_KINDS; k++) d->fast[k] = passed[k];
  /* On a CPU device (lavapipe) the fast kernels were measured 2.5–26× faster
   * (docs/perf.md) and timing the portable ones there costs seconds: used as
   * they pass. Elsewhere each is timed against its portable twin, as the
   * H200 showed most of them slower. STENO_FAST_TIMED times them anywhere
   * (a test of the timing itself). */
  bool timed = !gpu_device_is_cpu(d) || d->fast_policy == STENO_FAST_TIMED;
  for (int k = 0; k < GPU_FAST_KINDS; k++) {
    const char *why = gpu_fast_untimed(d, (gpu_fast_kernel)k);
    if (passed[k] && why) log_info("fast %s: not used here: %s", gpu_fast_name((gpu_fast_kernel)k), why);
    d->faster[k] = passed[k] && !why && (!timed || twin_faster(d, (gpu_fast_kernel)k, fast_kernels[k].op));
  }
  for (int q = 0; q < 2; q++)
    for (int big = 0; big < 2; big++) {
      gpu_wtype t = q ? GPU_Q8_0 : GPU_F16;
      d->gemm_pick[q][big] = !d->fast_gemm ? GPU_GEMM_AUTO
                             : !timed      ? gpu_gemm_default(d, big)
                             : big         ? fastest_gemm(d, t, 1024, 2048, 1024)
                                           : fastest_gemm(d, t, 138, 3072, 1024);
    }
  gpu_probe_cache_save(d);
}
