/* A radix-2 FFT in double precision for the frontends' short frames. */
#ifndef STENO_FRONTEND_FFT_H
#define STENO_FRONTEND_FFT_H

/* In place over n complex values (re, im interleaved); n a power of two.
 * `twiddle` holds n/2 (cos, sin) pairs from fft_twiddles. */
void fft_complex(double *x, int n, const double *twiddle);

/* The n/2 twiddle pairs cos(2πk/n), −sin(2πk/n) for a size-n transform. */
void fft_twiddles(double *twiddle, int n);

/* A mixed-radix FFT (decimation in time) for sizes that are not powers of two
 * but have small prime factors, such as Whisper's n_fft = 400 = 2⁴·5². */
typedef struct {
  int n;
  int nf, factors[32]; /* prime factors, largest first */
  double *twiddle;     /* n pairs cos(2πk/n), −sin(2πk/n) */
} fft_plan;

/* STENO_ERR_INVALID when n < 1 or has a prime factor above 64. */
int fft_plan_init(fft_plan *p, int n);
void fft_plan_free(fft_plan *p);

/* out[k] = Σ_j x[j]·e^(−2πijk/n) over n complex values (re, im interleaved);
 * x and out are different arrays. */
void fft_plan_run(const fft_plan *p, const double *x, double *out);

#endif
