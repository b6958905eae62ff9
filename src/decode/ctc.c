#include "decode/ctc.h"

#include <math.h>

int ctc_greedy(const float *logits, int t, int classes, int stride, dec_tokens *out) {
  int blank = classes - 1, prev = -1;
  for (int f = 0; f < t; f++) {
    const float *row = logits + (size_t)f * stride;
    int best = dec_argmax(row, classes);
    if (best != prev && best != blank) {
      double sum = 0;
      for (int c = 0; c < classes; c++) sum += exp((double)row[c] - row[best]);
      dec_token tok = {.id = best, .frame = f, .frames = 1, .p = (float)(1.0 / sum)};
      int st = dec_push(out, tok);
      if (st) return st;
    }
    prev = best;
  }
  return 0;
}
