#include "frontend/frames.h"

#include <pthread.h>
#include <stdio.h>
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
  if (n == 1) { /* one chunk: no pool to start (clips side by side come here) */
    run_chunk(&j, 0);
    free(j.buf);
    return 0;
  }
  /* The chunks run on the pool lent on this thread where there is one (a
   * session's, kept across calls), else on one started for this call; a pool
   * that could not start its threads runs them all here. */
  pool *lent = pool_borrow(), *p = lent;
  int st = p ? 0 : pool_new((int)n - 1, &p);
  if (!st) pool_run(p, (int)n, run_chunk, &j);
  if (lent) pool_unborrow(lent);
  else pool_free(p);
  free(j.buf);
  return st;
}

enum { MESSAGE = 1024 }; /* base/error.c's buffer */

typedef struct {
  frames_clip_fn fn;
  void *ctx;
  int share;     /* each clip's threads (its frames_run's pool_limit_threads) */
  int *status;   /* [clips] */
  pthread_mutex_t lock; /* over failed and message */
  int failed;    /* the first failed clip, or -1 */
  char message[MESSAGE]; /* its error message (messages are per thread) */
} clips_job;

static void run_clip(void *p, int clip) {
  clips_job *j = p;
  int limit = pool_limit_threads(j->share);
  int st = j->fn(j->ctx, clip);
  pool_limit_threads(limit);
  j->status[clip] = st;
  if (!st) return;
  pthread_mutex_lock(&j->lock);
  if (j->failed < 0 || clip < j->failed) {
    j->failed = clip;
    snprintf(j->message, MESSAGE, "%s", err_message());
  }
  pthread_mutex_unlock(&j->lock);
}

int frames_run_clips(int clips, frames_clip_fn fn, void *ctx) {
  if (clips <= 0) return 0;
  int cpus = pool_default_workers() + 1, want = clips < cpus ? clips : cpus;
  pool *lent = pool_borrow(), *p = lent;
  if (!p) TRY(pool_new(want - 1, &p));
  int threads = pool_threads(p); /* fewer where a thread did not start */
  int busy = threads < clips ? threads : clips; /* threads that get a clip */
  clips_job j = {.fn = fn, .ctx = ctx, .share = cpus / busy, .failed = -1,
                 .status = mem_alloc((size_t)clips, sizeof(int))};
  int st = j.status ? 0 : STENO_ERR_NOMEM;
  pthread_mutex_init(&j.lock, NULL);
  if (!st) pool_run(p, clips, run_clip, &j);
  if (lent) pool_unborrow(lent);
  else pool_free(p);
  /* The first failed clip's status and message. */
  if (!st && j.failed >= 0) st = err_set(j.status[j.failed], "%s", j.message);
  pthread_mutex_destroy(&j.lock);
  free(j.status);
  return st;
}
