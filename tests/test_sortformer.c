/* Sortformer parity with the reference (tests/fixtures/sortformer_tiny*, made by
 * scripts/sortformer_ref.py from transformers' ParakeetEncoder and NeMo's
 * streaming update): log-mel; per chunk the window's pre-encode embeddings, the
 * FastConformer output and the predictions over [cache | FIFO | window], with
 * the cache and FIFO sizes exactly; the final predictions; the speaker turns
 * exactly, from the reference mel and end to end from the clip; and the public
 * API: the diarizer alone, and as the diarizer of an ASR model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_ref.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/sortformer/sortformer.h"
#include "steno.h"
#include "text/result.h"

#define MEL_TOL 1e-4f  /* absolute; the reference is f64 */
#define EMB_TOL 1e-4f  /* relative to max(1, max|want|) */
#define ENC_TOL 1e-3f  /* relative, as Parakeet's encoder */
#define PRED_TOL 1e-4f /* absolute; every decision is ≥ 1e-3 from its threshold */

static const float *ref_f32(const gguf_file *ref, const char *name, size_t *n) {
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32, "reference tensor %s", name);
  if (!t) return NULL;
  *n = t->nelem;
  return t->data;
}

typedef struct {
  const gguf_file *ref;
  uint32_t d, speakers, chunks;
  bool compressed; /* the cache had been compressed before the last chunk */
  float worst_emb, worst_enc, worst_p;
} watch_state;

static void on_chunk(void *user, uint32_t i, const sf_stream *before, const float *emb,
                     uint32_t t_win, uint32_t lc, uint32_t rc, const float *enc,
                     const float *preds, uint32_t t_cat) {
  watch_state *w = user;
  char key[64];
  w->chunks = i + 1;
  w->compressed = before->compressed;
  snprintf(key, sizeof key, "ref.chunk.%u.meta", i);
  const gguf_kv *meta = gguf_find(w->ref, key);
  CHECK(meta && meta->n == 9, "%s", key);
  if (!meta || meta->n != 9) return;
  const int32_t *m = meta->v.i32;
  bool same = (int32_t)before->n_cache == m[0] && (int32_t)before->n_fifo == m[1] &&
              (int32_t)t_win == m[2] && (int32_t)lc == m[3] && (int32_t)rc == m[4] &&
              (int64_t)before->n_sil == m[7] && (int32_t)before->compressions == m[8];
  CHECK(same, "chunk %u: cache %u, fifo %u, window %u, context %u/%u, %llu silent, %u compressions; "
        "reference %d, %d, %d, %d/%d, %d, %d", i, before->n_cache, before->n_fifo, t_win, lc, rc,
        (unsigned long long)before->n_sil, before->compressions, m[0], m[1], m[2], m[3], m[4], m[7], m[8]);
  if (!same) return;
  size_t n;
  const float *want;
  snprintf(key, sizeof key, "chunk.%u.embs", i);
  if ((want = ref_f32(w->ref, key, &n)) && n == (size_t)t_win * w->d) {
    check_close(key, emb, want, n, EMB_TOL);
    w->worst_emb = fmaxf(w->worst_emb, max_abs(emb, want, n));
  }
  snprintf(key, sizeof key, "chunk.%u.enc", i);
  if ((want = ref_f32(w->ref, key, &n)) && n == (size_t)t_cat * w->d) {
    check_close(key, enc, want, n, ENC_TOL);
    w->worst_enc = fmaxf(w->worst_enc, max_abs(enc, want, n));
  }
  snprintf(key, sizeof key, "chunk.%u.preds", i);
  if ((want = ref_f32(w->ref, key, &n)) && n == (size_t)t_cat * w->speakers) {
    check_abs(key, preds, want, n, PRED_TOL);
    w->worst_p = fmaxf(w->worst_p, max_abs(preds, want, n));
  }
}

/* The turns equal the reference's ref.segments (start ms, end ms, speaker)… */
static void same_turns(const char *what, const steno_turn *t, size_t n, const gguf_file *ref) {
  const gguf_kv *seg = gguf_find(ref, "ref.segments");
  CHECK(seg && seg->elem_type == GGUF_VAL_INT32, "reference key ref.segments");
  if (seg && seg->elem_type != GGUF_VAL_INT32) return;
  if (!seg) return;
  const int32_t *s = seg->v.i32;
  bool same = n * 3 == seg->n;
  for (size_t i = 0; same && i < n; i++)
    same = t[i].start_ms == s[3 * i] && t[i].end_ms == s[3 * i + 1] && t[i].speaker == s[3 * i + 2];
  CHECK(same, "%s: %zu turns, reference %zu (or times/speakers differ)", what, n, seg->n / 3);
  printf("%s: %zu turns\n", what, n);
}

static void parity(sortformer_session *s, const gguf_file *ref) {
  const sortformer *m = s->m;
  size_t n_pcm, n_mel, n_pred, frames;
  const float *pcm = ref_f32(ref, "pcm", &n_pcm), *ref_mel = ref_f32(ref, "mel", &n_mel);
  const float *ref_pred = ref_f32(ref, "preds", &n_pred);
  if (!pcm || !ref_mel || !ref_pred) return;
  float *mel = NULL, *preds = NULL;
  CHECK_OK(sortformer_features(m, pcm, n_pcm, &mel, &frames));
  CHECK(frames * m->c.mels == n_mel, "%zu mel frames, reference %zu", frames, n_mel / m->c.mels);
  if (mel && frames * m->c.mels == n_mel) {
    check_abs("mel", mel, ref_mel, n_mel, MEL_TOL);
    printf("mel max |Δ| %.2e\n", max_abs(mel, ref_mel, n_mel));
  }
  free(mel);
  /* The streaming run from the reference's mel, chunk by chunk. */
  watch_state w = {ref, m->c.dims.d, m->c.speakers, 0, false, 0, 0, 0};
  sortformer_watch watch = {.chunk = on_chunk, .user = &w};
  uint32_t t = 0, chunks = gguf_find(ref, "ref.chunks")->v.u32[0];
  CHECK_OK(sortformer_stream_run(s, ref_mel, (uint32_t)(n_mel / m->c.mels), &watch, &preds, &t));
  CHECK(w.chunks == chunks && w.compressed, "%u chunks (reference %u), cache compressed: %d",
        w.chunks, chunks, w.compressed);
  printf("chunks: embeddings max |Δ| %.2e, encoder %.2e, predictions %.2e\n", w.worst_emb,
         w.worst_enc, w.worst_p);
  CHECK(t * m->c.speakers == n_pred, "%u frames of predictions, reference %zu", t,
        n_pred / m->c.speakers);
  if (preds && t * m->c.speakers == n_pred) {
    check_abs("preds", preds, ref_pred, n_pred, PRED_TOL);
    steno_turn *turns = NULL;
    size_t nt = 0;
    CHECK_OK(sortformer_turns(preds, t, m->c.speakers, 80.0, &turns, &nt));
    same_turns("turns from the reference mel", turns, nt, ref);
    free(turns);
  }
  free(preds);
  /* End to end from the clip. */
  steno_result *r = NULL;
  CHECK_OK(sortformer_diarize(s, pcm, n_pcm, NULL, NULL, &r));
  if (r) {
    steno_turn *turns = r->turns;
    same_turns("turns from the clip", turns, steno_result_turn_count(r), ref);
    CHECK(steno_result_turn(r, steno_result_turn_count(r)).speaker == 0, "turn past the end");
    CHECK(!strcmp(steno_result_text(r), "") && steno_result_word_count(r) == 0, "text in a diarization");
  }
  steno_result_free(r);
}

/* Through the public API: a Sortformer loaded by steno_model_load gives the
 * reference's turns and no text; as params.diarizer of an ASR model it labels
 * every word and segment (each segment's words share its speaker, the words
 * stay in order under the segments); a diarizer that is not one, or one given
 * to a diarizer, is refused. */
static void public_api(const gguf_file *ref) {
  char model[512], asr[512];
  fixture_path(model, sizeof model, "sortformer_tiny.gguf");
  fixture_path(asr, sizeof asr, "parakeet_ctc_tiny.gguf");
  size_t n;
  const float *pcm = ref_f32(ref, "pcm", &n);
  steno_model *d = NULL, *m = NULL;
  CHECK_OK(steno_model_load(model, test_params(), &d));
  CHECK_OK(steno_model_load(asr, test_params(), &m));
  if (!d || !m || !pcm) goto done;
  CHECK(!strcmp(steno_model_architecture(d), "sortformer"), "architecture");
  steno_result *r = NULL, *t = NULL;
  CHECK_OK(steno_transcribe(d, pcm, n, NULL, &r));
  if (r) same_turns("steno_transcribe(diarizer)", r->turns, r->nturns, ref);
  steno_transcribe_params p = steno_transcribe_default_params();
  p.diarizer = d;
  CHECK_OK(steno_transcribe(m, pcm, n, &p, &t));
  if (r && t) {
    bool same = t->nturns == r->nturns;
    for (size_t i = 0; same && i < r->nturns; i++)
      same = t->turns[i].speaker == r->turns[i].speaker &&
             t->turns[i].start_ms == r->turns[i].start_ms && t->turns[i].end_ms == r->turns[i].end_ms;
    CHECK(same, "the transcript's turns are the diarizer's");
    size_t w = 0;
    for (size_t i = 0; i < t->nsegments; i++) {
      steno_segment g = steno_result_segment(t, i);
      CHECK(g.speaker >= 1 && g.speaker <= 4, "segment %zu speaker %d", i, g.speaker);
      for (; w < t->nwords && t->words[w].end_ms <= g.end_ms; w++)
        CHECK(!t->words[w].text[0] || t->words[w].speaker == g.speaker,
              "word %zu '%s' speaker %d in segment %zu of speaker %d", w, t->words[w].text,
              t->words[w].speaker, i, g.speaker);
    }
    CHECK(w == t->nwords && t->nwords > 0, "%zu of %zu words under the segments", w, t->nwords);
    printf("diarized transcript: %zu words, %zu segments\n", t->nwords, t->nsegments);
  }
  steno_result_free(t);
  t = NULL;
  p.diarizer = m;
  CHECK(steno_transcribe(m, pcm, n, &p, &t) == STENO_ERR_INVALID && !t &&
            strstr(steno_last_error(), "not a diarizer"), "an ASR model as the diarizer");
  p.diarizer = d;
  CHECK(steno_transcribe(d, pcm, n, &p, &t) == STENO_ERR_INVALID && !t &&
            strstr(steno_last_error(), "diarizer itself"), "a diarizer with a diarizer");
  steno_result_free(r);
done:
  steno_model_free(m);
  steno_model_free(d);
}

int main(void) {
  gguf_file *f = NULL, *ref = NULL;
  fixture_open("sortformer_tiny", &f, &ref);
  sortformer *m = NULL;
  sortformer_session *s = NULL;
  if (f) CHECK_OK(sortformer_load(test_device(), f, &m));
  if (m) CHECK_OK(sortformer_session_new(m, &s));
  if (s && ref) parity(s, ref);
  /* Too short for two mel frames: an empty result, no turns. */
  float quiet[300] = {0};
  steno_result *r = NULL;
  if (s) CHECK_OK(sortformer_diarize(s, quiet, 300, NULL, NULL, &r));
  if (r) CHECK(steno_result_turn_count(r) == 0, "turns in 300 samples");
  steno_result_free(r);
  sortformer_session_free(s);
  sortformer_free(m);
  if (ref) public_api(ref);
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
