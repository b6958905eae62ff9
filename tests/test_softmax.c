/* softmax: rows of the widths attention and decoders use, scaled, in place
 * and between slices of wider rows, more rows than one dispatch dimension
 * holds, and bad shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/attention.h"
#include "gpu_test.h"
#include "steno.h"

/* y[r] = softmax(scale · x[r]) in double, written over a copy of y's buffer. */
static void ref_softmax(const float *x, size_t xo, size_t xs, float *y, size_t yo, size_t ys,
                        size_t rows, size_t cols, float scale) {
  for (size_t r = 0; r < rows; r++) {
    const float *a = x + xo + r * xs;
    double mx = -INFINITY, sum = 0;
    for (size_t c = 0; c < cols; c++) mx = fmax(mx, (double)scale * a[c]);
    for (size_t c = 0; c < cols; c++) sum += exp((double)scale * a[c] - mx);
    float *b = y + yo + r * ys;
    for (size_t c = 0; c < cols; c++) b[c] = (float)(exp((double)scale * a[c] - mx) / sum);
  }
}

/* x [rows][cols] at offset 3 in rows of cols + 5 (values in [-8, 8)); y
 * in place, or at offset 1 in rows of cols + 2 of a buffer whose other values
 * must stay. */
static void one(size_t rows, size_t cols, float scale, bool in_place) {
  size_t xo = 3, xs = cols + 5, yo = in_place ? xo : 1, ys = in_place ? xs : cols + 2;
  size_t xn = xo + rows * xs, yn = yo + rows * ys;
  float *x = test_random(xn, (uint32_t)(rows * 7 + cols));
  for (size_t i = 0; i < xn; i++) x[i] *= 8;
  float *y0 = in_place ? x : test_random(yn, 99);
  float *want = test_floats(yn);
  memcpy(want, y0, yn * sizeof *want);
  ref_softmax(x, xo, xs, want, yo, ys, rows, cols, scale);

  gpu_buffer *xb = test_upload(x, xn), *yb = in_place ? xb : test_upload(y0, yn);
  gpu_rec *rec = test_rec();
  gpu_softmax(rec, (gpu_attn_slice){xb, (uint32_t)xo, (uint32_t)xs},
              (gpu_attn_slice){yb, (uint32_t)yo, (uint32_t)ys}, (uint32_t)rows, (uint32_t)cols,
              scale);
  float *got = test_run_read(rec, yb, yn);
  char what[128];
  snprintf(what, sizeof what, "softmax %zu × %zu scale %g%s", rows, cols, scale,
           in_place ? " in place" : "");
  check_close(what, got, want, yn, KERNEL_TOL);
  gpu_rec_free(rec);
  if (!in_place) gpu_buffer_free(yb), free(y0);
  gpu_buffer_free(xb);
  free(x);
  free(want);
  free(got);
}

/* Shapes the recorder must refuse, each with STENO_ERR_INVALID from the run. */
static void bad_shapes(void) {
  gpu_buffer *b = test_random_buffer(100, 5);
  struct {
    gpu_attn_slice x, y;
    uint32_t rows, cols;
  } bad[] = {
      {{b, 0, 10}, {b, 0, 10}, 0, 10},  /* no rows */
      {{b, 0, 10}, {b, 0, 10}, 10, 0},  /* no columns */
      {{b, 0, 10}, {b, 0, 10}, 11, 10}, /* past the end */
      {{b, 1, 10}, {b, 0, 10}, 10, 10}, /* x past the end by one */
      {{b, 0, 5}, {b, 0, 10}, 4, 10},   /* stride under the columns */
      {{NULL, 0, 10}, {b, 0, 10}, 1, 10},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gpu_rec *rec = test_rec();
    gpu_softmax(rec, bad[i].x, bad[i].y, bad[i].rows, bad[i].cols, 1);
    int st = gpu_rec_run(rec);
    CHECK(st == STENO_ERR_INVALID, "bad softmax shape %zu: status %d", i, st);
    gpu_rec_free(rec);
  }
  gpu_buffer_free(b);
}

static void softmaxes(void) {
  const size_t cols[] = {5, 37, 300, 1500};
  for (int c = 0; c < 4; c++) {
    one(7, cols[c], 1.0f, true);
    one(7, cols[c], 1.0f, false);
    one(130, cols[c], 0.125f, false);
    one(3, cols[c], -2.0f, true);
    one(5, cols[c], 50.0f, false); /* exp(400) overflows unless the max goes first */
  }
  /* More rows than 65535 workgroups: the portable kernel loops. */
  one(70000, 5, 1.0f, true);
  bad_shapes();
}

int main(void) {
  /* The portable kernel, then the fast one where its probe passed. */
  gpu_device *d = test_device();
  for (int fast = 0; fast < 2 && (!fast || gpu_fast_passed(d, GPU_FAST_SOFTMAX)); fast++) {
    gpu_set_fast(d, fast);
    printf("softmax: %s kernel\n", fast ? "fast" : "portable");
    softmaxes();
  }
  return check_done();
}
