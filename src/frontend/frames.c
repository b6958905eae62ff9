#include "frontend/frames.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pool.h"

/* Below this many frames per chunk, starting a thread costs more than it
 * saves (a frame's FFT and filterbank take ~15 µs, a thread's start ~50 µs). */
enum { MIN_FRAMES = 64 };

typedef struct {
  frames_fn fn;
  void *ctx;
  size_t count, per, scratch;
  double *buf;
} frames_job;

static void run_chunk(void *p, int chunk) {
  frames_job *j = p;
  size_t t0 = (size_t)chunk * j->per, t1 = t0 + j->per < j->count ? t0 + j->per : j->count;
  if (t0 < t1) j->fn(j->ctx, t0, t1, chunk, j->buf + (size_t)chunk * j->scratch);
}

int frames_run(size_t count, size_t scratch, frames_fn fn, void *ctx) {
  size_t cpus = (size_t)pool_default_workers() + 1;
  size_t n = count / MIN_FRAMES;
  if (n > cpus) n = cpus;
  n = n < 1 ? 1 : n > FRAMES_MAX_CHUNKS ? FRAMES_MAX_CHUNKS : n;
  size_t per = (count + n - 1) / n;
  per += per % 2;
  frames_job j = {fn, ctx, count, per, scratch, mem_alloc(n, scratch * sizeof(double))};
  if (!j.buf) return STENO_ERR_NOMEM;
  /* Chunk c runs on the pool's thread c (chunk 0 here); a pool that could not
   * start its threads runs them all here. */
  pool *p;
  int st = pool_new((int)n - 1, &p);
  if (!st) {
    pool_run(p, (int)n, run_chunk, &j);
    pool_free(p);
  }
  free(j.buf);
  return st;
}
