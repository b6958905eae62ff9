/* Writing a transcript as text, JSON, SRT or WebVTT. */
#ifndef STENO_TOOL_OUTPUT_H
#define STENO_TOOL_OUTPUT_H

#include <stdio.h>

#include "steno.h"

typedef enum { OUT_TEXT, OUT_JSON, OUT_SRT, OUT_VTT } out_format;

void out_text(FILE *f, const steno_result *r);
void out_json(FILE *f, const steno_result *r, const char *model, const char *audio);
/* Subtitles: cues made from words, split at sentence ends, past ~80
 * characters or ~7 seconds. */
void out_subtitles(FILE *f, const steno_result *r, out_format format);

#endif
