/* A few worker threads that run one batch of tasks at a time with the
 * caller: for CPU work split into independent pieces (a matrix's rows), where
 * starting threads for every batch would cost more than the batch. Tasks are
 * taken in order by whichever thread is free, the caller too: a worker that
 * wakes late takes none, and the caller never waits for one to wake. */
#ifndef STENO_BASE_POOL_H
#define STENO_BASE_POOL_H

typedef struct pool pool;
typedef void (*pool_fn)(void *ctx, int task);

/* The online CPUs (or the limit below) less one (the caller), at most 15;
 * 0 on a single CPU. */
int pool_default_workers(void);

/* Limits the threads pools started on the calling thread use by default
 * (0: one per CPU); returns the limit it replaces. */
int pool_limit_threads(int threads);

/* Starts `workers` threads (0: none; all tasks run on the caller). A thread
 * that cannot start leaves fewer workers, not an error. */
int pool_new(int workers, pool **out);

/* Runs fn(ctx, i) for i in [0, tasks) and returns when all have run. */
void pool_run(pool *p, int tasks, pool_fn fn, void *ctx);

/* Threads working with the caller: workers + 1. */
int pool_threads(const pool *p);

void pool_free(pool *p);

/* A pool kept across calls (a session's) and lent to the code on the calling
 * thread, so a call's CPU work does not start and stop threads each time:
 * pool_lend makes p (NULL: none) the lent pool and returns the one before.
 * pool_borrow gives the lent pool while it is not in use already (a nested
 * borrower gets NULL and does without); pool_unborrow gives it back. */
pool *pool_lend(pool *p);
pool *pool_borrow(void);
void pool_unborrow(pool *p);

/* fn(ctx, i) for i in [0, tasks) on the lent pool where it is free, else in
 * order on the caller: for work worth spreading only where threads are
 * already running. */
void pool_run_lent(int tasks, pool_fn fn, void *ctx);

#endif
