#include "models/family.h"

#include <string.h>

#include "models/gigaam/gigaam.h"
#include "models/moonshine/moonshine.h"
#include "models/nemotron_transcribe/transcribe.h"
#include "models/parakeet/parakeet.h"
#include "models/sortformer/sortformer.h"
#include "models/whisper/whisper.h"

static int parakeet_load_any(gpu_device *dev, const gguf_file *f, void **m) {
  return parakeet_load(dev, f, (parakeet **)m);
}
static void parakeet_free_any(void *m) { parakeet_free(m); }
static int parakeet_session_new_any(void *m, void **s) {
  return parakeet_session_new(m, (parakeet_session **)s);
}
static void parakeet_session_free_any(void *s) { parakeet_session_free(s); }
static int parakeet_transcribe_any(void *s, const float *pcm, size_t n,
                                   const steno_transcribe_params *p, steno_result **out) {
  transducer_abort stop = {p->abort, p->abort_user};
  ((parakeet_session *)s)->language = p->language; /* Nemotron 3.5's prompt (else unused) */
  return parakeet_transcribe(s, pcm, n, &stop, out);
}
static int parakeet_transcribe_batch_any(void *s, const float *const *pcm, const size_t *n,
                                         size_t count, const steno_transcribe_params *p,
                                         steno_result **out) {
  transducer_abort stop = {p->abort, p->abort_user};
  ((parakeet_session *)s)->language = p->language;
  return parakeet_transcribe_batch(s, pcm, n, count, &stop, out);
}

static int gigaam_load_any(gpu_device *dev, const gguf_file *f, void **m) {
  return gigaam_load(dev, f, (gigaam **)m);
}
static void gigaam_free_any(void *m) { gigaam_free(m); }
static int gigaam_session_new_any(void *m, void **s) {
  return gigaam_session_new(m, (gigaam_session **)s);
}
static void gigaam_session_free_any(void *s) { gigaam_session_free(s); }
static int gigaam_transcribe_any(void *s, const float *pcm, size_t n,
                                 const steno_transcribe_params *p, steno_result **out) {
  transducer_abort stop = {p->abort, p->abort_user};
  return gigaam_transcribe(s, pcm, n, &stop, out);
}

/* Cache-aware streaming (Nemotron ASR Streaming; UNSUPPORTED for other Parakeet files). */
static int parakeet_stream_begin_any(void *s, const steno_stream_params *p) {
  transducer_abort stop = {p->abort, p->abort_user};
  ((parakeet_session *)s)->language = p->language;
  return parakeet_stream_begin(s, &stop);
}
static int parakeet_stream_feed_any(void *s, const float *pcm, size_t n) {
  return parakeet_stream_feed(s, pcm, n);
}
static int parakeet_stream_result_any(void *s, steno_result **out) {
  return parakeet_stream_result(s, out);
}
static int parakeet_stream_finish_any(void *s, steno_result **out) {
  return parakeet_stream_finish(s, out);
}
static void parakeet_stream_end_any(void *s) { parakeet_stream_end(s); }

static int whisper_load_any(gpu_device *dev, const gguf_file *f, void **m) {
  return whisper_load(dev, f, (whisper **)m);
}
static void whisper_free_any(void *m) { whisper_free(m); }
static int whisper_session_new_any(void *m, void **s) {
  return whisper_session_new(m, (whisper **)s);
}
static void whisper_session_free_any(void *s) { whisper_session_free(s); }
static int whisper_transcribe_any(void *m, const float *pcm, size_t n,
                                  const steno_transcribe_params *p, steno_result **out) {
  return whisper_transcribe(m, pcm, n, p, out);
}

static int moonshine_load_any(gpu_device *dev, const gguf_file *f, void **m) {
  return moonshine_load(dev, f, (moonshine **)m);
}
static void moonshine_free_any(void *m) { moonshine_free(m); }
static int moonshine_session_new_any(void *m, void **s) {
  return moonshine_session_new(m, (moonshine **)s);
}
static void moonshine_session_free_any(void *s) { moonshine_session_free(s); }
static int moonshine_transcribe_any(void *s, const float *pcm, size_t n,
                                    const steno_transcribe_params *p, steno_result **out) {
  return moonshine_transcribe(s, pcm, n, p, out);
}

static int ntx_load_any(gpu_device *dev, const gguf_file *f, void **m) {
  return ntx_load(dev, f, (ntx_model **)m);
}
static void ntx_free_any(void *m) { ntx_free(m); }
static int ntx_session_new_any(void *m, void **s) { return ntx_session_new(m, (ntx_session **)s); }
static void ntx_session_free_any(void *s) { ntx_session_free(s); }
static int ntx_transcribe_any(void *s, const float *pcm, size_t n, const steno_transcribe_params *p,
                              steno_result **out) {
  return ntx_transcribe(s, pcm, n, p, out);
}

static int sortformer_load_any(gpu_device *dev, const gguf_file *f, void **m) {
  return sortformer_load(dev, f, (sortformer **)m);
}
static void sortformer_free_any(void *m) { sortformer_free(m); }
static int sortformer_session_new_any(void *m, void **s) {
  return sortformer_session_new(m, (sortformer_session **)s);
}
static void sortformer_session_free_any(void *s) { sortformer_session_free(s); }
static int sortformer_transcribe_any(void *s, const float *pcm, size_t n,
                                     const steno_transcribe_params *p, steno_result **out) {
  return sortformer_diarize(s, pcm, n, p->abort, p->abort_user, out);
}

static const family families[] = {
    /* Full attention over the whole piece: the window bounds the O(t²) scores. */
    {"parakeet", parakeet_load_any, parakeet_free_any, parakeet_session_new_any,
     parakeet_session_free_any, parakeet_transcribe_any, 0,
     .stream_begin = parakeet_stream_begin_any, .stream_feed = parakeet_stream_feed_any,
     .stream_result = parakeet_stream_result_any, .stream_finish = parakeet_stream_finish_any,
     .stream_end = parakeet_stream_end_any, .transcribe_batch = parakeet_transcribe_batch_any},
    /* Full attention too; GigaAM was trained on utterances of up to about 25 s
     * (transcribe.cpp warns past that), so pieces are split there. */
    {"gigaam", gigaam_load_any, gigaam_free_any, gigaam_session_new_any,
     gigaam_session_free_any, gigaam_transcribe_any, 25},
    /* Its own seek through 30 s windows handles any length; pieces of up to 5 min keep
     * transformers' long-form behaviour (one mel maximum over the piece) with bounded memory. */
    {"whisper", whisper_load_any, whisper_free_any, whisper_session_new_any,
     whisper_session_free_any, whisper_transcribe_any, 300},
    /* The whole piece in one encoder pass; its decoder stops at max_position_embeddings
     * tokens (194: about 48 s of speech), so pieces are split at 30 s. */
    {"moonshine", moonshine_load_any, moonshine_free_any, moonshine_session_new_any,
     moonshine_session_free_any, moonshine_transcribe_any, 30},
    /* The same module; its cap is 6.5 tokens a second + 24, its adapter's positions 4096
     * frames (82 s): 30 s pieces keep both far. */
    {"moonshine_streaming", moonshine_load_any, moonshine_free_any, moonshine_session_new_any,
     moonshine_session_free_any, moonshine_transcribe_any, 30},
    /* A diarizer: its speaker cache carries who is who through the whole audio,
     * which it takes at once (streaming in chunks inside, memory bounded but for the mel). */
    {"sortformer", sortformer_load_any, sortformer_free_any, sortformer_session_new_any,
     sortformer_session_free_any, sortformer_transcribe_any, 0, .diarizer = true},
    /* Audio module, then a language model over its embeddings and the text so far: pieces
     * of up to 5 min keep the prompt (12.5 audio tokens a second) and the text within the
     * decoder session's 8192 tokens. */
    {"nemotron3_5_transcribe", ntx_load_any, ntx_free_any, ntx_session_new_any,
     ntx_session_free_any, ntx_transcribe_any, 300},
};

const family *family_find(const char *arch) {
  for (size_t i = 0; i < sizeof families / sizeof *families; i++)
    if (!strcmp(families[i].arch, arch)) return &families[i];
  return NULL;
}

const char *family_names(void) {
  return "parakeet, gigaam, whisper, moonshine, moonshine_streaming, sortformer, nemotron3_5_transcribe";
}
