#include "check.h"

#include <math.h>
#include <stdlib.h>

#include "params.h"

int check_failures;
int check_count;

static int check_scaled(const char *what, const float *got, const float *want, size_t n, float tol,
                        float scale);

int check_close(const char *what, const float *got, const float *want, size_t n, float tol) {
  float scale = 1.0f;
  for (size_t i = 0; i < n; i++)
    if (fabsf(want[i]) > scale) scale = fabsf(want[i]);
  return check_scaled(what, got, want, n, tol, scale);
}

int check_abs(const char *what, const float *got, const float *want, size_t n, float tol) {
  return check_scaled(what, got, want, n, tol, 1.0f);
}

static int check_scaled(const char *what, const float *got, const float *want, size_t n, float tol,
                        float scale) {
  size_t worst = 0;
  float worst_err = -1.0f;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    float e = fabsf(got[i] - want[i]);
    if (!(e <= tol * scale)) bad++;
    if (!(e <= worst_err)) {
      worst_err = e;
      worst = i;
    }
  }
  check_count++;
  if (bad) {
    check_failures++;
    fprintf(stderr, "%s: %zu of %zu values off; worst [%zu] got %g want %g (tol %g)\n", what, bad,
            n, worst, n ? got[worst] : 0.0, n ? want[worst] : 0.0, tol * scale);
    return 0;
  }
  return 1;
}

void check_random(float *x, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u | 1u;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x[i] = (float)s / 4294967295.0f * 2.0f - 1.0f;
  }
}

int check_done(void) {
  printf("%d checks, %d failed\n", check_count, check_failures);
  return check_failures ? 1 : 0;
}

void fixture_path(char *buf, size_t cap, const char *file) {
  const char *dir = getenv("STENO_SOURCE_DIR");
  snprintf(buf, cap, "%s/tests/fixtures/%s", dir ? dir : ".", file);
}

const steno_model_params *test_params(void) {
  static steno_model_params p;
  static int done;
  if (!done && cli_model_params(&p)) exit(1);
  done = 1;
  return &p;
}
