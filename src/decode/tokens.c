#include "decode/tokens.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/mem.h"

int dec_push(dec_tokens *t, dec_token tok) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    dec_token *v = mem_realloc(t->v, cap, sizeof *v);
    if (!v) return STENO_ERR_NOMEM;
    t->v = v;
    t->cap = cap;
  }
  t->v[t->n++] = tok;
  return 0;
}

void dec_free(dec_tokens *t) {
  free(t->v);
  t->v = NULL;
  t->n = t->cap = 0;
}

int dec_argmax(const float *x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}
