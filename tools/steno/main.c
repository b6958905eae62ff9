/* steno — the command-line tool. Uses only the public API (steno.h).
 * One table row per command; each gets argv with argv[1] its name and
 * answers --help. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "hub.h"
#include "params.h"
#include "run.h"
#include "serve.h"
#include "steno.h"

static const char usage[] =
    "steno " STENO_VERSION " — speech to text on any GPU\n"
    "\n"
    "usage:\n"
    "  steno run [MODEL] FILE... [--json | --srt | --vtt] [-o PATH] [--quiet]\n"
    "                         transcribe audio or video files (any format, any length);\n"
    "                         no MODEL: the bundled tiny English model (synthetic speech)\n"
    "  steno bench MODEL.gguf AUDIO [-n RUNS]\n"
    "                         time loading, the first call and warm calls\n"
    "  steno serve [MODEL...] [--port N] [--api-key KEY]\n"
    "                         an OpenAI-compatible HTTP server (/v1/audio/transcriptions)\n"
    "  steno devices          list the Vulkan devices and their features\n"
    "  steno info FILE.gguf   print a model file's metadata and tensors\n"
    "  steno pull NAME...     download models (parakeet-v3, whisper-turbo, ...) into the\n"
    "                         Hugging Face cache; then MODEL may be NAME instead of a path\n"
    "  steno list [--available]  the downloaded models (or the names steno knows)\n"
    "  steno rm NAME...       delete downloaded models\n"
    "  steno --version        print the version\n"
    "  steno COMMAND --help   a command's options\n"
    "\n"
    "environment:\n"
    "  STENO_DEVICE   pick a device by index or by part of its name\n"
    "  STENO_FAST     fast kernels: 1 (timed, the default), 0, all or timed (time them now)\n"
    "  STENO_CACHE_DIR  where compiled kernels and probe results are kept\n"
    "  STENO_THREADS  CPU threads (default: one per CPU)\n"
    "  STENO_LOG      error, warn, info or debug (default warn)\n"
    "  STENO_MODEL    the model steno run uses when none is named\n";

static int is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

static int devices_main(int argc, char **argv) {
  static const char help[] = "usage: steno devices\n  list the Vulkan devices steno can use and their features\n";
  if (argc == 3 && is_help(argv[2])) return fputs(help, stdout), 0;
  if (argc != 2) return fputs(help, stderr), 2;
  steno_model_params mp;
  if (cli_model_params(&mp)) return 1;
  if (!steno_devices_print(stdout, &mp)) return 0;
  fprintf(stderr, "steno devices: %s\n", steno_last_error());
  return 1;
}

static int info_main(int argc, char **argv) {
  static const char help[] = "usage: steno info FILE.gguf\n  print a model file's metadata and tensor table\n";
  if (argc == 3 && is_help(argv[2])) return fputs(help, stdout), 0;
  if (argc != 3) return fputs(help, stderr), 2;
  if (!steno_file_print(argv[2], stdout)) return 0;
  fprintf(stderr, "steno info: %s\n", steno_last_error());
  return 1;
}

static const struct {
  const char *name;
  int (*main)(int argc, char **argv);
} commands[] = {
    {"run", run_main},
    {"bench", bench_main},
    {"serve", serve_main},
    {"devices", devices_main},
    {"info", info_main},
};

int main(int argc, char **argv) {
  if (argc < 2 || is_help(argv[1]) || !strcmp(argv[1], "help")) {
    fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--version")) {
    printf("steno %s\n", STENO_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].main(argc, argv);
  if (hub_is_command(cmd)) return hub_command(argc, argv); /* pull, list, rm */
  fprintf(stderr, "steno: unknown command '%s' (try steno --help)\n", cmd);
  return 2;
}
