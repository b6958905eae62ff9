/* The frontends' FFT (src/frontend/fft.c) against a plain DFT on random
 * data: every radix (4, 2, odd primes up to 61) and the frontends' sizes
 * (Parakeet's 512, Whisper's 400), within 1e-12 of the largest output; and
 * fft_power_pair's two power spectra against each frame's DFT alone. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "frontend/fft.h"

#define TOL 1e-12

/* out[k] = Σ x[j]·e^(−2πi·jk/n), the angle reduced mod n first. */
static void dft(int n, const double *x, double *out) {
  for (int k = 0; k < n; k++) {
    double re = 0, im = 0;
    for (int j = 0; j < n; j++) {
      double a = 2.0 * M_PI * (double)((long)j * k % n) / n;
      re += x[2 * j] * cos(a) + x[2 * j + 1] * sin(a);
      im += x[2 * j + 1] * cos(a) - x[2 * j] * sin(a);
    }
    out[2 * k] = re, out[2 * k + 1] = im;
  }
}

static double worst(const double *a, const double *b, size_t n, double *scale) {
  double e = 0, s = 0;
  for (size_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i])), s = fmax(s, fabs(b[i]));
  *scale = s;
  return e;
}

static void transform(int n) {
  fft_plan p;
  CHECK_OK(fft_plan_init(&p, n));
  double *x = malloc(2 * (size_t)n * sizeof *x), *want = malloc(2 * (size_t)n * sizeof *want);
  double *out = malloc(2 * (size_t)n * sizeof *out), *work = malloc(2 * (size_t)n * sizeof *work);
  float *r = malloc(2 * (size_t)n * sizeof *r);
  check_random(r, 2 * (size_t)n, (uint32_t)n);
  for (int i = 0; i < 2 * n; i++) x[i] = r[i];
  dft(n, x, want);
  fft_plan_run(&p, x, out, work);
  double scale, e = worst(out, want, 2 * (size_t)n, &scale);
  CHECK(e <= TOL * scale, "FFT of %d: max |Δ| %.3g (scale %.3g)", n, e, scale);
  bool kept = true;
  for (int i = 0; i < 2 * n; i++) kept = kept && x[i] == r[i];
  CHECK(kept, "FFT of %d changed its input", n);
  free(x), free(want), free(out), free(work), free(r);
  fft_plan_free(&p);
}

/* Two real windowed frames through one transform against each alone; b NULL too. */
static void power_pair(int n) {
  fft_plan p;
  CHECK_OK(fft_plan_init(&p, n));
  float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
  double *win = malloc((size_t)n * sizeof *win), *work = malloc(6 * (size_t)n * sizeof *work);
  double *x = malloc(2 * (size_t)n * sizeof *x), *X = malloc(2 * (size_t)n * sizeof *X);
  size_t bins = (size_t)n / 2 + 1;
  double *pa = malloc(bins * sizeof *pa), *pb = malloc(bins * sizeof *pb);
  double *want = malloc(bins * sizeof *want);
  check_random(a, (size_t)n, 7), check_random(b, (size_t)n, 8);
  for (int j = 0; j < n; j++) win[j] = 0.5 - 0.5 * cos(2 * M_PI * j / n);
  for (int pass = 0; pass < 3; pass++) {
    const float *f = pass == 1 ? b : a; /* pass 2: b NULL, a's spectrum */
    fft_power_pair(&p, a, pass == 2 ? NULL : b, win, work, pa, pb);
    for (int j = 0; j < n; j++) x[2 * j] = f[j] * win[j], x[2 * j + 1] = 0;
    dft(n, x, X);
    for (int k = 0; k <= n / 2; k++) want[k] = X[2 * k] * X[2 * k] + X[2 * k + 1] * X[2 * k + 1];
    double scale, e = worst(pass == 1 ? pb : pa, want, (size_t)n / 2 + 1, &scale);
    CHECK(e <= TOL * scale, "power pair of %d, frame %c%s: max |Δ| %.3g (scale %.3g)", n,
          pass == 1 ? 'b' : 'a', pass == 2 ? " (b NULL)" : "", e, scale);
  }
  double zero = 0, top = 0; /* b NULL: b's power is rounding only */
  for (int k = 0; k <= n / 2; k++) zero = fmax(zero, pb[k]), top = fmax(top, pa[k]);
  CHECK(zero <= TOL * top, "power pair of %d: b NULL gives b's power %.3g", n, zero);
  free(a), free(b), free(win), free(work), free(x), free(X), free(pa), free(pb), free(want);
  fft_plan_free(&p);
}

int main(void) {
  static const int sizes[] = {1, 2, 3, 4, 8, 16, 32, 64, 6, 12, 30, 105, 122, 244, 400, 512, 1024, 305};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) transform(sizes[i]);
  power_pair(400), power_pair(512), power_pair(16);
  fft_plan p;
  CHECK(fft_plan_init(&p, 67) == STENO_ERR_INVALID, "a prime factor above 64 is refused");
  fft_plan_free(&p);
  printf("FFT: %zu sizes and 3 power pairs against the plain DFT within %.0e\n",
         sizeof sizes / sizeof *sizes, TOL);
  return check_done();
}
