/* Moonshine: reading the hyperparameters, tokenizer and weights of a GGUF file
 * (spec §3.2, §3.3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "io/types.h"
#include "models/moonshine/moonshine.h"
#include "nn/weights.h"

#define LN_EPS 1e-5f

static int expect_str(const gguf_file *f, const char *key, const char *want) {
  const char *v;
  TRY(gguf_get_str(f, key, &v));
  if (strcmp(v, want))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %s is '%s' (steno reads '%s')", f->name, key, v, want);
  return 0;
}

/* A u32 array of 3 (INT32 or UINT32, as the converter may write either). */
static int triple(const gguf_file *f, const char *key, uint32_t out[3]) {
  const gguf_kv *kv = gguf_find(f, key);
  if (!kv) return err_set(STENO_ERR_FORMAT, "%s: key '%s' is missing", f->name, key);
  bool ints = kv->elem_type == GGUF_VAL_INT32 || kv->elem_type == GGUF_VAL_UINT32;
  if (kv->type != GGUF_VAL_ARRAY || !ints || kv->n != 3)
    return err_set(STENO_ERR_FORMAT, "%s: key '%s' is not an array of 3 integers", f->name, key);
  for (int i = 0; i < 3; i++) {
    if (kv->elem_type == GGUF_VAL_INT32 && kv->v.i32[i] < 0)
      return err_set(STENO_ERR_FORMAT, "%s: %s[%d] is negative", f->name, key, i);
    out[i] = kv->v.u32[i];
  }
  return 0;
}

static int token_id(const gguf_file *f, const char *key, uint32_t vocab, int *out) {
  uint32_t v;
  TRY(gguf_get_u32(f, key, &v));
  if (v >= vocab) return err_set(STENO_ERR_FORMAT, "%s: %s is %u of %u", f->name, key, v, vocab);
  *out = (int)v;
  return 0;
}

/* One stack's sizes under KEY.part.*; *hd from head_dim where hd is not NULL
 * (Streaming), else d / heads. */
static int stack(const gguf_file *f, const char *key, const char *part, uint32_t *layers,
                 uint32_t *d, uint32_t *heads, uint32_t *hd, uint32_t *ff, const char *act) {
  char k[96];
#define GET(name, dst) (snprintf(k, sizeof k, "%s%s." name, key, part), gguf_get_u32(f, k, dst))
  uint32_t kv_heads = 0;
  TRY(GET("n_layers", layers));
  TRY(GET("d_model", d));
  TRY(GET("n_heads", heads));
  TRY(GET("ffn_dim", ff));
  if (hd) TRY(GET("head_dim", hd));
#undef GET
  snprintf(k, sizeof k, "%s%s.n_kv_heads", key, part);
  TRY(gguf_opt_u32(f, k, &kv_heads));
  snprintf(k, sizeof k, "%s%s.activation", key, part);
  TRY(expect_str(f, k, act));
  if (kv_heads && kv_heads != *heads)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %s with %u of %u kv heads", f->name, part, kv_heads,
                   *heads);
  return 0;
}

/* The rotated dims as transformers takes them: int(head_dim · factor), even
 * (Moonshine rotates its encoder's heads too: they must match the decoder's). */
static int rotary(const gguf_file *f, const char *key, moonshine_config *c) {
  char k[96];
  float factor = c->streaming ? 0.8f : 0.9f;
  snprintf(k, sizeof k, "%spartial_rotary_factor", key);
  TRY(gguf_opt_f32(f, k, &factor));
  uint32_t hd = c->dec_hd, hde = c->streaming ? hd : c->enc_hd;
  /* The factor is stored as f32 (0.9 → 0.8999999762): a hair's allowance keeps 20 · 0.9 at 18. */
  double dims = floor((double)hd * factor + 1e-4);
  if (!(factor > 0 && factor <= 1) || hde != hd || (uint32_t)dims % 2 || dims < 2)
    return err_set(STENO_ERR_UNSUPPORTED,
                   "%s: partial_rotary_factor %g over heads of %u/%u dims (steno needs equal "
                   "heads and an even count of rotated dims)",
                   f->name, factor, hde, hd);
  c->rot = (uint32_t)dims;
  return 0;
}

#define MS "stt.moonshine."
#define MSS "stt.moonshine_streaming."

/* A key under prefix `key`. */
static const char *at(char buf[96], const char *key, const char *name) {
  snprintf(buf, 96, "%s%s", key, name);
  return buf;
}

/* What both families share: the decoder, positions, RoPE, tokens, frontend. */
static int common(const gguf_file *f, const char *key, moonshine_config *c) {
  char k[96];
  uint32_t rate;
  bool tie = !c->streaming, abias = false;
  TRY(stack(f, key, "decoder", &c->dec_layers, &c->d, &c->dec_heads,
            c->streaming ? &c->dec_hd : NULL, &c->dec_ff, "silu"));
  if (!c->streaming && c->dec_heads) c->dec_hd = c->d / c->dec_heads;
  TRY(gguf_get_u32(f, at(k, key, "decoder.vocab_size"), &c->vocab));
  TRY(gguf_get_u32(f, at(k, key, "decoder.max_position_embeddings"), &c->max_pos));
  TRY(gguf_opt_bool(f, at(k, key, "decoder.tie_word_embeddings"), &tie));
  TRY(gguf_opt_bool(f, at(k, key, "attention_bias"), &abias));
  c->theta = 10000.0f;
  TRY(gguf_opt_f32(f, at(k, key, "rope_theta"), &c->theta));
  TRY(expect_str(f, "stt.frontend.type", "raw"));
  TRY(gguf_get_u32(f, "stt.frontend.sample_rate", &rate));
  if (tie == c->streaming || abias || rate != 16000)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: a %s head, attention biases or %u Hz", f->name,
                   tie ? "tied" : "separate", rate);
  bool ok = c->d >= 2 && c->d <= 8192 && c->dec_layers >= 1 && c->dec_layers <= 256 &&
            c->dec_heads >= 1 && c->dec_heads <= 1024 && c->dec_hd >= 2 && c->dec_hd % 2 == 0 &&
            c->dec_hd <= 256 && c->dec_heads * c->dec_hd == c->d && c->dec_ff >= 1 &&
            c->dec_ff <= 65536 && c->max_pos >= 2 && c->max_pos <= 65536 && c->vocab >= 3 &&
            c->vocab <= (1u << 20) && c->theta > 1.0f;
  if (!ok)
    return err_set(STENO_ERR_FORMAT,
                   "%s: decoder shapes not supported: d %u, %u layers, %u heads of %u, ffn %u, "
                   "%u positions, vocabulary %u",
                   f->name, c->d, c->dec_layers, c->dec_heads, c->dec_hd, c->dec_ff, c->max_pos,
                   c->vocab);
  TRY(rotary(f, key, c));
  TRY(token_id(f, at(k, key, "decoder_start_token_id"), c->vocab, &c->bos));
  return token_id(f, at(k, key, "eos_token_id"), c->vocab, &c->eos);
}

static int shapes(const gguf_file *f, moonshine_config *c) {
  uint32_t ch[3], groups = 1;
  TRY(stack(f, MS, "encoder", &c->enc_layers, &c->enc_d, &c->enc_heads, NULL, &c->enc_ff, "gelu"));
  if (c->enc_heads) c->enc_hd = c->enc_d / c->enc_heads;
  TRY(triple(f, MS "conv_stem.channels", ch));
  TRY(triple(f, MS "conv_stem.kernel_sizes", c->kernel));
  TRY(triple(f, MS "conv_stem.strides", c->stride));
  TRY(gguf_opt_u32(f, MS "conv_stem.groupnorm_num_groups", &groups));
  c->gn_eps = 1e-5f;
  TRY(gguf_opt_f32(f, MS "conv_stem.groupnorm_eps", &c->gn_eps));
  if (groups != 1) return err_set(STENO_ERR_UNSUPPORTED, "%s: %u GroupNorm groups", f->name, groups);
  /* The stem's frame arithmetic (moonshine_frames) is Moonshine's own. */
  static const uint32_t K[3] = {127, 7, 3}, S[3] = {64, 3, 2};
  for (int i = 0; i < 3; i++)
    if (c->kernel[i] != K[i] || c->stride[i] != S[i])
      return err_set(STENO_ERR_UNSUPPORTED, "%s: conv stem kernel %u stride %u at %d (steno reads "
                     "127/64, 7/3, 3/2)", f->name, c->kernel[i], c->stride[i], i);
  bool ok = ch[0] == c->enc_d && ch[1] == 2 * c->enc_d && ch[2] == c->enc_d &&
            c->enc_layers >= 1 && c->enc_layers <= 256 && c->enc_heads >= 1 &&
            c->enc_d % c->enc_heads == 0 && c->enc_ff >= 1 && c->enc_ff <= 65536 &&
            c->gn_eps >= 0;
  if (!ok)
    return err_set(STENO_ERR_FORMAT,
                   "%s: encoder shapes not supported: d %u, stem channels %u %u %u, %u layers, "
                   "%u heads, ffn %u",
                   f->name, c->enc_d, ch[0], ch[1], ch[2], c->enc_layers, c->enc_heads, c->enc_ff);
  TRY(common(f, MS, c));
  if (c->enc_d != c->d)
    return err_set(STENO_ERR_FORMAT, "%s: encoder d_model %u, decoder %u", f->name, c->enc_d, c->d);
  return 0;
}

/* Streaming's per-layer sliding windows (INT32 or UINT32 pairs). */
static int windows(const gguf_file *f, moonshine_config *c) {
  const gguf_kv *kv = gguf_find(f, MSS "encoder.sliding_windows");
  if (!kv) return err_set(STENO_ERR_FORMAT, "%s: key '" MSS "encoder.sliding_windows' is missing", f->name);
  bool ints = kv->elem_type == GGUF_VAL_INT32 || kv->elem_type == GGUF_VAL_UINT32;
  if (kv->type != GGUF_VAL_ARRAY || !ints || kv->n != 2 * (size_t)c->enc_layers)
    return err_set(STENO_ERR_FORMAT, "%s: " MSS "encoder.sliding_windows is not %u integer pairs",
                   f->name, c->enc_layers);
  if (!(c->window = mem_alloc(kv->n, sizeof *c->window))) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < kv->n; i++) {
    int64_t v = kv->elem_type == GGUF_VAL_INT32 ? (int64_t)kv->v.i32[i] : (int64_t)kv->v.u32[i];
    if (v < (i % 2 ? 0 : 1) || v > 1024 || (i % 2 && v + c->window[i - 1] > 1025))
      return err_set(STENO_ERR_UNSUPPORTED, "%s: sliding window %lld at %zu (left 1..1024, left + "
                     "right ≤ 1025)", f->name, (long long)v, i);
    c->window[i] = (uint32_t)v;
  }
  return 0;
}

static int shapes_streaming(const gguf_file *f, moonshine_config *c) {
  float frame_ms;
  uint32_t enc_hidden = 0;
  TRY(stack(f, MSS, "encoder", &c->enc_layers, &c->enc_d, &c->enc_heads, &c->enc_hd, &c->enc_ff,
            "gelu"));
  TRY(gguf_get_f32(f, MSS "encoder.frame_ms", &frame_ms));
  TRY(gguf_get_u32(f, MSS "encoder.frame_len", &c->frame_len));
  c->cmvn_eps = 1e-6f;
  TRY(gguf_opt_f32(f, MSS "cmvn_eps", &c->cmvn_eps));
  TRY(gguf_opt_u32(f, MSS "encoder_hidden_size", &enc_hidden));
  TRY(gguf_opt_bool(f, MSS "adapter_has_proj", &c->has_proj));
  bool ok = c->enc_d >= 2 && c->enc_d <= 8192 && c->enc_layers >= 1 && c->enc_layers <= 256 &&
            c->enc_heads >= 1 && c->enc_heads <= 1024 && c->enc_hd >= 1 && c->enc_hd <= 1024 &&
            c->enc_heads * c->enc_hd <= c->enc_d && c->enc_ff >= 1 && c->enc_ff <= 65536 &&
            c->frame_len >= 2 && c->frame_len <= 4096 && c->cmvn_eps >= 0 &&
            (!enc_hidden || enc_hidden == c->enc_d);
  if (!ok)
    return err_set(STENO_ERR_FORMAT,
                   "%s: encoder shapes not supported: d %u (encoder_hidden_size %u), %u layers, "
                   "%u heads of %u, ffn %u, frames of %u samples",
                   f->name, c->enc_d, enc_hidden, c->enc_layers, c->enc_heads, c->enc_hd,
                   c->enc_ff, c->frame_len);
  TRY(windows(f, c));
  TRY(common(f, MSS, c));
  if (c->has_proj != (c->enc_d != c->d))
    return err_set(STENO_ERR_FORMAT, "%s: encoder width %u, decoder %u, adapter_has_proj %d",
                   f->name, c->enc_d, c->d, c->has_proj);
  return 0;
}

static int vocabulary(const gguf_file *f, moonshine *m) {
  const gguf_kv *tokens, *types = NULL;
  const char *model;
  TRY(gguf_get_str(f, "tokenizer.ggml.model", &model));
  if (strcmp(model, "bpe") && strcmp(model, "llama"))
    return err_set(STENO_ERR_FORMAT, "%s: tokenizer '%s' (steno reads SentencePiece pieces: bpe)",
                   f->name, model);
  TRY(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VAL_STRING, &tokens));
  TRY(gguf_opt_arr(f, "tokenizer.ggml.token_type", GGUF_VAL_INT32, &types));
  if (tokens->n != m->c.vocab || (types && types->n != tokens->n))
    return err_set(STENO_ERR_FORMAT, "%s: %zu tokens (%zu types) for a vocabulary of %u", f->name,
                   tokens->n, types ? types->n : tokens->n, m->c.vocab);
  TRY(vocab_init(&m->vocab, (int)tokens->n));
  for (size_t i = 0; i < tokens->n; i++) {
    int type = types ? types->v.i32[i] : TOK_NORMAL;
    if ((int)i == m->c.eos || (int)i == m->c.bos) type = TOK_CONTROL; /* never in text */
    TRY(vocab_set(&m->vocab, (int)i, tokens->v.str[i].s, tokens->v.str[i].len, type));
  }
  return 0;
}

/* ---- weights ---- */

/* A LayerNorm (or GroupNorm affine) of n from NAME.weight, and NAME.bias when
 * `bias` (else zeros: Moonshine's norms have none; Streaming's encoder gains
 * are stored with their +1 folded in). */
static int norm(moonshine *m, const gguf_file *f, const char *name, uint32_t n, bool bias,
                float eps, gpu_norm *out) {
  if (bias) return w_norm(m->dev, f, name, n, eps, out);
  char key[160];
  memset(out, 0, sizeof *out);
  out->eps = eps;
  snprintf(key, sizeof key, "%s.weight", name);
  TRY(w_gpu(m->dev, f, key, W_F32, n, &out->g));
  float *zeros = mem_alloc(n, sizeof *zeros);
  if (!zeros) return STENO_ERR_NOMEM;
  int st = gpu_buffer_from(m->dev, zeros, n * sizeof *zeros, &out->b);
  free(zeros);
  return st;
}

static int linear(moonshine *m, const gguf_file *f, const char *name, int64_t rows, int64_t k,
                  bool bias, gpu_linear *out) {
  char w[160], b[160];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  float *bv = NULL;
  if (bias) TRY(w_host(f, b, W_F32, (size_t)rows, true, &bv));
  const char *names[1] = {w};
  int st = w_linear(m->dev, f, names, 1, &rows, k, W_LINEAR_TYPES, bv, bv ? (size_t)rows : 0, out);
  free(bv);
  return st;
}

/* Source row of output row r of a reordered q or k: within each head, the
 * even rotated dims, then the odd ones, then the rest (see moonshine.h). */
static uint32_t rope_row(uint32_t r, uint32_t hd, uint32_t rot) {
  uint32_t h = r / hd, j = r % hd, half = rot / 2;
  return h * hd + (j < half ? 2 * j : j < rot ? 2 * (j - half) + 1 : j);
}

static gpu_wtype wtype(uint32_t t) {
  return t == GGUF_TYPE_F16 ? GPU_F16 : t == GGUF_TYPE_BF16 ? GPU_BF16 : t == GGUF_TYPE_Q8_0 ? GPU_Q8_0 : GPU_F32;
}

/* Rows a of weights [k, a] as stored (a row of a type the kernels read is its
 * bytes), else as f32; q's and k's rows reordered for RoPE when rot > 0. */
static int qkv_rows(const gguf_tensor *const t[3], uint32_t a, uint32_t k, uint32_t hd,
                    uint32_t rot, bool raw, uint8_t *w, size_t row) {
  for (int i = 0; i < 3; i++) {
    const uint8_t *src = t[i]->data;
    float *tmp = NULL;
    if (!raw) {
      if (!(tmp = mem_alloc(t[i]->nelem, sizeof *tmp))) return STENO_ERR_NOMEM;
      int st = gguf_tensor_to_f32(t[i], tmp);
      if (st) return free(tmp), st;
      src = (const uint8_t *)tmp;
    }
    for (uint32_t r = 0; r < a; r++) {
      uint32_t from = i < 2 && rot ? rope_row(r, hd, rot) : r;
      memcpy(w + ((size_t)i * a + r) * row, src + (size_t)from * row, row);
    }
    free(tmp);
    (void)k;
  }
  return 0;
}

/* q|k|v from PREFIX.{q,k,v}.weight ([k, heads·hd], no biases). */
static int qkv(moonshine *m, const gguf_file *f, const char *prefix, uint32_t k, uint32_t heads,
               uint32_t hd, uint32_t rot, gpu_linear *out) {
  uint32_t a = heads * hd;
  const gguf_tensor *t[3];
  static const char *const part[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    char name[160];
    const int64_t ne[2] = {k, a};
    snprintf(name, sizeof name, "%s.%s.weight", prefix, part[i]);
    TRY(gguf_tensor_get(f, name, W_LINEAR_TYPES, 2, ne, &t[i]));
  }
  uint32_t ty = t[0]->type;
  bool raw = t[1]->type == ty && t[2]->type == ty &&
             (ty == GGUF_TYPE_F32 || ty == GGUF_TYPE_F16 || ty == GGUF_TYPE_BF16 || ty == GGUF_TYPE_Q8_0);
  size_t row = raw ? t[0]->nbytes / a : k * sizeof(float);
  uint8_t *w = mem_alloc(3 * (size_t)a, row);
  if (!w) return STENO_ERR_NOMEM;
  int st = qkv_rows(t, a, k, hd, rot, raw, w, row);
  gpu_weight parts[3];
  for (int i = 0; i < 3; i++) parts[i] = (gpu_weight){w + (size_t)i * a * row, a};
  if (!st) st = gpu_linear_new(m->dev, raw ? wtype(ty) : GPU_F32, k, parts, 3, NULL, 0, out);
  free(w);
  return st ? err_wrap(st, "%s: '%s.q': ", f->name, prefix) : 0;
}

/* k|v of cross-attention (no RoPE: as stored). */
static int cross_kv(moonshine *m, const gguf_file *f, const char *prefix, gpu_linear *out) {
  char k[160], v[160];
  snprintf(k, sizeof k, "%s.k.weight", prefix);
  snprintf(v, sizeof v, "%s.v.weight", prefix);
  const char *names[2] = {k, v};
  int64_t rows[2] = {m->c.d, m->c.d};
  return w_linear(m->dev, f, names, 2, rows, m->c.d, W_LINEAR_TYPES, NULL, 0, out);
}

/* A conv [kernel, in, out] (F32 or F16) as a linear layer over im2col's columns. */
static int conv(moonshine *m, const gguf_file *f, const char *name, uint32_t kernel, uint32_t in,
                uint32_t outc, bool bias, gpu_linear *out) {
  char w[96], b[96];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  const int64_t ne[3] = {kernel, in, outc};
  const gguf_tensor *t;
  TRY(gguf_tensor_get(f, w, W_CONV_TYPES, 3, ne, &t));
  float *bv = NULL;
  if (bias) TRY(w_host(f, b, W_F32, outc, true, &bv));
  gpu_weight part = {t->data, outc};
  int st = gpu_linear_new(m->dev, t->type == GGUF_TYPE_F16 ? GPU_F16 : GPU_F32, kernel * in, &part,
                          1, bv, bv ? outc : 0, out);
  free(bv);
  return st ? err_wrap(st, "%s: '%s': ", f->name, w) : 0;
}

static int stem(moonshine *m, const gguf_file *f) {
  const moonshine_config *c = &m->c;
  uint32_t d = c->enc_d;
  TRY(conv(m, f, "enc.conv.0", 127, 1, d, false, &m->conv0));
  TRY(norm(m, f, "enc.conv.norm", d, true, c->gn_eps, &m->stem_norm));
  TRY(conv(m, f, "enc.conv.1", 7, d, 2 * d, true, &m->conv1));
  return conv(m, f, "enc.conv.2", 3, 2 * d, d, true, &m->conv2);
}

/* Streaming's embedder: log_k, the frame linear, two causal convs. */
static int embedder(moonshine *m, const gguf_file *f) {
  moonshine_config *c = &m->c;
  uint32_t d = c->enc_d;
  float *log_k;
  TRY(w_host(f, "enc.embedder.comp.log_k", W_F32, 1, true, &log_k));
  c->k = expf(log_k[0]);
  free(log_k);
  if (!isfinite(c->k) || c->k <= 0)
    return err_set(STENO_ERR_FORMAT, "%s: enc.embedder.comp.log_k gives k = %g", f->name, c->k);
  const char *names[1] = {"enc.embedder.linear.weight"};
  int64_t rows = d;
  TRY(w_linear(m->dev, f, names, 1, &rows, c->frame_len, W_LINEAR_TYPES | W_CONV_TYPES, NULL, 0,
               &m->conv0));
  TRY(conv(m, f, "enc.embedder.conv1", 5, d, 2 * d, true, &m->conv1));
  return conv(m, f, "enc.embedder.conv2", 5, 2 * d, d, true, &m->conv2);
}

static int encoder(moonshine *m, const gguf_file *f) {
  const moonshine_config *c = &m->c;
  char p[96], key[128];
  uint32_t d = c->enc_d, a = c->enc_heads * c->enc_hd;
  TRY(c->streaming ? embedder(m, f) : stem(m, f));
  if (!(m->enc = mem_alloc(c->enc_layers, sizeof *m->enc))) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < c->enc_layers; i++) {
    tf_enc_block *b = &m->enc[i];
    snprintf(p, sizeof p, "enc.blocks.%u", i);
    snprintf(key, sizeof key, "%s.norm_attn", p);
    TRY(norm(m, f, key, d, false, LN_EPS, &b->ln_attn));
    snprintf(key, sizeof key, "%s.norm_ffn", p);
    TRY(norm(m, f, key, d, false, LN_EPS, &b->ln_ffn));
    snprintf(key, sizeof key, "%s.attn", p);
    TRY(qkv(m, f, key, d, c->enc_heads, c->enc_hd, c->streaming ? 0 : c->rot, &b->qkv));
    snprintf(key, sizeof key, "%s.attn.out", p);
    TRY(linear(m, f, key, d, a, false, &b->out));
    snprintf(key, sizeof key, "%s.ffn.fc1", p);
    TRY(linear(m, f, key, c->enc_ff, d, true, &b->fc1));
    snprintf(key, sizeof key, "%s.ffn.fc2", p);
    TRY(linear(m, f, key, d, c->enc_ff, true, &b->fc2));
  }
  return norm(m, f, "enc.final_norm", d, false, LN_EPS, &m->enc_ln);
}

/* Streaming's adapter: positions [max_pos][enc_d] and the projection. */
static int adapter(moonshine *m, const gguf_file *f) {
  const moonshine_config *c = &m->c;
  TRY(w_gpu(m->dev, f, "adapter.pos_emb.weight", W_LINEAR_TYPES, (size_t)c->max_pos * c->enc_d,
            &m->pos));
  if (!c->has_proj) return 0;
  const char *names[1] = {"adapter.proj.weight"};
  int64_t rows = c->d;
  return w_linear(m->dev, f, names, 1, &rows, c->enc_d, W_LINEAR_TYPES, NULL, 0, &m->proj);
}

static int decoder_block(moonshine *m, const gguf_file *f, uint32_t i, tf_dec_block *b) {
  const moonshine_config *c = &m->c;
  char p[96], key[128];
  snprintf(p, sizeof p, "dec.blocks.%u", i);
  struct {
    const char *name;
    gpu_norm *n;
  } norms[] = {{"norm_self", &b->ln_self}, {"norm_cross", &b->ln_cross}, {"norm_ffn", &b->ln_ffn}};
  for (int k = 0; k < 3; k++) {
    snprintf(key, sizeof key, "%s.%s", p, norms[k].name);
    TRY(norm(m, f, key, c->d, false, LN_EPS, norms[k].n));
  }
  snprintf(key, sizeof key, "%s.self_attn", p);
  TRY(qkv(m, f, key, c->d, c->dec_heads, c->dec_hd, c->rot, &b->self_qkv));
  snprintf(key, sizeof key, "%s.self_attn.out", p);
  TRY(linear(m, f, key, c->d, c->d, false, &b->self_out));
  snprintf(key, sizeof key, "%s.cross_attn.q", p);
  TRY(linear(m, f, key, c->d, c->d, false, &b->cross_q));
  snprintf(key, sizeof key, "%s.cross_attn", p);
  TRY(cross_kv(m, f, key, &b->cross_kv));
  snprintf(key, sizeof key, "%s.cross_attn.out", p);
  TRY(linear(m, f, key, c->d, c->d, false, &b->cross_out));
  snprintf(key, sizeof key, "%s.ffn.fc1", p);
  TRY(linear(m, f, key, 2 * (int64_t)c->dec_ff, c->d, true, &b->fc1));
  snprintf(key, sizeof key, "%s.ffn.fc2", p);
  return linear(m, f, key, c->d, c->dec_ff, true, &b->fc2);
}

static int decoder(moonshine *m, const gguf_file *f) {
  const moonshine_config *c = &m->c;
  int64_t vocab = c->vocab;
  const char *names[1] = {"dec.token_embd.weight"}, *head[1] = {"dec.lm_head.weight"};
  TRY(w_linear(m->dev, f, names, 1, &vocab, c->d, W_LINEAR_TYPES, NULL, 0, &m->embed));
  if (c->streaming) TRY(w_linear(m->dev, f, head, 1, &vocab, c->d, W_LINEAR_TYPES, NULL, 0, &m->head));
  if (!(m->dec = mem_alloc(c->dec_layers, sizeof *m->dec))) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < c->dec_layers; i++) TRY(decoder_block(m, f, i, &m->dec[i]));
  return norm(m, f, "dec.final_norm", c->d, false, LN_EPS, &m->dec_ln);
}

static void dims(moonshine *m) {
  const moonshine_config *c = &m->c;
  m->enc_dims = (tf_dims){.d = c->enc_d, .heads = c->enc_heads, .head_dim = c->enc_hd,
                          .ff = c->enc_ff, .mlp = TF_GELU, .rot = c->streaming ? 0 : c->rot};
  m->dec_dims = (tf_dims){.d = c->d, .heads = c->dec_heads, .head_dim = c->dec_hd,
                          .ff = c->dec_ff, .mlp = TF_SWIGLU, .rot = c->rot};
}

int moonshine_load(gpu_device *dev, const gguf_file *f, moonshine **out) {
  *out = NULL;
  const char *arch;
  TRY(gguf_get_str(f, "general.architecture", &arch));
  moonshine *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  m->dev = dev;
  m->c.streaming = !strcmp(arch, "moonshine_streaming");
  int st = m->c.streaming ? shapes_streaming(f, &m->c) : shapes(f, &m->c);
  if (!st) dims(m), st = vocabulary(f, m);
  if (!st) st = encoder(m, f);
  if (!st && m->c.streaming) st = adapter(m, f);
  if (!st) st = decoder(m, f);
  if (st) {
    moonshine_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void moonshine_free(moonshine *m) {
  if (!m) return;
  if (m->model) {
    moonshine_session_free(m);
    return;
  }
  for (uint32_t i = 0; m->enc && i < m->c.enc_layers; i++) tf_enc_block_free(&m->enc[i]);
  for (uint32_t i = 0; m->dec && i < m->c.dec_layers; i++) tf_dec_block_free(&m->dec[i]);
  free(m->enc);
  free(m->dec);
  gpu_linear_free(&m->conv0), gpu_linear_free(&m->conv1), gpu_linear_free(&m->conv2);
  gpu_linear_free(&m->embed), gpu_linear_free(&m->proj), gpu_linear_free(&m->head);
  gpu_buffer_free(m->pos);
  w_norm_free(&m->stem_norm), w_norm_free(&m->enc_ln), w_norm_free(&m->dec_ln);
  vocab_free(&m->vocab);
  free(m->c.window);
  free(m);
}
