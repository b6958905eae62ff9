#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char message[1024];

int err_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return code;
}

int err_wrap(int code, const char *fmt, ...) {
  char old[sizeof message];
  memcpy(old, message, sizeof old);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof message)
    snprintf(message + n, sizeof message - (size_t)n, "%s", old);
  return code;
}

const char *err_message(void) { return message; }

void err_clear(void) { message[0] = 0; }
