/* Whisper's search rules, on the CPU, as transformers' generate applies them
 * (spec §2.7): token suppression, the timestamp rules
 * (WhisperTimeStampLogitsProcessor), the choice of a token, the fallback
 * metrics (compression ratio, average log-probability) and the split of a
 * window's tokens into segments with the seek advance (_retrieve_segment). */
#ifndef STENO_DECODE_WHISPER_H
#define STENO_DECODE_WHISPER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int vocab;                     /* logits per step */
  int eot;                       /* <|endoftext|>: ids below it are text */
  int no_timestamps;             /* <|notimestamps|>; the timestamps follow it */
  const int32_t *suppress;       /* masked at every step */
  size_t n_suppress;
  const int32_t *begin_suppress; /* masked at the first step */
  size_t n_begin_suppress;
  int max_initial;               /* the first timestamp's largest index (50: 1 s) */
  int timestamps;                /* the timestamp rules are on */
} wsearch;

static inline int wsearch_ts_begin(const wsearch *s) { return s->no_timestamps + 1; }

/* In place, the raw logits of the token after gen[0..n) (this window's tokens
 * so far, the prefix not included) become the processed ones. */
void wsearch_process(const wsearch *s, const int *gen, size_t n, float *logits);

/* The token: the argmax (temperature 0; the lowest id on a tie) or a draw from
 * softmax(logits / T) with the splitmix64 state *rng. *logprob gets its
 * log-softmax in the processed logits (transformers' avg_logprob term). */
int wsearch_pick(const float *logits, int vocab, float temperature, uint64_t *rng, double *logprob);

/* wsearch_pick in two halves: the token, then its log-softmax (a pass of exp
 * over the whole vocabulary, which a caller may run while the GPU computes
 * the next token's logits). */
int wsearch_choose(const float *logits, int vocab, float temperature, uint64_t *rng);
double wsearch_logprob(const float *logits, int vocab, int id);

/* transformers' _retrieve_compression_ratio: the ids as little-endian
 * integers of ⌊log2(vocab)/8⌋ + 1 bytes, raw length over zlib's (level 6). */
double wsearch_compression_ratio(const int *ids, size_t n, int vocab);

/* softmax(logits)[id] (the no-speech probability at <|startoftranscript|>). */
double wsearch_prob(const float *logits, int vocab, int id);

/* One segment: tokens [first, end) of the window, and its times in ms from
 * the window's start. */
typedef struct {
  size_t first, end;
  int64_t t0_ms, t1_ms;
} wseg;

/* Splits a window's tokens (end of text removed) into segments; *advance is
 * the mel frames to move forward. `frames` is the window's real mel frames. */
int wsearch_segments(const wsearch *s, const int *toks, size_t n, uint32_t frames, wseg **out,
                     size_t *nseg, uint32_t *advance);

#endif
