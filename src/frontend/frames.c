#include "frontend/frames.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "base/mem.h"

/* Below this many frames per chunk, starting a thread costs more than it saves. */
enum { MIN_FRAMES = 256 };

typedef struct {
  frames_fn fn;
  void *ctx;
  size_t t0, t1;
  int chunk;
  double *scratch;
} job;

static void *run_job(void *p) {
  job *j = p;
  j->fn(j->ctx, j->t0, j->t1, j->chunk, j->scratch);
  return NULL;
}

int frames_run(size_t count, size_t scratch, frames_fn fn, void *ctx) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t n = count / MIN_FRAMES;
  if (cpus > 0 && n > (size_t)cpus) n = (size_t)cpus;
  n = n < 1 ? 1 : n > FRAMES_MAX_CHUNKS ? FRAMES_MAX_CHUNKS : n;
  size_t per = (count + n - 1) / n;
  per += per % 2;
  double *buf = mem_alloc(n, scratch * sizeof *buf);
  if (!buf) return STENO_ERR_NOMEM;
  job jobs[FRAMES_MAX_CHUNKS];
  pthread_t threads[FRAMES_MAX_CHUNKS];
  bool started[FRAMES_MAX_CHUNKS] = {false};
  for (size_t c = 0; c < n && c * per < count; c++) {
    size_t t1 = (c + 1) * per < count ? (c + 1) * per : count;
    jobs[c] = (job){fn, ctx, c * per, t1, (int)c, buf + c * scratch};
    /* Chunk 0, and any chunk whose thread cannot start, runs here. */
    started[c] = c > 0 && pthread_create(&threads[c], NULL, run_job, &jobs[c]) == 0;
    if (!started[c] && c > 0) run_job(&jobs[c]);
  }
  if (count > 0) run_job(&jobs[0]);
  for (size_t c = 1; c < n; c++)
    if (started[c]) pthread_join(threads[c], NULL);
  free(buf);
  return 0;
}
