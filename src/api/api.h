/* What the public API's files share: the model and session behind the opaque
 * handles. */
#ifndef STENO_API_API_H
#define STENO_API_API_H

#include <stdatomic.h>

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
  void *impl; /* the family's session */
};

/* The model's own session (made on first use), for steno_transcribe. */
int api_own_session(steno_model *m, steno_session **out);

#endif
