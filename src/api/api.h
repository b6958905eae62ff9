/* What the public API's files share: the model behind the opaque handle. */
#ifndef STENO_API_API_H
#define STENO_API_API_H

#include "gpu/gpu.h"
#include "models/family.h"
#include "steno.h"

struct steno_model {
  char arch[32];
  const family *fam;
  gpu_device *dev;
  void *impl;
  int threads; /* steno_model_params.threads */
};

#endif
