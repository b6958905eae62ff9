#include "nn/transformer.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "gpu/decode.h"
#include "gpu/elementwise.h"
#include "gpu/window.h"
#include "nn/weights.h"

void tf_enc_block_free(tf_enc_block *b) {
  gpu_linear *l[] = {&b->qkv, &b->out, &b->fc1, &b->fc2};
  gpu_norm *n[] = {&b->ln_attn, &b->ln_ffn};
  for (size_t i = 0; i < 4; i++) gpu_linear_free(l[i]);
  for (size_t i = 0; i < 2; i++) w_norm_free(n[i]);
}

void tf_dec_block_free(tf_dec_block *b) {
  gpu_linear *l[] = {&b->self_qkv, &b->self_out, &b->cross_q, &b->cross_kv, &b->cross_out,
                     &b->fc1,      &b->fc2};
  gpu_norm *n[] = {&b->ln_self, &b->ln_cross, &b->ln_ffn};
  for (size_t i = 0; i < 7; i++) gpu_linear_free(l[i]);
  for (size_t i = 0; i < 3; i++) w_norm_free(n[i]);
}

/* x += fc2(act(fc1(h))) over t rows (h of `stride`; wide: the inner rows),
 * then y = next(x) (rows `stride` apart). */
static void mlp(gpu_rec *rec, const tf_dims *dm, const gpu_linear *fc1, const gpu_linear *fc2,
                gpu_buffer *h, uint32_t stride, gpu_buffer *wide, gpu_buffer *x, uint32_t t,
                const gpu_norm *next, gpu_buffer *y) {
  uint32_t w = gpu_linear_width(fc1);
  gpu_gemm_strided(rec, h, stride, fc1, wide, t, dm->mlp == TF_GELU ? GPU_EPI_GELU : GPU_EPI_BIAS,
                   0);
  if (dm->mlp == TF_SWIGLU) gpu_swiglu(rec, wide, 0, w, wide, 0, w, t, dm->ff);
  gpu_gemm_norm(rec, wide, w, fc2, x, t, GPU_EPI_RESIDUAL, 1.0f, dm->d, next, y, stride);
}

void tf_enc_forward(gpu_rec *rec, const tf_dims *dm, const tf_enc_block *blocks, uint32_t layers,
                    uint32_t i, const tf_enc_scratch *s, uint32_t t, const gpu_norm *final,
                    gpu_buffer *out) {
  const tf_enc_block *b = &blocks[i];
  bool last = i + 1 == layers;
  const gpu_norm *next = last ? final : &blocks[i + 1].ln_attn;
  uint32_t S = s->stride, d = dm->d, hd = dm->head_dim, a = tf_attn_width(dm);
  uint32_t W = gpu_linear_width(&b->qkv), g = s->att_heads;
  if (i == 0) gpu_layer_norm(rec, s->x, 0, S, &b->ln_attn, s->h, 0, S, t, d, NULL, NULL);
  gpu_gemm_strided(rec, s->h, S, &b->qkv, s->wide, t, GPU_EPI_BIAS, 0);
  if (dm->rot) {
    gpu_rope r = *s->rope;
    gpu_qk_norm_rope(rec, s->wide, 0, a, W, t, dm->heads, hd, NULL, NULL, &r);
  }
  if (s->left) { /* the window's scores stay in shared memory: all heads at once */
    gpu_attn at = {.q = {s->wide, 0, W}, .k = {s->wide, a, W}, .v = {s->wide, 2 * a, W},
                   .o = {s->o, 0, S}, .t = t, .heads = dm->heads, .head_dim = hd};
    gpu_window_attention(rec, &at, s->left, s->right);
  }
  for (uint32_t h = 0; !s->left && h < dm->heads; h += g) { /* heads in groups whose scores fit */
    gpu_attn at = {.q = {s->wide, h * hd, W}, .k = {s->wide, a + h * hd, W},
                   .v = {s->wide, 2 * a + h * hd, W}, .o = {s->o, h * hd, S},
                   .scores = s->scores, .t = t, .heads = g, .head_dim = hd};
    gpu_attention(rec, &at);
  }
  gpu_gemm_norm(rec, s->o, S, &b->out, s->x, t, GPU_EPI_RESIDUAL, 1.0f, d, &b->ln_ffn, s->h, S);
  mlp(rec, dm, &b->fc1, &b->fc2, s->h, S, s->wide, s->x, t, next, last ? out : s->h);
}

void tf_cross_kv(gpu_rec *rec, const tf_dims *dm, tf_dec_block *blocks, uint32_t layers,
                 gpu_buffer *enc, uint32_t stride, gpu_buffer *kv, uint32_t t) {
  uint32_t a = tf_attn_width(dm);
  for (uint32_t i = 0; i < layers; i++) { /* packed to f16 rows of K then V */
    const gpu_linear *l = &blocks[i].cross_kv;
    gpu_gemm_strided(rec, enc, stride, l, kv, t, GPU_EPI_BIAS, 0);
    gpu_pack(rec, kv, 0, gpu_linear_width(l), blocks[i].cross_cache, 0, a, t, a);
  }
}

void tf_dec_forward(gpu_rec *rec, const tf_dims *dm, const tf_dec_block *b,
                    const tf_dec_scratch *s, uint32_t pos, uint32_t frames) {
  uint32_t d = dm->d, heads = dm->heads, hd = dm->head_dim, a = tf_attn_width(dm);
  gpu_layer_norm(rec, s->x, 0, d, &b->ln_self, s->h, 0, d, 1, d, NULL, NULL);
  gpu_gemv(rec, s->h, 0, &b->self_qkv, s->qkv, 0, GPU_EPI_BIAS, 0);
  if (dm->rot) {
    gpu_rope r = {s->rope_table, dm->rot, pos};
    gpu_qk_norm_rope(rec, s->qkv, 0, a, 3 * a, 1, heads, hd, NULL, NULL, &r);
  }
  gpu_pack(rec, s->qkv, a, 0, b->self_cache, pos * a, 0, 1, a);
  gpu_attend(rec, s->qkv, 0, b->self_cache, 0, s->att, 0, pos + 1, heads, hd, s->att_scratch);
  gpu_gemv(rec, s->att, 0, &b->self_out, s->x, 0, GPU_EPI_RESIDUAL, 1.0f);
  gpu_layer_norm(rec, s->x, 0, d, &b->ln_cross, s->h, 0, d, 1, d, NULL, NULL);
  gpu_gemv(rec, s->h, 0, &b->cross_q, s->qkv, 0, GPU_EPI_BIAS, 0);
  gpu_attend(rec, s->qkv, 0, b->cross_cache, 0, s->att, 0, frames, heads, hd, s->att_scratch);
  gpu_gemv(rec, s->att, 0, &b->cross_out, s->x, 0, GPU_EPI_RESIDUAL, 1.0f);
  gpu_layer_norm(rec, s->x, 0, d, &b->ln_ffn, s->h, 0, d, 1, d, NULL, NULL);
  gpu_gemv(rec, s->h, 0, &b->fc1, s->ff, 0, dm->mlp == TF_GELU ? GPU_EPI_GELU : GPU_EPI_BIAS, 0);
  if (dm->mlp == TF_SWIGLU) { /* [value | gate] → SiLU(gate)·value in place */
    uint32_t w = gpu_linear_width(&b->fc1);
    gpu_swiglu(rec, s->ff, 0, w, s->ff, 0, w, 1, dm->ff);
  }
  gpu_gemv(rec, s->ff, 0, &b->fc2, s->x, 0, GPU_EPI_RESIDUAL, 1.0f);
}

int tf_rope_table(uint32_t positions, uint32_t rot, float theta, float **out) {
  *out = NULL;
  if (rot < 2 || rot % 2 || positions == 0 || !(theta > 1.0f))
    return err_set(STENO_ERR_INVALID, "rope table: %u dims, %u positions, theta %g", rot,
                   positions, theta);
  float *t = mem_alloc((size_t)positions * rot, sizeof *t);
  if (!t) return STENO_ERR_NOMEM;
  uint32_t half = rot / 2;
  for (uint32_t p = 0; p < positions; p++)
    for (uint32_t j = 0; j < half; j++) {
      /* As transformers: inv_freq in f32, then the angle p·inv_freq in f32. */
      float inv = (float)(1.0 / pow((double)theta, (double)(2 * j) / (double)rot));
      float ang = (float)p * inv;
      t[(size_t)p * rot + j] = cosf(ang);
      t[(size_t)p * rot + half + j] = sinf(ang);
    }
  *out = t;
  return 0;
}
