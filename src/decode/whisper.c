#include "decode/whisper.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <zlib.h>

#include "base/error.h"
#include "base/mem.h"

static void mask(float *x, int from, int to) {
  for (int i = from < 0 ? 0 : from; i < to; i++) x[i] = -INFINITY;
}

/* The largest of x[from..to), NaN skipped; −∞ when none. Eight lanes the
 * compiler turns into vector max instructions (a token's rules scan the
 * 51866 logits three times). Equal to a fmaxf loop but for the sign of a zero
 * maximum, which no caller can tell: they compare it, or subtract it and add
 * it back. */
static float max_of(const float *x, int from, int to) {
  float lane[8], top = -INFINITY;
  for (int j = 0; j < 8; j++) lane[j] = -INFINITY;
  int i = from;
  for (; i + 8 <= to; i += 8)
    for (int j = 0; j < 8; j++) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  for (; i < to; i++) top = x[i] > top ? x[i] : top;
  for (int j = 0; j < 8; j++) top = lane[j] > top ? lane[j] : top;
  return top;
}

/* `best = 0; for i: if (x[i] > x[best]) best = i`: the first index of the
 * largest value, NaN never chosen, 0 where x[0] is NaN. */
static int argmax(const float *x, int n) {
  if (isnan(x[0])) return 0;
  float top = max_of(x, 0, n);
  int i = 0;
  while (x[i] != top) i++; /* x[0] is a number, so top is one that x holds */
  return i;
}

/* log Σ exp over x[from..to), in double; −∞ when empty or all −∞. */
static double logsumexp(const float *x, int from, int to) {
  float top = max_of(x, from, to);
  if (top == -INFINITY) return -INFINITY;
  double sum = 0;
  for (int i = from; i < to; i++) sum += exp((double)x[i] - top);
  return top + log(sum);
}

/* WhisperTimeStampLogitsProcessor: timestamps in pairs, never decreasing, the
 * first one early, and forced when they are likelier together than any text. */
static void timestamp_rules(const wsearch *s, const int *gen, size_t n, float *x) {
  int tb = wsearch_ts_begin(s), V = s->vocab;
  x[s->no_timestamps] = -INFINITY;
  bool last = n >= 1 && gen[n - 1] >= tb;
  bool penult = n < 2 || gen[n - 2] >= tb;
  if (last) {
    if (penult) mask(x, tb, V);      /* a pair is closed: text next */
    else mask(x, 0, s->eot);         /* an open pair: its timestamp or the end next */
  }
  int ts_last = -1;
  for (size_t i = n; i-- > 0;)
    if (gen[i] >= tb) {
      ts_last = gen[i];
      break;
    }
  /* Timestamps never go back; after a closed pair, not even the same one again. */
  if (ts_last >= 0) mask(x, tb, last && !penult ? ts_last : ts_last + 1);
  if (n == 0) {
    mask(x, 0, tb);
    if (s->max_initial >= 0 && tb + s->max_initial + 1 < V) mask(x, tb + s->max_initial + 1, V);
  }
  /* In log-probabilities both sides share the normalizer: compare the raw sums. */
  if (logsumexp(x, tb, V) > max_of(x, 0, tb)) mask(x, 0, tb);
}

void wsearch_process(const wsearch *s, const int *gen, size_t n, float *logits) {
  for (size_t i = 0; i < s->n_suppress; i++)
    if (s->suppress[i] >= 0 && s->suppress[i] < s->vocab) logits[s->suppress[i]] = -INFINITY;
  for (size_t i = 0; n == 0 && i < s->n_begin_suppress; i++)
    if (s->begin_suppress[i] >= 0 && s->begin_suppress[i] < s->vocab)
      logits[s->begin_suppress[i]] = -INFINITY;
  if (s->timestamps) timestamp_rules(s, gen, n, logits);
}

/* splitmix64: a uniform double in [0, 1). */
static double uniform(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

int wsearch_choose(const float *logits, int vocab, float temperature, uint64_t *rng) {
  int best = argmax(logits, vocab);
  if (temperature > 0) {
    double top = logits[best], sum = 0;
    for (int i = 0; i < vocab; i++) sum += exp(((double)logits[i] - top) / temperature);
    double u = uniform(rng) * sum, acc = 0;
    for (int i = 0; i < vocab; i++) {
      double p = exp(((double)logits[i] - top) / temperature);
      if (p == 0) continue;
      acc += p;
      best = i;
      if (acc > u) break;
    }
  }
  return best;
}

double wsearch_logprob(const float *logits, int vocab, int id) {
  return (double)logits[id] - logsumexp(logits, 0, vocab);
}

int wsearch_pick(const float *logits, int vocab, float temperature, uint64_t *rng, double *logprob) {
  int best = wsearch_choose(logits, vocab, temperature, rng);
  *logprob = wsearch_logprob(logits, vocab, best);
  return best;
}

double wsearch_prob(const float *logits, int vocab, int id) {
  return exp((double)logits[id] - logsumexp(logits, 0, vocab));
}

double wsearch_compression_ratio(const int *ids, size_t n, int vocab) {
  if (n == 0) return 0;
  int w = (int)(log2((double)vocab) / 8) + 1;
  size_t raw = n * (size_t)w;
  unsigned char *in = mem_alloc(raw, 1);
  uLongf cap = compressBound((uLong)raw);
  unsigned char *out = mem_alloc(cap, 1);
  double ratio = 0;
  if (in && out) {
    for (size_t i = 0; i < n; i++)
      for (int b = 0; b < w; b++) in[i * w + b] = (unsigned char)((unsigned)ids[i] >> (8 * b));
    if (compress2(out, &cap, in, (uLong)raw, Z_DEFAULT_COMPRESSION) == Z_OK) ratio = (double)raw / cap;
  }
  free(in);
  free(out);
  return ratio;
}

int wsearch_segments(const wsearch *s, const int *toks, size_t n, uint32_t frames, wseg **out,
                     size_t *nseg, uint32_t *advance) {
  *out = NULL, *nseg = 0;
  int tb = wsearch_ts_begin(s);
  wseg *segs = mem_alloc(n + 1, sizeof *segs);
  if (!segs) return STENO_ERR_NOMEM;
  bool single = n >= 2 && toks[n - 2] < tb && toks[n - 1] >= tb;
  size_t m = 0, last = 0;
  /* A segment ends wherever two timestamps meet; the slice boundary is the second. */
  for (size_t i = 0; i + 1 < n; i++) {
    if (!(toks[i] >= tb && toks[i + 1] >= tb)) continue;
    segs[m++] = (wseg){last, i + 1, (int64_t)(toks[last] - tb) * 20, (int64_t)(toks[i] - tb) * 20};
    last = i + 1;
  }
  if (m > 0) {
    if (single) {
      segs[m++] = (wseg){last, n, (int64_t)(toks[last] - tb) * 20, (int64_t)(toks[n - 1] - tb) * 20};
      *advance = frames;
    } else {
      /* The last pair closes the last segment: both its timestamps belong to it,
       * and whatever follows it is unfinished, decoded again from there. */
      wseg *l = &segs[m - 1];
      l->end += 1;
      *advance = (uint32_t)(toks[l->end - 2] - tb) * 2;
    }
  } else {
    int64_t end = (int64_t)(frames / 2) * 20;
    for (size_t i = n; i-- > 0;)
      if (toks[i] >= tb) {
        if (toks[i] != tb) end = (int64_t)(toks[i] - tb) * 20;
        break;
      }
    segs[m++] = (wseg){0, n, 0, end};
    *advance = frames;
  }
  *out = segs, *nseg = m;
  return 0;
}
