#include "frontend/fft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

/* Radix 4 first (the cheapest butterfly per point), then 2, then odd primes. */
static int factorize(fft_plan *p, int n) {
  p->nf = 0;
  for (int f = 4; n > 1 && p->nf < 32; f = f == 4 ? 2 : f == 2 ? 3 : f + 2) {
    if (f > 64) return err_set(STENO_ERR_INVALID, "FFT size %d has a prime factor above 64", p->n);
    while (n % f == 0 && p->nf < 32) p->factors[p->nf++] = f, n /= f;
  }
  return n == 1 ? 0 : err_set(STENO_ERR_INVALID, "FFT size %d has too many factors", p->n);
}

int fft_plan_init(fft_plan *p, int n) {
  p->n = n;
  p->nf = 0;
  p->twiddle = NULL;
  if (n < 1 || n > (1 << 24)) return err_set(STENO_ERR_INVALID, "FFT of size %d", n);
  TRY(factorize(p, n));
  /* Per stage: its twiddles, then the p roots (cos, sin of 2πk/p) an odd radix uses. */
  size_t pairs = 0;
  for (int s = 0, len = n; s < p->nf; len /= p->factors[s++])
    pairs += (size_t)(len / p->factors[s]) * (p->factors[s] - 1) + p->factors[s];
  if (!(p->twiddle = mem_alloc(2 * pairs, sizeof *p->twiddle))) return STENO_ERR_NOMEM;
  double *w = p->twiddle;
  for (int s = 0, len = n; s < p->nf; len /= p->factors[s++]) {
    int r = p->factors[s], m = len / r;
    for (int j = 0; j < m; j++)
      for (int t = 1; t < r; t++, w += 2) {
        double a = 2.0 * M_PI * (double)((long)j * t % len) / len;
        w[0] = cos(a), w[1] = -sin(a);
      }
    for (int k = 0; k < r; k++, w += 2) w[0] = cos(2.0 * M_PI * k / r), w[1] = sin(2.0 * M_PI * k / r);
  }
  return 0;
}

void fft_plan_free(fft_plan *p) {
  free(p->twiddle);
  p->twiddle = NULL;
}

/* One complex value (re, im) in a vector of two doubles: a butterfly's adds
 * are one instruction each. The products keep the scalar arithmetic (x·w0 −
 * y·w1 as x·w0 + y·(−w1), both exact rewrites), so the results are the same
 * bits as complex arithmetic written out in doubles. */
typedef double cplx __attribute__((vector_size(16)));

static inline cplx cload(const double *p) {
  cplx v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void cstore(double *p, cplx v) { memcpy(p, &v, sizeof v); }

/* v·w, w = (w0, w1): (v0·w0 − v1·w1, v1·w0 + v0·w1). */
static inline cplx cmul(cplx v, const double *w) {
  cplx swapped = {v[1], v[0]};
  return v * (cplx){w[0], w[0]} + swapped * (cplx){-w[1], w[1]};
}

/* One Stockham (self-sorting, decimation in frequency) stage: s interleaved
 * sequences of length p·m in x, element j + r·m of sequence q at x[q + s·(j + r·m)];
 * y[q + s·(p·j + t)] = (Σ_r x_r·e^(−2πi·r·t/p))·e^(−2πi·j·t/(p·m)). */
static void radix4(int m, int s, const double *tw, const double *x, double *y) {
  size_t in = 2 * (size_t)s * m, out = 2 * (size_t)s;
  for (int j = 0; j < m; j++, tw += 6) {
    for (int q = 0; q < s; q++) {
      const double *a = x + 2 * (q + (size_t)s * j);
      cplx a0 = cload(a), a1 = cload(a + in), a2 = cload(a + 2 * in), a3 = cload(a + 3 * in);
      cplx sum = a0 + a2, dif = a0 - a2, t = a1 + a3, u = a1 - a3;
      cplx rot = {u[1], -u[0]}; /* −i·(a1 − a3) */
      double *o = y + 2 * (q + (size_t)s * 4 * j);
      cstore(o, sum + t);
      cstore(o + out, cmul(dif + rot, tw));
      cstore(o + 2 * out, cmul(sum - t, tw + 2));
      cstore(o + 3 * out, cmul(dif - rot, tw + 4));
    }
  }
}

static void radix2(int m, int s, const double *tw, const double *x, double *y) {
  size_t in = 2 * (size_t)s * m, out = 2 * (size_t)s;
  for (int j = 0; j < m; j++, tw += 2)
    for (int q = 0; q < s; q++) {
      const double *a = x + 2 * (q + (size_t)s * j);
      cplx u = cload(a), v = cload(a + in);
      double *o = y + 2 * (q + (size_t)s * 2 * j);
      cstore(o, u + v);
      cstore(o + out, cmul(u - v, tw));
    }
}

/* An odd radix p through its symmetry: with u_r = a_r + a_{p−r} and
 * v_r = a_r − a_{p−r}, y_t and y_{p−t} share Σ u_r·cos(2πrt/p) and ±i·Σ v_r·sin(2πrt/p). */
static void radix_odd(int p, int m, int s, const double *tw, const double *x, double *y) {
  double u[66], v[66], yr[64], yi[64];
  const double *root = tw + 2 * (size_t)m * (p - 1);
  int h = p / 2;
  for (int j = 0; j < m; j++, tw += 2 * (p - 1))
    for (int q = 0; q < s; q++) {
      const double *a = x + 2 * (q + s * j);
      size_t step = 2 * (size_t)s * m;
      for (int r = 1; r <= h; r++) {
        const double *ar = a + r * step, *br = a + (p - r) * step;
        u[2 * r] = ar[0] + br[0], u[2 * r + 1] = ar[1] + br[1];
        v[2 * r] = ar[0] - br[0], v[2 * r + 1] = ar[1] - br[1];
      }
      yr[0] = a[0], yi[0] = a[1];
      for (int r = 1; r <= h; r++) yr[0] += u[2 * r], yi[0] += u[2 * r + 1];
      for (int t = 1; t <= h; t++) {
        double cr = a[0], ci = a[1], sr = 0, si = 0;
        for (int r = 1; r <= h; r++) {
          int k = r * t % p;
          double c = root[2 * k], sn = root[2 * k + 1];
          cr += u[2 * r] * c, ci += u[2 * r + 1] * c;
          sr += v[2 * r] * sn, si += v[2 * r + 1] * sn;
        }
        yr[t] = cr + si, yi[t] = ci - sr;         /* + (−i)·Σ v sin */
        yr[p - t] = cr - si, yi[p - t] = ci + sr; /* + i·Σ v sin */
      }
      double *o = y + 2 * (q + s * p * j);
      o[0] = yr[0], o[1] = yi[0];
      for (int t = 1; t < p; t++) {
        const double *w = tw + 2 * (t - 1);
        o[2 * s * t] = yr[t] * w[0] - yi[t] * w[1];
        o[2 * s * t + 1] = yr[t] * w[1] + yi[t] * w[0];
      }
    }
}

void fft_plan_run(const fft_plan *p, const double *x, double *out, double *work) {
  if (p->n == 1) {
    out[0] = x[0], out[1] = x[1];
    return;
  }
  /* Stages ping-pong between out and work, starting where the last lands in out. */
  double *dst = p->nf % 2 ? out : work;
  const double *src = x, *tw = p->twiddle;
  for (int i = 0, s = 1; i < p->nf; i++) {
    int r = p->factors[i], m = p->n / (s * r);
    if (r == 4) radix4(m, s, tw, src, dst);
    else if (r == 2) radix2(m, s, tw, src, dst);
    else radix_odd(r, m, s, tw, src, dst);
    tw += 2 * ((size_t)m * (r - 1) + r);
    s *= r;
    src = dst;
    dst = dst == out ? work : out;
  }
}

void fft_power_pair(const fft_plan *p, const float *a, const float *b, const double *window,
                    double *work, double *power_a, double *power_b) {
  int n = p->n;
  double *z = work, *Z = work + 2 * n;
  for (int j = 0; j < n; j++)
    cstore(z + 2 * j, (cplx){a[j], b ? b[j] : 0.0} * (cplx){window[j], b ? window[j] : 1.0});
  fft_plan_run(p, z, Z, work + 4 * n);
  /* A_k = (Z_k + conj Z_{n−k}) / 2 and B_k = (Z_k − conj Z_{n−k}) / 2i:
   * with s = Z_k + Z_{n−k} and d = Z_k − Z_{n−k}, |A_k|² = (s.re² + d.im²) / 4
   * and |B_k|² = (s.im² + d.re²) / 4. */
  for (int k = 0; k <= n / 2; k++) {
    cplx f = cload(Z + 2 * k), g = cload(Z + 2 * ((n - k) % n)), s = f + g, d = f - g;
    cplx d2 = {d[1], d[0]}, pw = (cplx){0.25, 0.25} * (s * s + d2 * d2);
    power_a[k] = pw[0], power_b[k] = pw[1];
  }
}
