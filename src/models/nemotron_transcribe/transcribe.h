/* Nemotron 3.5 Transcribe end to end (architecture nemotron3_5_transcribe): the
 * audio module (towers: nt_audio_run) gives one embedding per audio token; the
 * request's prompt (nt_prompt: the default one or a user instruction) has them
 * in its <|audio|> rows; the Nemotron-H decoder (models/nemotron_h) reads it
 * and decodes greedily until an end token; the byte-level BPE pieces, special tokens left out, are the text. */
#ifndef STENO_MODELS_NEMOTRON_TRANSCRIBE_TRANSCRIBE_H
#define STENO_MODELS_NEMOTRON_TRANSCRIBE_TRANSCRIBE_H

#include "models/nemotron_h/nemotron_h.h"
#include "models/nemotron_transcribe/nemotron_transcribe.h"
#include "steno.h"
#include "text/bpe.h"

#define NTX_MAX_STOP 8
#define NTX_MAX_INSTRUCTION 16384 /* bytes of a user instruction (--prompt) */

typedef struct {
  nt_model *audio;
  nemotron_h *lm;
  bpe tok;
  bool *special;             /* [tokens]: control tokens, left out of the text */
  int stop[NTX_MAX_STOP];    /* end tokens: the LM's eos ids, the tokenizer's, <|im_end|> */
  int n_stop;
  int *added, n_added;       /* the added tokens' ids, matched before the BPE when encoding */
  const char *no_encode;     /* why a user instruction cannot be encoded (NULL: it can) */
} ntx_model;

typedef struct {
  const ntx_model *m;
  nemotron_h_session *lm;
  nt_arena *towers;            /* the audio module's recorder and buffers */
  double audio_ms, decoder_ms; /* the last ntx_generate's audio module and decoder */
} ntx_session;

int ntx_load(gpu_device *dev, const gguf_file *f, ntx_model **out);
void ntx_free(ntx_model *m);
int ntx_session_new(const ntx_model *m, ntx_session **out);
void ntx_session_free(ntx_session *s);

/* The request's ids for n_audio audio tokens (*ids malloc'd): the default
 * request (instruction NULL) or the user's instruction in its place, tokenized
 * as the processor does. */
int ntx_prompt_ids(const ntx_model *m, const char *instruction, uint32_t n_audio, int **ids,
                   uint32_t *n);

/* The prompt's rows for the audio module's output a: the request's ids
 * (*ids), −1 where an audio embedding goes, and those embeddings in *rows
 * ([n][d_lm], the rest unset); both malloc'd, as the decoder's feed takes them. */
int ntx_prompt_rows(const ntx_model *m, const nt_audio *a, const char *instruction, int **ids,
                    float **rows, uint32_t *n);

/* The generated ids for n samples (an end token included when one came), at
 * most max_new; *ids malloc'd. instruction: the user's request in place of
 * the default one (apply_transcription_request's prompt); NULL: the default. */
int ntx_generate(ntx_session *s, const float *pcm, size_t n, const char *instruction,
                 uint32_t max_new, int **ids, uint32_t *n_ids);

/* The timed words (nt_align_words) of the generated ids (as ntx_generate
 * gives them) over the audio module's output a, where the file has the word
 * timestamp head and its vocabulary (else none); *words malloc'd. The head
 * runs in `towers` (a session's), or in an arena of its own where NULL. */
int ntx_word_times(const ntx_model *m, nt_arena *towers, const nt_audio *a, const int *ids,
                   uint32_t n, nt_word **words, size_t *count);

/* All of it: 16 kHz mono pcm → a result (text; one segment over the piece;
 * the timed words where the file has the word timestamp head). */
int ntx_transcribe(ntx_session *s, const float *pcm, size_t n, const steno_transcribe_params *p,
                   steno_result **out);

#endif
