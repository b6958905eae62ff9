/* What the public API's files share: the model and session behind the opaque
 * handles. */
#ifndef STENO_API_API_H
#define STENO_API_API_H

#include <stdatomic.h>

#include "base/pool.h"
#include "gpu/gpu.h"
#include "models/family.h"
#include "steno.h"

struct steno_model {
  char arch[32];
  const family *fam;
  gpu_device *dev;
  void *impl;
  int threads; /* steno_model_params.threads */
  steno_session *own;   /* steno_transcribe's session, made on first use */
  atomic_int sessions;  /* open sessions the caller made (steno_model_free refuses while > 0) */
};

struct steno_session {
  steno_model *m;
  void *impl;    /* the family's session */
  pool *workers; /* CPU threads lent to its calls' features and gate (made on first use) */
};

/* The session's CPU workers lent to this thread for one call (steno_model_params.threads
 * set as its limit): returns what api_call_end takes back. */
typedef struct {
  int threads; /* the thread's limit before */
  pool *lent;  /* the thread's lent pool before */
} api_call;
api_call api_call_begin(steno_session *s);
void api_call_end(api_call c);

/* The model's own session (made on first use), for steno_transcribe. */
int api_own_session(steno_model *m, steno_session **out);

#endif
