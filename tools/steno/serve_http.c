/* The HTTP side of steno serve (serve_http.h). libmicrohttpd runs a thread
 * per connection, so a request's thread may simply wait for its model's
 * worker. The access handler is called once with the headers, once per chunk
 * of the body, and once more when the body has ended. */
#include "serve_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve_audio.h"
#include "serve_format.h"

enum {
  MAX_CONNECTIONS = 256, /* beyond this libmicrohttpd closes new connections at once */
  LISTEN_BACKLOG = 128,
  STOP_GRACE_S = 5, /* for answers to go out at shutdown (the aborted ones: 503) */
};

struct serve_http {
  struct MHD_Daemon *daemon;
  const serve_config *cfg;
  atomic_int in_flight; /* requests begun and not yet completed */
};

typedef int (*get_handler)(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg);

struct route {
  const char *path;
  get_handler get; /* a GET (or HEAD) route */
  bool translate;  /* a POST route: the audio endpoints */
  bool open;       /* answered without the API key */
};

struct serve_request {
  const struct route *route;
  double t0, deadline;
  unsigned status; /* the answer's, for the log (0: none) */
  bool answered;
  unsigned long long body; /* bytes received */
  serve_form form;
  char method[16], path[96]; /* for the log (cut) */
};

/* ---- answers ---- */

int http_answer(struct MHD_Connection *c, serve_request *rq, unsigned status, const char *content_type,
                char *body, size_t len) {
  if (!body) return http_error(c, rq, 500, "out of memory", NULL, NULL);
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (status == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rq->route && rq->route->get ? "GET, HEAD" : "POST");
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  /* libmicrohttpd 0.9 takes an answer only before the body or after all of it:
   * in the middle (a chunked body past the limit, an upload past the time
   * limit) this fails and the connection is closed instead. */
  enum MHD_Result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  rq->answered = true;
  rq->status = status;
  return ok;
}

int http_error(struct MHD_Connection *c, serve_request *rq, unsigned status, const char *message,
               const char *param, const char *code) {
  char *body = format_error(message, status < 500 ? "invalid_request_error" : "server_error", param, code);
  if (!body) return MHD_NO; /* no memory even for that: drop the connection */
  return http_answer(c, rq, status, "application/json", body, strlen(body));
}

/* ---- the routes ---- */

static int health(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg) {
  (void)cfg;
  return http_answer(c, rq, 200, "application/json", strdup("{\"status\":\"ok\"}"), 15);
}

static int models(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg);

static const struct route routes[] = {
    {"/health", health, false, true},
    {"/v1/models", models, false, false},
    {"/v1/audio/transcriptions", NULL, false, false},
    {"/v1/audio/translations", NULL, true, false},
};

static int models(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg) {
  char *body = format_models(cfg);
  return http_answer(c, rq, 200, "application/json", body, body ? strlen(body) : 0);
}

static const struct route *find_route(const char *url) {
  for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
    if (!strcmp(url, routes[i].path)) return &routes[i];
  return NULL;
}

/* ---- checks on the headers ---- */

/* Compares all of it, so the time taken says nothing about the key. */
static bool same_key(const char *given, const char *key) {
  size_t n = strlen(given), k = strlen(key);
  unsigned char diff = n != k;
  for (size_t i = 0; i < k; i++) diff |= (unsigned char)(key[i] ^ given[i < n ? i : 0]);
  return diff == 0;
}

static bool authorized(struct MHD_Connection *c, const serve_config *cfg) {
  if (!cfg->api_key) return true;
  const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  return auth && !strncmp(auth, "Bearer ", 7) && same_key(auth + 7, cfg->api_key);
}

static bool declared_too_big(struct MHD_Connection *c, const serve_config *cfg) {
  const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  return len && strtoull(len, NULL, 10) > cfg->max_upload;
}

static int too_big(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg) {
  char message[96];
  snprintf(message, sizeof message, "the upload is over the server's limit of %zu MB", cfg->max_upload >> 20);
  return http_error(c, rq, 413, message, "file", "file_too_large");
}

/* The first call: the headers are in. GET routes are answered now; errors too,
 * before any of the body is read. */
static int begin(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg, const char *url,
                 const char *method) {
  bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
  rq->route = find_route(url);
  if (!rq->route)
    return http_error(c, rq, 404, "no such route (see GET /v1/models, POST /v1/audio/transcriptions)", NULL,
                      "not_found");
  if (rq->route->get ? !get : !post) return http_error(c, rq, 405, "method not allowed on this route", NULL, NULL);
  if (!rq->route->open && !authorized(c, cfg))
    return http_error(c, rq, 401, "incorrect or missing API key (Authorization: Bearer KEY)", NULL, "invalid_api_key");
  if (rq->route->get) return rq->route->get(c, rq, cfg);
  if (declared_too_big(c, cfg)) return too_big(c, rq, cfg);
  if (form_begin(&rq->form, c)) return http_error(c, rq, rq->form.status, rq->form.message, rq->form.param, NULL);
  return MHD_YES;
}

/* The next chunk of the body. Past the limits the connection is cut (see
 * http_answer); a bad form is read to its end and answered then. */
static int body(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg, const char *data,
                size_t size) {
  rq->body += size;
  if (rq->body > cfg->max_upload) return too_big(c, rq, cfg);
  if (serve_now() > rq->deadline)
    return http_error(c, rq, 408, "the upload took longer than the server's time limit", NULL, "timeout");
  form_feed(&rq->form, data, size); /* a problem stays in the form for form_end */
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)version;
  serve_http *h = cls;
  const serve_config *cfg = h->cfg;
  serve_request *rq = *con_cls;
  if (!rq) {
    if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
    *con_cls = rq;
    atomic_fetch_add(&h->in_flight, 1);
    rq->form.fd = -1;
    rq->t0 = serve_now();
    rq->deadline = rq->t0 + cfg->timeout;
    snprintf(rq->method, sizeof rq->method, "%s", method);
    snprintf(rq->path, sizeof rq->path, "%s", url);
    return begin(c, rq, cfg, url, method);
  }
  size_t size = *upload_size;
  *upload_size = 0;
  if (rq->answered) return MHD_YES; /* the rest of a body we already refused */
  if (size) return body(c, rq, cfg, upload, size);
  if (form_end(&rq->form)) return http_error(c, rq, rq->form.status, rq->form.message, rq->form.param, NULL);
  return audio_answer(c, rq, cfg, &rq->form, rq->route->translate, rq->deadline);
}

/* The request is over (answered, or the connection dropped): log it, free it. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
  (void)c;
  serve_http *h = cls;
  const serve_config *cfg = h->cfg;
  serve_request *rq = *con_cls;
  if (!rq) return;
  if (!cfg->quiet) {
    char status[8];
    snprintf(status, sizeof status, "%u", rq->status);
    fprintf(stderr, "%s %s %s %.0f ms%s\n", rq->method, rq->path, rq->status ? status : "-",
            (serve_now() - rq->t0) * 1e3, why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed)");
  }
  form_free(&rq->form);
  free(rq);
  *con_cls = NULL;
  atomic_fetch_sub(&h->in_flight, 1);
}

/* ---- the daemon ---- */

/* A listening socket of our own, so that a failure says why and port 0 works. */
static int listen_on(const char *host, int port, int *bound) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
  int e = getaddrinfo(host, service, &hints, &ai);
  if (e) {
    fprintf(stderr, "steno serve: cannot resolve %s: %s\n", host, gai_strerror(e));
    return -1;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, LISTEN_BACKLOG)) {
    fprintf(stderr, "steno serve: cannot listen on %s port %d: %s\n", host, port, strerror(errno));
    if (fd >= 0) close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  struct sockaddr_storage sa;
  socklen_t len = sizeof sa;
  if (fd >= 0 && !getsockname(fd, (struct sockaddr *)&sa, &len))
    *bound = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                            : ((struct sockaddr_in *)&sa)->sin_port);
  return fd;
}

serve_http *http_start(const serve_config *cfg, const char *host, int port, int *bound) {
  serve_http *h = calloc(1, sizeof *h);
  if (!h) return fputs("steno serve: out of memory\n", stderr), NULL;
  h->cfg = cfg;
  atomic_init(&h->in_flight, 0);
  int fd = listen_on(host, port, bound);
  unsigned idle = cfg->timeout < 1 ? 1 : cfg->timeout > 86400 ? 86400 : (unsigned)cfg->timeout;
  if (fd >= 0)
    h->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC, 0, NULL,
        NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, idle,
        MHD_OPTION_END);
  if (fd >= 0 && !h->daemon) {
    fprintf(stderr, "steno serve: cannot start the HTTP server (libmicrohttpd)\n");
    close(fd);
  }
  if (h->daemon) return h;
  free(h);
  return NULL;
}

void http_quiesce(serve_http *h) {
  MHD_socket fd = MHD_quiesce_daemon(h->daemon);
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

void http_stop(serve_http *h) {
  for (double end = serve_now() + STOP_GRACE_S; atomic_load(&h->in_flight) && serve_now() < end;)
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  MHD_stop_daemon(h->daemon);
  free(h);
}
