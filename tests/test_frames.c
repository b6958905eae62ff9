/* frames_run_clips (src/frontend/frames.c): a batch's log-mel features (NeMo's
 * frontend, as Parakeet's batch computes them) with the clips side by side
 * on 1, 2 and 5 threads give bit for bit what each clip gets alone on one
 * thread; clip counts below, at and not divisible by the thread count, clips
 * of different lengths (2 frames to 11 s). Also: the clips run on at most
 * min(clips, threads) threads (the pool's free threads take them, so a
 * worker that wakes late may take none), each clip's frames_run gets its share of the
 * threads, the caller's limit comes back, and a failing clip gives the first
 * failure's status and message while the other clips still run. No GPU. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/pool.h"
#include "check.h"
#include "frontend/frames.h"
#include "frontend/mel.h"

enum { CLIPS = 11, MAX_THREADS = 8 };

/* Samples per clip: 11 s (18 of frames_run's chunks), 2 valid frames exactly, odd sizes. */
static const size_t lengths[CLIPS] = {176000, 48037, 320, 50000, 99999, 12345,
                                      140000, 8000, 33333, 70001, 641};

typedef struct {
  const mel_frontend *m;
  float *const *pcm;
  const size_t *n;
  float **out;   /* [clip] room for mel_frames */
  size_t *valid; /* [clip] */
  pthread_t who[CLIPS];
  int share[CLIPS]; /* the threads each clip's frames_run may use */
  int ran[CLIPS];
} job;

static int one_clip(void *ctx, int c) {
  job *j = ctx;
  j->who[c] = pthread_self();
  j->share[c] = pool_default_workers() + 1;
  j->ran[c]++;
  return mel_compute(j->m, j->pcm[c], j->n[c], j->out[c], &j->valid[c]);
}

static void job_clear(job *j, int clips) {
  for (int c = 0; c < clips; c++) {
    memset(j->out[c], 0xff, mel_frames(j->m, j->n[c]) * (size_t)j->m->c.n_mels * sizeof(float));
    j->valid[c] = 0, j->ran[c] = 0, j->share[c] = 0;
  }
}

static int distinct_threads(const job *j, int clips) {
  int k = 0;
  for (int c = 0; c < clips; c++) {
    bool seen = false;
    for (int d = 0; d < c; d++) seen = seen || pthread_equal(j->who[c], j->who[d]);
    k += !seen;
  }
  return k;
}

/* The first `clips` clips on `threads` threads against want[] (one by one, one thread). */
static void side_by_side(job *j, int clips, int threads, float *const *want, const size_t *wvalid) {
  job_clear(j, clips);
  int old = pool_limit_threads(threads);
  CHECK_OK(frames_run_clips(clips, one_clip, j));
  CHECK(pool_limit_threads(old) == threads, "the caller's limit is back");
  int side = clips < threads ? clips : threads, share = threads / side, bad = 0;
  for (int c = 0; c < clips; c++) {
    size_t floats = mel_frames(j->m, j->n[c]) * (size_t)j->m->c.n_mels;
    bad += j->ran[c] != 1 || j->valid[c] != wvalid[c] ||
           memcmp(j->out[c], want[c], floats * sizeof(float)) != 0;
    CHECK(j->share[c] == share, "%d clips on %d threads: clip %d's frames get %d threads, not %d",
          clips, threads, c, j->share[c], share);
  }
  CHECK(bad == 0, "%d clips on %d threads: %d clips differ from alone", clips, threads, bad);
  int ran = distinct_threads(j, clips);
  CHECK(ran >= 1 && ran <= side, "%d clips on %d threads ran on %d threads", clips, threads, ran);
}

/* Clips 3 and 5 too short (< 2 frames): clip 3's status and message, every other clip done. */
static void failures(job *j, float *const *want, int threads) {
  size_t n[CLIPS];
  memcpy(n, j->n, sizeof n);
  n[3] = 100, n[5] = 150;
  job bad = *j;
  bad.n = n;
  job_clear(&bad, CLIPS);
  int old = pool_limit_threads(threads);
  int st = frames_run_clips(CLIPS, one_clip, &bad);
  pool_limit_threads(old);
  CHECK(st == STENO_ERR_INVALID, "%d threads: status %d", threads, st);
  CHECK(strstr(steno_last_error(), "100 samples") != NULL,
        "%d threads: message '%s' is not clip 3's", threads, steno_last_error());
  int done = 0;
  for (int c = 0; c < CLIPS; c++) {
    size_t floats = mel_frames(j->m, n[c]) * (size_t)j->m->c.n_mels;
    done += c != 3 && c != 5 && bad.ran[c] == 1 &&
            !memcmp(bad.out[c], want[c], floats * sizeof(float));
  }
  CHECK(done == CLIPS - 2, "%d threads: %d of the other clips done", threads, done);
}

int main(void) {
  mel_config cfg = {.sample_rate = 16000, .n_fft = 512, .win_length = 400, .hop = 160,
                    .n_mels = 128, .preemphasis = 0.97f, .f_min = 0, .f_max = 8000,
                    .normalize = true};
  mel_frontend m;
  CHECK_OK(mel_init(&m, &cfg));
  float *pcm[CLIPS], *out[CLIPS], *want[CLIPS];
  size_t valid[CLIPS], wvalid[CLIPS];
  for (int c = 0; c < CLIPS; c++) {
    size_t floats = mel_frames(&m, lengths[c]) * (size_t)cfg.n_mels;
    pcm[c] = malloc(lengths[c] * sizeof(float));
    out[c] = malloc(floats * sizeof(float));
    want[c] = malloc(floats * sizeof(float));
    check_random(pcm[c], lengths[c], 100 + (uint32_t)c);
  }
  /* Alone, one thread; 5 threads one clip at a time must agree (frames_run's split). */
  job j = {.m = &m, .pcm = pcm, .n = lengths, .out = out, .valid = valid};
  int old = pool_limit_threads(1);
  for (int c = 0; c < CLIPS; c++)
    CHECK_OK(mel_compute(&m, pcm[c], lengths[c], want[c], &wvalid[c]));
  pool_limit_threads(5);
  for (int c = 0; c < CLIPS; c++) {
    size_t floats = mel_frames(&m, lengths[c]) * (size_t)cfg.n_mels;
    CHECK_OK(mel_compute(&m, pcm[c], lengths[c], out[c], &valid[c]));
    CHECK(!memcmp(out[c], want[c], floats * sizeof(float)), "clip %d: 5 threads vs 1", c);
  }
  pool_limit_threads(old);
  static const int threads[] = {1, 2, 5}, counts[] = {1, 2, 3, 7, CLIPS};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
      side_by_side(&j, counts[k], threads[t], want, wvalid);
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) failures(&j, want, threads[t]);
  CHECK_OK(frames_run_clips(0, one_clip, &j));
  for (int c = 0; c < CLIPS; c++) free(pcm[c]), free(out[c]), free(want[c]);
  mel_free(&m);
  printf("frames_run_clips: %d clips of 2 frames to 11 s on 1, 2, 5 threads as alone\n", CLIPS);
  return check_done();
}
