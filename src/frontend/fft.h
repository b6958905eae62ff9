/* A mixed-radix FFT in double precision for the frontends' short frames:
 * Parakeet's n_fft = 512 and Whisper's 400 = 2⁴·5², any size whose prime
 * factors are at most 64. The plan holds every stage's twiddles, so a
 * transform computes no sine and allocates nothing. */
#ifndef STENO_FRONTEND_FFT_H
#define STENO_FRONTEND_FFT_H

typedef struct {
  int n;
  int nf, factors[32]; /* radices in the order applied: 4s, then 2, then odd primes */
  double *twiddle;     /* per stage of length len = p·m: [m][p − 1] pairs e^(−2πi·j·t/len),
                          then p pairs cos, sin(2πk/p) */
} fft_plan;

/* STENO_ERR_INVALID when n < 1 or has a prime factor above 64. */
int fft_plan_init(fft_plan *p, int n);
void fft_plan_free(fft_plan *p);

/* out[k] = Σ_j x[j]·e^(−2πijk/n) over n complex values (re, im interleaved);
 * x, out and work (2n doubles) are different arrays; x is left as it was. */
void fft_plan_run(const fft_plan *p, const double *x, double *out, double *work);

/* The power spectra |X_k|², k = 0 … n/2, of two real frames a·window and
 * b·window (b NULL: zeros) from one complex transform of a + ib.
 * work: 6n doubles. */
void fft_power_pair(const fft_plan *p, const float *a, const float *b, const double *window,
                    double *work, double *power_a, double *power_b);

#endif
