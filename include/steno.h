/* steno — speech to text on any GPU.
 *
 * The public C API of libsteno. Every function that can fail returns a status
 * (STENO_OK or one of the STENO_ERR_* codes); steno_last_error() then gives a
 * message that says what went wrong, for the calling thread. */
#ifndef STENO_H
#define STENO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STENO_VERSION "0.1.0"

/* Status codes. */
enum {
  STENO_OK = 0,
  STENO_ERR_INVALID = 1,     /* a bad argument or parameter */
  STENO_ERR_IO = 2,          /* a file could not be opened or read */
  STENO_ERR_FORMAT = 3,      /* a file is malformed, truncated or of an unknown kind */
  STENO_ERR_UNSUPPORTED = 4, /* valid, but not something steno can run (yet) */
  STENO_ERR_NOMEM = 5,       /* host or device memory ran out */
  STENO_ERR_GPU = 6,         /* no usable Vulkan device, device lost, a failed submission */
  STENO_ERR_ABORTED = 7,     /* the abort callback asked to stop */
};

/* The calling thread's message for the last failure. */
const char *steno_last_error(void);

/* Log levels for steno_set_log. */
enum { STENO_LOG_ERROR = 0, STENO_LOG_WARN = 1, STENO_LOG_INFO = 2, STENO_LOG_DEBUG = 3 };

/* Receives every log line instead of stderr; NULL restores stderr. */
typedef void (*steno_log_fn)(int level, const char *message, void *user);
void steno_set_log(steno_log_fn fn, void *user);

/* ---- devices ---- */

/* Prints the Vulkan devices steno can use, with their features, to `out`.
 * STENO_DEVICE (an index or part of a name) picks one; otherwise a discrete
 * GPU is preferred. */
int steno_devices_print(FILE *out);

/* ---- files ---- */

/* Prints a GGUF file's metadata (long arrays abbreviated) and tensor table. */
int steno_file_print(const char *path, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
