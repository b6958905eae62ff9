/* Test weights in each GGUF type, and their exact values back as f32. */
#ifndef STENO_TEST_QUANT_H
#define STENO_TEST_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/linear.h"

/* `n` floats as type t's bytes (malloc'd): F32 as is, F16/BF16 rounded to
 * nearest even, Q8_0 as ggml quantizes it (gw_quantize_q8_0). */
uint8_t *quant_encode(gpu_wtype t, const float *x, size_t n);

/* The values those bytes hold, as f32 (what a kernel must compute with). */
void quant_decode(gpu_wtype t, const uint8_t *bytes, size_t n, float *out);

extern const char *const quant_names[4];

#endif
