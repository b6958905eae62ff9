/* Errors: every fallible function returns a status code and leaves a message
 * in a thread-local buffer, so the caller can report what went wrong without
 * threading a message buffer through every layer. */
#ifndef STENO_BASE_ERROR_H
#define STENO_BASE_ERROR_H

#include "steno.h"

/* Sets the thread's error message (printf-style) and returns `code`. */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with more context ("loading x: " + old). */
int err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The thread's last message ("" when none). */
const char *err_message(void);

void err_clear(void);

/* Evaluates `expr`; returns its status from the calling function when non-zero. */
#define TRY(expr)                  \
  do {                             \
    int try_status_ = (expr);      \
    if (try_status_) return try_status_; \
  } while (0)

#endif
