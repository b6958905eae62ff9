/* Nemotron 3.5 Transcribe's audio module: features, the two towers, the
 * speaker embedding and the projector (transformers'
 * Nemotron3_5TranscribeAudioModel.forward and get_audio_features). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/conv.h"
#include "gpu/gqa.h"
#include "models/nemotron_transcribe/arena.h"

void nt_audio_free(nt_audio *a) {
  free(a->features);
  free(a->asr);
  free(a->speaker_logits);
  free(a->speaker_probs);
  free(a->activity);
  free(a->states);
  free(a->embeds);
  memset(a, 0, sizeof *a);
}

int nt_features(const nt_model *m, const float *pcm, size_t n, float **mel, uint32_t *frames,
                uint32_t *valid) {
  *mel = NULL;
  size_t f = mel_frames(&m->mel, n), sub = m->c.sub, padded = (f + sub - 1) / sub * sub, v;
  if (padded > (1u << 26)) return err_set(STENO_ERR_INVALID, "audio of %zu samples is too long", n);
  float *x = mem_alloc(padded * m->c.mels, sizeof *x);
  if (!x) return STENO_ERR_NOMEM;
  int st = mel_compute(&m->mel, pcm, n, x, &v);
  if (st) {
    free(x);
    return st;
  }
  *mel = x;
  *frames = (uint32_t)padded;
  *valid = (uint32_t)v;
  return 0;
}

nt_chunk nt_chunk_at(const nt_config *c, uint32_t start, uint32_t t) {
  uint32_t end = start + c->chunk < t ? start + c->chunk : t;
  uint32_t ctx_end = end + c->right < t ? end + c->right : t;
  return (nt_chunk){start > c->left ? start - c->left : 0, start, end, ctx_end};
}


/* Records one diarization step over the n rows in b->s.x: the encoder, its
 * projection, the sub-pixel upsampling (ReLU'd: the classifier's first op) to
 * n·sub rows of head_d, and the classifier (ReLU, dense, ReLU, out) into
 * b->logits. */
static void diar_record(const nt_model *m, gpu_rec *rec, diar_bufs *b, uint32_t n) {
  const nt_config *c = &m->c;
  uint32_t h = c->head_d, wide = c->sub * h;
  renc_record(rec, &m->diar, &b->s, n, true, 0, n, b->h, 0, b->w);
  gpu_gemm_strided(rec, b->h, b->w, &m->sf_proj, b->p, n, GPU_EPI_BIAS, 0);
  gpu_im2col(rec, b->p, 0, gpu_linear_width(&m->sf_proj), b->col, m->sf_up.wk, n, h,
             (gpu_conv1d){3, 1, 1});
  gpu_gemm_strided(rec, b->col, m->sf_up.wk, &m->sf_up, b->up, n, GPU_EPI_RELU, 0);
  /* Rows of sub·h as n·sub rows of h: repacked without the padding columns. */
  gpu_im2col(rec, b->up, 0, gpu_linear_width(&m->sf_up), b->packed, wide, n, wide,
             (gpu_conv1d){1, 1, 0});
  gpu_gemm_strided(rec, b->packed, h, &m->sf_dense, b->dense, n * c->sub, GPU_EPI_RELU, 0);
  gpu_gemm_strided(rec, b->dense, gpu_linear_width(&m->sf_dense), &m->sf_out, b->logits,
                   n * c->sub, GPU_EPI_BIAS, 0);
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Speaker probabilities per encoder frame: the mean of sub sigmoids, times mask. */
static void pool(const nt_config *c, const float *logits, uint32_t n, const uint32_t *mask,
                 float *probs) {
  uint32_t S = c->speakers;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t s = 0; s < S; s++) {
      float sum = 0;
      for (uint32_t j = 0; j < c->sub; j++) sum += sigmoid(logits[((size_t)i * c->sub + j) * S + s]);
      probs[(size_t)i * S + s] = mask && !mask[i] ? 0.0f : sum / (float)c->sub;
    }
}

/* Step input: the cache, the FIFO (rows [0, cached) of h->in, from the host),
 * then the chunk with its context (copied on the GPU from the projected
 * frames); mask 1 on the cached frames (transformers' step_mask). */
static void diar_input(const nt_config *c, const nt_spkcache *k, nt_chunk ch, uint32_t valid,
                           uint32_t w, diar_host *h) {
  uint32_t nc = k->n_cache, nf = k->n_fifo, n = nc + nf + (ch.ctx_end - ch.ctx);
  memcpy(h->in, k->embeds, (size_t)nc * w * sizeof *h->in);
  memcpy(h->in + (size_t)nc * w, k->fifo, (size_t)nf * w * sizeof *h->in);
  for (uint32_t i = 0; i < n; i++)
    h->mask[i] = i < nc + nf || (uint64_t)(ch.ctx + i - nc - nf) * c->sub < valid;
}

/* The diarization's stacked-frame projection of the raw features into a->emb. */
static void diar_embed(nt_arena *a, uint32_t t) {
  const nt_model *m = a->m;
  gpu_gemm_strided(a->rec, a->feat, m->c.sub * m->c.mels, &m->diar.embed, a->emb, t,
                   GPU_EPI_BIAS, 0);
}

/* One step on the GPU over n rows, `cached` of them from the host, the rest
 * the chunk's projected frames: speaker logits [n·sub][speakers] into h->lg.
 * The first step (t > 0) also projects the clip's frames and brings them to
 * the host (the speaker cache there keeps them). A step without padding reads
 * the shared all-ones mask. */
static int diar_step(nt_arena *a, uint32_t n, uint32_t cached, nt_chunk ch, uint32_t t) {
  const nt_model *m = a->m;
  diar_bufs *b = &a->diar;
  diar_host *h = &a->h;
  uint32_t S = m->c.speakers, lw = gpu_linear_width(&m->sf_out), rows = n * m->c.sub, w = b->w;
  bool padded = false;
  for (uint32_t i = 0; i < n; i++) padded = padded || !h->mask[i];
  b->s.mask = padded ? a->own_mask[1] : a->ones;
  if (padded) TRY(gpu_upload(b->s.mask, 0, h->mask, (size_t)n * sizeof *h->mask));
  if (cached) TRY(gpu_upload(b->s.x, 0, h->in, (size_t)cached * w * sizeof *h->in));
  TRY(gpu_rec_begin(a->rec));
  if (t) diar_embed(a, t);
  gpu_copy_rows(a->rec, a->emb, ch.ctx * w, w, b->s.x, cached * w, w, n - cached, w);
  diar_record(m, a->rec, b, n);
  TRY(gpu_rec_run(a->rec));
  if (t) TRY(gpu_download(a->emb, 0, a->host_emb, (size_t)t * w * sizeof *a->host_emb));
  if (lw == S) { /* rows without padding come down as they are */
    TRY(gpu_download(b->logits, 0, h->lg, (size_t)rows * S * sizeof *h->lg));
  } else {
    TRY(gpu_download(b->logits, 0, h->wide, (size_t)rows * lw * sizeof *h->wide));
    for (uint32_t r = 0; r < rows; r++)
      memcpy(h->lg + (size_t)r * S, h->wide + (size_t)r * lw, S * sizeof *h->lg);
  }
  memcpy(h->in + (size_t)cached * w, a->host_emb + (size_t)ch.ctx * w,
         (size_t)(n - cached) * w * sizeof *h->in);
  return 0;
}

/* The offline diarization over the clip's t frames: speaker logits
 * [t·sub][speakers] into out, the speaker cache on the host. */
static int diar_steps(nt_arena *a, uint32_t t, uint32_t valid, float *out) {
  const nt_config *c = &a->m->c;
  uint32_t S = c->speakers, T = a->diar.s.t;
  nt_spkcache *k = &a->k;
  diar_host *h = &a->h;
  k->n_cache = k->n_fifo = 0;
  k->compressed = false;
  int st = 0;
  for (uint32_t i = 0; i < t && !st; i += c->chunk) {
    nt_chunk ch = nt_chunk_at(c, i, t);
    uint32_t cached = k->n_cache + k->n_fifo, n = cached + (ch.ctx_end - ch.ctx);
    if (n > T) st = err_set(STENO_ERR_INVALID, "diarization: %u frames in a step of %u", n, T);
    if (!st) diar_input(c, k, ch, valid, a->diar.w, h);
    if (!st) st = diar_step(a, n, cached, ch, i ? 0 : t);
    if (st) break;
    pool(c, h->lg, n, h->mask, h->probs);
    uint32_t back = ch.start - ch.ctx, len = ch.end - ch.start;
    st = nt_spkcache_update(k, h->in, h->probs, n, back, len, a->sil);
    memcpy(out + (size_t)ch.start * c->sub * S, h->lg + (size_t)(cached + back) * c->sub * S,
           (size_t)len * c->sub * S * sizeof *out);
  }
  return st;
}

/* The raw log-mel, then its normalized copy (the speech encoder's input), in
 * one upload; the copy is normalized straight from the raw features (no
 * second copy to normalize in place), its padding rows copied as they are. */
static int upload_features(nt_arena *a, const nt_audio *o) {
  const nt_config *c = &a->m->c;
  size_t count = (size_t)o->frames * c->mels, head = (size_t)o->valid * c->mels;
  float *norm = a->host_feat + count;
  memcpy(a->host_feat, o->features, count * sizeof *norm);
  TRY(mel_normalize_into(norm, o->features, o->valid, (int)c->mels));
  memcpy(norm + head, o->features + head, (count - head) * sizeof *norm);
  return gpu_upload(a->feat, 0, a->host_feat, 2 * count * sizeof *norm);
}

/* Speaker probabilities and 0/1 activities per encoder frame from the logits. */
static void activities(const nt_config *c, nt_audio *o) {
  uint32_t S = c->speakers;
  for (uint32_t i = 0; i < o->t; i++) {
    pool(c, o->speaker_logits + (size_t)i * c->sub * S, 1, NULL, o->speaker_probs + (size_t)i * S);
    for (uint32_t s = 0; s < S; s++)
      o->activity[(size_t)i * S + s] = o->speaker_probs[(size_t)i * S + s] > c->threshold;
  }
}

/* Uploads the masks of the ASR runs that reach padded frames (the rest read
 * the all-ones mask); returns their count in *count. */
static int asr_masks(nt_arena *a, uint32_t t, uint32_t valid, uint32_t *count) {
  const nt_config *c = &a->m->c;
  uint32_t *mk = a->h.mask, j = 0; /* the diarization's host mask, free now (≥ a run) */
  *count = 0;
  for (uint32_t i = 0; i < t; i += c->chunk) {
    nt_chunk k = nt_chunk_at(c, i, t);
    if ((uint64_t)(k.ctx_end - 1) * c->sub >= valid) j++;
  }
  TRY(nt_arena_masks(a, j));
  for (uint32_t i = 0, at = 0; i < t; i += c->chunk) {
    nt_chunk k = nt_chunk_at(c, i, t);
    if ((uint64_t)(k.ctx_end - 1) * c->sub < valid) continue;
    for (uint32_t f = 0; f < k.ctx_end - k.ctx; f++) mk[f] = (uint64_t)(k.ctx + f) * c->sub < valid;
    TRY(gpu_upload(a->masks[at++], 0, mk, (size_t)(k.ctx_end - k.ctx) * sizeof *mk));
  }
  *count = j;
  return 0;
}

/* Records the speech encoder over the normalized features, chunk by chunk
 * (each run's rows copied out of the clip's), into a->asr_out [t][d]. */
static void asr_record(nt_arena *a, uint32_t frames, uint32_t t, uint32_t valid) {
  const nt_model *m = a->m;
  const nt_config *c = &m->c;
  uint32_t row = c->sub * c->mels, j = 0;
  for (uint32_t i = 0; i < t; i += c->chunk) {
    nt_chunk k = nt_chunk_at(c, i, t);
    uint32_t n = k.ctx_end - k.ctx;
    gpu_copy_rows(a->rec, a->feat, frames * c->mels + k.ctx * row, row, a->chunk, 0, row, n, row);
    a->asr.mask = (uint64_t)(k.ctx_end - 1) * c->sub >= valid ? a->masks[j++] : a->ones;
    renc_embed(a->rec, &m->asr, &a->asr, a->chunk, n);
    renc_record(a->rec, &m->asr, &a->asr, n, true, k.start - k.ctx, k.end - k.start, a->asr_out,
                k.start * c->d, c->d);
  }
}

/* states = asr_norm(asr) + speaker_norm(activity) · table; embeds =
 * proj(states); then states, asr and embeds packed into a->out. */
static void combine_record(nt_arena *a, uint32_t t) {
  const nt_model *m = a->m;
  const nt_config *c = &m->c;
  gpu_rec *rec = a->rec;
  uint32_t S = c->speakers, A = (S + 31) / 32 * 32, W = (c->d + 63) / 64 * 64;
  uint32_t E = gpu_linear_width(&m->proj), d = c->d;
  gpu_layer_norm(rec, a->asr_out, 0, d, &m->asr_norm, a->states, 0, W, t, d, NULL, NULL);
  gpu_layer_norm(rec, a->act, 0, A, &m->spk_norm, a->act, 0, A, t, S, NULL, NULL);
  gpu_gemm_strided(rec, a->act, A, &m->spk_table, a->states, t, GPU_EPI_RESIDUAL, 1.0f);
  gpu_gemm_strided(rec, a->states, W, &m->proj, a->embeds, t, GPU_EPI_BIAS, 0);
  gpu_copy_rows(rec, a->states, 0, W, a->out, 0, d, t, d);
  gpu_copy_rows(rec, a->asr_out, 0, d, a->out, t * d, d, t, d);
  gpu_copy_rows(rec, a->embeds, 0, E, a->out, 2 * t * d, c->d_lm, t, c->d_lm);
}

/* The speech encoder and the combination in one submission; its three
 * outputs (packed in a->out) come down straight into the caller's arrays. */
static int asr_combine(nt_arena *a, nt_audio *o) {
  const nt_config *c = &a->m->c;
  uint32_t t = o->t, S = c->speakers, A = (S + 31) / 32 * 32, masks;
  size_t td = (size_t)t * c->d;
  for (uint32_t i = 0; i < t; i++)
    memcpy(a->host_act + (size_t)i * A, o->activity + (size_t)i * S, S * sizeof(float));
  TRY(gpu_upload(a->act, 0, a->host_act, (size_t)t * A * sizeof(float)));
  TRY(asr_masks(a, t, o->valid, &masks));
  TRY(gpu_rec_begin(a->rec));
  asr_record(a, o->frames, t, o->valid);
  combine_record(a, t);
  TRY(gpu_rec_run(a->rec));
  size_t f = sizeof(float);
  TRY(gpu_download(a->out, 0, o->states, td * f));
  TRY(gpu_download(a->out, td * f, o->asr, td * f));
  return gpu_download(a->out, 2 * td * f, o->embeds, (size_t)t * c->d_lm * f);
}

static int alloc_outputs(const nt_model *m, nt_audio *o) {
  const nt_config *c = &m->c;
  size_t t = o->t, S = c->speakers;
  o->asr = mem_alloc(t * c->d, sizeof(float));
  o->speaker_logits = mem_alloc(t * c->sub * S, sizeof(float));
  o->speaker_probs = mem_alloc(t * S, sizeof(float));
  o->activity = mem_alloc(t * S, sizeof(float));
  o->states = mem_alloc(t * c->d, sizeof(float));
  o->embeds = mem_alloc(t * c->d_lm, sizeof(float));
  return o->asr && o->speaker_logits && o->speaker_probs && o->activity && o->states && o->embeds
             ? 0
             : STENO_ERR_NOMEM;
}

/* Round trips: the features go up once; each diarization step sends the
 * speaker cache and FIFO (none in the first) and takes back its logits (the
 * first also the projected frames, whose chunks the steps copy on the GPU);
 * then the activities and the masks of padded ASR runs go up, and the speech
 * encoder (needed only by the combination) runs with it, one download at the
 * end. */
int nt_audio_run_in(nt_arena *a, const float *pcm, size_t n, nt_audio *o) {
  const nt_model *m = a->m;
  const nt_config *c = &m->c;
  memset(o, 0, sizeof *o);
  int st = nt_features(m, pcm, n, &o->features, &o->frames, &o->valid);
  if (!st) {
    o->t = o->frames / c->sub;
    o->tokens = (o->valid + c->sub - 1) / c->sub;
    st = alloc_outputs(m, o);
  }
  if (!st) st = nt_arena_fit(a, o->t);
  if (!st) st = upload_features(a, o);
  if (!st) st = diar_steps(a, o->t, o->valid, o->speaker_logits);
  if (!st) activities(c, o);
  if (!st) st = asr_combine(a, o);
  if (st) nt_audio_free(o);
  return st;
}

int nt_audio_run(const nt_model *m, const float *pcm, size_t n, nt_audio *o) {
  nt_arena *a;
  memset(o, 0, sizeof *o);
  TRY(nt_arena_new(m, &a));
  int st = nt_audio_run_in(a, pcm, n, o);
  nt_arena_free(a);
  return st;
}
