/* The environment variables the CLI turns into steno_model_params: the
 * library reads none of them (steno.h lists the debugging switches it does
 * read). The tests open their devices through this too. */
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole non-negative decimal number in [0, max], or -1. */
static long whole(const char *s, long max) {
  char *end;
  long v = strtol(s, &end, 10);
  return *s >= '0' && *s <= '9' && !*end && v <= max ? v : -1;
}

static int bad(const char *name, const char *value, const char *want) {
  fprintf(stderr, "steno: %s=%s: %s\n", name, value, want);
  return 1;
}

/* STENO_FAST's words, in the order of the STENO_FAST_* values they set. */
static const char *const fast_words[][2] = {
    [STENO_FAST_AUTO] = {"auto", "1"}, [STENO_FAST_OFF] = {"0", "off"},
    [STENO_FAST_ALL] = {"all", NULL}, [STENO_FAST_TIMED] = {"timed", NULL}};

int cli_model_params(steno_model_params *out) {
  steno_model_params p = steno_model_default_params();
  const char *v;
  if ((v = getenv("STENO_DEVICE")) && *v) {
    long i = whole(v, 1 << 20); /* a number is an index, anything else part of a name */
    if (i >= 0) p.device = (int)i;
    else p.device_name = v;
  }
  if ((v = getenv("STENO_FAST")) && *v) {
    p.fast = -1;
    for (int f = 0; f < (int)(sizeof fast_words / sizeof *fast_words); f++)
      for (int w = 0; w < 2; w++)
        if (fast_words[f][w] && !strcmp(v, fast_words[f][w])) p.fast = f;
    if (p.fast < 0) return bad("STENO_FAST", v, "expected 0, 1 (auto), all or timed");
  }
  p.cache_dir = getenv("STENO_CACHE_DIR");
  if ((v = getenv("STENO_PIPELINE_CACHE")) && !strcmp(v, "0")) p.no_cache |= STENO_NO_PIPELINE_CACHE;
  if ((v = getenv("STENO_PROBE_CACHE")) && !strcmp(v, "0")) p.no_cache |= STENO_NO_PROBE_CACHE;
  if ((v = getenv("STENO_THREADS")) && *v && (p.threads = (int)whole(v, 1024)) < 0)
    return bad("STENO_THREADS", v, "expected a number of threads (0: one per CPU)");
  *out = p;
  return 0;
}
