/* The towers' working memory (nt_arena, audio.c and arena.c): one recorder,
 * the buffers whose size the model fixes (made on the first run), and those
 * that grow with the clip (to the longest clip seen, never shrunk). A session
 * keeps one, so a warm run allocates no GPU memory and reuses its recorder's
 * command buffers and descriptor sets. Padding columns are zero when a buffer
 * is made and no kernel writes them (every buffer keeps one role and row
 * stride), so they stay zero across runs. */
#ifndef STENO_MODELS_NEMOTRON_TRANSCRIBE_ARENA_H
#define STENO_MODELS_NEMOTRON_TRANSCRIBE_ARENA_H

#include "models/nemotron_transcribe/nemotron_transcribe.h"

/* GPU buffers of one diarization step (n ≤ the encoder's max_t rows). */
typedef struct {
  renc_scratch s;
  gpu_buffer *h, *p, *col, *up, *packed, *dense, *logits;
  uint32_t w; /* floats per encoder row (d padded to 64) */
} diar_bufs;

/* Host arrays of one diarization step. */
typedef struct {
  float *in, *lg, *wide, *probs;
  uint32_t *mask;
} diar_host;

/* GPU buffers of one word timestamp chunk (n ≤ chunk + context frames,
 * n·factor rows; timestamps.c). */
typedef struct {
  renc_scratch s;
  gpu_buffer *in, *up, *packed, *rows, *ln, *logits;
  uint32_t S, lw; /* floats per row of rows/ln, of logits */
} wts_bufs;

struct nt_arena {
  const nt_model *m;
  gpu_rec *rec;
  bool made;              /* the model-sized part below exists */
  /* Sized by the model. */
  renc_scratch asr;       /* its own mask is own_mask[0] while the arena holds it */
  gpu_buffer *chunk;      /* [asr max_t][sub·mels]: one ASR run's features */
  gpu_buffer *ones;       /* [max runs] uint32 1: the mask of a run with no padding */
  gpu_buffer *own_mask[2]; /* the ASR and diarization scratches' masks (padded runs) */
  diar_bufs diar;
  diar_host h;
  nt_spkcache k;
  float *sil;             /* [diar.w] the silence embedding, zero padded */
  /* Sized by the longest clip: cap encoder frames. */
  uint32_t cap, n_masks;
  gpu_buffer **masks;     /* masks of the ASR runs with padding, one each */
  gpu_buffer *feat;       /* [2·cap·sub][mels]: raw log-mel, then normalized (offset by frames) */
  gpu_buffer *asr_out;    /* [cap][d] the speech encoder's output */
  gpu_buffer *emb;        /* [cap][diar.w] the diarization's projected frames */
  gpu_buffer *act;        /* [cap][speakers padded to 32] activities */
  gpu_buffer *states;     /* [cap][d padded to 64] */
  gpu_buffer *embeds;     /* [cap][proj width] */
  gpu_buffer *out;        /* [cap][2·d + d_lm]: states, asr, embeds packed (one submission fills them) */
  float *host_feat, *host_emb, *host_act; /* their host sides (out comes down into nt_audio) */
  /* The word timestamp head's (timestamps.c; made on its first run). */
  wts_bufs *wts;
  float *wts_host;        /* [rows][head width]: one chunk's logits */
  gpu_buffer *wts_mask;   /* the scratch's own mask (padded chunks) */
};

/* The word timestamp head's part of the arena, made where missing. */
int nt_arena_wts(nt_arena *a);

/* Makes the model-sized part where it is missing and grows the clip-sized part
 * to t encoder frames (nothing when it holds them). */
int nt_arena_fit(nt_arena *a, uint32_t t);

/* Masks of `count` ASR runs with padding: grows a->masks. */
int nt_arena_masks(nt_arena *a, uint32_t count);

/* A GPU buffer of `count` floats, zeroed. */
int nt_zeroed(gpu_device *dev, size_t count, gpu_buffer **out);

#endif
