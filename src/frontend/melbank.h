/* A mel filterbank kept sparse: each triangular filter covers a few FFT bins,
 * so applying it costs about two multiplies per bin instead of one per bin
 * and mel. */
#ifndef STENO_FRONTEND_MELBANK_H
#define STENO_FRONTEND_MELBANK_H

typedef struct {
  int n_mels;
  int *first;     /* [n_mels]: each filter's first nonzero bin */
  int *start;     /* [n_mels + 1]: filter b's weights are weights[start[b] … start[b + 1]) */
  float *weights; /* the nonzero span of each filter, in bin order */
} melbank;

/* From a dense filterbank [n_mels][bins] (zeros inside a filter's span are kept). */
int melbank_init(melbank *b, const float *dense, int n_mels, int bins);
void melbank_free(melbank *b);

/* out[m] = Σ_k weight(m, k)·power[k], summed in double in bin order. */
void melbank_apply(const melbank *b, const double *power, double *out);

#endif
