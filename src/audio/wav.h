/* WAV files: RIFF/WAVE with PCM 16/24/32-bit or IEEE float 32/64, any number
 * of channels (averaged to mono). Every chunk size is checked against the data. */
#ifndef STENO_AUDIO_WAV_H
#define STENO_AUDIO_WAV_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  float *pcm;      /* mono samples in [-1, 1] (malloc'd) */
  size_t n;
  uint32_t rate;   /* samples per second */
  uint16_t channels;
} wav_audio;

/* Parses a whole WAV file held in memory. `name` is for messages. */
int wav_parse(const uint8_t *data, size_t size, const char *name, wav_audio *out);

/* Reads and parses a file. */
int wav_read(const char *path, wav_audio *out);

#endif
