/* libFuzzer target for the WAV parser: any bytes either parse into samples
 * in range or fail with a message; nothing reads out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "audio/wav.h"
#include "base/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  wav_audio a;
  if (wav_parse(data, size, "fuzz.wav", &a) == 0) {
    for (size_t i = 0; i < a.n; i++) sink += a.pcm[i];
    free(a.pcm);
  } else if (!err_message()[0]) {
    abort(); /* a failure must say why */
  }
  return 0;
}
