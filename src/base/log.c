#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static steno_log_fn callback;
static void *callback_user;

void steno_set_log(steno_log_fn fn, void *user) {
  callback = fn;
  callback_user = user;
}

static int threshold(void) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  const char *env = getenv("STENO_LOG");
  if (env)
    for (int i = 0; i < 4; i++)
      if (!strcmp(env, names[i])) return i;
  return STENO_LOG_WARN;
}

void log_msg(int level, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (callback) {
    callback(level, line, callback_user);
    return;
  }
  if (level <= threshold()) fprintf(stderr, "steno: %s\n", line);
}
