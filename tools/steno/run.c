/* steno run: transcribe audio and video files, and write the text, JSON or
 * subtitles to standard output or (atomically) to files. */
#include "run.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "default_model.h"
#include "hub.h"
#include "params.h"
#include "output.h"
#include "stream.h"
#include "steno.h"

const char run_usage[] =
    "usage: steno run [MODEL] FILE... [--json | --srt | --vtt] [-o PATH] [--quiet]\n"
    "                 [--language CODE] [--translate] [--prompt TEXT]\n"
    "                 [--diarize DIARIZER] [--rttm PATH]\n"
    "       steno run [MODEL] --stream FILE|-\n"
    "  MODEL          a .gguf file (or whisper.cpp's .bin), or a name pulled with steno pull\n"
    "                 (parakeet-v3, ...); left out: $STENO_MODEL, else the bundled\n"
    "                 " DEFAULT_MODEL_FILE ", a tiny English model trained on synthetic\n"
    "                 (espeak-ng) speech only. A first operand named *.gguf or *.bin, or\n"
    "                 with a model's magic, is the MODEL (its errors are reported)\n"
    "  FILE           audio or video: wav, flac, mp3, ogg/opus, m4a/aac, mp4, mkv, webm, ...\n"
    "                 (any rate and channels; - reads standard input)\n"
    "  --json         text, segments, words and tokens with times (ms), the model, the\n"
    "                 audio's duration and timings\n"
    "  --srt, --vtt   SubRip or WebVTT subtitles\n"
    "  -o, --output PATH\n"
    "                 write to PATH instead of standard output, atomically (a complete file\n"
    "                 or none; a FIFO or device is written in place); when PATH is a\n"
    "                 directory, and always with several FILEs, each FILE gets\n"
    "                 PATH/NAME.txt|json|srt|vtt\n"
    "  -q, --quiet    print nothing but errors (no progress, no warnings)\n"
    "  --language CODE  Whisper: the spoken language (en, de, ...); auto or left out:\n"
    "                 detected\n"
    "  --translate    Whisper: translate into English\n"
    "  --prompt TEXT  Whisper: text that comes before the audio (names, spelling, style);\n"
    "                 Nemotron 3.5 Transcribe: the request in place of the default one\n"
    "                 (\"Audio transcription. Language: ... Output: transcript only.\");\n"
    "                 these three with another family's model are an error (exit 2)\n"
    "  --diarize DIARIZER\n"
    "                 who speaks when: a Sortformer .gguf or a pulled name (sortformer);\n"
    "                 each word gets the speaker most active over it, segments split\n"
    "                 where the speaker changes; text lines and cues start [SPEAKER_N]\n"
    "                 (WebVTT: <v SPEAKER_N>), JSON adds speaker fields and the turns.\n"
    "                 MODEL itself a Sortformer: the turns alone, no text\n"
    "  --rttm PATH    also write the speaker turns as NIST RTTM (all FILEs in one file)\n"
    "  --stream       transcribe as the audio arrives (one FILE, text only): the text is\n"
    "                 printed as it firms up, the tentative rest on a terminal's stderr,\n"
    "                 and at the end a newline and the final transcript on its own line.\n"
    "                 '-' reads standard input as it comes: a WAV stream (16-bit PCM,\n"
    "                 16 kHz) or else raw s16le mono 16 kHz, e.g.\n"
    "                   arecord -f S16_LE -r 16000 -c 1 -t raw | steno run --stream -\n"
    "                 Cache-aware models (Nemotron ASR Streaming) decode each chunk once;\n"
    "                 others re-transcribe the last seconds every second\n"
    "  -h, --help     this help\n"
    "Several FILEs to standard output: text gets a '==> FILE <==' line before each, JSON is\n"
    "an array of one object per FILE; subtitles need -o. A FILE that fails is reported and\n"
    "the others still run (exit status 1). Long recordings are split at pauses; a progress\n"
    "bar shows on a terminal for work over 2 s.\n";

typedef struct {
  out_format format;
  const char *model, *output;
  char **files;
  int nfiles;
  bool quiet, stream;
  steno_transcribe_params tp; /* --language, --translate, --prompt, the diarizer */
  const char *diarize, *rttm; /* --diarize MODEL, --rttm PATH */
  char **paths; /* per file, with -o: where its transcript goes */
} run_opts;

/* ---- arguments ---- */

static int usage_error(const char *fmt, const char *arg) {
  fputs("steno run: ", stderr);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", run_usage);
  return 2;
}

/* 0: go on; −1: help printed; 2: a usage error; 1: no default model. */
static int parse(int argc, char **argv, run_opts *o) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(run_usage, stdout);
      return -1;
    } else if (!strcmp(a, "--json") || !strcmp(a, "--srt") || !strcmp(a, "--vtt")) {
      out_format f = a[2] == 'j' ? OUT_JSON : a[2] == 's' ? OUT_SRT : OUT_VTT;
      if (o->format != OUT_TEXT && o->format != f)
        return usage_error("%s: one output format at a time (--json, --srt or --vtt)", a);
      o->format = f;
    }
    else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o->quiet = true;
    else if (!strcmp(a, "--stream")) o->stream = true;
    else if (!strcmp(a, "--translate")) o->tp.translate = 1;
    else if (!strcmp(a, "--language") || !strcmp(a, "--prompt")) {
      if (i + 1 == argc || !argv[i + 1][0]) return usage_error("%s needs a value", a);
      *(a[2] == 'l' ? &o->tp.language : &o->tp.prompt) = argv[++i];
    }
    else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (i + 1 == argc || !argv[i + 1][0]) return usage_error("%s needs a path", a);
      o->output = argv[++i];
    } else if (!strcmp(a, "--diarize") || !strcmp(a, "--rttm")) {
      if (i + 1 == argc || !argv[i + 1][0]) return usage_error("%s needs a value", a);
      *(a[2] == 'd' ? &o->diarize : &o->rttm) = argv[++i];
    } else if (a[0] == '-' && a[1]) return usage_error("unknown option '%s'", a);
    else if (!o->model) o->model = a;
    else o->files[o->nfiles++] = argv[i];
  }
  if (o->model && default_model_applies(o->model)) { /* steno run FILE...: the default model */
    memmove(o->files + 1, o->files, (size_t)o->nfiles * sizeof *o->files);
    o->files[0] = (char *)o->model;
    o->nfiles++;
    if (!(o->model = default_model_path())) return 1;
  }
  if (!o->model || !o->nfiles) return usage_error("%s", "a model and at least one file, please");
  for (int i = 0, stdin_uses = 0; i < o->nfiles; i++)
    if (!strcmp(o->files[i], "-") && ++stdin_uses > 1) return usage_error("%s", "- (standard input) given twice");
  if (o->stream && (o->nfiles > 1 || o->format != OUT_TEXT || o->output))
    return usage_error("%s", "--stream takes one FILE and prints text to standard output");
  if (o->nfiles > 1 && !o->output && (o->format == OUT_SRT || o->format == OUT_VTT))
    return usage_error("%s", "several subtitle files cannot share standard output: use -o DIR");
  return 0;
}

/* PATH/NAME.EXT for input `file` (NAME: its base name without extension). */
static char *path_in(const char *dir, const char *file, out_format format) {
  const char *base = strcmp(file, "-") ? strrchr(file, '/') : NULL;
  base = !strcmp(file, "-") ? "stdin" : base ? base + 1 : file;
  const char *dot = strrchr(base, '.');
  int len = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
  size_t size = strlen(dir) + strlen(base) + 16;
  char *p = malloc(size);
  if (p) snprintf(p, size, "%s/%.*s.%s", dir, len, base, out_extension(format));
  return p;
}

/* Where each transcript goes with -o: PATH itself, or files in directory PATH. */
static int plan_outputs(run_opts *o) {
  struct stat st;
  bool dir = stat(o->output, &st) == 0 && S_ISDIR(st.st_mode);
  if (!dir && o->nfiles > 1)
    return usage_error("with several files, -o names an existing directory (%s is not one)", o->output);
  for (int i = 0; i < o->nfiles; i++) {
    o->paths[i] = dir ? path_in(o->output, o->files[i], o->format) : strdup(o->output);
    if (!o->paths[i]) return usage_error("%s", "out of memory");
    for (int j = 0; j < i; j++)
      if (!strcmp(o->paths[i], o->paths[j]))
        return usage_error("two inputs would both be written to %s", o->paths[i]);
  }
  /* Now, not after the work: a mistyped folder must not cost an hour of transcribing. */
  for (int i = 0; i < o->nfiles; i++)
    if (out_file_check(o->paths[i], "steno run")) return 1;
  return 0;
}

/* ---- interruption, quiet, progress ---- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) { interrupted = sig; }

static int should_abort(void *user) {
  (void)user;
  return interrupted != 0;
}

static int abort_status(void) {
  fprintf(stderr, "steno run: interrupted\n");
  return 128 + interrupted;
}

/* A first Ctrl-C stops the work within a second (the library polls should_abort
 * between pieces and inside a Parakeet search); a second one kills. */
static void catch_signals(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

static void errors_only(int level, const char *message, void *user) {
  (void)user;
  if (level == STENO_LOG_ERROR) fprintf(stderr, "steno: %s\n", message);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
  const char *name;
  double start, seconds; /* when the file began; its length (0: unknown) */
  bool shown;
} progress;

static void show_progress(float done, void *user) {
  progress *p = user;
  double spent = now() - p->start;
  if (done >= 1.0f || spent < 2.0 || p->seconds <= 0 || done <= 0) {
    if (done >= 1.0f && p->shown) fputs("\r\033[K", stderr);
    return;
  }
  char bar[25];
  int fill = (int)(done * 24);
  for (int i = 0; i < 24; i++) bar[i] = i < fill ? '#' : '.';
  bar[24] = 0;
  double eta = spent * (1 - done) / done;
  size_t len = strlen(p->name);
  const char *name = len > 32 ? p->name + len - 32 : p->name; /* its end says most */
  fprintf(stderr, "\r\033[K%s%s [%s] %3d%%  %.1f× realtime  ETA %d:%02d", len > 32 ? "…" : "", name, bar,
          (int)(done * 100), done * p->seconds / spent, (int)eta / 60, (int)eta % 60);
  p->shown = true;
}

/* ---- one file ---- */

static int transcribe(steno_model *m, const char *file, bool quiet,
                      const steno_transcribe_params *base, steno_result **r, double *ms) {
  double t0 = now();
  steno_audio *a;
  if (steno_audio_open(file, &a)) {
    fprintf(stderr, "steno run: %s\n", steno_last_error());
    return 1;
  }
  progress bar = {strcmp(file, "-") ? file : "standard input", t0, steno_audio_duration(a), false};
  steno_transcribe_params p = *base;
  if (!quiet && isatty(STDERR_FILENO)) p.progress = show_progress, p.progress_user = &bar;
  p.abort = should_abort;
  int st = steno_transcribe_audio(m, a, &p, r);
  steno_audio_close(a);
  if (bar.shown) fputs("\r\033[K", stderr);
  *ms = (now() - t0) * 1e3;
  if (st == STENO_ERR_ABORTED) return 128 + interrupted;
  if (st) fprintf(stderr, "steno run: %s\n", steno_last_error());
  return st ? 1 : 0;
}

static int write_file(const char *path, const steno_result *r, out_format format, const out_info *info) {
  out_file f;
  if (out_file_open(&f, path, "steno run")) return 1;
  if (out_write(f.f, r, format, info)) {
    fprintf(stderr, "steno run: cannot write %s\n", path);
    out_file_discard(&f);
    return 1;
  }
  return out_file_commit(&f, "steno run") ? 1 : 0;
}

/* Standard output: a header line per file (text) or an array (JSON) when
 * there are several. */
static int write_stdout(const run_opts *o, int i, int written, const steno_result *r, const out_info *info) {
  if (o->nfiles > 1 && o->format == OUT_TEXT) printf("%s==> %s <==\n", written ? "\n" : "", o->files[i]);
  if (o->nfiles > 1 && o->format == OUT_JSON) fputs(written ? "," : "[\n", stdout);
  int st = out_write(stdout, r, o->format, info);
  if (fflush(stdout) || st) {
    fprintf(stderr, "steno run: could not write to standard output\n");
    return 1;
  }
  return 0;
}

/* Each file's turns onto the RTTM file (when there is one); 1 on failure. */
static int rttm_add(const run_opts *o, out_file *rttm, const steno_result *r, const char *file) {
  if (!rttm || !out_rttm(rttm->f, r, file)) return 0;
  fprintf(stderr, "steno run: cannot write %s\n", o->rttm);
  return 1;
}

/* Several files go to steno_transcribe_batch together (Parakeet: one padded
 * GPU pass) while their audio, held in memory, adds up to at most this. */
#define GROUP_SECONDS 600.0

/* How many files from i on run as one batch (Parakeet models, the only ones
 * that batch): up to 64 files of known length adding up to GROUP_SECONDS (not
 * standard input); 1: file i alone, as a stream. */
static int group_size(const run_opts *o, const char *arch, int i) {
  if (o->nfiles < 2 || o->tp.diarizer || strcmp(arch, "parakeet")) return 1;
  double total = 0;
  int k = i;
  for (; k < o->nfiles && k - i < 64 && strcmp(o->files[k], "-"); k++) {
    steno_audio *a;
    if (steno_audio_open(o->files[k], &a)) break; /* reported when it runs */
    double d = steno_audio_duration(a);
    steno_audio_close(a);
    if (d <= 0 || total + d > GROUP_SECONDS) break;
    total += d;
  }
  return k - i > 1 ? k - i : 1;
}

/* Files i .. i + count − 1 through one steno_transcribe_batch; a file that
 * cannot be read is reported (r[k] NULL, failed). Returns 128 + signal when
 * interrupted, 1 when the batch failed (every r[k] NULL; not reported: the
 * caller runs the files alone, each reporting its own error). */
static int transcribe_group(steno_session *s, const run_opts *o, int i, int count,
                            steno_result **r, double *ms, int *failed) {
  double t0 = now();
  float **pcm = calloc((size_t)count, sizeof *pcm), **kept = calloc((size_t)count, sizeof *kept);
  size_t *n = calloc((size_t)count, sizeof *n);
  steno_result **got = calloc((size_t)count, sizeof *got);
  int k = 0, st = pcm && kept && n && got ? 0 : STENO_ERR_NOMEM;
  for (int j = 0; j < count && !st; j++) {
    r[j] = NULL;
    if (steno_audio_load(o->files[i + j], &pcm[j], &n[j])) {
      fprintf(stderr, "steno run: %s\n", steno_last_error());
      *failed = 1, pcm[j] = NULL;
    } else {
      kept[k++] = pcm[j];
    }
  }
  steno_transcribe_params p = o->tp;
  p.abort = should_abort;
  if (!st && k) {
    size_t *kn = calloc((size_t)k, sizeof *kn);
    for (int j = 0, c = 0; kn && j < count; j++)
      if (pcm[j]) kn[c++] = n[j];
    st = kn ? steno_transcribe_batch(s, (const float *const *)kept, kn, (size_t)k, &p, got)
            : STENO_ERR_NOMEM;
    free(kn);
  }
  for (int j = 0, c = 0; !st && j < count; j++)
    if (pcm[j]) r[j] = got[c++];
  for (int j = 0; pcm && j < count; j++) steno_audio_free(pcm[j]);
  free(pcm), free(kept), free(n), free(got);
  *ms = (now() - t0) * 1e3 / count;
  if (st == STENO_ERR_ABORTED) return 128 + interrupted;
  return st ? 1 : 0;
}

/* File i's result r (freed) to its output; 1 on failure. */
static int emit(steno_model *m, const run_opts *o, int i, steno_result *r, double load_ms,
                double wall_ms, out_file *rttm, int *written) {
  out_info info = {o->model, steno_model_architecture(m), o->files[i], load_ms, wall_ms};
  info.diarized = o->tp.diarizer || !strcmp(info.architecture, "sortformer");
  int st = rttm_add(o, rttm, r, o->files[i]);
  if (!st) {
    st = o->paths ? write_file(o->paths[i], r, o->format, &info) : write_stdout(o, i, *written, r, &info);
    *written += !st;
  }
  steno_result_free(r);
  return st;
}

static int run_files(steno_model *m, const run_opts *o, double load_ms) {
  int failed = 0, written = 0;
  out_file rf, *rttm = o->rttm ? &rf : NULL; /* written atomically after all files */
  if (rttm && out_file_open(rttm, o->rttm, "steno run")) return 1;
  steno_session *s = NULL;
  for (int i = 0; i < o->nfiles && !interrupted;) {
    int count = group_size(o, steno_model_architecture(m), i), st = 0;
    steno_result *r[64] = {0};
    double wall = 0;
    if (count > 1 && !s && steno_session_new(m, &s)) count = 1;
    if (count > 1) st = transcribe_group(s, o, i, count, r, &wall, &failed);
    /* Alone: one file, or a batch that failed (each file then says why). */
    bool alone = count == 1 || st == 1;
    for (int j = 0; alone && j < count && st <= 128; j++) {
      st = transcribe(m, o->files[i + j], o->quiet, &o->tp, &r[j], &wall);
      if (st) r[j] = NULL;
      failed |= st == 1;
    }
    for (int j = 0; j < count; j++)
      if (r[j] && st > 128) steno_result_free(r[j]);
      else if (r[j]) failed |= emit(m, o, i + j, r[j], load_ms, wall, rttm, &written) != 0;
    if (st > 128) break;
    i += count;
  }
  steno_session_free(s);
  if (written && !o->output && o->nfiles > 1 && o->format == OUT_JSON) fputs("]\n", stdout);
  if (!written && !o->output && o->nfiles > 1 && o->format == OUT_JSON) fputs("[]\n", stdout);
  if (rttm && interrupted) out_file_discard(rttm);
  else if (rttm && out_file_commit(rttm, "steno run")) failed = 1;
  if (interrupted) {
    fprintf(stderr, "steno run: interrupted\n");
    return 128 + interrupted; /* as if the signal had killed it */
  }
  return failed;
}

/* --language, --translate and --prompt steer Whisper only (--prompt also
 * Nemotron 3.5 Transcribe's request): elsewhere they are an error rather than
 * silently ignored. "--language auto" is detection (NULL). */
static int whisper_options(run_opts *o, const char *arch) {
  const steno_transcribe_params *p = &o->tp;
  bool prompt_ok = !strcmp(arch, "nemotron3_5_transcribe");
  const char *given = p->language ? "--language" : p->translate ? "--translate"
                      : p->prompt && !prompt_ok ? "--prompt" : NULL;
  if (given && strcmp(arch, "whisper")) {
    fprintf(stderr, "steno run: %s is for Whisper models; %s is a %s model\n", given, o->model, arch);
    return 2;
  }
  if (p->language && !strcmp(p->language, "auto")) o->tp.language = NULL;
  return 0;
}

/* A model file or pulled name, loaded. */
static int load(const char *name, steno_model **m) {
  const char *path = hub_resolve(name); /* a path, or a name pulled into the cache */
  if (!path) return 1;
  struct stat info;
  if (!stat(path, &info) && S_ISDIR(info.st_mode)) {
    fprintf(stderr, "steno run: %s is a folder, not a model file\n", name);
    return 1;
  }
  steno_model_params mp;
  if (cli_model_params(&mp)) return 1;
  if (steno_model_load(path, &mp, m)) {
    fprintf(stderr, "steno run: %s\n", steno_last_error());
    return 1;
  }
  return 0;
}

/* --diarize names a diarizer, for a model that is not one; --rttm needs turns. */
static int diarize_options(const run_opts *o, const steno_model *m, const steno_model *d) {
  const char *arch = steno_model_architecture(m);
  if (d && strcmp(steno_model_architecture(d), "sortformer")) {
    fprintf(stderr, "steno run: --diarize %s: a %s model, not a diarizer (sortformer)\n",
            o->diarize, steno_model_architecture(d));
    return 2;
  }
  if (d && !strcmp(arch, "sortformer")) {
    fprintf(stderr, "steno run: %s is a diarizer itself: leave out --diarize\n", o->model);
    return 2;
  }
  if (o->rttm && !d && strcmp(arch, "sortformer")) {
    fprintf(stderr, "steno run: --rttm needs --diarize (or a diarizer as the model)\n");
    return 2;
  }
  return 0;
}

static int load_and_run(run_opts *o) {
  if (o->quiet) steno_set_log(errors_only, NULL);
  catch_signals();
  double t0 = now();
  steno_model *m = NULL, *d = NULL;
  if (load(o->model, &m) || (o->diarize && load(o->diarize, &d))) {
    steno_model_free(m);
    return 1;
  }
  double load_ms = (now() - t0) * 1e3;
  o->tp.diarizer = d;
  int st = whisper_options(o, steno_model_architecture(m));
  if (!st) st = diarize_options(o, m, d);
  if (!st && o->stream)
    st = stream_run(m, o->files[0], o->tp.language, o->quiet, should_abort, abort_status);
  else if (!st) st = run_files(m, o, load_ms);
  steno_model_free(m);
  steno_model_free(d);
  return st;
}

int run_main(int argc, char **argv) {
  run_opts o = {.format = OUT_TEXT, .tp = steno_transcribe_default_params()};
  o.files = calloc((size_t)argc, sizeof *o.files);
  o.paths = calloc((size_t)argc, sizeof *o.paths);
  int st = o.files && o.paths ? parse(argc, argv, &o) : (fputs("steno run: out of memory\n", stderr), 1);
  if (!st && o.output) st = plan_outputs(&o);
  /* Now, not after the work, as -o. */
  if (!st && o.rttm && out_file_check(o.rttm, "steno run")) st = 1;
  if (!o.output) {
    free(o.paths);
    o.paths = NULL;
  }
  if (!st) st = load_and_run(&o);
  for (int i = 0; o.paths && i < o.nfiles; i++) free(o.paths[i]);
  free(o.paths);
  free(o.files);
  return st < 0 ? 0 : st;
}
