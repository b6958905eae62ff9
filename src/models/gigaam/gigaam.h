/* GigaAM v3 (Sber's Conformer with a CTC or RNN-T head; the ctc, rnnt, e2e-ctc
 * and e2e-rnnt variants) from the GGUF files transcribe.cpp publishes
 * (architecture "gigaam", spec §2):
 *   pcm → log-mel with the file's filterbank and window (CPU) → conv1d 4×
 *   subsampling → rotary Conformer blocks → the CTC head or the joint's encoder
 *   projection (GPU) → greedy decoding (CPU, or the GPU transducer search) →
 *   char or SentencePiece text; one encoder frame is 40 ms. */
#ifndef STENO_MODELS_GIGAAM_H
#define STENO_MODELS_GIGAAM_H

#include "decode/transducer.h"
#include "frontend/gigaam_mel.h"
#include "nn/conformer.h"
#include "nn/subsampling.h"
#include "nn/transducer_gpu.h"
#include "text/result.h"
#include "text/vocab.h"

typedef enum { GIGAAM_CTC, GIGAAM_RNNT } gigaam_head;

typedef struct {
  uint32_t layers, mels, subs_kernel, hop, sample_rate;
  conformer_dims dims;
  gigaam_head head;
  uint32_t classes; /* output classes, blank (the last) included */
  bool charwise;    /* tokenizer.ggml.model "char": pieces concatenated as they are */
} gigaam_config;

/* The model: read-only after gigaam_load, shared by its sessions. */
typedef struct {
  gigaam_config c;
  gpu_device *dev;
  gmel mel;
  conv1d_subsampling sub;
  conformer_block *blocks;
  gpu_linear head;       /* CTC logits, or the joint's encoder projection */
  transducer dec;        /* RNN-T predictor and joint (host, f32) */
  gpu_transducer *gdec;  /* the same on the GPU (NULL: CTC, or too wide for its kernels) */
  float *dec_weights[8]; /* the host decoder's arrays */
  text_vocab vocab;
} gigaam;

/* GPU buffers sized for the longest input so far. */
typedef struct {
  uint32_t frames; /* mel frames they hold */
  gpu_buffer *mel, *head;
  conv1d_subsampling_scratch sub;
  conformer_scratch enc;
} gigaam_arena;

/* What one transcription writes: one session per thread. */
typedef struct {
  const gigaam *m;
  gpu_rec *rec;
  gigaam_arena arena;
  gpu_transducer_search *search; /* NULL without m->gdec */
} gigaam_session;

int gigaam_load(gpu_device *dev, const gguf_file *f, gigaam **out);
void gigaam_free(gigaam *m);

/* A session of m (gigaam/session.c); m must outlive it. */
int gigaam_session_new(const gigaam *m, gigaam_session **out);
void gigaam_session_free(gigaam_session *s);

/* Grows s's arena to `frames` mel frames (session.c; the warm path allocates nothing). */
int gigaam_arena_fit(gigaam_session *s, uint32_t frames);

/* The stages, for tests. */

/* Log-mel features [frames][mels] (malloc'd; NULL with 0 frames: under n_fft samples). */
int gigaam_features(const gigaam *m, const float *pcm, size_t n, float **mel, size_t *frames);

/* Encoder frames of `frames` mel frames. */
uint32_t gigaam_encoder_frames(const gigaam *m, uint32_t frames);

/* Runs the encoder and the head on `frames` mel frames. enc (if not NULL) gets
 * the encoder output [t][d], head (if not NULL) the head's output [t][head
 * width] (both malloc'd; the head's stays on the GPU for gigaam_decode_gpu);
 * *t the encoder frames. */
int gigaam_forward(gigaam_session *s, const float *mel, uint32_t frames, float **enc, float **head,
                   uint32_t *t);

/* Greedy decoding of the head's output on the CPU. */
int gigaam_decode(const gigaam *m, const float *head, uint32_t t, dec_tokens *out);

/* The RNN-T search on the GPU over the last gigaam_forward's head
 * (STENO_ERR_INVALID without a GPU decoder). */
int gigaam_decode_gpu(gigaam_session *s, uint32_t t, dec_tokens *out);

/* The tokens as a result: tokens 40 ms per frame with words and segments as
 * Parakeet gives them; the text is the pieces joined with one leading space
 * removed (transcribe.cpp's rule: no other whitespace is touched). */
int gigaam_result(const gigaam *m, const dec_tokens *toks, double seconds, steno_result **out);

/* All of it: 16 kHz mono pcm → a result; stop (may be NULL) is polled after
 * the encoder and during an RNN-T search (STENO_ERR_ABORTED). */
int gigaam_transcribe(gigaam_session *s, const float *pcm, size_t n, const transducer_abort *stop,
                      steno_result **out);

#endif
