#include "nn/rope_encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "nn/weights.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* PREFIX + suffix (with layer n where the suffix has a %u) into buf. */
static const char *tname(char *buf, size_t cap, const char *prefix, const char *suffix, int n) {
  char s[96];
  snprintf(s, sizeof s, suffix, n);
  snprintf(buf, cap, "%s%s", prefix, s);
  return buf;
}

/* One linear layer "PREFIX{suffix}.weight" [k][rows] with its bias (or none). */
static int linear(gpu_device *dev, const gguf_file *f, const char *prefix, const char *suffix,
                  int n, uint32_t rows, uint32_t k, bool bias, gpu_linear *out) {
  char w[160], b[160], s[96];
  snprintf(s, sizeof s, "%s.weight", suffix);
  const char *names[1] = {tname(w, sizeof w, prefix, s, n)};
  float *bv = NULL;
  if (bias) {
    snprintf(s, sizeof s, "%s.bias", suffix);
    TRY(w_host(f, tname(b, sizeof b, prefix, s, n), W_F32, rows, true, &bv));
  }
  int64_t r = rows;
  int st = w_linear(dev, f, names, 1, &r, k, W_LINEAR_TYPES, bv, bias ? rows : 0, out);
  free(bv);
  return st;
}

static int norm(gpu_device *dev, const gguf_file *f, const char *prefix, const char *suffix, int n,
                uint32_t count, float eps, gpu_norm *out) {
  char buf[160];
  return w_norm(dev, f, tname(buf, sizeof buf, prefix, suffix, n), count, eps, out);
}

static int block(gpu_device *dev, const gguf_file *f, const char *p, const renc_dims *c, int n,
                 renc_block *b) {
  uint32_t d = c->d, hd = c->d / c->heads;
  TRY(norm(dev, f, p, "layers.%u.norm1", n, d, c->eps, &b->ln1));
  TRY(norm(dev, f, p, "layers.%u.norm2", n, d, c->eps, &b->ln2));
  if (c->qk_norm) {
    TRY(norm(dev, f, p, "layers.%u.attn.q_norm", n, hd, c->eps, &b->qn));
    TRY(norm(dev, f, p, "layers.%u.attn.k_norm", n, hd, c->eps, &b->kn));
  }
  TRY(linear(dev, f, p, "layers.%u.attn.w_qkv", n, 3 * d, d, false, &b->qkv));
  TRY(linear(dev, f, p, "layers.%u.attn.out_proj", n, d, d, true, &b->out));
  TRY(linear(dev, f, p, "layers.%u.ffn.net.0", n, c->ff, d, true, &b->fc1));
  return linear(dev, f, p, "layers.%u.ffn.net.3", n, d, c->ff, true, &b->fc2);
}

/* Row p: cos(p·θ_i) for i < rope_dim/2, then the sines; θ_i = theta^(−2i/rope_dim)
 * in f32 and p·θ_i rounded to f32, as transformers' rotary embedding. */
static int rope_table(gpu_device *dev, const renc_dims *c, gpu_buffer **out) {
  uint32_t half = c->rope_dim / 2;
  float *t = mem_alloc((size_t)c->max_t * c->rope_dim, sizeof *t);
  if (!t) return STENO_ERR_NOMEM;
  for (uint32_t p = 0; p < c->max_t; p++)
    for (uint32_t i = 0; i < half; i++) {
      float inv = (float)(1.0 / pow((double)c->rope_theta, (double)(2 * i) / c->rope_dim));
      float a = (float)p * inv;
      t[(size_t)p * c->rope_dim + i] = (float)cos((double)a);
      t[(size_t)p * c->rope_dim + half + i] = (float)sin((double)a);
    }
  int st = gpu_buffer_from(dev, t, (size_t)c->max_t * c->rope_dim * sizeof *t, out);
  free(t);
  return st;
}

int renc_load(gpu_device *dev, const gguf_file *f, const char *prefix, const renc_dims *dims,
              renc *out) {
  memset(out, 0, sizeof *out);
  const renc_dims *c = dims;
  uint32_t hd = c->heads ? c->d / c->heads : 0;
  if (!c->heads || c->d % c->heads || c->d > 8192 || c->ff < 1 || c->ff > 65536 ||
      c->layers < 1 || c->layers > 256 || c->in > 65536 || c->rope_dim % 2 ||
      c->rope_dim < 2 || c->rope_dim > hd || c->max_t < 1 || c->max_t > 1u << 20 ||
      !(c->rope_theta > 0) || !(c->eps > 0))
    return err_set(STENO_ERR_FORMAT,
                   "%s: %s encoder shape not supported: d %u, %u heads, ff %u, %u layers, "
                   "input %u, rope %u dims, theta %g, %u frames",
                   f->name, prefix, c->d, c->heads, c->ff, c->layers, c->in, c->rope_dim,
                   c->rope_theta, c->max_t);
  out->c = *c;
  out->blocks = mem_alloc(c->layers, sizeof *out->blocks);
  int st = out->blocks ? 0 : STENO_ERR_NOMEM;
  if (!st && c->in) st = linear(dev, f, prefix, "pre_encode.proj", 0, c->d, c->in, false, &out->embed);
  if (!st) st = norm(dev, f, prefix, "embed_norm", 0, c->d, c->eps, &out->in_ln);
  if (!st) st = norm(dev, f, prefix, "final_norm", 0, c->d, c->eps, &out->out_ln);
  for (uint32_t i = 0; i < c->layers && !st; i++) st = block(dev, f, prefix, c, (int)i, &out->blocks[i]);
  if (!st) st = rope_table(dev, c, &out->rope);
  if (st) renc_free(out);
  return st;
}

void renc_free(renc *e) {
  if (e->blocks)
    for (uint32_t i = 0; i < e->c.layers; i++) {
      renc_block *b = &e->blocks[i];
      w_norm_free(&b->ln1);
      w_norm_free(&b->ln2);
      w_norm_free(&b->qn);
      w_norm_free(&b->kn);
      gpu_linear_free(&b->qkv);
      gpu_linear_free(&b->out);
      gpu_linear_free(&b->fc1);
      gpu_linear_free(&b->fc2);
    }
  free(e->blocks);
  gpu_linear_free(&e->embed);
  w_norm_free(&e->in_ln);
  w_norm_free(&e->out_ln);
  gpu_buffer_free(e->rope);
  memset(e, 0, sizeof *e);
}

int renc_scratch_new(gpu_device *dev, const renc *e, renc_scratch *s) {
  memset(s, 0, sizeof *s);
  const renc_dims *c = &e->c;
  size_t t = c->max_t, f4 = sizeof(float);
  s->t = c->max_t;
  s->stride = pad64(c->d);
  uint32_t wide = pad64(3 * c->d) > pad64(c->ff) ? pad64(3 * c->d) : pad64(c->ff);
  size_t scores = gpu_attention_scratch_on(dev, c->max_t, c->heads, c->d / c->heads);
  int st = gpu_buffer_new(dev, t * s->stride * f4, &s->x);
  if (!st) st = gpu_buffer_new(dev, t * s->stride * f4, &s->h);
  if (!st) st = gpu_buffer_new(dev, t * s->stride * f4, &s->o);
  if (!st) st = gpu_buffer_new(dev, t * wide * f4, &s->wide);
  if (!st) st = gpu_buffer_new(dev, (scores > 1 ? scores : 1) * f4, &s->scores);
  if (!st) st = gpu_buffer_new(dev, t * sizeof(uint32_t), &s->mask);
  if (st) renc_scratch_free(s);
  return st;
}

void renc_scratch_free(renc_scratch *s) {
  gpu_buffer_free(s->x);
  gpu_buffer_free(s->h);
  gpu_buffer_free(s->o);
  gpu_buffer_free(s->wide);
  gpu_buffer_free(s->scores);
  gpu_buffer_free(s->mask);
  memset(s, 0, sizeof *s);
}

void renc_embed(gpu_rec *rec, const renc *e, renc_scratch *s, gpu_buffer *a, uint32_t t) {
  if (t > s->t || !e->c.in) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "encoder: %u rows for scratch of %u", t, s->t));
    return;
  }
  gpu_gemm_strided(rec, a, e->c.in, &e->embed, s->x, t, GPU_EPI_BIAS, 0);
}

/* x += Attn(LN1(x)); x += fc2(GELU(fc1(LN2(x)))) over t rows. */
static void record_block(gpu_rec *rec, const renc *e, const renc_block *b, renc_scratch *s,
                         uint32_t t, bool masked) {
  const renc_dims *c = &e->c;
  uint32_t d = c->d, S = s->stride, hd = d / c->heads, W = gpu_linear_width(&b->qkv);
  gpu_layer_norm(rec, s->x, 0, S, &b->ln1, s->h, 0, S, t, d, NULL, NULL);
  gpu_gemm_strided(rec, s->h, S, &b->qkv, s->wide, t, GPU_EPI_BIAS, 0);
  gpu_rope rope = {e->rope, c->rope_dim, 0};
  gpu_qk_norm_rope(rec, s->wide, 0, d, W, t, c->heads, hd, c->qk_norm ? &b->qn : NULL,
                   c->qk_norm ? &b->kn : NULL, &rope);
  gpu_attn at = {.q = {s->wide, 0, W}, .k = {s->wide, d, W}, .v = {s->wide, 2 * d, W},
                 .o = {s->o, 0, S}, .mask = masked ? s->mask : NULL, .scores = s->scores,
                 .t = t, .heads = c->heads, .head_dim = hd};
  gpu_attention(rec, &at);
  gpu_gemm_strided(rec, s->o, S, &b->out, s->x, t, GPU_EPI_RESIDUAL, 1.0f);
  gpu_layer_norm(rec, s->x, 0, S, &b->ln2, s->h, 0, S, t, d, NULL, NULL);
  gpu_gemm_strided(rec, s->h, S, &b->fc1, s->wide, t, GPU_EPI_GELU, 0);
  gpu_gemm_strided(rec, s->wide, gpu_linear_width(&b->fc1), &b->fc2, s->x, t, GPU_EPI_RESIDUAL,
                   1.0f);
}

void renc_record(gpu_rec *rec, const renc *e, renc_scratch *s, uint32_t t, bool masked,
                 uint32_t first, uint32_t rows, gpu_buffer *out, uint32_t out_off,
                 uint32_t out_stride) {
  if (t == 0 || t > s->t || first + rows > t) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "encoder: rows %u+%u of %u (scratch %u)", first,
                              rows, t, s->t));
    return;
  }
  uint32_t S = s->stride, d = e->c.d;
  gpu_layer_norm(rec, s->x, 0, S, &e->in_ln, s->x, 0, S, t, d, NULL, NULL);
  for (uint32_t i = 0; i < e->c.layers; i++) record_block(rec, e, &e->blocks[i], s, t, masked);
  gpu_layer_norm(rec, s->x, first * S, S, &e->out_ln, out, out_off, out_stride, rows, d, NULL,
                 NULL);
}
