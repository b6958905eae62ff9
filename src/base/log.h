/* Logging: messages go to the callback the application set, or to stderr at
 * or above the level in STENO_LOG (error, warn, info, debug; default warn). */
#ifndef STENO_BASE_LOG_H
#define STENO_BASE_LOG_H

#include "steno.h"

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(STENO_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(STENO_LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(STENO_LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(STENO_LOG_DEBUG, __VA_ARGS__)

#endif
