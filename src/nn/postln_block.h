/* The post-LN transformer encoder block (NeMo's TransformerEncoder with
 * pre_ln = false; Sortformer's 18 blocks after its FastConformer): no positions,
 * full attention, ReLU FFN, each sub-layer's residual sum then normed:
 *   x = LN1(x + Wo·MHA(x));  x = LN2(x + W2·ReLU(W1·x)).
 * Weights are transcribe.cpp's "tf.blocks.{i}.{norm_1,attn.{q,k,v,out},
 * norm_2,ff.{in,out}}.{weight,bias}". Activations are [t][stride] f32 rows. */
#ifndef STENO_NN_POSTLN_BLOCK_H
#define STENO_NN_POSTLN_BLOCK_H

#include "gpu/linear.h"
#include "gpu/norm.h"
#include "io/gguf.h"

typedef struct {
  uint32_t d, heads, ff;
} postln_dims;

typedef struct {
  gpu_norm norm1, norm2;
  gpu_linear qkv; /* q|k|v stacked, with biases */
  gpu_linear out, ff_in, ff_out;
} postln_block;

/* Loads "tf.blocks.{i}.…" (biases required, every tensor's shape checked). */
int postln_load(gpu_device *dev, const gguf_file *f, const postln_dims *dims, int i,
                postln_block *b);
void postln_free(postln_block *b);

/* Scratch for up to t frames, shared by every block of a stack. */
typedef struct {
  uint32_t t;
  uint32_t stride;       /* floats per row of x, h, o: d padded to 64 */
  gpu_buffer *x, *h, *o; /* the stream, the sum before a norm, attention output */
  gpu_buffer *wide;      /* [t][max(q|k|v, ff) padded] */
  gpu_buffer *scores;    /* attention scratch */
} postln_scratch;

int postln_scratch_new(gpu_device *dev, const postln_dims *dims, uint32_t t, postln_scratch *s);
void postln_scratch_free(postln_scratch *s);

/* Records one block over t frames of s->x (in place). */
void postln_forward(gpu_rec *rec, const postln_dims *dims, const postln_block *b,
                    postln_scratch *s, uint32_t t);

#endif
