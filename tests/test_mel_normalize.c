/* mel_normalize_into (src/frontend/mel.c), the out-of-place normalization the
 * Nemotron 3.5 Transcribe towers use for the speech encoder's input: bit for
 * bit mel_normalize in place on a copy, over the first `valid` rows only (the
 * rest of dst untouched, src unchanged), at the real frontend's 128 mels and
 * the tiny fixture's 16, and in place (dst = src); and both bit for bit the
 * plain loops, whether the groups of features run side by side on workers
 * lent to the thread or in turn. No GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "check.h"
#include "frontend/mel.h"

/* The normalization as first written: every feature's sums at once, over the
 * frames in order, in double. */
static void plain(float *x, size_t valid, int mels) {
  double *sum = calloc((size_t)mels, sizeof *sum), *sq = calloc((size_t)mels, sizeof *sq);
  float *mean = malloc((size_t)mels * sizeof *mean), *scale = malloc((size_t)mels * sizeof *scale);
  for (size_t t = 0; t < valid; t++)
    for (int m = 0; m < mels; m++) sum[m] += x[t * mels + m];
  for (int m = 0; m < mels; m++) mean[m] = (float)(sum[m] / (double)valid);
  for (size_t t = 0; t < valid; t++)
    for (int m = 0; m < mels; m++) {
      double d = x[t * mels + m] - mean[m];
      sq[m] += d * d;
    }
  for (int m = 0; m < mels; m++) scale[m] = (float)sqrt(sq[m] / (double)(valid - 1)) + 1e-5f;
  for (size_t t = 0; t < valid; t++)
    for (int m = 0; m < mels; m++) x[t * mels + m] = (x[t * mels + m] - mean[m]) / scale[m];
  free(sum), free(sq), free(mean), free(scale);
}

static pool *workers; /* lent for every other call: groups of features side by side */

static void one(size_t rows, size_t valid, int mels, uint32_t seed) {
  size_t n = rows * (size_t)mels;
  float *src = malloc(n * sizeof *src), *keep = malloc(n * sizeof *keep);
  float *want = malloc(n * sizeof *want), *dst = malloc(n * sizeof *dst);
  check_random(src, n, seed);
  for (size_t i = 0; i < n; i++) src[i] = src[i] * 6.0f - 9.0f; /* log-mel-like values */
  memcpy(keep, src, n * sizeof *src);
  memcpy(want, src, n * sizeof *src);
  plain(want, valid, mels);
  float *alone = malloc(n * sizeof *alone);
  memcpy(alone, src, n * sizeof *src);
  CHECK_OK(mel_normalize(alone, valid, mels));
  CHECK(!memcmp(alone, want, n * sizeof *alone), "%zu rows, %d mels: differs from the plain loops",
        valid, mels);
  free(alone);
  pool *before = pool_lend(workers);
  for (size_t i = 0; i < n; i++) dst[i] = 1234.5f; /* a sentinel past the valid rows */
  CHECK_OK(mel_normalize_into(dst, src, valid, mels));
  size_t head = valid * (size_t)mels;
  CHECK(!memcmp(dst, want, head * sizeof *dst), "%zu of %zu rows, %d mels: differs from in place",
        valid, rows, mels);
  size_t touched = 0;
  for (size_t i = head; i < n; i++) touched += dst[i] != 1234.5f;
  CHECK(!touched, "%zu values past the valid rows written", touched);
  CHECK(!memcmp(src, keep, n * sizeof *src), "the source changed");
  CHECK_OK(mel_normalize_into(src, src, valid, mels));
  CHECK(!memcmp(src, want, n * sizeof *src), "in place through mel_normalize_into differs");
  pool_lend(before);
  free(src), free(keep), free(want), free(dst);
}

int main(void) {
  CHECK_OK(pool_new(3, &workers));
  one(6008, 6001, 128, 7);  /* a minute at the real model's 128 mels, padded to 8 frames */
  one(736, 730, 16, 8);     /* the tiny fixture's 16 mels */
  one(3, 2, 5, 9);          /* the fewest valid frames mel_compute takes */
  one(1101, 1100, 80, 10);  /* 80 mels: groups of 16 */
  one(501, 500, 20, 11);    /* 20: a group cut short */
  pool_free(workers);
  printf("mel_normalize(_into): bit for bit the plain loops, in place and not, with and without "
         "workers, at 128, 80, 20, 16 and 5 mels\n");
  return check_done();
}
