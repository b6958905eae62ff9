/* What the audio tests share: a real speech clip, WAV files written here, a
 * scratch directory, and a lag-tolerant comparison for lossy codecs. */
#ifndef STENO_TEST_AUDIO_TEST_H
#define STENO_TEST_AUDIO_TEST_H

#include <stddef.h>
#include <stdint.h>

/* The fixtures' espeak-ng clip "the quick brown fox jumps over the lazy dog"
 * (46 399 samples, 16 kHz mono, from parakeet_ctc_tiny.ref.gguf), malloc'd. */
float *test_speech(size_t *n);

/* A fresh directory under $TMPDIR (or /tmp), removed with its files at exit. */
const char *test_tmpdir(void);

/* Writes 16-bit PCM WAV: frames × channels interleaved samples, each
 * rounded to the nearest of x·32768 (clamped). Returns 0 on success. */
int test_write_wav(const char *path, const float *x, size_t frames, int channels, uint32_t rate);

/* A 44-byte PCM 16-bit WAV header that claims what it is told. */
void test_wav_header(uint8_t h[44], int channels, uint32_t rate, uint32_t data_bytes);

/* The samples a 16-bit file holds for x (what test_write_wav stores). */
float test_s16(float x);

/* The best normalized cross-correlation of got against want over lags in
 * [−max_lag, max_lag] (samples; got[i + lag] against want[i]); *lag gets it. */
double test_xcorr(const float *got, size_t ngot, const float *want, size_t nwant, int max_lag, int *lag);

/* Runs a shell command quietly; its exit status (−1 when it could not run). */
int test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
