/* Word times of a Nemotron 3.5 Transcribe transcript (the processor's
 * align_word_timestamps, a port of NeMo's MultiSpeakerSOTWordTimestampAligner):
 * the words of each <spk:N> tag, encoded with the word timestamp head's own
 * vocabulary, force-aligned (CTC) on the head's frames where the diarization
 * speaker matched to the tag is active, then snapped to that speaker's
 * diarization segments (docs/nemotron-transcribe-gguf.md §10). */
#ifndef STENO_MODELS_NEMOTRON_TRANSCRIBE_WORDS_H
#define STENO_MODELS_NEMOTRON_TRANSCRIBE_WORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/gguf.h"

typedef struct {
  const char *s;
  uint32_t i;
} nt_piece_ref;

/* The alignment vocabulary (keys wts.tokens, wts.merges, ...; none: n 0). */
typedef struct {
  char **piece;            /* [n] by id */
  nt_piece_ref *by_piece;  /* sorted by text: id */
  char **merge;            /* [n_merges] "a b" */
  nt_piece_ref *by_merge;  /* sorted by text: rank */
  uint32_t n, n_merges;
  size_t longest;          /* bytes of the longest piece */
  int unk;                 /* the unknown piece (−1: none: unknown characters are dropped) */
  bool byte_fallback, fuse_unk;
  char **dropped;          /* special tokens that become spaces in a transcript */
  uint32_t n_dropped;
  void *lexical;           /* pcre2 code: a letter, mark or number */
} nt_pieces;

/* Loads the vocabulary where the file has wts.tokens and wts.merges (blank:
 * the head's blank class; pieces are below it). */
int nt_pieces_load(const gguf_file *f, uint32_t blank, nt_pieces *p);
void nt_pieces_free(nt_pieces *p);

/* The id of piece s, or −1. */
int nt_piece_id(const nt_pieces *p, const char *s);

/* Whether the character c[0..len) is a letter, mark or number (Unicode
 * general category L*, M*, N*). */
bool nt_lexical(const nt_pieces *p, const char *c, size_t len);

/* The ids of one pre-token ("▁word"), as tokenizers' BPE model (*ids malloc'd). */
int nt_pieces_encode(const nt_pieces *p, const char *word, int **ids, size_t *n);

/* One timed word; times in seconds as the processor computes them. */
typedef struct {
  char *text;
  double start, end;
  float p;  /* the lowest of its pieces' exp(mean log probability over their frames) */
  int tag; /* the N of the <spk:N> before it; −1 before the first tag; 0 in a text without tags */
} nt_word;

/* The head's classes the alignment of `transcript` reads (*cols malloc'd, *n of
 * them): its pieces' ids ascending, then the blank (classes − 1). *n 0: the
 * transcript gets no words (no word, a script aligned by character, Thai). */
int nt_align_classes(const nt_pieces *p, const char *transcript, uint32_t classes, int **cols,
                     uint32_t *n);

/* out[r][j] = log_softmax(x[r])[cols[j]] for rows of v logits `stride` apart
 * (f32, as torch's log_softmax; only the columns kept). */
void nt_log_softmax_cols(const float *x, size_t rows, uint32_t v, size_t stride, const int *cols,
                         uint32_t n, float *out);

/* What the alignment reads: log probabilities logp [rows][ncols] of the
 * classes cols (nt_align_classes: the blank last) for the head's frames, the
 * first ceil(valid / sub)·factor of them used; the diarization logits
 * [t·sub][speakers] (NULL: one speaker, no snapping); the frontend's hop and
 * rate. */
typedef struct {
  const float *logp;
  const int *cols;
  uint32_t ncols, rows, factor;
  const float *speaker_logits;
  uint32_t speakers, sub, valid, hop, rate;
} nt_align_input;

/* The words of `transcript` (the generated text with its special tokens) in
 * time order (*words malloc'd, *n of them). A transcript the reference cannot
 * time gives no words, as do the words of a tag that do not fit its frames
 * (the reference's failed_speakers). */
int nt_align_words(const nt_pieces *p, const char *transcript, const nt_align_input *in,
                   nt_word **words, size_t *n);
void nt_words_free(nt_word *w, size_t n);

#endif
