/* norm: LayerNorm (with and without its RoPE copy) and the per-head q/k
 * LayerNorm + partial RoPE, against plain C on random data, over slices of
 * wider rows (everything outside a slice must stay as it was), in place, and
 * for bad shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/norm.h"
#include "gpu_test.h"
#include "steno.h"

#define EPS 1e-5f

/* y = LayerNorm(x) of n values (double sums: the reference answer). */
static void ref_norm(const float *x, const float *g, const float *b, size_t n, float *y) {
  double mean = 0, var = 0;
  for (size_t i = 0; i < n; i++) mean += x[i];
  mean /= (double)n;
  for (size_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  double rstd = 1.0 / sqrt(var / (double)n + EPS);
  for (size_t i = 0; i < n; i++) y[i] = (float)((x[i] - mean) * rstd * g[i] + b[i]);
}

/* Rotate-half RoPE of the first `rot` of each head of hd in y [n] into r,
 * with cos/sin from one table row [cos rot/2 | sin rot/2]. */
static void ref_rope(const float *y, size_t n, size_t hd, size_t rot, const float *table,
                     float *r) {
  size_t half = rot / 2;
  for (size_t i = 0; i < n; i++) {
    size_t d = i % hd;
    if (d >= rot) r[i] = y[i];
    else if (d < half) r[i] = y[i] * table[d] - y[i + half] * table[half + d];
    else r[i] = y[i] * table[d - half] + y[i - half] * table[d];
  }
}

static gpu_norm upload_norm(size_t n, uint32_t seed) {
  return (gpu_norm){test_random_buffer(n, seed), test_random_buffer(n, seed + 1), EPS};
}

static void free_norm(gpu_norm *n) {
  gpu_buffer_free(n->g);
  gpu_buffer_free(n->b);
}

/* One layer_norm over slices: x at (x_off, x_stride), y and yr at (y_off,
 * y_stride); hd 0 = no rope; in_place: y is x. */
static void layer_norm_case(uint32_t rows, uint32_t cols, uint32_t hd, uint32_t x_off,
                            uint32_t x_stride, uint32_t y_off, uint32_t y_stride, uint32_t pos,
                            bool in_place) {
  if (in_place) y_off = x_off, y_stride = x_stride;
  size_t xn = x_off + (size_t)rows * x_stride, yn = y_off + (size_t)rows * y_stride;
  float *x = test_random(xn, 5), *g = test_random(cols, 6), *b = test_random(cols, 7);
  size_t tn = (pos + rows) * (size_t)(hd ? hd : 1);
  float *table = test_random(tn, 8);
  float *y0 = in_place ? x : test_random(yn, 9), *yr0 = test_random(yn, 10);
  float *want = test_floats(yn), *want_r = test_floats(yn);
  memcpy(want, y0, yn * sizeof *want);
  memcpy(want_r, yr0, yn * sizeof *want_r);
  for (uint32_t i = 0; i < rows; i++) {
    float *yi = want + y_off + (size_t)i * y_stride;
    ref_norm(x + x_off + (size_t)i * x_stride, g, b, cols, yi);
    if (hd)
      ref_rope(yi, cols, hd, hd, table + (size_t)(pos + i) * hd, want_r + (yi - want));
  }
  gpu_norm n = {test_upload(g, cols), test_upload(b, cols), EPS};
  gpu_buffer *xb = test_upload(x, xn), *yb = in_place ? xb : test_upload(y0, yn);
  gpu_buffer *rb = test_upload(yr0, yn), *tb = test_upload(table, tn);
  gpu_rope rope = {tb, hd, pos};
  gpu_rec *rec = test_rec();
  gpu_layer_norm(rec, xb, x_off, x_stride, &n, yb, y_off, y_stride, rows, cols, hd ? &rope : NULL,
                 rb);
  float *got = test_run_read(rec, yb, yn);
  char what[160];
  snprintf(what, sizeof what, "layer_norm rows=%u cols=%u x=%u/%u y=%u/%u%s", rows, cols, x_off,
           x_stride, y_off, y_stride, in_place ? " in place" : "");
  check_close(what, got, want, yn, KERNEL_TOL);
  if (hd) {
    float *got_r = test_floats(yn);
    CHECK_OK(gpu_download(rb, 0, got_r, yn * sizeof *got_r));
    snprintf(what, sizeof what, "layer_norm+rope rows=%u cols=%u head_dim=%u pos=%u%s", rows,
             cols, hd, pos, in_place ? " in place" : "");
    check_close(what, got_r, want_r, yn, KERNEL_TOL);
    free(got_r);
  }
  free(got);
  gpu_rec_free(rec);
  free_norm(&n);
  gpu_buffer_free(xb);
  if (!in_place) gpu_buffer_free(yb), free(y0);
  gpu_buffer_free(rb);
  gpu_buffer_free(tb);
  free(x), free(g), free(b), free(table), free(yr0), free(want), free(want_r);
}

static void layer_norms(void) {
  /* The seed's case, then plain and strided slices at real widths. */
  layer_norm_case(37, 192, 0, 0, 192, 0, 192, 0, false);
  layer_norm_case(37, 192, 48, 0, 192, 0, 192, 0, false);
  const uint32_t cols[] = {80, 128, 192, 1024}, hds[] = {40, 64, 48, 64};
  const uint32_t rows[] = {1, 37, 300};
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 3; r++) {
      uint32_t n = cols[c];
      layer_norm_case(rows[r], n, 0, 3, n + 64, 5, n + 32, 0, false);
      layer_norm_case(rows[r], n, hds[c], 0, n, 0, n, 0, false);
      layer_norm_case(rows[r], n, hds[c], 7, n + 96, n, 2 * n + 1, 2, false);
    }
  layer_norm_case(37, 1024, 0, 64, 1100, 0, 0, 0, true);
  layer_norm_case(37, 192, 48, 64, 320, 0, 0, 3, true);
  /* More rows than a dispatch holds along x: the kernel loops. */
  layer_norm_case(70000, 8, 4, 0, 8, 0, 8, 0, false);
}

/* q/k norm + rope on packed rows; v and the padding must stay untouched. */
static void qk_case(uint32_t t, uint32_t heads, uint32_t hd, uint32_t rot, bool norm,
                    uint32_t pos, uint32_t q_off, uint32_t k_off, uint32_t stride) {
  size_t total = (size_t)t * stride, tn = (pos + t) * (size_t)(rot ? rot : 1);
  float *x = test_random(total, 20), *want = test_floats(total), *tmp = test_floats(hd);
  float *g[2], *b[2], *table = test_random(tn, 25);
  for (int z = 0; z < 2; z++) {
    g[z] = test_random(hd, 21 + 2 * z);
    b[z] = test_random(hd, 22 + 2 * z);
  }
  memcpy(want, x, total * sizeof *want);
  for (uint32_t i = 0; i < t; i++)
    for (int z = 0; z < 2; z++)
      for (uint32_t h = 0; h < heads; h++) {
        float *v = want + (size_t)i * stride + (z ? k_off : q_off) + (size_t)h * hd;
        if (norm) ref_norm(v, g[z], b[z], hd, tmp);
        else memcpy(tmp, v, hd * sizeof *tmp);
        ref_rope(tmp, hd, hd, rot, table + (size_t)(pos + i) * rot, v);
      }
  gpu_buffer *xb = test_upload(x, total), *tb = test_upload(table, tn);
  gpu_norm qn = {test_upload(g[0], hd), test_upload(b[0], hd), EPS};
  gpu_norm kn = {test_upload(g[1], hd), test_upload(b[1], hd), EPS};
  gpu_rope rope = {tb, rot, pos};
  gpu_rec *rec = test_rec();
  gpu_qk_norm_rope(rec, xb, q_off, k_off, stride, t, heads, hd, norm ? &qn : NULL,
                   norm ? &kn : NULL, rot ? &rope : NULL);
  float *got = test_run_read(rec, xb, total);
  char what[160];
  snprintf(what, sizeof what,
           "qk_norm_rope t=%u heads=%u hd=%u rot=%u norm=%d pos=%u q=%u k=%u stride=%u", t, heads,
           hd, rot, norm, pos, q_off, k_off, stride);
  check_close(what, got, want, total, KERNEL_TOL);
  free(got);
  gpu_rec_free(rec);
  gpu_buffer_free(xb), gpu_buffer_free(tb);
  free_norm(&qn), free_norm(&kn);
  for (int z = 0; z < 2; z++) free(g[z]), free(b[z]);
  free(x), free(want), free(tmp), free(table);
}

static void qk_norms(void) {
  const uint32_t hds[] = {64, 128}, ts[] = {5, 37};
  for (int h = 0; h < 2; h++)
    for (int ti = 0; ti < 2; ti++)
      for (int norm = 0; norm < 2; norm++)
        for (int half = 0; half < 2; half++) {
          uint32_t hd = hds[h], heads = 3, d = heads * hd;
          /* [q | k | v] padded to the GEMM's 64 columns, like a fused projection. */
          qk_case(ts[ti], heads, hd, half ? hd / 2 : hd, norm, 0, 0, d, 3 * d + 64);
        }
  /* Norm only; k before q at odd offsets; positions from 11. */
  qk_case(37, 2, 64, 0, true, 0, 0, 128, 384);
  qk_case(37, 2, 64, 32, true, 11, 261, 5, 400);
  qk_case(5, 16, 128, 64, false, 3, 0, 2048, 6144);
}

/* Bad shapes are recorded failures with a message, never dispatches. */
static void expect_invalid(gpu_rec *rec, const char *what) {
  CHECK(gpu_rec_dispatches(rec) == 0, "%s: dispatched", what);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "%s: accepted", what);
  CHECK(strlen(steno_last_error()) > 0, "%s: no message", what);
  gpu_rec_free(rec);
}

static void bad_shapes(void) {
  gpu_buffer *x = test_random_buffer(1024, 1), *y = test_random_buffer(1024, 2);
  gpu_buffer *t = test_random_buffer(64, 3);
  gpu_norm n = upload_norm(64, 4), short_n = upload_norm(32, 6);
  gpu_rope rope = {t, 48, 0}, odd = {t, 7, 0};
  gpu_rec *rec = test_rec();
  gpu_layer_norm(rec, x, 0, 64, &n, y, 0, 64, 17, 64, NULL, NULL); /* past the end */
  expect_invalid(rec, "layer_norm past the end");
  rec = test_rec();
  gpu_layer_norm(rec, x, 0, 64, &short_n, y, 0, 64, 4, 64, NULL, NULL);
  expect_invalid(rec, "layer_norm short weights");
  rec = test_rec();
  gpu_layer_norm(rec, x, 0, 64, &n, x, 1, 64, 4, 64, NULL, NULL);
  expect_invalid(rec, "layer_norm overlapping in place");
  rec = test_rec();
  gpu_layer_norm(rec, x, 0, 64, &n, y, 0, 64, 1, 64, &rope, x); /* 64 % 48 */
  expect_invalid(rec, "layer_norm head_dim not dividing");
  rec = test_rec();
  gpu_layer_norm(rec, x, 0, 64, &n, y, 0, 64, 1, 64, &rope, y);
  expect_invalid(rec, "layer_norm rope into y");
  rec = test_rec();
  gpu_qk_norm_rope(rec, x, 0, 32, 128, 4, 1, 64, &n, &n, NULL);
  expect_invalid(rec, "qk_norm_rope q overlapping k");
  rec = test_rec();
  gpu_qk_norm_rope(rec, x, 0, 64, 128, 4, 1, 64, NULL, NULL, &odd);
  expect_invalid(rec, "qk_norm_rope odd rot");
  rec = test_rec();
  gpu_qk_norm_rope(rec, x, 0, 64, 128, 4, 1, 64, &n, NULL, NULL);
  expect_invalid(rec, "qk_norm_rope q norm without k norm");
  rec = test_rec();
  gpu_rope far = {t, 64, 1};
  gpu_qk_norm_rope(rec, x, 0, 64, 128, 1, 1, 64, NULL, NULL, &far); /* table row 1 of 1 */
  expect_invalid(rec, "qk_norm_rope past the table");
  /* Nothing to do is no dispatch, and no error. */
  rec = test_rec();
  gpu_qk_norm_rope(rec, x, 0, 64, 128, 4, 1, 64, NULL, NULL, NULL);
  gpu_layer_norm(rec, x, 0, 64, &n, y, 0, 64, 0, 64, NULL, NULL);
  CHECK(gpu_rec_dispatches(rec) == 0, "no-op dispatched");
  CHECK_OK(gpu_rec_run(rec));
  gpu_rec_free(rec);
  free_norm(&n), free_norm(&short_n);
  gpu_buffer_free(x), gpu_buffer_free(y), gpu_buffer_free(t);
}

int main(void) {
  /* The portable kernel, then the fast one where its probe passed (it
   * serves layer_norm without rope; the rest must keep the portable path). */
  gpu_device *d = test_device();
  for (int fast = 0; fast < 2 && (!fast || gpu_fast_passed(d, GPU_FAST_NORM)); fast++) {
    gpu_set_fast(d, fast);
    printf("layer_norm: %s kernel\n", fast ? "fast" : "portable");
    layer_norms();
    qk_norms();
    bad_shapes();
  }
  return check_done();
}
