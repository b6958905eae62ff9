#include "base/pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "base/mem.h"

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
  unsigned batch;   /* counts pool_run calls: a worker runs each once */
  int pending;      /* workers still in the current batch */
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

static void run_share(pool *p, int who) {
  for (int i = who; i < p->tasks; i += p->workers + 1) p->fn(p->ctx, i);
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
    pthread_mutex_unlock(&p->mu);
    run_share(p, w->id);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
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

void pool_run(pool *p, int tasks, pool_fn fn, void *ctx) {
  pthread_mutex_lock(&p->mu);
  p->fn = fn, p->ctx = ctx, p->tasks = tasks;
  p->pending = p->workers;
  p->batch++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  run_share(p, 0);
  pthread_mutex_lock(&p->mu);
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
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
