/* Sortformer's arrival-order speaker cache and FIFO in offline mode
 * (transformers' Nemotron3DiarizationSpeakerCache.update and _compress), on
 * the host: a few hundred frames per chunk. Scores are f32 as the reference's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/nemotron_transcribe/nemotron_transcribe.h"

int nt_spkcache_init(nt_spkcache *s, const nt_config *c, uint32_t dd) {
  memset(s, 0, sizeof *s);
  s->c = c;
  s->dd = dd;
  s->embeds = mem_alloc((size_t)c->cache * dd, sizeof *s->embeds);
  s->probs = mem_alloc((size_t)c->cache * c->speakers, sizeof *s->probs);
  s->fifo = mem_alloc((size_t)(c->fifo + 1) * dd, sizeof *s->fifo);
  if (!s->embeds || !s->probs || !s->fifo) {
    nt_spkcache_free(s);
    return STENO_ERR_NOMEM;
  }
  return 0;
}

void nt_spkcache_free(nt_spkcache *s) {
  free(s->embeds);
  free(s->probs);
  free(s->fifo);
  free(s->work);
  memset(s, 0, sizeof *s);
}

/* _get_frame_scores over n frames: log-odds against the other speakers'
 * silence, −inf where the speaker is not speaking, and −inf on its
 * non-positive frames when it has enough positive ones. */
static void frame_scores(const nt_config *c, const float *probs, uint32_t n, float *sc) {
  uint32_t S = c->speakers;
  float thr = c->pred_thr, half = logf(0.5f);
  for (uint32_t f = 0; f < n; f++) {
    const float *p = probs + (size_t)f * S;
    float sum = 0;
    for (uint32_t s = 0; s < S; s++) sum += logf(fmaxf(1.0f - p[s], thr));
    for (uint32_t s = 0; s < S; s++) {
      float v = logf(fmaxf(p[s], thr)) - logf(fmaxf(1.0f - p[s], thr)) + sum - half;
      sc[(size_t)f * S + s] = p[s] > 0.5f ? v : -INFINITY;
    }
  }
  for (uint32_t s = 0; s < S; s++) {
    uint32_t pos = 0;
    for (uint32_t f = 0; f < n; f++) pos += sc[(size_t)f * S + s] > 0;
    if (pos < c->min_pos) continue;
    for (uint32_t f = 0; f < n; f++)
      if (!(sc[(size_t)f * S + s] > 0) && probs[(size_t)f * S + s] > 0.5f)
        sc[(size_t)f * S + s] = -INFINITY;
  }
}

typedef struct {
  float v;
  uint32_t i;
} scored;

/* Larger first; equal values by index (torch's topk leaves ties unspecified). */
static int by_value(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

static int by_index(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Adds `boost` to each speaker's k best frames (_boost_scores). */
static void boost(const nt_config *c, float *sc, uint32_t n, uint32_t k, float boost, scored *tmp) {
  uint32_t S = c->speakers;
  if (k > n) k = n;
  for (uint32_t s = 0; s < S; s++) {
    for (uint32_t f = 0; f < n; f++) tmp[f] = (scored){sc[(size_t)f * S + s], f};
    qsort(tmp, n, sizeof *tmp, by_value);
    for (uint32_t j = 0; j < k; j++) sc[(size_t)tmp[j].i * S + s] += boost;
  }
}

/* Scratch of nt_spkcache_pick over n frames: scores, sort entries, indices. */
static size_t pick_bytes(const nt_config *c, uint32_t n) {
  size_t S = c->speakers, ns = (size_t)n + c->sil;
  return n * S * sizeof(float) + ns * S * (sizeof(scored) + sizeof(uint32_t)) + 32;
}

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* nt_spkcache_pick in the scratch at w (pick_bytes(c, n) of it). */
static void pick_in(const nt_config *c, const float *probs, uint32_t n, uint32_t *pick, char *w) {
  uint32_t S = c->speakers, L = c->cache, ns = n + c->sil;
  float *sc = (float *)w;
  scored *tmp = (scored *)(w + round16((size_t)n * S * sizeof *sc));
  uint32_t *idx = (uint32_t *)((char *)tmp + round16((size_t)ns * S * sizeof *tmp));
  frame_scores(c, probs, n, sc);
  for (uint32_t f = L; f < n; f++)
    for (uint32_t s = 0; s < S; s++) sc[(size_t)f * S + s] += c->latest_boost;
  boost(c, sc, n, c->n_strong, -2.0f * logf(0.5f), tmp);
  boost(c, sc, n, c->n_weak, -logf(0.5f), tmp);
  /* The silence slots score +inf: always kept. Then the best finite scores;
   * −inf ones would become the silence sentinel, so they are left out. */
  uint32_t nfin = 0, nidx = 0;
  for (uint32_t s = 0; s < S; s++) {
    for (uint32_t f = 0; f < n; f++)
      if (sc[(size_t)f * S + s] > -INFINITY) tmp[nfin++] = (scored){sc[(size_t)f * S + s], s * ns + f};
    for (uint32_t j = 0; j < c->sil; j++) idx[nidx++] = s * ns + n + j;
  }
  qsort(tmp, nfin, sizeof *tmp, by_value);
  for (uint32_t j = 0; j < nfin && nidx < L; j++) idx[nidx++] = tmp[j].i;
  qsort(idx, nidx, sizeof *idx, by_index);
  for (uint32_t j = 0; j < L; j++) {
    uint32_t f = j < nidx ? idx[j] % ns : n;
    pick[j] = f < n ? f : n;
  }
}

int nt_spkcache_pick(const nt_config *c, const float *probs, uint32_t n, uint32_t *pick) {
  char *w = mem_alloc(pick_bytes(c, n), 1);
  if (!w) return STENO_ERR_NOMEM;
  pick_in(c, probs, n, pick, w);
  free(w);
  return 0;
}

/* The next `bytes` of the step's scratch (reserved beforehand), 16-aligned. */
static void *carve(nt_spkcache *s, size_t *at, size_t bytes) {
  void *p = (char *)s->work + *at;
  *at += round16(bytes);
  return p;
}

/* Grows the scratch to `bytes`: once warm, steps allocate nothing. */
static int reserve(nt_spkcache *s, size_t bytes) {
  if (bytes <= s->work_cap) return 0;
  void *w = realloc(s->work, bytes);
  if (!w) return STENO_ERR_NOMEM;
  s->work = w;
  s->work_cap = bytes;
  return 0;
}

/* Keeps c->cache of n frames (embeds [n][dd], probs [n][S]) in place; its
 * scratch from *at. */
static void compress(nt_spkcache *s, float *embeds, float *probs, uint32_t n, const float *sil,
                     size_t *at) {
  const nt_config *c = s->c;
  uint32_t S = c->speakers, L = c->cache;
  uint32_t *pick = carve(s, at, (size_t)L * sizeof *pick);
  pick_in(c, probs, n, pick, carve(s, at, pick_bytes(c, n)));
  for (uint32_t j = 0; j < L; j++) {
    uint32_t f = pick[j];
    memcpy(s->embeds + (size_t)j * s->dd, f < n ? embeds + (size_t)f * s->dd : sil,
           s->dd * sizeof *embeds);
    for (uint32_t k = 0; k < S; k++) s->probs[(size_t)j * S + k] = f < n ? probs[(size_t)f * S + k] : 0;
  }
}

/* Moves `popped` FIFO frames (fifo [popped][dd], their probs fprobs) behind the
 * cache, whose probabilities are cprobs [n_cache][S]; compresses on overflow. */
static void to_cache(nt_spkcache *s, const float *fifo, const float *fprobs, uint32_t popped,
                     const float *cprobs, const float *sil, size_t *at) {
  const nt_config *c = s->c;
  uint32_t S = c->speakers, n = s->n_cache + popped, dd = s->dd;
  float *e = carve(s, at, (size_t)n * dd * sizeof *e), *p = carve(s, at, (size_t)n * S * sizeof *p);
  memcpy(e, s->embeds, (size_t)s->n_cache * dd * sizeof *e);
  memcpy(e + (size_t)s->n_cache * dd, fifo, (size_t)popped * dd * sizeof *e);
  memcpy(p, cprobs, (size_t)s->n_cache * S * sizeof *p);
  memcpy(p + (size_t)s->n_cache * S, fprobs, (size_t)popped * S * sizeof *p);
  if (n > c->cache) {
    compress(s, e, p, n, sil, at);
    s->compressed = true;
    n = c->cache;
  } else {
    memcpy(s->embeds, e, (size_t)n * dd * sizeof *e);
    memcpy(s->probs, p, (size_t)n * S * sizeof *p);
  }
  s->n_cache = n;
}

/* The scratch a step needs: the FIFO and chunk frames with their and the
 * cache's probabilities, then to_cache's and compress's. */
static size_t step_bytes(const nt_spkcache *s, uint32_t total, uint32_t popped) {
  const nt_config *c = s->c;
  size_t S = c->speakers, dd = s->dd, nc = s->n_cache, n = nc + popped, f = sizeof(float);
  size_t b = total * (dd + S) * f + (nc * S + 1) * f + n * (dd + S) * f;
  return b + c->cache * sizeof(uint32_t) + pick_bytes(c, (uint32_t)n) + 8 * 16;
}

int nt_spkcache_update(nt_spkcache *s, const float *input, const float *probs, uint32_t n,
                       uint32_t lookback, uint32_t n_chunk, const float *sil_emb) {
  const nt_config *c = s->c;
  uint32_t S = c->speakers, dd = s->dd, nc = s->n_cache, nf = s->n_fifo;
  uint32_t start = nc + nf + lookback, total = nf + n_chunk;
  if (start + n_chunk > n)
    return err_set(STENO_ERR_INVALID, "speaker cache: chunk %u+%u of %u frames", start, n_chunk, n);
  uint32_t popped = 0;
  if (total > c->fifo) {
    popped = c->update > total - c->fifo ? c->update : total - c->fifo;
    if (popped > total) popped = total;
  }
  TRY(reserve(s, step_bytes(s, total, popped)));
  /* The FIFO frames then the chunk's, with their probabilities from this step. */
  size_t at = 0;
  float *fe = carve(s, &at, (size_t)total * dd * sizeof *fe);
  float *fp = carve(s, &at, (size_t)total * S * sizeof *fp);
  float *cp = carve(s, &at, ((size_t)nc * S + 1) * sizeof *cp);
  memcpy(fe, s->fifo, (size_t)nf * dd * sizeof *fe);
  memcpy(fe + (size_t)nf * dd, input + (size_t)start * dd, (size_t)n_chunk * dd * sizeof *fe);
  memcpy(fp, probs + (size_t)nc * S, (size_t)nf * S * sizeof *fp);
  memcpy(fp + (size_t)nf * S, probs + (size_t)start * S, (size_t)n_chunk * S * sizeof *fp);
  /* A plain cache's probabilities are this step's estimates; a compressed
   * one is out of order, so the stored ones are kept. */
  memcpy(cp, s->compressed ? s->probs : probs, (size_t)nc * S * sizeof *cp);
  if (popped) to_cache(s, fe, fp, popped, cp, sil_emb, &at);
  s->n_fifo = total - popped;
  memcpy(s->fifo, fe + (size_t)popped * dd, (size_t)s->n_fifo * dd * sizeof *fe);
  return 0;
}
