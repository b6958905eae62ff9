/* Nemotron 3.5 Transcribe's audio module: features, the two towers, the
 * speaker embedding and the projector (transformers'
 * Nemotron3_5TranscribeAudioModel.forward and get_audio_features). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/conv.h"
#include "models/nemotron_transcribe/nemotron_transcribe.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

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

/* A GPU buffer of `count` floats, zeroed (columns past a row's width are read
 * as zero by the GEMMs' padded weights). */
static int zeroed(gpu_device *dev, size_t count, gpu_buffer **out) {
  float *z = mem_alloc(count ? count : 1, sizeof *z);
  if (!z) return STENO_ERR_NOMEM;
  int st = gpu_buffer_from(dev, z, (count ? count : 1) * sizeof *z, out);
  free(z);
  return st;
}

/* Uploads mask[i] = (first + i)·sub < valid for n encoder frames at `at`. */
static int upload_mask(gpu_buffer *buf, uint32_t at, uint32_t first, uint32_t n, uint32_t sub,
                       uint32_t valid) {
  uint32_t *mk = mem_alloc(n, sizeof *mk);
  if (!mk) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < n; i++) mk[i] = (uint64_t)(first + i) * sub < valid;
  int st = gpu_upload(buf, (size_t)at * sizeof *mk, mk, (size_t)n * sizeof *mk);
  free(mk);
  return st;
}

nt_chunk nt_chunk_at(const nt_config *c, uint32_t start, uint32_t t) {
  uint32_t end = start + c->chunk < t ? start + c->chunk : t;
  uint32_t ctx_end = end + c->right < t ? end + c->right : t;
  return (nt_chunk){start > c->left ? start - c->left : 0, start, end, ctx_end};
}

/* The speech encoder over normalized features norm [frames][mels], chunk by
 * chunk, into out [t][d] (one submission per chunk). */
static int asr_run(const nt_model *m, gpu_rec *rec, const float *norm, uint32_t t, uint32_t valid,
                   gpu_buffer *out) {
  const nt_config *c = &m->c;
  renc_scratch s;
  gpu_buffer *feat = NULL;
  size_t row = (size_t)c->sub * c->mels;
  TRY(renc_scratch_new(m->dev, &m->asr, &s));
  int st = zeroed(m->dev, (size_t)s.t * row, &feat);
  for (uint32_t a = 0; a < t && !st; a += c->chunk) {
    nt_chunk k = nt_chunk_at(c, a, t);
    uint32_t n = k.ctx_end - k.ctx;
    st = gpu_upload(feat, 0, norm + k.ctx * row, n * row * sizeof *norm);
    if (!st) st = upload_mask(s.mask, 0, k.ctx, n, c->sub, valid);
    if (!st) st = gpu_rec_begin(rec);
    if (st) break;
    renc_embed(rec, &m->asr, &s, feat, n);
    renc_record(rec, &m->asr, &s, n, true, k.start - k.ctx, k.end - k.start, out, k.start * c->d,
                c->d);
    st = gpu_rec_run(rec);
  }
  gpu_buffer_free(feat);
  renc_scratch_free(&s);
  return st;
}

/* GPU buffers of one diarization step (n ≤ the encoder's max_t rows). */
typedef struct {
  renc_scratch s;
  gpu_buffer *h, *p, *col, *up, *packed, *dense, *logits;
  uint32_t w;   /* floats per encoder row (d padded to 64) */
} diar_bufs;

static void diar_bufs_free(diar_bufs *b) {
  renc_scratch_free(&b->s);
  gpu_buffer_free(b->h), gpu_buffer_free(b->p), gpu_buffer_free(b->col);
  gpu_buffer_free(b->up), gpu_buffer_free(b->packed), gpu_buffer_free(b->dense);
  gpu_buffer_free(b->logits);
  memset(b, 0, sizeof *b);
}

static int diar_bufs_new(const nt_model *m, diar_bufs *b) {
  memset(b, 0, sizeof *b);
  const nt_config *c = &m->c;
  TRY(renc_scratch_new(m->dev, &m->diar, &b->s));
  size_t t = b->s.t, sub = c->sub;
  b->w = b->s.stride;
  int st = zeroed(m->dev, t * b->w, &b->h);
  if (!st) st = zeroed(m->dev, t * gpu_linear_width(&m->sf_proj), &b->p);
  if (!st) st = zeroed(m->dev, t * m->sf_up.wk, &b->col);
  if (!st) st = zeroed(m->dev, t * gpu_linear_width(&m->sf_up), &b->up);
  if (!st) st = zeroed(m->dev, t * sub * c->head_d + 32, &b->packed);
  if (!st) st = zeroed(m->dev, t * sub * gpu_linear_width(&m->sf_dense), &b->dense);
  if (!st) st = zeroed(m->dev, t * sub * gpu_linear_width(&m->sf_out), &b->logits);
  if (st) diar_bufs_free(b);
  return st;
}

/* Records one step over the n rows in b->s.x: the encoder, its projection,
 * the sub-pixel upsampling (ReLU'd: the classifier's first op) to n·sub rows
 * of head_d, and the classifier (ReLU, dense, ReLU, out) into b->logits. */
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

/* Host arrays of one diarization step. */
typedef struct {
  float *in, *lg, *wide, *probs;
  uint32_t *mask;
} diar_host;

static void diar_host_free(diar_host *h) {
  free(h->in), free(h->lg), free(h->wide), free(h->probs), free(h->mask);
}

/* Step input: the cache, the FIFO, then the chunk with its context; mask 1 on
 * the cached frames (transformers' step_mask). Returns the rows. */
static uint32_t diar_input(const nt_config *c, const nt_spkcache *k, const float *emb, uint32_t w,
                           nt_chunk ch, uint32_t valid, diar_host *h) {
  uint32_t nc = k->n_cache, nf = k->n_fifo, n = nc + nf + (ch.ctx_end - ch.ctx);
  memcpy(h->in, k->embeds, (size_t)nc * w * sizeof *h->in);
  memcpy(h->in + (size_t)nc * w, k->fifo, (size_t)nf * w * sizeof *h->in);
  memcpy(h->in + (size_t)(nc + nf) * w, emb + (size_t)ch.ctx * w,
         (size_t)(ch.ctx_end - ch.ctx) * w * sizeof *h->in);
  for (uint32_t i = 0; i < n; i++)
    h->mask[i] = i < nc + nf || (uint64_t)(ch.ctx + i - nc - nf) * c->sub < valid;
  return n;
}

/* One step on the GPU: speaker logits [n·sub][speakers] into h->lg. */
static int diar_step(const nt_model *m, gpu_rec *rec, diar_bufs *b, diar_host *h, uint32_t n) {
  const nt_config *c = &m->c;
  uint32_t S = c->speakers, lw = gpu_linear_width(&m->sf_out), rows = n * c->sub;
  TRY(gpu_upload(b->s.x, 0, h->in, (size_t)n * b->w * sizeof *h->in));
  TRY(gpu_upload(b->s.mask, 0, h->mask, (size_t)n * sizeof *h->mask));
  TRY(gpu_rec_begin(rec));
  diar_record(m, rec, b, n);
  TRY(gpu_rec_run(rec));
  TRY(gpu_download(b->logits, 0, h->wide, (size_t)rows * lw * sizeof *h->wide));
  for (uint32_t r = 0; r < rows; r++) memcpy(h->lg + (size_t)r * S, h->wide + (size_t)r * lw, S * sizeof *h->lg);
  return 0;
}

/* The offline diarization over the projected frames emb [t][b->w]: speaker
 * logits [t·sub][speakers] into out. */
static int diar_steps(const nt_model *m, gpu_rec *rec, diar_bufs *b, const float *emb, uint32_t t,
                      uint32_t valid, float *out) {
  const nt_config *c = &m->c;
  uint32_t S = c->speakers, T = b->s.t, lw = gpu_linear_width(&m->sf_out);
  nt_spkcache k;
  diar_host h = {mem_alloc((size_t)T * b->w, sizeof(float)), mem_alloc((size_t)T * c->sub * S, sizeof(float)),
                 mem_alloc((size_t)T * c->sub * lw, sizeof(float)), mem_alloc((size_t)T * S, sizeof(float)),
                 mem_alloc(T, sizeof(uint32_t))};
  float *sil = mem_alloc(b->w, sizeof *sil);
  int st = h.in && h.lg && h.wide && h.probs && h.mask && sil ? nt_spkcache_init(&k, c, b->w)
                                                               : STENO_ERR_NOMEM;
  if (st) {
    diar_host_free(&h);
    free(sil);
    return st;
  }
  memcpy(sil, m->sil_emb, c->dd * sizeof *sil);
  for (uint32_t a = 0; a < t && !st; a += c->chunk) {
    nt_chunk ch = nt_chunk_at(c, a, t);
    uint32_t cached = k.n_cache + k.n_fifo, n = diar_input(c, &k, emb, b->w, ch, valid, &h);
    if (n > T) st = err_set(STENO_ERR_INVALID, "diarization: %u frames in a step of %u", n, T);
    if (!st) st = diar_step(m, rec, b, &h, n);
    if (st) break;
    pool(c, h.lg, n, h.mask, h.probs);
    uint32_t back = ch.start - ch.ctx, len = ch.end - ch.start;
    st = nt_spkcache_update(&k, h.in, h.probs, n, back, len, sil);
    memcpy(out + (size_t)ch.start * c->sub * S, h.lg + (size_t)(cached + back) * c->sub * S,
           (size_t)len * c->sub * S * sizeof *out);
  }
  nt_spkcache_free(&k);
  diar_host_free(&h);
  free(sil);
  return st;
}

/* states = asr_norm(asr) + speaker_norm(activity) · table; embeds = proj(states). */
static int combine(const nt_model *m, gpu_rec *rec, gpu_buffer *asr, nt_audio *o) {
  const nt_config *c = &m->c;
  uint32_t t = o->t, S = c->speakers, A = (S + 31) / 32 * 32, W = pad64(c->d);
  uint32_t E = gpu_linear_width(&m->proj);
  float *act = mem_alloc((size_t)t * A, sizeof *act), *rows = mem_alloc((size_t)t * (W > E ? W : E), sizeof *rows);
  gpu_buffer *ab = NULL, *sb = NULL, *eb = NULL;
  int st = act && rows ? 0 : STENO_ERR_NOMEM;
  for (uint32_t i = 0; !st && i < t; i++) memcpy(act + (size_t)i * A, o->activity + (size_t)i * S, S * sizeof *act);
  if (!st) st = gpu_buffer_from(m->dev, act, (size_t)t * A * sizeof *act, &ab);
  if (!st) st = zeroed(m->dev, (size_t)t * W, &sb);
  if (!st) st = zeroed(m->dev, (size_t)t * E, &eb);
  if (!st) st = gpu_rec_begin(rec);
  if (!st) {
    gpu_layer_norm(rec, asr, 0, c->d, &m->asr_norm, sb, 0, W, t, c->d, NULL, NULL);
    gpu_layer_norm(rec, ab, 0, A, &m->spk_norm, ab, 0, A, t, S, NULL, NULL);
    gpu_gemm_strided(rec, ab, A, &m->spk_table, sb, t, GPU_EPI_RESIDUAL, 1.0f);
    gpu_gemm_strided(rec, sb, W, &m->proj, eb, t, GPU_EPI_BIAS, 0);
    st = gpu_rec_run(rec);
  }
  if (!st) st = gpu_download(sb, 0, rows, (size_t)t * W * sizeof *rows);
  for (uint32_t i = 0; !st && i < t; i++) memcpy(o->states + (size_t)i * c->d, rows + (size_t)i * W, c->d * sizeof *rows);
  if (!st) st = gpu_download(eb, 0, rows, (size_t)t * E * sizeof *rows);
  for (uint32_t i = 0; !st && i < t; i++)
    memcpy(o->embeds + (size_t)i * c->d_lm, rows + (size_t)i * E, c->d_lm * sizeof *rows);
  gpu_buffer_free(ab), gpu_buffer_free(sb), gpu_buffer_free(eb);
  free(act), free(rows);
  return st;
}

/* The diarization model: the stacked-frame projection of the raw features on
 * the GPU, then the steps; speaker probabilities and activities per frame. */
static int diarize(const nt_model *m, gpu_rec *rec, nt_audio *o) {
  const nt_config *c = &m->c;
  uint32_t t = o->t, S = c->speakers, w = gpu_linear_width(&m->diar.embed);
  diar_bufs b;
  gpu_buffer *feat = NULL, *eb = NULL;
  float *emb = mem_alloc((size_t)t * w, sizeof *emb);
  if (!emb) return STENO_ERR_NOMEM;
  int st = diar_bufs_new(m, &b);
  if (st) {
    free(emb);
    return st;
  }
  st = gpu_buffer_from(m->dev, o->features, (size_t)o->frames * c->mels * sizeof(float), &feat);
  if (!st) st = zeroed(m->dev, (size_t)t * w, &eb);
  if (!st) st = gpu_rec_begin(rec);
  if (!st) {
    gpu_gemm_strided(rec, feat, c->sub * c->mels, &m->diar.embed, eb, t, GPU_EPI_BIAS, 0);
    st = gpu_rec_run(rec);
  }
  if (!st) st = gpu_download(eb, 0, emb, (size_t)t * w * sizeof *emb);
  if (!st && w != b.w) st = err_set(STENO_ERR_INVALID, "diarization: rows of %u and %u", w, b.w);
  if (!st) st = diar_steps(m, rec, &b, emb, t, o->valid, o->speaker_logits);
  for (uint32_t i = 0; !st && i < t; i++) {
    pool(c, o->speaker_logits + (size_t)i * c->sub * S, 1, NULL, o->speaker_probs + (size_t)i * S);
    for (uint32_t s = 0; s < S; s++)
      o->activity[(size_t)i * S + s] = o->speaker_probs[(size_t)i * S + s] > c->threshold;
  }
  gpu_buffer_free(feat), gpu_buffer_free(eb);
  diar_bufs_free(&b);
  free(emb);
  return st;
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

int nt_audio_run(const nt_model *m, const float *pcm, size_t n, nt_audio *o) {
  const nt_config *c = &m->c;
  memset(o, 0, sizeof *o);
  gpu_rec *rec = NULL;
  gpu_buffer *asr = NULL;
  float *norm = NULL;
  int st = nt_features(m, pcm, n, &o->features, &o->frames, &o->valid);
  if (!st) {
    o->t = o->frames / c->sub;
    o->tokens = (o->valid + c->sub - 1) / c->sub;
    st = alloc_outputs(m, o);
  }
  size_t count = (size_t)o->frames * c->mels;
  if (!st) st = (norm = mem_alloc(count, sizeof *norm)) ? 0 : STENO_ERR_NOMEM;
  if (!st) {
    memcpy(norm, o->features, count * sizeof *norm);
    st = mel_normalize(norm, o->valid, (int)c->mels);
  }
  if (!st) st = gpu_rec_new(m->dev, &rec);
  if (!st) gpu_rec_profile(rec, "nemotron_transcribe towers");
  if (!st) st = zeroed(m->dev, (size_t)o->t * c->d, &asr);
  if (!st) st = asr_run(m, rec, norm, o->t, o->valid, asr);
  if (!st) st = gpu_download(asr, 0, o->asr, (size_t)o->t * c->d * sizeof(float));
  if (!st) st = diarize(m, rec, o);
  if (!st) st = combine(m, rec, asr, o);
  gpu_buffer_free(asr);
  gpu_rec_free(rec);
  free(norm);
  if (st) nt_audio_free(o);
  return st;
}
