/* The multipart/form-data body of a transcription request (serve_form.h),
 * parsed by libmicrohttpd's post processor, which hands us each part's bytes
 * as they arrive. */
#include "serve_form.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
  PARSE_BUFFER = 64 * 1024, /* the post processor's buffer for a part's headers */
  FIELD_MAX = 64 * 1024,    /* a text field (a long prompt fits) */
};

static int problem(serve_form *form, int status, const char *param, const char *fmt, ...) {
  if (form->status) return -1; /* the first problem is the one to report */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(form->message, sizeof form->message, fmt, ap);
  va_end(ap);
  form->status = status;
  form->param = param;
  return -1;
}

/* ---- the file part ---- */

/* A private temporary file with no name: nothing is left behind, whatever happens. */
static int temp_file(serve_form *form) {
  const char *dir = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/steno-upload-XXXXXX", dir && dir[0] ? dir : "/tmp");
  form->fd = mkstemp(path);
  if (form->fd < 0) return problem(form, 500, NULL, "cannot store the upload: %s: %s", path, strerror(errno));
  unlink(path);
  return 0;
}

static int file_bytes(serve_form *form, const char *data, size_t size, uint64_t off) {
  if (off == 0 && form->fd >= 0 && form->file_bytes)
    return problem(form, 400, "file", "the form has more than one file part");
  if (form->fd < 0 && temp_file(form)) return -1;
  for (size_t done = 0; done < size;) {
    ssize_t n = write(form->fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return problem(form, 500, NULL, "cannot store the upload: %s", strerror(errno));
    done += (size_t)n;
  }
  form->file_bytes += size;
  return 0;
}

/* ---- text fields ---- */

/* Appends a chunk of a field's value (a value may come in several). `key` is
 * ours (a literal): the form keeps it as its problem's param. */
static int append(serve_form *form, char **value, const char *key, const char *data, size_t size) {
  size_t had = *value ? strlen(*value) : 0;
  if (had + size > FIELD_MAX) return problem(form, 400, key, "the field '%s' is over %d bytes", key, FIELD_MAX);
  char *v = realloc(*value, had + size + 1);
  if (!v) return problem(form, 500, NULL, "out of memory");
  memcpy(v + had, data, size);
  v[had + size] = 0;
  *value = v;
  return 0;
}

/* The field named `key` (its value in *value, its name as a literal), or NULL. */
static const char *field(serve_form *form, const char *key, char ***value) {
  static const struct {
    const char *key;
    size_t offset;
  } fields[] = {
      {"model", offsetof(serve_form, model)},
      {"language", offsetof(serve_form, language)},
      {"prompt", offsetof(serve_form, prompt)},
      {"response_format", offsetof(serve_form, response_format)},
      {"temperature", offsetof(serve_form, temperature)},
  };
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    if (!strcmp(key, fields[i].key)) {
      *value = (char **)((char *)form + fields[i].offset);
      return fields[i].key;
    }
  return NULL;
}

/* timestamp_granularities[] repeats: each part is one more value. */
static int granularity(serve_form *form, const char *data, size_t size, uint64_t off) {
  if (off == 0 || !form->ngranularities) {
    if (form->ngranularities == FORM_MAX_GRANULARITIES)
      return problem(form, 400, "timestamp_granularities", "too many timestamp_granularities");
    form->ngranularities++;
  }
  return append(form, &form->granularities[form->ngranularities - 1], "timestamp_granularities", data, size);
}

static enum MHD_Result part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                            const char *content_type, const char *encoding, const char *data, uint64_t off,
                            size_t size) {
  (void)kind, (void)filename, (void)content_type, (void)encoding;
  serve_form *form = cls;
  char **value;
  const char *name;
  int st = 0;
  if (!key) st = 0;
  else if (!strcmp(key, "file")) st = file_bytes(form, data, size, off);
  else if (!strcmp(key, "timestamp_granularities[]") || !strcmp(key, "timestamp_granularities"))
    st = granularity(form, data, size, off);
  else if ((name = field(form, key, &value))) st = append(form, value, name, data, size);
  return st ? MHD_NO : MHD_YES; /* other fields are ignored, as unknown ones should be */
}

/* ---- the body ---- */

int form_begin(serve_form *form, struct MHD_Connection *c) {
  memset(form, 0, sizeof *form);
  form->fd = -1;
  form->pp = MHD_create_post_processor(c, PARSE_BUFFER, part, form);
  if (!form->pp) return problem(form, 400, NULL, "the body must be multipart/form-data, with a boundary");
  return 0;
}

int form_feed(serve_form *form, const char *data, size_t size) {
  if (form->status) return -1;
  if (MHD_post_process(form->pp, data, size) == MHD_NO)
    return problem(form, 400, NULL, "the multipart/form-data body is malformed");
  return 0;
}

int form_end(serve_form *form) {
  struct MHD_PostProcessor *pp = form->pp;
  form->pp = NULL;
  if (pp && MHD_destroy_post_processor(pp) == MHD_NO)
    return problem(form, 400, NULL, "the multipart/form-data body ends in the middle of a part");
  if (form->status) return -1;
  if (form->fd < 0) return problem(form, 400, "file", "no file: the form needs a 'file' part with the audio");
  return 0;
}

void form_free(serve_form *form) {
  if (form->pp) MHD_destroy_post_processor(form->pp);
  if (form->fd >= 0) close(form->fd);
  char **strings[] = {&form->model, &form->language, &form->prompt, &form->response_format, &form->temperature};
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) free(*strings[i]);
  for (int i = 0; i < form->ngranularities; i++) free(form->granularities[i]);
  memset(form, 0, sizeof *form);
  form->fd = -1;
}
