/* Nemotron-H's blocks: what they share (linear layers with optional biases,
 * activations, per-layer state). */
#include "nn/hybrid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gpu/decode.h"
#include "nn/weights.h"



int hybrid_load_linear(gpu_device *dev, const gguf_file *f, const char *name, int64_t rows,
                       int64_t k, gpu_linear *out) {
  char w[256], b[256];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  float *bias = NULL;
  size_t nbias = 0;
  if (gguf_tensor_find(f, b)) {
    const gguf_tensor *t = gguf_tensor_find(f, w);
    if (!t || t->n_dims < 2) return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' is missing", f->name, w);
    nbias = (size_t)t->ne[1];
    TRY(w_host(f, b, W_F32, nbias, true, &bias));
  }
  const char *names[] = {w};
  int st = w_linear(dev, f, names, 1, rows > 0 ? &rows : NULL, k, W_LINEAR_TYPES, bias, nbias, out);
  free(bias);
  return st;
}

void hybrid_linear(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l, gpu_buffer *c,
                   uint32_t rows, gpu_epi epi) {
  if (rows == 1) gpu_gemv(rec, a, 0, l, c, 0, epi, 1.0f);
  else gpu_gemm_strided(rec, a, lda, l, c, rows, epi, 1.0f);
}

int hybrid_scratch_new(gpu_device *dev, const hybrid_dims *d, uint32_t rows, uint32_t wide,
                       hybrid_scratch *s) {
  memset(s, 0, sizeof *s);
  s->rows = rows;
  uint32_t inner = hybrid_inner(d), qd = d->heads * d->head_dim;
  size_t y = inner > qd ? inner : qd, k = d->router.k ? d->router.k : 1;
  size_t moe = d->moe_ff ? d->moe_ff : 1, f = sizeof(float);
  int st = gpu_buffer_new(dev, (size_t)rows * d->stride * f, &s->x);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * d->stride * f, &s->h);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * wide * f, &s->wide);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * (hybrid_conv_dim(d) + 1) * f, &s->xbc);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * y * f, &s->y);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * k * moe * f, &s->eh);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * k * f, &s->idx);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * k * f, &s->wts);
  size_t experts = d->router.experts ? d->router.experts : 1;
  if (!st) st = gpu_buffer_new(dev, experts * rows * f, &s->list);
  if (!st) st = gpu_buffer_new(dev, experts * f, &s->count);
  if (!st) st = gpu_buffer_new(dev, (size_t)rows * k * d->d * f, &s->ey);
  if (st) hybrid_scratch_free(s);
  return st;
}

void hybrid_scratch_free(hybrid_scratch *s) {
  gpu_buffer *b[] = {s->x, s->h, s->wide, s->xbc, s->y, s->eh, s->idx, s->wts, s->list, s->count, s->ey};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  memset(s, 0, sizeof *s);
}

int hybrid_cache_new(gpu_device *dev, const hybrid_dims *d, bool attention, uint32_t ctx, bool f16,
                     hybrid_cache *c) {
  memset(c, 0, sizeof *c);
  size_t f = sizeof(float);
  if (attention) {
    c->ctx = ctx;
    c->f16 = f16;
    return gpu_buffer_new(dev, (size_t)ctx * 2 * d->kv_heads * d->head_dim * (f16 ? 2 : f), &c->kv);
  }
  uint32_t ch = hybrid_conv_dim(d), inner = hybrid_inner(d);
  c->conv = (gpu_conv_state){NULL, NULL, NULL, ch, d->m_kernel};
  c->scan = (gpu_scan_state){NULL, NULL, d->m_heads, d->m_dim, d->m_state, d->m_groups};
  int st = gpu_buffer_new(dev, (size_t)(d->m_kernel - 1) * ch * f, &c->conv.state);
  if (!st) st = gpu_buffer_new(dev, (size_t)inner * d->m_state * f, &c->scan.state);
  if (st) hybrid_cache_free(c);
  return st;
}

void hybrid_cache_free(hybrid_cache *c) {
  gpu_buffer_free(c->conv.state);
  gpu_buffer_free(c->scan.state);
  gpu_buffer_free(c->kv);
  memset(c, 0, sizeof *c);
}




