/* The towers' arena (arena.h): made, grown and freed here; audio.c runs in it. */
#include "models/nemotron_transcribe/arena.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

int nt_zeroed(gpu_device *dev, size_t count, gpu_buffer **out) {
  float *z = mem_alloc(count ? count : 1, sizeof *z);
  if (!z) return STENO_ERR_NOMEM;
  int st = gpu_buffer_from(dev, z, (count ? count : 1) * sizeof *z, out);
  free(z);
  return st;
}

static void diar_bufs_free(diar_bufs *b) {
  renc_scratch_free(&b->s);
  gpu_buffer_free(b->h), gpu_buffer_free(b->p), gpu_buffer_free(b->col);
  gpu_buffer_free(b->up), gpu_buffer_free(b->packed), gpu_buffer_free(b->dense);
  gpu_buffer_free(b->logits);
  memset(b, 0, sizeof *b);
}

static int diar_bufs_new(const nt_model *m, diar_bufs *b) {
  const nt_config *c = &m->c;
  TRY(renc_scratch_new(m->dev, &m->diar, &b->s));
  size_t t = b->s.t, sub = c->sub;
  b->w = b->s.stride;
  int st = nt_zeroed(m->dev, t * b->w, &b->h);
  if (!st) st = nt_zeroed(m->dev, t * gpu_linear_width(&m->sf_proj), &b->p);
  if (!st) st = nt_zeroed(m->dev, t * m->sf_up.wk, &b->col);
  if (!st) st = nt_zeroed(m->dev, t * gpu_linear_width(&m->sf_up), &b->up);
  if (!st) st = nt_zeroed(m->dev, t * sub * c->head_d + 32, &b->packed);
  if (!st) st = nt_zeroed(m->dev, t * sub * gpu_linear_width(&m->sf_dense), &b->dense);
  if (!st) st = nt_zeroed(m->dev, t * sub * gpu_linear_width(&m->sf_out), &b->logits);
  return st;
}

/* Host arrays of a step of T rows of w; the mask also serves runs of `runs`. */
static int diar_host_new(const nt_model *m, uint32_t T, uint32_t w, uint32_t runs, diar_host *h) {
  const nt_config *c = &m->c;
  size_t S = c->speakers, lw = gpu_linear_width(&m->sf_out);
  h->in = mem_alloc((size_t)T * w, sizeof(float));
  h->lg = mem_alloc((size_t)T * c->sub * S, sizeof(float));
  h->wide = mem_alloc((size_t)T * c->sub * lw, sizeof(float));
  h->probs = mem_alloc((size_t)T * S, sizeof(float));
  h->mask = mem_alloc(T > runs ? T : runs, sizeof(uint32_t));
  return h->in && h->lg && h->wide && h->probs && h->mask ? 0 : STENO_ERR_NOMEM;
}

/* The longest run of the speech, diarization and word timestamp encoders. */
static uint32_t longest_run(const nt_model *m) {
  uint32_t n = m->asr.c.max_t > m->diar.c.max_t ? m->asr.c.max_t : m->diar.c.max_t;
  return m->wts.enc.blocks && m->wts.enc.c.max_t > n ? m->wts.enc.c.max_t : n;
}

/* The all-ones mask of the longest run. */
static int ones(const nt_model *m, gpu_buffer **out) {
  uint32_t n = longest_run(m);
  uint32_t *v = mem_alloc(n, sizeof *v);
  if (!v) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < n; i++) v[i] = 1;
  int st = gpu_buffer_from(m->dev, v, (size_t)n * sizeof *v, out);
  free(v);
  return st;
}

/* The part whose size the model fixes. */
static int make(nt_arena *a) {
  const nt_model *m = a->m;
  const nt_config *c = &m->c;
  a->made = true; /* freed as a whole from here on, whatever was made */
  TRY(renc_scratch_new(m->dev, &m->asr, &a->asr));
  a->own_mask[0] = a->asr.mask;
  TRY(nt_zeroed(m->dev, (size_t)a->asr.t * c->sub * c->mels, &a->chunk));
  TRY(ones(m, &a->ones));
  TRY(diar_bufs_new(m, &a->diar));
  a->own_mask[1] = a->diar.s.mask;
  if (gpu_linear_width(&m->diar.embed) != a->diar.w)
    return err_set(STENO_ERR_INVALID, "diarization: rows of %u and %u",
                   gpu_linear_width(&m->diar.embed), a->diar.w);
  TRY(diar_host_new(m, a->diar.s.t, a->diar.w, longest_run(m), &a->h));
  TRY(nt_spkcache_init(&a->k, c, a->diar.w));
  a->sil = mem_alloc(a->diar.w, sizeof *a->sil);
  if (!a->sil) return STENO_ERR_NOMEM;
  memcpy(a->sil, m->sil_emb, c->dd * sizeof *a->sil);
  return 0;
}

static void clip_free(nt_arena *a) {
  gpu_buffer_free(a->feat), gpu_buffer_free(a->asr_out), gpu_buffer_free(a->emb);
  gpu_buffer_free(a->act), gpu_buffer_free(a->states), gpu_buffer_free(a->embeds);
  gpu_buffer_free(a->out);
  free(a->host_feat), free(a->host_emb), free(a->host_act);
  a->feat = a->asr_out = a->emb = a->act = a->states = a->embeds = a->out = NULL;
  a->host_feat = a->host_emb = a->host_act = NULL;
  a->cap = 0;
}

/* The part sized by the clip, for t encoder frames. */
static int grow(nt_arena *a, uint32_t t) {
  const nt_model *m = a->m;
  const nt_config *c = &m->c;
  size_t T = t, frames = T * c->sub, A = (c->speakers + 31) / 32 * 32, w = a->diar.w;
  size_t W = pad64(c->d), E = gpu_linear_width(&m->proj), res = 2 * (size_t)c->d + c->d_lm;
  clip_free(a);
  int st = nt_zeroed(m->dev, 2 * frames * c->mels, &a->feat);
  if (!st) st = nt_zeroed(m->dev, T * c->d, &a->asr_out);
  if (!st) st = nt_zeroed(m->dev, T * w, &a->emb);
  if (!st) st = nt_zeroed(m->dev, T * A, &a->act);
  if (!st) st = nt_zeroed(m->dev, T * W, &a->states);
  if (!st) st = nt_zeroed(m->dev, T * E, &a->embeds);
  if (!st) st = nt_zeroed(m->dev, T * res, &a->out);
  a->host_feat = mem_alloc(2 * frames * c->mels, sizeof(float));
  a->host_emb = mem_alloc(T * w, sizeof(float));
  a->host_act = mem_alloc(T * A, sizeof(float)); /* the padding columns stay zero */
  if (!st && !(a->host_feat && a->host_emb && a->host_act)) st = STENO_ERR_NOMEM;
  if (st) return clip_free(a), st;
  a->cap = t;
  return 0;
}

int nt_arena_fit(nt_arena *a, uint32_t t) {
  const nt_config *c = &a->m->c;
  /* Offsets into the features and the packed outputs are 32-bit float counts. */
  if ((uint64_t)2 * t * c->sub * c->mels > UINT32_MAX ||
      (uint64_t)t * (2 * (uint64_t)c->d + c->d_lm) > UINT32_MAX)
    return err_set(STENO_ERR_INVALID, "audio of %u encoder frames is too long", t);
  if (!a->made) TRY(make(a));
  return t > a->cap ? grow(a, t) : 0;
}

int nt_arena_masks(nt_arena *a, uint32_t count) {
  if (count <= a->n_masks) return 0;
  gpu_buffer **v = mem_realloc(a->masks, count, sizeof *v);
  if (!v) return STENO_ERR_NOMEM;
  a->masks = v;
  for (; a->n_masks < count; a->n_masks++)
    TRY(gpu_buffer_new(a->m->dev, (size_t)a->asr.t * sizeof(uint32_t), &a->masks[a->n_masks]));
  return 0;
}

static void wts_bufs_free(wts_bufs *b) {
  renc_scratch_free(&b->s);
  gpu_buffer_free(b->in), gpu_buffer_free(b->up), gpu_buffer_free(b->packed);
  gpu_buffer_free(b->rows), gpu_buffer_free(b->ln), gpu_buffer_free(b->logits);
}

static int wts_bufs_new(const nt_model *m, wts_bufs *b) {
  const nt_wts *w = &m->wts;
  uint32_t d = m->c.d, n = m->c.chunk + m->c.left + m->c.right, r = n * w->factor;
  b->S = pad64(d);
  b->lw = gpu_linear_width(&w->head);
  TRY(renc_scratch_new(m->dev, &w->enc, &b->s));
  int st = nt_zeroed(m->dev, (size_t)n * d, &b->in);
  if (!st) st = nt_zeroed(m->dev, (size_t)n * gpu_linear_width(&w->up), &b->up);
  if (!st) st = nt_zeroed(m->dev, (size_t)r * d, &b->packed);
  if (!st) st = nt_zeroed(m->dev, (size_t)r * b->S, &b->rows);
  if (!st) st = nt_zeroed(m->dev, (size_t)r * b->S, &b->ln);
  if (!st) st = nt_zeroed(m->dev, (size_t)r * b->lw, &b->logits);
  return st;
}

int nt_arena_wts(nt_arena *a) {
  const nt_model *m = a->m;
  if (a->wts) return 0;
  wts_bufs *b = mem_alloc(1, sizeof *b);
  if (!b) return STENO_ERR_NOMEM;
  int st = wts_bufs_new(m, b);
  uint32_t rows = (m->c.chunk + m->c.left + m->c.right) * m->wts.factor;
  if (!st) st = (a->wts_host = mem_alloc((size_t)rows * b->lw, sizeof(float))) ? 0 : STENO_ERR_NOMEM;
  if (st) {
    wts_bufs_free(b);
    free(b);
    return st;
  }
  a->wts = b;
  a->wts_mask = b->s.mask;
  return 0;
}

int nt_arena_new(const nt_model *m, nt_arena **out) {
  *out = NULL;
  nt_arena *a = mem_alloc(1, sizeof *a);
  if (!a) return STENO_ERR_NOMEM;
  a->m = m;
  int st = gpu_rec_new(m->dev, &a->rec);
  if (st) return free(a), st;
  gpu_rec_profile(a->rec, "nemotron_transcribe towers");
  *out = a;
  return 0;
}

void nt_arena_free(nt_arena *a) {
  if (!a) return;
  clip_free(a);
  for (uint32_t i = 0; i < a->n_masks; i++) gpu_buffer_free(a->masks[i]);
  free(a->masks);
  if (a->made) {
    /* The scratches free their own masks (a run may have lent them others). */
    if (a->own_mask[0]) a->asr.mask = a->own_mask[0];
    if (a->own_mask[1]) a->diar.s.mask = a->own_mask[1];
    renc_scratch_free(&a->asr);
    gpu_buffer_free(a->chunk), gpu_buffer_free(a->ones);
    diar_bufs_free(&a->diar);
    free(a->h.in), free(a->h.lg), free(a->h.wide), free(a->h.probs), free(a->h.mask);
    nt_spkcache_free(&a->k);
    free(a->sil);
  }
  if (a->wts) {
    a->wts->s.mask = a->wts_mask;
    wts_bufs_free(a->wts);
    free(a->wts);
  }
  free(a->wts_host);
  gpu_rec_free(a->rec);
  free(a);
}
