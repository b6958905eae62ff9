/* The public audio API's whole-file reader (the stream functions are in
 * decode.c). */
#include <stdlib.h>

#include "base/error.h"
#include "base/mem.h"
#include "steno.h"

/* Past this a whole-file read refuses: 24 h of float is 5.5 GB; longer
 * recordings go through steno_audio_open and steno_transcribe_audio. */
#define LOAD_MAX_SAMPLES ((size_t)24 * 3600 * 16000)

static int read_all(steno_audio *a, const char *path, float **pcm, size_t *n) {
  size_t cap = 0;
  for (;;) {
    if (*n == cap) {
      if (cap >= LOAD_MAX_SAMPLES)
        return err_set(STENO_ERR_UNSUPPORTED, "%s: longer than 24 hours: read it as a stream "
                       "(steno_audio_open)", path);
      cap = cap ? cap * 2 : 16000 * 60;
      if (cap > LOAD_MAX_SAMPLES) cap = LOAD_MAX_SAMPLES;
      float *p = mem_realloc(*pcm, cap, sizeof *p);
      if (!p) return err_set(STENO_ERR_NOMEM, "%s: out of memory", path);
      *pcm = p;
    }
    size_t got;
    TRY(steno_audio_read(a, *pcm + *n, cap - *n, &got));
    if (!got) return 0;
    *n += got;
  }
}

int steno_audio_load(const char *path, float **pcm, size_t *n) {
  if (!path || !pcm || !n) return err_set(STENO_ERR_INVALID, "steno_audio_load: NULL argument");
  *pcm = NULL;
  *n = 0;
  steno_audio *a;
  TRY(steno_audio_open(path, &a));
  int st = read_all(a, path, pcm, n);
  steno_audio_close(a);
  if (st) {
    free(*pcm);
    *pcm = NULL;
    *n = 0;
  }
  return st;
}

void steno_audio_free(float *pcm) { free(pcm); }
