/* Finding the bundled default model (see default_model.h). */
#include "default_model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef STENO_MODELS_DIR
#define STENO_MODELS_DIR "models"
#endif

static int ends_with(const char *s, const char *end) {
  size_t n = strlen(s), e = strlen(end);
  return n > e && !strcmp(s + n - e, end);
}

int default_model_applies(const char *arg) {
  if (!strcmp(arg, "-")) return 1;
  /* A model, even a broken or missing one: its own error, never the default model's work. */
  if (ends_with(arg, ".gguf") || ends_with(arg, ".bin")) return 0;
  struct stat st;
  if (stat(arg, &st) || !S_ISREG(st.st_mode)) return 0; /* a name for the hub, or an error there */
  FILE *f = fopen(arg, "rb");
  if (!f) return 1; /* unreadable: the audio reader says why */
  char magic[4] = {0};
  size_t got = fread(magic, 1, sizeof magic, f);
  fclose(f);
  /* What steno_model_load opens: GGUF, and whisper.cpp's legacy .bin ("ggml" as a
   * little-endian 32-bit number). */
  return got < 4 || (memcmp(magic, "GGUF", 4) && memcmp(magic, "lmgg", 4));
}

static int is_file(const char *path) {
  struct stat st;
  return !stat(path, &st) && S_ISREG(st.st_mode);
}

/* <dir of /proc/self/exe>/../share/steno/models/FILE, or "" when unknown. */
static void installed_path(char *buf, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  buf[0] = 0;
  if (n <= 0) return;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return;
  *slash = 0;
  int w = snprintf(buf, cap, "%s/../share/steno/models/%s", exe, DEFAULT_MODEL_FILE);
  if (w < 0 || (size_t)w >= cap) buf[0] = 0;
}

const char *default_model_path(void) {
  static char path[PATH_MAX];
  const char *env = getenv("STENO_MODEL");
  if (env && env[0]) return env;
  installed_path(path, sizeof path);
  if (path[0] && is_file(path)) return path;
  char source[PATH_MAX];
  int w = snprintf(source, sizeof source, "%s/%s", STENO_MODELS_DIR, DEFAULT_MODEL_FILE);
  if (w > 0 && (size_t)w < sizeof source && is_file(source)) return strcpy(path, source);
  fprintf(stderr,
          "steno run: no model named and the default model is missing (looked for %s%s%s); "
          "name a model (steno run MODEL FILE...) or set STENO_MODEL\n",
          path[0] ? path : "", path[0] ? " and " : "", source);
  return NULL;
}
