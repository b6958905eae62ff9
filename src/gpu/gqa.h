/* Grouped-query attention on the GPU over an f32 or f16 K/V cache (Nemotron-H's
 * attention layers: no positional rotation), and the row copy that appends
 * keys and values to the cache. Offsets and strides count floats. */
#ifndef STENO_GPU_GQA_H
#define STENO_GPU_GQA_H

#include "gpu/gpu.h"

/* y[y_off + r·y_stride + i] = x[x_off + r·x_stride + i], i < cols, r < rows (x ≠ y). */
void gpu_copy_rows(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *y,
                   uint32_t y_off, uint32_t y_stride, uint32_t rows, uint32_t cols);

/* One attention call: nq query rows at positions pos.. attend causally to the
 * cached keys 0..pos+i (the cache already holds rows up to pos + nq − 1). */
typedef struct {
  gpu_buffer *q;     /* row i at q_off + i·q_stride: heads·hd */
  uint32_t q_off, q_stride;
  gpu_buffer *kv;    /* key row j at k_off + j·kv_stride, value row j at v_off + j·kv_stride */
  uint32_t k_off, v_off, kv_stride;
  gpu_buffer *o;     /* row i at o_off + i·o_stride: heads·hd (≠ q, kv) */
  uint32_t o_off, o_stride;
  uint32_t nq, pos, heads, kv_heads, hd; /* hd ≤ 256, heads a multiple of kv_heads */
  float scale;       /* 0: 1/√hd */
  bool f16;          /* the cache holds f16 pairs (gpu_pack's); kv offsets and stride
                        count f16 values and are even */
} gpu_gqa;

void gpu_gqa_attend(gpu_rec *rec, const gpu_gqa *a);

#endif
