/* conv: im2col for the conv1d shapes the models use, and the Conformer conv
 * module's GLU + depthwise conv + LayerNorm or folded BatchNorm + SiLU,
 * against plain C on random data, over slices of wider rows, and bad shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/conv.h"
#include "gpu_test.h"
#include "steno.h"

#define EPS 1e-5f

/* One im2col: x [t][ch] at (x_off, x_stride) into col [t_out][width]. */
static void im2col_case(uint32_t t, uint32_t ch, gpu_conv1d c, uint32_t x_off, uint32_t x_stride,
                        uint32_t width) {
  uint32_t rows = gpu_conv1d_rows(c, t);
  CHECK(rows == (t + 2 * c.pad - c.kernel) / c.stride + 1, "rows %u", rows);
  size_t xn = x_off + (size_t)t * x_stride, n = (size_t)rows * width;
  float *x = test_random(xn, 9), *want = test_floats(n), *col0 = test_random(n, 10);
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < ch * c.kernel; j++) {
      size_t ci = j / c.kernel, k = j % c.kernel;
      long s = (long)(i * c.stride + k) - (long)c.pad;
      want[i * width + j] = s >= 0 && s < (long)t ? x[x_off + (size_t)s * x_stride + ci] : 0.0f;
    }
  gpu_buffer *xb = test_upload(x, xn), *cb = test_upload(col0, n);
  gpu_rec *rec = test_rec();
  gpu_im2col(rec, xb, x_off, x_stride, cb, width, t, ch, c);
  float *got = test_run_read(rec, cb, n);
  char what[160];
  snprintf(what, sizeof what, "im2col t=%u ch=%u kernel=%u stride=%u pad=%u x=%u/%u width=%u", t,
           ch, c.kernel, c.stride, c.pad, x_off, x_stride, width);
  check_close(what, got, want, n, 0.0f);
  free(got);
  gpu_rec_free(rec);
  gpu_buffer_free(xb), gpu_buffer_free(cb);
  free(x), free(want), free(col0);
}

static void im2cols(void) {
  const gpu_conv1d shapes[] = {{5, 2, 2}, {3, 1, 1}, {3, 2, 1}};
  for (int s = 0; s < 3; s++) {
    gpu_conv1d c = shapes[s];
    im2col_case(37, 20, c, 0, 20, 20 * c.kernel); /* the seed's case */
    /* Strided x; columns padded to the GEMM's multiple of 32. */
    im2col_case(37, 20, c, 3, 25, (20 * c.kernel + 31) / 32 * 32);
    im2col_case(300, 80, c, 0, 80, (80 * c.kernel + 31) / 32 * 32);
  }
  /* More output rows than a dispatch holds along y: the kernel loops. */
  im2col_case(70000, 2, (gpu_conv1d){3, 1, 1}, 0, 2, 32);
  CHECK(gpu_conv1d_rows((gpu_conv1d){5, 1, 0}, 4) == 0, "conv longer than its input");
  CHECK(gpu_conv1d_rows((gpu_conv1d){3, 0, 1}, 4) == 0, "stride 0");
}

static float ref_silu_d(double x) { return (float)(x / (1.0 + exp(-x))); }

/* Whether conv_glu_case's depthwise conv is causal (kernel − 1 taps before, none after). */
static bool causal;

/* The conv module's middle in double: GLU, depthwise conv + bias, norm, SiLU. */
static void ref_conv_glu(const float *h, uint32_t h_off, uint32_t h_stride, const float *w,
                         const float *wb, uint32_t kernel, const float *g, const float *b,
                         gpu_conv_norm mode, float *y, uint32_t y_off, uint32_t y_stride,
                         uint32_t t, uint32_t ch) {
  double *v = malloc(ch * sizeof *v);
  long pad = causal ? (long)kernel - 1 : kernel / 2;
  for (uint32_t i = 0; i < t; i++) {
    double mean = 0, var = 0;
    for (uint32_t c = 0; c < ch; c++) {
      double acc = wb[c];
      for (uint32_t k = 0; k < kernel; k++) {
        long s = (long)i + (long)k - pad;
        if (s < 0 || s >= (long)t) continue;
        const float *hs = h + h_off + (size_t)s * h_stride;
        acc += w[c * kernel + k] * (hs[c] / (1.0 + exp(-(double)hs[ch + c])));
      }
      v[c] = acc;
      mean += acc;
    }
    mean /= ch;
    for (uint32_t c = 0; c < ch; c++) var += (v[c] - mean) * (v[c] - mean);
    double rstd = 1.0 / sqrt(var / ch + EPS);
    float *yi = y + y_off + (size_t)i * y_stride;
    for (uint32_t c = 0; c < ch; c++)
      yi[c] = ref_silu_d(mode == GPU_CONV_AFFINE ? v[c] * g[c] + b[c]
                                                 : (v[c] - mean) * rstd * g[c] + b[c]);
  }
  free(v);
}

static void conv_glu_case(uint32_t t, uint32_t ch, uint32_t kernel, gpu_conv_norm mode,
                          uint32_t h_off, uint32_t h_stride, uint32_t y_off, uint32_t y_stride) {
  size_t hn = h_off + (size_t)t * h_stride, yn = y_off + (size_t)t * y_stride;
  float *h = test_random(hn, 10), *w = test_random(ch * kernel, 11), *wb = test_random(ch, 12);
  float *g = test_random(ch, 13), *b = test_random(ch, 14), *y0 = test_random(yn, 15);
  float *want = test_floats(yn);
  memcpy(want, y0, yn * sizeof *want);
  ref_conv_glu(h, h_off, h_stride, w, wb, kernel, g, b, mode, want, y_off, y_stride, t, ch);
  gpu_buffer *hb = test_upload(h, hn), *yb = test_upload(y0, yn);
  gpu_dwconv dw = {test_upload(w, ch * kernel), test_upload(wb, ch), kernel, causal};
  gpu_norm n = {test_upload(g, ch), test_upload(b, ch), EPS};
  gpu_rec *rec = test_rec();
  gpu_conv_glu(rec, hb, h_off, h_stride, &dw, &n, mode, yb, y_off, y_stride, t, ch);
  float *got = test_run_read(rec, yb, yn);
  char what[160];
  snprintf(what, sizeof what, "conv_glu t=%u ch=%u kernel=%u%s %s h=%u/%u y=%u/%u", t, ch, kernel,
           causal ? " causal" : "", mode == GPU_CONV_AFFINE ? "affine" : "layer_norm", h_off,
           h_stride, y_off, y_stride);
  check_close(what, got, want, yn, KERNEL_TOL);
  free(got);
  gpu_rec_free(rec);
  gpu_buffer_free(hb), gpu_buffer_free(yb), gpu_buffer_free(dw.w), gpu_buffer_free(dw.b);
  gpu_buffer_free(n.g), gpu_buffer_free(n.b);
  free(h), free(w), free(wb), free(g), free(b), free(y0), free(want);
}

static void conv_glus(void) {
  const uint32_t kernels[] = {5, 9}, chs[] = {192, 1024}, ts[] = {37, 300};
  for (int k = 0; k < 2; k++)
    for (int c = 0; c < 2; c++)
      for (int ti = 0; ti < 2; ti++)
        for (int m = 0; m < 2; m++) {
          uint32_t ch = chs[c], t = ts[ti];
          gpu_conv_norm mode = m ? GPU_CONV_AFFINE : GPU_CONV_LAYER_NORM;
          if (ti == 0) conv_glu_case(t, ch, kernels[k], mode, 0, 2 * ch, 0, ch);
          else conv_glu_case(t, ch, kernels[k], mode, 5, 2 * ch + 64, 3, ch + 32);
        }
  /* Shorter than the kernel; one row; kernel 1. */
  conv_glu_case(3, 192, 9, GPU_CONV_LAYER_NORM, 0, 384, 0, 192);
  conv_glu_case(1, 192, 5, GPU_CONV_AFFINE, 0, 384, 0, 192);
  conv_glu_case(37, 100, 1, GPU_CONV_LAYER_NORM, 0, 200, 0, 100);
  /* Causal (Nemotron: kernel 9, LayerNorm; the tiny fixture's 5), and shorter than the kernel. */
  causal = true;
  conv_glu_case(37, 1024, 9, GPU_CONV_LAYER_NORM, 5, 2 * 1024 + 64, 3, 1024 + 32);
  conv_glu_case(22, 32, 5, GPU_CONV_LAYER_NORM, 0, 64, 0, 32);
  conv_glu_case(3, 192, 9, GPU_CONV_AFFINE, 0, 384, 0, 192);
  causal = false;
}

/* A padded batch: clips of seg rows, lens[i] their own; each clip's own rows
 * against the reference over that clip alone (the conv must not read the
 * neighbours' rows nor its own padding), padded rows finite. */
static void conv_glu_batch_case(uint32_t seg, const uint32_t *lens, uint32_t batch, uint32_t ch,
                                uint32_t kernel, gpu_conv_norm mode, uint32_t h_off,
                                uint32_t h_stride, uint32_t y_off, uint32_t y_stride) {
  uint32_t t = batch * seg;
  size_t hn = h_off + (size_t)t * h_stride, yn = y_off + (size_t)t * y_stride;
  float *h = test_random(hn, 20), *w = test_random(ch * kernel, 21), *wb = test_random(ch, 22);
  float *g = test_random(ch, 23), *b = test_random(ch, 24), *y0 = test_random(yn, 25);
  gpu_buffer *hb = test_upload(h, hn), *yb = test_upload(y0, yn);
  gpu_buffer *lb = test_upload((const float *)lens, batch);
  gpu_dwconv dw = {test_upload(w, ch * kernel), test_upload(wb, ch), kernel, false};
  gpu_norm n = {test_upload(g, ch), test_upload(b, ch), EPS};
  gpu_rec *rec = test_rec();
  gpu_conv_glu_batch(rec, hb, h_off, h_stride, &dw, &n, mode, yb, y_off, y_stride, batch, seg, lb,
                     ch);
  float *got = test_run_read(rec, yb, yn), *want = test_floats(yn);
  memcpy(want, got, yn * sizeof *want);
  bool finite = true;
  for (size_t i = 0; i < yn; i++) finite = finite && isfinite(got[i]);
  for (uint32_t c = 0; c < batch; c++)
    ref_conv_glu(h, h_off + c * seg * h_stride, h_stride, w, wb, kernel, g, b, mode, want,
                 y_off + c * seg * y_stride, y_stride, lens[c], ch);
  char what[160];
  snprintf(what, sizeof what, "conv_glu batch of %u × %u rows ch=%u kernel=%u %s", batch, seg, ch,
           kernel, mode == GPU_CONV_AFFINE ? "affine" : "layer_norm");
  CHECK(finite, "%s: padded rows not finite", what);
  check_close(what, got, want, yn, KERNEL_TOL);
  free(got);
  gpu_rec_free(rec);
  gpu_buffer_free(hb), gpu_buffer_free(yb), gpu_buffer_free(lb), gpu_buffer_free(dw.w);
  gpu_buffer_free(dw.b), gpu_buffer_free(n.g), gpu_buffer_free(n.b);
  free(h), free(w), free(wb), free(g), free(b), free(y0), free(want);
}

static void conv_glu_batches(void) {
  /* Parakeet 0.6B's kernel 9 and the tiny TDT's 5; clips full, short, of one row. */
  const uint32_t lens[] = {37, 12, 40, 1, 39};
  conv_glu_batch_case(40, lens, 5, 192, 9, GPU_CONV_AFFINE, 0, 384, 0, 192);
  conv_glu_batch_case(40, lens, 5, 1024, 9, GPU_CONV_LAYER_NORM, 5, 2 * 1024 + 64, 3, 1024 + 32);
  conv_glu_batch_case(40, lens + 2, 2, 64, 5, GPU_CONV_AFFINE, 0, 128, 0, 64);
  /* A batch of one clip, padded. */
  conv_glu_batch_case(40, lens, 1, 64, 5, GPU_CONV_LAYER_NORM, 0, 128, 0, 64);
}

static void expect_invalid(gpu_rec *rec, const char *what) {
  CHECK(gpu_rec_dispatches(rec) == 0, "%s: dispatched", what);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "%s: accepted", what);
  CHECK(strlen(steno_last_error()) > 0, "%s: no message", what);
  gpu_rec_free(rec);
}

static void bad_shapes(void) {
  gpu_buffer *h = test_random_buffer(4096, 1), *y = test_random_buffer(4096, 2);
  gpu_buffer *w = test_random_buffer(640, 3), *v = test_random_buffer(64, 4);
  gpu_dwconv dw = {w, v, 5}, even = {w, v, 4};
  gpu_norm n = {v, v, EPS};
  gpu_rec *rec = test_rec();
  gpu_conv_glu(rec, h, 0, 128, &even, &n, GPU_CONV_LAYER_NORM, y, 0, 64, 8, 64);
  expect_invalid(rec, "conv_glu even kernel");
  rec = test_rec();
  gpu_conv_glu(rec, h, 0, 128, &dw, &n, GPU_CONV_LAYER_NORM, h, 64, 128, 8, 64);
  expect_invalid(rec, "conv_glu y over h's gates");
  rec = test_rec();
  gpu_conv_glu(rec, h, 0, 128, &dw, &n, GPU_CONV_AFFINE, y, 0, 64, 33, 64);
  expect_invalid(rec, "conv_glu past the end of h");
  rec = test_rec();
  gpu_conv_glu(rec, h, 0, 256, &dw, &n, GPU_CONV_AFFINE, y, 0, 128, 8, 128);
  expect_invalid(rec, "conv_glu short weights");
  rec = test_rec();
  gpu_conv_glu_batch(rec, h, 0, 128, &dw, &n, GPU_CONV_AFFINE, y, 0, 64, 4, 8, NULL, 64);
  expect_invalid(rec, "conv_glu batch without lengths");
  rec = test_rec();
  gpu_conv_glu_batch(rec, h, 0, 128, &dw, &n, GPU_CONV_AFFINE, y, 0, 64, 0, 8, v, 64);
  expect_invalid(rec, "conv_glu batch of 0 clips");
  rec = test_rec();
  gpu_conv_glu_batch(rec, h, 0, 128, &dw, &n, GPU_CONV_AFFINE, y, 0, 64, 65, 1, v, 64);
  expect_invalid(rec, "conv_glu batch with lengths for 64 clips of 65");
  rec = test_rec();
  gpu_im2col(rec, h, 0, 20, y, 64, 37, 20, (gpu_conv1d){5, 2, 2});
  expect_invalid(rec, "im2col width below ch·kernel");
  rec = test_rec();
  gpu_im2col(rec, h, 0, 20, y, 100, 4, 20, (gpu_conv1d){5, 1, 0});
  expect_invalid(rec, "im2col kernel longer than the input");
  rec = test_rec();
  gpu_im2col(rec, h, 0, 20, h, 100, 4, 20, (gpu_conv1d){3, 1, 1});
  expect_invalid(rec, "im2col in place");
  /* Where h and y share a buffer but no element, the op runs. */
  rec = test_rec();
  gpu_conv_glu(rec, h, 0, 192, &dw, &n, GPU_CONV_AFFINE, h, 128, 192, 8, 64);
  CHECK(gpu_rec_dispatches(rec) == 1, "conv_glu into h's spare columns");
  CHECK_OK(gpu_rec_run(rec));
  gpu_rec_free(rec);
  gpu_buffer_free(h), gpu_buffer_free(y), gpu_buffer_free(w), gpu_buffer_free(v);
}

int main(void) {
  test_device();
  im2cols();
  /* conv_glu's portable kernel, then the fast one where its probe passed. */
  gpu_device *d = test_device();
  for (int fast = 0; fast < 2 && (!fast || gpu_fast_passed(d, GPU_FAST_CONV_GLU)); fast++) {
    gpu_set_fast(d, fast);
    printf("conv_glu: %s kernel\n", fast ? "fast" : "portable");
    conv_glus();
    conv_glu_batches();
    bad_shapes();
  }
  return check_done();
}
