/* Nemotron-H: the text config and weights of a GGUF file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/nemotron_h/nemotron_h.h"
#include "nn/weights.h"

typedef struct {
  const gguf_file *f;
  const char *keys;
} cfg;

static int u32(const cfg *c, const char *name, uint32_t *out) {
  char key[256];
  snprintf(key, sizeof key, "%s%s", c->keys, name);
  return gguf_get_u32(c->f, key, out);
}

/* A key that must hold `want` (absent: the reference's default, which is `want`). */
static int expect(const cfg *c, const char *name, const char *want, bool flag) {
  char key[256];
  snprintf(key, sizeof key, "%s%s", c->keys, name);
  const char *s = want;
  bool b = false;
  TRY(want ? gguf_opt_str(c->f, key, &s) : gguf_opt_bool(c->f, key, &b));
  if ((want && strcmp(s, want)) || (!want && b != flag))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %s is %s (steno runs %s)", c->f->name, key,
                   want ? s : b ? "true" : "false", want ? want : flag ? "true" : "false");
  return 0;
}

static int kinds(const cfg *c, nemotron_h *m) {
  static const char *const names[] = {"linear_attention", "full_attention", "mlp", "moe"};
  char key[256];
  const gguf_kv *kv;
  snprintf(key, sizeof key, "%slayers_block_type", c->keys);
  TRY(gguf_get_arr(c->f, key, GGUF_VAL_STRING, &kv));
  if (kv->n < 1 || kv->n > 1024)
    return err_set(STENO_ERR_FORMAT, "%s: %s has %zu layers", c->f->name, key, kv->n);
  m->layers = (uint32_t)kv->n;
  m->kind = mem_alloc(kv->n, sizeof *m->kind);
  if (!m->kind) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < kv->n; i++) {
    int k = -1;
    for (int j = 0; j < 4; j++)
      if (!strcmp(kv->v.str[i].s, names[j])) k = j;
    if (k < 0)
      return err_set(STENO_ERR_UNSUPPORTED, "%s: layer %zu is '%s' (steno runs linear_attention, "
                     "full_attention, mlp, moe)", c->f->name, i, kv->v.str[i].s);
    m->kind[i] = (nh_kind)k;
  }
  return 0;
}

/* A router's settings and the MoE sizes (only read where a layer is moe). */
static int moe_keys(const cfg *c, hybrid_dims *d) {
  char key[256];
  bool norm = true;
  float scale = 1;
  TRY(u32(c, "n_routed_experts", &d->router.experts));
  TRY(u32(c, "num_experts_per_tok", &d->router.k));
  TRY(u32(c, "moe_intermediate_size", &d->moe_ff));
  TRY(u32(c, "moe_shared_expert_intermediate_size", &d->shared_ff));
  d->router.n_group = d->router.topk_group = 1;
  snprintf(key, sizeof key, "%sn_group", c->keys);
  TRY(gguf_opt_u32(c->f, key, &d->router.n_group));
  snprintf(key, sizeof key, "%stopk_group", c->keys);
  TRY(gguf_opt_u32(c->f, key, &d->router.topk_group));
  snprintf(key, sizeof key, "%snorm_topk_prob", c->keys);
  TRY(gguf_opt_bool(c->f, key, &norm));
  snprintf(key, sizeof key, "%srouted_scaling_factor", c->keys);
  TRY(gguf_opt_f32(c->f, key, &scale));
  snprintf(key, sizeof key, "%smoe_latent_size", c->keys);
  if (gguf_find(c->f, key))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %s is set (latent expert projections)", c->f->name, key);
  d->router.norm = norm;
  d->router.scale = scale;
  gpu_router *r = &d->router;
  bool ok = r->experts >= 2 && r->experts <= 1024 && r->n_group >= 1 && r->n_group <= 64 &&
            r->experts % r->n_group == 0 && r->experts / r->n_group >= 2 && r->topk_group >= 1 &&
            r->topk_group <= r->n_group && r->k >= 1 && r->k <= 32 &&
            r->k <= r->experts / r->n_group * r->topk_group && isfinite(scale) &&
            d->moe_ff >= 1 && d->moe_ff <= 65536 && d->shared_ff >= 1 && d->shared_ff <= 65536;
  if (!ok)
    return err_set(STENO_ERR_FORMAT, "%s: experts not supported: %u, top %u, groups %u keep %u, "
                   "sizes %u / %u", c->f->name, r->experts, r->k, r->n_group, r->topk_group,
                   d->moe_ff, d->shared_ff);
  return 0;
}

static bool has(const nemotron_h *m, nh_kind k) {
  for (uint32_t i = 0; i < m->layers; i++)
    if (m->kind[i] == k) return true;
  return false;
}

static int mamba_keys(const cfg *c, hybrid_dims *d) {
  char key[256];
  TRY(u32(c, "mamba_num_heads", &d->m_heads));
  TRY(u32(c, "mamba_head_dim", &d->m_dim));
  TRY(u32(c, "ssm_state_size", &d->m_state));
  TRY(u32(c, "n_groups", &d->m_groups));
  TRY(u32(c, "conv_kernel", &d->m_kernel));
  TRY(expect(c, "mamba_hidden_act", "silu", false));
  snprintf(key, sizeof key, "%stime_step_min", c->keys);
  TRY(gguf_get_f32(c->f, key, &d->dt_min));
  bool ok = d->m_heads >= 1 && d->m_heads <= 4096 && d->m_dim >= 1 && d->m_dim <= 1024 &&
            d->m_state >= 1 && d->m_state <= 256 && d->m_groups >= 1 &&
            d->m_heads % d->m_groups == 0 && d->m_kernel >= 2 && d->m_kernel <= 8 &&
            (hybrid_inner(d) / d->m_groups) >= 1 && d->dt_min >= 0 && isfinite(d->dt_min);
  if (!ok)
    return err_set(STENO_ERR_FORMAT, "%s: Mamba-2 shapes not supported: %u heads of %u, %u states "
                   "in %u groups, kernel %u, time_step_min %g", c->f->name, d->m_heads, d->m_dim,
                   d->m_state, d->m_groups, d->m_kernel, d->dt_min);
  return 0;
}

static int attention_keys(const cfg *c, hybrid_dims *d) {
  TRY(u32(c, "num_attention_heads", &d->heads));
  TRY(u32(c, "num_key_value_heads", &d->kv_heads));
  TRY(u32(c, "head_dim", &d->head_dim));
  if (d->heads < 1 || d->heads > 1024 || d->kv_heads < 1 || d->heads % d->kv_heads ||
      d->head_dim < 1 || d->head_dim > 256)
    return err_set(STENO_ERR_FORMAT, "%s: attention shapes not supported: %u heads over %u of %u",
                   c->f->name, d->heads, d->kv_heads, d->head_dim);
  return 0;
}

static int shapes(const cfg *c, nemotron_h *m) {
  hybrid_dims *d = &m->d;
  char key[256];
  TRY(u32(c, "vocab_size", &m->vocab));
  TRY(u32(c, "hidden_size", &d->d));
  TRY(kinds(c, m));
  d->eps = 1e-5f;
  snprintf(key, sizeof key, "%slayer_norm_epsilon", c->keys);
  TRY(gguf_opt_f32(c->f, key, &d->eps));
  snprintf(key, sizeof key, "%stie_word_embeddings", c->keys);
  TRY(gguf_opt_bool(c->f, key, &m->tied));
  m->max_pos = 4096;
  snprintf(key, sizeof key, "%smax_position_embeddings", c->keys);
  TRY(gguf_opt_u32(c->f, key, &m->max_pos));
  if (m->vocab < 2 || m->vocab > (1u << 22) || d->d < 1 || d->d > 65536 || !(d->eps >= 0) ||
      !isfinite(d->eps) || m->max_pos < 1)
    return err_set(STENO_ERR_FORMAT, "%s: shapes not supported: vocabulary %u, hidden %u, eps %g",
                   c->f->name, m->vocab, d->d, d->eps);
  d->stride = (d->d + 63) / 64 * 64;
  if (has(m, NH_MAMBA)) TRY(mamba_keys(c, d));
  if (has(m, NH_ATTENTION)) TRY(attention_keys(c, d));
  if (has(m, NH_MLP)) TRY(u32(c, "intermediate_size", &d->ff));
  if (has(m, NH_MLP) && (d->ff < 1 || d->ff > 262144))
    return err_set(STENO_ERR_FORMAT, "%s: intermediate_size %u", c->f->name, d->ff);
  if (has(m, NH_MOE)) TRY(moe_keys(c, d));
  if (has(m, NH_MLP) || has(m, NH_MOE)) TRY(expect(c, "mlp_hidden_act", "relu2", false));
  return 0;
}

/* eos_token_id: a number or a list (the first); absent: none. */
static int eos(const cfg *c, nemotron_h *m) {
  char key[256];
  snprintf(key, sizeof key, "%seos_token_id", c->keys);
  const gguf_kv *kv = gguf_find(c->f, key);
  m->eos = -1;
  if (!kv) return 0;
  if (kv->elem_type != GGUF_VAL_UINT32 || kv->n < 1 || kv->v.u32[0] >= m->vocab)
    return err_set(STENO_ERR_FORMAT, "%s: %s is not a token id (UINT32 below %u)", c->f->name, key,
                   m->vocab);
  m->eos = (int)kv->v.u32[0];
  return 0;
}

static int layer(gpu_device *dev, const gguf_file *f, const char *tp, nemotron_h *m, uint32_t i) {
  char prefix[256], name[300];
  snprintf(prefix, sizeof prefix, "%slayers.%u.mixer.", tp, i);
  snprintf(name, sizeof name, "%slayers.%u.norm.weight", tp, i);
  TRY(w_gpu(dev, f, name, W_F32, m->d.d, &m->norm[i]));
  switch (m->kind[i]) {
    case NH_MAMBA: return mamba2_load(dev, f, prefix, &m->d, &m->mamba[i]);
    case NH_ATTENTION: return gqa_load(dev, f, prefix, &m->d, &m->attn[i]);
    case NH_MLP: return mlp_load(dev, f, prefix, &m->d, false, &m->mlp[i]);
    default: return mlp_load(dev, f, prefix, &m->d, true, &m->mlp[i]);
  }
}

/* The widest row any block's projection writes into the scratch. */
static uint32_t widest(const nemotron_h *m) {
  uint32_t w = 1;
  for (uint32_t i = 0; i < m->layers; i++) {
    const gpu_linear *l[] = {&m->mamba[i].in_proj, &m->attn[i].qkv, &m->mlp[i].up, &m->mlp[i].gate};
    for (int j = 0; j < 4; j++)
      if (l[j]->w && gpu_linear_width(l[j]) > w) w = gpu_linear_width(l[j]);
  }
  return w;
}

static int weights(gpu_device *dev, const gguf_file *f, const char *tp, nemotron_h *m) {
  char name[256];
  m->norm = mem_alloc(m->layers, sizeof *m->norm);
  m->mamba = mem_alloc(m->layers, sizeof *m->mamba);
  m->attn = mem_alloc(m->layers, sizeof *m->attn);
  m->mlp = mem_alloc(m->layers, sizeof *m->mlp);
  if (!m->norm || !m->mamba || !m->attn || !m->mlp) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < m->layers; i++) TRY(layer(dev, f, tp, m, i));
  snprintf(name, sizeof name, "%snorm.weight", tp);
  TRY(w_gpu(dev, f, name, W_F32, m->d.d, &m->norm_f));
  snprintf(name, sizeof name, "%sembed_tokens", tp);
  TRY(hybrid_load_linear(dev, f, name, m->vocab, m->d.d, &m->embed));
  if (!m->tied) TRY(hybrid_load_linear(dev, f, "lm_head", m->vocab, m->d.d, &m->head));
  m->wide = widest(m);
  return 0;
}

int nemotron_h_load(gpu_device *dev, const gguf_file *f, const char *keys, const char *tensors,
                    nemotron_h **out) {
  *out = NULL;
  nemotron_h *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  m->dev = dev;
  cfg c = {f, keys};
  int st = shapes(&c, m);
  if (!st) st = eos(&c, m);
  if (!st) st = weights(dev, f, tensors, m);
  if (st) {
    nemotron_h_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void nemotron_h_free(nemotron_h *m) {
  if (!m) return;
  bool arrays = m->norm && m->mamba && m->attn && m->mlp;
  for (uint32_t i = 0; arrays && i < m->layers; i++) {
    gpu_buffer_free(m->norm[i]);
    mamba2_free(&m->mamba[i]);
    gqa_free(&m->attn[i]);
    mlp_free(&m->mlp[i]);
  }
  free(m->norm), free(m->mamba), free(m->attn), free(m->mlp), free(m->kind);
  gpu_buffer_free(m->norm_f);
  gpu_linear_free(&m->embed);
  gpu_linear_free(&m->head);
  free(m);
}
