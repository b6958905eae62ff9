/* libFuzzer target for whisper.cpp's legacy .bin files (models/whisper/bin.c):
 * any bytes are either rewritten as a GGUF image or refused with a message; an
 * image the adapter writes must be one the GGUF reader takes. */
#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"
#include "io/gguf.h"
#include "models/whisper/whisper.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *image;
  size_t n;
  if (whisper_bin_image_memory(data, size, "fuzz.bin", &image, &n)) {
    if (!err_message()[0]) abort(); /* a failure must say why */
    return 0;
  }
  gguf_file *f;
  if (gguf_open_memory(&f, image, n, "fuzz.bin")) abort(); /* the adapter wrote a broken GGUF */
  gguf_close(f);
  free(image);
  return 0;
}
