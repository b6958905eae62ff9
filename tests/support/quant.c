#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "gguf_write.h"

const char *const quant_names[4] = {"F32", "F16", "BF16", "Q8_0"};

uint8_t *quant_encode(gpu_wtype t, const float *x, size_t n) {
  uint8_t *out = malloc(gpu_wtype_bytes(t, n) + 1);
  if (!out) abort();
  for (size_t i = 0; t != GPU_Q8_0 && i < n; i++) {
    if (t == GPU_F32) memcpy(out + 4 * i, &x[i], 4);
    uint16_t h = t == GPU_F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
    if (t != GPU_F32) memcpy(out + 2 * i, &h, 2);
  }
  if (t == GPU_Q8_0) gw_quantize_q8_0(x, out, n);
  return out;
}

void quant_decode(gpu_wtype t, const uint8_t *bytes, size_t n, float *out) {
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    switch (t) {
      case GPU_F32: memcpy(&out[i], bytes + 4 * i, 4); break;
      case GPU_F16:
        memcpy(&h, bytes + 2 * i, 2);
        out[i] = f16_to_f32(h);
        break;
      case GPU_BF16:
        memcpy(&h, bytes + 2 * i, 2);
        out[i] = bf16_to_f32(h);
        break;
      case GPU_Q8_0:
        memcpy(&h, bytes + 34 * (i / 32), 2);
        out[i] = f16_to_f32(h) * (float)(int8_t)bytes[34 * (i / 32) + 2 + i % 32];
        break;
    }
  }
}
