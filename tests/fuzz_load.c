/* libFuzzer target for the model loaders, as steno_model_load runs them but
 * from bytes: a whisper.cpp .bin is rewritten first, then the GGUF reader, the
 * family from general.architecture, and the family's load (hyperparameters,
 * vocabulary, every tensor's name, type and shape, the upload) on the test
 * device (lavapipe in CI), opened once. Any bytes load or fail with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/family.h"
#include "models/whisper/whisper.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int load(const uint8_t *data, size_t size) {
  gguf_file *f;
  const char *arch;
  const family *fam;
  void *impl;
  TRY(gguf_open_memory(&f, data, size, "fuzz.gguf"));
  int st = gguf_get_str(f, "general.architecture", &arch);
  if (!st && !(fam = family_find(arch))) st = err_set(STENO_ERR_UNSUPPORTED, "architecture %s", arch);
  if (!st) st = fam->load(test_device(), f, &impl);
  if (!st) fam->free(impl);
  gguf_close(f);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *image = NULL;
  int st = 0;
  if (size >= 4 && !memcmp(data, "lmgg", 4)) { /* whisper.cpp's magic, little-endian */
    st = whisper_bin_image_memory(data, size, "fuzz.bin", &image, &size);
    data = image;
  }
  if (!st) st = load(data, size);
  free(image);
  if (st && !err_message()[0]) abort(); /* a failure must say why */
  return 0;
}
