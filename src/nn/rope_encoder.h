/* NeMo's TransformerEncoder as Nemotron 3.5 Transcribe uses it (the speech
 * encoder, the Sortformer diarization encoder, the word timestamp encoder):
 *   stacked frames → linear (no bias) → LayerNorm → blocks of
 *   x += out(Attn(RoPE(qk_norm(q, k)), v)) of LN1(x); x += fc2(GELU(fc1(LN2(x))))
 *   → LayerNorm.
 * q|k|v come from one fused projection without bias; the per-head q/k
 * LayerNorm is optional (the speech encoder has it, the diarization one not);
 * RoPE turns the first rope_dim dims of each head (rotate-half pairs),
 * positions from 0 at the first row of every run. Attention is bidirectional
 * over the keys a mask keeps. Activations are [t][stride] f32 rows. */
#ifndef STENO_NN_ROPE_ENCODER_H
#define STENO_NN_ROPE_ENCODER_H

#include "gpu/linear.h"
#include "gpu/norm.h"
#include "io/gguf.h"

typedef struct {
  uint32_t d, heads, ff, layers;
  uint32_t in;        /* inputs of the stacked-frame projection (subsampling · mels);
                       * 0: none (the word timestamp encoder reads its rows as they are) */
  uint32_t rope_dim;  /* rotated dims per head: head_dim · partial_rotary_factor, even */
  float rope_theta;
  float eps;          /* of every LayerNorm */
  bool qk_norm;       /* per-head LayerNorm of q and k before RoPE */
  uint32_t max_t;     /* the longest run (rows of the RoPE table and the scratch) */
} renc_dims;

typedef struct {
  gpu_norm ln1, ln2, qn, kn;
  gpu_linear qkv, out, fc1, fc2;
} renc_block;

typedef struct {
  renc_dims c;
  gpu_linear embed;  /* PREFIX pre_encode.proj */
  gpu_norm in_ln, out_ln;
  renc_block *blocks;
  gpu_buffer *rope;  /* [max_t][rope_dim]: cosines then sines */
} renc;

/* Loads the encoder whose tensors are PREFIX{pre_encode.proj.weight (if c.in),
 * embed_norm.*, layers.N.{norm1,attn.w_qkv,attn.q_norm,attn.k_norm,
 * attn.out_proj,norm2,ffn.net.0,ffn.net.3}.*, final_norm.*}. */
int renc_load(gpu_device *dev, const gguf_file *f, const char *prefix, const renc_dims *dims,
              renc *out);
void renc_free(renc *e);

/* Scratch for runs of up to c.max_t rows. */
typedef struct {
  uint32_t t, stride;       /* rows; floats per row of x, h, o (d padded to 64) */
  gpu_buffer *x, *h, *o;    /* the residual stream, a normed copy, the attention output */
  gpu_buffer *wide;         /* q|k|v, the FFN inner */
  gpu_buffer *scores;       /* attention scratch */
  gpu_buffer *mask;         /* [t] uint32: 0 = a key no query sees */
} renc_scratch;

int renc_scratch_new(gpu_device *dev, const renc *e, renc_scratch *s);
void renc_scratch_free(renc_scratch *s);

/* Records s->x[0..t) = embed(a) for t rows of stacked frames a (c.in floats each). */
void renc_embed(gpu_rec *rec, const renc *e, renc_scratch *s, gpu_buffer *a, uint32_t t);

/* Records the encoder over the t rows in s->x (the projected frames; keys as
 * s->mask says when masked, else all), and writes the final norm of rows
 * [first, first + rows) to out at out_off + i·out_stride. s->x is overwritten. */
void renc_record(gpu_rec *rec, const renc *e, renc_scratch *s, uint32_t t, bool masked,
                 uint32_t first, uint32_t rows, gpu_buffer *out, uint32_t out_off,
                 uint32_t out_stride);

#endif
