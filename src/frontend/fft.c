#include "frontend/fft.h"

#include <math.h>

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
