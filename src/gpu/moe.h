/* Mixture-of-experts on the GPU (Nemotron-H's MoE layers): the router's
 * choice from its logits, and the chosen experts' GEMVs, which read only the
 * chosen experts' weights. Experts live stacked in one gpu_linear: expert e's
 * row i is row e·rows + i (rows per expert). */
#ifndef STENO_GPU_MOE_H
#define STENO_GPU_MOE_H

#include "gpu/linear.h"

/* The router's settings (NemotronHTopkRouter). */
typedef struct {
  uint32_t experts, k;          /* E; experts per token */
  uint32_t n_group, topk_group; /* groups of E / n_group experts; groups kept */
  bool norm;                    /* weights divided by their sum (+1e-20) */
  float scale;                  /* routed_scaling_factor */
} gpu_router;

/* idx [rows][k] (uint) and wts [rows][k] from the router logits (rows at
 * l_off + r·l_stride) and the correction bias [experts]: moe_route.comp. */
void gpu_moe_route(gpu_rec *rec, const gpu_router *r, gpu_buffer *logits, uint32_t l_off,
                   uint32_t l_stride, gpu_buffer *bias, gpu_buffer *idx, gpu_buffer *wts,
                   uint32_t rows);

/* h [rows·k][per] = relu(W_e · x_r)² for each row r and its chosen experts e
 * (x rows at x_off + r·x_stride; per = rows of each expert in `up`). */
void gpu_moe_up(gpu_rec *rec, const gpu_linear *up, uint32_t per, uint32_t k, gpu_buffer *x,
                uint32_t x_off, uint32_t x_stride, gpu_buffer *idx, gpu_buffer *h, uint32_t rows);

/* c row r += Σ_j wts[r][j] · W_{e_rj} · h[r·k + j] (c rows at c_off + r·c_stride;
 * per = rows of each expert in `down`). */
void gpu_moe_down(gpu_rec *rec, const gpu_linear *down, uint32_t per, uint32_t k, gpu_buffer *h,
                  gpu_buffer *idx, gpu_buffer *wts, gpu_buffer *c, uint32_t c_off,
                  uint32_t c_stride, uint32_t rows);

/* The same for many rows, grouped by expert (moe_grouped.comp): each expert's
 * weights are read once per batch of the pairs that chose it instead of once
 * per pair. gpu_moe_lists first writes, for each of `experts`, the pairs
 * (r·k + j) that chose it: list [experts][rows] uint and count [experts] uint. */
void gpu_moe_lists(gpu_rec *rec, uint32_t experts, uint32_t k, gpu_buffer *idx, gpu_buffer *list,
                   gpu_buffer *count, uint32_t rows);

/* h [rows·k][per] as gpu_moe_up, from the lists. */
void gpu_moe_up_grouped(gpu_rec *rec, const gpu_linear *up, uint32_t per, uint32_t k,
                        gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *list,
                        gpu_buffer *count, gpu_buffer *h, uint32_t rows);

/* c rows += Σ_j wts[r][j] · W_{e_rj} · h[r·k + j] as gpu_moe_down, from the lists,
 * through y [rows·k][per] (each pair's output, then summed in slot order). */
void gpu_moe_down_grouped(gpu_rec *rec, const gpu_linear *down, uint32_t per, uint32_t k,
                          gpu_buffer *h, gpu_buffer *list, gpu_buffer *count, gpu_buffer *wts,
                          gpu_buffer *y, gpu_buffer *c, uint32_t c_off, uint32_t c_stride,
                          uint32_t rows);

#endif
