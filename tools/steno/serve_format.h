/* steno serve's response bodies, in OpenAI's response_format shapes. */
#ifndef STENO_TOOL_SERVE_FORMAT_H
#define STENO_TOOL_SERVE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

#include "serve.h"
#include "steno.h"

typedef enum { FMT_JSON, FMT_TEXT, FMT_SRT, FMT_VTT, FMT_VERBOSE_JSON } serve_format;

/* "json", "text", "srt", "vtt", "verbose_json": 0 and *f set, else -1. */
int format_parse(const char *name, serve_format *f);

/* What verbose_json says besides the result. */
typedef struct {
  const char *task;     /* "transcribe" or "translate" */
  const char *language; /* as the request gave it, or NULL */
  bool words;           /* timestamp_granularities has "word" */
  bool segments;        /* ... has "segment", or is empty */
} format_info;

/* A response body (malloc'd, *len bytes) and its Content-Type; NULL when
 * memory ran out. */
char *format_body(const steno_result *r, serve_format f, const format_info *info, size_t *len,
                  const char **content_type);

/* OpenAI's list of models: {"object": "list", "data": [{"id", "object",
 * "created", "owned_by"}]}, the loaded models in order. NULL: no memory. */
char *format_models(const serve_config *cfg);

/* {"error": {"message", "type", "param", "code"}} as OpenAI shapes it;
 * param and code may be NULL (JSON null). NULL when memory ran out. */
char *format_error(const char *message, const char *type, const char *param, const char *code);

#endif
