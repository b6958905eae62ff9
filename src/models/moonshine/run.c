/* Moonshine: greedy decoding as transcribe.cpp and transformers' generate
 * (max_length = max_position_embeddings) do it: from <s> at position 0, the
 * argmax of the raw logits (no suppression, no temperature), until </s> or
 * until the sequence holds max_pos tokens (Streaming: or the duration budget
 * of spec §4.5); then the text is truncated, and said so. */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "models/moonshine/moonshine.h"
#include "text/result.h"

/* The softmax probability of x[id] over n logits. */
static float prob(const float *x, int n, int id) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += exp((double)x[i] - x[id]);
  return (float)(1.0 / sum);
}

uint32_t moonshine_max_tokens(const moonshine *m) {
  uint32_t cap = m->c.max_pos - 1; /* the sequence with <s> fills the positions */
  if (m->c.streaming) { /* 6.5 tokens per second of audio (20 ms frames) + 24 */
    uint64_t budget = (uint64_t)m->frames * 320 * 13 / (2 * 16000) + 24;
    if (budget < cap) cap = (uint32_t)budget;
  }
  return cap;
}

int moonshine_decode(moonshine *m, const steno_transcribe_params *p, dec_tokens *out,
                     bool *truncated) {
  const moonshine_config *c = &m->c;
  float *x = m->a.host_logits;
  uint32_t cap = moonshine_max_tokens(m);
  int id = c->bos;
  *truncated = false;
  for (uint32_t pos = 0;; pos++) {
    if (p && p->abort && p->abort(p->abort_user)) return err_set(STENO_ERR_ABORTED, "aborted");
    TRY(moonshine_feed(m, id, pos, x));
    id = dec_argmax(x, (int)c->vocab);
    if (id == c->eos) return 0;
    TRY(dec_push(out, (dec_token){id, 0, (int)m->frames, prob(x, (int)c->vocab, id)}));
    if (out->n >= cap) {
      *truncated = true;
      return 0;
    }
  }
}

int moonshine_transcribe(moonshine *m, const float *pcm, size_t n,
                         const steno_transcribe_params *p, steno_result **out) {
  *out = NULL;
  double seconds = (double)n / 16000.0;
  if (!moonshine_frames(m, n)) return result_empty(seconds, out); /* too short for one frame */
  double t0 = time_now();
  TRY(moonshine_encode(m, pcm, n, NULL, NULL, NULL));
  double t1 = time_now();
  dec_tokens toks = {0};
  bool truncated;
  int st = moonshine_decode(m, p, &toks, &truncated);
  double t2 = time_now();
  if (!st && truncated)
    log_warn("moonshine: %zu tokens reached the cap (%u positions%s) before the end of text: the "
             "text is truncated", toks.n, m->c.max_pos,
             m->c.streaming ? ", 6.5 tokens per second of audio + 24" : "");
  /* No token times: every token spans the whole clip (one segment). */
  if (!st) st = result_from_tokens(&m->vocab, &toks, seconds * 1000.0 / m->frames, 0, seconds, out);
  dec_free(&toks);
  if (st) return st;
  (*out)->timings.encoder_ms = (t1 - t0) * 1e3;
  (*out)->timings.decoder_ms = (t2 - t1) * 1e3;
  return 0;
}
