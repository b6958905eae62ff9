/* The FastConformer block (Parakeet; GigaAM shares it): ½ FFN, relative-
 * position self-attention, conv module, ½ FFN, LayerNorm, each sub-layer
 * pre-normed with a residual. Activations are [t][stride] f32 rows.
 *
 * With dims.rotary (GigaAM v3) the attention is rotary instead: the
 * LayerNorm-ed input y is rotated per head (split halves, θ = pos ·
 * base^(−2j/head_dim)) before the q and k projections, v is projected from
 * the unrotated y, and plain scaled dot-product attention follows (no
 * linear_pos, no biases u and v). */
#ifndef STENO_NN_CONFORMER_H
#define STENO_NN_CONFORMER_H

#include "gpu/conv.h"
#include "gpu/linear.h"
#include "gpu/norm.h"
#include "io/gguf.h"

typedef struct {
  gpu_norm norm_ff1, norm_attn, norm_conv, norm_ff2, norm_out;
  gpu_linear ff1_up, ff1_down, ff2_up, ff2_down; /* up: SiLU */
  gpu_linear qkv;      /* [q | k | v] with biases (q + u | k | v), then q + v as dual outputs;
                          rotary: [q | k] with their biases */
  gpu_linear v;        /* rotary only: linear_v */
  gpu_linear pos;      /* linear_pos, no bias */
  gpu_linear out;      /* linear_out */
  gpu_linear pw1, pw2; /* conv module's pointwise convs */
  gpu_dwconv dw;
  gpu_norm conv_norm;  /* BatchNorm folded to an affine, or a LayerNorm */
  gpu_conv_norm conv_mode;
  uint32_t index;      /* its place in the stack (conformer_load's i) */
} conformer_block;

/* Sizes of a conformer stack. */
typedef struct {
  uint32_t d, heads, ff, kernel;
  bool bias;        /* linear and conv biases present */
  bool conv_ln;     /* the conv module's norm is a LayerNorm (else BatchNorm) */
  bool rotary;      /* rotary attention (GigaAM), else relative-position attention */
  float rope_base;  /* rotary: the θ base (GigaAM: 5000) */
  bool causal_conv; /* the depthwise conv sees kernel − 1 frames before, none after */
  uint32_t chunk, left_chunks; /* chunked_limited attention (gpu_attn's), 0: full */
  const char *conv_norm_name; /* the conv norm's tensors "enc.blocks.{i}.NAME.weight":
                                 NULL means "conv.bn" (GigaAM's files say "conv.ln") */
} conformer_dims;

/* Loads block i from tensors named as transcribe.cpp's Parakeet files
 * ("enc.blocks.{i}.…"). */
int conformer_load(gpu_device *dev, const gguf_file *f, const conformer_dims *dims, int i,
                   conformer_block *b);
void conformer_free(conformer_block *b);

/* Scratch a forward pass over up to t frames needs (allocated by the caller,
 * shared by every block). */
typedef struct {
  uint32_t t;            /* frames it is sized for */
  uint32_t stride;       /* floats per row of x, h and o: d padded to 64 */
  gpu_buffer *x, *h, *o; /* [t][stride]: the residual stream, a normed copy, a sub-layer output */
  gpu_buffer *wide;      /* [t][max(ff, 4d, 2d) padded]: FFN inner, q|k|v|q+v, conv pointwise1 */
  gpu_buffer *pe, *p;    /* [2t − 1][stride]: sinusoids, their projection (rotary: the
                            RoPE table [t][head_dim], and v [t][d]) */
  gpu_buffer *scores;    /* attention scratch */
  /* A padded batch (relative attention only): room for `batch` clips of t
   * frames, x, h, o and wide hold [batch·t] rows, clip i at rows i·t ..;
   * `clips` of them in the next passes (conformer_set_lens; ≤ 1: one clip
   * of t rows, the single-clip path), lens their own frames (uint32). */
  uint32_t batch, clips;
  gpu_buffer *lens;
  /* conformer_project_positions: block i's projection of pe in pl[i] (each
   * [2t − 1][stride], for the scratch's whole t) for blocks below
   * `projected`; 0 after conformer_positions, until the next projection.
   * `kept` of them made by a run that finished (conformer_keep_positions);
   * the pass's table starts at row `row0` of pl[i]. */
  gpu_buffer **pl;
  uint32_t npl, projected, kept, row0;
} conformer_scratch;

int conformer_scratch_new(gpu_device *dev, const conformer_dims *dims, uint32_t t,
                          conformer_scratch *s);

/* The same with room for `batch` clips of up to t frames each. */
int conformer_scratch_new_batch(gpu_device *dev, const conformer_dims *dims, uint32_t t,
                                uint32_t batch, conformer_scratch *s);

/* The next passes run `clips` (≤ s->batch) clips padded to the pass's t, of
 * lens[i] frames each (1 ≤ lens[i] ≤ t: the caller's pass t). */
int conformer_set_lens(conformer_scratch *s, const uint32_t *lens, uint32_t clips);
void conformer_scratch_free(conformer_scratch *s);

/* Uploads the relative positions' sinusoids for t frames into s->pe: row r is
 * position t − 1 − r, columns (sin, cos) interleaved as transformers computes them.
 * Rotary: the RoPE table of positions 0 … t − 1 (gpu_rope's layout), in f32 as
 * GigaAM computes it. */
int conformer_positions(const conformer_dims *dims, uint32_t t, conformer_scratch *s);

/* Relative positions through every block's linear_pos, made once for the
 * scratch's whole t and kept: they depend on the frames alone, and a pass of
 * t ≤ s->t frames reads position t − 1 − r at row s->t − t + r of the same
 * table and projections (the 0.6B Parakeet's 24 projections and the table
 * were ~1 ms of each 11 s call on the H200). In a call:
 *   conformer_positions_kept  before gpu_rec_begin: uploads the table for
 *                             s->t where the projections are not kept
 *                             (rotary: conformer_positions for t);
 *   conformer_project_positions  after it: records the projections side by
 *                             side (gpu_rec_together) where not kept, and
 *                             each block's attention takes its own;
 *   conformer_keep_positions  after the run finished: keeps them (a failed
 *                             run leaves them to be made again).
 * Blocks are blocks[0 .. layers − 1], their index their place. */
int conformer_positions_kept(const conformer_dims *dims, uint32_t t, conformer_scratch *s);
int conformer_project_positions(gpu_rec *rec, const conformer_dims *dims,
                                const conformer_block *blocks, uint32_t layers,
                                conformer_scratch *s, uint32_t t);
void conformer_keep_positions(conformer_scratch *s);

/* Records blocks[0 .. layers − 1] over t frames of s->x (in place); after
 * conformer_set_lens with several clips, over each clip's t rows as
 * transformers' ParakeetEncoder runs a padded batch with its attention mask:
 * keys past a clip's length ignored, its padded frames 0 in the conv
 * module's depthwise conv; the rows past a clip's length mean nothing.
 * A block's last LayerNorm and the next block's first are one dispatch where
 * the GEMM before them splits k (gpu_gemm_norm2); every 4 blocks go to the
 * GPU while the rest is recorded (gpu_rec_flush: discrete GPUs). */
int conformer_forward(gpu_rec *rec, const conformer_dims *dims, const conformer_block *blocks,
                      uint32_t layers, conformer_scratch *s, uint32_t t);

#endif
