/* Audio without FFmpeg (a build with -DSTENO_FFMPEG=OFF, e.g. a machine with
 * no FFmpeg libraries): WAV files only — PCM 8/16/24/32-bit or float 32/64,
 * any channel count (averaged) — at 16 kHz. The same functions as decode.c. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/decode.h"
#include "base/error.h"
#include "base/mem.h"

struct steno_audio {
  uint8_t *owned;       /* the file's bytes when read from a path */
  const uint8_t *data;  /* the samples */
  size_t frames, at;    /* frames in all, frames read */
  int format, bits, channels;
};

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

enum { FMT_PCM = 1, FMT_FLOAT = 3, FMT_EXTENSIBLE = 0xfffe };

static float sample(const uint8_t *p, int format, int bits) {
  if (format == FMT_FLOAT && bits == 32) {
    uint32_t u = u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  if (format == FMT_FLOAT) {
    uint64_t u = (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
    double d;
    memcpy(&d, &u, 8);
    return (float)d;
  }
  switch (bits) {
    case 8: return ((float)p[0] - 128.0f) / 128.0f;
    case 16: return (float)(int16_t)u16(p) / 32768.0f;
    case 24:
      return (float)((int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24) >> 8) /
             8388608.0f;
    default: return (float)((double)(int32_t)u32(p) / 2147483648.0);
  }
}

static int parse(steno_audio *a, const uint8_t *d, size_t size, const char *name) {
  if (size < 12 || memcmp(d, "RIFF", 4) || memcmp(d + 8, "WAVE", 4))
    return err_set(STENO_ERR_FORMAT, "%s: not a WAV file (this build reads WAV only: FFmpeg is off)",
                   name);
  uint32_t rate = 0;
  const uint8_t *data = NULL;
  size_t data_size = 0;
  for (size_t at = 12; at + 8 <= size;) {
    uint32_t len = u32(d + at + 4);
    const uint8_t *body = d + at + 8;
    size_t avail = size - at - 8;
    if (!memcmp(d + at, "fmt ", 4)) {
      if (len < 16 || len > avail) return err_set(STENO_ERR_FORMAT, "%s: truncated fmt chunk", name);
      a->format = u16(body), a->channels = u16(body + 2), rate = u32(body + 4), a->bits = u16(body + 14);
      if (a->format == FMT_EXTENSIBLE && len >= 26) a->format = u16(body + 24);
    } else if (!memcmp(d + at, "data", 4)) {
      data = body;
      data_size = len && len <= avail ? len : avail;
      break;
    }
    if (len > avail) break;
    at += 8 + (size_t)len + (len & 1);
  }
  if (!a->format || !data) return err_set(STENO_ERR_FORMAT, "%s: no fmt or data chunk", name);
  bool pcm = a->format == FMT_PCM && (a->bits == 8 || a->bits == 16 || a->bits == 24 || a->bits == 32);
  bool flt = a->format == FMT_FLOAT && (a->bits == 32 || a->bits == 64);
  if (!pcm && !flt)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: WAV format %d with %d bits", name, a->format, a->bits);
  if (a->channels < 1 || a->channels > 64)
    return err_set(STENO_ERR_FORMAT, "%s: %d channels", name, a->channels);
  if (rate != 16000)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %u Hz (this build reads 16 kHz WAV only: FFmpeg is off)",
                   name, rate);
  a->data = data;
  a->frames = data_size / ((size_t)a->channels * (size_t)(a->bits / 8));
  return 0;
}

int audio_open_memory(const uint8_t *data, size_t size, const char *name, steno_audio **out) {
  *out = NULL;
  steno_audio *a = mem_alloc(1, sizeof *a);
  if (!a) return STENO_ERR_NOMEM;
  int st = parse(a, data, size, name);
  if (st) {
    free(a);
    return st;
  }
  *out = a;
  return 0;
}

int steno_audio_open(const char *path, steno_audio **out) {
  if (!path || !out) return err_set(STENO_ERR_INVALID, "steno_audio_open: NULL argument");
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(STENO_ERR_IO, "%s: cannot open", path);
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  int st = 0;
  for (size_t got = 1; got && !st;) {
    if (n == cap) {
      uint8_t *g = mem_realloc(buf, cap = cap ? 2 * cap : 1 << 20, 1);
      if (!g) st = STENO_ERR_NOMEM;
      else buf = g;
    }
    if (!st) n += got = fread(buf + n, 1, cap - n, f);
  }
  fclose(f);
  if (!st) st = audio_open_memory(buf, n, path, out);
  if (st) {
    free(buf);
    return st;
  }
  (*out)->owned = buf;
  return 0;
}

int steno_audio_read(steno_audio *a, float *pcm, size_t max, size_t *got) {
  size_t frame = (size_t)a->channels * (size_t)(a->bits / 8), n = 0;
  for (; n < max && a->at < a->frames; n++, a->at++) {
    float s = 0;
    for (int c = 0; c < a->channels; c++)
      s += sample(a->data + a->at * frame + (size_t)c * (size_t)(a->bits / 8), a->format, a->bits);
    pcm[n] = s / (float)a->channels;
  }
  *got = n;
  return 0;
}

double steno_audio_duration(const steno_audio *a) { return a ? (double)a->frames / 16000 : 0; }

void steno_audio_close(steno_audio *a) {
  if (!a) return;
  free(a->owned);
  free(a);
}
