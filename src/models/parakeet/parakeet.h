/* Parakeet (NeMo FastConformer with a TDT, RNN-T or CTC head) from the GGUF
 * files transcribe.cpp publishes (architecture "parakeet"):
 *   pcm → log-mel (CPU) → dw-striding 8× subsampling → FastConformer blocks
 *   → the CTC head or the joint's encoder projection (GPU) → greedy decoding
 *   (CPU) → SentencePiece text with token and word times. */
#ifndef STENO_MODELS_PARAKEET_H
#define STENO_MODELS_PARAKEET_H

#include "decode/transducer.h"
#include "frontend/mel.h"
#include "nn/transducer_gpu.h"
#include "nn/conformer.h"
#include "nn/subsampling.h"
#include "text/result.h"
#include "text/vocab.h"

typedef enum { HEAD_TDT, HEAD_RNNT, HEAD_CTC } parakeet_head;

typedef struct {
  uint32_t layers, channels, mels;
  bool xscaling;
  conformer_dims dims;
  parakeet_head head;
  uint32_t classes; /* CTC: vocab + blank; transducer: predictor vocab (with blank) */
} parakeet_config;

/* GPU buffers sized for the longest input so far. */
typedef struct {
  uint32_t frames; /* mel frames they hold */
  gpu_buffer *mel, *head;
  dw_subsampling_scratch sub;
  conformer_scratch enc;
} parakeet_arena;

/* The model: read-only after parakeet_load, shared by its sessions. */
typedef struct {
  parakeet_config c;
  gpu_device *dev;
  mel_frontend mel;
  dw_subsampling sub;
  conformer_block *blocks;
  gpu_linear head;       /* CTC logits, or the joint's encoder projection */
  transducer dec;        /* predictor and joint (host, f32) */
  gpu_transducer *gdec;  /* the same on the GPU (NULL: CTC, or too wide for its kernels) */
  float *dec_weights[4 + 3 * TRANSDUCER_MAX_LAYERS];
  int durations[16];
  text_vocab vocab;
} parakeet;

/* What one transcription writes: one session per thread. */
typedef struct {
  const parakeet *m;
  gpu_rec *rec;
  parakeet_arena arena;
  gpu_transducer_search *search; /* NULL without m->gdec */
} parakeet_session;

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

/* Encoder frames after subsampling `valid` mel frames. */
uint32_t parakeet_encoder_frames(uint32_t valid);

/* Runs the encoder and the head on `valid` mel frames. enc (if not NULL) gets
 * the encoder output [t][d], head (if not NULL) the head's output [t][head
 * width] (both malloc'd; the head's stays on the GPU too, for
 * parakeet_decode_gpu); *t the encoder frames. */
int parakeet_forward(parakeet_session *s, const float *mel, uint32_t valid, float **enc, float **head,
                     uint32_t *t);

/* Greedy decoding of the head's output. */
int parakeet_decode(const parakeet *m, const float *head, uint32_t t, dec_tokens *out);

/* Greedy transducer decoding on the GPU of the last parakeet_forward's head
 * (the same search; STENO_ERR_INVALID without a GPU decoder). */
int parakeet_decode_gpu(parakeet_session *s, uint32_t t, dec_tokens *out);

/* All of it: 16 kHz mono pcm → a result; stop (may be NULL) is polled after
 * the encoder and during the search (STENO_ERR_ABORTED). */
int parakeet_transcribe(parakeet_session *s, const float *pcm, size_t n, const transducer_abort *stop,
                        steno_result **out);

#endif
