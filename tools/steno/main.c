/* steno — the command-line tool. Uses only the public API (steno.h). */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "hub.h"
#include "output.h"
#include "steno.h"

static const char usage[] =
    "steno " STENO_VERSION " — speech to text on any GPU\n"
    "\n"
    "usage:\n"
    "  steno run MODEL.gguf AUDIO.wav [--json | --srt | --vtt]\n"
    "                         transcribe (16 kHz WAV) and print the text, JSON or subtitles\n"
    "  steno bench MODEL.gguf AUDIO [-n RUNS]\n"
    "                         time loading, the first call and warm calls\n"
    "  steno devices          list the Vulkan devices and their features\n"
    "  steno info FILE.gguf   print a model file's metadata and tensors\n"
    "  steno pull NAME...     download models (parakeet-v3, whisper-turbo, ...) into the\n"
    "                         Hugging Face cache; then MODEL may be NAME instead of a path\n"
    "  steno list [--available]  the downloaded models (or the names steno knows)\n"
    "  steno rm NAME...       delete downloaded models\n"
    "  steno --version        print the version\n"
    "\n"
    "environment:\n"
    "  STENO_DEVICE   pick a device by index or by part of its name\n"
    "  STENO_LOG      error, warn, info or debug (default warn)\n";

static int fail(const char *what) {
  fprintf(stderr, "steno %s: %s\n", what, steno_last_error());
  return 1;
}

static const char run_usage[] =
    "usage: steno run MODEL.gguf AUDIO.wav [--json | --srt | --vtt]\n"
    "  --json   text, segments, words and tokens with their times (ms)\n"
    "  --srt    SubRip subtitles\n"
    "  --vtt    WebVTT subtitles\n";

static int run(int argc, char **argv) {
  const char *model = NULL, *audio = NULL;
  out_format format = OUT_TEXT;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(run_usage, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) format = OUT_JSON;
    else if (!strcmp(argv[i], "--srt")) format = OUT_SRT;
    else if (!strcmp(argv[i], "--vtt")) format = OUT_VTT;
    else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "steno run: unknown option '%s'\n%s", argv[i], run_usage);
      return 2;
    } else if (!model) model = argv[i];
    else if (!audio) audio = argv[i];
    else {
      fprintf(stderr, "steno run: one model and one audio file\n%s", run_usage);
      return 2;
    }
  }
  if (!model || !audio) {
    fputs(run_usage, stderr);
    return 2;
  }
  const char *model_path = hub_resolve(model); /* a path, or a name pulled into the cache */
  if (!model_path) return 1;
  float *pcm;
  size_t n;
  if (steno_audio_load(audio, &pcm, &n)) return fail("run");
  steno_model *m;
  if (steno_model_load(model_path, NULL, &m)) {
    steno_audio_free(pcm);
    return fail("run");
  }
  steno_result *r;
  int st = steno_transcribe(m, pcm, n, NULL, &r);
  steno_audio_free(pcm);
  if (st) {
    steno_model_free(m);
    return fail("run");
  }
  switch (format) {
    case OUT_TEXT: out_text(stdout, r); break;
    case OUT_JSON: out_json(stdout, r, model, audio); break;
    default: out_subtitles(stdout, r, format); break;
  }
  steno_result_free(r);
  steno_model_free(m);
  if (fflush(stdout) || ferror(stdout)) {
    fprintf(stderr, "steno run: could not write the output\n");
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--version")) {
    printf("steno %s\n", STENO_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "run")) return run(argc, argv);
  if (!strcmp(cmd, "bench")) return bench_main(argc, argv);
  if (hub_is_command(cmd)) return hub_command(argc, argv);
  if (!strcmp(cmd, "devices")) {
    if (argc != 2) {
      fputs("usage: steno devices\n", stderr);
      return 2;
    }
    return steno_devices_print(stdout) ? fail("devices") : 0;
  }
  if (!strcmp(cmd, "info")) {
    if (argc != 3 || !strcmp(argv[2], "--help")) {
      fputs("usage: steno info FILE.gguf\n", argc == 3 ? stdout : stderr);
      return argc == 3 ? 0 : 2;
    }
    return steno_file_print(argv[2], stdout) ? fail("info") : 0;
  }
  fprintf(stderr, "steno: unknown command '%s' (try steno --help)\n", cmd);
  return 2;
}
