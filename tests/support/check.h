/* A minimal test harness: CHECK records a failure with its location and goes
 * on; a test program's main returns check_done(), non-zero if anything failed. */
#ifndef STENO_TEST_CHECK_H
#define STENO_TEST_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "steno.h"

extern int check_failures;
extern int check_count;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    check_count++;                                                    \
    if (!(cond)) {                                                    \
      check_failures++;                                               \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
    }                                                                 \
  } while (0)

/* Status of a call that must succeed; prints steno_last_error() if not. */
#define CHECK_OK(expr)                                                        \
  do {                                                                        \
    int check_st_ = (expr);                                                   \
    CHECK(check_st_ == 0, "%s -> %d: %s", #expr, check_st_, steno_last_error()); \
  } while (0)

/* |got − want| ≤ tol · max(1, max|want|) over n values; reports the worst. */
int check_close(const char *what, const float *got, const float *want, size_t n, float tol);

/* |got − want| ≤ tol over n values (absolute); reports the worst. */
int check_abs(const char *what, const float *got, const float *want, size_t n, float tol);

/* Fills x with uniform values in [-1, 1) from a xorshift stream seeded by seed. */
void check_random(float *x, size_t n, uint32_t seed);

/* tests/fixtures/FILE under the source tree (STENO_SOURCE_DIR, else "."). */
void fixture_path(char *buf, size_t cap, const char *file);

/* Prints the summary and returns the exit status. */
int check_done(void);

/* The model params the tests open devices with: as the CLI sets them from
 * STENO_DEVICE, STENO_FAST, STENO_CACHE_DIR, ... (exits on a bad value). */
const steno_model_params *test_params(void);

#endif
