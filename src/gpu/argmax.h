/* The argmax of rows on the GPU (argmax.comp), for greedy decoders that need
 * only the chosen id, not the logits, back on the host. */
#ifndef STENO_GPU_ARGMAX_H
#define STENO_GPU_ARGMAX_H

#include "gpu/gpu.h"

/* ids[ids_off + r] (uint32) = the argmax of x[x_off + r·x_stride ..+cols) for r < rows, as
 * `best = 0; for i: if (x[i] > x[best]) best = i` gives it: the lowest index among equal
 * largest values, a NaN never chosen, 0 where x[0] is NaN. With `scratch` (of
 * gpu_argmax_scratch words) a long row is split over more workgroups and merged in a second
 * dispatch; NULL: one workgroup per row. */
void gpu_argmax(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, uint32_t rows,
                uint32_t cols, gpu_buffer *ids, uint32_t ids_off, gpu_buffer *scratch);

/* 32-bit words of scratch gpu_argmax splits rows × cols with. */
size_t gpu_argmax_scratch(uint32_t rows, uint32_t cols);

/* A buffer for n ids in host-visible memory: the kernel writes it in the
 * recorded submission and gpu_download reads it with a memcpy, no copy
 * submission of its own (the recorder's last barrier makes shader writes
 * visible to the host). */
int gpu_argmax_ids_new(gpu_device *dev, uint32_t n, gpu_buffer **out);

#endif
