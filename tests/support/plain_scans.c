#include "plain_scans.h"

#include <math.h>

int plain_argmax(const float *x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

double plain_logsumexp(const float *x, int from, int to) {
  float top = -INFINITY;
  for (int i = from; i < to; i++) top = fmaxf(top, x[i]);
  if (top == -INFINITY) return -INFINITY;
  double sum = 0;
  for (int i = from; i < to; i++) sum += exp((double)x[i] - top);
  return top + log(sum);
}
