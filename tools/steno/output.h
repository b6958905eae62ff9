/* Writing a transcript as text, JSON, SRT or WebVTT, to a stream or
 * atomically to a file. */
#ifndef STENO_TOOL_OUTPUT_H
#define STENO_TOOL_OUTPUT_H

#include <stdio.h>

#include "steno.h"

typedef enum { OUT_TEXT, OUT_JSON, OUT_SRT, OUT_VTT } out_format;

/* What the JSON says besides the result. */
typedef struct {
  const char *model;        /* as given on the command line */
  const char *architecture;
  const char *audio;        /* the input, as given */
  double load_ms;           /* loading the model */
  double wall_ms;           /* reading, decoding and transcribing this input */
} out_info;

/* "txt", "json", "srt", "vtt". */
const char *out_extension(out_format format);

/* The transcript in `format` (info is for JSON only); −1 when memory ran
 * out or the stream has an error. */
int out_write(FILE *f, const steno_result *r, out_format format, const out_info *info);

void out_text(FILE *f, const steno_result *r);
void out_json(FILE *f, const steno_result *r, const out_info *info);
/* Subtitles from the words: a cue ends at a sentence end, before it would
 * pass ~80 characters or ~7 seconds, and at a pause over 1 s; it shows on
 * two lines past 42 characters, and stays up until the next cue, the end
 * of the audio, or 1.5 s after its last word starts (whichever comes
 * first; never before that word ends). −1 when memory ran out. */
int out_subtitles(FILE *f, const steno_result *r, out_format format);

/* A file written atomically: the data goes to a temporary file in the same
 * directory, which replaces `path` on commit; on failure or discard nothing
 * is left behind. */
typedef struct {
  FILE *f;
  char *tmp;
  const char *path;
} out_file;

/* Each returns 0, or −1 after printing why (prefixed with `who`) on stderr. */
int out_file_open(out_file *o, const char *path, const char *who);
int out_file_commit(out_file *o, const char *who);
void out_file_discard(out_file *o);

#endif
