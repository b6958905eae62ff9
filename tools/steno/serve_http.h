/* steno serve's HTTP side on libmicrohttpd: the listening socket, a thread per
 * connection, routing, the API key, the upload size and time limits, the
 * answers (errors as OpenAI shapes them) and one log line per request. */
#ifndef STENO_TOOL_SERVE_HTTP_H
#define STENO_TOOL_SERVE_HTTP_H

#include <stddef.h>

#include "serve.h"

struct MHD_Connection;

typedef struct serve_http serve_http;

/* Listens on host:port (0: any free port; the one taken goes to *bound) and
 * serves `cfg` until http_stop. NULL after printing why on stderr. */
serve_http *http_start(const serve_config *cfg, const char *host, int port, int *bound);

/* Stops accepting connections (the open ones go on). */
void http_quiesce(serve_http *h);

/* Waits a few seconds at most for the requests in progress to be
 * answered, then closes every connection and frees `h`. */
void http_stop(serve_http *h);

/* ---- for the handlers ---- */

/* What a request has reached so far (serve_http.c owns it). */
typedef struct serve_request serve_request;

/* Answers with `body` (taken: freed here; NULL: out of memory, a 500 instead).
 * Returns an enum MHD_Result for the access handler. */
int http_answer(struct MHD_Connection *c, serve_request *rq, unsigned status, const char *content_type,
                char *body, size_t len);

/* Answers {"error": {...}}: type invalid_request_error for 4xx, server_error
 * for 5xx; param and code may be NULL. */
int http_error(struct MHD_Connection *c, serve_request *rq, unsigned status, const char *message,
               const char *param, const char *code);

#endif
