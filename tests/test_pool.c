/* The worker pool (src/base/pool.c), a pool lent to a thread, and the
 * transducer decoder on several threads giving exactly what it gives on one. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "base/pool.h"
#include "check.h"
#include "decode/transducer.h"
#include "steno.h"

typedef struct {
  int *runs; /* per task: how often it ran */
  int batch;
} counter;

static void count(void *ctx, int task) { ((counter *)ctx)->runs[task] += 1; }

/* Every task of every batch runs exactly once, with `workers` threads. */
static void batches(int workers) {
  pool *p;
  CHECK_OK(pool_new(workers, &p));
  CHECK(pool_threads(p) == workers + 1, "%d workers: %d threads", workers, pool_threads(p));
  enum { TASKS = 37, BATCHES = 500 };
  int runs[TASKS] = {0};
  counter c = {runs, 0};
  for (int b = 0; b < BATCHES; b++) pool_run(p, 1 + b % TASKS, count, &c);
  int bad = 0;
  for (int i = 0; i < TASKS; i++) {
    int want = 0; /* batches with more than i tasks */
    for (int b = 0; b < BATCHES; b++) want += 1 + b % TASKS > i;
    bad += runs[i] != want;
  }
  CHECK(bad == 0, "%d workers: %d tasks ran a wrong number of times", workers, bad);
  pool_free(p);
}

static float *random_weights(size_t n, float scale, uint32_t seed) {
  float *v = malloc(n * sizeof *v);
  check_random(v, n, seed);
  for (size_t i = 0; i < n; i++) v[i] *= scale;
  return v;
}

/* A TDT decoder large enough to take threads (joint output 305 × 640): the
 * tokens, frames, durations and confidences on 1 and on 3 threads agree bit
 * for bit. */
static void decoder_threads(void) {
  enum { H = 320, J = 640, V = 300, D = 5, T = 30 };
  static const int durations[D] = {0, 1, 2, 3, 4};
  transducer m = {.vocab = V, .hidden = H, .layers = 2, .joint = J, .act = JOINT_RELU,
                  .durations = durations, .n_durations = D, .max_symbols = 10};
  float *owned[9];
  int k = 0;
  m.embed = owned[k++] = random_weights((size_t)V * H, 1, 1);
  for (int l = 0; l < 2; l++) {
    m.wx[l] = owned[k++] = random_weights((size_t)4 * H * H, 0.05f, 2 + l);
    m.wh[l] = owned[k++] = random_weights((size_t)4 * H * H, 0.05f, 4 + l);
  }
  m.b[0] = m.b[1] = owned[k++] = random_weights((size_t)4 * H, 0.05f, 6);
  m.pred_w = owned[k++] = random_weights((size_t)J * H, 0.05f, 7);
  m.out_w = owned[k++] = random_weights((size_t)(V + D) * J, 0.05f, 8);
  float *enc = owned[k++] = random_weights((size_t)T * J, 1, 9);
  float *zeros = calloc(V + D > J ? V + D : J, sizeof *zeros);
  m.pred_b = m.out_b = zeros;
  dec_tokens one = {0}, three = {0};
  m.threads = 1;
  CHECK_OK(transducer_greedy(&m, enc, T, J, NULL, &one));
  m.threads = 3;
  CHECK_OK(transducer_greedy(&m, enc, T, J, NULL, &three));
  bool same = one.n == three.n && one.n > 0;
  for (size_t i = 0; same && i < one.n; i++)
    same = one.v[i].id == three.v[i].id && one.v[i].frame == three.v[i].frame &&
           one.v[i].frames == three.v[i].frames && one.v[i].p == three.v[i].p;
  CHECK(same, "1 thread: %zu tokens, 3 threads: %zu, not the same", one.n, three.n);
  m.threads = 17; /* 16 workers: more than a pool takes */
  dec_tokens none = {0};
  CHECK(transducer_greedy(&m, enc, T, J, NULL, &none) == STENO_ERR_INVALID, "17 threads refused");
  dec_free(&one), dec_free(&three), dec_free(&none);
  free(zeros);
  for (int i = 0; i < k; i++) free(owned[i]);
}

/* A pool lent on this thread: one borrower at a time (a nested one does
 * without), other threads see none, and lending again restores the one before. */
static void *borrow_elsewhere(void *arg) {
  *(pool **)arg = pool_borrow();
  return NULL;
}

static void lending(void) {
  pool *a, *b;
  CHECK_OK(pool_new(2, &a));
  CHECK_OK(pool_new(1, &b));
  CHECK(pool_borrow() == NULL, "no pool lent: none to borrow");
  CHECK(pool_lend(a) == NULL, "nothing lent before");
  pool *got = pool_borrow();
  CHECK(got == a, "the lent pool is borrowed");
  CHECK(pool_borrow() == NULL, "a nested borrower gets none while it is out");
  pool *other = a;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, borrow_elsewhere, &other) == 0, "a thread starts");
  pthread_join(t, NULL);
  CHECK(other == NULL, "another thread sees no lent pool");
  int runs[5] = {0};
  counter c = {runs, 0};
  pool_run(got, 5, count, &c); /* a borrowed pool runs batches as any other */
  CHECK(runs[0] + runs[1] + runs[2] + runs[3] + runs[4] == 5, "the borrowed pool ran its tasks");
  pool_unborrow(got);
  CHECK(pool_borrow() == a, "given back, it can be borrowed again");
  pool_unborrow(a);
  CHECK(pool_lend(b) == a, "lending b returns a");
  CHECK(pool_borrow() == b, "b is lent now");
  pool_unborrow(b);
  CHECK(pool_lend(NULL) == b, "lending none returns b");
  CHECK(pool_borrow() == NULL, "none lent again");
  pool_free(a), pool_free(b);
}

int main(void) {
  for (int w = 0; w <= 3; w++) batches(w);
  lending();
  pool *p;
  CHECK(pool_new(-1, &p) == STENO_ERR_INVALID && !p, "-1 workers refused");
  CHECK(pool_new(16, &p) == STENO_ERR_INVALID && !p, "16 workers refused");
  pool_free(NULL);
  decoder_threads();
  return check_done();
}
