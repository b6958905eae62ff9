/* Transducer greedy decoding on the CPU (RNN-T and TDT): the LSTM predictor
 * and the joint network in f32, over encoder frames already projected by the
 * joint's encoder layer on the GPU. */
#ifndef STENO_DECODE_TRANSDUCER_H
#define STENO_DECODE_TRANSDUCER_H

#include "decode/tokens.h"

#define TRANSDUCER_MAX_LAYERS 4

typedef enum { JOINT_RELU, JOINT_SIGMOID, JOINT_TANH } joint_act;

typedef struct {
  int vocab;  /* predictor classes including blank; blank = vocab − 1 */
  int hidden; /* LSTM and embedding width */
  int layers;
  int joint;  /* joint hidden width */
  joint_act act;
  const int *durations; /* TDT: durations in frames; NULL for RNN-T */
  int n_durations;
  int max_symbols;      /* RNN-T: symbols per frame before a forced advance (10);
                           both: at most max_symbols · t decoding steps */
  const float *embed;   /* [vocab][hidden] */
  const float *wx[TRANSDUCER_MAX_LAYERS]; /* [4·hidden][hidden], gates i, f, g, o */
  const float *wh[TRANSDUCER_MAX_LAYERS]; /* [4·hidden][hidden] */
  const float *b[TRANSDUCER_MAX_LAYERS];  /* [4·hidden]: bias_ih + bias_hh */
  const float *pred_w, *pred_b; /* [joint][hidden], [joint] */
  const float *out_w, *out_b;   /* [vocab + n_durations][joint], [vocab + n_durations] */
  int threads; /* CPU threads for the large matrix-vector products: 0 = one per
                  online CPU (at most 16), 1 = the caller only; same result either way */
} transducer;

/* The most decoding steps a search over t frames makes (as transformers'
 * generate: max_symbols · t in all, counted as transducer_greedy counts them);
 * ≤ 0: none. The GPU search (gpu/transducer.c) keeps the same bound. */
long transducer_max_steps(int max_symbols, long t);

/* Greedy decoding over `t` frames of enc [t][stride] (the joint's encoder
 * projection, bias included), as transformers' ParakeetForRNNT/TDT.generate:
 * the predictor starts from the blank token; TDT when durations are set (a
 * blank of duration 0 advances one frame), else RNN-T. */
int transducer_greedy(const transducer *m, const float *enc, int t, int stride, dec_tokens *out);

#endif
