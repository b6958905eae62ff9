/* steno run --stream. Input: a FILE through steno_audio (any format FFmpeg
 * reads), or standard input as it arrives: a WAV stream (16-bit PCM at 16 kHz,
 * any channels averaged; the header's lengths are ignored, as a recorder
 * piping it cannot know them) when it starts with "RIFF", else raw s16le mono
 * 16 kHz (arecord -f S16_LE -r 16000 -c 1 -t raw). */
#include "stream.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RATE 16000
#define BLOCK 1600 /* samples per read: 0.1 s */

typedef struct {
  steno_audio *audio;  /* FILE through steno_audio, or NULL: standard input */
  int channels;        /* standard input's interleaved channels */
  uint8_t pending[64]; /* bytes of a frame not yet complete */
  size_t npending;
  bool eof;
} source;

static int fail(const char *what) {
  fprintf(stderr, "steno run --stream: %s\n", what);
  return 1;
}

/* Reads exactly n bytes of standard input (false at its end or an error). */
static bool read_all(uint8_t *p, size_t n) {
  while (n) {
    ssize_t got = read(STDIN_FILENO, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got, n -= (size_t)got;
  }
  return true;
}

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* A WAV header after "RIFF": its fmt chunk checked, up to its data chunk. */
static int wav_header(source *s) {
  uint8_t h[8];
  bool fmt = false;
  if (!read_all(h, 8) || memcmp(h + 4, "WAVE", 4)) return fail("standard input: RIFF but not WAVE");
  for (;;) {
    if (!read_all(h, 8)) return fail("standard input: a WAV stream without a data chunk");
    uint32_t size = le32(h + 4);
    if (!memcmp(h, "data", 4)) return fmt ? 0 : fail("standard input: WAV data before its fmt chunk");
    uint8_t body[64];
    size_t keep = size < sizeof body ? size : sizeof body;
    if (!read_all(body, keep)) return fail("standard input: a truncated WAV header");
    for (size_t rest = size - keep + (size & 1); rest; rest--)
      if (!read_all(h, 1)) return fail("standard input: a truncated WAV header");
    if (memcmp(h, "fmt ", 4)) continue;
    if (keep < 16 || (le16(body) != 1 && le16(body) != 0xFFFE) || le16(body + 14) != 16 ||
        le32(body + 4) != RATE || !le16(body + 2) || le16(body + 2) > 16)
      return fail("standard input: WAV must be 16-bit PCM at 16000 Hz (resample first, e.g. "
                  "with sox or ffmpeg, or give a FILE)");
    s->channels = le16(body + 2);
    fmt = true;
  }
}

static int source_open(source *s, const char *file) {
  memset(s, 0, sizeof *s);
  s->channels = 1;
  if (strcmp(file, "-")) {
    if (steno_audio_open(file, &s->audio)) return fail(steno_last_error());
    return 0;
  }
  uint8_t magic[4];
  if (!read_all(magic, 4)) {
    s->eof = true; /* nothing at all: an empty stream */
    return 0;
  }
  if (!memcmp(magic, "RIFF", 4)) return wav_header(s);
  memcpy(s->pending, magic, 4);
  s->npending = 4;
  return 0;
}

/* Up to BLOCK samples as they arrive (*got 0 at the end). */
static int source_read(source *s, float *pcm, size_t *got) {
  *got = 0;
  if (s->audio) {
    if (steno_audio_read(s->audio, pcm, BLOCK, got)) return fail(steno_last_error());
    s->eof = *got < BLOCK; /* short only at the end */
    return 0;
  }
  size_t frame = 2 * (size_t)s->channels;
  uint8_t buf[BLOCK * 2 * 16 + 64];
  memcpy(buf, s->pending, s->npending);
  size_t have = s->npending;
  while (!s->eof && have < frame) {
    ssize_t n = read(STDIN_FILENO, buf + have, BLOCK * frame - have);
    if (n < 0 && errno == EINTR) return 0; /* a signal: the caller checks it */
    if (n < 0) return fail(strerror(errno));
    if (n == 0) s->eof = true;
    have += (size_t)(n > 0 ? n : 0);
  }
  size_t frames = have / frame;
  for (size_t i = 0; i < frames; i++) {
    int sum = 0;
    for (int c = 0; c < s->channels; c++) sum += (int16_t)le16(buf + i * frame + 2 * c);
    pcm[i] = (float)sum / (32768.0f * s->channels);
  }
  s->npending = have - frames * frame;
  memcpy(s->pending, buf + frames * frame, s->npending);
  *got = frames;
  return 0;
}

/* Prints what the firm text gained since `shown` (what is on standard output
 * already); the tentative rest on a terminal. */
static int show(steno_stream *st, char **shown, bool tty) {
  const char *firm, *tent;
  if (steno_stream_text(st, &firm, &tent)) return fail(steno_last_error());
  size_t had = strlen(*shown);
  if (strlen(firm) > had && !strncmp(firm, *shown, had)) {
    char *copy = strdup(firm);
    if (!copy) return fail("out of memory");
    if (tty) fputs("\r\033[K", stderr);
    fputs(firm + had, stdout);
    fflush(stdout);
    free(*shown);
    *shown = copy;
  }
  if (tty) fprintf(stderr, "\r\033[K%.70s", tent);
  return 0;
}

int stream_run(steno_model *m, const char *file, const char *language, bool quiet,
               int (*should_abort)(void *user), int (*abort_status)(void)) {
  source src;
  if (source_open(&src, file)) return 1;
  steno_stream_params p = steno_stream_default_params();
  p.language = language;
  p.abort = should_abort;
  steno_stream *st;
  if (steno_stream_open(m, &p, &st)) {
    steno_audio_close(src.audio);
    return fail(steno_last_error());
  }
  bool tty = !quiet && isatty(STDERR_FILENO);
  float pcm[BLOCK];
  size_t got;
  char *shown = strdup("");
  int rc = shown ? 0 : fail("out of memory");
  while (!rc && !(rc = source_read(&src, pcm, &got)) && (got || !src.eof)) {
    if (should_abort(NULL)) break;
    if (got && steno_stream_feed(st, pcm, got)) rc = fail(steno_last_error());
    if (!rc && got) rc = show(st, &shown, tty);
  }
  bool printed = shown && *shown;
  free(shown);
  steno_result *r = NULL;
  if (!rc && should_abort(NULL)) rc = abort_status();
  if (!rc && steno_stream_finish(st, &r)) rc = fail(steno_last_error());
  if (tty) fputs("\r\033[K", stderr);
  if (!rc) printf("%s%s\n", printed ? "\n" : "", steno_result_text(r));
  if (!rc && fflush(stdout)) rc = fail("could not write to standard output");
  steno_result_free(r);
  steno_stream_free(st);
  steno_audio_close(src.audio);
  return rc;
}
