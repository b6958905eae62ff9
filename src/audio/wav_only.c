/* Audio without FFmpeg (a build with -DSTENO_FFMPEG=OFF, e.g. a machine with
 * no FFmpeg libraries): WAV files only — PCM 8/16/24/32-bit or float 32/64,
 * any channel count (mixed as decode.c mixes them, downmix.h) — at 16 kHz,
 * from a path or standard input ("-").
 * The same functions as decode.c. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audio/decode.h"
#include "audio/downmix.h"
#include "base/error.h"
#include "base/mem.h"

/* The samples come from memory (audio_open_memory) or are read from the file
 * a block at a time, so memory does not grow with the file's length. */
struct steno_audio {
  const uint8_t *data;  /* the samples, when opened from memory */
  FILE *file;           /* else the file, at the next frame to read */
  bool close_file;      /* not standard input */
  size_t frames, at;    /* frames the file declares (or holds), frames read */
  int format, bits, channels;
  uint32_t mask;        /* speaker positions (WAVE_FORMAT_EXTENSIBLE), or 0 */
  float gain[DOWNMIX_MAX_CHANNELS];
  uint8_t block[16384]; /* raw frames read from the file */
  float frames_f[16384]; /* a block's samples, every channel, before the downmix */
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

/* n bytes from where the reader stands (memory: *pos moves on); fewer only at the end. */
static size_t take(steno_audio *a, size_t *pos, size_t size, uint8_t *out, size_t n) {
  if (a->file) return fread(out, 1, n, a->file);
  size_t k = *pos < size ? size - *pos : 0;
  if (k > n) k = n;
  memcpy(out, a->data + *pos, k);
  *pos += k;
  return k;
}

/* Steps over n bytes; false at the end. */
static bool skip(steno_audio *a, size_t *pos, size_t size, uint64_t n) {
  if (!a->file) {
    if (n > size - *pos) return false;
    *pos += (size_t)n;
    return true;
  }
  uint8_t b[4096];
  for (size_t k; n; n -= k)
    if (!(k = fread(b, 1, n < sizeof b ? (size_t)n : sizeof b, a->file))) return false;
  return true;
}

/* Bytes from the file's position to its end; a pipe: as many as come. */
static uint64_t file_left(FILE *f) {
  struct stat st;
  off_t at = ftello(f);
  if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || at < 0 || st.st_size < at) return UINT64_MAX;
  return (uint64_t)(st.st_size - at);
}

/* Reads the RIFF header and chunks up to the data chunk, which is left next
 * to read (memory: a->data points at it). `size` is the memory's length. */
static int parse(steno_audio *a, size_t size, const char *name) {
  uint8_t h[40];
  size_t pos = 0, head = take(a, &pos, size, h, 12);
  if (head == 0) return err_set(STENO_ERR_FORMAT, "%s: empty file", name);
  if (head < 12 || memcmp(h, "RIFF", 4) || memcmp(h + 8, "WAVE", 4))
    return err_set(STENO_ERR_FORMAT, "%s: not a WAV file (this build reads WAV only: FFmpeg is off)",
                   name);
  uint32_t rate = 0;
  uint64_t data_size = 0;
  bool data = false;
  while (take(a, &pos, size, h, 8) == 8) {
    uint32_t len = u32(h + 4);
    if (!memcmp(h, "data", 4)) {
      data = true;
      data_size = len;
      break;
    }
    uint64_t rest = (uint64_t)len + (len & 1);
    if (!memcmp(h, "fmt ", 4)) {
      size_t k = len < sizeof h ? len : sizeof h;
      if (len < 16 || take(a, &pos, size, h, k) < k)
        return err_set(STENO_ERR_FORMAT, "%s: truncated fmt chunk", name);
      a->format = u16(h), a->channels = u16(h + 2), rate = u32(h + 4), a->bits = u16(h + 14);
      if (a->format == FMT_EXTENSIBLE && len >= 26) a->mask = u32(h + 20), a->format = u16(h + 24);
      rest -= k;
    }
    if (!skip(a, &pos, size, rest)) break;
  }
  if (!a->format || !data) return err_set(STENO_ERR_FORMAT, "%s: no fmt or data chunk", name);
  bool pcm = a->format == FMT_PCM && (a->bits == 8 || a->bits == 16 || a->bits == 24 || a->bits == 32);
  bool flt = a->format == FMT_FLOAT && (a->bits == 32 || a->bits == 64);
  if (!pcm && !flt)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: WAV format %d with %d bits", name, a->format, a->bits);
  if (a->channels < 1 || a->channels > DOWNMIX_MAX_CHANNELS)
    return err_set(STENO_ERR_FORMAT, "%s: %d channels", name, a->channels);
  downmix_gains(a->mask, a->channels, a->gain);
  if (rate != 16000)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %u Hz (this build reads 16 kHz WAV only: FFmpeg is off)",
                   name, rate);
  /* A data chunk longer than what follows (or of size 0, as streaming
   * writers leave it) holds what follows: reads simply end there. */
  uint64_t left = a->file ? file_left(a->file) : size - pos;
  if (!data_size || data_size > left) data_size = left;
  if (!a->file) a->data += pos;
  a->frames = (size_t)(data_size / ((uint64_t)a->channels * (uint64_t)(a->bits / 8)));
  return 0;
}

int audio_open_memory(const uint8_t *data, size_t size, const char *name, steno_audio **out) {
  *out = NULL;
  steno_audio *a = mem_alloc(1, sizeof *a);
  if (!a) return STENO_ERR_NOMEM;
  a->data = data;
  int st = parse(a, size, name);
  if (st) {
    free(a);
    return st;
  }
  *out = a;
  return 0;
}

/* "-" is standard input. The file is read as the samples are asked for. */
int steno_audio_open(const char *path, steno_audio **out) {
  if (!path || !out) return err_set(STENO_ERR_INVALID, "steno_audio_open: NULL argument");
  *out = NULL;
  steno_audio *a = mem_alloc(1, sizeof *a);
  if (!a) return STENO_ERR_NOMEM;
  bool in = !strcmp(path, "-");
  a->file = in ? stdin : fopen(path, "rb");
  a->close_file = !in;
  if (!a->file) {
    free(a);
    return err_set(STENO_ERR_IO, "%s: cannot open", path);
  }
  struct stat info;
  if (fstat(fileno(a->file), &info) == 0 && S_ISDIR(info.st_mode)) {
    steno_audio_close(a);
    return err_set(STENO_ERR_IO, "%s: is a directory", path);
  }
  int st = parse(a, 0, in ? "standard input" : path);
  if (st) {
    steno_audio_close(a);
    return st;
  }
  *out = a;
  return 0;
}

/* Frames from memory, or from the file a block at a time, mixed down. */
int steno_audio_read(steno_audio *a, float *pcm, size_t max, size_t *got) {
  size_t bytes = (size_t)a->bits / 8, frame = (size_t)a->channels * bytes, n = 0;
  while (n < max && a->at < a->frames) {
    size_t want = max - n, left = a->frames - a->at;
    if (want > left) want = left;
    if (want > sizeof a->block / frame) want = sizeof a->block / frame;
    const uint8_t *src = a->data ? a->data + a->at * frame : a->block;
    if (a->file) {
      size_t k = fread(a->block, frame, want, a->file);
      if (k < want) {
        if (ferror(a->file)) return err_set(STENO_ERR_IO, "reading the WAV file failed");
        a->frames = a->at + k; /* the file ends here */
        want = k;
      }
    }
    for (size_t i = 0; i < want * (size_t)a->channels; i++) a->frames_f[i] = sample(src + i * bytes, a->format, a->bits);
    downmix(a->frames_f, want, a->channels, a->gain, pcm + n);
    n += want, a->at += want;
  }
  *got = n;
  return 0;
}

/* 0 for a stream whose length is not declared. */
double steno_audio_duration(const steno_audio *a) {
  return a && a->frames < SIZE_MAX / 2 ? (double)a->frames / 16000 : 0;
}

void steno_audio_close(steno_audio *a) {
  if (!a) return;
  if (a->close_file) fclose(a->file);
  free(a);
}
