/* argmax: rows at the vocabularies of Nemotron 3.5 Transcribe (131072), Whisper
 * (51866) and 32768, and small widths around the workgroup and chunk sizes,
 * against the C loop the decoders use: random rows, rows full of ties, NaNs
 * (x[0] among them), infinities, signed zeros and denormals; one workgroup per
 * row and split over chunks; more rows than one dispatch dimension; bad shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/argmax.h"
#include "gpu_test.h"
#include "steno.h"

/* The decoders' loop, exactly: a NaN never beats, and a NaN x[0] is never beaten. */
static uint32_t ref_argmax(const float *x, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

enum { KINDS = 11 };

/* Row `kind` of n values (random in [-1, 1) from `seed` first). */
static void fill(float *x, uint32_t n, int kind, uint32_t seed) {
  check_random(x, n, seed);
  uint32_t a = n / 3, b = n - 1, c = n / 2 + 129; /* where values are planted */
  switch (kind) {
    case 1: /* quarters: the top value 0.75 is shared by a quarter of the row */
      for (uint32_t i = 0; i < n; i++) x[i] = floorf(x[i] * 4) / 4;
      break;
    case 2: /* NaNs every 7th, one where the maximum would be, one planted maximum after */
      for (uint32_t i = 3; i < n; i += 7) x[i] = NAN;
      x[ref_argmax(x, n)] = NAN;
      if (n > 2) x[b] = 2.0f, x[a] = NAN;
      break;
    case 3: /* x[0] is NaN: 0 whatever follows */
      x[0] = NAN;
      if (n > 1) x[b] = 5.0f;
      break;
    case 4: /* all NaN */
      for (uint32_t i = 0; i < n; i++) x[i] = NAN;
      break;
    case 5: /* all −inf: 0 */
      for (uint32_t i = 0; i < n; i++) x[i] = -INFINITY;
      break;
    case 6: /* all −|x| with −0 before +0: the first zero wins */
      for (uint32_t i = 0; i < n; i++) x[i] = -fabsf(x[i]) - 0.5f;
      x[c % n] = -0.0f, x[a] = -0.0f, x[b] = 0.0f;
      break;
    case 7: /* +inf twice, a NaN between */
      x[b] = INFINITY, x[c % n] = INFINITY, x[a] = NAN;
      break;
    case 8: /* negatives and denormals: the first of the largest denormal */
      for (uint32_t i = 0; i < n; i++) x[i] = -fabsf(x[i]);
      x[c % n] = 3e-45f, x[b] = 3e-45f, x[a] = 1.4e-45f;
      break;
    case 9: /* the maximum at the end, its equal at the start of a later lane */
      x[b] = 1.5f, x[(a + 1) % n] = 1.5f;
      break;
    case 10: /* the maximum at 0, equals later */
      x[0] = 1.5f, x[b] = 1.5f, x[a] = 1.5f;
      break;
  }
}

/* KINDS rows of n at offset 5 in rows of n + 3, ids at offset 2, one workgroup per row or
 * split: each row's id against the loop's. */
static void rows_of(uint32_t n, bool split) {
  uint32_t xo = 5, xs = n + 3, io = 2, rows = KINDS;
  size_t xn = xo + (size_t)rows * xs;
  float *x = test_random(xn, n);
  uint32_t want[KINDS];
  for (int k = 0; k < KINDS; k++) {
    fill(x + xo + (size_t)k * xs, n, k, n * 31u + (uint32_t)k);
    want[k] = ref_argmax(x + xo + (size_t)k * xs, n);
  }
  gpu_device *d = test_device();
  gpu_buffer *xb = test_upload(x, xn), *ids, *scratch = NULL;
  CHECK_OK(gpu_argmax_ids_new(d, io + rows, &ids));
  if (split) CHECK_OK(gpu_buffer_new(d, gpu_argmax_scratch(rows, n) * 4, &scratch));
  gpu_rec *rec = test_rec();
  gpu_argmax(rec, xb, xo, xs, rows, n, ids, io, scratch);
  int want_dispatches = split && n > 2048 ? 2 : 1;
  CHECK(gpu_rec_dispatches(rec) == want_dispatches, "argmax %u: %d dispatches", n,
        gpu_rec_dispatches(rec));
  CHECK_OK(gpu_rec_run(rec));
  uint32_t got[KINDS + 2];
  CHECK_OK(gpu_download(ids, 0, got, sizeof got));
  for (int k = 0; k < KINDS; k++)
    CHECK(got[io + k] == want[k], "argmax of %u%s, row kind %d: %u, the loop %u", n,
          split ? " split" : "", k, got[io + k], want[k]);
  gpu_rec_free(rec);
  gpu_buffer_free(scratch);
  gpu_buffer_free(ids);
  gpu_buffer_free(xb);
  free(x);
}

/* More rows than 65535 workgroups: the kernel loops over rows. */
static void many_rows(void) {
  uint32_t rows = 70000, n = 3;
  float *x = test_random((size_t)rows * n, 7);
  gpu_buffer *xb = test_upload(x, (size_t)rows * n), *ids;
  CHECK_OK(gpu_argmax_ids_new(test_device(), rows, &ids));
  gpu_rec *rec = test_rec();
  gpu_argmax(rec, xb, 0, n, rows, n, ids, 0, NULL);
  CHECK_OK(gpu_rec_run(rec));
  uint32_t *got = malloc(rows * sizeof *got);
  CHECK_OK(gpu_download(ids, 0, got, rows * sizeof *got));
  uint32_t wrong = 0;
  for (uint32_t r = 0; r < rows; r++) wrong += got[r] != ref_argmax(x + (size_t)r * n, n);
  CHECK(wrong == 0, "argmax of %u rows of %u: %u wrong", rows, n, wrong);
  free(got);
  gpu_rec_free(rec);
  gpu_buffer_free(ids);
  gpu_buffer_free(xb);
  free(x);
}

/* Shapes the recorder must refuse, each with STENO_ERR_INVALID from the run. */
static void bad_shapes(void) {
  gpu_buffer *b = test_random_buffer(100, 5), *ids = test_random_buffer(4, 6);
  gpu_buffer *small = test_random_buffer(2, 7), *scratch = test_random_buffer(3, 8);
  gpu_buffer *big = test_random_buffer(5000, 9);
  struct {
    gpu_buffer *x, *ids, *scratch;
    uint32_t off, stride, rows, cols;
  } bad[] = {
      {b, ids, NULL, 0, 10, 0, 10},      /* no rows */
      {b, ids, NULL, 0, 10, 1, 0},       /* no columns */
      {b, ids, NULL, 0, 10, 11, 10},     /* past the end */
      {b, ids, NULL, 1, 10, 10, 10},     /* past the end by one */
      {b, ids, NULL, 0, 5, 4, 10},       /* stride under the columns */
      {NULL, ids, NULL, 0, 10, 1, 10},   /* no x */
      {b, small, NULL, 0, 10, 3, 10},    /* ids too small */
      {b, NULL, NULL, 0, 10, 1, 10},     /* no ids */
      {big, ids, scratch, 0, 2500, 2, 2500}, /* scratch too small (needs 8 words) */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gpu_rec *rec = test_rec();
    gpu_argmax(rec, bad[i].x, bad[i].off, bad[i].stride, bad[i].rows, bad[i].cols, bad[i].ids, 0,
               bad[i].scratch);
    int st = gpu_rec_run(rec);
    CHECK(st == STENO_ERR_INVALID, "bad argmax shape %zu: status %d", i, st);
    gpu_rec_free(rec);
  }
  gpu_buffer_free(b);
  gpu_buffer_free(ids);
  gpu_buffer_free(small);
  gpu_buffer_free(scratch);
  gpu_buffer_free(big);
}

int main(void) {
  const uint32_t widths[] = {131072, 51866, 32768, 4097, 2049, 2048, 129, 128, 5, 2, 1};
  for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
    for (int split = 0; split < 2; split++) rows_of(widths[w], split);
  many_rows();
  bad_shapes();
  return check_done();
}
