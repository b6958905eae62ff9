/* A FastConformer block over one chunk of a cache-aware stream (NeMo's
 * cache-aware streaming, Nemotron): the new frames attend to the past frames
 * the caches hold, and the causal depthwise conv reads them as its left
 * context, so chunk after chunk gives what the whole utterance gives under the
 * chunked_limited mask.
 *
 * Rows are laid out as a window of `past` + n rows: the past slots first, the
 * chunk's n new rows after them. The residual stream x (conformer_scratch) holds
 * the new rows at [past, past + n); its rows before are scratch, which the row-
 * wise ops (norms, FFNs, projections) carry along harmlessly and nothing reads.
 * Per block, two cache buffers of the same layout hold in their first `past`
 * rows the block's attention-LayerNorm and conv-LayerNorm outputs of the last
 * `past` frames (the newest last; only the last `hist` of them are real); the
 * block writes the new frames' after them, and the caller records the slide of
 * each window by n rows after the chunk (conformer_cache_slide): on the GPU,
 * into a second buffer that becomes the window (a copy may not overlap). */
#ifndef STENO_NN_CONFORMER_STREAM_H
#define STENO_NN_CONFORMER_STREAM_H

#include "nn/conformer.h"

typedef struct {
  gpu_buffer *att, *conv;         /* [past + n][stride] each: the windows */
  gpu_buffer *att_next, *conv_next; /* the same: where the next chunk's windows are made */
  uint32_t past, n;               /* past slots, new rows per chunk */
} conformer_cache;

int conformer_cache_new(gpu_device *dev, const conformer_dims *dims, uint32_t past, uint32_t n,
                        conformer_cache *c);
void conformer_cache_free(conformer_cache *c);

/* Records block b over the n new rows of s->x (the window layout above) with
 * `hist` ≤ past real past frames; s is sized for past + n rows and its
 * positions (conformer_positions) are those of hist + n frames. */
void conformer_forward_cached(gpu_rec *rec, const conformer_dims *dims, const conformer_block *b,
                              conformer_scratch *s, const conformer_cache *c, uint32_t hist);

/* Records, after a chunk's block: the window's last `past` rows become the past
 * slots of the next chunk's window (the buffers swap). */
void conformer_cache_slide(gpu_rec *rec, conformer_cache *c, uint32_t stride);

#endif
