/* window_attention: sliding-window attention against plain C on random data
 * at Moonshine Streaming's shapes (tiny 8×40, small 8×64, medium 10×64; the
 * windows (16, 4) and (16, 0)), q/k/v read from one packed q|k|v row as the
 * encoder does, a window wider than the clip, a one-frame window, and bad
 * shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/window.h"
#include "gpu_test.h"
#include "steno.h"

/* o for query i, head h: the reference in double sums. */
static void ref_window(const float *x, uint32_t stride, uint32_t qo, uint32_t ko, uint32_t vo,
                       uint32_t t, uint32_t heads, uint32_t hd, uint32_t left, uint32_t right,
                       float *o, uint32_t o_stride) {
  double *s = calloc(t, sizeof *s), scale = 1.0 / sqrt((double)hd);
  for (uint32_t h = 0; h < heads; h++)
    for (uint32_t i = 0; i < t; i++) {
      double m = -INFINITY, sum = 0;
      for (uint32_t j = 0; j < t; j++) {
        long d = (long)i - (long)j;
        bool in = (d >= 0 && d < (long)left) || (d < 0 && -d < (long)right);
        s[j] = -INFINITY;
        if (!in) continue;
        double dot = 0;
        for (uint32_t e = 0; e < hd; e++)
          dot += (double)x[(size_t)i * stride + qo + h * hd + e] * x[(size_t)j * stride + ko + h * hd + e];
        s[j] = scale * dot;
        m = fmax(m, s[j]);
      }
      for (uint32_t j = 0; j < t; j++) sum += s[j] == -INFINITY ? 0 : (s[j] = exp(s[j] - m));
      for (uint32_t e = 0; e < hd; e++) {
        double acc = 0;
        for (uint32_t j = 0; j < t; j++)
          if (s[j] != -INFINITY) acc += s[j] * x[(size_t)j * stride + vo + h * hd + e];
        o[(size_t)i * o_stride + h * hd + e] = (float)(acc / sum);
      }
    }
  free(s);
}

static void window_case(uint32_t t, uint32_t heads, uint32_t hd, uint32_t left, uint32_t right) {
  uint32_t a = heads * hd, stride = 3 * a + 64, o_stride = a + 32;
  size_t xn = (size_t)t * stride, on = (size_t)t * o_stride;
  float *x = test_random(xn, 31), *o0 = test_random(on, 32), *want = test_floats(on);
  for (size_t i = 0; i < xn; i++) x[i] *= 2.0f; /* peaked softmaxes too */
  memcpy(want, o0, on * sizeof *want);
  ref_window(x, stride, 0, a, 2 * a, t, heads, hd, left, right, want, o_stride);
  gpu_buffer *xb = test_upload(x, xn), *ob = test_upload(o0, on);
  gpu_attn at = {.q = {xb, 0, stride}, .k = {xb, a, stride}, .v = {xb, 2 * a, stride},
                 .o = {ob, 0, o_stride}, .t = t, .heads = heads, .head_dim = hd};
  gpu_rec *rec = test_rec();
  gpu_window_attention(rec, &at, left, right);
  float *got = test_run_read(rec, ob, on);
  char what[128];
  snprintf(what, sizeof what, "window_attention t=%u heads=%u hd=%u window %u/%u", t, heads, hd,
           left, right);
  check_close(what, got, want, on, KERNEL_TOL);
  free(got), free(want), free(x), free(o0);
  gpu_buffer_free(xb), gpu_buffer_free(ob);
  gpu_rec_free(rec);
}

static void bad_shapes(void) {
  gpu_buffer *x = test_random_buffer(4096, 1), *o = test_random_buffer(4096, 2);
  gpu_attn at = {.q = {x, 0, 96}, .k = {x, 32, 96}, .v = {x, 64, 96}, .o = {o, 0, 32}, .t = 40,
                 .heads = 2, .head_dim = 16};
  gpu_rec *rec = test_rec();
  gpu_window_attention(rec, &at, 0, 4); /* no left window */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "left 0 accepted");
  gpu_rec_free(rec);
  rec = test_rec();
  gpu_window_attention(rec, &at, 1000, 100); /* more keys than the shared scores hold */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "a 1099-key window accepted");
  gpu_rec_free(rec);
  at.t = 50; /* x holds 42 rows of 96 */
  rec = test_rec();
  gpu_window_attention(rec, &at, 16, 4);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "rows past the end accepted");
  CHECK(strlen(steno_last_error()) > 0, "no message");
  gpu_rec_free(rec);
  gpu_buffer_free(x), gpu_buffer_free(o);
}

int main(void) {
  test_device();
  window_case(150, 8, 40, 16, 4);  /* tiny */
  window_case(150, 8, 40, 16, 0);
  window_case(97, 8, 64, 16, 4);   /* small */
  window_case(61, 10, 64, 16, 4);  /* medium */
  window_case(5, 2, 16, 16, 4);    /* the window wider than the clip */
  window_case(9, 2, 16, 1, 0);     /* itself only */
  window_case(300, 1, 8, 100, 100); /* more keys than the workgroup */
  bad_shapes();
  return check_done();
}
