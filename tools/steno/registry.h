/* Short model names (parakeet-v3, whisper-turbo, ...) for the GGUF files that
 * transcribe.cpp publishes on the Hugging Face hub as
 * handy-computer/<slug>-gguf/<slug>-<QUANT>.gguf. */
#ifndef STENO_REGISTRY_H
#define STENO_REGISTRY_H

#include <stdio.h>

#define REGISTRY_ORG "handy-computer"
#define REGISTRY_QUANT "Q8_0" /* published for every model; the reference's own pick */

typedef struct {
  const char *name;  /* short name users type */
  const char *slug;  /* published variant: repo <slug>-gguf, files <slug>-<QUANT>.gguf */
  const char *size;  /* size of the Q8_0 file as the model card gives it */
  const char *about; /* one line for `steno list --available` */
} registry_model;

/* The entry whose short name or slug is `name` (case-sensitive), or NULL. */
const registry_model *registry_find(const char *name);

/* The entry whose short name is closest to `name` (edit distance), for "did you mean". */
const registry_model *registry_closest(const char *name);

/* The entry published as repo `repo` ("org/name"), or NULL. */
const registry_model *registry_by_repo(const char *repo);

/* Prints the table for `steno list --available`. */
void registry_print(FILE *f);

#endif
