/* The audio endpoints once the form is in (serve_audio.h). */
#include "serve_audio.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_format.h"
#include "serve_queue.h"

/* What the request asks, checked. */
typedef struct {
  serve_format format;
  format_info info;
  const serve_model *model;
  steno_transcribe_params params;
} audio_request;

/* `model` names one of the loaded models; anything else (OpenAI's "whisper-1",
 * or none) gets the first, so that clients written for OpenAI work unchanged. */
static const serve_model *pick_model(const serve_config *cfg, const char *name) {
  for (int i = 0; name && i < cfg->nmodels; i++)
    if (!strcmp(name, cfg->models[i].name)) return &cfg->models[i];
  return &cfg->models[0];
}

static const char *given(const char *field) { return field && field[0] ? field : NULL; }

/* The granularities, temperature and response_format: NULL, or the field at fault. */
static const char *check_fields(const serve_form *form, audio_request *a) {
  if (given(form->response_format) && format_parse(form->response_format, &a->format)) return "response_format";
  for (int i = 0; i < form->ngranularities; i++) {
    const char *g = form->granularities[i];
    if (!strcmp(g, "word")) a->info.words = true;
    else if (!strcmp(g, "segment")) a->info.segments = true;
    else if (g[0]) return "timestamp_granularities";
  }
  if (!a->info.words) a->info.segments = true; /* OpenAI's default: segments */
  /* Accepted as OpenAI defines it, then unused: steno decodes greedily. */
  if (given(form->temperature)) {
    char *end;
    double t = strtod(form->temperature, &end);
    if (*end || !(t >= 0 && t <= 1)) return "temperature";
  }
  return NULL;
}

static int field_error(struct MHD_Connection *c, serve_request *rq, const char *param) {
  static const struct {
    const char *param, *message;
  } why[] = {
      {"response_format", "response_format must be json, text, srt, vtt or verbose_json"},
      {"timestamp_granularities", "timestamp_granularities[] takes word and segment"},
      {"temperature", "temperature must be a number from 0 to 1"},
  };
  for (size_t i = 0; i < sizeof why / sizeof *why; i++)
    if (!strcmp(param, why[i].param)) return http_error(c, rq, 400, why[i].message, param, "invalid_value");
  return http_error(c, rq, 400, "invalid field", param, "invalid_value");
}

/* A failed job as an HTTP answer: the input's fault (400), the clock's (504),
 * the server's shutdown (503), or the server's (500). */
static int job_error(struct MHD_Connection *c, serve_request *rq, const serve_job *job) {
  static const char upload_name[] = "/proc/self/fd/"; /* the path the reader was given: not the client's */
  char message[600];
  const char *m = job->error, *colon = strchr(m, ':');
  if (!strncmp(m, upload_name, sizeof upload_name - 1) && colon) m = colon + 2;
  bool bad_input = job->status == STENO_ERR_FORMAT || job->status == STENO_ERR_UNSUPPORTED ||
                   job->status == STENO_ERR_INVALID;
  snprintf(message, sizeof message, "%s%s", bad_input ? "the audio file: " : "", m);
  if (bad_input) return http_error(c, rq, 400, message, "file", "invalid_audio");
  if (job->status == STENO_ERR_ABORTED)
    return job->expired ? http_error(c, rq, 504, message, NULL, "timeout")
                        : http_error(c, rq, 503, message, NULL, "shutting_down");
  return http_error(c, rq, 500, message, NULL, NULL);
}

/* Runs the job on the model's worker and answers. */
static int transcribe(struct MHD_Connection *c, serve_request *rq, const audio_request *a, int fd,
                      double deadline) {
  serve_job job = {.fd = fd, .params = a->params, .deadline = deadline};
  if (worker_submit(a->model->worker, &job))
    return http_error(c, rq, 503, "the server is busy: too many requests are waiting; try again", NULL,
                      "overloaded");
  worker_wait(a->model->worker, &job);
  if (job.status) return job_error(c, rq, &job);
  size_t len = 0;
  const char *type = "application/json";
  char *body = format_body(job.result, a->format, &a->info, &len, &type);
  steno_result_free(job.result);
  return http_answer(c, rq, 200, type, body, len);
}

int audio_answer(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg, serve_form *form,
                 bool translate, double deadline) {
  audio_request a = {.format = FMT_JSON, .params = steno_transcribe_default_params()};
  a.info.task = translate ? "translate" : "transcribe";
  a.info.language = given(form->language);
  const char *bad = check_fields(form, &a);
  if (bad) return field_error(c, rq, bad);
  a.model = pick_model(cfg, given(form->model));
  a.params.language = given(form->language);
  a.params.prompt = given(form->prompt);
  a.params.translate = translate;
  return transcribe(c, rq, &a, form->fd, deadline);
}
