/* The pre-LN transformer blocks of the encoder-decoder families (Whisper,
 * Moonshine, Moonshine Streaming): an encoder block over a window of frames
 * and a decoder block fed one token at a time, with self-attention over an
 * f16 KV cache and cross-attention over the encoder's f16 K/V. What differs
 * between the families is data (tf_dims): biases live in the linear layers
 * (zeros where a family has none), rotary positions are a table, the MLP is
 * GELU or SwiGLU. Activations are [t][stride] f32 rows. */
#ifndef STENO_NN_TRANSFORMER_H
#define STENO_NN_TRANSFORMER_H

#include "gpu/linear.h"
#include "gpu/norm.h"

typedef enum {
  TF_GELU = 0,   /* fc2(GELU(fc1(x))) */
  TF_SWIGLU = 1, /* fc2(SiLU(gate)·value), [value | gate] = fc1(x) */
} tf_mlp;

/* Sizes of one stack (encoder or decoder). */
typedef struct {
  uint32_t d;        /* residual width */
  uint32_t heads, head_dim; /* attention width a = heads·head_dim (may differ from d) */
  uint32_t ff;       /* MLP inner width (SwiGLU: of the value half) */
  tf_mlp mlp;
  uint32_t rot;      /* rotary dims per head of q and k (rotate-half pairs); 0: none */
} tf_dims;

static inline uint32_t tf_attn_width(const tf_dims *d) { return d->heads * d->head_dim; }

typedef struct {
  gpu_norm ln_attn, ln_ffn;
  gpu_linear qkv, out, fc1, fc2; /* qkv: q|k|v stacked */
} tf_enc_block;

typedef struct {
  gpu_norm ln_self, ln_cross, ln_ffn;
  gpu_linear self_qkv, self_out, cross_q, cross_kv, cross_out, fc1, fc2;
  gpu_buffer *self_cache;  /* [positions][a] words: f16 K then V of every head (per session) */
  gpu_buffer *cross_cache; /* [frames][a] words, written once per window (per session) */
} tf_dec_block;

void tf_enc_block_free(tf_enc_block *b);
void tf_dec_block_free(tf_dec_block *b); /* the weights; the caches are the session's */

/* Scratch of an encoder pass over up to t frames, shared by its blocks. */
typedef struct {
  uint32_t stride;       /* floats per row of x, h, o: d (and a) padded to 64 */
  gpu_buffer *x, *h, *o; /* the residual stream, a normed copy, the attention output */
  gpu_buffer *wide;      /* [t][max(3a, ff (2ff for SwiGLU)) padded] */
  gpu_buffer *scores;    /* gpu_attention_scratch(t, att_heads) */
  uint32_t att_heads;    /* heads per attention call: their scores fit one buffer */
  const gpu_rope *rope;  /* positions 0..t−1 of the table (rot > 0) */
  uint32_t left, right;  /* sliding attention of the next block (gpu_window_attention); 0: all keys */
} tf_enc_scratch;

/* Records block i of `layers`: x += Attn(LN(x)); x += MLP(LN(x)) over t
 * frames of s->x. Each block ends by writing the next norm of x: the next
 * block's first into s->h (which that block then reads as its own), the last
 * block `final` into out (rows s->stride apart); each norm after a product
 * goes in the product's split-k reduce where it has one (gpu_gemm_norm). */
void tf_enc_forward(gpu_rec *rec, const tf_dims *dm, const tf_enc_block *blocks, uint32_t layers,
                    uint32_t i, const tf_enc_scratch *s, uint32_t t, const gpu_norm *final,
                    gpu_buffer *out);

/* Records each layer's cross K|V from enc ([t][stride]) into its f16 cross
 * cache, through kv ([t][width of cross_kv] scratch). */
void tf_cross_kv(gpu_rec *rec, const tf_dims *dm, tf_dec_block *blocks, uint32_t layers,
                 gpu_buffer *enc, uint32_t stride, gpu_buffer *kv, uint32_t t);

/* Scratch of one decoder token. */
typedef struct {
  gpu_buffer *x, *h;       /* [stride]: the residual stream (the embedding written by the caller), a normed copy */
  gpu_buffer *qkv, *att;   /* [3a padded], [a padded] */
  gpu_buffer *ff;          /* [ff or 2ff padded] */
  gpu_buffer *att_scratch; /* gpu_attend_scratch over the longest cache */
  gpu_buffer *rope_table; /* rot > 0: [positions][rot/2 cos | rot/2 sin] */
} tf_dec_scratch;

/* Records one decoder layer for the token at position pos, its K/V appended
 * to the self cache; cross-attention over `frames` cached frames. */
void tf_dec_forward(gpu_rec *rec, const tf_dims *dm, const tf_dec_block *b,
                    const tf_dec_scratch *s, uint32_t pos, uint32_t frames);

/* The RoPE table for rot dims: row p holds cos(p·θ^(−2j/rot)) for j < rot/2,
 * then the sines (malloc'd [positions][rot]). */
int tf_rope_table(uint32_t positions, uint32_t rot, float theta, float **out);

#endif
