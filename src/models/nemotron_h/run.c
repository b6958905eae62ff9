/* Nemotron-H on the GPU: a session's forward pass over n rows (one recorded
 * submission), and greedy decoding one token per submission. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/argmax.h"
#include "gpu/decode.h"
#include "models/nemotron_h/nemotron_h.h"

static const gpu_linear *head(const nemotron_h *m) { return m->tied ? &m->embed : &m->head; }

int nemotron_h_session_new(const nemotron_h *m, uint32_t ctx, nemotron_h_session **out) {
  return nemotron_h_session_new_kv(m, ctx, false, out);
}

int nemotron_h_session_new_kv(const nemotron_h *m, uint32_t ctx, bool kv_f16,
                              nemotron_h_session **out) {
  *out = NULL;
  if (ctx < 1 || ctx > m->max_pos)
    return err_set(STENO_ERR_INVALID, "nemotron_h: a context of %u (the model's is %u)", ctx,
                   m->max_pos);
  nemotron_h_session *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->m = m;
  s->ctx = ctx;
  s->cache = mem_alloc(m->layers, sizeof *s->cache);
  int st = s->cache ? gpu_rec_new(m->dev, &s->rec) : STENO_ERR_NOMEM;
  if (!st) gpu_rec_profile(s->rec, "nemotron_h");
  for (uint32_t i = 0; !st && i < m->layers; i++)
    if (m->kind[i] == NH_MAMBA || m->kind[i] == NH_ATTENTION)
      st = hybrid_cache_new(m->dev, &m->d, m->kind[i] == NH_ATTENTION, ctx, kv_f16, &s->cache[i]);
  if (st) {
    nemotron_h_session_free(s);
    return st;
  }
  *out = s;
  return 0;
}

void nemotron_h_session_free(nemotron_h_session *s) {
  if (!s) return;
  for (uint32_t i = 0; s->cache && i < s->m->layers; i++) hybrid_cache_free(&s->cache[i]);
  free(s->cache);
  hybrid_scratch_free(&s->s);
  gpu_buffer_free(s->logits);
  gpu_buffer_free(s->id);
  gpu_buffer_free(s->id_scratch);
  gpu_rec_free(s->rec);
  free(s);
}

/* Activations for n rows and logits for `logit_rows` (grown, never shrunk).
 * The recorder's descriptor sets follow the new buffers (cached by buffer
 * serial, not handle). */
static int room(nemotron_h_session *s, uint32_t n, uint32_t logit_rows) {
  const nemotron_h *m = s->m;
  if (n > s->s.rows) {
    hybrid_scratch_free(&s->s);
    TRY(hybrid_scratch_new(m->dev, &m->d, n, m->wide, &s->s));
  }
  if (logit_rows > s->logit_rows) {
    gpu_buffer_free(s->logits);
    s->logits = NULL;
    s->logit_rows = 0;
    TRY(gpu_buffer_new(m->dev, (size_t)logit_rows * gpu_linear_width(head(m)) * sizeof(float),
                       &s->logits));
    s->logit_rows = logit_rows;
  }
  return 0;
}

/* The given embeddings' rows into x in one upload (before recording: row i at
 * i·stride; the token rows there are written over by the embed dispatches). */
static int upload_given(nemotron_h_session *s, const int *ids, const float *embeds, uint32_t n) {
  uint32_t d = s->m->d.d, S = s->m->d.stride, last = 0;
  bool any = false;
  for (uint32_t i = 0; i < n; i++)
    if (!ids || ids[i] < 0) any = true, last = i;
  if (!any) return 0;
  float *rows = mem_alloc((size_t)(last + 1) * S, sizeof *rows);
  if (!rows) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i <= last; i++)
    if (!ids || ids[i] < 0) memcpy(rows + (size_t)i * S, embeds + (size_t)i * d, d * sizeof *rows);
  int st = gpu_upload(s->s.x, 0, rows, (size_t)(last + 1) * S * sizeof *rows);
  free(rows);
  return st;
}

/* The input rows into x: token embeddings, or the given embeddings (row i at
 * embeds + i·d). */
static int inputs(nemotron_h_session *s, const int *ids, const float *embeds, uint32_t n) {
  const nemotron_h *m = s->m;
  for (uint32_t i = 0; i < n; i++) {
    bool given = !ids || ids[i] < 0;
    if (given && !embeds)
      return err_set(STENO_ERR_INVALID, "nemotron_h: row %u has no token and no embedding", i);
    if (!given && (uint32_t)ids[i] >= m->vocab)
      return err_set(STENO_ERR_INVALID, "nemotron_h: token %d of %u", ids[i], m->vocab);
  }
  TRY(upload_given(s, ids, embeds, n));
  for (uint32_t i = 0; ids && i < n; i++)
    if (ids[i] >= 0) gpu_embed(s->rec, &m->embed, (uint32_t)ids[i], NULL, 0, s->s.x, i * m->d.stride);
  return 0;
}

/* Layers [0, upto) over n rows at the session's position. */
static void record_layers(nemotron_h_session *s, uint32_t n, uint32_t upto) {
  const nemotron_h *m = s->m;
  const hybrid_dims *d = &m->d;
  for (uint32_t i = 0; i < upto; i++) {
    gpu_rms_norm(s->rec, s->s.x, 0, d->stride, NULL, 0, 0, m->norm[i], d->eps, d->d, s->s.h, 0,
                 d->stride, n, d->d);
    switch (m->kind[i]) {
      case NH_MAMBA: mamba2_record(s->rec, d, &m->mamba[i], &s->cache[i], &s->s, n, s->pos); break;
      case NH_ATTENTION: gqa_record(s->rec, d, &m->attn[i], &s->cache[i], &s->s, n, s->pos); break;
      default: mlp_record(s->rec, d, &m->mlp[i], &s->s, n); break;
    }
  }
}

static int check_rows(const nemotron_h_session *s, uint32_t n) {
  if (n == 0 || n > 65535 / (s->m->d.router.k ? s->m->d.router.k : 1) ||
      (uint64_t)s->pos + n > s->ctx)
    return err_set(STENO_ERR_INVALID, "nemotron_h: %u rows at position %u (context %u)", n, s->pos,
                   s->ctx);
  return 0;
}

/* The buffers of greedy's argmax (made on its first use). */
static int room_id(nemotron_h_session *s) {
  if (s->id) return 0;
  TRY(gpu_argmax_ids_new(s->m->dev, 1, &s->id));
  return gpu_buffer_new(s->m->dev, gpu_argmax_scratch(1, s->m->vocab) * sizeof(uint32_t),
                        &s->id_scratch);
}

/* nemotron_h_feed, and with `id` (not NULL) the argmax of the last row's
 * logits taken on the GPU in the same submission: only the id comes back. */
static int feed(nemotron_h_session *s, const int *ids, const float *embeds, uint32_t n,
                float *logits, bool all_rows, int *id) {
  const nemotron_h *m = s->m;
  const hybrid_dims *d = &m->d;
  TRY(check_rows(s, n));
  bool head_rows = logits || id;
  uint32_t lr = head_rows ? (logits && all_rows ? n : 1) : 0, W = gpu_linear_width(head(m));
  TRY(room(s, n, lr));
  if (id) TRY(room_id(s));
  TRY(gpu_rec_begin(s->rec));
  TRY(inputs(s, ids, embeds, n));
  record_layers(s, n, m->layers);
  if (head_rows) { /* the final norm of the rows wanted, then the head */
    uint32_t first = n - lr;
    gpu_rms_norm(s->rec, s->s.x, first * d->stride, d->stride, NULL, 0, 0, m->norm_f, d->eps, d->d,
                 s->s.h, 0, d->stride, lr, d->d);
    hybrid_linear(s->rec, s->s.h, d->stride, head(m), s->logits, lr, GPU_EPI_BIAS);
  }
  if (id) gpu_argmax(s->rec, s->logits, (lr - 1) * W, W, 1, m->vocab, s->id, 0, s->id_scratch);
  TRY(gpu_rec_run(s->rec));
  s->pos += n;
  for (uint32_t r = 0; logits && r < lr; r++)
    TRY(gpu_download(s->logits, (size_t)r * W * sizeof(float), logits + (size_t)r * m->vocab,
                     m->vocab * sizeof(float)));
  if (id) {
    uint32_t got;
    TRY(gpu_download(s->id, 0, &got, sizeof got));
    *id = (int)got;
  }
  return 0;
}

int nemotron_h_feed(nemotron_h_session *s, const int *ids, const float *embeds, uint32_t n,
                    float *logits, bool all_rows) {
  return feed(s, ids, embeds, n, logits, all_rows, NULL);
}

int nemotron_h_hidden(nemotron_h_session *s, const int *ids, uint32_t n, uint32_t layers,
                      float *hidden) {
  const nemotron_h *m = s->m;
  TRY(check_rows(s, n));
  if (layers > m->layers)
    return err_set(STENO_ERR_INVALID, "nemotron_h: %u of %u layers", layers, m->layers);
  TRY(room(s, n, 0));
  TRY(gpu_rec_begin(s->rec));
  TRY(inputs(s, ids, NULL, n));
  record_layers(s, n, layers);
  TRY(gpu_rec_run(s->rec));
  s->pos += n;
  for (uint32_t r = 0; r < n; r++)
    TRY(gpu_download(s->s.x, (size_t)r * m->d.stride * sizeof(float), hidden + (size_t)r * m->d.d,
                     m->d.d * sizeof(float)));
  return 0;
}

/* Each token is the argmax of the last row's logits, taken on the GPU (as
 * the loop `if (x[i] > x[best]) best = i`: ties to the lowest id, argmax.comp). */
int nemotron_h_greedy(nemotron_h_session *s, const int *ids, const float *embeds, uint32_t n,
                      uint32_t max_new, const int *stop, int n_stop, int *out, uint32_t *n_out) {
  *n_out = 0;
  int tok = 0, st = feed(s, ids, embeds, n, NULL, false, max_new ? &tok : NULL);
  while (!st && *n_out < max_new) {
    out[(*n_out)++] = tok;
    bool end = false;
    for (int i = 0; i < n_stop; i++) end = end || tok == stop[i];
    if (end || *n_out == max_new) break;
    if (s->abort && s->abort(s->abort_user)) st = err_set(STENO_ERR_ABORTED, "nemotron_h: aborted");
    else st = feed(s, &tok, NULL, 1, NULL, false, &tok);
  }
  return st;
}
