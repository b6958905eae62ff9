/* steno — the command-line tool. Uses only the public API (steno.h). */
#include <stdio.h>
#include <string.h>

#include "steno.h"

static const char usage[] =
    "steno " STENO_VERSION " — speech to text on any GPU\n"
    "\n"
    "usage:\n"
    "  steno devices          list the Vulkan devices and their features\n"
    "  steno info FILE.gguf   print a model file's metadata and tensors\n"
    "  steno --version        print the version\n"
    "\n"
    "environment:\n"
    "  STENO_DEVICE   pick a device by index or by part of its name\n"
    "  STENO_LOG      error, warn, info or debug (default warn)\n";

static int fail(const char *what) {
  fprintf(stderr, "steno %s: %s\n", what, steno_last_error());
  return 1;
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
