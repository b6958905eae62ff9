/* Long audio in pieces: cuts at the quietest moments (energy only, no model),
 * and a gate that tells silence, noise, room tone and breath from speech
 * worth decoding. All on 16 kHz mono pcm. */
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
  const float *mem; /* split_init_memory's samples (read NULL, buf unused), mem_n of them */
  size_t mem_n;
  float *band;    /* the gate's speech-band copy of a piece */
  size_t have;    /* samples in buf */
  size_t used;    /* of them, the piece handed out last (dropped on the next call) */
  size_t offset;  /* position of buf[0] in the stream, samples */
  double *scratch; /* per-frame energies */
  bool eof;
} splitter;

/* seconds: the longest piece (≥ 2 s). */
int split_init(splitter *s, double seconds, split_read_fn read, void *user);

/* The same over n samples already in memory: its pieces point into pcm (which
 * must outlive them), nothing is copied, and buffers are sized to n where it
 * is shorter than a piece. Same pieces as split_init over a reader of pcm. */
int split_init_memory(splitter *s, double seconds, const float *pcm, size_t n);
void split_free(splitter *s);

/* The next piece: *pcm (valid until the next call), *n samples starting at
 * sample *offset of the stream, and whether the energy gate finds it quiet.
 * *n == 0 at the end (split_init_memory's pieces live as long as its pcm).
 * As wavo's splitter: pieces are contiguous, all but the
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

/* The gate: true when pcm holds nothing to transcribe, i.e. less than
 * 100 ms of voiced sound. On the speech band (150–1000 Hz, two Butterworth
 * biquads: rumble, hum and hiss are not speech), a 10 ms frame is voiced when
 * its energy is at least 10 dB over the noise floor (the 10th percentile of
 * frame energies, and −70 dBFS at least) and the 30 ms from it correlate at
 * 0.6 or more with themselves one pitch period (2–20 ms) later. Quiet too
 * when the loudest 300 ms window is under −60 dBFS.
 * Why voicing: every language's syllables have a voiced nucleus, while room
 * tone, breath, clicks and noise of any colour do not repeat; energy over the
 * floor alone cannot tell them apart (a breath is 10–20 dB over room tone,
 * as loud as speech at 10 dB SNR). Measured (frames voiced, need 10):
 * room tone and breath (shared/data/samples/jobs-silence.wav, a knock's
 * 70 ms ring included) 8; noise bursts over room tone 0; white, pink, brown
 * noise, hum and steady tones 0; espeak "yes" alone 16, over that room tone
 * 29, over white noise at 10 dB SNR 14 (at 0 dB SNR 5: gated); the speech
 * samples in shared/data/samples 180–870 in their first 15 s. Whispered
 * speech has no voicing and is gated.
 * Cost: the band filters (~0.8 ms per 11 s on one core of the 2-core dev
 * machine), then a 30 ms correlation at 289 lags for each loud frame until
 * the 10th voiced one, so speech costs little; 60 s of loud noise bursts
 * (every frame tested) takes 770 ms on one core (gcc -O2): a known cost, to
 * cut by decimating the band before it matters. Both run in 1 s chunks on the
 * pool lent to the calling thread (base/pool.h: a session's workers) where
 * there is one, in turn here otherwise; the answer is the same either way.
 * band holds n floats, scratch n / SPLIT_FRAME + 1 doubles. */
bool split_quiet(const float *pcm, size_t n, float *band, double *scratch);

/* The gate's voicing measure: the best normalized correlation of x[0, 480)
 * with itself 32..320 samples (2–20 ms) later; x must hold 801 samples.
 * Voiced speech reaches 0.9, noise and breath stay near 0.3. */
double split_periodicity(const float *x);

#endif
