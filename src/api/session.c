/* Sessions: what one transcription at a time writes, made by the model's
 * family beside its read-only weights. */
#include <stdlib.h>

#include "api/api.h"
#include "base/error.h"
#include "base/mem.h"

static int session_make(steno_model *m, steno_session **out) {
  steno_session *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->m = m;
  int st = m->fam->session_new(m->impl, &s->impl);
  if (st) {
    free(s);
    return st;
  }
  *out = s;
  return 0;
}

int steno_session_new(steno_model *m, steno_session **out) {
  if (!out) return err_set(STENO_ERR_INVALID, "steno_session_new: NULL argument");
  *out = NULL;
  if (!m) return err_set(STENO_ERR_INVALID, "steno_session_new: NULL model");
  TRY(session_make(m, out));
  atomic_fetch_add(&m->sessions, 1);
  return 0;
}

/* Frees a session without counting it (the model's own, or a caller's). */
static void session_release(steno_session *s) {
  s->m->fam->session_free(s->impl);
  pool_free(s->workers);
  free(s);
}

/* Workers are started at a session's first call and kept: starting 15 threads
 * and stopping them cost ~0.7 ms a call (docs/perf.md). None on one CPU, or
 * where they cannot start (the calls then start their own, as before). */
api_call api_call_begin(steno_session *s) {
  api_call c = {pool_limit_threads(s->m->threads), NULL};
  int workers = pool_default_workers();
  if (!s->workers && workers > 0 && pool_new(workers, &s->workers)) s->workers = NULL;
  c.lent = pool_lend(s->workers);
  return c;
}

void api_call_end(api_call c) {
  pool_lend(c.lent);
  pool_limit_threads(c.threads);
}

void steno_session_free(steno_session *s) {
  if (!s) return;
  steno_model *m = s->m;
  if (s != m->own) atomic_fetch_sub(&m->sessions, 1);
  session_release(s);
}

int api_own_session(steno_model *m, steno_session **out) {
  if (!m->own) TRY(session_make(m, &m->own));
  *out = m->own;
  return 0;
}
