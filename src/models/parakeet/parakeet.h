/* Parakeet (NeMo FastConformer with a TDT, RNN-T or CTC head) from the GGUF
 * files transcribe.cpp publishes (architecture "parakeet"):
 *   pcm → log-mel (GPU where it offers it, else CPU) → dw-striding 8× subsampling → FastConformer blocks
 *   → the CTC head or the joint's encoder projection (GPU) → greedy decoding
 *   (CPU) → SentencePiece text with token and word times. */
#ifndef STENO_MODELS_PARAKEET_H
#define STENO_MODELS_PARAKEET_H

#include "decode/transducer.h"
#include "frontend/mel.h"
#include "gpu/logmel.h"
#include "nn/transducer_gpu.h"
#include "nn/conformer.h"
#include "nn/subsampling.h"
#include "text/result.h"
#include "text/vocab.h"

typedef enum { HEAD_TDT, HEAD_RNNT, HEAD_CTC } parakeet_head;

/* Cache-aware streaming (spec 1.8; the chunked_limited models): the
 * attention context in encoder frames and the pre_encode's chunk geometry. */
typedef struct {
  bool on;                 /* att_context_style chunked_limited: causal convs, chunked mask */
  int32_t left, right;     /* att_context_left/right (the default pair) */
  int32_t pre_cache;       /* streaming.pre_encode_cache_size: mel frames kept for a chunk */
  int32_t drop;            /* streaming.drop_extra_pre_encoded: frames dropped after pre_encode */
  int32_t first;           /* streaming.sampling_frames_first (0: 8) */
} parakeet_streaming;

/* Nemotron 3.5's language prompt: enc' = W2·ReLU(W0·[enc ; onehot(id)] + b0) + b2
 * before the joint. W0's one-hot columns fold into a per-language bias. */
typedef struct {
  uint32_t n, hidden;      /* P prompts (0: no prompt), the MLP's width */
  gpu_linear in, out;      /* W0's encoder columns (bias b0), W2 with b2 */
  float *bias;             /* [P][pad64(hidden)]: b0 + W0's column d + p */
  char **locales;          /* the dictionary: n_locales names (copies: the file is */
  uint32_t *slots;         /* closed after the load) and their prompts */
  size_t n_locales;
  uint32_t auto_id;        /* the language-ID slot: an empty or "auto" hint */
} parakeet_prompt;

typedef struct {
  uint32_t layers, channels, mels;
  bool xscaling;
  bool causal_conv;        /* conv_context [k − 1, 0] */
  parakeet_streaming stream;
  conformer_dims dims;
  parakeet_head head;
  uint32_t classes; /* CTC: vocab + blank; transducer: predictor vocab (with blank) */
} parakeet_config;

/* GPU buffers sized for the longest input so far. */
typedef struct {
  uint32_t frames; /* mel frames they hold */
  gpu_buffer *mel, *head;
  gpu_buffer *prompt_hidden, *prompt_out; /* the prompt MLP's [t][hidden], [t][stride] */
  dw_subsampling_scratch sub;
  conformer_scratch enc;
} parakeet_arena;

/* The model: read-only after parakeet_load, shared by its sessions. */
typedef struct {
  parakeet_config c;
  gpu_device *dev;
  mel_frontend mel;
  gpu_logmel *gmel;      /* the same features on the GPU (models/logmel.h), or NULL: the CPU's */
  dw_subsampling sub;
  conformer_block *blocks;
  gpu_linear head;       /* CTC logits, or the joint's encoder projection */
  transducer dec;        /* predictor and joint (host, f32) */
  gpu_transducer *gdec;  /* the same on the GPU (NULL: CTC, or too wide for its kernels) */
  float *dec_weights[4 + 3 * TRANSDUCER_MAX_LAYERS];
  parakeet_prompt prompt;
  int durations[16];
  text_vocab vocab;
} parakeet;

typedef struct parakeet_stream parakeet_stream;
typedef struct parakeet_batch parakeet_batch;

/* What one transcription writes: one session per thread. */
typedef struct {
  const parakeet *m;
  gpu_rec *rec;
  parakeet_arena arena;
  gpu_transducer_search *search; /* NULL without m->gdec */
  /* The prompt MLP's first layer with this session's language bias (its own
   * bias buffer; the weights are the model's). */
  gpu_linear prompt_in;
  uint32_t prompt_id; /* the slot whose bias prompt_in holds; UINT32_MAX: none yet */
  const char *language; /* the hint for the next transcription (NULL: auto) */
  parakeet_stream *stream; /* cache-aware streaming state (stream.c), or NULL */
  parakeet_batch *batch;   /* a padded batch's buffers (batch.c), or NULL until one runs */
  gpu_input pcm; /* the samples logmel reads (gpu_logmel_input's layout; m->gmel only) */
} parakeet_session;

/* The prompt slot of a language hint: the dictionary's entry for it, the auto
 * slot for NULL or "" (spec 1.10), STENO_ERR_INVALID for an unknown one. */
int parakeet_prompt_id(const parakeet *m, const char *language, uint32_t *id);

/* Loads the bias of the session's language hint into its prompt layer (no
 * prompt: nothing). */
int parakeet_session_prompt(parakeet_session *s);

int parakeet_load(gpu_device *dev, const gguf_file *f, parakeet **out);
void parakeet_free(parakeet *m);

/* A session of m (parakeet/session.c); m must outlive it. */
int parakeet_session_new(const parakeet *m, parakeet_session **out);
void parakeet_session_free(parakeet_session *s);

/* Frees an arena's buffers and zeroes it. */
void parakeet_arena_free(parakeet_arena *a);

/* The stages, for tests and benchmarks. */

/* Log-mel features [frames][mels] (malloc'd) and the count of valid frames. */
int parakeet_features(const parakeet *m, const float *pcm, size_t n, float **mel, size_t *frames,
                      size_t *valid);

/* parakeet_features of clips pcm[idx[j]] (n[idx[j]] samples), j < k, side by
 * side on the CPU's threads (frames_run_clips): mel[j] (malloc'd; the caller
 * frees them, also on failure) and valid[j], bit for bit what each clip gets
 * alone. */
int parakeet_batch_features(const parakeet *m, const float *const *pcm, const size_t *n,
                            const uint32_t *idx, uint32_t k, float **mel, uint32_t *valid);

/* Encoder frames after subsampling `valid` mel frames. */
uint32_t parakeet_encoder_frames(const parakeet *m, uint32_t valid);

/* Records the prompt MLP (Nemotron 3.5; hidden and out hold its t rows) and
 * the head over t rows of x (`stride` floats apart) into head. */
void parakeet_record_head(parakeet_session *s, gpu_buffer *x, uint32_t stride, uint32_t t,
                          gpu_buffer *hidden, gpu_buffer *out, gpu_buffer *head);

/* The first d of every `stride` floats of t rows of b, as a new [t][d] array. */
int parakeet_download_rows(gpu_buffer *b, uint32_t stride, uint32_t t, uint32_t d, float **out);

/* Runs the encoder and the head on `valid` mel frames. enc (if not NULL) gets
 * the encoder output [t][d], head (if not NULL) the head's output [t][head
 * width] (both malloc'd; the head's stays on the GPU too, for
 * parakeet_decode_gpu); *t the encoder frames. */
int parakeet_forward(parakeet_session *s, const float *mel, uint32_t valid, float **enc, float **head,
                     uint32_t *t);

/* The same from n samples whose features the GPU makes (m->gmel; valid mel
 * frames n / hop, at least 2). */
int parakeet_forward_pcm(parakeet_session *s, const float *pcm, size_t n, float **enc, float **head,
                         uint32_t *t);

/* Writes clips pcm[0..clips) (n[i] samples each) into s->pcm in
 * gpu_logmel_input's layout, its room grown to at least `room` floats (the
 * arena's or the batch's frames' worth: memory follows their sizes, not each
 * call's samples); gpu_input_record(s->rec, &s->pcm) then records their copy
 * to the device and gives the buffer m->gmel reads. */
int parakeet_upload_pcm(parakeet_session *s, const float *const *pcm, const size_t *n, uint32_t clips,
                        size_t room);

/* Greedy decoding of the head's output. */
int parakeet_decode(const parakeet *m, const float *head, uint32_t t, dec_tokens *out);

/* Greedy transducer decoding on the GPU of the last parakeet_forward's head
 * (the same search; STENO_ERR_INVALID without a GPU decoder). */
int parakeet_decode_gpu(parakeet_session *s, uint32_t t, dec_tokens *out);

/* All of it: 16 kHz mono pcm → a result; stop (may be NULL) is polled after
 * the encoder and during the search (STENO_ERR_ABORTED). */
int parakeet_transcribe(parakeet_session *s, const float *pcm, size_t n, const transducer_abort *stop,
                        steno_result **out);

/* Whether the last parakeet_forward's head is decoded on the GPU (a
 * transducer on a GPU: gpu_transducer_search_used), and that decoding of t rows: from
 * head_gpu (the GPU search) or, when it is NULL, from the host's head. */
bool parakeet_decode_on_gpu(const parakeet_session *s);
int parakeet_decode_rows(parakeet_session *s, gpu_buffer *head_gpu, const float *head,
                         uint32_t t, const transducer_abort *stop, dec_tokens *out);

/* A padded batch (batch.c): several clips through the encoder and the head in
 * one GPU pass, as transformers' ParakeetEncoder runs a padded batch with its
 * attention mask (each clip's frames as when it runs alone), then each clip's
 * search. Models with causal or chunked encoders run their clips in turn. */

/* Whether m's encoder takes a padded batch. */
bool parakeet_batchable(const parakeet *m);

/* How many clips of up to `frames` mel frames one pass takes (≥ 1): the
 * activations within min(4 GiB, a quarter of the device's memory), and each
 * buffer within the device's storage buffer range. */
uint32_t parakeet_batch_fit(const parakeet *m, uint32_t frames);

/* The encoder (and head) over clips of valid[i] ≥ 2 mel frames (mel[i]:
 * [valid[i]][mels]) in one pass of at most parakeet_batch_fit clips; enc (if
 * not NULL) gets each clip's encoder output [t[i]][d] (malloc'd), t each
 * clip's encoder frames. The head stays on the GPU for the decoding. */
int parakeet_forward_batch(parakeet_session *s, const float *const *mel, const uint32_t *valid,
                           uint32_t clips, float **enc, uint32_t *t);

/* The same from the clips' samples (pcm[i], n[i] of them: n[i] / hop ≥ 2 mel
 * frames), their features made on the GPU (m->gmel). */
int parakeet_forward_batch_pcm(parakeet_session *s, const float *const *pcm, const size_t *n,
                               uint32_t clips, float **enc, uint32_t *t);

/* parakeet_transcribe of each clip (out[i]; the same results), the clips'
 * encoder passes batched as parakeet_batch_fit allows (similar lengths
 * together). On failure no result is left (out[] all NULL). */
int parakeet_transcribe_batch(parakeet_session *s, const float *const *pcm, const size_t *n,
                              size_t count, const transducer_abort *stop, steno_result **out);
void parakeet_batch_free(parakeet_batch *b);

/* Cache-aware streaming (stream.c; chunked_limited RNN-T models): begin
 * (STENO_ERR_UNSUPPORTED for a model that does not stream natively; stop may
 * be NULL), feed pcm in any cut (each complete chunk is encoded and decoded
 * at once), the tokens so far as a result, finish (the rest, the last chunk
 * padded with zero mel frames) and end (frees the stream; the session stays). */
int parakeet_stream_begin(parakeet_session *s, const transducer_abort *stop);
int parakeet_stream_feed(parakeet_session *s, const float *pcm, size_t n);
int parakeet_stream_result(parakeet_session *s, steno_result **out);
int parakeet_stream_finish(parakeet_session *s, steno_result **out);
void parakeet_stream_end(parakeet_session *s);
/* The tokens decoded so far, control pieces included (NULL: no stream). */
const dec_tokens *parakeet_stream_tokens(const parakeet_session *s);

#endif
