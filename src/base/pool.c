#include "base/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/timer.h"

enum { MAX_WORKERS = 15 };

typedef struct {
  pool *p;
  int id; /* 1..workers */
} worker;

struct pool {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  pthread_t threads[MAX_WORKERS];
  worker ids[MAX_WORKERS];
  int workers;
  unsigned batch;   /* counts pool_run calls (under mu) */
  /* The batch's number in the high half and its next task in the low one:
   * a thread takes task i by moving it to i + 1, and only while the number is
   * its batch's, so one that woke late for a finished batch takes nothing. */
  _Atomic uint64_t claim;
  atomic_int left; /* the batch's tasks not yet finished */
  bool stop;
  bool borrowed; /* lent (pool_lend) and in a borrower's hands */
  pool_fn fn;
  void *ctx;
  int tasks;
};

/* Set around a transcription (steno_model_params.threads): the pools it
 * starts on this thread take no more. Per thread, as two models on two
 * threads may ask for different numbers. */
static _Thread_local int thread_limit;

/* The pool lent on this thread (its `borrowed` says whether a borrower has it). */
static _Thread_local pool *lent;

pool *pool_lend(pool *p) {
  pool *old = lent;
  lent = p;
  return old;
}

pool *pool_borrow(void) {
  if (!lent || lent->borrowed) return NULL;
  lent->borrowed = true;
  return lent;
}

void pool_unborrow(pool *p) {
  if (p) p->borrowed = false;
}

void pool_run_lent(int tasks, pool_fn fn, void *ctx) {
  pool *p = pool_borrow();
  if (p) {
    pool_run(p, tasks, fn, ctx);
    pool_unborrow(p);
  } else {
    for (int i = 0; i < tasks; i++) fn(ctx, i);
  }
}

int pool_limit_threads(int threads) {
  int old = thread_limit;
  thread_limit = threads > 0 ? threads : 0;
  return old;
}

int pool_default_workers(void) {
  long cpus = thread_limit ? thread_limit : sysconf(_SC_NPROCESSORS_ONLN);
  return cpus <= 1 ? 0 : cpus - 1 > MAX_WORKERS ? MAX_WORKERS : (int)cpus - 1;
}

/* Takes and runs batch b's tasks until none is left to take; the one that
 * finishes the batch's last task tells the caller. */
static void run_claims(pool *p, unsigned b, pool_fn fn, void *ctx, int tasks) {
  uint64_t x = atomic_load(&p->claim);
  for (;;) {
    if ((unsigned)(x >> 32) != b || (uint32_t)x >= (uint32_t)tasks) return;
    if (!atomic_compare_exchange_weak(&p->claim, &x, x + 1)) continue; /* x reloaded */
    fn(ctx, (int)(uint32_t)x);
    if (atomic_fetch_sub(&p->left, 1) == 1) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
    x = atomic_load(&p->claim);
  }
}

static void *work(void *arg) {
  worker *w = arg;
  pool *p = w->p;
  unsigned seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->batch == seen && !p->stop) pthread_cond_wait(&p->go, &p->mu);
    if (p->stop) break;
    seen = p->batch;
    pool_fn fn = p->fn;
    void *ctx = p->ctx;
    int tasks = p->tasks;
    pthread_mutex_unlock(&p->mu);
    run_claims(p, seen, fn, ctx, tasks);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int pool_new(int workers, pool **out) {
  *out = NULL;
  if (workers < 0 || workers > MAX_WORKERS)
    return err_set(STENO_ERR_INVALID, "a pool of %d workers (at most %d)", workers, MAX_WORKERS);
  pool *p = mem_alloc(1, sizeof *p);
  if (!p) return STENO_ERR_NOMEM;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->go, NULL);
  pthread_cond_init(&p->done, NULL);
  for (int i = 0; i < workers; i++) {
    p->ids[p->workers] = (worker){p, p->workers + 1};
    if (pthread_create(&p->threads[p->workers], NULL, work, &p->ids[p->workers]) != 0) break;
    p->workers++;
  }
  *out = p;
  return 0;
}

/* How long the caller, its own tasks done, watches for the others' end
 * before it sleeps: most batches end sooner, and a sleeping caller wakes
 * tens of microseconds after the signal on some machines. */
#define SPIN_SECONDS 200e-6

void pool_run(pool *p, int tasks, pool_fn fn, void *ctx) {
  if (tasks <= 0) return;
  if (!p->workers) {
    for (int i = 0; i < tasks; i++) fn(ctx, i);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn, p->ctx = ctx, p->tasks = tasks;
  unsigned b = ++p->batch;
  atomic_store(&p->left, tasks);
  atomic_store(&p->claim, (uint64_t)b << 32);
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  run_claims(p, b, fn, ctx, tasks);
  double until = time_now() + SPIN_SECONDS;
  for (int i = 0; atomic_load(&p->left) > 0; i++)
    if (i % 64 == 63 && time_now() > until) break;
  pthread_mutex_lock(&p->mu);
  while (atomic_load(&p->left) > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

int pool_threads(const pool *p) { return p->workers + 1; }

void pool_free(pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->workers; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->go);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
