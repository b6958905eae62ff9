/* Decoded tokens: an id with the encoder frames it spans. */
#ifndef STENO_DECODE_TOKENS_H
#define STENO_DECODE_TOKENS_H

#include <stddef.h>

typedef struct {
  int id;
  int frame;  /* first encoder frame */
  int frames; /* frames it spans (a TDT duration; 1 for CTC and RNN-T; may be 0) */
  float p;    /* confidence in [0, 1] */
} dec_token;

typedef struct {
  dec_token *v;
  size_t n, cap;
} dec_tokens;

/* Appends one token; STENO_ERR_NOMEM if it cannot grow. */
int dec_push(dec_tokens *t, dec_token tok);
void dec_free(dec_tokens *t);

/* Index of the largest of n values, the lowest index on ties. */
int dec_argmax(const float *x, int n);

#endif
