#include "audio/split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

enum { WINDOW = 30 /* frames: 300 ms */ };

int split_init(splitter *s, double seconds, split_read_fn read, void *user) {
  memset(s, 0, sizeof *s);
  if (!(seconds >= 2.0 && seconds <= 3600.0))
    return err_set(STENO_ERR_INVALID, "piece length %g s: must be 2 s to 1 hour", seconds);
  s->read = read;
  s->user = user;
  s->piece = (size_t)(seconds * SPLIT_RATE) / SPLIT_FRAME * SPLIT_FRAME;
  s->cap = s->piece + SPLIT_RATE;
  s->buf = mem_alloc(s->cap, sizeof *s->buf);
  s->scratch = mem_alloc(s->cap / SPLIT_FRAME + 1, sizeof *s->scratch);
  if (!s->buf || !s->scratch) {
    split_free(s);
    return STENO_ERR_NOMEM;
  }
  return 0;
}

void split_free(splitter *s) {
  free(s->buf);
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

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

bool split_quiet(const float *pcm, size_t n, double *e) {
  size_t nf = n / SPLIT_FRAME;
  if (nf == 0) return true;
  /* One-pole high-pass at 200 Hz: y[i] = a·(y[i−1] + x[i] − x[i−1]). */
  const double a = exp(-2 * M_PI * 200.0 / SPLIT_RATE);
  double y = 0, prev = pcm[0];
  for (size_t f = 0; f < nf; f++) {
    double sum = 0;
    for (size_t i = f * SPLIT_FRAME; i < (f + 1) * SPLIT_FRAME; i++) {
      y = a * (y + pcm[i] - prev);
      prev = pcm[i];
      sum += y * y;
    }
    e[f] = sum / SPLIT_FRAME;
  }
  size_t w = nf < WINDOW ? nf : WINDOW;
  double sum = 0, loudest = 0;
  for (size_t f = 0; f < nf; f++) {
    sum += e[f] - (f >= w ? e[f - w] : 0);
    if (f + 1 >= w && sum / w > loudest) loudest = sum / w;
  }
  qsort(e, nf, sizeof *e, cmp_double);
  double floor = e[nf / 10];
  return loudest < 1e-6 || loudest < floor * 2.5; /* −60 dBFS; 4 dB */
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
  memmove(s->buf, s->buf + s->used, (s->have - s->used) * sizeof *s->buf);
  s->have -= s->used;
  s->offset += s->used;
  s->used = 0;
  TRY(fill(s));
  size_t len = s->have;
  if (len > s->piece) {
    /* At the end, keep the last piece at least 1 s long. */
    size_t hi = s->eof && s->have - SPLIT_RATE < s->piece ? s->have - SPLIT_RATE : s->piece;
    len = split_cut(s->buf, s->piece / 2, hi, s->scratch);
  }
  s->used = len;
  *pcm = s->buf;
  *n = len;
  *offset = s->offset;
  *quiet = len ? split_quiet(s->buf, len, s->scratch) : true;
  return 0;
}
