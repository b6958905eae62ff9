/* steno serve's workers: one thread per model runs its transcriptions one at a
 * time from a bounded queue (a model's GPU state serves one call at a time). */
#ifndef STENO_TOOL_SERVE_QUEUE_H
#define STENO_TOOL_SERVE_QUEUE_H

#include <stdbool.h>

#include "serve.h"

/* One transcription: the request's thread fills the input, submits it and
 * waits; the worker fills the output. */
typedef struct serve_job {
  /* input */
  int fd;                         /* the upload: an unlinked temporary file */
  steno_transcribe_params params; /* language, translate, prompt */
  double deadline;                /* serve_now() after which the work stops */
  /* output */
  int status;                     /* STENO_OK, a STENO_ERR_* code */
  bool expired;                   /* stopped at the deadline */
  char error[512];                /* the message when status != STENO_OK */
  steno_result *result;           /* when status == STENO_OK: the caller frees it */
  /* the worker's */
  bool done;
  struct serve_job *next;
} serve_job;

/* Starts a worker for `model` that keeps at most `capacity` jobs waiting
 * (besides the one it runs). NULL when no thread could be made. */
serve_worker *worker_start(steno_model *model, int capacity);

/* Queues `job` (-1: the queue is full or the worker is stopping). */
int worker_submit(serve_worker *w, serve_job *job);

/* Blocks until the worker is done with `job`. */
void worker_wait(serve_worker *w, serve_job *job);

/* Aborts the running job (at its next abort check), fails the waiting ones
 * (STENO_ERR_ABORTED), refuses new ones. */
void worker_stop(serve_worker *w);

/* Waits for a stopped worker's thread to end: every job it had is done. */
void worker_join(serve_worker *w);

/* Stops, joins and frees the worker, once no one waits on it any more. */
void worker_free(serve_worker *w);

#endif
