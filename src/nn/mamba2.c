/* Nemotron-H's Mamba-2 mixer (NemotronHMamba2Mixer): in_proj to z | x B C |
 * dt, the causal conv1d + SiLU over x B C, the selective scan, the RMSNorm of
 * y gated by z per group, out_proj. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nn/hybrid.h"
#include "nn/weights.h"

/* A_log | D | dt_bias in one buffer, as ssm_scan reads them. */
static int scan_params(gpu_device *dev, const gguf_file *f, const char *prefix, uint32_t heads,
                       gpu_buffer **out) {
  static const char *const names[] = {"A_log", "D", "dt_bias"};
  float *par = malloc(3 * (size_t)heads * sizeof *par);
  int st = par ? 0 : STENO_ERR_NOMEM;
  for (int i = 0; i < 3 && !st; i++) {
    char name[256];
    float *v;
    snprintf(name, sizeof name, "%s%s", prefix, names[i]);
    st = w_host(f, name, W_F32, heads, true, &v);
    if (!st) memcpy(par + (size_t)i * heads, v, heads * sizeof *v), free(v);
  }
  if (!st) st = gpu_buffer_from(dev, par, 3 * (size_t)heads * sizeof *par, out);
  free(par);
  return st;
}

/* The conv's weight [ch][1][K] as [ch][K] and its bias (zeros where absent). */
static int conv_params(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
                       mamba2_block *b) {
  char name[256];
  uint32_t ch = hybrid_conv_dim(d);
  snprintf(name, sizeof name, "%sconv1d.weight", prefix);
  TRY(w_gpu(dev, f, name, W_F32 | GGUF_MASK(GGUF_TYPE_F16) | GGUF_MASK(GGUF_TYPE_BF16),
            (size_t)ch * d->m_kernel, &b->conv_w));
  snprintf(name, sizeof name, "%sconv1d.bias", prefix);
  if (gguf_tensor_find(f, name)) return w_gpu(dev, f, name, W_F32, ch, &b->conv_b);
  float *zero = calloc(ch, sizeof *zero);
  if (!zero) return STENO_ERR_NOMEM;
  int st = gpu_buffer_from(dev, zero, ch * sizeof *zero, &b->conv_b);
  free(zero);
  return st;
}

int mamba2_load(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
                mamba2_block *b) {
  memset(b, 0, sizeof *b);
  char name[256];
  uint32_t inner = hybrid_inner(d), ch = hybrid_conv_dim(d);
  snprintf(name, sizeof name, "%sin_proj", prefix);
  int st = hybrid_load_linear(dev, f, name, inner + ch + d->m_heads, d->d, &b->in_proj);
  snprintf(name, sizeof name, "%sout_proj", prefix);
  if (!st) st = hybrid_load_linear(dev, f, name, d->d, inner, &b->out_proj);
  if (!st) st = conv_params(dev, f, prefix, d, b);
  if (!st) st = scan_params(dev, f, prefix, d->m_heads, &b->par);
  snprintf(name, sizeof name, "%snorm.weight", prefix);
  if (!st) st = w_gpu(dev, f, name, W_F32, inner, &b->norm);
  if (st) mamba2_free(b);
  return st;
}

void mamba2_free(mamba2_block *b) {
  gpu_linear_free(&b->in_proj);
  gpu_linear_free(&b->out_proj);
  gpu_buffer_free(b->conv_w);
  gpu_buffer_free(b->conv_b);
  gpu_buffer_free(b->par);
  gpu_buffer_free(b->norm);
  memset(b, 0, sizeof *b);
}

void mamba2_record(gpu_rec *rec, const hybrid_dims *d, const mamba2_block *b, hybrid_cache *c,
                   hybrid_scratch *s, uint32_t rows, uint32_t pos) {
  uint32_t inner = hybrid_inner(d), ch = hybrid_conv_dim(d), gn = d->m_groups * d->m_state;
  uint32_t W = gpu_linear_width(&b->in_proj);
  bool fresh = pos == 0, prompt = rows > 1 || pos == 0;
  hybrid_linear(rec, s->h, d->stride, &b->in_proj, s->wide, rows, GPU_EPI_BIAS);
  gpu_conv_state conv = c->conv;
  conv.w = b->conv_w, conv.b = b->conv_b;
  gpu_ssm_conv(rec, &conv, fresh, s->wide, inner, W, s->xbc, 0, ch, rows);
  gpu_scan_state scan = c->scan;
  scan.par = b->par;
  gpu_ssm_scan(rec, &scan, fresh, prompt ? d->dt_min : 0.0f, s->xbc, 0, ch, inner, inner + gn,
               s->wide, inner + ch, W, s->y, 0, inner, rows);
  gpu_rms_norm(rec, s->y, 0, inner, s->wide, 0, W, b->norm, d->eps, inner / d->m_groups, s->y, 0,
               inner, rows, inner);
  hybrid_linear(rec, s->y, inner, &b->out_proj, s->x, rows, GPU_EPI_RESIDUAL);
}
