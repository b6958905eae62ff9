#include "gpu_test.h"

#include <math.h>
#include <stdlib.h>

#include "io/gguf.h"
#include "steno.h"

gpu_device *test_device(void) {
  static gpu_device *dev;
  if (!dev) {
    if (gpu_open(test_params(), &dev)) {
      fprintf(stderr, "no GPU device: %s\n", steno_last_error());
      exit(1);
    }
    const gpu_info *i = gpu_device_info(dev);
    printf("device: %s (%s)\n", i->name, i->driver);
  }
  return dev;
}

gpu_device *test_staged_device(void) {
  setenv("STENO_NO_MAP", "1", 1);
  gpu_device *dev = NULL;
  CHECK_OK(gpu_open(test_params(), &dev));
  unsetenv("STENO_NO_MAP");
  if (dev) CHECK(!gpu_device_info(dev)->unified, "STENO_NO_MAP ignored");
  return dev;
}

gpu_rec *test_rec(void) {
  gpu_rec *r;
  if (gpu_rec_new(test_device(), &r) || gpu_rec_begin(r)) {
    fprintf(stderr, "recorder: %s\n", steno_last_error());
    exit(1);
  }
  return r;
}

float *test_floats(size_t n) {
  float *x = calloc(n ? n : 1, sizeof *x);
  if (!x) exit(1);
  return x;
}

float *test_random(size_t n, uint32_t seed) {
  float *x = test_floats(n);
  check_random(x, n, seed);
  return x;
}

gpu_buffer *test_upload(const float *x, size_t n) {
  gpu_buffer *b;
  if (gpu_buffer_from(test_device(), x, n * sizeof *x, &b)) {
    fprintf(stderr, "upload: %s\n", steno_last_error());
    exit(1);
  }
  return b;
}

gpu_buffer *test_random_buffer(size_t n, uint32_t seed) {
  float *x = test_random(n, seed);
  gpu_buffer *b = test_upload(x, n);
  free(x);
  return b;
}

float *test_run_read(gpu_rec *rec, gpu_buffer *out, size_t n) {
  float *y = test_floats(n);
  CHECK_OK(gpu_rec_run(rec));
  CHECK_OK(gpu_download(out, 0, y, n * sizeof *y));
  return y;
}

float ref_silu(float x) { return x / (1.0f + expf(-x)); }
float ref_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

float ref_epilogue(gpu_epi e, float alpha, float v, float old) {
  switch (e) {
    case GPU_EPI_SILU: return ref_silu(v);
    case GPU_EPI_RELU: return v > 0 ? v : 0;
    case GPU_EPI_RESIDUAL: return old + alpha * v;
    case GPU_EPI_GELU: return ref_gelu(v);
    case GPU_EPI_GELU_RESIDUAL: return old + ref_gelu(v);
    case GPU_EPI_SCALE: return alpha * v;
    case GPU_EPI_RELU2: return v > 0 ? v * v : 0;
    default: return v;
  }
}

void fixture_open(const char *name, gguf_file **model, gguf_file **ref) {
  char file[256], path[512];
  *model = *ref = NULL;
  snprintf(file, sizeof file, "%s.gguf", name);
  fixture_path(path, sizeof path, file);
  CHECK_OK(gguf_open(model, path));
  snprintf(file, sizeof file, "%s.ref.gguf", name);
  fixture_path(path, sizeof path, file);
  CHECK_OK(gguf_open(ref, path));
}
