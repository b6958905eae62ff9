/* Attention over a sliding window of keys (Moonshine Streaming's encoder
 * layers): query i sees keys s with 0 ≤ i − s < left (itself and left − 1
 * earlier) or 0 < s − i < right (right − 1 later), as transformers'
 * sliding_window_mask_function. No scores buffer: the window's scores live in
 * shared memory, so left + right − 1 ≤ 1024. */
#ifndef STENO_GPU_WINDOW_H
#define STENO_GPU_WINDOW_H

#include "gpu/attention.h"

/* o_i = Σ_s softmax_s(scale · q_i·k_s) · v_s over the window, per head, for
 * a->t rows of a->heads heads (a->mask, a->scores, a->qv, a->pos unused;
 * scale 0: 1/√head_dim). left ≥ 1. */
void gpu_window_attention(gpu_rec *rec, const gpu_attn *a, uint32_t left, uint32_t right);

#endif
