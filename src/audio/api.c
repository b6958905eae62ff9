/* The public audio API. */
#include <stdlib.h>

#include "audio/wav.h"
#include "base/error.h"
#include "steno.h"

int steno_audio_load(const char *path, float **pcm, size_t *n) {
  if (!path || !pcm || !n) return err_set(STENO_ERR_INVALID, "steno_audio_load: NULL argument");
  *pcm = NULL;
  *n = 0;
  wav_audio a;
  TRY(wav_read(path, &a));
  if (a.rate != 16000) {
    free(a.pcm);
    return err_set(STENO_ERR_UNSUPPORTED,
                   "%s: %u Hz audio: steno reads 16000 Hz WAV for now (convert with: "
                   "ffmpeg -i IN -ar 16000 -ac 1 OUT.wav)",
                   path, a.rate);
  }
  *pcm = a.pcm;
  *n = a.n;
  return 0;
}

void steno_audio_free(float *pcm) { free(pcm); }
