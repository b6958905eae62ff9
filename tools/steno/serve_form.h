/* steno serve's form: a multipart/form-data body read as it arrives, the
 * `file` part streamed to a private temporary file, the other fields kept. */
#ifndef STENO_TOOL_SERVE_FORM_H
#define STENO_TOOL_SERVE_FORM_H

#include <stdbool.h>
#include <stddef.h>

struct MHD_Connection;

enum { FORM_MAX_GRANULARITIES = 4 };

typedef struct {
  int fd;                 /* the file's bytes (unlinked: gone when closed); -1: no file part */
  size_t file_bytes;
  /* the fields OpenAI defines (NULL: not given) */
  char *model, *language, *prompt, *response_format, *temperature;
  char *granularities[FORM_MAX_GRANULARITIES]; /* timestamp_granularities[] */
  int ngranularities;
  /* the first problem, for a 4xx/5xx answer (status 0: none) */
  int status;
  char message[256];
  const char *param;
  struct MHD_PostProcessor *pp;
} serve_form;

/* Starts reading the body of `c`'s request. Returns 0, or -1 with
 * form->status, message and param set (not multipart, no memory). */
int form_begin(serve_form *form, struct MHD_Connection *c);

/* The body's next bytes; -1 once the form has a problem (form->status ...,
 * kept for form_end; what follows is skipped). */
int form_feed(serve_form *form, const char *data, size_t size);

/* The body has ended: -1 (and form->status ...) when it was cut short or had
 * no file part. */
int form_end(serve_form *form);

/* Frees what the form holds (closes its file); safe after any of the above. */
void form_free(serve_form *form);

#endif
