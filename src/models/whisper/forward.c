/* Whisper on the GPU: the encoder over one window (one recorded submission,
 * ending with every layer's cross K/V packed to f16), and the decoder fed one
 * token after another against its f16 self-attention cache. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "gpu/conv.h"
#include "gpu/decode.h"
#include "models/whisper/whisper.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* conv(k3, s1) + GELU, conv(k3, s2) + GELU added to the positions already in x. */
static void record_stem(whisper *m) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  uint32_t T = c->win_frames, S = pad64(c->d);
  gpu_rec *rec = m->rec;
  gpu_im2col(rec, a->mel, 0, c->mels, a->col0, m->conv0.wk, T, c->mels, (gpu_conv1d){3, 1, 1});
  gpu_gemm_strided(rec, a->col0, m->conv0.wk, &m->conv0, a->h0, T, GPU_EPI_GELU, 0);
  gpu_im2col(rec, a->h0, 0, S, a->col1, m->conv1.wk, T, c->d, (gpu_conv1d){3, 2, 1});
  gpu_gemm_strided(rec, a->col1, m->conv1.wk, &m->conv1, a->x, c->n_audio_ctx,
                   GPU_EPI_GELU_RESIDUAL, 0);
}

/* x += Attn(LN(x)); x += fc2(GELU(fc1(LN(x)))) over the window's frames. */
static void record_block(whisper *m, const whisper_enc_block *b) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  uint32_t t = c->n_audio_ctx, S = pad64(c->d), d = c->d, W = gpu_linear_width(&b->qkv);
  gpu_rec *rec = m->rec;
  gpu_layer_norm(rec, a->x, 0, S, &b->ln_attn, a->h, 0, S, t, d, NULL, NULL);
  gpu_gemm_strided(rec, a->h, S, &b->qkv, a->wide, t, GPU_EPI_BIAS, 0);
  uint32_t hd = d / c->enc_heads, g = m->att_heads;
  for (uint32_t h = 0; h < c->enc_heads; h += g) { /* heads in groups whose scores fit a buffer */
    gpu_attn at = {.q = {a->wide, h * hd, W}, .k = {a->wide, d + h * hd, W},
                   .v = {a->wide, 2 * d + h * hd, W}, .o = {a->o, h * hd, S}, .scores = a->scores,
                   .t = t, .heads = g, .head_dim = hd};
    gpu_attention(rec, &at);
  }
  gpu_gemm_strided(rec, a->o, S, &b->out, a->x, t, GPU_EPI_RESIDUAL, 1.0f);
  gpu_layer_norm(rec, a->x, 0, S, &b->ln_ffn, a->h, 0, S, t, d, NULL, NULL);
  gpu_gemm_strided(rec, a->h, S, &b->fc1, a->wide, t, GPU_EPI_GELU, 0);
  gpu_gemm_strided(rec, a->wide, gpu_linear_width(&b->fc1), &b->fc2, a->x, t, GPU_EPI_RESIDUAL, 1.0f);
}

int whisper_encode(whisper *m, const float *mel, float *enc) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  uint32_t t = c->n_audio_ctx, S = pad64(c->d), d = c->d;
  TRY(gpu_upload(a->mel, 0, mel, (size_t)c->win_frames * c->mels * sizeof *mel));
  TRY(gpu_upload(a->x, 0, a->pos, (size_t)t * S * sizeof *a->pos));
  TRY(gpu_rec_begin(m->rec));
  record_stem(m);
  for (uint32_t i = 0; i < c->enc_layers; i++) record_block(m, &m->enc[i]);
  gpu_layer_norm(m->rec, a->x, 0, S, &m->enc_ln, a->enc, 0, S, t, d, NULL, NULL);
  /* Cross K|V of every decoder layer, packed to f16 rows of K then V. */
  for (uint32_t i = 0; i < c->dec_layers; i++) {
    const gpu_linear *kv = &m->dec[i].cross_kv;
    gpu_gemm_strided(m->rec, a->enc, S, kv, a->kv, t, GPU_EPI_BIAS, 0);
    gpu_pack(m->rec, a->kv, 0, gpu_linear_width(kv), m->dec[i].cross_cache, 0, d, t, d);
  }
  TRY(gpu_rec_run(m->rec));
  if (!enc) return 0;
  float *rows = mem_alloc((size_t)t * S, sizeof *rows);
  if (!rows) return STENO_ERR_NOMEM;
  int st = gpu_download(a->enc, 0, rows, (size_t)t * S * sizeof *rows);
  for (uint32_t r = 0; !st && r < t; r++) memcpy(enc + (size_t)r * d, rows + (size_t)r * S, d * sizeof *enc);
  free(rows);
  return st;
}

/* One token through the decoder at position pos; the residual stream stays in dx. */
static void record_token(whisper *m, int id, uint32_t pos) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  uint32_t d = c->d, heads = c->dec_heads, hd = d / heads;
  gpu_rec *rec = m->rec;
  gpu_embed(rec, &m->embed, (uint32_t)id, m->dec_pos, pos * d, a->dx, 0);
  for (uint32_t i = 0; i < c->dec_layers; i++) {
    const whisper_dec_block *b = &m->dec[i];
    gpu_layer_norm(rec, a->dx, 0, d, &b->ln_self, a->dh, 0, d, 1, d, NULL, NULL);
    gpu_gemv(rec, a->dh, 0, &b->self_qkv, a->dqkv, 0, GPU_EPI_BIAS, 0);
    gpu_pack(rec, a->dqkv, d, 0, b->self_cache, pos * d, 0, 1, d);
    gpu_attend(rec, a->dqkv, 0, b->self_cache, 0, a->datt, 0, pos + 1, heads, hd, a->att_scratch);
    gpu_gemv(rec, a->datt, 0, &b->self_out, a->dx, 0, GPU_EPI_RESIDUAL, 1.0f);
    gpu_layer_norm(rec, a->dx, 0, d, &b->ln_cross, a->dh, 0, d, 1, d, NULL, NULL);
    gpu_gemv(rec, a->dh, 0, &b->cross_q, a->dqkv, 0, GPU_EPI_BIAS, 0);
    gpu_attend(rec, a->dqkv, 0, b->cross_cache, 0, a->datt, 0, c->n_audio_ctx, heads, hd,
               a->att_scratch);
    gpu_gemv(rec, a->datt, 0, &b->cross_out, a->dx, 0, GPU_EPI_RESIDUAL, 1.0f);
    gpu_layer_norm(rec, a->dx, 0, d, &b->ln_ffn, a->dh, 0, d, 1, d, NULL, NULL);
    gpu_gemv(rec, a->dh, 0, &b->fc1, a->dff, 0, GPU_EPI_GELU, 0);
    gpu_gemv(rec, a->dff, 0, &b->fc2, a->dx, 0, GPU_EPI_RESIDUAL, 1.0f);
  }
}

int whisper_feed(whisper *m, const int *ids, uint32_t n, uint32_t pos, float *logits) {
  const whisper_config *c = &m->c;
  if (n == 0 || pos + n > c->n_text_ctx)
    return err_set(STENO_ERR_INVALID, "whisper: %u tokens at position %u of %u", n, pos,
                   c->n_text_ctx);
  for (uint32_t i = 0; i < n; i++)
    if (ids[i] < 0 || (uint32_t)ids[i] >= c->vocab)
      return err_set(STENO_ERR_INVALID, "whisper: token %d of %u", ids[i], c->vocab);
  TRY(gpu_rec_begin(m->rec));
  for (uint32_t i = 0; i < n; i++) record_token(m, ids[i], pos + i);
  if (logits) {
    whisper_arena *a = &m->a;
    gpu_layer_norm(m->rec, a->dx, 0, c->d, &m->dec_ln, a->dh, 0, c->d, 1, c->d, NULL, NULL);
    gpu_gemv(m->rec, a->dh, 0, &m->embed, a->logits, 0, GPU_EPI_BIAS, 0);
  }
  TRY(gpu_rec_run(m->rec));
  return logits ? gpu_download(m->a.logits, 0, logits, (size_t)c->vocab * sizeof *logits) : 0;
}
