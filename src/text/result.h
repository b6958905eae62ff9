/* Transcripts: decoded tokens → text, token times, words and segments. */
#ifndef STENO_TEXT_RESULT_H
#define STENO_TEXT_RESULT_H

#include "decode/tokens.h"
#include "steno.h"
#include "text/vocab.h"

struct steno_result {
  char *text;
  steno_token *tokens;
  size_t ntokens;
  steno_word *words;
  size_t nwords;
  steno_segment *segments;
  size_t nsegments;
  steno_turn *turns; /* speaker turns (diarization), or NULL */
  size_t nturns;
  double duration; /* seconds */
  steno_timings timings;
  char language[16]; /* the spoken language's code ("de"); "" when the family has none */
};

/* A result from tokens whose frames are `ms_per_frame` long, the first frame
 * at `offset_ms`: hidden tokens dropped, words begun at "▁" pieces, segments
 * that are sentences (≤ 30 s; see result.c). */
int result_from_tokens(const text_vocab *v, const dec_tokens *toks, double ms_per_frame,
                       double offset_ms, double duration, steno_result **out);

/* An empty result (no speech) for `duration` seconds of audio. */
int result_empty(double duration, steno_result **out);

/* Moves `piece` (a result for audio that starts offset_ms into the whole) onto
 * the end of `into`: its strings made printable (utf8_printable: every family's
 * result passes here), its tokens, words and segments with times shifted by
 * offset_ms, its text after one space (empty texts add nothing), its timings
 * added, its language kept if `into` has none yet. into's duration becomes the
 * piece's end. Frees piece, also on failure (then `into` is unchanged). */
int result_append(steno_result *into, steno_result *piece, int64_t offset_ms);

#endif
