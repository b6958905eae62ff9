/* Parakeet's sessions: the recorder, the activation arena and the GPU search's
 * state of one transcription at a time, beside the shared read-only model. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/parakeet/parakeet.h"

void parakeet_arena_free(parakeet_arena *a) {
  gpu_buffer_free(a->mel);
  gpu_buffer_free(a->head);
  gpu_buffer_free(a->prompt_hidden);
  gpu_buffer_free(a->prompt_out);
  dw_subsampling_scratch_free(&a->sub);
  conformer_scratch_free(&a->enc);
  memset(a, 0, sizeof *a);
}

void parakeet_session_free(parakeet_session *s) {
  if (!s) return;
  parakeet_arena_free(&s->arena);
  parakeet_batch_free(s->batch);
  parakeet_stream_end(s);
  gpu_buffer_free(s->prompt_in.bias);
  gpu_transducer_search_free(s->search);
  gpu_input_free(&s->pcm);
  gpu_rec_free(s->rec);
  free(s);
}

int parakeet_session_new(const parakeet *m, parakeet_session **out) {
  *out = NULL;
  parakeet_session *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->m = m;
  int st = gpu_rec_new(m->dev, &s->rec);
  if (!st) gpu_rec_profile(s->rec, "parakeet");
  if (!st && m->gdec) st = gpu_transducer_search_new(m->gdec, &s->search);
  s->prompt_id = UINT32_MAX;
  if (!st && m->prompt.n) {
    /* The model's weights with a bias buffer of the session's own. */
    s->prompt_in = m->prompt.in;
    s->prompt_in.bias = NULL;
    st = gpu_buffer_new(m->dev, gpu_linear_width(&m->prompt.in) * sizeof(float), &s->prompt_in.bias);
  }
  if (st) {
    parakeet_session_free(s);
    return st;
  }
  *out = s;
  return 0;
}

int parakeet_session_prompt(parakeet_session *s) {
  const parakeet *m = s->m;
  if (!m->prompt.n) return 0;
  uint32_t id;
  TRY(parakeet_prompt_id(m, s->language, &id));
  if (id == s->prompt_id) return 0;
  size_t width = gpu_linear_width(&m->prompt.in);
  TRY(gpu_upload(s->prompt_in.bias, 0, m->prompt.bias + id * width, width * sizeof(float)));
  s->prompt_id = id;
  return 0;
}
