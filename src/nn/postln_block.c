#include "nn/postln_block.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "nn/weights.h"

#define LN_EPS 1e-5f

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* One linear "tf.blocks.{i}.{part}" of rows × k with its bias. */
static int linear(gpu_device *dev, const gguf_file *f, int i, const char *part, int64_t rows,
                  int64_t k, gpu_linear *out) {
  char w[128], b[128];
  snprintf(w, sizeof w, "tf.blocks.%d.%s.weight", i, part);
  snprintf(b, sizeof b, "tf.blocks.%d.%s.bias", i, part);
  float *bias;
  TRY(w_host(f, b, W_F32, (size_t)rows, true, &bias));
  const char *names[1] = {w};
  int st = w_linear(dev, f, names, 1, &rows, k, W_LINEAR_TYPES, bias, (size_t)rows, out);
  free(bias);
  return st;
}

/* q|k|v stacked along the output, their biases side by side. */
static int qkv(gpu_device *dev, const gguf_file *f, int i, int64_t d, gpu_linear *out) {
  char w[3][128], b[128];
  static const char *const parts[3] = {"q", "k", "v"};
  float *bias = mem_alloc(3 * (size_t)d, sizeof *bias), *part = NULL;
  if (!bias) return STENO_ERR_NOMEM;
  int st = 0;
  for (int p = 0; p < 3 && !st; p++) {
    snprintf(w[p], sizeof w[p], "tf.blocks.%d.attn.%s.weight", i, parts[p]);
    snprintf(b, sizeof b, "tf.blocks.%d.attn.%s.bias", i, parts[p]);
    st = w_host(f, b, W_F32, (size_t)d, true, &part);
    if (!st) memcpy(bias + p * d, part, (size_t)d * sizeof *bias);
    free(part);
    part = NULL;
  }
  const char *names[3] = {w[0], w[1], w[2]};
  int64_t rows[3] = {d, d, d};
  if (!st) st = w_linear(dev, f, names, 3, rows, d, W_LINEAR_TYPES, bias, 3 * (size_t)d, out);
  free(bias);
  return st;
}

int postln_load(gpu_device *dev, const gguf_file *f, const postln_dims *dims, int i,
                postln_block *b) {
  memset(b, 0, sizeof *b);
  char key[128];
  int64_t d = dims->d, ff = dims->ff;
  snprintf(key, sizeof key, "tf.blocks.%d.norm_1", i);
  int st = w_norm(dev, f, key, (size_t)d, LN_EPS, &b->norm1);
  snprintf(key, sizeof key, "tf.blocks.%d.norm_2", i);
  if (!st) st = w_norm(dev, f, key, (size_t)d, LN_EPS, &b->norm2);
  if (!st) st = qkv(dev, f, i, d, &b->qkv);
  if (!st) st = linear(dev, f, i, "attn.out", d, d, &b->out);
  if (!st) st = linear(dev, f, i, "ff.in", ff, d, &b->ff_in);
  if (!st) st = linear(dev, f, i, "ff.out", d, ff, &b->ff_out);
  if (st) postln_free(b);
  return st;
}

void postln_free(postln_block *b) {
  w_norm_free(&b->norm1);
  w_norm_free(&b->norm2);
  gpu_linear *lin[] = {&b->qkv, &b->out, &b->ff_in, &b->ff_out};
  for (size_t i = 0; i < sizeof lin / sizeof *lin; i++) gpu_linear_free(lin[i]);
  memset(b, 0, sizeof *b);
}

int postln_scratch_new(gpu_device *dev, const postln_dims *dims, uint32_t t, postln_scratch *s) {
  memset(s, 0, sizeof *s);
  s->t = t;
  s->stride = pad64(dims->d);
  uint32_t wide = pad64(3 * dims->d) > pad64(dims->ff) ? pad64(3 * dims->d) : pad64(dims->ff);
  size_t rows = t, f = sizeof(float);
  int st = gpu_buffer_new(dev, rows * s->stride * f, &s->x);
  if (!st) st = gpu_buffer_new(dev, rows * s->stride * f, &s->h);
  if (!st) st = gpu_buffer_new(dev, rows * s->stride * f, &s->o);
  if (!st) st = gpu_buffer_new(dev, rows * wide * f, &s->wide);
  if (!st) {
    size_t n = gpu_attention_scratch_on(dev, t, dims->heads, dims->d / dims->heads);
    st = gpu_buffer_new(dev, n * f, &s->scores);
  }
  if (st) postln_scratch_free(s);
  return st;
}

void postln_scratch_free(postln_scratch *s) {
  gpu_buffer *b[] = {s->x, s->h, s->o, s->wide, s->scores};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  memset(s, 0, sizeof *s);
}

void postln_forward(gpu_rec *rec, const postln_dims *dims, const postln_block *b,
                    postln_scratch *s, uint32_t t) {
  uint32_t S = s->stride, d = dims->d, W = gpu_linear_width(&b->qkv);
  /* NeMo scales q and k each by dh^-1/4: the same as scores scaled by 1/√dh (scale 0). */
  gpu_gemm_strided(rec, s->x, S, &b->qkv, s->wide, t, GPU_EPI_BIAS, 0);
  gpu_attn a = {
      .q = {s->wide, 0, W},
      .k = {s->wide, d, W},
      .v = {s->wide, 2 * d, W},
      .o = {s->o, 0, S},
      .scores = s->scores,
      .t = t,
      .heads = dims->heads,
      .head_dim = d / dims->heads,
  };
  gpu_attention(rec, &a);
  gpu_gemm_strided(rec, s->o, S, &b->out, s->x, t, GPU_EPI_RESIDUAL, 1.0f);
  gpu_layer_norm(rec, s->x, 0, S, &b->norm1, s->h, 0, S, t, d, NULL, NULL);
  gpu_gemm_strided(rec, s->h, S, &b->ff_in, s->wide, t, GPU_EPI_RELU, 0);
  gpu_gemm_strided(rec, s->wide, gpu_linear_width(&b->ff_in), &b->ff_out, s->h, t,
                   GPU_EPI_RESIDUAL, 1.0f);
  gpu_layer_norm(rec, s->h, 0, S, &b->norm2, s->x, 0, S, t, d, NULL, NULL);
}
