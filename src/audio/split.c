#include "audio/split.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pool.h"

enum { WINDOW = 30 /* frames: 300 ms */ };

/* A splitter reading `read`, or (read NULL) the n samples at mem. */
static int init(splitter *s, double seconds, split_read_fn read, void *user, const float *mem,
                size_t n) {
  memset(s, 0, sizeof *s);
  if (!(seconds >= 2.0 && seconds <= 3600.0))
    return err_set(STENO_ERR_INVALID, "piece length %g s: must be 2 s to 1 hour", seconds);
  s->read = read;
  s->user = user;
  s->mem = mem, s->mem_n = n;
  s->piece = (size_t)(seconds * SPLIT_RATE) / SPLIT_FRAME * SPLIT_FRAME;
  s->cap = s->piece + SPLIT_RATE;
  size_t most = read || n > s->cap ? s->cap : n; /* the longest piece it can hand out */
  if (read) s->buf = mem_alloc(s->cap, sizeof *s->buf);
  s->band = mem_alloc(most ? most : 1, sizeof *s->band);
  s->scratch = mem_alloc(most / SPLIT_FRAME + 1, sizeof *s->scratch);
  if ((read && !s->buf) || !s->band || !s->scratch) {
    split_free(s);
    return STENO_ERR_NOMEM;
  }
  return 0;
}

int split_init(splitter *s, double seconds, split_read_fn read, void *user) {
  if (!read) return err_set(STENO_ERR_INVALID, "split_init: no reader");
  return init(s, seconds, read, user, NULL, 0);
}

int split_init_memory(splitter *s, double seconds, const float *pcm, size_t n) {
  if (!pcm && n) return err_set(STENO_ERR_INVALID, "split_init_memory: NULL samples");
  return init(s, seconds, NULL, NULL, pcm, n);
}

void split_free(splitter *s) {
  free(s->buf);
  free(s->band);
  free(s->scratch);
  memset(s, 0, sizeof *s);
}

static double frame_energy(const float *x) {
  double e = 0;
  for (int i = 0; i < SPLIT_FRAME; i++) e += (double)x[i] * x[i];
  return e;
}

size_t split_cut(const float *pcm, size_t lo, size_t hi, double *e) {
  size_t f0 = (lo + SPLIT_FRAME - 1) / SPLIT_FRAME, f1 = hi / SPLIT_FRAME; /* frames inside */
  if (f1 <= f0) return f0 * SPLIT_FRAME <= hi ? f0 * SPLIT_FRAME : lo;
  size_t nf = f1 - f0, w = nf < WINDOW ? nf : WINDOW;
  for (size_t f = 0; f < nf; f++) e[f] = frame_energy(pcm + (f0 + f) * SPLIT_FRAME);
  /* Window sums over [f, f + w): pass 1 finds the quietest, pass 2 the
   * latest within twice of it (recomputed: no second array). */
  double sum = 0, least = INFINITY;
  for (size_t f = 0; f < nf; f++) {
    sum += e[f] - (f >= w ? e[f - w] : 0);
    if (f + 1 >= w && sum < least) least = sum;
  }
  size_t best = 0;
  sum = 0;
  for (size_t f = 0; f < nf; f++) {
    sum += e[f] - (f >= w ? e[f - w] : 0);
    if (f + 1 >= w && sum <= 2 * least * (1 + 1e-9)) best = f + 1 - w;
  }
  size_t cut = best;
  for (size_t f = best; f < best + w; f++)
    if (e[f] < e[cut]) cut = f;
  return (f0 + cut) * SPLIT_FRAME;
}

/* ---- the gate ---- */

enum {
  VOICED_MIN = 10,   /* frames: 100 ms of voicing, a syllable's vowel */
  PITCH_WINDOW = 480, /* 30 ms: two periods at the lowest pitch */
  LAG_MIN = 32,      /* 500 Hz */
  LAG_MAX = 320,     /* 50 Hz */
  HIST_BINS = 400,   /* 0.25 dB bins over −100..0 dBFS, for the floor */
};

/* One RBJ-cookbook Butterworth biquad (Q = 1/√2) and its state. */
typedef struct {
  double b0, b1, a1, a2, x1, x2, y1, y2;
} biquad;

static biquad biquad_new(double hz, bool high) {
  double w = 2 * M_PI * hz / SPLIT_RATE, c = cos(w), alpha = sin(w) / (2 * M_SQRT1_2);
  double b1 = high ? -(1 + c) : 1 - c, b0 = (high ? 1 + c : 1 - c) / 2, a0 = 1 + alpha;
  return (biquad){.b0 = b0 / a0, .b1 = b1 / a0, .a1 = -2 * c / a0, .a2 = (1 - alpha) / a0};
}

/* The next output for input x (in double, rounded to float as it leaves). */
static inline float biquad_step(biquad *q, float x) {
  double y = q->b0 * x + q->b1 * q->x1 + q->b0 * q->x2 - q->a1 * q->y1 - q->a2 * q->y2;
  q->x2 = q->x1, q->x1 = x, q->y2 = q->y1, q->y1 = y;
  return (float)y;
}

/* band = pcm through the speech band's two biquads (150 Hz high-pass, then
 * 1 kHz low-pass) and e[f] = frame f's mean energy there. The two filters run
 * in one pass, so their chains of dependent operations overlap.
 *
 * In chunks of BAND_CHUNK samples that can run side by side: a chunk's filters
 * start from rest BAND_WARM samples before it (the first chunk at the start,
 * as one pass over the whole piece does), and their response to that start
 * has died away by the chunk: the slower filter's poles have radius 0.959, so
 * it is down to 0.959^1024 ≈ 3e-19 of the signal before it. So the chunks
 * give what one pass gives, whatever the number of threads: the same bits but
 * for a float's last bit in near-silence right after loud sound, where 3e-19
 * of it still shows (tests/test_split.c). */
enum { BAND_CHUNK = 100 * SPLIT_FRAME /* 1 s */, BAND_WARM = 1024 };

static void band_chunk(const float *pcm, size_t n, size_t chunk, float *band, double *e) {
  biquad hp = biquad_new(150, true), lp = biquad_new(1000, false);
  size_t lo = chunk * BAND_CHUNK, hi = lo + BAND_CHUNK < n ? lo + BAND_CHUNK : n;
  for (size_t i = lo > BAND_WARM ? lo - BAND_WARM : 0; i < lo; i++)
    biquad_step(&lp, biquad_step(&hp, pcm[i]));
  size_t i = lo;
  for (size_t f = lo / SPLIT_FRAME; f < hi / SPLIT_FRAME; f++) {
    double sum = 0;
    for (int k = 0; k < SPLIT_FRAME; k++, i++) {
      float y = biquad_step(&lp, biquad_step(&hp, pcm[i]));
      band[i] = y;
      sum += (double)y * y;
    }
    e[f] = sum / SPLIT_FRAME;
  }
  for (; i < hi; i++) band[i] = biquad_step(&lp, biquad_step(&hp, pcm[i]));
}

/* The 10th percentile of frame energies, to 0.25 dB, from a histogram of
 * their levels (no sort, no second array). */
static double noise_floor(const double *e, size_t nf) {
  size_t count[HIST_BINS] = {0};
  for (size_t f = 0; f < nf; f++) {
    double db = e[f] > 1e-10 ? 10 * log10(e[f]) : -100;
    int bin = (int)((db + 100) * 4);
    count[bin < 0 ? 0 : bin >= HIST_BINS ? HIST_BINS - 1 : bin]++;
  }
  size_t seen = 0;
  int bin = 0;
  while (bin < HIST_BINS - 1 && (seen += count[bin]) <= nf / 10) bin++;
  return pow(10, (bin / 4.0 - 100) / 10);
}

enum { LAGS = LAG_MAX - LAG_MIN + 1, LAG_BLOCK = 32 };

/* c[l] = Σ_i x[i]·x[i + LAG_MIN + l] over the window, for every lag. The
 * lags go LAG_BLOCK at a time, each x[i] read once per block: the compiler
 * keeps the block's sums in vector registers, and 32 of them are 16 chains
 * of adds that run side by side where 8 were 4, each add waiting on the one
 * before (a window 58 → 26.5 µs on the development machine; 48 was level,
 * 64 spilled). Each sum still adds its products in order of i (and a
 * product of two floats is exact in double), so every c[l] has the bits of
 * the plain loop, one lag at a time. */
static void correlations(const float *x, double *c) {
  int l = 0;
  for (; l + LAG_BLOCK <= LAGS; l += LAG_BLOCK) {
    double s[LAG_BLOCK] = {0};
    const float *y = x + LAG_MIN + l;
    for (int i = 0; i < PITCH_WINDOW; i++) {
      double xi = x[i];
      for (int b = 0; b < LAG_BLOCK; b++) s[b] += xi * y[i + b];
    }
    memcpy(c + l, s, sizeof s);
  }
  for (; l < LAGS; l++) {
    double s = 0;
    for (int i = 0; i < PITCH_WINDOW; i++) s += (double)x[i] * x[i + LAG_MIN + l];
    c[l] = s;
  }
}

double split_periodicity(const float *x) {
  double c[LAGS], e0 = 0, el = 0, best = 0;
  correlations(x, c);
  for (int i = 0; i < PITCH_WINDOW; i++) e0 += (double)x[i] * x[i];
  for (int i = LAG_MIN; i < LAG_MIN + PITCH_WINDOW; i++) el += (double)x[i] * x[i];
  for (int lag = LAG_MIN; lag <= LAG_MAX; lag++) {
    double r = c[lag - LAG_MIN];
    if (e0 > 0 && el > 0 && r / sqrt(e0 * el) > best) best = r / sqrt(e0 * el);
    el += (double)x[lag + PITCH_WINDOW] * x[lag + PITCH_WINDOW] - (double)x[lag] * x[lag];
  }
  return best;
}

/* The gate's work, in 1 s chunks run side by side: the speech band first,
 * then the voicing test of each chunk's loud frames, which stops everywhere
 * once VOICED_MIN are found. */
typedef struct {
  const float *pcm;
  size_t n, nf;
  float *band;
  double *e, above;
  atomic_int voiced;
} gate_job;

static void gate_band(void *ctx, int chunk) {
  gate_job *g = ctx;
  band_chunk(g->pcm, g->n, (size_t)chunk, g->band, g->e);
}

static void gate_voicing(void *ctx, int chunk) {
  gate_job *g = ctx;
  size_t f0 = (size_t)chunk * (BAND_CHUNK / SPLIT_FRAME), f1 = f0 + BAND_CHUNK / SPLIT_FRAME;
  for (size_t f = f0; f < f1 && f < g->nf && f * SPLIT_FRAME + PITCH_WINDOW + LAG_MAX + 1 <= g->n; f++) {
    if (atomic_load_explicit(&g->voiced, memory_order_relaxed) >= VOICED_MIN) return;
    if (g->e[f] >= g->above && split_periodicity(g->band + f * SPLIT_FRAME) >= 0.6)
      atomic_fetch_add_explicit(&g->voiced, 1, memory_order_relaxed);
  }
}

bool split_quiet(const float *pcm, size_t n, float *band, double *e) {
  size_t nf = n / SPLIT_FRAME;
  if (nf == 0) return true;
  gate_job g = {.pcm = pcm, .n = n, .nf = nf, .band = band, .e = e};
  /* The chunks run on the pool lent to this thread, or here in order. */
  int chunks = (int)((n + BAND_CHUNK - 1) / BAND_CHUNK);
  pool_run_lent(chunks, gate_band, &g);
  size_t w = nf < WINDOW ? nf : WINDOW;
  double sum = 0, loudest = 0;
  for (size_t f = 0; f < nf; f++) {
    sum += e[f] - (f >= w ? e[f - w] : 0);
    if (f + 1 >= w && sum / w > loudest) loudest = sum / w;
  }
  if (loudest < 1e-6) return true; /* −60 dBFS */
  double floor = noise_floor(e, nf);
  g.above = 10 * (floor > 1e-8 ? floor : 1e-8); /* 10 dB, ≥ −70 dBFS */
  atomic_init(&g.voiced, 0);
  pool_run_lent(chunks, gate_voicing, &g);
  return atomic_load(&g.voiced) < VOICED_MIN;
}

/* Refills the buffer to its capacity, or to the end of the stream. */
static int fill(splitter *s) {
  while (!s->eof && s->have < s->cap) {
    size_t got = 0;
    TRY(s->read(s->user, s->buf + s->have, s->cap - s->have, &got));
    if (got > s->cap - s->have) return err_set(STENO_ERR_INVALID, "audio source: read too much");
    s->have += got;
    if (!got) s->eof = true;
  }
  return 0;
}

int split_next(splitter *s, const float **pcm, size_t *n, size_t *offset, bool *quiet) {
  const float *at;
  s->offset += s->used;
  if (!s->read) { /* split_init_memory's: the next cap samples as they lie */
    size_t left = s->mem_n - s->offset;
    s->have = left < s->cap ? left : s->cap;
    s->eof = s->have == left;
    at = left ? s->mem + s->offset : s->mem;
  } else {
    memmove(s->buf, s->buf + s->used, (s->have - s->used) * sizeof *s->buf);
    s->have -= s->used;
    s->used = 0; /* what a failed fill leaves: the next call moves nothing */
    TRY(fill(s));
    at = s->buf;
  }
  s->used = 0;
  size_t len = s->have;
  if (len > s->piece) {
    /* At the end, keep the last piece at least 1 s long. */
    size_t hi = s->eof && s->have - SPLIT_RATE < s->piece ? s->have - SPLIT_RATE : s->piece;
    len = split_cut(at, s->piece / 2, hi, s->scratch);
  }
  s->used = len;
  *pcm = at;
  *n = len;
  *offset = s->offset;
  *quiet = len ? split_quiet(at, len, s->band, s->scratch) : true;
  return 0;
}
