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
#include "gpu/logmel.h"
#include "models/whisper/whisper.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* conv(k3, s1) + GELU, conv(k3, s2) + GELU added to the positions already in
 * x, over the window of frames at float `at` of mel. */
static void record_stem(whisper *m, gpu_buffer *mel, uint32_t at) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  uint32_t T = c->win_frames, S = pad64(c->d);
  gpu_rec *rec = m->rec;
  gpu_im2col(rec, mel, at, c->mels, a->col0, m->conv0.wk, T, c->mels, (gpu_conv1d){3, 1, 1});
  gpu_gemm_strided(rec, a->col0, m->conv0.wk, &m->conv0, a->h0, T, GPU_EPI_GELU, 0);
  gpu_im2col(rec, a->h0, 0, S, a->col1, m->conv1.wk, T, c->d, (gpu_conv1d){3, 2, 1});
  gpu_gemm_strided(rec, a->col1, m->conv1.wk, &m->conv1, a->x, c->n_audio_ctx,
                   GPU_EPI_GELU_RESIDUAL, 0);
}

/* Waits for a token step still on the GPU (a search that stopped between
 * _start and _finish): its recorders are not the one the rest uses. */
static void steps_drain(whisper *m) {
  whisper_steps *st = &m->steps;
  for (int i = 0; i < 2; i++) {
    if (st->submitted[i]) gpu_rec_wait(st->layers[i]);
    st->submitted[i] = st->recorded[i] = false;
  }
  if (!st->live) return;
  gpu_rec_wait(st->live);
  if (st->embed_live) gpu_rec_wait(st->embed);
  st->live = NULL;
}

/* The encoder over the window at float `at` of mel (a->mel, or the GPU's
 * features of the piece). */
static int encode(whisper *m, gpu_buffer *mel, uint32_t at, float *enc) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  uint32_t t = c->n_audio_ctx, S = pad64(c->d), d = c->d;
  TRY(gpu_rec_begin(m->rec));
  gpu_copy(m->rec, m->enc_pos, 0, a->x, 0, (size_t)t * S * sizeof(float)); /* the stem adds to them */
  record_stem(m, mel, at);
  tf_enc_scratch s = {.stride = S, .x = a->x, .h = a->h, .o = a->o, .wide = a->wide,
                      .scores = a->scores, .att_heads = m->att_heads};
  for (uint32_t i = 0; i < c->enc_layers; i++) {
    tf_enc_forward(m->rec, &m->enc_dims, m->enc, c->enc_layers, i, &s, t, &m->enc_ln, a->enc);
    /* Every 4 layers to the GPU while the rest is recorded (discrete GPUs). */
    if (i % 4 == 3) TRY(gpu_rec_flush(m->rec));
  }
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

int whisper_encode(whisper *m, const float *mel, float *enc) {
  steps_drain(m);
  TRY(gpu_upload(m->a.mel, 0, mel, (size_t)m->c.win_frames * m->c.mels * sizeof *mel));
  return encode(m, m->a.mel, 0, enc);
}

int whisper_encode_at(whisper *m, size_t seek, float *enc) {
  steps_drain(m);
  whisper_arena *a = &m->a;
  size_t at = seek * m->c.mels, end = at + (size_t)m->c.win_frames * m->c.mels;
  if (!a->mel_all || end > a->mel_room || at > UINT32_MAX)
    return err_set(STENO_ERR_INVALID, "whisper: window at frame %zu past the GPU's features", seek);
  return encode(m, a->mel_all, (uint32_t)at, enc);
}

/* Grows *b to `floats` floats (capacity *room). */
static int fit(gpu_device *dev, gpu_buffer **b, size_t *room, size_t floats) {
  if (floats <= *room) return 0;
  gpu_buffer_free(*b);
  *b = NULL, *room = 0;
  TRY(gpu_buffer_new(dev, floats * sizeof(float), b));
  *room = floats;
  return 0;
}

int whisper_features_gpu(whisper *m, const float *pcm, size_t n, size_t *frames) {
  *frames = 0;
  steps_drain(m);
  const wmel *w = &m->mel;
  whisper_arena *a = &m->a;
  if (!m->gmel) return err_set(STENO_ERR_INVALID, "whisper: no GPU features on this device");
  if (n == 0 || n > INT32_MAX / 4) return err_set(STENO_ERR_INVALID, "whisper: a clip of %zu samples", n);
  size_t len = n > w->n_samples ? n : w->n_samples, T = wmel_frames(w, n);
  size_t A = wmel_audio_frames(w, n), all = T + m->c.win_frames;
  void *host;
  TRY(gpu_input_map(m->dev, &a->pcm, n * sizeof *pcm, 0, &host));
  TRY(fit(m->dev, &a->mel_top, &a->top_room, A));
  TRY(fit(m->dev, &a->mel_all, &a->mel_room, all * m->c.mels));
  memcpy(host, pcm, n * sizeof *pcm);
  TRY(gpu_rec_begin(m->rec));
  gpu_wmel_record(m->rec, m->gmel, gpu_input_record(m->rec, &a->pcm), (uint32_t)n, (uint32_t)len,
                  (uint32_t)A, (uint32_t)T, (uint32_t)all, a->mel_top, a->mel_all);
  TRY(gpu_rec_run(m->rec));
  *frames = T;
  return 0;
}

/* The embedding of token id at position pos into dx, the residual stream. */
static void record_embed(whisper *m, gpu_rec *rec, int id, uint32_t pos) {
  gpu_embed(rec, &m->embed, (uint32_t)id, m->dec_pos, pos * m->c.d, m->a.dx, 0);
}

/* The decoder's layers over dx at position pos; with `head`, the final norm
 * and the tied head into the logits (the readback buffer: load.c). */
static void record_layers(whisper *m, gpu_rec *rec, uint32_t pos, bool head) {
  whisper_arena *a = &m->a;
  const whisper_config *c = &m->c;
  tf_dec_scratch s = {.x = a->dx, .h = a->dh, .qkv = a->dqkv, .att = a->datt, .ff = a->dff,
                      .att_scratch = a->att_scratch};
  for (uint32_t i = 0; i < c->dec_layers; i++)
    tf_dec_forward(rec, &m->dec_dims, &m->dec[i], &s, pos, c->n_audio_ctx);
  if (!head) return;
  gpu_layer_norm(rec, a->dx, 0, c->d, &m->dec_ln, a->dh, 0, c->d, 1, c->d, NULL, NULL);
  gpu_gemv(rec, a->dh, 0, &m->embed, a->logits, 0, GPU_EPI_BIAS, 0);
}

static int check_token(const whisper_config *c, int id) {
  if (id >= 0 && (uint32_t)id < c->vocab) return 0;
  return err_set(STENO_ERR_INVALID, "whisper: token %d of %u", id, c->vocab);
}

static int check_pos(const whisper_config *c, uint32_t pos) {
  if (pos < c->n_text_ctx) return 0;
  return err_set(STENO_ERR_INVALID, "whisper: position %u of %u", pos, c->n_text_ctx);
}

int whisper_feed(whisper *m, const int *ids, uint32_t n, uint32_t pos, float *logits) {
  const whisper_config *c = &m->c;
  if (n == 0 || pos + n > c->n_text_ctx)
    return err_set(STENO_ERR_INVALID, "whisper: %u tokens at position %u of %u", n, pos,
                   c->n_text_ctx);
  for (uint32_t i = 0; i < n; i++) TRY(check_token(c, ids[i]));
  steps_drain(m);
  TRY(gpu_rec_begin(m->rec));
  for (uint32_t i = 0; i < n; i++) {
    record_embed(m, m->rec, ids[i], pos + i);
    record_layers(m, m->rec, pos + i, logits && i == n - 1);
  }
  TRY(gpu_rec_run(m->rec));
  /* A memcpy: the head writes logits into memory the host reads. */
  return logits ? gpu_download(m->a.logits, 0, logits, (size_t)c->vocab * sizeof *logits) : 0;
}

/* ---- one generated token in three steps ---- */

int whisper_step_prepare(whisper *m, uint32_t pos) {
  TRY(check_pos(&m->c, pos));
  whisper_steps *st = &m->steps;
  gpu_rec *rec = st->layers[pos % 2];
  st->prepared[pos % 2] = -1;
  TRY(gpu_rec_begin(rec)); /* its last run, the token at pos − 2, is done */
  record_layers(m, rec, pos, true);
  st->prepared[pos % 2] = (int64_t)pos;
  return 0;
}

int whisper_step_start(whisper *m, int id, uint32_t pos) {
  whisper_steps *st = &m->steps;
  TRY(check_token(&m->c, id));
  TRY(check_pos(&m->c, pos));
  gpu_rec *layers = st->layers[pos % 2];
  st->embed_live = st->prepared[pos % 2] == (int64_t)pos;
  st->prepared[pos % 2] = -1; /* submitted once, then recorded again */
  if (st->embed_live) {
    /* Two submissions in queue order: each starts with a barrier on all earlier writes. */
    TRY(gpu_rec_begin(st->embed));
    record_embed(m, st->embed, id, pos);
    TRY(gpu_rec_submit(st->embed));
  } else { /* not prepared: all of it in one submission */
    TRY(gpu_rec_begin(layers));
    record_embed(m, layers, id, pos);
    record_layers(m, layers, pos, true);
  }
  st->live = layers;
  return gpu_rec_submit(layers);
}

int whisper_step_finish(whisper *m, float *logits) {
  whisper_steps *st = &m->steps;
  if (!st->live) return err_set(STENO_ERR_INVALID, "whisper_step_finish without whisper_step_start");
  gpu_rec *live = st->live;
  st->live = NULL;
  TRY(gpu_rec_wait(live));
  if (st->embed_live) TRY(gpu_rec_wait(st->embed)); /* done before the layers; its mark is checked */
  return gpu_download(m->a.logits, 0, logits, (size_t)m->c.vocab * sizeof *logits);
}

/* ---- greedy chunks on the GPU ---- */

int whisper_greedy_record(whisper *m, int i, const gpu_ts_rules *rules, uint32_t np, uint32_t n0,
                          uint32_t count) {
  whisper_steps *st = &m->steps;
  if (i < 0 || i > 1 || st->submitted[i] || st->live || !count)
    return err_set(STENO_ERR_INVALID, "whisper_greedy_record: slot %d busy or empty", i);
  if (np + n0 + count > m->c.n_text_ctx)
    return err_set(STENO_ERR_INVALID, "whisper: greedy steps past position %u", m->c.n_text_ctx);
  gpu_rec *rec = st->layers[i];
  st->prepared[i] = -1;
  st->recorded[i] = false;
  TRY(gpu_rec_begin(rec));
  for (uint32_t n = n0; n < n0 + count; n++) {
    if (n > 0) {
      gpu_embed_from(rec, &m->embed, m->a.gen, n - 1, m->dec_pos, (np + n - 1) * m->c.d, m->a.dx, 0);
      record_layers(m, rec, np + n - 1, true);
    }
    gpu_ts_greedy(rec, m->a.logits, rules, m->a.gen, m->a.lp, n, m->a.ts_part);
  }
  st->n0[i] = n0, st->count[i] = count, st->recorded[i] = true;
  return 0;
}

int whisper_greedy_submit(whisper *m, int i) {
  whisper_steps *st = &m->steps;
  if (i < 0 || i > 1 || !st->recorded[i])
    return err_set(STENO_ERR_INVALID, "whisper_greedy_submit: slot %d not recorded", i);
  st->recorded[i] = false;
  TRY(gpu_rec_submit(st->layers[i]));
  st->submitted[i] = true;
  return 0;
}

int whisper_greedy_wait(whisper *m, int i, int *ids, float *lp) {
  whisper_steps *st = &m->steps;
  if (i < 0 || i > 1 || !st->submitted[i])
    return err_set(STENO_ERR_INVALID, "whisper_greedy_wait: slot %d not submitted", i);
  st->submitted[i] = false;
  TRY(gpu_rec_wait(st->layers[i]));
  size_t at = (size_t)st->n0[i] * 4, bytes = (size_t)st->count[i] * 4;
  TRY(gpu_download(m->a.gen, at, ids, bytes));
  return gpu_download(m->a.lp, at, lp, bytes);
}
