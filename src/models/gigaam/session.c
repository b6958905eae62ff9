/* GigaAM's sessions: the recorder, the activation arena and the GPU search's
 * state of one transcription at a time, beside the shared read-only model. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/gigaam/gigaam.h"

static void arena_free(gigaam_arena *a) {
  gpu_buffer_free(a->mel);
  gpu_buffer_free(a->head);
  conv1d_subsampling_scratch_free(&a->sub);
  conformer_scratch_free(&a->enc);
  memset(a, 0, sizeof *a);
}

void gigaam_session_free(gigaam_session *s) {
  if (!s) return;
  arena_free(&s->arena);
  gpu_transducer_search_free(s->search);
  gpu_rec_free(s->rec);
  free(s);
}

int gigaam_session_new(const gigaam *m, gigaam_session **out) {
  *out = NULL;
  gigaam_session *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->m = m;
  int st = gpu_rec_new(m->dev, &s->rec);
  if (!st) gpu_rec_profile(s->rec, "gigaam");
  if (!st && m->gdec) st = gpu_transducer_search_new(m->gdec, &s->search);
  if (st) {
    gigaam_session_free(s);
    return st;
  }
  *out = s;
  return 0;
}

/* Grows the arena to hold `frames` mel frames (the warm path allocates nothing). */
int gigaam_arena_fit(gigaam_session *s, uint32_t frames) {
  gigaam_arena *a = &s->arena;
  if (frames <= a->frames) return 0;
  arena_free(a);
  const gigaam *m = s->m;
  uint32_t t = gigaam_encoder_frames(m, frames);
  size_t f = sizeof(float);
  int st = gpu_buffer_new(m->dev, (size_t)frames * m->c.mels * f, &a->mel);
  if (!st) st = gpu_buffer_new(m->dev, (size_t)t * gpu_linear_width(&m->head) * f, &a->head);
  if (!st) st = conv1d_subsampling_scratch_new(m->dev, &m->sub, frames, &a->sub);
  if (!st) st = conformer_scratch_new(m->dev, &m->c.dims, t, &a->enc);
  if (st) {
    arena_free(a);
    return st;
  }
  a->frames = frames;
  return 0;
}
