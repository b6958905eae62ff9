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
  int diarized;             /* speakers were asked for: text lines, cues, segments and words
                               name them, JSON lists the turns */
} out_info;

/* "txt", "json", "srt", "vtt". */
const char *out_extension(out_format format);

/* The transcript in `format` (info is for JSON only); −1 when memory ran
 * out or the stream has an error. */
int out_write(FILE *f, const steno_result *r, out_format format, const out_info *info);

/* The text; diarized: a line per segment, "[SPEAKER_N] text", or for a diarizer's
 * own result (no words) a line per turn in time order, "[SPEAKER_N] start end" (s). */
void out_text(FILE *f, const steno_result *r, int diarized);
void out_json(FILE *f, const steno_result *r, const out_info *info);
/* Subtitles from the words: a cue ends at a sentence end, before it would
 * pass ~80 characters or ~7 seconds, at a pause over 1 s and, diarized, where
 * the speaker changes (the cue then starts "[SPEAKER_N] ", in WebVTT a voice
 * tag "<v SPEAKER_N>"); it shows on
 * two lines past 42 characters, and stays up until the next cue, the end
 * of the audio, or 1.5 s after its last word starts (whichever comes
 * first; never before that word ends). −1 when memory ran out. */
int out_subtitles(FILE *f, const steno_result *r, out_format format, int diarized);

/* The result's speaker turns as NIST RTTM lines, in time order:
 * "SPEAKER <file> 1 <start s> <duration s> <NA> <NA> speaker_N <NA> <NA>", file the
 * input's base name without its extension (spaces as _; "stdin" for -). */
int out_rttm(FILE *f, const steno_result *r, const char *input);

/* An output file. A regular file (or a new one) is written atomically: the
 * data goes to a temporary file in the same directory, which replaces it on
 * commit, and on failure or discard nothing is left behind. A symbolic link
 * stays a link: its target is what is replaced, in the target's directory.
 * A FIFO or character device is opened and written in place (never replaced);
 * sockets, block devices and directories are refused. */
typedef struct {
  FILE *f;
  char *tmp;        /* the temporary file; NULL when writing in place */
  char *target;     /* the file written: `path`, or its link's target */
  const char *path; /* as given, for messages */
} out_file;

/* Each returns 0, or −1 after printing why (prefixed with `who`) on stderr. */
/* Whether `path` can be written as out_file_open would: its target is of a
 * kind steno writes and writable, and its folder exists and takes a new file
 * (tried with a temporary file, removed at once). For checking before long work. */
int out_file_check(const char *path, const char *who);
int out_file_open(out_file *o, const char *path, const char *who);
int out_file_commit(out_file *o, const char *who);
void out_file_discard(out_file *o);

#endif
