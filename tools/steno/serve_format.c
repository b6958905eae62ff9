/* Response bodies for steno serve (serve_format.h). json and verbose_json are
 * built with cJSON; text, srt and vtt are steno run's writers (output.c) into
 * memory. verbose_json fills OpenAI's fields from what steno has: see
 * verbose_segment for the ones that are approximated. */
#include "serve_format.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output.h"

static const struct {
  const char *name;
  serve_format format;
  const char *content_type;
} formats[] = {
    {"json", FMT_JSON, "application/json"},
    {"text", FMT_TEXT, "text/plain; charset=utf-8"},
    {"srt", FMT_SRT, "application/x-subrip; charset=utf-8"},
    {"vtt", FMT_VTT, "text/vtt; charset=utf-8"},
    {"verbose_json", FMT_VERBOSE_JSON, "application/json"},
};

int format_parse(const char *name, serve_format *f) {
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
    if (!strcmp(name, formats[i].name)) return *f = formats[i].format, 0;
  return -1;
}

/* ---- text, srt, vtt: steno run's writers ---- */

static char *written(const steno_result *r, serve_format f, size_t *len) {
  char *buf = NULL;
  FILE *m = open_memstream(&buf, len);
  if (!m) return NULL;
  int bad = f == FMT_TEXT ? (out_text(m, r, 0), 0)
                          : out_subtitles(m, r, f == FMT_SRT ? OUT_SRT : OUT_VTT, 0);
  bad |= ferror(m);
  bad |= fclose(m);
  if (bad) free(buf);
  return bad ? NULL : buf;
}

/* ---- verbose_json ---- */

static double seconds(int64_t ms) { return (double)ms / 1e3; }

/* Whisper's rule for a repetition loop: the text's length over its zlib-compressed length. */
static double compression_ratio(const char *text) {
  uLong n = (uLong)strlen(text), cap = compressBound(n);
  Bytef *z = malloc(cap ? cap : 1);
  uLongf got = cap;
  double ratio = z && n && compress2(z, &got, (const Bytef *)text, n, 9) == Z_OK ? (double)n / (double)got : 0;
  free(z);
  return ratio;
}

/* Tokens [*next, ...) that start before `end` (the next segment's start; -1: all that are left). */
static cJSON *segment_tokens(const steno_result *r, size_t *next, int64_t end, double *logprob) {
  cJSON *ids = cJSON_CreateArray();
  size_t n = steno_result_token_count(r), first = *next;
  double sum = 0;
  for (; *next < n; ++*next) {
    steno_token t = steno_result_token(r, *next);
    if (end >= 0 && t.start_ms >= end) break;
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(t.id));
    sum += log(t.p > 1e-30f ? t.p : 1e-30f);
  }
  *logprob = *next > first ? sum / (double)(*next - first) : 0;
  return ids;
}

/* One of OpenAI's segments. Approximated: seek is the segment's start in 10 ms
 * frames (Whisper's window offset has no meaning for steno's pieces);
 * avg_logprob is the mean log of the tokens' confidences; temperature is 0
 * (steno decodes greedily) and no_speech_prob 0 (steno drops silent pieces). */
static cJSON *verbose_segment(const steno_result *r, size_t i, size_t *next_token) {
  steno_segment s = steno_result_segment(r, i);
  int64_t end = i + 1 < steno_result_segment_count(r) ? steno_result_segment(r, i + 1).start_ms : -1;
  double logprob;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", (double)i);
  cJSON_AddNumberToObject(o, "seek", (double)(s.start_ms / 10));
  cJSON_AddNumberToObject(o, "start", seconds(s.start_ms));
  cJSON_AddNumberToObject(o, "end", seconds(s.end_ms));
  cJSON_AddStringToObject(o, "text", s.text);
  cJSON_AddItemToObject(o, "tokens", segment_tokens(r, next_token, end, &logprob));
  cJSON_AddNumberToObject(o, "temperature", 0);
  cJSON_AddNumberToObject(o, "avg_logprob", logprob);
  cJSON_AddNumberToObject(o, "compression_ratio", compression_ratio(s.text));
  cJSON_AddNumberToObject(o, "no_speech_prob", 0);
  return o;
}

static cJSON *verbose_words(const steno_result *r) {
  cJSON *words = cJSON_CreateArray();
  for (size_t i = 0; i < steno_result_word_count(r); i++) {
    steno_word w = steno_result_word(r, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "word", w.text);
    cJSON_AddNumberToObject(o, "start", seconds(w.start_ms));
    cJSON_AddNumberToObject(o, "end", seconds(w.end_ms));
    cJSON_AddItemToArray(words, o);
  }
  return words;
}

static cJSON *verbose(const steno_result *r, const format_info *info) {
  cJSON *o = cJSON_CreateObject();
  double duration = steno_result_duration(r);
  cJSON_AddStringToObject(o, "task", info->task);
  cJSON_AddStringToObject(o, "language", info->language ? info->language : "unknown");
  cJSON_AddNumberToObject(o, "duration", isfinite(duration) ? duration : 0);
  cJSON_AddStringToObject(o, "text", steno_result_text(r));
  if (info->segments) {
    cJSON *segments = cJSON_AddArrayToObject(o, "segments");
    size_t next_token = 0;
    for (size_t i = 0; i < steno_result_segment_count(r); i++)
      cJSON_AddItemToArray(segments, verbose_segment(r, i, &next_token));
  }
  if (info->words) cJSON_AddItemToObject(o, "words", verbose_words(r));
  return o;
}

/* cJSON's text of `o` (freed), or NULL. cJSON reports running out of memory
 * only here: its builders skip what they could not make. */
static char *printed(cJSON *o, size_t *len) {
  char *s = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (s) *len = strlen(s);
  return s;
}

char *format_body(const steno_result *r, serve_format f, const format_info *info, size_t *len,
                  const char **content_type) {
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
    if (formats[i].format == f) *content_type = formats[i].content_type;
  if (f == FMT_TEXT || f == FMT_SRT || f == FMT_VTT) return written(r, f, len);
  if (f == FMT_VERBOSE_JSON) return printed(verbose(r, info), len);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "text", steno_result_text(r));
  return printed(o, len);
}

static cJSON *string_or_null(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

char *format_error(const char *message, const char *type, const char *param, const char *code) {
  cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "message", message);
  cJSON_AddStringToObject(e, "type", type);
  cJSON_AddItemToObject(e, "param", string_or_null(param));
  cJSON_AddItemToObject(e, "code", string_or_null(code));
  cJSON_AddItemToObject(o, "error", e);
  size_t len;
  return printed(o, &len);
}

char *format_models(const serve_config *cfg) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "object", "list");
  cJSON *data = cJSON_AddArrayToObject(o, "data");
  for (int i = 0; i < cfg->nmodels; i++) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", cfg->models[i].name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)cfg->created);
    cJSON_AddStringToObject(m, "owned_by", "steno");
    cJSON_AddItemToArray(data, m);
  }
  size_t len;
  return printed(o, &len);
}
