#include "audio_test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "io/gguf.h"
#include "steno.h"

float *test_speech(size_t *n) {
  const char *dir = getenv("STENO_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/parakeet_ctc_tiny.ref.gguf", dir ? dir : ".");
  gguf_file *f;
  if (gguf_open(&f, path)) {
    fprintf(stderr, "test_speech: %s\n", steno_last_error());
    exit(1);
  }
  const gguf_tensor *t = gguf_tensor_find(f, "speech.pcm");
  if (!t || t->type != GGUF_TYPE_F32) {
    fprintf(stderr, "test_speech: no speech.pcm in %s\n", path);
    exit(1);
  }
  float *x = malloc(t->nelem * sizeof *x);
  memcpy(x, t->data, t->nelem * sizeof *x);
  *n = t->nelem;
  gguf_close(f);
  return x;
}

static char tmpdir[4096];

static void remove_tmpdir(void) {
  if (tmpdir[0]) test_sh("rm -rf '%s'", tmpdir);
}

const char *test_tmpdir(void) {
  if (tmpdir[0]) return tmpdir;
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/steno-test-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    exit(1);
  }
  atexit(remove_tmpdir);
  return tmpdir;
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static int16_t to_s16(float x) {
  double v = nearbyint((double)x * 32768.0);
  return (int16_t)(v > 32767 ? 32767 : v < -32768 ? -32768 : v);
}

float test_s16(float x) { return (float)to_s16(x) / 32768.0f; }

void test_wav_header(uint8_t h[44], int channels, uint32_t rate, uint32_t data_bytes) {
  memcpy(h, "RIFF", 4);
  put_u32(h + 4, 36 + data_bytes);
  memcpy(h + 8, "WAVEfmt ", 8);
  put_u32(h + 16, 16);
  h[20] = 1, h[21] = 0; /* PCM */
  h[22] = (uint8_t)channels, h[23] = (uint8_t)(channels >> 8);
  put_u32(h + 24, rate);
  put_u32(h + 28, rate * (uint32_t)channels * 2);
  h[32] = (uint8_t)(channels * 2), h[33] = (uint8_t)((channels * 2) >> 8);
  h[34] = 16, h[35] = 0;
  memcpy(h + 36, "data", 4);
  put_u32(h + 40, data_bytes);
}

int test_write_wav(const char *path, const float *x, size_t frames, int channels, uint32_t rate) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint8_t h[44];
  test_wav_header(h, channels, rate, (uint32_t)(frames * (size_t)channels * 2));
  int ok = fwrite(h, 1, 44, f) == 44;
  for (size_t i = 0; ok && i < frames * (size_t)channels; i++) {
    int16_t s = to_s16(x[i]);
    uint8_t b[2] = {(uint8_t)(s & 0xff), (uint8_t)((uint16_t)s >> 8)};
    ok = fwrite(b, 1, 2, f) == 2;
  }
  return fclose(f) == 0 && ok ? 0 : -1;
}

double test_xcorr(const float *got, size_t ngot, const float *want, size_t nwant, int max_lag, int *lag) {
  double best = -2;
  *lag = 0;
  for (int l = -max_lag; l <= max_lag; l++) {
    double gw = 0, gg = 0, ww = 0;
    for (size_t i = 0; i < nwant; i++) {
      long j = (long)i + l;
      if (j < 0 || (size_t)j >= ngot) continue;
      gw += (double)got[j] * want[i];
      gg += (double)got[j] * got[j];
      ww += (double)want[i] * want[i];
    }
    double c = gg > 0 && ww > 0 ? gw / sqrt(gg * ww) : 0;
    if (c > best) best = c, *lag = l;
  }
  return best;
}

int test_sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char quiet[8300];
  snprintf(quiet, sizeof quiet, "(%s) >/dev/null 2>&1", cmd);
  int st = system(quiet);
  return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}
