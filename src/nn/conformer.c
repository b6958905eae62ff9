#include "nn/conformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "nn/weights.h"

#define LN_EPS 1e-5f
#define BN_EPS 1e-5f

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* "enc.blocks.{i}.{suffix}" into buf. */
static const char *name(char *buf, size_t cap, int i, const char *suffix) {
  snprintf(buf, cap, "enc.blocks.%d.%s", i, suffix);
  return buf;
}

/* An optional bias (present when dims->bias) as a host array of n, or zeros. */
static int bias_or_zero(const gguf_file *f, const conformer_dims *dims, const char *key, size_t n,
                        float **out) {
  if (dims->bias) return w_host(f, key, W_F32, n, true, out);
  *out = mem_alloc(n, sizeof **out);
  return *out ? 0 : STENO_ERR_NOMEM;
}

static int ffn(gpu_device *dev, const gguf_file *f, const conformer_dims *dims, int i,
               const char *which, gpu_linear *up, gpu_linear *down) {
  char key[128], bkey[128];
  const char *names[1] = {key};
  float *b;
  snprintf(bkey, sizeof bkey, "enc.blocks.%d.%s.linear1.bias", i, which);
  TRY(bias_or_zero(f, dims, bkey, dims->ff, &b));
  snprintf(key, sizeof key, "enc.blocks.%d.%s.linear1.weight", i, which);
  int64_t rows = dims->ff;
  int st = w_linear(dev, f, names, 1, &rows, dims->d, W_LINEAR_TYPES, b, dims->ff, up);
  free(b);
  if (st) return st;
  snprintf(bkey, sizeof bkey, "enc.blocks.%d.%s.linear2.bias", i, which);
  TRY(bias_or_zero(f, dims, bkey, dims->d, &b));
  snprintf(key, sizeof key, "enc.blocks.%d.%s.linear2.weight", i, which);
  rows = dims->d;
  st = w_linear(dev, f, names, 1, &rows, dims->ff, W_LINEAR_TYPES, b, dims->d, down);
  free(b);
  return st;
}

/* Rotary: q|k stacked with their biases, v and out alone. */
static int rotary_attention(gpu_device *dev, const gguf_file *f, const conformer_dims *dims, int i,
                            conformer_block *b) {
  char kq[128], kk[128], key[128];
  size_t d = dims->d;
  float *bias = mem_alloc(2 * d, sizeof *bias), *part = NULL;
  if (!bias) return STENO_ERR_NOMEM;
  static const char *const parts[2] = {"attn.linear_q.bias", "attn.linear_k.bias"};
  int st = 0;
  for (int p = 0; p < 2 && !st; p++) {
    st = bias_or_zero(f, dims, name(key, sizeof key, i, parts[p]), d, &part);
    if (!st) memcpy(bias + p * d, part, d * sizeof *bias);
    free(part);
    part = NULL;
  }
  const char *names[2] = {name(kq, sizeof kq, i, "attn.linear_q.weight"),
                          name(kk, sizeof kk, i, "attn.linear_k.weight")};
  int64_t rows[2] = {(int64_t)d, (int64_t)d};
  if (!st) st = w_linear(dev, f, names, 2, rows, (int64_t)d, W_LINEAR_TYPES, bias, 2 * d, &b->qkv);
  free(bias);
  static const char *const single[2][2] = {{"attn.linear_v.weight", "attn.linear_v.bias"},
                                           {"attn.linear_out.weight", "attn.linear_out.bias"}};
  gpu_linear *out[2] = {&b->v, &b->out};
  for (int p = 0; p < 2 && !st; p++) {
    st = bias_or_zero(f, dims, name(key, sizeof key, i, single[p][1]), d, &part);
    names[0] = name(kq, sizeof kq, i, single[p][0]);
    if (!st) st = w_linear(dev, f, names, 1, rows, (int64_t)d, W_LINEAR_TYPES, part, d, out[p]);
    free(part);
    part = NULL;
  }
  return st;
}

/* q|k|v stacked, biases (q + u | k | v) and q + v as the dual outputs. */
static int attention(gpu_device *dev, const gguf_file *f, const conformer_dims *dims, int i,
                     conformer_block *b) {
  char kq[128], kk[128], kv[128], key[128];
  size_t d = dims->d;
  float *bias = mem_alloc(4 * d, sizeof *bias), *u = NULL, *v = NULL, *part = NULL;
  if (!bias) return STENO_ERR_NOMEM;
  int st = w_host(f, name(key, sizeof key, i, "attn.pos_bias_u"), W_F32, d, true, &u);
  if (!st) st = w_host(f, name(key, sizeof key, i, "attn.pos_bias_v"), W_F32, d, true, &v);
  static const char *const parts[3] = {"attn.linear_q.bias", "attn.linear_k.bias",
                                       "attn.linear_v.bias"};
  for (int p = 0; p < 3 && !st; p++) {
    st = bias_or_zero(f, dims, name(key, sizeof key, i, parts[p]), d, &part);
    if (!st) memcpy(bias + p * d, part, d * sizeof *bias);
    free(part);
    part = NULL;
  }
  for (size_t j = 0; !st && j < d; j++) {
    bias[3 * d + j] = bias[j] + v[j];
    bias[j] += u[j];
  }
  const char *names[3] = {name(kq, sizeof kq, i, "attn.linear_q.weight"),
                          name(kk, sizeof kk, i, "attn.linear_k.weight"),
                          name(kv, sizeof kv, i, "attn.linear_v.weight")};
  int64_t rows[3] = {(int64_t)d, (int64_t)d, (int64_t)d};
  if (!st) st = w_linear(dev, f, names, 3, rows, (int64_t)d, W_LINEAR_TYPES, bias, 4 * d, &b->qkv);
  free(u);
  free(v);
  if (!st) {
    names[0] = name(kq, sizeof kq, i, "attn.linear_pos.weight");
    st = w_linear(dev, f, names, 1, rows, (int64_t)d, W_LINEAR_TYPES, NULL, 0, &b->pos);
  }
  if (!st) st = bias_or_zero(f, dims, name(key, sizeof key, i, "attn.linear_out.bias"), d, &part);
  if (!st) {
    names[0] = name(kq, sizeof kq, i, "attn.linear_out.weight");
    st = w_linear(dev, f, names, 1, rows, (int64_t)d, W_LINEAR_TYPES, part, d, &b->out);
  }
  free(part);
  free(bias);
  return st;
}

/* pointwise1, depthwise (+ bias), the norm (BatchNorm folded), pointwise2. */
static int conv_module(gpu_device *dev, const gguf_file *f, const conformer_dims *dims, int i,
                       conformer_block *b) {
  char key[128], wkey[128];
  const char *names[1] = {wkey};
  size_t d = dims->d;
  float *bias = NULL, *w = NULL, *g = NULL, *beta = NULL, *mean = NULL, *var = NULL;
  int64_t rows = 2 * (int64_t)d;
  int st = bias_or_zero(f, dims, name(key, sizeof key, i, "conv.pointwise1.bias"), 2 * d, &bias);
  if (!st) {
    name(wkey, sizeof wkey, i, "conv.pointwise1.weight");
    st = w_linear(dev, f, names, 1, &rows, (int64_t)d, W_CONV_TYPES, bias, 2 * d, &b->pw1);
  }
  free(bias);
  bias = NULL;
  if (!st) st = bias_or_zero(f, dims, name(key, sizeof key, i, "conv.pointwise2.bias"), d, &bias);
  if (!st) {
    rows = (int64_t)d;
    name(wkey, sizeof wkey, i, "conv.pointwise2.weight");
    st = w_linear(dev, f, names, 1, &rows, (int64_t)d, W_CONV_TYPES, bias, d, &b->pw2);
  }
  free(bias);
  bias = NULL;
  b->dw.kernel = dims->kernel;
  b->dw.causal = dims->causal_conv;
  if (!st) st = w_host(f, name(key, sizeof key, i, "conv.depthwise.weight"), W_CONV_TYPES,
                       d * dims->kernel, true, &w);
  if (!st) st = gpu_buffer_from(dev, w, d * dims->kernel * sizeof *w, &b->dw.w);
  if (!st) st = bias_or_zero(f, dims, name(key, sizeof key, i, "conv.depthwise.bias"), d, &bias);
  if (!st) st = gpu_buffer_from(dev, bias, d * sizeof *bias, &b->dw.b);
  const char *nn = dims->conv_norm_name ? dims->conv_norm_name : "conv.bn";
  char part[64];
  snprintf(part, sizeof part, "%s.weight", nn);
  if (!st) st = w_host(f, name(key, sizeof key, i, part), W_F32, d, true, &g);
  snprintf(part, sizeof part, "%s.bias", nn);
  if (!st) st = w_host(f, name(key, sizeof key, i, part), W_F32, d, true, &beta);
  b->conv_mode = dims->conv_ln ? GPU_CONV_LAYER_NORM : GPU_CONV_AFFINE;
  b->conv_norm.eps = LN_EPS;
  if (!st && !dims->conv_ln) {
    /* BatchNorm in eval mode is x·s + (β − mean·s) with s = γ/√(var + eps). */
    st = w_host(f, name(key, sizeof key, i, "conv.bn.running_mean"), W_F32, d, true, &mean);
    if (!st) st = w_host(f, name(key, sizeof key, i, "conv.bn.running_var"), W_F32, d, true, &var);
    for (size_t j = 0; !st && j < d; j++) {
      float s = g[j] / sqrtf(var[j] + BN_EPS);
      beta[j] -= mean[j] * s;
      g[j] = s;
    }
  }
  if (!st) st = gpu_buffer_from(dev, g, d * sizeof *g, &b->conv_norm.g);
  if (!st) st = gpu_buffer_from(dev, beta, d * sizeof *beta, &b->conv_norm.b);
  free(bias), free(w), free(g), free(beta), free(mean), free(var);
  return st;
}

int conformer_load(gpu_device *dev, const gguf_file *f, const conformer_dims *dims, int i,
                   conformer_block *b) {
  memset(b, 0, sizeof *b);
  b->index = (uint32_t)i;
  char key[128];
  int st = 0;
  struct {
    const char *suffix;
    gpu_norm *n;
  } norms[] = {{"norm_ff1", &b->norm_ff1}, {"norm_attn", &b->norm_attn},
               {"norm_conv", &b->norm_conv}, {"norm_ff2", &b->norm_ff2},
               {"norm_out", &b->norm_out}};
  for (size_t n = 0; n < sizeof norms / sizeof *norms && !st; n++)
    st = w_norm(dev, f, name(key, sizeof key, i, norms[n].suffix), dims->d, LN_EPS, norms[n].n);
  if (!st) st = ffn(dev, f, dims, i, "ff1", &b->ff1_up, &b->ff1_down);
  if (!st) st = ffn(dev, f, dims, i, "ff2", &b->ff2_up, &b->ff2_down);
  if (!st) st = dims->rotary ? rotary_attention(dev, f, dims, i, b) : attention(dev, f, dims, i, b);
  if (!st) st = conv_module(dev, f, dims, i, b);
  if (st) conformer_free(b);
  return st;
}

void conformer_free(conformer_block *b) {
  gpu_norm *norms[] = {&b->norm_ff1, &b->norm_attn, &b->norm_conv, &b->norm_ff2, &b->norm_out,
                       &b->conv_norm};
  for (size_t i = 0; i < sizeof norms / sizeof *norms; i++) w_norm_free(norms[i]);
  gpu_linear *lin[] = {&b->ff1_up, &b->ff1_down, &b->ff2_up, &b->ff2_down, &b->qkv,
                       &b->pos,    &b->out,      &b->pw1,    &b->pw2,      &b->v};
  for (size_t i = 0; i < sizeof lin / sizeof *lin; i++) gpu_linear_free(lin[i]);
  gpu_buffer_free(b->dw.w);
  gpu_buffer_free(b->dw.b);
  memset(b, 0, sizeof *b);
}

/* Widest row of the `wide` buffer: FFN inner, q|k|v|q+v, pointwise1. */
static uint32_t wide_width(const conformer_dims *dims) {
  uint32_t a = pad64(dims->ff), q = pad64(3 * dims->d) + dims->d, c = pad64(2 * dims->d);
  return a > q ? (a > c ? a : c) : (q > c ? q : c);
}

int conformer_scratch_new(gpu_device *dev, const conformer_dims *dims, uint32_t t,
                          conformer_scratch *s) {
  return conformer_scratch_new_batch(dev, dims, t, 1, s);
}

int conformer_scratch_new_batch(gpu_device *dev, const conformer_dims *dims, uint32_t t,
                                uint32_t batch, conformer_scratch *s) {
  memset(s, 0, sizeof *s);
  if (!batch || (batch > 1 && dims->rotary))
    return err_set(STENO_ERR_INVALID, "conformer: a batch of %u clips%s", batch,
                   dims->rotary ? " with rotary attention" : "");
  s->t = t;
  s->batch = batch;
  s->stride = pad64(dims->d);
  size_t rows = (size_t)batch * t, prows = 2 * (size_t)t - 1, st4 = sizeof(float);
  int st = gpu_buffer_new(dev, rows * s->stride * st4, &s->x);
  if (!st) st = gpu_buffer_new(dev, rows * s->stride * st4, &s->h);
  if (!st) st = gpu_buffer_new(dev, rows * s->stride * st4, &s->o);
  if (!st) st = gpu_buffer_new(dev, rows * wide_width(dims) * st4, &s->wide);
  if (!st) st = gpu_buffer_new(dev, prows * s->stride * st4, &s->pe);
  if (!st) st = gpu_buffer_new(dev, prows * s->stride * st4, &s->p);
  if (!st)
    st = gpu_buffer_new(dev, batch * gpu_attention_scratch(t, dims->heads) * st4, &s->scores);
  if (!st && batch > 1) st = gpu_buffer_new(dev, batch * sizeof(uint32_t), &s->lens);
  if (st) conformer_scratch_free(s);
  return st;
}

int conformer_set_lens(conformer_scratch *s, const uint32_t *lens, uint32_t clips) {
  if (clips > s->batch)
    return err_set(STENO_ERR_INVALID, "conformer: %u clips in room for %u", clips, s->batch);
  for (uint32_t i = 0; i < clips; i++)
    if (!lens[i] || lens[i] > s->t)
      return err_set(STENO_ERR_INVALID, "conformer: clip %u of %u frames (1 to %u)", i, lens[i],
                     s->t);
  s->clips = clips;
  return clips > 1 ? gpu_upload(s->lens, 0, lens, clips * sizeof *lens) : 0;
}

void conformer_scratch_free(conformer_scratch *s) {
  gpu_buffer *b[] = {s->x, s->h, s->o, s->wide, s->pe, s->p, s->scores, s->lens};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  for (uint32_t i = 0; i < s->npl; i++) gpu_buffer_free(s->pl[i]);
  free(s->pl);
  memset(s, 0, sizeof *s);
}

/* RoPE table row p: head_dim/2 cosines then sines of p·inv_j, inv_j =
 * 1/base^(2j/head_dim), in f32 as GigaAM's RotaryPositionalEmbedding builds it. */
static int rope_table(const conformer_dims *dims, uint32_t t, conformer_scratch *s) {
  size_t hd = dims->d / dims->heads, half = hd / 2;
  float *tab = mem_alloc((size_t)t * hd, sizeof *tab);
  if (!tab) return STENO_ERR_NOMEM;
  for (size_t j = 0; j < half; j++) {
    float inv = 1.0f / powf(dims->rope_base, (float)(2 * j) / (float)hd);
    for (size_t p = 0; p < t; p++) {
      float a = (float)p * inv;
      tab[p * hd + j] = cosf(a);
      tab[p * hd + half + j] = sinf(a);
    }
  }
  int st = gpu_upload(s->pe, 0, tab, (size_t)t * hd * sizeof *tab);
  free(tab);
  return st;
}

int conformer_positions_kept(const conformer_dims *dims, uint32_t t, conformer_scratch *s) {
  if (dims->rotary) return conformer_positions(dims, t, s);
  if (!t || t > s->t)
    return err_set(STENO_ERR_INVALID, "conformer: positions of %u frames in room for %u", t, s->t);
  if (!s->kept) TRY(conformer_positions(dims, s->t, s));
  s->row0 = s->t - t;
  return 0;
}

int conformer_project_positions(gpu_rec *rec, const conformer_dims *dims,
                                const conformer_block *blocks, uint32_t layers,
                                conformer_scratch *s, uint32_t t) {
  if (dims->rotary || !layers) return 0;
  if (!t || t > s->t || s->row0 != s->t - t)
    return err_set(STENO_ERR_INVALID, "conformer: positions of %u frames without their table", t);
  if (s->kept >= layers) {
    s->projected = layers;
    return 0;
  }
  if (s->npl < layers) {
    gpu_buffer **pl = realloc(s->pl, layers * sizeof *pl);
    if (!pl) return STENO_ERR_NOMEM;
    s->pl = pl;
    size_t bytes = (2 * (size_t)s->t - 1) * s->stride * sizeof(float);
    for (; s->npl < layers; s->npl++) TRY(gpu_buffer_new(gpu_rec_device(rec), bytes, &s->pl[s->npl]));
  }
  gpu_rec_together(rec, true);
  for (uint32_t i = 0; i < layers; i++)
    gpu_gemm_whole(rec, s->pe, s->stride, &blocks[i].pos, s->pl[i], 2 * s->t - 1, GPU_EPI_BIAS, 0);
  gpu_rec_together(rec, false);
  s->projected = layers;
  return 0;
}

void conformer_keep_positions(conformer_scratch *s) { s->kept = s->projected; }

int conformer_positions(const conformer_dims *dims, uint32_t t, conformer_scratch *s) {
  s->projected = s->kept = s->row0 = 0;
  if (dims->rotary) return rope_table(dims, t, s);
  size_t rows = 2 * (size_t)t - 1, S = s->stride, d = dims->d;
  float *pe = mem_alloc(rows * S, sizeof *pe);
  if (!pe) return STENO_ERR_NOMEM;
  for (size_t j = 0; j < d / 2; j++) {
    /* inv_freq = 1 / 10000^(2j/d), in f32 as torch computes it. */
    float inv = 1.0f / powf(10000.0f, (float)(2 * j) / (float)d);
    for (size_t r = 0; r < rows; r++) {
      float a = (float)((long)t - 1 - (long)r) * inv;
      pe[r * S + 2 * j] = sinf(a);
      pe[r * S + 2 * j + 1] = cosf(a);
    }
  }
  int st = gpu_upload(s->pe, 0, pe, rows * S * sizeof *pe);
  free(pe);
  return st;
}

/* Clips in the next pass: 1 unless a batch's lengths were set. */
static uint32_t clips(const conformer_scratch *s) { return s->clips > 1 ? s->clips : 1; }

/* Relative-position self-attention (NeMo's) of h = LN(x) (made by the GEMM
 * before), added to x, and h = LN(x) for the conv module. */
static void record_rel_attention(gpu_rec *rec, const conformer_dims *dims, const conformer_block *b,
                                 conformer_scratch *s, uint32_t t) {
  uint32_t S = s->stride, d = dims->d, hd = d / dims->heads, n = clips(s), rows = n * t;
  gpu_gemm_strided(rec, s->h, S, &b->qkv, s->wide, rows, GPU_EPI_BIAS, 0);
  gpu_buffer *pos = s->p;
  uint32_t row0 = 0;
  if (b->index < s->projected) /* projected ≤ npl */
    pos = s->pl[b->index], row0 = s->row0;
  else if (s->row0) /* pe is the whole scratch's table: its rows for t are not at 0 */
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "conformer: block %u's positions not projected",
                              b->index));
  else
    gpu_gemm_strided(rec, s->pe, S, &b->pos, s->p, 2 * t - 1, GPU_EPI_BIAS, 0);
  uint32_t W = gpu_linear_width(&b->qkv);
  gpu_attn a = {
      .q = {s->wide, 0, W},
      .k = {s->wide, d, W},
      .v = {s->wide, 2 * d, W},
      .qv = {s->wide, b->qkv.n, W},
      .pos = {pos, row0 * S, S},
      .o = {s->o, 0, S},
      .scores = s->scores,
      .t = t,
      .heads = dims->heads,
      .head_dim = hd,
      .chunk = dims->chunk,
      .left_chunks = dims->left_chunks,
      .batch = n,
      .lens = n > 1 ? s->lens : NULL,
  };
  gpu_rel_attention(rec, &a);
  gpu_gemm_norm(rec, s->o, S, &b->out, s->x, rows, GPU_EPI_RESIDUAL, 1.0f, d, &b->norm_conv, s->h, S);
}

/* Rotary self-attention (GigaAM's) of y = LN(x), added to x: the LayerNorm
 * also writes y rotated into o, q|k come from that, v from y (into p); then
 * h = LN(x) for the conv module. */
static void record_rotary_attention(gpu_rec *rec, const conformer_dims *dims,
                                    const conformer_block *b, conformer_scratch *s, uint32_t t) {
  uint32_t S = s->stride, d = dims->d, hd = d / dims->heads;
  gpu_rope rope = {.table = s->pe, .dim = hd, .pos = 0};
  gpu_layer_norm(rec, s->x, 0, S, &b->norm_attn, s->h, 0, S, t, d, &rope, s->o);
  gpu_gemm_strided(rec, s->o, S, &b->qkv, s->wide, t, GPU_EPI_BIAS, 0);
  gpu_gemm_strided(rec, s->h, S, &b->v, s->p, t, GPU_EPI_BIAS, 0);
  uint32_t W = gpu_linear_width(&b->qkv), V = gpu_linear_width(&b->v);
  gpu_attn a = {
      .q = {s->wide, 0, W},
      .k = {s->wide, d, W},
      .v = {s->p, 0, V},
      .o = {s->o, 0, S},
      .scores = s->scores,
      .t = t,
      .heads = dims->heads,
      .head_dim = hd,
  };
  gpu_attention(rec, &a);
  gpu_gemm_norm(rec, s->o, S, &b->out, s->x, t, GPU_EPI_RESIDUAL, 1.0f, d, &b->norm_conv, s->h, S);
}

/* One block; h = LN_ff1(x) already where `normed` (the block before made
 * it), and with next, x ends as next's LN_ff1 of the stream. */
static void block(gpu_rec *rec, const conformer_dims *dims, const conformer_block *b,
                  const conformer_block *next, bool normed, conformer_scratch *s, uint32_t t) {
  uint32_t S = s->stride, d = dims->d, n = clips(s), rows = n * t;
  /* ½ FFN */
  if (!normed) gpu_layer_norm(rec, s->x, 0, S, &b->norm_ff1, s->h, 0, S, rows, d, NULL, NULL);
  gpu_gemm_strided(rec, s->h, S, &b->ff1_up, s->wide, rows, GPU_EPI_SILU, 0);
  /* self-attention (relative: its LayerNorm made by the reduce of the GEMM
   * before where that splits k; rotary: its own, with the rotated copy) */
  if (dims->rotary) {
    gpu_gemm_strided(rec, s->wide, gpu_linear_width(&b->ff1_up), &b->ff1_down, s->x, rows,
                     GPU_EPI_RESIDUAL, 0.5f);
    record_rotary_attention(rec, dims, b, s, t);
  } else {
    gpu_gemm_norm(rec, s->wide, gpu_linear_width(&b->ff1_up), &b->ff1_down, s->x, rows,
                  GPU_EPI_RESIDUAL, 0.5f, d, &b->norm_attn, s->h, S);
    record_rel_attention(rec, dims, b, s, t);
  }
  /* conv module (h = LN(x) from the attention's last GEMM) */
  gpu_gemm_strided(rec, s->h, S, &b->pw1, s->wide, rows, GPU_EPI_BIAS, 0);
  if (n > 1)
    gpu_conv_glu_batch(rec, s->wide, 0, gpu_linear_width(&b->pw1), &b->dw, &b->conv_norm,
                       b->conv_mode, s->o, 0, S, n, t, s->lens, d);
  else
    gpu_conv_glu(rec, s->wide, 0, gpu_linear_width(&b->pw1), &b->dw, &b->conv_norm, b->conv_mode,
                 s->o, 0, S, t, d);
  gpu_gemm_norm(rec, s->o, S, &b->pw2, s->x, rows, GPU_EPI_RESIDUAL, 1.0f, d, &b->norm_ff2, s->h, S);
  /* ½ FFN */
  gpu_gemm_strided(rec, s->h, S, &b->ff2_up, s->wide, rows, GPU_EPI_SILU, 0);
  /* the block's LayerNorm: into h, which becomes the stream (and the next
   * block's first LayerNorm of it into x, which becomes h) */
  if (next)
    gpu_gemm_norm2(rec, s->wide, gpu_linear_width(&b->ff2_up), &b->ff2_down, s->x, rows,
                   GPU_EPI_RESIDUAL, 0.5f, d, &b->norm_out, s->h, S, &next->norm_ff1);
  else
    gpu_gemm_norm(rec, s->wide, gpu_linear_width(&b->ff2_up), &b->ff2_down, s->x, rows,
                  GPU_EPI_RESIDUAL, 0.5f, d, &b->norm_out, s->h, S);
  gpu_buffer *x = s->x;
  s->x = s->h;
  s->h = x;
}

int conformer_forward(gpu_rec *rec, const conformer_dims *dims, const conformer_block *blocks,
                      uint32_t layers, conformer_scratch *s, uint32_t t) {
  uint32_t n = clips(s);
  if (n > 1 && (dims->rotary || t > s->t))
    return gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "conformer: %u clips of %u frames%s", n, t,
                                     dims->rotary ? " with rotary attention" : ""));
  for (uint32_t i = 0; i < layers; i++) {
    block(rec, dims, &blocks[i], i + 1 < layers ? &blocks[i + 1] : NULL, i > 0, s, t);
    if (i % 4 == 3) TRY(gpu_rec_flush(rec));
  }
  return 0;
}
