/* Nemotron-H's hybrid blocks (transformers `nemotron_h`): the Mamba-2 mixer,
 * grouped-query attention without positions, the relu² MLP and the
 * mixture-of-experts with its shared expert. Each block reads the normed
 * residual h and adds its output to the residual x (both [rows][stride] f32),
 * as NemotronHBlock does: x += mixer(RMSNorm(x)). Weights are read-only after
 * load; the per-sequence state (conv and scan states, K/V cache) lives in a
 * session's hybrid_cache, the activations in its hybrid_scratch. */
#ifndef STENO_NN_HYBRID_H
#define STENO_NN_HYBRID_H

#include "gpu/linear.h"
#include "gpu/moe.h"
#include "gpu/ssm.h"
#include "io/gguf.h"

/* The sizes every block of a model shares (the text config). */
typedef struct {
  uint32_t d, stride;                  /* hidden size; row stride (d padded to 64) */
  float eps;                           /* layer_norm_epsilon (every RMSNorm) */
  uint32_t m_heads, m_dim, m_state, m_groups, m_kernel; /* Mamba-2 */
  float dt_min;                        /* time_step_min: the prompt's dt clamp */
  uint32_t heads, kv_heads, head_dim;  /* attention */
  uint32_t ff;                         /* dense MLP */
  gpu_router router;                   /* MoE */
  uint32_t moe_ff, shared_ff;
} hybrid_dims;

/* I (Mamba-2's inner width) and the conv's channels (I + 2·groups·state). */
static inline uint32_t hybrid_inner(const hybrid_dims *d) { return d->m_heads * d->m_dim; }
static inline uint32_t hybrid_conv_dim(const hybrid_dims *d) {
  return hybrid_inner(d) + 2 * d->m_groups * d->m_state;
}

typedef struct {
  gpu_linear in_proj, out_proj; /* z | x B C | dt ; back to d */
  gpu_buffer *conv_w, *conv_b;  /* [ch][K], [ch] */
  gpu_buffer *par;              /* A_log | D | dt_bias */
  gpu_buffer *norm;             /* gated RMSNorm weight [I] */
} mamba2_block;

typedef struct {
  gpu_linear qkv, out; /* q | k | v stacked; o_proj */
} gqa_block;

typedef struct {
  gpu_linear up, down; /* the dense MLP, or the MoE's shared expert */
  gpu_linear gate;     /* MoE: the router [E][d] (F32 in the checkpoint) */
  gpu_buffer *bias;    /* MoE: e_score_correction_bias [E] */
  gpu_linear experts_up, experts_down; /* MoE: every expert stacked */
} mlp_block;

/* Loads the block whose tensors are PREFIX.* (e.g. "lm.layers.3.mixer."). Bias
 * tensors (NAME.bias) are used where the file has them. */
int mamba2_load(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
                mamba2_block *b);
int gqa_load(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
             gqa_block *b);
int mlp_load(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
             bool moe, mlp_block *b);
void mamba2_free(mamba2_block *b);
void gqa_free(gqa_block *b);
void mlp_free(mlp_block *b);

/* One layer's sequence state: Mamba-2's conv [K−1][ch] and scan [heads][P][N]
 * states, or an attention layer's K/V cache [ctx][2·kv_heads·head_dim]. */
typedef struct {
  gpu_conv_state conv;
  gpu_scan_state scan;
  gpu_buffer *kv;
  uint32_t ctx;
  bool f16; /* the K/V cache holds f16 (half the memory; values rounded) */
} hybrid_cache;

/* Activations for up to `rows` rows at once (one per session). */
typedef struct {
  uint32_t rows;
  gpu_buffer *x, *h;     /* [rows][stride]: the residual stream, its normed copy */
  gpu_buffer *wide;      /* [rows][widest projection] */
  gpu_buffer *xbc, *y;   /* [rows][conv channels], [rows][max(I, heads·head_dim)] */
  gpu_buffer *eh;        /* [rows·k][moe_ff]: the chosen experts' inner activations */
  gpu_buffer *idx, *wts; /* [rows·k] */
  gpu_buffer *list, *count, *ey; /* grouped experts: pairs per expert [E][rows], their
                                    numbers [E], each pair's output [rows·k][d] */
} hybrid_scratch;

/* `wide` is the widest projection's row (gpu_linear_width) of the model's blocks. */
int hybrid_scratch_new(gpu_device *dev, const hybrid_dims *d, uint32_t rows, uint32_t wide,
                       hybrid_scratch *s);
void hybrid_scratch_free(hybrid_scratch *s);

/* A Mamba-2 layer's states (attention false) or an attention layer's cache of
 * ctx positions (f16 or f32). */
int hybrid_cache_new(gpu_device *dev, const hybrid_dims *d, bool attention, uint32_t ctx, bool f16,
                     hybrid_cache *c);
void hybrid_cache_free(hybrid_cache *c);

/* x += mixer(h) over `rows` rows at positions pos.. (pos 0: a fresh state). A
 * prompt (rows > 1, or any call with pos 0) runs Mamba-2's scan with the dt
 * clamp, a single later row without it, as the reference does. */
void mamba2_record(gpu_rec *rec, const hybrid_dims *d, const mamba2_block *b, hybrid_cache *c,
                   hybrid_scratch *s, uint32_t rows, uint32_t pos);
void gqa_record(gpu_rec *rec, const hybrid_dims *d, const gqa_block *b, hybrid_cache *c,
                hybrid_scratch *s, uint32_t rows, uint32_t pos);
void mlp_record(gpu_rec *rec, const hybrid_dims *d, const mlp_block *b, hybrid_scratch *s,
                uint32_t rows);

/* c = a·Wᵀ over `rows` rows of a (stride lda): gemv for one row, else gemm. */
void hybrid_linear(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l, gpu_buffer *c,
                   uint32_t rows, gpu_epi epi);

/* A linear layer from tensor NAME.weight (k inputs, `rows` outputs; rows 0:
 * any) with NAME.bias if the file has one. */
int hybrid_load_linear(gpu_device *dev, const gguf_file *f, const char *name, int64_t rows,
                       int64_t k, gpu_linear *out);

#endif
