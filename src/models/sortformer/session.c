/* Sortformer's sessions: the recorder and the activation arena of one
 * diarization at a time, beside the shared read-only model. */
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "models/sortformer/sortformer.h"

void sortformer_session_free(sortformer_session *s) {
  if (!s) return;
  sortformer_arena *a = &s->arena;
  gpu_buffer_free(a->mel);
  gpu_buffer_free(a->emb);
  dw_subsampling_scratch_free(&a->sub);
  conformer_scratch_free(&a->enc);
  postln_scratch_free(&a->tf);
  gpu_rec_free(s->rec);
  free(s);
}

int sortformer_session_new(const sortformer *m, sortformer_session **out) {
  *out = NULL;
  sortformer_session *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->m = m;
  int st = gpu_rec_new(m->dev, &s->rec);
  if (!st) gpu_rec_profile(s->rec, "sortformer");
  if (st) {
    sortformer_session_free(s);
    return st;
  }
  *out = s;
  return 0;
}
