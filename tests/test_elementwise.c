/* elementwise: SwiGLU (SiLU(gate)·value), the one-group GroupNorm (with
 * and without tanh first) and the row add against plain C on random data at Moonshine's
 * shapes (tiny 288 / base 416 wide, a stem of 30 s: 7500 rows), over slices of
 * wider rows (what lies outside must stay), in place, and bad shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/elementwise.h"
#include "gpu_test.h"
#include "steno.h"

#define EPS 1e-5f

static void swiglu_case(uint32_t rows, uint32_t n, uint32_t x_off, uint32_t x_stride,
                        uint32_t y_off, uint32_t y_stride, bool in_place) {
  if (in_place) y_off = x_off, y_stride = x_stride;
  size_t xn = x_off + (size_t)rows * x_stride, yn = y_off + (size_t)rows * y_stride;
  float *x = test_random(xn, 11), *y0 = in_place ? x : test_random(yn, 12);
  for (size_t i = 0; i < xn; i++) x[i] *= 6.0f; /* gates well into both tails of SiLU */
  float *want = test_floats(yn);
  memcpy(want, y0, yn * sizeof *want);
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t i = 0; i < n; i++) {
      const float *v = x + x_off + (size_t)r * x_stride + i;
      want[y_off + (size_t)r * y_stride + i] = v[0] * ref_silu(v[n]);
    }
  gpu_buffer *xb = test_upload(x, xn), *yb = in_place ? xb : test_upload(y0, yn);
  gpu_rec *rec = test_rec();
  gpu_swiglu(rec, xb, x_off, x_stride, yb, y_off, y_stride, rows, n);
  float *got = test_run_read(rec, yb, yn);
  char what[160];
  snprintf(what, sizeof what, "swiglu rows=%u n=%u x=%u/%u y=%u/%u%s", rows, n, x_off, x_stride,
           y_off, y_stride, in_place ? " in place" : "");
  check_close(what, got, want, yn, KERNEL_TOL);
  free(got), free(want), free(x);
  if (!in_place) free(y0), gpu_buffer_free(yb);
  gpu_buffer_free(xb);
  gpu_rec_free(rec);
}

/* The reference GroupNorm in double sums. */
static void ref_group_norm(const float *x, uint32_t x_off, uint32_t x_stride, const float *g,
                           const float *b, float *y, uint32_t y_off, uint32_t y_stride,
                           uint32_t rows, uint32_t cols, bool th) {
  double mean = 0, var = 0, n = (double)rows * cols;
#define V(r, c) (th ? tanh((double)x[x_off + (size_t)(r) * x_stride + (c)]) \
                    : (double)x[x_off + (size_t)(r) * x_stride + (c)])
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t c = 0; c < cols; c++) mean += V(r, c);
  mean /= n;
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t c = 0; c < cols; c++) var += (V(r, c) - mean) * (V(r, c) - mean);
  double rstd = 1.0 / sqrt(var / n + EPS);
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t c = 0; c < cols; c++)
      y[y_off + (size_t)r * y_stride + c] = (float)((V(r, c) - mean) * rstd * g[c] + b[c]);
#undef V
}

static void group_norm_case(uint32_t rows, uint32_t cols, uint32_t x_off, uint32_t x_stride,
                            uint32_t y_off, uint32_t y_stride, bool th, bool in_place) {
  if (in_place) y_off = x_off, y_stride = x_stride;
  size_t xn = x_off + (size_t)rows * x_stride, yn = y_off + (size_t)rows * y_stride;
  float *x = test_random(xn, 21), *y0 = in_place ? x : test_random(yn, 22);
  float *g = test_random(cols, 23), *b = test_random(cols, 24);
  for (size_t i = 0; i < xn; i++) x[i] = x[i] * 3.0f + 0.5f; /* off-centre, into tanh's tails */
  x[x_off] = 80.0f; /* tanh of a large value must stay finite */
  float *want = test_floats(yn);
  memcpy(want, y0, yn * sizeof *want);
  ref_group_norm(x, x_off, x_stride, g, b, want, y_off, y_stride, rows, cols, th);
  gpu_norm nm = {test_upload(g, cols), test_upload(b, cols), EPS};
  gpu_buffer *xb = test_upload(x, xn), *yb = in_place ? xb : test_upload(y0, yn);
  gpu_rec *rec = test_rec();
  gpu_group_norm(rec, xb, x_off, x_stride, &nm, yb, y_off, y_stride, rows, cols, th);
  float *got = test_run_read(rec, yb, yn);
  char what[160];
  snprintf(what, sizeof what, "group_norm rows=%u cols=%u x=%u/%u y=%u/%u tanh=%d%s", rows, cols,
           x_off, x_stride, y_off, y_stride, th, in_place ? " in place" : "");
  check_close(what, got, want, yn, 1e-4f); /* f32 sums of up to 3M values */
  free(got), free(want), free(x), free(g), free(b);
  if (!in_place) free(y0), gpu_buffer_free(yb);
  gpu_buffer_free(xb), gpu_buffer_free(nm.g), gpu_buffer_free(nm.b);
  gpu_rec_free(rec);
}

static void add_case(uint32_t rows, uint32_t n, uint32_t a_stride, uint32_t b_stride,
                     bool in_place) {
  size_t an = (size_t)rows * a_stride, bn = (size_t)rows * b_stride;
  float *a = test_random(an, 41), *b = test_random(bn, 42), *want = test_floats(an);
  memcpy(want, a, an * sizeof *want);
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t i = 0; i < n; i++) want[(size_t)r * a_stride + i] += b[(size_t)r * b_stride + i];
  gpu_buffer *ab = test_upload(a, an), *bb = test_upload(b, bn);
  gpu_buffer *yb = in_place ? ab : test_upload(a, an);
  gpu_rec *rec = test_rec();
  gpu_add(rec, ab, 0, a_stride, bb, 0, b_stride, yb, 0, a_stride, rows, n);
  float *got = test_run_read(rec, yb, an);
  char what[96];
  snprintf(what, sizeof what, "add rows=%u n=%u strides %u/%u%s", rows, n, a_stride, b_stride,
           in_place ? " in place" : "");
  check_close(what, got, want, an, KERNEL_TOL);
  free(got), free(want), free(a), free(b);
  if (!in_place) gpu_buffer_free(yb);
  gpu_buffer_free(ab), gpu_buffer_free(bb);
  gpu_rec_free(rec);
}

static void expect_invalid(gpu_rec *rec, const char *what) {
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "%s: accepted", what);
  CHECK(strlen(steno_last_error()) > 0, "%s: no message", what);
  gpu_rec_free(rec);
}

static void bad_shapes(void) {
  gpu_buffer *x = test_random_buffer(1024, 1), *y = test_random_buffer(1024, 2);
  gpu_norm n = {test_random_buffer(64, 3), test_random_buffer(64, 4), EPS};
  gpu_rec *rec = test_rec();
  gpu_swiglu(rec, x, 0, 128, y, 0, 64, 9, 64); /* x past the end */
  expect_invalid(rec, "swiglu past the end");
  rec = test_rec();
  gpu_swiglu(rec, x, 0, 128, x, 64, 128, 4, 64); /* y over the gates */
  expect_invalid(rec, "swiglu overlapping");
  rec = test_rec();
  gpu_group_norm(rec, x, 0, 128, &n, y, 0, 128, 4, 128, false); /* 128 columns, 64 weights */
  expect_invalid(rec, "group_norm short weights");
  rec = test_rec();
  gpu_group_norm(rec, x, 0, 64, &n, x, 1, 64, 4, 64, false);
  expect_invalid(rec, "group_norm overlapping");
  rec = test_rec();
  gpu_group_norm(rec, x, 0, 64, &n, y, 0, 64, 17, 64, true);
  expect_invalid(rec, "group_norm past the end");
  rec = test_rec();
  gpu_add(rec, x, 0, 64, y, 0, 64, x, 1, 64, 4, 64); /* y over a, shifted */
  expect_invalid(rec, "add overlapping");
  rec = test_rec();
  gpu_add(rec, x, 0, 64, y, 0, 64, y, 0, 64, 17, 64);
  expect_invalid(rec, "add past the end");
  gpu_buffer_free(x), gpu_buffer_free(y), gpu_buffer_free(n.g), gpu_buffer_free(n.b);
}

int main(void) {
  test_device();
  swiglu_case(1, 1152, 0, 2304, 0, 1152, false);    /* tiny's decoder, one token */
  swiglu_case(1, 1664, 0, 3328, 0, 3328, true);     /* base's, in place as the decoder does */
  swiglu_case(37, 64, 5, 200, 3, 70, false);        /* strided slices */
  swiglu_case(70000, 3, 0, 6, 0, 6, true);          /* more rows than a dispatch holds */
  group_norm_case(1, 7, 0, 7, 0, 7, true, false);
  group_norm_case(374, 288, 0, 320, 0, 320, true, true); /* tiny's stem over 1.5 s */
  group_norm_case(7499, 416, 3, 448, 0, 416, true, false); /* base's over 30 s */
  group_norm_case(50, 40, 0, 64, 5, 64, false, false);
  add_case(150, 320, 320, 320, true);   /* streaming tiny's adapter: enc += positions */
  add_case(150, 620, 640, 620, false);  /* small's width, padded rows */
  add_case(70000, 3, 4, 3, true);
  bad_shapes();
  return check_done();
}
