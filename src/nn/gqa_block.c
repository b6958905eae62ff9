/* Nemotron-H's attention mixer (NemotronHAttention): q, k, v projections
 * (one stacked layer), the new keys and values appended to the layer's cache,
 * causal grouped-query attention without positional rotation, o_proj. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gpu/decode.h"
#include "gpu/gqa.h"
#include "nn/hybrid.h"
#include "nn/weights.h"

/* NAME.bias of `rows` values into bias + at, or zeros where the file has none. */
static int part_bias(const gguf_file *f, const char *name, uint32_t rows, float *bias, bool *any) {
  char b[256];
  snprintf(b, sizeof b, "%s.bias", name);
  if (!gguf_tensor_find(f, b)) return 0;
  float *v;
  TRY(w_host(f, b, W_F32, rows, true, &v));
  memcpy(bias, v, rows * sizeof *v);
  free(v);
  *any = true;
  return 0;
}

static int load_qkv(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
                    gpu_linear *out) {
  static const char *const parts[] = {"q_proj", "k_proj", "v_proj"};
  uint32_t qd = d->heads * d->head_dim, kd = d->kv_heads * d->head_dim;
  int64_t rows[] = {qd, kd, kd};
  char base[3][256], w[3][256];
  const char *names[3];
  float *bias = calloc(qd + 2 * (size_t)kd, sizeof *bias);
  if (!bias) return STENO_ERR_NOMEM;
  bool any = false;
  int st = 0;
  for (int i = 0, at = 0; i < 3 && !st; at += (int)rows[i], i++) {
    snprintf(base[i], sizeof base[i], "%s%s", prefix, parts[i]);
    snprintf(w[i], sizeof w[i], "%s.weight", base[i]);
    names[i] = w[i];
    st = part_bias(f, base[i], (uint32_t)rows[i], bias + at, &any);
  }
  if (!st)
    st = w_linear(dev, f, names, 3, rows, d->d, W_LINEAR_TYPES, any ? bias : NULL,
                  any ? qd + 2 * (size_t)kd : 0, out);
  free(bias);
  return st;
}

int gqa_load(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
             gqa_block *b) {
  memset(b, 0, sizeof *b);
  char name[256];
  int st = load_qkv(dev, f, prefix, d, &b->qkv);
  snprintf(name, sizeof name, "%so_proj", prefix);
  if (!st) st = hybrid_load_linear(dev, f, name, d->d, d->heads * d->head_dim, &b->out);
  if (st) gqa_free(b);
  return st;
}

void gqa_free(gqa_block *b) {
  gpu_linear_free(&b->qkv);
  gpu_linear_free(&b->out);
}

void gqa_record(gpu_rec *rec, const hybrid_dims *d, const gqa_block *b, hybrid_cache *c,
                hybrid_scratch *s, uint32_t rows, uint32_t pos) {
  uint32_t qd = d->heads * d->head_dim, kd = d->kv_heads * d->head_dim;
  uint32_t W = gpu_linear_width(&b->qkv);
  if ((uint64_t)pos + rows > c->ctx) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "attention: %u tokens at %u past the cache of %u",
                              rows, pos, c->ctx));
    return;
  }
  hybrid_linear(rec, s->h, d->stride, &b->qkv, s->wide, rows, GPU_EPI_BIAS);
  /* the new rows' k | v into the cache: copied, or packed to f16 pairs (kd words a row) */
  if (c->f16) gpu_pack(rec, s->wide, qd, W, c->kv, pos * kd, kd, rows, kd);
  else gpu_copy_rows(rec, s->wide, qd, W, c->kv, pos * 2 * kd, 2 * kd, rows, 2 * kd);
  gpu_gqa g = {.q = s->wide, .q_off = 0, .q_stride = W, .kv = c->kv, .k_off = 0, .v_off = kd,
               .kv_stride = 2 * kd, .o = s->y, .o_off = 0, .o_stride = qd, .nq = rows,
               .pos = pos, .heads = d->heads, .kv_heads = d->kv_heads, .hd = d->head_dim,
               .f16 = c->f16};
  gpu_gqa_attend(rec, &g);
  hybrid_linear(rec, s->y, qd, &b->out, s->x, rows, GPU_EPI_RESIDUAL);
}
