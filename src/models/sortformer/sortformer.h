/* Sortformer (NeMo's streaming Sortformer diarizer, transcribe.cpp's architecture
 * "sortformer"): who speaks when, for up to 4 speakers in order of arrival.
 *   pcm → log-mel (CPU) → per chunk of mel: dw-striding 8× subsampling (GPU)
 *   → [speaker cache | FIFO | chunk] → FastConformer → encoder_proj → post-LN
 *   transformer (GPU) → ReLU, fc1, ReLU, speaker head, sigmoid (CPU)
 *   → the streaming update of cache and FIFO (CPU, stream.c) → p [frames][speakers]
 *   → speaker turns: runs of p > 0.5, 80 ms frames. */
#ifndef STENO_MODELS_SORTFORMER_H
#define STENO_MODELS_SORTFORMER_H

#include "frontend/mel.h"
#include "models/sortformer/stream.h"
#include "nn/conformer.h"
#include "nn/postln_block.h"
#include "nn/subsampling.h"
#include "steno.h"

typedef struct {
  uint32_t layers, channels, mels, speakers, frame_hop;
  conformer_dims dims; /* the FastConformer's (biases, BatchNorm, xscaling: always) */
  uint32_t tf_layers, tf_d;
  postln_dims tf;
  sf_stream_config stream;
} sortformer_config;

/* The model: read-only after sortformer_load, shared by its sessions. */
typedef struct {
  sortformer_config c;
  gpu_device *dev;
  mel_frontend mel;
  dw_subsampling sub;
  conformer_block *blocks;
  gpu_linear proj;      /* encoder_proj: d → tf_d */
  postln_block *tf;
  float *fc1_w, *fc1_b; /* [tf_d][tf_d], [tf_d] (host) */
  float *head_w, *head_b; /* single_spk_head: [speakers][tf_d], [speakers] (host) */
} sortformer;

/* GPU buffers of one session, sized for the longest window and concatenation. */
typedef struct {
  uint32_t mel_frames, frames; /* window mel frames and concatenated frames they hold */
  gpu_buffer *mel, *emb;
  dw_subsampling_scratch sub;
  conformer_scratch enc;
  postln_scratch tf;
} sortformer_arena;

typedef struct {
  const sortformer *m;
  gpu_rec *rec;
  sortformer_arena arena;
} sortformer_session;

int sortformer_load(gpu_device *dev, const gguf_file *f, sortformer **out);
void sortformer_free(sortformer *m);
int sortformer_session_new(const sortformer *m, sortformer_session **out);
void sortformer_session_free(sortformer_session *s);

/* Log-mel features [ceil(n/hop)][mels] (malloc'd); frames ≥ floor(n/hop) are 0. */
int sortformer_features(const sortformer *m, const float *pcm, size_t n, float **mel,
                        size_t *frames);

/* Pre-encode embeddings [t][d] (malloc'd) of a window of tm mel frames. */
int sortformer_embed(sortformer_session *s, const float *mel, uint32_t tm, float **emb,
                     uint32_t *t);

/* The network over t concatenated embeddings [t][d]: preds [t][speakers]
 * (malloc'd) and, when enc is not NULL, the FastConformer's output [t][d]. */
int sortformer_infer(sortformer_session *s, const float *x, uint32_t t, float **enc, float **preds);

/* Observes each chunk of the streaming run (tests): the window's embeddings, the
 * concatenation's FastConformer output and preds, and the state before the update. */
typedef struct {
  void (*chunk)(void *user, uint32_t index, const sf_stream *before, const float *emb,
                uint32_t t_win, uint32_t lc, uint32_t rc, const float *enc, const float *preds,
                uint32_t t_cat);
  void *user;
  steno_abort_fn abort;
  void *abort_user;
} sortformer_watch;

/* The streaming run over a whole mel [frames][mels]: preds [⌈frames/8⌉][speakers]
 * (malloc'd) in *preds, their frame count in *t. */
int sortformer_stream_run(sortformer_session *s, const float *mel, uint32_t frames,
                          const sortformer_watch *w, float **preds, uint32_t *t);

/* Speaker turns from preds [t][speakers]: every run of p > 0.5 of each speaker,
 * speaker by speaker, times frame·ms_per_frame rounded; speakers from 1. */
int sortformer_turns(const float *preds, uint32_t t, uint32_t speakers, double ms_per_frame,
                     steno_turn **turns, size_t *n);

/* All of it: 16 kHz mono pcm → a result holding speaker turns (no text). */
int sortformer_diarize(sortformer_session *s, const float *pcm, size_t n, steno_abort_fn abort,
                       void *abort_user, steno_result **out);

#endif
