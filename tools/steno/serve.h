/* steno serve: an OpenAI-compatible HTTP server (POST /v1/audio/transcriptions and
 * /v1/audio/translations, GET /v1/models and /health) on libmicrohttpd. The
 * models are loaded once; each has one worker thread that runs its requests in
 * turn from a bounded queue, while the HTTP side runs a thread per connection. */
#ifndef STENO_TOOL_SERVE_H
#define STENO_TOOL_SERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "steno.h"

extern const char serve_usage[];

/* `steno serve ...` (argv[1] is "serve"); returns the exit status. */
int serve_main(int argc, char **argv);

/* ---- shared by serve*.c ---- */

typedef struct serve_worker serve_worker;

/* A loaded model as clients name it. */
typedef struct {
  char *name;           /* the id in /v1/models and the `model` field */
  steno_model *model;
  serve_worker *worker; /* runs this model's requests */
} serve_model;

typedef struct {
  const char *api_key;  /* NULL: no key asked */
  size_t max_upload;    /* bytes of request body */
  double timeout;       /* seconds from a request's start to its answer */
  bool quiet;           /* no line per request */
  serve_model *models;  /* [0] is the default */
  int nmodels;
  long long created;    /* when the models were loaded (unix time), for /v1/models */
} serve_config;

/* Seconds on the monotonic clock. */
double serve_now(void);

#endif
