/* Audio decoding through FFmpeg: every listed format, made here from the
 * fixtures' speech clip with Debian's ffmpeg, decodes to 16 kHz mono that
 * matches the clip (exactly where nothing lossy or resampling is in the way,
 * by cross-correlation where a codec is); channels mix as FFmpeg's default
 * matrix, opposite phase kept; reading in
 * small pieces, from memory or as a whole gives the same samples; and bad
 * files (empty, not audio, no audio stream, 0 Hz, too many channels, a cut
 * off m4a) fail with a message; SDP files, playlists and concat lists are
 * refused before FFmpeg opens what they name; from a pipe, no audio is an
 * error while silence is silence. Built with FFmpeg off, the same files
 * that are no 16 kHz WAV fail with the WAV-only reader's clear refusal. */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audio/decode.h"
#include "audio/downmix.h"
#include "audio_test.h"
#include "base/error.h"
#include "check.h"
#include "steno.h"
#if STENO_TEST_FFMPEG
#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>
#endif

static float *speech, *expect; /* the clip, and what a 16-bit file of it holds */
static size_t nspeech;
static char ref_wav[4200];

static char *path_of(const char *name) {
  static char buf[4][4200];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", test_tmpdir(), name);
  return p;
}

static double rms(const float *x, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; i++) e += (double)x[i] * x[i];
  return n ? sqrt(e / (double)n) : 0;
}

/* A 16 kHz mono file decodes to exactly the samples written. */
static void test_wav_exact(void) {
  float *pcm;
  size_t n;
  CHECK_OK(steno_audio_load(ref_wav, &pcm, &n));
  CHECK(n == nspeech, "%zu samples, want %zu", n, nspeech);
  CHECK(n == nspeech && !memcmp(pcm, expect, n * sizeof *pcm), "16-bit samples not exact");
  steno_audio_free(pcm);
}

/* Writes `channels` channels, the clip times gain[c] in channel c, and
 * returns the decoded level over the mono clip's, in dB (−100: nothing). */
static double mixed_level(const char *file, int channels, const float *gain) {
  float *x = malloc(nspeech * (size_t)channels * sizeof *x), *pcm;
  for (size_t i = 0; i < nspeech; i++)
    for (int c = 0; c < channels; c++) x[i * (size_t)channels + c] = gain[c] * speech[i];
  CHECK(test_write_wav(path_of(file), x, nspeech, channels, 16000) == 0, "writing %s", file);
  free(x);
  size_t n;
  if (steno_audio_load(path_of(file), &pcm, &n)) {
    CHECK(0, "%s: %s", file, steno_last_error());
    return -100;
  }
  double r = rms(pcm, n), db = r > 0 ? 20 * log10(r / rms(expect, nspeech)) : -100;
  printf("%-12s %d channels: %+.2f dB\n", file, channels, db);
  steno_audio_free(pcm);
  return db;
}

/* Channels mix as FFmpeg's default matrix (downmix.h), not as a mean: 5.1
 * with dialogue in the centre alone keeps its level (a mean: −15.6 dB);
 * stereo of one voice on both sides sums to +3 dB, as `ffmpeg -ac 1`; and
 * the right side turned over does not cancel the left. Six channels with no
 * positions written are 5.1 to both readers. */
static void test_downmix(void) {
  const float centre[6] = {0, 0, 1, 0, 0, 0}, both[2] = {1, 1}, opposite[2] = {1, -1};
  const float lfe[6] = {0, 0, 0, 1, 0, 0}, quiet_rest[6] = {0.02f, -0.02f, 1, 0.02f, 0.01f, -0.01f};
  double db = mixed_level("centre.wav", 6, centre);
  CHECK(fabs(db) <= 1, "5.1, speech in the centre: %+.2f dB", db);
  db = mixed_level("centre2.wav", 6, quiet_rest);
  CHECK(fabs(db) <= 1, "5.1, speech in the centre, faint elsewhere: %+.2f dB", db);
  db = mixed_level("lfe.wav", 6, lfe);
  CHECK(db == -100, "5.1, the LFE is dropped: %+.2f dB", db);
  db = mixed_level("both.wav", 2, both);
  CHECK(fabs(db - 3.01) <= 0.1, "stereo, the same on both sides: %+.2f dB, want +3", db);
  db = mixed_level("opposite.wav", 2, opposite);
  CHECK(fabs(db - 3.01) <= 0.1, "stereo, right turned over: %+.2f dB, want +3", db);
#if STENO_TEST_FFMPEG
  /* The table is swresample's own matrix, for FFmpeg's default layouts. */
  for (int channels = 1; channels <= 8; channels++) {
    AVChannelLayout in, mono = AV_CHANNEL_LAYOUT_MONO;
    av_channel_layout_default(&in, channels);
    static double want[64 * 64];
    float got[64];
    CHECK(swr_build_matrix2(&in, &mono, M_SQRT1_2, M_SQRT1_2, 0, INT_MAX, 1, want, 64,
                            AV_MATRIX_ENCODING_NONE, NULL) == 0, "swr_build_matrix2, %d channels", channels);
    downmix_gains(in.u.mask, channels, got);
    for (int c = 0; c < channels; c++)
      CHECK(fabs(got[c] - want[c]) < 1e-6, "%d channels, channel %d: gain %g, swresample's %g", channels, c,
            got[c], want[c]);
  }
#endif
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

/* A bad file: the load fails with `code` and a message naming the file and
 * saying `why`. */
static void expect_fail(const char *path, int code, const char *why) {
  float *pcm = (float *)1;
  size_t n = 7;
  int st = steno_audio_load(path, &pcm, &n);
  const char *msg = steno_last_error();
  CHECK(st == code, "%s: status %d, want %d (%s)", path, st, code, msg);
  CHECK(strstr(msg, why) && strstr(msg, strrchr(path, '/') ? strrchr(path, '/') + 1 : path),
        "%s: message '%s' does not say '%s'", path, msg, why);
  CHECK(pcm == NULL && n == 0, "%s: outputs not cleared", path);
}

/* A file FFmpeg fails on with `code` and `why`: in a WAV-only build (FFmpeg
 * off) the same file, no WAV at all, fails as one. */
static void expect_fail_ff(const char *path, int code, const char *why) {
  if (STENO_TEST_FFMPEG) expect_fail(path, code, why);
  else expect_fail(path, STENO_ERR_FORMAT, "not a WAV file");
}

typedef struct {
  const char *file;  /* made from the clip by ffmpeg */
  const char *args;  /* ffmpeg output options */
  int video;         /* add a small video track first */
  int exact;         /* lossless at 16 kHz mono: the same samples */
  double corr;       /* least cross-correlation with the clip */
} format;

static const format formats[] = {
    {"r44.wav", "-ar 44100 -ac 2", 0, 0, 0.999},
    {"a.flac", "-c:a flac", 0, 1, 1},
    {"r48.flac", "-c:a flac -ar 48000 -ac 2", 0, 0, 0.999},
    {"a.mp3", "-c:a libmp3lame -b:a 64k -ar 22050", 0, 0, 0.98},
    {"a.opus", "-c:a libopus -b:a 32k", 0, 0, 0.98},
    {"a.ogg", "-c:a libvorbis -q:a 3 -ar 44100", 0, 0, 0.98},
    {"a.m4a", "-c:a aac -b:a 64k", 0, 0, 0.98},
    {"v.mp4", "-c:v mpeg4 -c:a aac -b:a 64k -ar 44100 -shortest", 1, 0, 0.98},
    {"v.mkv", "-c:v mpeg4 -c:a flac -shortest", 1, 1, 1},
    {"v.webm", "-c:v libvpx -b:v 50k -c:a libopus -b:a 32k -shortest", 1, 0, 0.98},
};

static void test_format(const format *f) {
  char *out = path_of(f->file);
  const char *video = f->video ? "-f lavfi -i color=c=gray:s=64x48:r=10 -map 1:v -map 0:a" : "";
  int rc = test_sh("ffmpeg -nostdin -y -i '%s' %s %s '%s'", ref_wav, video, f->args, out);
  CHECK(rc == 0, "ffmpeg could not make %s (exit %d): is ffmpeg installed? (.ci/run installs it)",
        f->file, rc);
  if (rc) return;
  if (!STENO_TEST_FFMPEG) { /* WAV-only: a clear refusal, not samples */
    bool wav = strstr(f->file, ".wav") != NULL;
    expect_fail(out, wav ? STENO_ERR_UNSUPPORTED : STENO_ERR_FORMAT, wav ? "16 kHz WAV only" : "not a WAV file");
    return;
  }
  float *pcm;
  size_t n;
  int st = steno_audio_load(out, &pcm, &n);
  CHECK(st == 0, "%s: %s", f->file, steno_last_error());
  if (st) return;
  if (f->exact) {
    CHECK(n == nspeech && !memcmp(pcm, expect, n * sizeof *pcm), "%s: %zu samples, not the clip's",
          f->file, n);
  } else {
    int lag;
    double c = test_xcorr(pcm, n, expect, nspeech, 400, &lag);
    /* Codecs add up to a frame of padding at the end (FFmpeg trims the start). */
    long extra = (long)n - (long)nspeech;
    printf("%-9s %zu samples (%+ld), correlation %.4f at lag %d\n", f->file, n, extra, c, lag);
    CHECK(c >= f->corr, "%s: correlation %.4f < %.2f", f->file, c, f->corr);
    CHECK(lag >= -48 && lag <= 48, "%s: shifted by %d samples", f->file, lag);
    CHECK(extra >= -160 && extra <= 1600, "%s: %zu samples for %zu", f->file, n, nspeech);
  }
  steno_audio_free(pcm);
}

/* Reading 1, 7, 1000 samples at a time, and from memory, gives the same. */
static void test_reads(void) {
  const char *file = STENO_TEST_FFMPEG ? path_of("a.opus") : ref_wav;
  float *all;
  size_t n;
  if (steno_audio_load(file, &all, &n)) return; /* reported by test_format */
  float *buf = malloc((n + 1000) * sizeof *buf);
  const size_t chunks[] = {1, 7, 1000};
  for (int k = 0; k < 3; k++) {
    steno_audio *a;
    CHECK_OK(steno_audio_open(file, &a));
    size_t total = 0, got;
    do {
      CHECK_OK(steno_audio_read(a, buf + total, chunks[k], &got));
      total += got;
    } while (got == chunks[k] && total + chunks[k] <= n + 1000);
    CHECK(total == n && !memcmp(buf, all, n * sizeof *buf), "chunks of %zu: %zu samples", chunks[k], total);
    CHECK(steno_audio_duration(a) > 2.8 && steno_audio_duration(a) < 3.0, "duration %g",
          steno_audio_duration(a));
    CHECK_OK(steno_audio_read(a, buf, 10, &got)); /* past the end: still nothing */
    CHECK(got == 0, "%zu samples after the end", got);
    steno_audio_close(a);
  }
  FILE *f = fopen(file, "rb");
  static uint8_t bytes[1 << 20];
  size_t size = f ? fread(bytes, 1, sizeof bytes, f) : 0;
  if (f) fclose(f);
  steno_audio *a;
  CHECK_OK(audio_open_memory(bytes, size, "opus in memory", &a));
  size_t got = 0;
  if (a) CHECK_OK(steno_audio_read(a, buf, n + 1000, &got));
  CHECK(got == n && !memcmp(buf, all, n * sizeof *buf), "from memory: %zu samples", got);
  steno_audio_close(a);
  free(buf);
  steno_audio_free(all);
}

static void test_bad_files(void) {
  expect_fail(path_of("missing.wav"), STENO_ERR_IO, "cannot open");
  expect_fail(test_tmpdir(), STENO_ERR_IO, "directory");
  write_bytes(path_of("empty.mp3"), "", 0);
  expect_fail(path_of("empty.mp3"), STENO_ERR_FORMAT, "empty");
  char text[4000];
  for (size_t i = 0; i < sizeof text; i++) text[i] = "steno reads audio\n"[i % 18];
  write_bytes(path_of("text.wav"), text, sizeof text);
  expect_fail_ff(path_of("text.wav"), STENO_ERR_FORMAT, "not an audio or video file");

  uint8_t wav[44 + 3200] = {0};
  test_wav_header(wav, 1, 0, 3200);
  write_bytes(path_of("zero_hz.wav"), wav, sizeof wav);
  if (STENO_TEST_FFMPEG) expect_fail(path_of("zero_hz.wav"), STENO_ERR_FORMAT, "sample rate");
  else expect_fail(path_of("zero_hz.wav"), STENO_ERR_UNSUPPORTED, "16 kHz WAV only");
  test_wav_header(wav, 100, 16000, 3200);
  write_bytes(path_of("channels.wav"), wav, sizeof wav);
  expect_fail(path_of("channels.wav"), STENO_ERR_FORMAT, "channels");

  if (test_sh("ffmpeg -nostdin -y -f lavfi -i color=c=gray:s=64x48:r=10 -t 1 -c:v mpeg4 '%s'",
              path_of("video_only.mp4")) == 0)
    expect_fail_ff(path_of("video_only.mp4"), STENO_ERR_FORMAT, "no audio stream");
  /* An m4a cut in half: ffmpeg writes the index (moov) last, so it is gone. */
  if (test_sh("head -c 20000 '%s' > '%s'", path_of("a.m4a"), path_of("cut.m4a")) == 0)
    expect_fail_ff(path_of("cut.m4a"), STENO_ERR_FORMAT, "cut.m4a");
}

/* Files that describe other resources instead of holding media, named as
 * audio: refused at once, before FFmpeg opens anything (an SDP file would
 * have it wait for RTP on UDP, a playlist or a concat list read the files or
 * URLs they name). SIGALRM ends the test if any of them waits. */
static void test_refused_inputs(void) {
  static const struct {
    const char *file, *text, *format;
  } refused[] = {
      {"sdp.wav", "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\n"
                  "m=audio 5004 RTP/AVP 0\na=rtpmap:0 PCMU/8000\n", "sdp"},
      {"hls.mp3", "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:3,\nref.wav\n#EXTINF:3,\n"
                  "http://127.0.0.1:1/a.ts\n#EXT-X-ENDLIST\n", "hls"},
      {"list.wav", "ffconcat version 1.0\nfile 'ref.wav'\n", "concat"},
      {"list.ffconcat", "ffconcat version 1.0\nfile 'ref.wav'\nfile 'http://127.0.0.1:1/a.wav'\n", "concat"},
  };
  alarm(20);
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    char why[64];
    snprintf(why, sizeof why, "%s input is not allowed", refused[i].format);
    write_bytes(path_of(refused[i].file), refused[i].text, strlen(refused[i].text));
    expect_fail_ff(path_of(refused[i].file), STENO_ERR_UNSUPPORTED, why);
  }
  alarm(0);
}

/* A FIFO that a background writer fills with `file`: reading it is reading
 * a pipe (no seeking). Named after the file, for messages. */
static const char *piped(const char *file) {
  char name[256];
  snprintf(name, sizeof name, "pipe.%s", file);
  char *fifo = path_of(name);
  unlink(fifo);
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
  CHECK(test_sh("cat '%s' > '%s' &", path_of(file), fifo) == 0, "writing %s", fifo);
  return fifo;
}

/* From a pipe, a stream that yields no audio is an error, not an empty
 * recording: an m4a whose index (moov) comes after its samples (longer than
 * the read buffer, which would otherwise hide the seek back), video alone;
 * while a silent WAV is 3 s of zeros. */
static void test_pipes(void) {
  int rc = test_sh("ffmpeg -nostdin -y -stream_loop 7 -i '%s' -c:a aac -b:a 128k '%s'", ref_wav,
                   path_of("long.m4a"));
  CHECK(rc == 0, "ffmpeg could not make long.m4a (exit %d)", rc);
  if (!rc) expect_fail_ff(piped("long.m4a"), STENO_ERR_FORMAT, "cannot be read from a pipe");
  if (test_sh("ls '%s'", path_of("video_only.mp4")) == 0)
    expect_fail_ff(piped("video_only.mp4"), STENO_ERR_FORMAT, "no audio stream");
  float *zeros = calloc(48000, sizeof *zeros), *pcm;
  size_t n;
  CHECK(test_write_wav(path_of("silence.wav"), zeros, 48000, 1, 16000) == 0, "writing silence.wav");
  CHECK_OK(steno_audio_load(piped("silence.wav"), &pcm, &n));
  CHECK(n == 48000 && !memcmp(pcm, zeros, n * sizeof *pcm), "silence from a pipe: %zu samples", n);
  steno_audio_free(pcm);
  free(zeros);
}

/* A header that claims 4 GB of samples over 1 s of them: the file is read as
 * it is, nothing is allocated for the claim. */
static void test_lying_header(void) {
  static uint8_t wav[44 + 32000];
  test_wav_header(wav, 1, 16000, 0xfffffff0u);
  for (size_t i = 0; i < 16000; i++) wav[44 + 2 * i + 1] = (uint8_t)(i % 64);
  write_bytes(path_of("liar.wav"), wav, sizeof wav);
  float *pcm;
  size_t n;
  CHECK_OK(steno_audio_load(path_of("liar.wav"), &pcm, &n));
  CHECK(n == 16000, "%zu samples", n);
  steno_audio_free(pcm);
}

int main(void) {
  speech = test_speech(&nspeech);
  expect = malloc(nspeech * sizeof *expect);
  for (size_t i = 0; i < nspeech; i++) expect[i] = test_s16(speech[i]);
  snprintf(ref_wav, sizeof ref_wav, "%s", path_of("ref.wav"));
  CHECK(test_write_wav(ref_wav, speech, nspeech, 1, 16000) == 0, "writing %s", ref_wav);
  test_wav_exact();
  test_downmix();
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) test_format(&formats[i]);
  test_reads();
  test_bad_files();
  test_refused_inputs();
  test_pipes();
  test_lying_header();
  free(speech);
  free(expect);
  return check_done();
}
