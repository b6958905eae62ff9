/* The library's model params as the CLI sets them: from the environment. */
#ifndef STENO_CLI_PARAMS_H
#define STENO_CLI_PARAMS_H

#include "steno.h"

/* steno_model_default_params() with what these variables ask for:
 *   STENO_DEVICE          a device's index, or part of its name
 *   STENO_FAST            0 (off), 1 or auto (the default), all, timed
 *   STENO_CACHE_DIR       the caches' folder
 *   STENO_PIPELINE_CACHE  0: no pipeline cache
 *   STENO_PROBE_CACHE     0: no probe cache
 *   STENO_THREADS         CPU threads (0: one per CPU)
 * A value it cannot take is printed to stderr ("steno: STENO_FAST=x: ...")
 * and returns non-zero. */
int cli_model_params(steno_model_params *out);

#endif
