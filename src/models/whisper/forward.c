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

int whisper_encode(whisper *m, const float *mel, float *enc) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  uint32_t t = c->n_audio_ctx, S = pad64(c->d), d = c->d;
  TRY(gpu_upload(a->mel, 0, mel, (size_t)c->win_frames * c->mels * sizeof *mel));
  TRY(gpu_upload(a->x, 0, a->pos, (size_t)t * S * sizeof *a->pos));
  TRY(gpu_rec_begin(m->rec));
  record_stem(m);
  tf_enc_scratch s = {.stride = S, .x = a->x, .h = a->h, .o = a->o, .wide = a->wide,
                      .scores = a->scores, .att_heads = m->att_heads};
  for (uint32_t i = 0; i < c->enc_layers; i++) {
    tf_enc_forward(m->rec, &m->enc_dims, &m->enc[i], &s, t);
    /* Every 4 layers to the GPU while the rest is recorded (discrete GPUs). */
    if (i % 4 == 3) TRY(gpu_rec_flush(m->rec));
  }
  gpu_layer_norm(m->rec, a->x, 0, S, &m->enc_ln, a->enc, 0, S, t, d, NULL, NULL);
  tf_cross_kv(m->rec, &m->dec_dims, m->dec, c->dec_layers, a->enc, S, a->kv, t);
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
  gpu_embed(m->rec, &m->embed, (uint32_t)id, m->dec_pos, pos * c->d, a->dx, 0);
  tf_dec_scratch s = {.x = a->dx, .h = a->dh, .qkv = a->dqkv, .att = a->datt, .ff = a->dff,
                      .att_scratch = a->att_scratch};
  for (uint32_t i = 0; i < c->dec_layers; i++)
    tf_dec_forward(m->rec, &m->dec_dims, &m->dec[i], &s, pos, c->n_audio_ctx);
}

int whisper_feed_start(whisper *m, const int *ids, uint32_t n, uint32_t pos, bool logits) {
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
  return gpu_rec_submit(m->rec);
}

int whisper_feed_finish(whisper *m, float *logits) {
  TRY(gpu_rec_wait(m->rec));
  /* A memcpy: the head writes logits into memory the host reads (load.c). */
  return logits ? gpu_download(m->a.logits, 0, logits, (size_t)m->c.vocab * sizeof *logits) : 0;
}

int whisper_feed(whisper *m, const int *ids, uint32_t n, uint32_t pos, float *logits) {
  TRY(whisper_feed_start(m, ids, n, pos, logits != NULL));
  return whisper_feed_finish(m, logits);
}
