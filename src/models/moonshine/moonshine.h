/* Moonshine (Useful Sensors) from the GGUF files transcribe.cpp publishes
 * (architecture "moonshine", spec gguf-whisper-moonshine.md §3):
 *   pcm as is → conv stem (conv 127/64 + tanh, one-group GroupNorm, conv 7/3 +
 *   GELU, conv 3/2 + GELU) → pre-LN transformer blocks with partial RoPE (GPU
 *   encoder, nn/transformer.h, the whole clip in one pass) → cross K/V (f16) →
 *   token by token from <s>: self-attention with RoPE over an f16 KV cache,
 *   cross-attention, SwiGLU MLP, the tied head (GPU decoder) → greedy argmax
 *   until </s> or the position cap → SentencePiece pieces → one segment over
 *   the clip (the model gives no times).
 *
 * RoPE: Moonshine rotates interleaved pairs (0,1), (2,3)…; the GPU kernel
 * rotates halves (d, d + rot/2). The q and k projections' rows are reordered
 * within each head at load (even rotated dims, then odd, then the rest), which
 * turns one into the other and leaves every q·k unchanged. */
#ifndef STENO_MODELS_MOONSHINE_H
#define STENO_MODELS_MOONSHINE_H

#include "decode/tokens.h"
#include "gpu/gpu.h"
#include "gpu/linear.h"
#include "gpu/norm.h"
#include "io/gguf.h"
#include "nn/transformer.h"
#include "steno.h"
#include "text/vocab.h"


typedef struct {
  bool streaming;          /* Moonshine Streaming (spec §4) */
  uint32_t d, enc_layers, dec_layers, enc_heads, dec_heads, enc_ff, dec_ff;
  uint32_t enc_d;          /* the encoder's width (Moonshine: d) */
  uint32_t enc_hd, dec_hd; /* head dims (Streaming's encoder attention may be narrower than enc_d) */
  uint32_t vocab, max_pos; /* max_pos: the decoder's positions, its length cap */
  uint32_t rot;            /* rotated dims per decoder head (and encoder head, Moonshine) */
  float theta;
  int bos, eos;            /* the decoder's start token and its end */
  uint32_t kernel[3], stride[3]; /* Moonshine's conv stem */
  float gn_eps;
  /* Moonshine Streaming: */
  uint32_t frame_len;      /* samples per frontend frame (80) */
  float cmvn_eps, k;       /* CMVN epsilon, exp(log_k) of the asinh compression */
  bool has_proj;           /* adapter.proj (encoder and decoder widths differ) */
  uint32_t *window;        /* [enc_layers][2]: left, right of each layer's sliding attention */
} moonshine_config;

/* A session's activations, sized for the longest clip so far (frames). */
typedef struct {
  uint32_t frames;   /* encoder frames the buffers hold */
  size_t samples;    /* pcm samples they hold */
  gpu_buffer *pcm, *col0, *s0, *col1, *s1, *col2, *x, *h, *o, *wide, *scores, *enc, *kv;
  gpu_buffer *ad;    /* Streaming: the adapter's output [frames][d padded] */
  gpu_buffer *rope;  /* [max(frames, max_pos)][rot] */
  uint32_t att_heads;
  gpu_buffer *dx, *dh, *dqkv, *datt, *dff, *logits, *att_scratch;
  float *host_logits;
} moonshine_arena;

/* A model, or a session of one (a copy sharing its weights, owning its
 * recorder, activations and KV caches), as whisper.h does it. */
typedef struct moonshine {
  moonshine_config c;
  gpu_device *dev;
  const struct moonshine *model; /* a session's model; NULL in a model */
  gpu_rec *rec;                  /* sessions only */
  tf_dims enc_dims, dec_dims;
  gpu_linear conv0, conv1, conv2; /* Moonshine's stem; Streaming: linear 80 → De, two causal convs */
  gpu_norm stem_norm;
  gpu_buffer *pos;                 /* Streaming: adapter.pos_emb [max_pos][enc_d] */
  gpu_linear proj, head;           /* Streaming: adapter.proj (if any), the untied lm_head */
  tf_enc_block *enc;
  gpu_norm enc_ln;
  gpu_linear embed; /* token table and tied head */
  tf_dec_block *dec;
  gpu_norm dec_ln;
  text_vocab vocab;
  uint32_t frames;  /* encoder frames of the last moonshine_encode */
  moonshine_arena a;
} moonshine;

int moonshine_load(gpu_device *dev, const gguf_file *f, moonshine **out);
void moonshine_free(moonshine *m); /* a model, or a session */

int moonshine_session_new(const moonshine *m, moonshine **out);
void moonshine_session_free(moonshine *s);

/* Encoder frames of n samples: 0 when the clip is too short for the stem. */
uint32_t moonshine_frames(const moonshine *m, size_t n);

/* Sizes a session's encoder buffers for n samples of t frames (no-op when they fit). */
int moonshine_grow(moonshine *m, size_t n, uint32_t t);

/* ---- the stages, for tests ---- */

/* The stem and encoder over n samples, and every layer's cross K/V. stem and
 * enc (if not NULL) get the stem's output and the encoder's, [frames][enc_d];
 * adapter (Streaming, if not NULL) the adapter's output [frames][d]. A
 * stream hook may call it on a growing input: Streaming's encoder frames
 * depend only on the audio up to their right windows (spec §4.6). */
int moonshine_encode(moonshine *m, const float *pcm, size_t n, float *stem, float *enc,
                     float *adapter);

/* Streaming's frontend on the host: n samples zero-padded to whole frames of
 * frame_len, each normalized (CMVN) and compressed (asinh(k·x)); *frames of
 * them in a malloc'd [frames][frame_len]. */
int moonshine_frontend(const moonshine *m, const float *pcm, size_t n, float **out,
                       uint32_t *frames);

/* The most tokens a decode may give after <s>: the positions left, and for
 * Streaming the duration budget floor(frames·320·13 / 32000) + 24. */
uint32_t moonshine_max_tokens(const moonshine *m);

/* Feeds token id at position pos (after moonshine_encode); logits (if not
 * NULL) gets the raw logits [vocab]. */
int moonshine_feed(moonshine *m, int id, uint32_t pos, float *logits);

/* Greedy decoding from <s> (after moonshine_encode): tokens until </s> (not
 * included) or the cap; *truncated when the cap ended it. */
int moonshine_decode(moonshine *m, const steno_transcribe_params *p, dec_tokens *out,
                     bool *truncated);

/* All of it: 16 kHz mono pcm → a result with one segment over the clip. */
int moonshine_transcribe(moonshine *m, const float *pcm, size_t n,
                         const steno_transcribe_params *p, steno_result **out);

#endif
