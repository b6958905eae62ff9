/* steno — speech to text on any GPU.
 *
 * The public C API of libsteno. Every function that can fail returns a status
 * (STENO_OK or one of the STENO_ERR_* codes); steno_last_error() then gives a
 * message that says what went wrong, for the calling thread.
 *
 * The library takes its settings from its params structs, not from the
 * environment (the CLI maps STENO_DEVICE, STENO_FAST, STENO_CACHE_DIR,
 * STENO_PIPELINE_CACHE, STENO_PROBE_CACHE and STENO_THREADS onto
 * steno_model_params). The debugging switches it does read itself:
 *   STENO_LOG=error|warn|info|debug  the log level (default warn)
 *   STENO_VALIDATE=1       the Vulkan validation layer; its errors fail the call
 *   STENO_PROFILE=1        each kernel's GPU time, printed when a model is freed
 *   STENO_PIPELINE_STATS=1 each kernel's compiled statistics (registers, ...) as it is made
 *   STENO_PIPELINE_IR=DIR  ... and the driver's internal representations of it, as files in DIR
 *   STENO_SPLIT=0/1        GPU work in one submission / in several (default: several on a discrete GPU)
 *   STENO_NO_MAP=1         staged transfers even where memory is mappable (tests)
 *   STENO_DECODER=cpu|gpu  where transducers search (default: the GPU, the CPU on a CPU device)
 *   STENO_FEATURES=cpu|gpu where Parakeet's and Whisper's log-mel features are made (default:
 *                          the GPU where it has doubles in shaders and is not a CPU, checked
 *                          at load)
 *   STENO_BENCH_TOKENS=N   Whisper decodes exactly N tokens a window (benchmarks)
 *   STENO_GEMM_CM2=1       the experimental GEMM through NVIDIA's cooperative_matrix2 (its
 *                          features enabled, probed and timed where offered; not yet run on
 *                          a GPU, so off by default)
 *   STENO_ATTENTION_PRECISION=3|2|1  the tensor-core attention's products: hi + lo f16 in
 *                          scores and values (3, the default), in scores only (2), f16 alone (1)
 * and XDG_CACHE_HOME / HOME for the caches' default folder.
 *
 * Threads. A steno_model holds what is read-only once loaded (weights on the
 * GPU, vocabulary, configuration); a steno_session holds what one transcription
 * writes (the GPU recorder, activations, decoder state, KV caches) and, from
 * its first call on, the CPU worker threads its calls' audio gate and features
 * run on beside the calling thread (steno_model_params.threads in all, at most
 * 16; idle between calls). So:
 *   - one model may be shared by any number of threads, each transcribing
 *     through its own session (steno_session_new): sessions of one model run
 *     concurrently, their GPU submissions serialized by the library;
 *   - a session must not be used by two threads at once;
 *   - steno_transcribe and steno_transcribe_audio use a session the model owns
 *     (made on first use): they must not be called from two threads at once
 *     on one model (give each thread a session instead, or hold a lock);
 *   - a model must outlive its sessions: free the sessions first
 *     (steno_model_free refuses, with an error logged, while any is open);
 *   - results, audio streams and params belong to the caller: share them
 *     between threads only with the caller's own locking;
 *   - steno_last_error is per thread; steno_set_log is global (set it first);
 *   - models and sessions do not cross fork(): a child gets neither the GPU
 *     device nor the worker threads, so load models in the process that uses
 *     them (Python: multiprocessing's "spawn", or load in each worker).
 * Different models are independent of each other. */
#ifndef STENO_H
#define STENO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STENO_VERSION "0.1.0"

/* Marks the functions libsteno.so exports (it is built with hidden
 * visibility: nothing else is). */
#if defined(__GNUC__) || defined(__clang__)
#define STENO_API __attribute__((visibility("default")))
#else
#define STENO_API
#endif

/* Status codes. */
enum {
  STENO_OK = 0,
  STENO_ERR_INVALID = 1,     /* a bad argument or parameter */
  STENO_ERR_IO = 2,          /* a file could not be opened or read */
  STENO_ERR_FORMAT = 3,      /* a file is malformed, truncated or of an unknown kind */
  STENO_ERR_UNSUPPORTED = 4, /* valid, but not something steno can run (yet) */
  STENO_ERR_NOMEM = 5,       /* host or device memory ran out */
  STENO_ERR_GPU = 6,         /* no usable Vulkan device, device lost, a failed submission */
  STENO_ERR_ABORTED = 7,     /* the abort callback asked to stop */
};

/* The calling thread's message for the last failure. */
STENO_API const char *steno_last_error(void);

/* Log levels for steno_set_log. */
enum { STENO_LOG_ERROR = 0, STENO_LOG_WARN = 1, STENO_LOG_INFO = 2, STENO_LOG_DEBUG = 3 };

/* Receives every log line instead of stderr; NULL restores stderr. */
typedef void (*steno_log_fn)(int level, const char *message, void *user);
STENO_API void steno_set_log(steno_log_fn fn, void *user);

/* ---- results ---- */

/* Every string in a result is valid UTF-8 fit for a terminal: bytes that are not
 * UTF-8 become U+FFFD, tab, newline and the other whitespace controls a space, and
 * every other control character (C0 such as ESC and BEL, DEL, C1) U+FFFD, so no
 * escape sequence from a model's vocabulary reaches the reader. */

/* One token: a vocabulary piece with the time it spans. */
typedef struct {
  int id;            /* vocabulary id */
  const char *text;  /* its text ("▁" as a space; control tokens are not listed) */
  int64_t start_ms;  /* start, from the beginning of the audio */
  int64_t end_ms;    /* end (a TDT token of duration 0 ends where it starts) */
  float p;           /* confidence in [0, 1] */
} steno_token;

/* A word (or, for languages without spaces, a run of tokens) with its time. */
typedef struct {
  const char *text;  /* without surrounding spaces */
  int64_t start_ms, end_ms;
  float p;           /* the lowest confidence of its tokens */
  int speaker;       /* with a diarizer: the speaker (from 1) most active over the word; 0: none */
} steno_word;

/* A stretch of text with its time: a model's segment (Whisper), or a sentence
 * (Parakeet: ended by . ? ! or their fullwidth forms, or by a pause of 0.8 s or
 * more between words, and split at its largest pause when over 30 s). */
typedef struct {
  const char *text;
  int64_t start_ms, end_ms;
  int speaker;       /* with a diarizer: the speaker (from 1) of all its words (segments are
                        split where the speaker changes); 0: none */
} steno_segment;

/* A stretch of time in which one speaker speaks, from a diarizer (Sortformer):
 * turns of different speakers may overlap. */
typedef struct {
  int speaker;       /* from 1: the diarizer's speaker columns, in order of arrival */
  int64_t start_ms, end_ms;
} steno_turn;

typedef struct steno_result steno_result;

STENO_API const char *steno_result_text(const steno_result *r);          /* the whole transcript */
STENO_API size_t steno_result_token_count(const steno_result *r);
STENO_API steno_token steno_result_token(const steno_result *r, size_t i);
STENO_API size_t steno_result_word_count(const steno_result *r);
STENO_API steno_word steno_result_word(const steno_result *r, size_t i);
STENO_API size_t steno_result_segment_count(const steno_result *r);
STENO_API steno_segment steno_result_segment(const steno_result *r, size_t i);
STENO_API double steno_result_duration(const steno_result *r);         /* seconds of audio */
/* Speaker turns (a diarizer's result, or a transcription with one), speaker by
 * speaker in time order; none otherwise. */
STENO_API size_t steno_result_turn_count(const steno_result *r);
STENO_API steno_turn steno_result_turn(const steno_result *r, size_t i);
/* The spoken language's code ("en", "de", ...): the one asked for or detected
 * (Whisper); NULL for families that do not tell (Parakeet). */
STENO_API const char *steno_result_language(const steno_result *r);

/* Where the time went (wall clock, ms). */
typedef struct {
  double features_ms; /* audio → features on the CPU */
  double encoder_ms;  /* the GPU work, uploads and readback included */
  double decoder_ms;  /* decoding and text */
} steno_timings;
STENO_API steno_timings steno_result_timings(const steno_result *r);
STENO_API void steno_result_free(steno_result *r);

/* ---- models ---- */

typedef struct steno_model steno_model;

/* Which fast kernels run (steno_model_params.fast). Each has a portable twin
 * and is only ever used where its probe passes on the device. */
enum {
  STENO_FAST_AUTO = 0,  /* those timed faster than their twin at open (a CPU device: all that
                           pass); the results are kept in the probe cache */
  STENO_FAST_OFF = 1,   /* the portable kernels only */
  STENO_FAST_ALL = 2,   /* every one that passes, faster or not */
  STENO_FAST_TIMED = 3, /* as AUTO, but timed now on any device, the probe cache unused */
};

/* Caches on disk to leave off (steno_model_params.no_cache bits). */
enum {
  STENO_NO_PIPELINE_CACHE = 1, /* the driver's compiled kernels */
  STENO_NO_PROBE_CACHE = 2,    /* the fast kernels' probe results and timings */
};

typedef struct {
  int device;              /* Vulkan device index (as `steno devices` lists); -1: choose one,
                              a discrete GPU first, then integrated, virtual, CPU */
  const char *device_name; /* the first device whose name contains this (any case); NULL:
                              none (set this or device, not both) */
  int fast;                /* STENO_FAST_*: which fast kernels run */
  const char *cache_dir;   /* folder of the pipeline and probe caches; NULL or "":
                              $XDG_CACHE_HOME/steno, else ~/.cache/steno */
  int no_cache;            /* STENO_NO_*_CACHE bits: caches neither read nor written */
  int threads;             /* CPU threads for features and the CPU decoder; 0: one per CPU
                              (at most 16 are used) */
  intptr_t reserved[8];    /* zero (as the defaults leave it): room for new fields */
} steno_model_params;

/* device -1, everything else zero. */
STENO_API steno_model_params steno_model_default_params(void);

/* Prints the Vulkan devices steno can use, with their features, to `out`,
 * and which one a model loaded with `params` (NULL: the defaults) would use. */
STENO_API int steno_devices_print(FILE *out, const steno_model_params *params);

/* Loads a model from a GGUF file (architectures: parakeet, whisper; sortformer is a
 * diarizer: steno_transcribe with it gives speaker turns and no text) onto the
 * GPU that params choose (NULL: the defaults). */
STENO_API int steno_model_load(const char *path, const steno_model_params *params, steno_model **out);
STENO_API void steno_model_free(steno_model *m);

/* "parakeet", ... */
STENO_API const char *steno_model_architecture(const steno_model *m);

/* GPU memory the model's device holds now, and the most it has held (bytes). */
STENO_API void steno_model_memory(const steno_model *m, size_t *used, size_t *peak);

/* The GPU's name and whether the fast kernels passed their probes there. */
STENO_API const char *steno_model_device(const steno_model *m, int *fast);

/* Progress through the audio, in [0, 1]: called after each piece. */
typedef void (*steno_progress_fn)(float done, void *user);
/* Returns non-zero to stop the work (STENO_ERR_ABORTED); asked between pieces and,
 * within one, during decoding (Parakeet: every few steps of its search). */
typedef int (*steno_abort_fn)(void *user);

typedef struct {
  const char *language;       /* Whisper: "en", "de", ...; NULL: detect it */
  int translate;              /* Whisper: non-zero translates into English */
  const char *prompt;         /* Whisper: text that comes before the audio; Nemotron 3.5
                                 Transcribe: the request in place of the default one
                                 (UTF-8, ≤ 16384 bytes); NULL: none / the default */
  steno_progress_fn progress; /* NULL: none */
  void *progress_user;
  steno_abort_fn abort;       /* NULL: none */
  void *abort_user;
  double piece_seconds;       /* longest piece transcribed at once (≥ 5 s, ≤ the model's
                                 window); 0: the model's window (Parakeet: 60 s) */
  /* Called with each segment once it is final, in order, times from the start of
   * the audio: the result's segments, as each piece is done; seg lives during the call. */
  void (*segment)(const steno_segment *seg, void *user);
  void *segment_user;
  /* A diarizer (a model of architecture sortformer) to say who speaks when: the
   * result gets its speaker turns (steno_result_turn), each word the speaker most
   * active over its span (a word no turn covers: the one before it), and segments
   * split where the speaker changes. It runs over the whole audio at once, so
   * memory grows with the audio (its features: 3 MB a minute; and
   * steno_transcribe_audio keeps the samples it reads: 3.8 MB a minute), through
   * the diarizer's own session: a diarizer must not serve two calls at once.
   * NULL: none. */
  steno_model *diarizer;
} steno_transcribe_params;

STENO_API steno_transcribe_params steno_transcribe_default_params(void);

/* Transcribes n samples of 16 kHz mono float PCM in [-1, 1]. Long audio is
 * split at its quietest moments into pieces of at most piece_seconds, which
 * are transcribed in turn (Parakeet: four at a time, as one padded GPU batch,
 * so the segment callback hears of them four at a time; times stay relative to
 * the start of the audio);
 * pieces that hold only silence or steady noise give no text. */
STENO_API int steno_transcribe(steno_model *m, const float *pcm, size_t n,
                               const steno_transcribe_params *params, steno_result **out);

/* ---- sessions ---- */

/* The buffers and state of one transcription at a time on a model (see Threads
 * at the top): one per thread. */
typedef struct steno_session steno_session;

/* A new session on m (STENO_ERR_INVALID for NULL arguments); m must outlive it. */
STENO_API int steno_session_new(steno_model *m, steno_session **out);
/* Frees a session (NULL: nothing) and stops its worker threads; before its model. */
STENO_API void steno_session_free(steno_session *s);
/* Transcribes count clips (pcm[i]: n[i] samples, as steno_transcribe) into out[0..count):
 * the same tokens, times and text as steno_transcribe of each clip (token confidences may
 * differ by up to 1e-4: on GPUs where it passes its probe, a batch of 4 or more clips is
 * searched by one persistent kernel, which sums in another order). Parakeet cuts every clip into the
 * pieces steno_transcribe would and runs them through its encoder together, as a padded
 * batch (similar lengths together, each pass's activations within min(4 GiB, a quarter
 * of the GPU's memory): 64 clips of 11 s take one pass on Parakeet 0.6B), then searches
 * each; other families, cache-aware streaming models and calls with a diarizer run the
 * clips one after another. Segments are called back once every clip is done. On failure
 * no result is left allocated (out[] all NULL). */
STENO_API int steno_transcribe_batch(steno_session *s, const float *const *pcm, const size_t *n,
                                     size_t count, const steno_transcribe_params *params,
                                     steno_result **out);
/* steno_transcribe through session s (STENO_ERR_INVALID for a NULL session). */
STENO_API int steno_session_transcribe(steno_session *s, const float *pcm, size_t n,
                                       const steno_transcribe_params *params, steno_result **out);

/* ---- streaming ---- */

/* A transcription of audio that arrives over time (a microphone, a pipe): fed
 * in pieces of any size, its text firms up as it goes. Models with cache-aware
 * streaming (Nemotron ASR Streaming) decode each chunk once, exactly as their
 * reference streams: all their text is firm, and the final result is the
 * streaming one. Every other model re-transcribes the recent audio after
 * each update_seconds of new audio: words that end before the last
 * tentative_seconds and came out the same twice in a row become firm; the
 * stream keeps the audio and its final result is one transcription of all of
 * it, exactly what steno_transcribe gives (the firm text may differ from it
 * where a window's edge cut a word). */
typedef struct steno_stream steno_stream;

typedef struct {
  const char *language;     /* as steno_transcribe_params (Whisper, Nemotron 3.5's prompt) */
  steno_abort_fn abort;     /* NULL: none; polled during each update */
  void *abort_user;
  /* Models without cache-aware streaming: */
  double window_seconds;    /* the most audio re-transcribed per update (5 to 3600; default 30) */
  double update_seconds;    /* new audio between updates (default 1) */
  double tentative_seconds; /* the newest audio whose words stay tentative (default 2) */
} steno_stream_params;

STENO_API steno_stream_params steno_stream_default_params(void);

/* Opens a stream on m with its own session (params NULL: the defaults); m must
 * outlive it. */
STENO_API int steno_stream_open(steno_model *m, const steno_stream_params *params,
                                steno_stream **out);
/* Feeds n samples of 16 kHz mono float PCM; the work they complete runs now. */
STENO_API int steno_stream_feed(steno_stream *s, const float *pcm, size_t n);
/* The text so far: firm (only ever grows) and tentative (may still change).
 * Both stay valid until the next call on s. */
STENO_API int steno_stream_text(steno_stream *s, const char **firm, const char **tentative);
/* Ends the audio: the final result (free with steno_result_free). */
STENO_API int steno_stream_finish(steno_stream *s, steno_result **out);
/* Non-zero when the model streams natively (cache-aware). */
STENO_API int steno_stream_native(const steno_stream *s);
STENO_API void steno_stream_free(steno_stream *s);

/* ---- audio ---- */

/* An audio or video file read as 16 kHz mono float PCM through FFmpeg: wav,
 * flac, mp3, ogg/opus, m4a/aac, the audio track of mp4/mkv/webm, ...; any
 * rate, channels averaged. Decoded as it is read: memory does not grow with
 * the file's length. */
typedef struct steno_audio steno_audio;

/* Opens a file, or standard input for "-". No audio stream, an empty or
 * unreadable file: STENO_ERR_FORMAT / STENO_ERR_IO with a message. */
STENO_API int steno_audio_open(const char *path, steno_audio **out);
/* Reads up to max samples; *got < max only at the end (0 once it is reached). */
STENO_API int steno_audio_read(steno_audio *a, float *pcm, size_t max, size_t *got);
/* The length the file declares, seconds, for progress (0: unknown, e.g. a pipe). */
STENO_API double steno_audio_duration(const steno_audio *a);
STENO_API void steno_audio_close(steno_audio *a);

/* Transcribes the rest of an open stream as steno_transcribe does, holding
 * only one piece of it (≤ piece_seconds + 1 s) in memory at a time. */
STENO_API int steno_transcribe_audio(steno_model *m, steno_audio *a,
                                     const steno_transcribe_params *params, steno_result **out);
/* steno_transcribe_audio through session s. */
STENO_API int steno_session_transcribe_audio(steno_session *s, steno_audio *a,
                                             const steno_transcribe_params *params,
                                             steno_result **out);

/* Reads a whole file (as steno_audio_open; up to 24 h) into *pcm (malloc'd:
 * free with steno_audio_free). */
STENO_API int steno_audio_load(const char *path, float **pcm, size_t *n);
STENO_API void steno_audio_free(float *pcm);

/* ---- files ---- */

/* Prints a GGUF file's metadata (long arrays abbreviated) and tensor table. */
STENO_API int steno_file_print(const char *path, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
