#include "frontend/fft.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/mem.h"

void fft_twiddles(double *tw, int n) {
  for (int k = 0; k < n / 2; k++) {
    tw[2 * k] = cos(2.0 * M_PI * k / n);
    tw[2 * k + 1] = -sin(2.0 * M_PI * k / n);
  }
}

void fft_complex(double *x, int n, const double *tw) {
  /* Bit-reversal permutation, then butterflies of growing span. */
  for (int i = 1, j = 0; i < n; i++) {
    int bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j |= bit;
    if (i < j) {
      double re = x[2 * i], im = x[2 * i + 1];
      x[2 * i] = x[2 * j], x[2 * i + 1] = x[2 * j + 1];
      x[2 * j] = re, x[2 * j + 1] = im;
    }
  }
  for (int len = 2; len <= n; len <<= 1) {
    int step = n / len;
    for (int s = 0; s < n; s += len)
      for (int k = 0; k < len / 2; k++) {
        double wr = tw[2 * k * step], wi = tw[2 * k * step + 1];
        double *a = x + 2 * (s + k), *b = x + 2 * (s + k + len / 2);
        double tr = b[0] * wr - b[1] * wi, ti = b[0] * wi + b[1] * wr;
        b[0] = a[0] - tr, b[1] = a[1] - ti;
        a[0] += tr, a[1] += ti;
      }
  }
}

int fft_plan_init(fft_plan *p, int n) {
  p->n = n;
  p->nf = 0;
  p->twiddle = NULL;
  if (n < 1 || n > (1 << 24)) return err_set(STENO_ERR_INVALID, "FFT of size %d", n);
  int rest = n;
  for (int f = 64; f >= 2; f--)
    while (rest % f == 0 && p->nf < 32) {
      bool prime = true;
      for (int d = 2; d * d <= f; d++) prime = prime && f % d;
      if (!prime) break;
      p->factors[p->nf++] = f;
      rest /= f;
    }
  if (rest != 1) return err_set(STENO_ERR_INVALID, "FFT size %d has a prime factor above 64", n);
  if (!(p->twiddle = mem_alloc(2 * (size_t)n, sizeof *p->twiddle))) return STENO_ERR_NOMEM;
  for (int k = 0; k < n; k++) {
    p->twiddle[2 * k] = cos(2.0 * M_PI * k / n);
    p->twiddle[2 * k + 1] = -sin(2.0 * M_PI * k / n);
  }
  return 0;
}

void fft_plan_free(fft_plan *p) {
  free(p->twiddle);
  p->twiddle = NULL;
}

/* The size-n DFT of x[0], x[stride], …: the p sub-transforms of size n/p over
 * every p-th value first, then radix-p butterflies with twiddles e^(−2πi·e/n),
 * read from the full table at e·(N/n). */
static void dft_rec(const fft_plan *pl, const double *x, int stride, double *out, int n, int level) {
  if (n == 1) {
    out[0] = x[0], out[1] = x[1];
    return;
  }
  int p = pl->factors[level], m = n / p, step = pl->n / n;
  for (int r = 0; r < p; r++) dft_rec(pl, x + 2 * r * stride, stride * p, out + 2 * r * m, m, level + 1);
  double y[2 * 64];
  for (int k = 0; k < m; k++) {
    for (int r = 0; r < p; r++) y[2 * r] = out[2 * (r * m + k)], y[2 * r + 1] = out[2 * (r * m + k) + 1];
    for (int q = 0; q < p; q++) {
      int e = k + q * m;
      double re = 0, im = 0;
      for (int r = 0; r < p; r++) {
        const double *w = pl->twiddle + 2 * (size_t)(((long)r * e % n) * step);
        re += y[2 * r] * w[0] - y[2 * r + 1] * w[1];
        im += y[2 * r] * w[1] + y[2 * r + 1] * w[0];
      }
      out[2 * e] = re, out[2 * e + 1] = im;
    }
  }
}

void fft_plan_run(const fft_plan *p, const double *x, double *out) { dft_rec(p, x, 1, out, p->n, 0); }
