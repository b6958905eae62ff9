/* Transducer greedy decoding on the CPU (RNN-T and TDT): the LSTM predictor
 * and the joint network in f32, over encoder frames already projected by the
 * joint's encoder layer on the GPU. */
#ifndef STENO_DECODE_TRANSDUCER_H
#define STENO_DECODE_TRANSDUCER_H

#include <stdint.h>

#include "decode/tokens.h"

#define TRANSDUCER_MAX_LAYERS 4
/* The most symbols per frame a model may ask for: NeMo's models use 10; the
 * bound keeps a crafted file's search (max_symbols · t steps) short. */
#define TRANSDUCER_MAX_SYMBOLS 100
/* A CPU search asks the caller whether to stop every this many steps. */
#define TRANSDUCER_POLL_STEPS 32

typedef enum { JOINT_RELU, JOINT_SIGMOID, JOINT_TANH } joint_act;

typedef struct {
  int vocab;  /* predictor classes including blank; blank = vocab − 1 */
  int hidden; /* LSTM and embedding width */
  int layers;
  int joint;  /* joint hidden width */
  joint_act act;
  const int *durations; /* TDT: durations in frames; NULL for RNN-T */
  int n_durations;
  int max_symbols;      /* symbols at one frame before a forced advance (10), 1 to
                           TRANSDUCER_MAX_SYMBOLS: at most max_symbols · t steps */
  const float *embed;   /* [vocab][hidden] */
  const float *wx[TRANSDUCER_MAX_LAYERS]; /* [4·hidden][hidden], gates i, f, g, o */
  const float *wh[TRANSDUCER_MAX_LAYERS]; /* [4·hidden][hidden] */
  const float *b[TRANSDUCER_MAX_LAYERS];  /* [4·hidden]: bias_ih + bias_hh */
  const float *pred_w, *pred_b; /* [joint][hidden], [joint] */
  const float *out_w, *out_b;   /* [vocab + n_durations][joint], [vocab + n_durations] */
  int threads; /* CPU threads for the large matrix-vector products: 0 = one per
                  online CPU (at most 16), 1 = the caller only; same result either way */
} transducer;

/* A caller's wish to stop (steno_transcribe_params.abort), polled during a
 * search: fn returning non-zero ends it with STENO_ERR_ABORTED. */
typedef struct {
  int (*fn)(void *user); /* NULL: never stop */
  void *user;
} transducer_abort;

/* Whether the caller asks to stop (stop may be NULL); sets the error. */
int transducer_check_abort(const transducer_abort *stop);

/* The most decoding steps a search over t frames can make: each frame takes
 * at most max_symbols steps (see transducer_greedy), so max_symbols · t; 0
 * for a max_symbols outside 1 .. TRANSDUCER_MAX_SYMBOLS (a search refuses it).
 * The GPU search (nn/transducer_gpu.c) keeps the same bound. */
int64_t transducer_max_steps(int max_symbols, int64_t t);

/* Greedy decoding over `t` frames of enc [t][stride] (the joint's encoder
 * projection, bias included), as NeMo's greedy_batch (label looping) and
 * transcribe.cpp decode: the predictor starts from the blank token; TDT when
 * durations are set, else RNN-T. A blank moves on by its duration (TDT: at
 * least 1; RNN-T: 1); a token stays on its frame when its duration is 0 (RNN-T:
 * always), until max_symbols of them there force a move of one frame. Polls
 * stop every TRANSDUCER_POLL_STEPS steps. */
int transducer_greedy(const transducer *m, const float *enc, int t, int stride,
                      const transducer_abort *stop, dec_tokens *out);

/* The same search over frames that arrive in turn (cache-aware streaming):
 * each feed decodes its t frames of enc as the frames after those fed before
 * (token frames count from the first feed), the predictor's state and the
 * frame position carried over; feeding a clip in any cut gives the tokens of
 * transducer_greedy over all of it. m must outlive the stream. */
typedef struct transducer_stream transducer_stream;
int transducer_stream_new(const transducer *m, transducer_stream **out);
int transducer_stream_feed(transducer_stream *ts, const float *enc, int t, int stride,
                           const transducer_abort *stop, dec_tokens *out);
void transducer_stream_free(transducer_stream *ts);

#endif
