/* mel_normalize_into (src/frontend/mel.c), the out-of-place normalization the
 * Nemotron 3.5 Transcribe towers use for the speech encoder's input: bit for
 * bit mel_normalize in place on a copy, over the first `valid` rows only (the
 * rest of dst untouched, src unchanged), at the real frontend's 128 mels and
 * the tiny fixture's 16, and in place (dst = src). No GPU. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/mel.h"

static void one(size_t rows, size_t valid, int mels, uint32_t seed) {
  size_t n = rows * (size_t)mels;
  float *src = malloc(n * sizeof *src), *keep = malloc(n * sizeof *keep);
  float *want = malloc(n * sizeof *want), *dst = malloc(n * sizeof *dst);
  check_random(src, n, seed);
  for (size_t i = 0; i < n; i++) src[i] = src[i] * 6.0f - 9.0f; /* log-mel-like values */
  memcpy(keep, src, n * sizeof *src);
  memcpy(want, src, n * sizeof *src);
  CHECK_OK(mel_normalize(want, valid, mels));
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
  free(src), free(keep), free(want), free(dst);
}

int main(void) {
  one(6008, 6001, 128, 7);  /* a minute at the real model's 128 mels, padded to 8 frames */
  one(736, 730, 16, 8);     /* the tiny fixture's 16 mels */
  one(3, 2, 5, 9);          /* the fewest valid frames mel_compute takes */
  printf("mel_normalize_into: bit for bit mel_normalize in place at 128, 16 and 5 mels\n");
  return check_done();
}
