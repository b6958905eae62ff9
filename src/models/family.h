/* A model family as the public API sees it: how to load it from a GGUF file,
 * open sessions on it, run a session on a piece of audio, and free them. One
 * table row per architecture. A model is read-only once loaded; a session holds
 * what one transcription writes (recorder, activations, decoder state), so
 * sessions of one model may run on different threads at once. */
#ifndef STENO_MODELS_FAMILY_H
#define STENO_MODELS_FAMILY_H

#include <stdbool.h>

#include "gpu/gpu.h"
#include "io/gguf.h"
#include "steno.h"

typedef struct {
  const char *arch; /* general.architecture */
  int (*load)(gpu_device *dev, const gguf_file *f, void **model);
  void (*free)(void *model);
  int (*session_new)(void *model, void **session); /* the model must outlive it */
  void (*session_free)(void *session);
  /* n samples of 16 kHz mono pcm (at most window seconds of it, when the
   * family has a window) → a result with times from the piece's start. */
  int (*transcribe)(void *session, const float *pcm, size_t n, const steno_transcribe_params *p,
                    steno_result **out);
  double window; /* longest piece the model takes in one call, seconds (0: any) */
  bool diarizer; /* a diarizer (speaker turns, no text): transcribe takes the whole audio */
  /* Native streaming (cache-aware models; src/api/stream.c), or NULL: the API
   * re-runs transcribe over a sliding window instead. stream_begin answers
   * STENO_ERR_UNSUPPORTED for a model of the family that cannot stream (the
   * window loop then); the stream's state lives in the session. */
  int (*stream_begin)(void *session, const steno_stream_params *p);
  int (*stream_feed)(void *session, const float *pcm, size_t n);
  int (*stream_result)(void *session, steno_result **out); /* the text so far (all firm) */
  int (*stream_finish)(void *session, steno_result **out);
  void (*stream_end)(void *session);
  /* count pieces at once (each as transcribe takes it; out[i] as transcribe
   * gives it, none left on failure), or NULL: the API calls transcribe for
   * each. Parakeet runs them through its encoder in padded batches. */
  int (*transcribe_batch)(void *session, const float *const *pcm, const size_t *n, size_t count,
                          const steno_transcribe_params *p, steno_result **out);
} family;

/* The family of an architecture, or NULL. */
const family *family_find(const char *arch);

/* Architectures steno runs, comma-separated (for messages). */
const char *family_names(void);

#endif
