/* depthwise, first_depthwise, flatten: the seed's chunked subsampling, the
 * whole dw_striding stack (pointwise GEMMs with padded outputs in between) at
 * Parakeet's mel sizes in chunks, a chunk of a plain depthwise conv read from
 * the middle of its input, and bad arguments. */
#include <stdlib.h>
#include <string.h>

#include "gpu/subsample.h"
#include "gpu_test.h"
#include "steno.h"

/* Whether the references and stack() use NeMo's causal padding (2 before, 1 after). */
static bool causal;

/* A side after one conv of the current padding. */
static size_t H(size_t n) { return causal ? gpu_halve_causal((uint32_t)n) : gpu_halve((uint32_t)n); }

/* 3×3/2 conv padding 1 (causal: 2 before, 1 after) per channel + bias over x [t][f][ch] (pixel
 * stride xs), w [9][ch]: [H(t)][H(f)][ch], sums in double. */
static float *ref_depthwise(const float *x, size_t xs, const float *w, const float *b, size_t t,
                            size_t f, size_t ch) {
  size_t to = H(t), fo = H(f), pad = causal ? 2 : 1;
  float *y = test_floats(to * fo * ch);
  for (size_t r = 0; r < to; r++)
    for (size_t j = 0; j < fo; j++)
      for (size_t c = 0; c < ch; c++) {
        double s = b[c];
        for (size_t k = 0; k < 9; k++) {
          size_t ti = 2 * r + k / 3, fi = 2 * j + k % 3; /* pad past the input position */
          if (ti >= pad && ti - pad < t && fi >= pad && fi - pad < f)
            s += (double)w[k * ch + c] * x[((ti - pad) * f + fi - pad) * xs + c];
        }
        y[(r * fo + j) * ch + c] = (float)s;
      }
  return y;
}

/* ReLU(conv0(mel)): the one-channel image seen by every channel (the seed's `wide`). */
static float *ref_first(const float *mel, const float *w0, const float *b0, size_t t, size_t f,
                        size_t ch) {
  float *wide = test_floats(t * f * ch);
  for (size_t i = 0; i < t * f * ch; i++) wide[i] = mel[i / ch];
  float *y = ref_depthwise(wide, ch, w0, b0, t, f, ch);
  free(wide);
  size_t n = H(t) * H(f) * ch;
  for (size_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0;
  return y;
}

/* The 1×1 conv ch → ch + ReLU per pixel, W [ch][ch] (out, in). */
static void ref_pointwise(float *x, size_t pixels, const float *w, const float *b, size_t ch) {
  float *v = test_floats(ch);
  for (size_t p = 0; p < pixels; p++) {
    for (size_t o = 0; o < ch; o++) {
      double s = b[o];
      for (size_t i = 0; i < ch; i++) s += (double)w[o * ch + i] * x[p * ch + i];
      v[o] = s > 0 ? (float)s : 0;
    }
    memcpy(x + p * ch, v, ch * sizeof *v);
  }
  free(v);
}

static float *ref_flatten(const float *x, size_t xs, size_t t, size_t f, size_t ch) {
  float *y = test_floats(t * f * ch);
  for (size_t r = 0; r < t; r++)
    for (size_t c = 0; c < ch; c++)
      for (size_t j = 0; j < f; j++) y[(r * ch + c) * f + j] = x[(r * f + j) * xs + c];
  return y;
}

/* The seed's test: (29, 11, 5), two chunks of two rows, each from five rows of conv2's output. */
static void seed_shape(void) {
  const size_t t = 29, f = 11, ch = 5;
  float *mel = test_random(t * f, 19);
  float *w[6];
  for (int i = 0; i < 6; i++) w[i] = test_random(i % 2 ? ch : 9 * ch, 20 + i);
  float *first = ref_first(mel, w[0], w[1], t, f, ch);
  size_t t1 = gpu_halve(t), f1 = gpu_halve(f), t2 = gpu_halve(t1), f2 = gpu_halve(f1);
  float *second = ref_depthwise(first, ch, w[2], w[3], t1, f1, ch);
  float *want = ref_depthwise(second, ch, w[4], w[5], t2, f2, ch);
  size_t nout = gpu_halve(t2) * gpu_halve(f2) * ch;

  gpu_buffer *mb = test_upload(mel, t * f), *wb[6];
  for (int i = 0; i < 6; i++) wb[i] = test_upload(w[i], i % 2 ? ch : 9 * ch);
  gpu_buffer *chunk = test_random_buffer(5 * f2 * ch, 1);
  gpu_buffer *yb = test_random_buffer(nout, 2);
  gpu_rec *rec = test_rec();
  for (uint32_t t0 = 0; t0 < 4; t0 += 2) {
    gpu_first_depthwise(rec, mb, wb[0], wb[1], wb[2], wb[3], chunk, t, f, ch, t0, 5);
    gpu_depthwise(rec, chunk, ch, wb[4], wb[5], yb, t2, f2, ch, t0, 2);
  }
  float *got = test_run_read(rec, yb, nout);
  check_close("subsampling 29×11×5, chunks of 2 rows", got, want, nout, KERNEL_TOL);

  float *x = test_random(t * f * ch, 26);
  float *flat = ref_flatten(x, ch, t, f, ch);
  gpu_buffer *xb = test_upload(x, t * f * ch), *fb = test_random_buffer(t * f * ch, 3);
  gpu_rec_begin(rec);
  gpu_flatten(rec, xb, ch, fb, t, f, ch);
  float *gotf = test_run_read(rec, fb, t * f * ch);
  check_close("flatten 29×11×5", gotf, flat, t * f * ch, 0);

  gpu_rec_free(rec);
  for (int i = 0; i < 6; i++) {
    gpu_buffer_free(wb[i]);
    free(w[i]);
  }
  gpu_buffer_free(mb);
  gpu_buffer_free(chunk);
  gpu_buffer_free(yb);
  gpu_buffer_free(xb);
  gpu_buffer_free(fb);
  free(mel);
  free(first);
  free(second);
  free(want);
  free(got);
  free(x);
  free(flat);
  free(gotf);
}

/* The whole dw_striding stack over mel [t][f] with ch channels, `chunk` output rows at a time:
 * first_depthwise → pointwise GEMM + ReLU (output width 64 ≥ ch) → depthwise, then the last
 * pointwise over all rows and flatten reading the GEMM's padded rows. */
static void stack(size_t t, size_t f, size_t ch, uint32_t chunk) {
  float *mel = test_random(t * f, 30);
  float *w[10];
  size_t wn[10];
  for (int i = 0; i < 10; i++) {
    wn[i] = i == 4 || i == 8 ? ch * ch : i % 2 ? ch : 9 * ch; /* 4, 8: pointwise W */
    w[i] = test_random(wn[i], 31 + i);
  }
  size_t t1 = H(t), f1 = H(f), t2 = H(t1), f2 = H(f1), t3 = H(t2), f3 = H(f2);
  float *first = ref_first(mel, w[0], w[1], t, f, ch);
  float *second = ref_depthwise(first, ch, w[2], w[3], t1, f1, ch);
  ref_pointwise(second, t2 * f2, w[4], w[5], ch);
  float *third = ref_depthwise(second, ch, w[6], w[7], t2, f2, ch);
  ref_pointwise(third, t3 * f3, w[8], w[9], ch);
  float *want = ref_flatten(third, ch, t3, f3, ch);

  gpu_device *dev = test_device();
  gpu_buffer *mb = test_upload(mel, t * f), *wb[10];
  for (int i = 0; i < 10; i++) wb[i] = test_upload(w[i], wn[i]);
  gpu_linear pw[2];
  for (int i = 0; i < 2; i++) {
    gpu_weight part = {w[4 + 4 * i], (uint32_t)ch};
    CHECK_OK(gpu_linear_new(dev, GPU_F32, (uint32_t)ch, &part, 1, w[5 + 4 * i], ch, &pw[i]));
  }
  uint32_t width = gpu_linear_width(&pw[0]);
  size_t crows = 2 * chunk + 1; /* conv2 rows per chunk */
  gpu_buffer *a = test_random_buffer(crows * f2 * ch, 4);
  gpu_buffer *pa = test_random_buffer(crows * f2 * width, 5);
  gpu_buffer *y3 = test_random_buffer(t3 * f3 * ch, 6);
  gpu_buffer *p3 = test_random_buffer(t3 * f3 * width, 7);
  gpu_buffer *out = test_random_buffer(t3 * f3 * ch, 8);
  gpu_rec *rec = test_rec();
  for (uint32_t t0 = 0; t0 < t3; t0 += chunk) {
    uint32_t rows = t0 + chunk <= t3 ? chunk : (uint32_t)t3 - t0;
    (causal ? gpu_first_depthwise_causal : gpu_first_depthwise)(rec, mb, wb[0], wb[1], wb[2],
                                                              wb[3], a, t, f, ch, t0, 2 * rows + 1);
    gpu_gemm(rec, a, &pw[0], pa, (2 * rows + 1) * (uint32_t)f2, GPU_EPI_RELU, 0);
    (causal ? gpu_depthwise_causal : gpu_depthwise)(rec, pa, width, wb[6], wb[7], y3, t2, f2, ch,
                                                    t0, rows);
  }
  gpu_gemm(rec, y3, &pw[1], p3, (uint32_t)(t3 * f3), GPU_EPI_RELU, 0);
  gpu_flatten(rec, p3, width, out, t3, f3, ch);
  float *got = test_run_read(rec, out, t3 * f3 * ch);
  char what[128];
  snprintf(what, sizeof what, "dw_striding%s t=%zu mel=%zu ch=%zu in chunks of %u",
           causal ? " causal" : "", t, f, ch, chunk);
  check_close(what, got, want, t3 * f3 * ch, KERNEL_TOL);

  gpu_rec_free(rec);
  for (int i = 0; i < 10; i++) {
    gpu_buffer_free(wb[i]);
    free(w[i]);
  }
  for (int i = 0; i < 2; i++) gpu_linear_free(&pw[i]);
  gpu_buffer_free(mb);
  gpu_buffer_free(a);
  gpu_buffer_free(pa);
  gpu_buffer_free(y3);
  gpu_buffer_free(p3);
  gpu_buffer_free(out);
  free(mel);
  free(first);
  free(second);
  free(third);
  free(want);
  free(got);
}

/* Output rows t0..t0+rows of a plain depthwise conv, x holding only input rows 2·t0 − 1 on with
 * pixel stride xs: those rows right, every other output value untouched. */
static void middle_chunk(size_t t, size_t f, size_t ch, size_t xs, uint32_t t0, uint32_t rows) {
  float *x = test_random(t * f * xs, 40);
  float *w = test_random(9 * ch, 41), *b = test_random(ch, 42);
  size_t to = gpu_halve(t), fo = gpu_halve(f), n = to * fo * ch;
  float *want = ref_depthwise(x, xs, w, b, t, f, ch);
  float *y0 = test_random(n, 43);
  for (size_t i = 0; i < n; i++)
    if (i < t0 * fo * ch || i >= (t0 + rows) * fo * ch) want[i] = y0[i];
  size_t from = (2 * t0 - 1) * f * xs; /* t0 ≥ 1 */
  gpu_buffer *xb = test_upload(x + from, t * f * xs - from);
  gpu_buffer *wb = test_upload(w, 9 * ch), *bb = test_upload(b, ch), *yb = test_upload(y0, n);
  gpu_rec *rec = test_rec();
  gpu_depthwise(rec, xb, (uint32_t)xs, wb, bb, yb, (uint32_t)t, (uint32_t)f, (uint32_t)ch, t0,
                rows);
  float *got = test_run_read(rec, yb, n);
  char what[128];
  snprintf(what, sizeof what, "depthwise %zu×%zu×%zu stride %zu rows %u..+%u", t, f, ch, xs, t0,
           rows);
  check_close(what, got, want, n, KERNEL_TOL);
  gpu_rec_free(rec);
  gpu_buffer_free(xb);
  gpu_buffer_free(wb);
  gpu_buffer_free(bb);
  gpu_buffer_free(yb);
  free(x);
  free(w);
  free(b);
  free(want);
  free(y0);
  free(got);
}

/* Bad shapes become an error from gpu_rec_run, with nothing dispatched. */
/* A padded batch through first_depthwise and depthwise: clips of lens[i] mel
 * frames in pitch rows each (the padding random, so reading it shows), each
 * clip's output against the reference over that clip alone, rows past its
 * own length 0. */
static void batch_case(const uint32_t *lens, uint32_t batch, uint32_t pitch, size_t f, size_t ch) {
  float *mel = test_random(batch * pitch * f, 60), *w[6];
  for (int i = 0; i < 6; i++) w[i] = test_random(i % 2 ? ch : 9 * ch, 61 + i);
  uint32_t P4 = gpu_halve(gpu_halve(pitch)), P8 = gpu_halve(P4);
  size_t F4 = gpu_halve(gpu_halve((uint32_t)f)), F8 = gpu_halve((uint32_t)F4);
  size_t xc = (P4 + 1) * F4 * ch, yc = P8 * F8 * ch, nout = batch * yc;
  uint32_t lens4[8];
  for (uint32_t i = 0; i < batch; i++) lens4[i] = gpu_halve(gpu_halve(lens[i]));
  gpu_buffer *mb = test_upload(mel, batch * pitch * f), *wb[6];
  for (int i = 0; i < 6; i++) wb[i] = test_upload(w[i], i % 2 ? ch : 9 * ch);
  gpu_buffer *l0 = test_upload((const float *)lens, batch);
  gpu_buffer *l4 = test_upload((const float *)lens4, batch);
  gpu_buffer *chunk = test_random_buffer(batch * xc, 3), *yb = test_random_buffer(nout, 4);
  gpu_rec *rec = test_rec();
  gpu_subsample_batch b1 = {batch, l0, pitch * (uint32_t)f, (uint32_t)xc};
  gpu_subsample_batch b2 = {batch, l4, (uint32_t)xc, (uint32_t)yc};
  gpu_first_depthwise_batch(rec, mb, wb[0], wb[1], wb[2], wb[3], chunk, pitch, f, ch, P4 + 1, &b1);
  gpu_depthwise_batch(rec, chunk, ch, wb[4], wb[5], yb, P4, F4, ch, P8, &b2);
  float *got = test_run_read(rec, yb, nout), *want = test_floats(nout);
  for (uint32_t i = 0; i < batch; i++) {
    size_t t = lens[i], t1 = gpu_halve(t), f1 = gpu_halve(f), t2 = gpu_halve(t1);
    float *first = ref_first(mel + i * pitch * f, w[0], w[1], t, f, ch);
    float *second = ref_depthwise(first, ch, w[2], w[3], t1, f1, ch);
    float *third = ref_depthwise(second, ch, w[4], w[5], t2, F4, ch);
    memcpy(want + i * yc, third, gpu_halve(t2) * F8 * ch * sizeof *want); /* the rest stays 0 */
    free(first), free(second), free(third);
  }
  char what[96];
  snprintf(what, sizeof what, "subsampling batch of %u clips of ≤ %u × %zu × %zu", batch, pitch, f,
           ch);
  check_close(what, got, want, nout, KERNEL_TOL);
  gpu_rec_free(rec);
  for (int i = 0; i < 6; i++) gpu_buffer_free(wb[i]), free(w[i]);
  gpu_buffer_free(mb), gpu_buffer_free(l0), gpu_buffer_free(l4), gpu_buffer_free(chunk);
  gpu_buffer_free(yb);
  free(mel), free(got), free(want);
}

static void bad_arguments(void) {
  gpu_buffer *small = test_random_buffer(64, 50), *big = test_random_buffer(4096, 51);
  gpu_rec *rec = test_rec();
  gpu_depthwise(rec, big, 4, big, big, big, 10, 4, 4, 3, 3); /* rows past ⌈10/2⌉ */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "depthwise rows past the end accepted");
  gpu_rec_begin(rec);
  gpu_depthwise(rec, big, 3, big, big, big, 10, 4, 4, 0, 5); /* stride < ch */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "depthwise stride < ch accepted");
  gpu_rec_begin(rec);
  gpu_first_depthwise(rec, small, big, big, big, big, big, 100, 80, 4, 0, 3); /* mel too small */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "first_depthwise small mel accepted");
  gpu_rec_begin(rec);
  gpu_subsample_batch bt = {3, small, 16 * 8, 16 * 8};
  gpu_first_depthwise_batch(rec, big, big, big, big, big, small, 16, 8, 4, 5, &bt); /* y too small */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "first_depthwise batch past y accepted");
  gpu_rec_begin(rec);
  bt.lens = NULL;
  gpu_depthwise_batch(rec, big, 4, big, big, big, 8, 4, 4, 4, &bt); /* no lengths */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "depthwise batch without lengths accepted");
  gpu_rec_begin(rec);
  gpu_flatten(rec, big, 4, small, 10, 4, 4); /* y too small */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "flatten into a small y accepted");
  CHECK(gpu_rec_dispatches(rec) == 0, "%d dispatches", gpu_rec_dispatches(rec));
  gpu_rec_free(rec);
  gpu_buffer_free(small);
  gpu_buffer_free(big);
}

int main(void) {
  test_device();
  /* Every case in the one-channel shape, then (on a CPU device, where whole
   * vec4s allow) in the 4-channel one. */
  for (int vec = 0; vec < 2; vec++) {
    gpu_subsample_vec(vec);
    printf("depthwise: %s shape\n", vec ? "the CPU device's 4-channel" : "the one-channel");
    seed_shape();
    const uint32_t lens[] = {29, 16, 32, 3, 31};
    batch_case(lens, 5, 32, 128, 24); /* the tiny TDT's 128 mels, 24 channels */
    batch_case(lens + 1, 2, 32, 80, 16);
    batch_case(lens + 2, 1, 32, 80, 8);
    stack(100, 128, 32, 4); /* Parakeet's 128 mels, t 100 → 13 rows in 4 chunks */
    stack(100, 80, 32, 5);  /* 80 mels */
    stack(100, 80, 32, 13); /* one chunk of everything */
    causal = true;          /* Nemotron's CausalConv2D: 128 mels → 17 columns */
    stack(100, 128, 32, 4);
    stack(121, 128, 16, 16); /* a streaming chunk: 121 mel frames → 16 rows */
    stack(105, 128, 8, 3);   /* the first one: 105 → 14 */
    stack(25, 80, 8, 4);
    causal = false;
    middle_chunk(37, 19, 7, 9, 5, 8);
    middle_chunk(19, 6, 3, 3, 9, 1); /* the last row: its input ends in padding */
    middle_chunk(37, 19, 8, 12, 5, 8); /* whole vec4s with a padded stride */
    middle_chunk(37, 19, 8, 10, 5, 8); /* a stride of 10: one channel at a time */
  }
  gpu_subsample_vec(true);
  bad_arguments();
  return check_done();
}
