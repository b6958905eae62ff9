/* The per-model worker thread and its bounded FIFO of jobs (serve_queue.h). */
#include "serve_queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct serve_worker {
  steno_model *model;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* a job was queued, or stop */
  pthread_cond_t done; /* a job finished */
  serve_job *head, *tail;
  int pending, capacity; /* jobs queued or running; how many may wait besides the running one */
  atomic_bool stopping; /* read by the running job's abort callback */
  bool joined;
};

static void finish(serve_worker *w, serve_job *job) {
  pthread_mutex_lock(&w->lock);
  job->done = true;
  w->pending--;
  pthread_cond_broadcast(&w->done);
  pthread_mutex_unlock(&w->lock);
}

static void fail(serve_job *job, int status, bool expired, const char *message) {
  job->status = status;
  job->expired = expired;
  snprintf(job->error, sizeof job->error, "%s", message);
}

typedef struct {
  serve_worker *w;
  serve_job *job;
} running;

/* Asked by steno between pieces: past the deadline, or shutting down. */
static int should_abort(void *user) {
  running *r = user;
  return serve_now() > r->job->deadline || atomic_load(&r->w->stopping);
}

static void run(serve_worker *w, serve_job *job) {
  if (serve_now() > job->deadline) return fail(job, STENO_ERR_ABORTED, true, "the request timed out in the queue");
  /* The audio reader takes a path; the upload's file has none left. */
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", job->fd);
  steno_audio *a;
  if ((job->status = steno_audio_open(path, &a))) return fail(job, job->status, false, steno_last_error());
  running r = {w, job};
  steno_transcribe_params p = job->params;
  p.abort = should_abort;
  p.abort_user = &r;
  job->status = steno_transcribe_audio(w->model, a, &p, &job->result);
  steno_audio_close(a);
  if (job->status == STENO_ERR_ABORTED && atomic_load(&w->stopping))
    fail(job, job->status, false, "the server is shutting down");
  else if (job->status == STENO_ERR_ABORTED) fail(job, job->status, true, "the request ran past its time limit");
  else if (job->status) fail(job, job->status, false, steno_last_error());
}

static void *worker_main(void *arg) {
  serve_worker *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->lock);
    while (!w->head && !w->stopping) pthread_cond_wait(&w->wake, &w->lock);
    serve_job *job = w->head;
    if (!job) { /* stopping, and nothing left */
      pthread_mutex_unlock(&w->lock);
      return NULL;
    }
    w->head = job->next;
    if (!w->head) w->tail = NULL;
    pthread_mutex_unlock(&w->lock);
    if (atomic_load(&w->stopping)) fail(job, STENO_ERR_ABORTED, false, "the server is shutting down");
    else run(w, job);
    finish(w, job);
  }
}

serve_worker *worker_start(steno_model *model, int capacity) {
  serve_worker *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->model = model;
  w->capacity = capacity;
  atomic_init(&w->stopping, false);
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, NULL);
  pthread_cond_init(&w->done, NULL);
  if (pthread_create(&w->thread, NULL, worker_main, w)) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    free(w);
    return NULL;
  }
  return w;
}

int worker_submit(serve_worker *w, serve_job *job) {
  pthread_mutex_lock(&w->lock);
  bool room = !atomic_load(&w->stopping) && w->pending <= w->capacity;
  if (room) {
    job->done = false;
    job->next = NULL;
    *(w->tail ? &w->tail->next : &w->head) = job;
    w->tail = job;
    w->pending++;
    pthread_cond_signal(&w->wake);
  }
  pthread_mutex_unlock(&w->lock);
  return room ? 0 : -1;
}

void worker_wait(serve_worker *w, serve_job *job) {
  pthread_mutex_lock(&w->lock);
  while (!job->done) pthread_cond_wait(&w->done, &w->lock);
  pthread_mutex_unlock(&w->lock);
}

void worker_stop(serve_worker *w) {
  pthread_mutex_lock(&w->lock);
  atomic_store(&w->stopping, true);
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->lock);
}

void worker_join(serve_worker *w) {
  if (!w->joined) pthread_join(w->thread, NULL);
  w->joined = true;
}

void worker_free(serve_worker *w) {
  if (!w) return;
  worker_stop(w);
  worker_join(w);
  pthread_mutex_destroy(&w->lock);
  pthread_cond_destroy(&w->wake);
  pthread_cond_destroy(&w->done);
  free(w);
}
