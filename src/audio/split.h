/* Long audio in pieces: cuts at the quietest moments (energy only, no model),
 * and an energy gate that tells silence and steady noise from sound worth
 * decoding. All on 16 kHz mono pcm. */
#ifndef STENO_AUDIO_SPLIT_H
#define STENO_AUDIO_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

enum { SPLIT_RATE = 16000, SPLIT_FRAME = 160 /* 10 ms */ };

/* Pulls up to max samples into pcm; *got == 0 only at the end. */
typedef int (*split_read_fn)(void *user, float *pcm, size_t max, size_t *got);

/* Reads a stream and hands it out in pieces of at most `piece` samples,
 * holding no more than piece + 1 s of it at a time. */
typedef struct {
  split_read_fn read;
  void *user;
  size_t piece;   /* longest piece, samples (a multiple of SPLIT_FRAME) */
  size_t cap;     /* buffer: piece + 1 s, so a cut never leaves a last piece under 1 s */
  float *buf;
  size_t have;    /* samples in buf */
  size_t used;    /* of them, the piece handed out last (dropped on the next call) */
  size_t offset;  /* position of buf[0] in the stream, samples */
  double *scratch; /* per-frame energies */
  bool eof;
} splitter;

/* seconds: the longest piece (≥ 2 s). */
int split_init(splitter *s, double seconds, split_read_fn read, void *user);
void split_free(splitter *s);

/* The next piece: *pcm (valid until the next call), *n samples starting at
 * sample *offset of the stream, and whether the energy gate finds it quiet.
 * *n == 0 at the end. As wavo's splitter: pieces are contiguous, all but the
 * last at least piece/2 long, the last at least 1 s (unless the whole stream
 * is shorter), and every cut falls on a 10 ms frame boundary. */
int split_next(splitter *s, const float **pcm, size_t *n, size_t *offset, bool *quiet);

/* Where to cut pcm between samples lo and hi (lo < hi): in 10 ms frames of
 * energy Σx², find 300 ms windows inside [lo, hi], take the latest whose
 * energy is at most twice the quietest window's, and cut at the start of its
 * quietest frame. Only relative energy counts, so level and steady noise do
 * not matter; with no pause at all it still finds the quietest 10 ms.
 * scratch holds (hi − lo) / SPLIT_FRAME + 1 doubles. */
size_t split_cut(const float *pcm, size_t lo, size_t hi, double *scratch);

/* The energy gate: true when pcm holds nothing to transcribe. On a 200 Hz
 * high-passed signal (rumble and hum are not speech), the loudest 300 ms
 * window is compared with the noise floor (the 10th percentile of 10 ms frame
 * energies): quiet when that window is under −60 dBFS, or less than 4 dB above
 * the floor. Measured on 10 s clips: white, pink and brown noise and tones
 * reach 0–3.4 dB; espeak speech over white noise 22 / 12 / 8 / 4.5 dB at an
 * SNR of 20 / 10 / 5 / 0 dB; 1 s of speech in 60 s of noise (SNR 5 dB)
 * 6.5 dB. scratch holds n / SPLIT_FRAME + 1 doubles. */
bool split_quiet(const float *pcm, size_t n, double *scratch);

#endif
