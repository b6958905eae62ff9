#include "frontend/melbank.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

int melbank_init(melbank *b, const float *dense, int n_mels, int bins) {
  memset(b, 0, sizeof *b);
  b->n_mels = n_mels;
  b->first = mem_alloc((size_t)n_mels, sizeof *b->first);
  b->start = mem_alloc((size_t)n_mels + 1, sizeof *b->start);
  if (!b->first || !b->start) {
    melbank_free(b);
    return STENO_ERR_NOMEM;
  }
  b->start[0] = 0;
  for (int m = 0; m < n_mels; m++) {
    const float *f = dense + (size_t)m * bins;
    int lo = 0, hi = bins;
    while (lo < hi && f[lo] == 0) lo++;
    while (hi > lo && f[hi - 1] == 0) hi--;
    b->first[m] = lo;
    b->start[m + 1] = b->start[m] + (hi - lo);
  }
  if (!(b->weights = mem_alloc((size_t)b->start[n_mels] + 1, sizeof *b->weights))) {
    melbank_free(b);
    return STENO_ERR_NOMEM;
  }
  for (int m = 0; m < n_mels; m++)
    memcpy(b->weights + b->start[m], dense + (size_t)m * bins + b->first[m],
           (size_t)(b->start[m + 1] - b->start[m]) * sizeof *b->weights);
  return 0;
}

void melbank_free(melbank *b) {
  free(b->first);
  free(b->start);
  free(b->weights);
  memset(b, 0, sizeof *b);
}

void melbank_apply(const melbank *b, const double *power, double *out) {
  for (int m = 0; m < b->n_mels; m++) {
    const float *w = b->weights + b->start[m];
    const double *p = power + b->first[m];
    int n = b->start[m + 1] - b->start[m];
    double acc = 0;
    for (int k = 0; k < n; k++) acc += w[k] * p[k];
    out[m] = acc;
  }
}
