/* Whisper (OpenAI) from the GGUF files transcribe.cpp publishes (architecture
 * "whisper", spec gguf-whisper-moonshine.md §2):
 *   pcm → log-mel of the whole clip (GPU where it offers it, else CPU) → 30 s windows → conv stem, positions,
 *   pre-LN transformer blocks (GPU encoder, nn/transformer.h) → cross K/V once per window (f16) →
 *   token by token: embedding + positions, self-attention over an f16 KV cache,
 *   cross-attention, FFN, the tied head (GPU decoder, one logits readback per
 *   token) → the search rules (CPU, decode/whisper.h) → segments with times. */
#ifndef STENO_MODELS_WHISPER_H
#define STENO_MODELS_WHISPER_H

#include "decode/whisper.h"
#include "frontend/whisper_mel.h"
#include "gpu/decode.h"
#include "gpu/gpu.h"
#include "gpu/linear.h"
#include "gpu/norm.h"
#include "io/gguf.h"
#include "nn/transformer.h"
#include "steno.h"
#include "text/bpe.h"

#define WHISPER_MAX_LANGS 128

typedef struct {
  uint32_t d, enc_layers, enc_heads, enc_ff, dec_layers, dec_heads, dec_ff;
  uint32_t mels, n_audio_ctx, n_text_ctx, vocab;
  uint32_t win_frames;  /* mel frames per window: 2 · n_audio_ctx */
  int eot, sot, no_timestamps, transcribe, translate, prev_sot; /* −1: absent */
  bool multilingual;    /* language and task tokens in the prefix */
  bool can_translate;
  int n_langs;
  int lang_id[WHISPER_MAX_LANGS];
  char lang_code[WHISPER_MAX_LANGS][8];
} whisper_config;

/* Activations for one window and one token, allocated per session. */
typedef struct {
  gpu_buffer *mel, *col0, *h0, *col1, *x, *h, *wide, *o, *enc, *scores, *kv;
  gpu_buffer *dx, *dh, *dqkv, *datt, *dff, *logits, *att_scratch;
  gpu_buffer *gen, *lp; /* [n_text_ctx] ids (uint) and log-probabilities of the GPU's greedy steps */
  gpu_buffer *ts_part;  /* their scratch (gpu_ts_greedy_scratch) */
  /* The GPU's features of a piece (gmel): its samples (copied to the device in
   * the features' submission), each frame's largest value, and its frames
   * with a window of zero rows after them; grown as needed (capacities in
   * floats). */
  gpu_input pcm;
  gpu_buffer *mel_top, *mel_all;
  size_t top_room, mel_room;
  float *host_logits; /* [vocab] */
} whisper_arena;

/* The recorders of the token-by-token steps (whisper_step_*): the layers
 * alternate by position's parity, so the next token's are recorded while the
 * GPU runs this one's; the embedding goes in a submission of its own. */
typedef struct {
  gpu_rec *layers[2], *embed;
  int64_t prepared[2]; /* the position layers[i] holds, unsubmitted; −1: none */
  gpu_rec *live;       /* submitted by _start, not yet waited for */
  bool embed_live;     /* and the embedding's submission with it */
  bool ahead;          /* run.c prepares the next token while the GPU runs one */
  bool gpu_greedy;     /* run.c's greedy tier chooses on the GPU (whisper_greedy_*) */
  /* The greedy chunk in layers[i]: steps [n0[i], n0[i] + count[i]), recorded
   * and not yet submitted, or submitted and not yet waited for. */
  uint32_t n0[2], count[2];
  bool recorded[2], submitted[2];
} whisper_steps;

/* A model, or a session of one: a copy of the model's struct that shares its
 * weights, tokenizer and tables (read-only) and owns its recorder, activations
 * and KV caches. The stages below run on a session. */
typedef struct whisper {
  whisper_config c;
  gpu_device *dev;
  const struct whisper *model; /* a session's model; NULL in a model */
  gpu_rec *rec;                /* sessions only */
  wmel mel;
  struct gpu_wmel *gmel; /* the same features on the GPU (models/logmel.h), or NULL: the CPU's */
  gpu_linear conv0, conv1;
  tf_dims enc_dims, dec_dims;
  tf_enc_block *enc;
  gpu_norm enc_ln;
  gpu_linear embed; /* token table and tied head */
  gpu_buffer *dec_pos;
  gpu_buffer *enc_pos; /* encoder positions [n_audio_ctx][stride], copied into x per window */
  tf_dec_block *dec; /* a session's own copy: its caches */
  gpu_norm dec_ln;
  bpe tok;
  uint32_t att_heads; /* encoder heads per attention call: their scores fit one buffer */
  int32_t *suppress, *begin_suppress;
  size_t n_suppress, n_begin_suppress;
  gpu_buffer *blocked; /* the two lists as bits (gpu_ts_rules) */
  uint32_t blocked_words;
  whisper_arena a;
  whisper_steps steps; /* sessions only */
} whisper;

int whisper_load(gpu_device *dev, const gguf_file *f, whisper **out);
/* Frees a model (or, given a session, the session). */
void whisper_free(whisper *m);

/* A session of m, which must outlive it; one per thread. */
int whisper_session_new(const whisper *m, whisper **out);
void whisper_session_free(whisper *s);

/* ---- the stages, for tests and benchmarks ---- */

/* Log-mel of the whole clip [frames][mels] (malloc'd). */
int whisper_features(whisper *m, const float *pcm, size_t n, float **mel, size_t *frames);

/* Encodes one window of win_frames mel frames ([win_frames][mels]) and fills
 * every decoder layer's cross K/V cache. enc (if not NULL) gets the encoder
 * output [n_audio_ctx][d]. */
int whisper_encode(whisper *m, const float *mel, float *enc);

/* The GPU's features (m->gmel) of a clip of n samples into m->a.mel_all, as
 * whisper_features makes them (*frames of them), followed by a window of zero
 * rows. */
int whisper_features_gpu(whisper *m, const float *pcm, size_t n, size_t *frames);

/* whisper_encode of the window from frame seek of whisper_features_gpu's frames. */
int whisper_encode_at(whisper *m, size_t seek, float *enc);

/* Feeds n tokens at positions pos.. through the decoder (appending to its KV
 * cache); logits (if not NULL) gets the raw logits [vocab] after the last. */
int whisper_feed(whisper *m, const int *ids, uint32_t n, uint32_t pos, float *logits);

/* One generated token in steps, so that the host's work hides behind the
 * GPU: _prepare records the decoder's layers and head at pos (all but the
 * embedding: call it while the GPU runs the token before); _start records the
 * embedding of id and submits it and the prepared work (two submissions), or,
 * where pos was not prepared, all of it in one; _finish waits and copies the
 * logits. The same logits as whisper_feed(m, &id, 1, pos, logits). Between
 * _start and _finish only _prepare of the next position may use the session. */
int whisper_step_prepare(whisper *m, uint32_t pos);
int whisper_step_start(whisper *m, int id, uint32_t pos);
int whisper_step_finish(whisper *m, float *logits);

/* Greedy steps on the GPU, the host out of the loop (temperature 0): step n
 * feeds the token step n − 1 chose at position np + n − 1 (step 0 takes the
 * logits whisper_feed left after the prefix), then gpu_ts_greedy chooses
 * token n under `rules` (vocabulary, ids and flags: whisper_gpu_rules).
 * _record puts steps [n0, n0 + count) in chunk slot i (0 or 1; its earlier
 * chunk waited for), _submit sends it, _wait waits for it and copies its ids
 * and log-probabilities out (count each). A chunk reads the ids of the
 * chunks submitted before it on the GPU. */
int whisper_greedy_record(whisper *m, int i, const gpu_ts_rules *rules, uint32_t np, uint32_t n0,
                          uint32_t count);
int whisper_greedy_submit(whisper *m, int i);
int whisper_greedy_wait(whisper *m, int i, int *ids, float *lp);

/* One decoded window. */
typedef struct {
  uint32_t seek, frames;   /* first mel frame, real frames */
  int *tokens;             /* generated ids, the end of text included if produced */
  double *logprob;         /* per token */
  size_t n;
  float temperature;       /* of the accepted tier */
  double ratio, avg_logprob, no_speech;
  bool skipped;            /* no speech: its output dropped */
} whisper_window;

typedef struct {
  int64_t t0_ms, t1_ms;    /* from the start of the audio */
  size_t window, first, end; /* tokens [first, end) of that window */
} whisper_segment;

typedef struct {
  int language;            /* the language token used, or −1 */
  int *prefix;             /* the decoder prefix of every window */
  size_t n_prefix;
  whisper_window *win;
  size_t n_win;
  whisper_segment *seg;
  size_t n_seg;
  steno_timings timings;   /* features, encoder and decoder ms (windows summed) */
} whisper_output;

/* The whole search over the clip, as transformers' generate with OpenAI's
 * recipe (temperatures 0…1 by 0.2, thresholds 2.4 / −1 / 0.6). */
int whisper_run(whisper *m, const float *pcm, size_t n, const steno_transcribe_params *p,
                whisper_output *out);
void whisper_output_free(whisper_output *o);

/* The language token chosen on the first window's encoder output (after
 * whisper_encode): the argmax of the logits at <|startoftranscript|>. */
int whisper_detect_language(whisper *m, int *token);

/* The search rules of this model (timestamps on). */
wsearch whisper_rules(const whisper *m);
/* The same rules for gpu_ts_greedy (bench: the end of text masked, STENO_BENCH_TOKENS). */
gpu_ts_rules whisper_gpu_rules(const whisper *m, bool bench);

/* All of it: 16 kHz mono pcm → a result with segments. */
int whisper_transcribe(whisper *m, const float *pcm, size_t n, const steno_transcribe_params *p,
                       steno_result **out);

/* whisper.cpp's legacy .bin at `path` as a GGUF image in the published layout
 * (whisper/bin.c), for gguf_open_memory; *image is malloc'd and must outlive
 * the gguf_file. */
int whisper_bin_image(const char *path, uint8_t **image, size_t *size);
/* The same from n bytes in memory (`name` for messages). */
int whisper_bin_image_memory(const uint8_t *data, size_t n, const char *name, uint8_t **image,
                             size_t *size);

/* Builds the public result from a run (whisper/result.c). */
int whisper_result(const whisper *m, const whisper_output *o, double seconds, steno_result **out);

#endif
