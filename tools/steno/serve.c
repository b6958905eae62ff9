/* steno serve: options, the models, the workers, the HTTP server, and a clean
 * stop on SIGINT or SIGTERM (serve.h). */
#include "serve.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "default_model.h"
#include "hub.h"
#include "params.h"
#include "serve_http.h"
#include "serve_queue.h"

const char serve_usage[] =
    "usage: steno serve [MODEL...] [--host ADDR] [--port N] [--api-key KEY] [--max-upload-mb N]\n"
    "                   [--timeout S] [--queue N] [--quiet]\n"
    "  An OpenAI-compatible HTTP server: POST /v1/audio/transcriptions and\n"
    "  /v1/audio/translations (multipart form: file, model, language, prompt,\n"
    "  response_format, timestamp_granularities[], temperature), GET /v1/models, GET /health.\n"
    "  MODEL          .gguf files or names pulled with steno pull, loaded once at start; the\n"
    "                 request's `model` field picks one by name (its file name without the\n"
    "                 extension, or the name given); any other name (whisper-1) gets the first.\n"
    "                 None given: $STENO_MODEL, else the bundled " DEFAULT_MODEL_FILE "\n"
    "  --host ADDR    the address to listen on (default 127.0.0.1; 0.0.0.0: every interface)\n"
    "  --port N       the port (default 8080; 0: any free one, printed at start)\n"
    "  --api-key KEY  ask every request for `Authorization: Bearer KEY` (also $STENO_API_KEY;\n"
    "                 GET /health stays open)\n"
    "  --max-upload-mb N  the largest request body (default 200; over it: 413)\n"
    "  --timeout S    the longest a request may take, upload and queue included (default 600;\n"
    "                 over it: 408 while uploading, 504 after)\n"
    "  --queue N      requests that may wait for each model (default 64; over it: 503)\n"
    "  -q, --quiet    no line per request on standard error\n"
    "  -h, --help     this help\n";

typedef struct {
  const char *host;
  long port, max_upload_mb, queue;
  double timeout;
  const char *api_key;
  int quiet;
  const char **models;
  int nmodels;
} serve_opts;

double serve_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- arguments ---- */

static int usage_error(const char *fmt, const char *arg) {
  fputs("steno serve: ", stderr);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", serve_usage);
  return 2;
}

/* A whole number in [lo, hi]; -1 when it is not one. */
static long number(const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

/* The option at argv[*i] that takes a value: 0, or a usage error. */
static int option_value(int argc, char **argv, int *i, serve_opts *o) {
  const char *a = argv[*i], *v = *i + 1 < argc ? argv[++*i] : NULL;
  if (!v || !v[0]) return usage_error("%s needs a value", a);
  if (!strcmp(a, "--host")) o->host = v;
  else if (!strcmp(a, "--api-key")) o->api_key = v;
  else if (!strcmp(a, "--port") && (o->port = number(v, 0, 65535)) < 0)
    return usage_error("--port takes 0 to 65535, not '%s'", v);
  else if (!strcmp(a, "--max-upload-mb") && (o->max_upload_mb = number(v, 1, 1 << 20)) < 0)
    return usage_error("--max-upload-mb takes 1 to 1048576, not '%s'", v);
  else if (!strcmp(a, "--queue") && (o->queue = number(v, 0, 100000)) < 0)
    return usage_error("--queue takes 0 to 100000, not '%s'", v);
  else if (!strcmp(a, "--timeout") && (o->timeout = (double)number(v, 1, 86400 * 7)) < 0)
    return usage_error("--timeout takes 1 to 604800 seconds, not '%s'", v);
  return 0;
}

/* 0: go on; -1: help printed; 2: a usage error. */
static int parse(int argc, char **argv, serve_opts *o) {
  static const char *const valued[] = {"--host", "--port", "--api-key", "--max-upload-mb", "--timeout", "--queue"};
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    bool takes_value = false;
    for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) takes_value |= !strcmp(a, valued[k]);
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(serve_usage, stdout), -1;
    else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o->quiet = 1;
    else if (takes_value) {
      int st = option_value(argc, argv, &i, o);
      if (st) return st;
    } else if (a[0] == '-' && a[1]) return usage_error("unknown option '%s'", a);
    else o->models[o->nmodels++] = a;
  }
  return 0;
}

/* ---- models ---- */

/* What clients call a model: a file's base name without its extension, or the
 * hub name as given (parakeet-v3). */
static char *model_name(const char *arg) {
  struct stat st;
  const char *dot = strrchr(arg, '.');
  if (stat(arg, &st) && !(dot && !strcmp(dot, ".gguf"))) return strdup(arg);
  const char *base = strrchr(arg, '/');
  base = base ? base + 1 : arg;
  dot = strrchr(base, '.');
  return strndup(base, dot && dot != base ? (size_t)(dot - base) : strlen(base));
}

static int load_model(const char *arg, const steno_model_params *mp, serve_model *m) {
  const char *path = hub_resolve(arg);
  if (!path) return 1;
  if (!(m->name = model_name(arg))) return fputs("steno serve: out of memory\n", stderr), 1;
  if (steno_model_load(path, mp, &m->model)) {
    fprintf(stderr, "steno serve: %s: %s\n", arg, steno_last_error());
    return 1;
  }
  return 0;
}

static int load_models(const serve_opts *o, serve_config *cfg) {
  const char *fallback = NULL;
  const char *const *args = o->models;
  int n = o->nmodels;
  steno_model_params mp;
  if (cli_model_params(&mp)) return 1; /* STENO_DEVICE, STENO_FAST, ... as steno run */
  if (!n && !(fallback = default_model_path())) return 1;
  if (!n) args = &fallback, n = 1;
  if (!(cfg->models = calloc((size_t)n, sizeof *cfg->models))) return fputs("steno serve: out of memory\n", stderr), 1;
  cfg->nmodels = n; /* free_models frees what was made of them */
  for (int i = 0; i < n; i++) {
    if (load_model(args[i], &mp, &cfg->models[i])) return 1;
    for (int j = 0; j < i; j++)
      if (!strcmp(cfg->models[i].name, cfg->models[j].name))
        return fprintf(stderr, "steno serve: two models named %s\n", cfg->models[i].name), 1;
    if (!(cfg->models[i].worker = worker_start(cfg->models[i].model, (int)o->queue)))
      return fputs("steno serve: cannot start a worker thread\n", stderr), 1;
  }
  cfg->created = (long long)time(NULL);
  return 0;
}

static void free_models(serve_config *cfg) {
  for (int i = 0; i < cfg->nmodels; i++) {
    worker_free(cfg->models[i].worker);
    if (cfg->models[i].model) steno_model_free(cfg->models[i].model);
    free(cfg->models[i].name);
  }
  free(cfg->models);
}

/* ---- running ---- */

static void errors_only(int level, const char *message, void *user) {
  (void)user;
  if (level == STENO_LOG_ERROR) fprintf(stderr, "steno: %s\n", message);
}

/* Serves until SIGINT or SIGTERM. The signals are blocked in every thread
 * (the ones made later inherit that) and taken here with sigwait. */
static int serve(const serve_opts *o, serve_config *cfg, const sigset_t *stop) {
  int port = 0;
  serve_http *h = http_start(cfg, o->host, (int)o->port, &port);
  if (!h) return 1;
  fprintf(stderr, "steno serve: listening on http://%s%s%s:%d (%d model%s: %s%s)\n", strchr(o->host, ':') ? "[" : "",
          o->host, strchr(o->host, ':') ? "]" : "", port, cfg->nmodels, cfg->nmodels > 1 ? "s" : "",
          cfg->models[0].name, cfg->nmodels > 1 ? ", ..." : "");
  int sig = 0;
  while (sigwait(stop, &sig)) continue;
  fprintf(stderr, "steno serve: %s: stopping\n", sig == SIGINT ? "interrupted" : "terminated");
  /* No new connections; the running and waiting requests are answered 503
   * (the running ones at their next abort check) and those answers sent
   * before the connections close. */
  http_quiesce(h);
  for (int i = 0; i < cfg->nmodels; i++) worker_stop(cfg->models[i].worker);
  for (int i = 0; i < cfg->nmodels; i++) worker_join(cfg->models[i].worker);
  http_stop(h);
  return 0;
}

int serve_main(int argc, char **argv) {
  const char *key = getenv("STENO_API_KEY");
  serve_opts o = {.host = "127.0.0.1", .port = 8080, .max_upload_mb = 200, .queue = 64, .timeout = 600,
                  .api_key = key && key[0] ? key : NULL};
  if (!(o.models = calloc((size_t)argc, sizeof *o.models))) return fputs("steno serve: out of memory\n", stderr), 1;
  int st = parse(argc, argv, &o);
  if (st) return free(o.models), st < 0 ? 0 : st;
  serve_config cfg = {.api_key = o.api_key, .max_upload = (size_t)o.max_upload_mb << 20, .timeout = o.timeout,
                      .quiet = o.quiet};
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN); /* a client that hangs up is an error on its socket, not our end */
  if (o.quiet) steno_set_log(errors_only, NULL);
  st = load_models(&o, &cfg);
  if (!st) st = serve(&o, &cfg, &stop);
  free_models(&cfg);
  free(o.models);
  return st;
}
