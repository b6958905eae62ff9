/* Nemotron 3.5 Transcribe word times against the processor's
 * align_word_timestamps (tests/fixtures/nemotron_transcribe_tiny.ref.gguf):
 *  - ctc_force_align gives torchaudio's forced_align paths exactly (random
 *    log probabilities, ties, repeats, as many frames as the targets need);
 *  - nt_align_words on the reference's word timestamp and diarization logits
 *    gives the reference's words, times (seconds, ==) and tags for nine
 *    transcripts (speaker tags matched to speakers, an event tag, a dash, an
 *    unknown character, a dropped special token, Chinese by character, Korean
 *    by word, two the processor refuses) and steno run's transcript;
 *  - end to end, steno's generated ids equal transformers' (greedy to steno's
 *    end tokens), steno's own logits give the same words and times exactly,
 *    and steno_result's words carry them in milliseconds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode/ctc.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/nemotron_transcribe/transcribe.h"
#include "steno.h"
#include "text/result.h"

static const gguf_kv *arr(const gguf_file *ref, const char *key, uint32_t type) {
  const gguf_kv *kv = NULL;
  CHECK_OK(gguf_get_arr(ref, key, type, &kv));
  return kv;
}

static void ctc_cases(const gguf_file *ref) {
  char key[64];
  for (int i = 0;; i++) {
    snprintf(key, sizeof key, "ctc.%d.logp", i);
    const gguf_tensor *t = gguf_tensor_find(ref, key);
    if (!t) {
      CHECK(i >= 5, "%d forced alignment cases", i);
      return;
    }
    snprintf(key, sizeof key, "ref.ctc.%d.targets", i);
    const gguf_kv *tg = arr(ref, key, GGUF_VAL_INT32);
    snprintf(key, sizeof key, "ref.ctc.%d.path", i);
    const gguf_kv *want = arr(ref, key, GGUF_VAL_INT32);
    int T = (int)t->ne[1], C = (int)t->ne[0];
    int *path = calloc((size_t)T, sizeof *path);
    CHECK_OK(ctc_force_align(t->data, T, C, C, tg->v.i32, (int)tg->n, C - 1, path));
    bool same = want->n == (size_t)T;
    for (int f = 0; same && f < T; f++) same = path[f] == want->v.i32[f];
    CHECK(same, "forced alignment %d: not torchaudio's path", i);
    free(path);
  }
}

/* words[0..n) against the reference's `prefix` text/start/end/tag keys. */
static void same_words(const gguf_file *ref, const char *prefix, const nt_word *w, size_t n,
                       const char *what) {
  char key[96];
  snprintf(key, sizeof key, "%stext", prefix);
  if (!gguf_find(ref, key)) {
    CHECK(n == 0, "%s: %zu words, the reference none", what, n);
    return;
  }
  const gguf_kv *text = arr(ref, key, GGUF_VAL_STRING);
  snprintf(key, sizeof key, "%sstart", prefix);
  const gguf_kv *start = arr(ref, key, GGUF_VAL_FLOAT64);
  snprintf(key, sizeof key, "%send", prefix);
  const gguf_kv *end = arr(ref, key, GGUF_VAL_FLOAT64);
  snprintf(key, sizeof key, "%stag", prefix);
  const gguf_kv *tag = arr(ref, key, GGUF_VAL_INT32);
  CHECK(text && n == text->n, "%s: %zu words, the reference %zu", what, n, text ? text->n : 0);
  for (size_t i = 0; text && start && end && tag && i < n && i < text->n; i++)
    CHECK(!strcmp(w[i].text, text->v.str[i].s) && w[i].start == start->v.f64[i] &&
              w[i].end == end->v.f64[i] && w[i].tag == tag->v.i32[i],
          "%s word %zu: '%s' %.17g–%.17g tag %d, the reference '%s' %.17g–%.17g tag %d", what, i,
          w[i].text, w[i].start, w[i].end, w[i].tag, text->v.str[i].s, start->v.f64[i],
          end->v.f64[i], tag->v.i32[i]);
}

/* The words of `text` aligned on the reference's logits (rows [2T][V]). */
static int align_on(const nt_model *m, const gguf_tensor *lg, const gguf_tensor *sl, uint32_t valid,
                    const char *text, nt_word **w, size_t *n) {
  uint32_t V = (uint32_t)lg->ne[0], rows = (uint32_t)lg->ne[1], nc = 0;
  int *cols = NULL;
  int st = nt_align_classes(&m->wts.pieces, text, V, &cols, &nc);
  float *logp = !st && nc ? malloc((size_t)rows * nc * sizeof *logp) : NULL;
  if (logp) nt_log_softmax_cols(lg->data, rows, V, V, cols, nc, logp);
  nt_align_input in = {logp, cols, nc, rows, m->wts.factor, sl->data, (uint32_t)sl->ne[0],
                       m->c.sub, valid, (uint32_t)m->mel.c.hop, (uint32_t)m->mel.c.sample_rate};
  *w = NULL, *n = 0;
  if (!st && logp) st = nt_align_words(&m->wts.pieces, text, &in, w, n);
  free(cols), free(logp);
  return st;
}

/* The alignment on the reference's own logits. */
static void reference_logits(const gguf_file *ref, const nt_model *m) {
  const gguf_tensor *lg = gguf_tensor_find(ref, "word_timestamp_logits");
  const gguf_tensor *sl = gguf_tensor_find(ref, "speaker_logits");
  uint32_t valid = 0;
  CHECK_OK(gguf_get_u32(ref, "ref.valid_frames", &valid));
  CHECK(lg && sl && m->wts.pieces.n > 0, "reference logits and the alignment vocabulary");
  if (!lg || !sl || !m->wts.pieces.n) return;
  const gguf_kv *texts = arr(ref, "ref.words.texts", GGUF_VAL_STRING);
  for (size_t i = 0; texts && i < texts->n; i++) {
    nt_word *w = NULL;
    size_t n = 0;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "ref.words.%zu.", i);
    CHECK_OK(align_on(m, lg, sl, valid, texts->v.str[i].s, &w, &n));
    same_words(ref, prefix, w, n, texts->v.str[i].s);
    nt_words_free(w, n);
  }
  const char *run = NULL;
  CHECK_OK(gguf_get_str(ref, "ref.words.transcript", &run));
  nt_word *w = NULL;
  size_t n = 0;
  if (run) CHECK_OK(align_on(m, lg, sl, valid, run, &w, &n));
  same_words(ref, "ref.words.run.", w, n, "steno run's transcript on the reference logits");
  CHECK(n > 0, "steno run's transcript has timed words");
  nt_words_free(w, n);
}

/* steno's own run: ids, words from its own logits, and the result's words. */
static void end_to_end(const gguf_file *f, const gguf_file *ref, const float *pcm, size_t np) {
  ntx_model *m = NULL;
  ntx_session *s = NULL;
  CHECK_OK(ntx_load(test_device(), f, &m));
  if (m) CHECK_OK(ntx_session_new(m, &s));
  if (!s) return ntx_free(m);
  const gguf_kv *want = arr(ref, "ref.words.generated_ids", GGUF_VAL_INT32);
  int *ids = NULL;
  uint32_t n_ids = 0;
  CHECK_OK(ntx_generate(s, pcm, np, NULL, 16 + (uint32_t)(8 * (np / 16000.0)), &ids, &n_ids));
  bool same = want && ids && n_ids == want->n;
  for (uint32_t i = 0; same && i < n_ids; i++) same = ids[i] == want->v.i32[i];
  CHECK(same, "generated %u ids, not transformers' %zu", n_ids, want ? want->n : 0);
  nt_audio a;
  CHECK_OK(nt_audio_run(m->audio, pcm, np, &a));
  nt_word *w = NULL;
  size_t n = 0;
  CHECK_OK(ntx_word_times(m, NULL, &a, ids, n_ids, &w, &n));
  same_words(ref, "ref.words.run.", w, n, "steno's logits");
  steno_result *r = NULL;
  CHECK_OK(ntx_transcribe(s, pcm, np, NULL, &r));
  CHECK(r && steno_result_word_count(r) == n, "the result has %zu words, not %zu",
        r ? steno_result_word_count(r) : 0, n);
  for (size_t i = 0; r && i < n && i < steno_result_word_count(r); i++) {
    steno_word x = steno_result_word(r, i);
    CHECK(x.start_ms == llround(w[i].start * 1000) && x.end_ms == llround(w[i].end * 1000) &&
              !strcmp(x.text, w[i].text) && x.speaker == 0 && x.p > 0 && x.p <= 1,
          "result word %zu: %lld–%lld ms '%s' p %g", i, (long long)x.start_ms,
          (long long)x.end_ms, x.text, x.p);
  }
  steno_result_free(r);
  nt_words_free(w, n);
  nt_audio_free(&a);
  free(ids);
  ntx_session_free(s);
  ntx_free(m);
}

int main(void) {
  gguf_file *f = NULL, *ref = NULL;
  fixture_open("nemotron_transcribe_tiny", &f, &ref);
  if (f && ref) {
    ctc_cases(ref);
    nt_model *m = NULL;
    CHECK_OK(nt_load(test_device(), f, &m));
    if (m) reference_logits(ref, m);
    nt_free(m);
    const gguf_tensor *pcm = gguf_tensor_find(ref, "pcm");
    CHECK(pcm != NULL, "reference pcm");
    if (pcm) end_to_end(f, ref, pcm->data, pcm->nelem);
  }
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
