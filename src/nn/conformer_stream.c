/* The FastConformer block over a chunk of a cache-aware stream. */
#include "nn/conformer_stream.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "gpu/gqa.h"

int conformer_cache_new(gpu_device *dev, const conformer_dims *dims, uint32_t past, uint32_t n,
                        conformer_cache *c) {
  memset(c, 0, sizeof *c);
  c->past = past, c->n = n;
  size_t stride = (dims->d + 63) / 64 * 64, bytes = (size_t)(past + n) * stride * sizeof(float);
  /* Zeros, so that slots no frame has filled yet hold finite values. */
  float *zero = mem_alloc((size_t)(past + n) * stride, sizeof *zero);
  int st = zero ? 0 : STENO_ERR_NOMEM;
  if (!st) st = gpu_buffer_from(dev, zero, bytes, &c->att);
  if (!st) st = gpu_buffer_from(dev, zero, bytes, &c->conv);
  if (!st) st = gpu_buffer_from(dev, zero, bytes, &c->att_next);
  if (!st) st = gpu_buffer_from(dev, zero, bytes, &c->conv_next);
  free(zero);
  if (st) conformer_cache_free(c);
  return st;
}

void conformer_cache_free(conformer_cache *c) {
  gpu_buffer *b[] = {c->att, c->conv, c->att_next, c->conv_next};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  memset(c, 0, sizeof *c);
}

/* ½ FFN over every row of the window (row-wise: the scratch rows stay apart). */
static void half_ffn(gpu_rec *rec, const conformer_dims *dims, const gpu_norm *norm,
                     const gpu_linear *up, const gpu_linear *down, conformer_scratch *s,
                     uint32_t rows) {
  uint32_t S = s->stride;
  gpu_layer_norm(rec, s->x, 0, S, norm, s->h, 0, S, rows, dims->d, NULL, NULL);
  gpu_gemm_strided(rec, s->h, S, up, s->wide, rows, GPU_EPI_SILU, 0);
  gpu_gemm_strided(rec, s->wide, gpu_linear_width(up), down, s->x, rows, GPU_EPI_RESIDUAL, 0.5f);
}

/* Relative-position attention of the new rows over the hist + n frames that
 * end the window: every key there is in an allowed chunk (the caller keeps
 * past a whole number of chunks), so no mask. */
static void attention(gpu_rec *rec, const conformer_dims *dims, const conformer_block *b,
                      conformer_scratch *s, const conformer_cache *c, uint32_t hist) {
  uint32_t S = s->stride, d = dims->d, P = c->past, rows = P + c->n, t = hist + c->n;
  uint32_t w0 = P - hist, W = gpu_linear_width(&b->qkv);
  gpu_layer_norm(rec, s->x, P * S, S, &b->norm_attn, c->att, P * S, S, c->n, d, NULL, NULL);
  gpu_gemm_strided(rec, c->att, S, &b->qkv, s->wide, rows, GPU_EPI_BIAS, 0);
  gpu_gemm_strided(rec, s->pe, S, &b->pos, s->p, 2 * t - 1, GPU_EPI_BIAS, 0);
  gpu_attn a = {
      .q = {s->wide, w0 * W, W},
      .k = {s->wide, w0 * W + d, W},
      .v = {s->wide, w0 * W + 2 * d, W},
      .qv = {s->wide, w0 * W + b->qkv.n, W},
      .pos = {s->p, 0, S},
      .o = {s->o, w0 * S, S},
      .scores = s->scores,
      .t = t,
      .heads = dims->heads,
      .head_dim = d / dims->heads,
  };
  gpu_rel_attention(rec, &a);
  gpu_gemm_strided(rec, s->o, S, &b->out, s->x, rows, GPU_EPI_RESIDUAL, 1.0f);
}

/* The conv module: the causal conv's left context is the cached past rows
 * (zeros before the first frame, as its padding). */
static void conv(gpu_rec *rec, const conformer_dims *dims, const conformer_block *b,
                 conformer_scratch *s, const conformer_cache *c, uint32_t hist) {
  uint32_t S = s->stride, d = dims->d, P = c->past, rows = P + c->n, w0 = P - hist;
  uint32_t H = gpu_linear_width(&b->pw1);
  gpu_layer_norm(rec, s->x, P * S, S, &b->norm_conv, c->conv, P * S, S, c->n, d, NULL, NULL);
  gpu_gemm_strided(rec, c->conv, S, &b->pw1, s->wide, rows, GPU_EPI_BIAS, 0);
  gpu_conv_glu(rec, s->wide, w0 * H, H, &b->dw, &b->conv_norm, b->conv_mode, s->o, w0 * S, S,
               hist + c->n, d);
  gpu_gemm_strided(rec, s->o, S, &b->pw2, s->x, rows, GPU_EPI_RESIDUAL, 1.0f);
}

void conformer_forward_cached(gpu_rec *rec, const conformer_dims *dims, const conformer_block *b,
                              conformer_scratch *s, const conformer_cache *c, uint32_t hist) {
  uint32_t rows = c->past + c->n, S = s->stride;
  if (hist > c->past || rows > s->t || dims->rotary || !b->dw.causal) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "conformer stream: %u of %u past rows, %u new, scratch of %u rows",
                              hist, c->past, c->n, s->t));
    return;
  }
  half_ffn(rec, dims, &b->norm_ff1, &b->ff1_up, &b->ff1_down, s, rows);
  attention(rec, dims, b, s, c, hist);
  conv(rec, dims, b, s, c, hist);
  half_ffn(rec, dims, &b->norm_ff2, &b->ff2_up, &b->ff2_down, s, rows);
  gpu_layer_norm(rec, s->x, 0, S, &b->norm_out, s->h, 0, S, rows, dims->d, NULL, NULL);
  gpu_buffer *x = s->x;
  s->x = s->h;
  s->h = x;
}

void conformer_cache_slide(gpu_rec *rec, conformer_cache *c, uint32_t stride) {
  gpu_copy_rows(rec, c->att, c->n * stride, stride, c->att_next, 0, stride, c->past, stride);
  gpu_copy_rows(rec, c->conv, c->n * stride, stride, c->conv_next, 0, stride, c->past, stride);
  gpu_buffer *a = c->att, *v = c->conv;
  c->att = c->att_next, c->conv = c->conv_next;
  c->att_next = a, c->conv_next = v;
}
