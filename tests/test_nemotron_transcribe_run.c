/* Nemotron 3.5 Transcribe end to end on tests/fixtures/nemotron_transcribe_tiny
 * (towers' fixture: the audio module's references and the decoder's): the clip's
 * pcm through the audio module, the default request's prompt with the audio
 * embeddings in its <|audio|> rows, and the Nemotron-H decoder give
 * transformers' generated tokens, exactly; the text is those tokens' pieces
 * with the special ones left out; the public API (steno_model_load of the file,
 * steno_transcribe) gives the same text; broken files are refused. */
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/nemotron_transcribe/transcribe.h"
#include "steno.h"
#include "text/bpe.h"

static const gguf_kv *ints(const gguf_file *ref, const char *key) {
  const gguf_kv *kv = NULL;
  CHECK_OK(gguf_get_arr(ref, key, GGUF_VAL_INT32, &kv));
  return kv;
}

/* The public API on the fixture file: the same text as the model's own call
 * (made printable, as every result the API gives: random tokens make control
 * characters and broken UTF-8). */
static void public_api(const float *pcm, size_t n, const char *text) {
  char *want = NULL;
  CHECK_OK(utf8_printable(text, strlen(text), &want));
  char path[512];
  fixture_path(path, sizeof path, "nemotron_transcribe_tiny.gguf");
  steno_model *model = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &model));
  steno_result *r = NULL;
  if (model) CHECK_OK(steno_transcribe(model, pcm, n, NULL, &r));
  if (r && want) CHECK(!strcmp(steno_result_text(r), want), "steno_transcribe: '%s', the model's '%s'",
                       steno_result_text(r), want);
  steno_result_free(r);
  steno_model_free(model);
  free(want);
}

/* Files the end-to-end loader refuses, naming the culprit. */
typedef struct {
  const char *drop_key, *u32_key;
  uint32_t u32;
} change;

static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  if (c->drop_key && !strcmp(kv->key, c->drop_key)) return true;
  if (c->u32_key && !strcmp(kv->key, c->u32_key)) return gw_u32(w, kv->key, c->u32), true;
  return false;
}

static void load_fails(const gguf_file *src, const change *c, const char *misshape,
                       const char *want) {
  gw_edit e = {.key = edit_key, .ctx = c, .misshape = misshape};
  size_t size;
  uint8_t *bytes = gw_rewrite(src, &e, &size);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, bytes, size, "rewritten.gguf"));
  ntx_model *m = NULL;
  int st = f ? ntx_load(test_device(), f, &m) : -1;
  CHECK(st && !m, "a file with '%s' wrong loads", want);
  CHECK(strstr(steno_last_error(), want) != NULL, "message '%s' does not name '%s'",
        steno_last_error(), want);
  ntx_free(m);
  gguf_close(f);
  free(bytes);
}

static void loader_errors(const gguf_file *f) {
  load_fails(f, &(change){.drop_key = "tokenizer.ggml.tokens"}, NULL, "tokenizer.ggml.tokens");
  load_fails(f, &(change){.drop_key = "nemotron3_5_transcribe.lm.layers_block_type"}, NULL,
             "layers_block_type");
  load_fails(f, &(change){.u32_key = "nemotron3_5_transcribe.lm.vocab_size", .u32 = 400}, NULL,
             "400");
  load_fails(f, &(change){0}, "lm.layers.0.mixer.in_proj.weight", "in_proj");
}

int main(void) {
  gguf_file *f, *ref;
  fixture_open("nemotron_transcribe_tiny", &f, &ref);
  ntx_model *m = NULL;
  ntx_session *s = NULL;
  if (f) CHECK_OK(ntx_load(test_device(), f, &m));
  if (m) CHECK_OK(ntx_session_new(m, &s));
  const gguf_tensor *pcm = ref ? gguf_tensor_find(ref, "pcm") : NULL;
  const gguf_kv *gen = ref ? ints(ref, "ref.generated_ids") : NULL;
  if (s && pcm && gen && pcm->type == GGUF_TYPE_F32) {
    int *ids = NULL;
    uint32_t n = 0;
    CHECK_OK(ntx_generate(s, pcm->data, pcm->nelem, (uint32_t)gen->n, &ids, &n));
    CHECK(n == gen->n, "%u tokens, the reference %zu", n, gen->n);
    for (uint32_t i = 0; i < n && i < gen->n; i++)
      CHECK(ids[i] == gen->v.i32[i], "token %u: %d, the reference %d", i, ids[i], gen->v.i32[i]);
    steno_result *r = NULL;
    CHECK_OK(ntx_transcribe(s, pcm->data, pcm->nelem, NULL, &r));
    if (r) {
      /* the reference's tokens: the first 8 of the run (it goes on to its cap) */
      char *want = NULL;
      int keep[64];
      size_t k = 0;
      for (size_t i = 0; i < gen->n && i < 64; i++)
        if (!m->special[gen->v.i32[i]]) keep[k++] = gen->v.i32[i];
      CHECK_OK(bpe_decode(&m->tok, keep, k, &want));
      const char *got = steno_result_text(r);
      size_t lead = want ? strspn(want, " ") : 0;
      CHECK(want && strlen(got) > 0 && !strncmp(got, want + lead, strlen(want) - lead),
            "text '%s' does not start with the reference tokens' '%s'", got, want ? want : "");
      CHECK(steno_result_segment_count(r) == 1, "%zu segments", steno_result_segment_count(r));
      steno_timings tm = steno_result_timings(r);
      CHECK(tm.encoder_ms > 0 && tm.decoder_ms > 0, "timings %g / %g ms", tm.encoder_ms,
            tm.decoder_ms);

      public_api(pcm->data, pcm->nelem, got);
      free(want);
    }
    steno_result_free(r);
    free(ids);
  }
  ntx_session_free(s);
  ntx_free(m);
  if (f) loader_errors(f);
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
