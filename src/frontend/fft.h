/* A radix-2 FFT in double precision for the frontends' short frames. */
#ifndef STENO_FRONTEND_FFT_H
#define STENO_FRONTEND_FFT_H

/* In place over n complex values (re, im interleaved); n a power of two.
 * `twiddle` holds n/2 (cos, sin) pairs from fft_twiddles. */
void fft_complex(double *x, int n, const double *twiddle);

/* The n/2 twiddle pairs cos(2πk/n), −sin(2πk/n) for a size-n transform. */
void fft_twiddles(double *twiddle, int n);

#endif
