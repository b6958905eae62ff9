/* steno run --stream: transcribe audio as it arrives (a microphone through a
 * pipe), printing the text as it firms up. */
#ifndef STENO_TOOL_STREAM_H
#define STENO_TOOL_STREAM_H

#include <stdbool.h>

#include "steno.h"

/* Streams `file` ("-": standard input) through model m: firm text appended to
 * standard output as it firms up, the tentative rest on a terminal's standard
 * error (one line, rewritten), and at the end a newline and the final
 * transcript on a line of its own. should_abort is polled between reads.
 * Returns the exit status (0, 1 on an error, 128 + signal when aborted). */
int stream_run(steno_model *m, const char *file, const char *language, bool quiet,
               int (*should_abort)(void *user), int (*abort_status)(void));

#endif
