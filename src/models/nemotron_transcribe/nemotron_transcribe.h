/* Nemotron 3.5 Transcribe's audio module (docs/nemotron-transcribe-gguf.md;
 * transformers' Nemotron3_5TranscribeAudioModel and the projector):
 *   pcm → log-mel with the checkpoint's window and filterbank (CPU)
 *   → per-feature normalized → the speech encoder in chunks with context (GPU)
 *   → raw log-mel → the Sortformer diarization model chunk by chunk, with its
 *     speaker cache and FIFO kept on the host (GPU + CPU)
 *   → 0/1 speaker activities per encoder frame → LayerNorm · sinusoid table added
 *     to the LayerNorm-ed speech states → linear projector (GPU)
 * giving one embedding per encoder frame for the language model's
 * <|audio|> placeholders. The audio module computes in f32, as the reference. */
#ifndef STENO_MODELS_NEMOTRON_TRANSCRIBE_H
#define STENO_MODELS_NEMOTRON_TRANSCRIBE_H

#include "frontend/mel.h"
#include "gpu/gpu.h"
#include "gpu/linear.h"
#include "gpu/norm.h"
#include "io/gguf.h"
#include "models/nemotron_transcribe/words.h"
#include "nn/rope_encoder.h"

typedef struct {
  uint32_t mels, sub;          /* mel bins; spectrogram frames per encoder frame */
  uint32_t d, d_lm;            /* speech encoder and language model widths */
  uint32_t dd, head_d, speakers; /* diarization width, its head's width, speakers */
  uint32_t chunk, left, right; /* offline chunk and its context, encoder frames */
  uint32_t fifo, update, cache; /* FIFO length, cache update period, speaker cache length */
  uint32_t sil;                /* silence slots per speaker in a compressed cache */
  uint32_t min_pos, n_strong, n_weak; /* the compression's frame counts (from the rates) */
  float pred_thr, latest_boost; /* score clamp, boost of the newest frames */
  float threshold;             /* speaker activity threshold */
  uint32_t audio_token;
  uint32_t vocab;              /* the decoder's vocabulary: prompt ids are below it */
} nt_config;

/* The longest encoder run (frames in one attention), checked at load: the
 * published model's are 600 (speech), 828 (diarization) and 1200 (word
 * timestamps). */
#define NT_MAX_RUN 4096

/* The word timestamp encoder and head (optional in a file): a transposed conv
 * upsampling each ASR frame to `up` frames, a rope_encoder without input
 * projection, out = upsampled + scale · final norm, a 1×1 conv to the
 * alignment classes (pieces then the blank). */
typedef struct {
  renc enc;            /* enc.blocks NULL: the file has none */
  gpu_linear up;       /* [up·d][d]: row j·d + o is output channel o of sub-frame j */
  gpu_linear head, head_nb; /* the classifier with its bias, and without */
  float scale;
  uint32_t factor, classes;
  nt_pieces pieces; /* the alignment vocabulary (n 0: the file has none: no word times) */
} nt_wts;

/* Where a user instruction goes (optional keys): head ids, then the ids of
 * lead + instruction + trail tokenized as one text (the processor tokenizes the
 * rendered template whole; only added tokens split it), middle ids, the audio
 * run, suffix ids. */
typedef struct {
  int32_t *head, *middle, *suffix; /* NULL: none (middle may be absent when the rest is there) */
  uint32_t n_head, n_middle, n_suffix;
  char *lead, *trail;
} nt_instruction_keys;

/* The model's audio module: read-only after load. */
typedef struct {
  nt_config c;
  gpu_device *dev;
  mel_frontend mel;
  renc asr, diar;
  gpu_linear sf_proj, sf_up, sf_dense, sf_out; /* diarization head */
  float *sil_emb;                              /* [dd] host */
  gpu_norm asr_norm, spk_norm;
  gpu_linear spk_table; /* the fixed sinusoids [speakers][d] as a layer d × speakers */
  gpu_linear proj;
  nt_wts wts;
  int32_t *prefix, *suffix; /* the default request's ids around its audio (NULL: absent) */
  uint32_t n_prefix, n_suffix;
  nt_instruction_keys instr;
} nt_model;

int nt_load(gpu_device *dev, const gguf_file *f, nt_model **out);
void nt_free(nt_model *m);

/* The transcription request for n_audio audio tokens (*ids malloc'd, *n of
 * them), as the processor's apply_transcription_request: with instr NULL the
 * default request (prefix ids, the audio run, suffix ids); else a user
 * instruction, instr being the ids of lead + instruction + trail (the text
 * tokenized by the caller, who has the tokenizer). STENO_ERR_UNSUPPORTED when
 * the file lacks the keys for it. */
int nt_prompt(const nt_model *m, const int *instr, uint32_t n_instr, uint32_t n_audio, int **ids,
              uint32_t *n);

/* One chunk of the offline run (_get_chunks): encoder frames [start, end)
 * seen with their context [ctx, ctx_end). */
typedef struct {
  uint32_t ctx, start, end, ctx_end;
} nt_chunk;

/* The chunk starting at `start` (a multiple of c->chunk) of t frames. */
nt_chunk nt_chunk_at(const nt_config *c, uint32_t start, uint32_t t);

/* What one run of the audio module gives (host arrays, malloc'd). */
typedef struct {
  uint32_t frames, valid;  /* spectrogram frames (padded to a multiple of sub), valid ones */
  uint32_t t, tokens;      /* encoder frames; audio tokens = ceil(valid / sub) */
  float *features;         /* [frames][mels] raw log-mel (zero past valid) */
  float *asr;              /* [t][d] speech encoder output (before asr_norm) */
  float *speaker_logits;   /* [frames][speakers] */
  float *speaker_probs;    /* [t][speakers] */
  float *activity;         /* [t][speakers] 0/1 */
  float *states;           /* [t][d] asr_norm + speaker embedding */
  float *embeds;           /* [t][d_lm] projected */
} nt_audio;

void nt_audio_free(nt_audio *a);

/* Log-mel of n samples: [frames][mels] with frames padded to a multiple of sub
 * (malloc'd), and the valid frames. */
int nt_features(const nt_model *m, const float *pcm, size_t n, float **mel, uint32_t *frames,
                uint32_t *valid);

/* The towers' recorder and working buffers (arena.h): one per session, for
 * one run at a time; grown to the longest clip seen and reused. */
typedef struct nt_arena nt_arena;
int nt_arena_new(const nt_model *m, nt_arena **out);
void nt_arena_free(nt_arena *a);

/* The whole audio module on n samples of 16 kHz mono pcm, in the arena. */
int nt_audio_run_in(nt_arena *a, const float *pcm, size_t n, nt_audio *out);

/* The same in an arena made and freed for this run. */
int nt_audio_run(const nt_model *m, const float *pcm, size_t n, nt_audio *out);

/* The word timestamp head's logits [t·factor][classes] (malloc'd) for the
 * ASR states asr [t][d] (nt_audio.asr) of a clip with `valid` spectrogram
 * frames, in the ASR chunks; STENO_ERR_UNSUPPORTED when the file has no head. */
int nt_word_timestamp_logits(const nt_model *m, const float *asr, uint32_t t, uint32_t valid,
                             float **logits);

/* The same rows log-softmaxed, only the classes cols[0..n) kept: [t·factor][n]
 * (what the word alignment reads, without the whole head's rows). */
int nt_word_timestamp_logprobs(const nt_model *m, const float *asr, uint32_t t, uint32_t valid,
                               const int *cols, uint32_t n, float **logp);

/* The same in a session's arena (its recorder and buffers, the clip's states
 * in the towers' buffer for them). */
int nt_word_timestamp_logprobs_in(nt_arena *a, const float *asr, uint32_t t, uint32_t valid,
                                  const int *cols, uint32_t n, float **logp);

/* A tower's keys under "nemotron3_5_transcribe." PREFIX: its encoder dims and
 * RoPE; mels and sub (NULL: the tower has no stacked-frame input) get its
 * num_mel_bins and subsampling_factor. */
int nt_tower_keys(const gguf_file *f, const char *prefix, bool qk_norm, renc_dims *d,
                  uint32_t *mels, uint32_t *sub);

/* Loads the head where the file has it (nemotron_transcribe/timestamps.c). */
int nt_wts_load(nt_model *m, const gguf_file *f);
void nt_wts_free(nt_wts *w);

/* ---- the diarization speaker cache (host; nemotron_transcribe/spkcache.c) ---- */

typedef struct {
  const nt_config *c;
  uint32_t dd;         /* embedding width */
  float *embeds;       /* [cache][dd] */
  float *probs;        /* [cache][speakers] */
  float *fifo;         /* [fifo][dd] */
  uint32_t n_cache, n_fifo;
  bool compressed;
  void *work;          /* a step's scratch (grown: warm steps allocate nothing) */
  size_t work_cap;     /* its bytes */
} nt_spkcache;

int nt_spkcache_init(nt_spkcache *s, const nt_config *c, uint32_t dd);
void nt_spkcache_free(nt_spkcache *s);

/* After one step over n input frames (cache | FIFO | look-back | chunk |
 * look-ahead) with speaker probabilities probs [n][speakers] (pooled per
 * encoder frame, zero on padding), pushes the chunk's frames of `input`
 * [n][dd] to the FIFO, moving and compressing into the cache as Sortformer's
 * offline mode does. */
/* The frames a compression keeps of n (probabilities [n][speakers]):
 * c->cache indices into them, n meaning the silence embedding; grouped by
 * speaker, in time order within one (transformers' _compress). */
int nt_spkcache_pick(const nt_config *c, const float *probs, uint32_t n, uint32_t *pick);

int nt_spkcache_update(nt_spkcache *s, const float *input, const float *probs, uint32_t n,
                       uint32_t lookback, uint32_t n_chunk, const float *sil_emb);

#endif
