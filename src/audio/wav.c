#include "audio/wav.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

enum { FMT_PCM = 1, FMT_FLOAT = 3, FMT_EXTENSIBLE = 0xfffe };

/* One sample of `bits` at p as a float in [-1, 1]. */
static float sample(const uint8_t *p, int format, int bits) {
  if (format == FMT_FLOAT) {
    if (bits == 32) {
      uint32_t u = u32(p);
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    uint64_t u = (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
    double d;
    memcpy(&d, &u, 8);
    return (float)d;
  }
  switch (bits) {
    case 8: return ((float)p[0] - 128.0f) / 128.0f;
    case 16: return (float)(int16_t)u16(p) / 32768.0f;
    case 24: return (float)((int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24) >> 8) / 8388608.0f;
    default: return (float)((double)(int32_t)u32(p) / 2147483648.0);
  }
}

int wav_parse(const uint8_t *d, size_t size, const char *name, wav_audio *out) {
  memset(out, 0, sizeof *out);
  if (size < 12 || memcmp(d, "RIFF", 4) || memcmp(d + 8, "WAVE", 4))
    return err_set(STENO_ERR_FORMAT, "%s: not a WAV file (no RIFF/WAVE header)", name);
  int format = 0, bits = 0, channels = 0;
  uint32_t rate = 0;
  const uint8_t *data = NULL;
  size_t data_size = 0;
  for (size_t at = 12; at + 8 <= size;) {
    uint32_t len = u32(d + at + 4);
    const uint8_t *body = d + at + 8;
    size_t avail = size - at - 8;
    if (!memcmp(d + at, "fmt ", 4)) {
      if (len < 16 || len > avail)
        return err_set(STENO_ERR_FORMAT, "%s: truncated fmt chunk", name);
      format = u16(body);
      channels = u16(body + 2);
      rate = u32(body + 4);
      bits = u16(body + 14);
      if (format == FMT_EXTENSIBLE) {
        if (len < 26) return err_set(STENO_ERR_FORMAT, "%s: truncated extensible fmt chunk", name);
        format = u16(body + 24); /* the sub-format GUID starts with the format code */
      }
    } else if (!memcmp(d + at, "data", 4)) {
      data = body;
      /* Streaming writers leave the size unset (0 or 0xffffffff): take what is there. */
      data_size = len && len <= avail ? len : avail;
      break;
    }
    if (len > avail) break;
    at += 8 + (size_t)len + (len & 1);
  }
  if (!format) return err_set(STENO_ERR_FORMAT, "%s: no fmt chunk", name);
  if (!data) return err_set(STENO_ERR_FORMAT, "%s: no data chunk", name);
  bool pcm_ok = format == FMT_PCM && (bits == 8 || bits == 16 || bits == 24 || bits == 32);
  bool float_ok = format == FMT_FLOAT && (bits == 32 || bits == 64);
  if (!pcm_ok && !float_ok)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: WAV format %d with %d bits is not supported "
                   "(PCM 8/16/24/32 and float 32/64 are)", name, format, bits);
  if (channels < 1 || channels > 64)
    return err_set(STENO_ERR_FORMAT, "%s: %d channels", name, channels);
  if (rate < 1000 || rate > 768000)
    return err_set(STENO_ERR_FORMAT, "%s: sample rate %u Hz", name, rate);
  size_t frame = (size_t)channels * (size_t)(bits / 8), n = data_size / frame;
  float *pcm = mem_alloc(n + 1, sizeof *pcm);
  if (!pcm) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    float s = 0;
    for (int c = 0; c < channels; c++) s += sample(data + i * frame + (size_t)c * (bits / 8), format, bits);
    pcm[i] = s / (float)channels;
  }
  out->pcm = pcm;
  out->n = n;
  out->rate = rate;
  out->channels = (uint16_t)channels;
  return 0;
}

int wav_read(const char *path, wav_audio *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(STENO_ERR_IO, "%s: cannot open", path);
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  int st = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 1 << 20;
      uint8_t *g = mem_realloc(buf, cap, 1);
      if (!g) {
        st = STENO_ERR_NOMEM;
        break;
      }
      buf = g;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (!st && ferror(f)) st = err_set(STENO_ERR_IO, "%s: read error", path);
  fclose(f);
  if (!st) st = wav_parse(buf, n, path, out);
  free(buf);
  return st;
}
