/* libFuzzer target for audio decoding (FFmpeg behind our byte source, the
 * resampler set-up, the read loop): any bytes either decode or fail with a
 * message; nothing crashes, leaks or reads out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "audio/decode.h"
#include "base/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  steno_audio *a = NULL;
  int st = audio_open_memory(data, size, "fuzz", &a);
  float buf[4096];
  /* A bounded read: a tiny file may claim hours of audio. */
  for (int i = 0; !st && i < 64; i++) {
    size_t got;
    if ((st = steno_audio_read(a, buf, 4096, &got)) || !got) break;
    for (size_t k = 0; k < got; k++) sink += buf[k];
  }
  if (st && !err_message()[0]) abort(); /* a failure must say why */
  steno_audio_close(a);
  return 0;
}
