/* Sortformer's streaming update and speaker-cache compression, as NeMo's
 * SortformerModules.streaming_update (synchronous) and _compress_spkcache do
 * them, in f32 in the reference's order of operations. Top-k picks break ties
 * toward the lower index (spec §4.5). */
#include "models/sortformer/stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

#define SIL_PER_SPK 3        /* silent slots appended per speaker */
#define PRED_FLOOR 0.25f     /* probabilities clamped to [0.25, 0.75] in the scores */
#define BOOST_LATEST 0.05f   /* added to the scores of frames new to the cache */
#define SIL_THRESHOLD 0.2f   /* a frame whose summed p is below this is silence */

uint32_t sf_stream_max_frames(const sf_stream_config *c) {
  return c->cache + c->fifo + c->lc + c->chunk + c->rc;
}

int sf_stream_init(sf_stream *s, const sf_stream_config *c) {
  memset(s, 0, sizeof *s);
  if (c->speakers < 1 || c->speakers > 64 || c->d < 1 || c->chunk < 1 || c->period < 1 ||
      c->cache < (1 + SIL_PER_SPK) * c->speakers || c->cache > 100000 || c->fifo > 100000 ||
      c->chunk > 100000 || c->lc > 64 || c->rc > 64)
    return err_set(STENO_ERR_FORMAT,
                   "sortformer: stream of chunk %u, cache %u, fifo %u, period %u for %u speakers "
                   "is not valid (the cache needs %d frames per speaker)",
                   c->chunk, c->cache, c->fifo, c->period, c->speakers, 1 + SIL_PER_SPK);
  s->c = *c;
  size_t d = c->d, k = c->speakers, cache = (size_t)c->cache + c->fifo + c->chunk,
         fifo = (size_t)c->fifo + c->chunk;
  s->cache = mem_alloc(cache, d * sizeof(float));
  s->cache_p = mem_alloc(cache, k * sizeof(float));
  s->fifo = mem_alloc(fifo, d * sizeof(float));
  s->fifo_p = mem_alloc(fifo, k * sizeof(float));
  s->sil = mem_alloc(d, sizeof(float));
  if (!s->cache || !s->cache_p || !s->fifo || !s->fifo_p || !s->sil) {
    sf_stream_free(s);
    return STENO_ERR_NOMEM;
  }
  return 0;
}

void sf_stream_free(sf_stream *s) {
  free(s->cache), free(s->cache_p), free(s->fifo), free(s->fifo_p), free(s->sil), free(s->out);
  memset(s, 0, sizeof *s);
}

/* The running mean of silent frames' embeddings over n popped frames. */
static void silence(sf_stream *s, const float *emb, const float *p, uint32_t n) {
  size_t d = s->c.d, k = s->c.speakers;
  uint32_t count = 0;
  for (uint32_t t = 0; t < n; t++) {
    float sum = 0;
    for (size_t j = 0; j < k; j++) sum += p[t * k + j];
    count += sum < SIL_THRESHOLD;
  }
  if (!count) return;
  for (size_t j = 0; j < d; j++) {
    float add = 0;
    for (uint32_t t = 0; t < n; t++) {
      float sum = 0;
      for (size_t q = 0; q < k; q++) sum += p[t * k + q];
      if (sum < SIL_THRESHOLD) add += emb[t * d + j];
    }
    s->sil[j] = (s->sil[j] * (float)s->n_sil + add) / (float)(s->n_sil + count);
  }
  s->n_sil += count;
}

static int append_out(sf_stream *s, const float *p, uint32_t n) {
  size_t k = s->c.speakers;
  if (s->n_out + n > s->cap_out) {
    size_t cap = (s->n_out + n) * 2;
    float *o = realloc(s->out, cap * k * sizeof *o);
    if (!o) return STENO_ERR_NOMEM;
    s->out = o;
    s->cap_out = cap;
  }
  memcpy(s->out + s->n_out * k, p, (size_t)n * k * sizeof *p);
  s->n_out += n;
  return 0;
}

/* Moves the first pop FIFO frames onto the cache, compressing it when over size. */
static int pop_to_cache(sf_stream *s, uint32_t pop, const float *preds) {
  size_t d = s->c.d, k = s->c.speakers;
  silence(s, s->fifo, s->fifo_p, pop);
  /* Until the first compression the cache's predictions are the fresh ones. */
  if (!s->compressed) memcpy(s->cache_p, preds, (size_t)s->n_cache * k * sizeof *preds);
  memcpy(s->cache + s->n_cache * d, s->fifo, pop * d * sizeof *s->fifo);
  memcpy(s->cache_p + s->n_cache * k, s->fifo_p, pop * k * sizeof *s->fifo_p);
  s->n_cache += pop;
  s->n_fifo -= pop;
  memmove(s->fifo, s->fifo + pop * d, s->n_fifo * d * sizeof *s->fifo);
  memmove(s->fifo_p, s->fifo_p + pop * k, s->n_fifo * k * sizeof *s->fifo_p);
  if (s->n_cache <= s->c.cache) return 0;
  float *e = mem_alloc(s->c.cache, d * sizeof *e), *p = mem_alloc(s->c.cache, k * sizeof *p);
  int st = e && p ? sf_compress(&s->c, s->cache, s->cache_p, s->n_cache, s->sil, e, p)
                  : STENO_ERR_NOMEM;
  if (!st) {
    memcpy(s->cache, e, s->c.cache * d * sizeof *e);
    memcpy(s->cache_p, p, s->c.cache * k * sizeof *p);
    s->n_cache = s->c.cache;
    s->compressed = true;
    s->compressions++;
  }
  free(e);
  free(p);
  return st;
}

int sf_stream_update(sf_stream *s, const float *win, uint32_t t_win, uint32_t lc, uint32_t rc,
                     const float *preds) {
  const sf_stream_config *c = &s->c;
  size_t d = c->d, k = c->speakers;
  uint32_t S = s->n_cache, F = s->n_fifo;
  if (lc + rc > t_win || t_win - lc - rc > c->chunk)
    return err_set(STENO_ERR_INVALID, "sortformer: a window of %u frames with context %u + %u",
                   t_win, lc, rc);
  uint32_t C = t_win - lc - rc;
  const float *chunk_p = preds + ((size_t)S + F + lc) * k;
  /* The FIFO's predictions are refreshed, then the chunk joins it. */
  memcpy(s->fifo_p, preds + (size_t)S * k, F * k * sizeof *preds);
  memcpy(s->fifo + F * d, win + lc * d, C * d * sizeof *win);
  memcpy(s->fifo_p + F * k, chunk_p, C * k * sizeof *preds);
  s->n_fifo = F + C;
  if (F + C > c->fifo) {
    uint32_t pop = c->period;
    if (C + F > c->fifo && C + F - c->fifo > pop) pop = C + F - c->fifo;
    if (pop > F + C) pop = F + C;
    TRY(pop_to_cache(s, pop, preds));
  }
  return append_out(s, chunk_p, C);
}

/* ---- compression (AOSC) ---- */

typedef struct {
  float v;
  uint32_t i;
} ranked;

/* Larger first; equal values by the lower index. */
static int by_rank(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* The k largest of v[0..n) (k ≤ n) into idx, ties to the lower index. */
static void top_k(const float *v, uint32_t n, uint32_t k, ranked *tmp, uint32_t *idx) {
  for (uint32_t i = 0; i < n; i++) tmp[i] = (ranked){v[i], i};
  qsort(tmp, n, sizeof *tmp, by_rank);
  for (uint32_t i = 0; i < k; i++) idx[i] = tmp[i].i;
}

/* Scores [speaker][n] of each frame: high where one speaker speaks alone and
 * surely; −∞ where the speaker is silent, or overlapped once it has enough
 * frames alone; new frames (index ≥ cache) favoured a little. */
static void frame_scores(const sf_stream_config *c, const float *p, uint32_t n, float *sc) {
  uint32_t k = c->speakers, per = c->cache / k - SIL_PER_SPK;
  uint32_t min_pos = (uint32_t)floor(per * 0.5);
  const float log_half = (float)log(0.5);
  for (uint32_t t = 0; t < n; t++) {
    float l1[64], sum = 0;
    for (uint32_t j = 0; j < k; j++) sum += l1[j] = logf(fmaxf(1.0f - p[t * k + j], PRED_FLOOR));
    for (uint32_t j = 0; j < k; j++) {
      float q = p[t * k + j];
      float v = logf(fmaxf(q, PRED_FLOOR)) - l1[j] + sum - log_half;
      sc[j * n + t] = q > 0.5f ? v : -INFINITY;
    }
  }
  for (uint32_t j = 0; j < k; j++) {
    float *s = sc + (size_t)j * n;
    uint32_t pos = 0;
    for (uint32_t t = 0; t < n; t++) pos += s[t] > 0;
    for (uint32_t t = 0; t < n; t++)
      if (pos >= min_pos && !(s[t] > 0)) s[t] = -INFINITY;
    for (uint32_t t = c->cache; t < n; t++) s[t] += BOOST_LATEST;
  }
}

/* Each speaker's strongest frames are boosted (twice −log ½ for the first
 * 0.75·per, once more for the first 1.5·per), so that every speaker keeps
 * some frames and none fills the cache alone. */
static void boost(const sf_stream_config *c, float *sc, uint32_t n, ranked *tmp, uint32_t *idx) {
  uint32_t k = c->speakers, per = c->cache / k - SIL_PER_SPK;
  uint32_t counts[2] = {(uint32_t)floor(per * 0.75), (uint32_t)floor(per * 1.5)};
  float gains[2] = {(float)(-2.0 * log(0.5)), (float)(-log(0.5))};
  for (int b = 0; b < 2; b++) {
    uint32_t m = counts[b] < n ? counts[b] : n;
    for (uint32_t j = 0; j < k; j++) {
      float *s = sc + (size_t)j * n;
      top_k(s, n, m, tmp, idx);
      for (uint32_t i = 0; i < m; i++) s[idx[i]] += gains[b];
    }
  }
}

static int by_index(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

int sf_compress(const sf_stream_config *c, const float *emb, const float *p, uint32_t n,
                const float *sil, float *out_emb, float *out_p) {
  uint32_t k = c->speakers, rows = n + SIL_PER_SPK, total = rows * k;
  size_t d = c->d;
  float *sc = mem_alloc((size_t)n * k, sizeof *sc), *flat = mem_alloc(total, sizeof *flat);
  ranked *tmp = mem_alloc(total, sizeof *tmp);
  uint32_t *idx = mem_alloc(total, sizeof *idx);
  if (!sc || !flat || !tmp || !idx) {
    free(sc), free(flat), free(tmp), free(idx);
    return STENO_ERR_NOMEM;
  }
  frame_scores(c, p, n, sc);
  boost(c, sc, n, tmp, idx);
  /* Speaker-major with SIL_PER_SPK silent slots (+∞: always kept) after each speaker. */
  for (uint32_t j = 0; j < k; j++)
    for (uint32_t t = 0; t < rows; t++) flat[j * rows + t] = t < n ? sc[j * n + t] : INFINITY;
  top_k(flat, total, c->cache, tmp, idx);
  const uint32_t none = UINT32_MAX; /* a −∞ pick: no frame */
  for (uint32_t i = 0; i < c->cache; i++)
    if (flat[idx[i]] == -INFINITY) idx[i] = none;
  qsort(idx, c->cache, sizeof *idx, by_index);
  for (uint32_t i = 0; i < c->cache; i++) {
    uint32_t t = idx[i] == none ? n : idx[i] % rows;
    bool off = t >= n;
    memcpy(out_emb + i * d, off ? sil : emb + t * d, d * sizeof *emb);
    for (uint32_t j = 0; j < k; j++) out_p[i * k + j] = off ? 0.0f : p[t * k + j];
  }
  free(sc), free(flat), free(tmp), free(idx);
  return 0;
}
