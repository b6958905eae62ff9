#include "gpu/moe.h"

#include "base/error.h"
#include "gpu/norm.h"

static void bad(gpu_rec *rec, const char *op, uint32_t rows) {
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "%s: bad shape, settings or slice (%u rows)", op,
                            rows));
}

static bool fits_words(const gpu_buffer *b, uint64_t n) {
  return b && n > 0 && n <= UINT32_MAX && gpu_buffer_size(b) / 4 >= n;
}

void gpu_moe_route(gpu_rec *rec, const gpu_router *r, gpu_buffer *logits, uint32_t l_off,
                   uint32_t l_stride, gpu_buffer *bias, gpu_buffer *idx, gpu_buffer *wts,
                   uint32_t rows) {
  if (rows == 0) return;
  uint32_t E = r->experts;
  bool ok = rows <= 65535 && E >= 2 && E <= 1024 && r->n_group >= 1 && r->n_group <= 64 &&
            E % r->n_group == 0 && E / r->n_group >= 2 && r->topk_group >= 1 && r->topk_group <= r->n_group &&
            r->k >= 1 && r->k <= 32 && r->k <= E / r->n_group * r->topk_group &&
            gpu_slice_fits(logits, l_off, l_stride, rows, E) && fits_words(bias, E) &&
            fits_words(idx, (uint64_t)rows * r->k) && fits_words(wts, (uint64_t)rows * r->k) &&
            idx != wts && idx != logits && wts != logits;
  if (!ok) return bad(rec, "moe_route", rows);
  struct {
    uint32_t t, E, K, n_group, topk_group, norm;
    float scale;
    uint32_t l_off, l_stride;
  } p = {rows, E, r->k, r->n_group, r->topk_group, r->norm, r->scale, l_off, l_stride};
  gpu_buffer *bufs[] = {logits, bias, idx, wts};
  gpu_kernel *k = gpu_rec_kernel(rec, "moe_route", NULL, 0);
  gpu_dispatch(rec, k, bufs, 4, &p, sizeof p, rows, 1, 1); /* a workgroup per row */
}

typedef struct {
  uint32_t t, K, rows, k, wk, a_off, a_stride, c_off, c_stride;
} experts_push;

static void experts(gpu_rec *rec, const gpu_linear *l, uint32_t stage, gpu_buffer *const bufs[4],
                    const experts_push *p, uint32_t z) {
  uint32_t spec[2] = {l->type, stage};
  gpu_buffer *all[] = {bufs[0], bufs[1], bufs[2], bufs[3], l->w, l->scales ? l->scales : l->w};
  gpu_kernel *k = gpu_rec_kernel(rec, "moe_experts", spec, 2);
  uint32_t gx = (p->rows + 7) / 8;
  gpu_dispatch(rec, k, all, 6, p, sizeof *p, gx < 65535 ? gx : 65535, z, 1);
}

/* Whether l stacks experts of `per` rows and its experts' idx entries fit. */
static bool stacked(const gpu_linear *l, uint32_t per, uint32_t k, uint32_t rows) {
  return l && l->w && per > 0 && l->rows % per == 0 && k >= 1 && k <= 32 &&
         (uint64_t)rows * k <= 65535;
}

void gpu_moe_up(gpu_rec *rec, const gpu_linear *up, uint32_t per, uint32_t k, gpu_buffer *x,
                uint32_t x_off, uint32_t x_stride, gpu_buffer *idx, gpu_buffer *h, uint32_t rows) {
  if (rows == 0) return;
  bool ok = stacked(up, per, k, rows) && gpu_slice_fits(x, x_off, x_stride, rows, up->k) &&
            fits_words(idx, (uint64_t)rows * k) && fits_words(h, (uint64_t)rows * k * per) &&
            h != x && h != idx;
  if (!ok) return bad(rec, "moe_up", rows);
  experts_push p = {rows, k, per, up->k, up->wk, x_off, x_stride, 0, 0};
  gpu_buffer *bufs[] = {x, idx, idx, h};
  experts(rec, up, 0, bufs, &p, rows * k);
}

void gpu_moe_down(gpu_rec *rec, const gpu_linear *down, uint32_t per, uint32_t k, gpu_buffer *h,
                  gpu_buffer *idx, gpu_buffer *wts, gpu_buffer *c, uint32_t c_off,
                  uint32_t c_stride, uint32_t rows) {
  if (rows == 0) return;
  bool ok = stacked(down, per, k, rows) && fits_words(h, (uint64_t)rows * k * down->k) &&
            fits_words(idx, (uint64_t)rows * k) && fits_words(wts, (uint64_t)rows * k) &&
            gpu_slice_fits(c, c_off, c_stride, rows, per) && c != h && c != idx && c != wts;
  if (!ok) return bad(rec, "moe_down", rows);
  experts_push p = {rows, k, per, down->k, down->wk, 0, 0, c_off, c_stride};
  gpu_buffer *bufs[] = {h, idx, wts, c};
  experts(rec, down, 1, bufs, &p, rows);
}

void gpu_moe_lists(gpu_rec *rec, uint32_t experts, uint32_t k, gpu_buffer *idx, gpu_buffer *list,
                   gpu_buffer *count, uint32_t rows) {
  if (rows == 0) return;
  uint64_t pairs = (uint64_t)rows * k;
  bool ok = experts >= 1 && experts <= 65535 && k >= 1 && k <= 32 && pairs <= UINT32_MAX &&
            fits_words(idx, pairs) && fits_words(list, (uint64_t)experts * rows) &&
            fits_words(count, experts) && list != idx && count != idx && list != count;
  if (!ok) return bad(rec, "moe_lists", rows);
  uint32_t p[3] = {experts, (uint32_t)pairs, rows};
  gpu_buffer *bufs[] = {idx, list, count};
  gpu_kernel *kk = gpu_rec_kernel(rec, "moe_lists", NULL, 0);
  gpu_dispatch(rec, kk, bufs, 3, p, sizeof p, (experts + 63) / 64, 1, 1);
}

typedef struct {
  uint32_t K, rows, k, wk, cap, a_off, a_stride;
} grouped_push;

/* Whether moe_tc (the tensor cores, as gemm_tc) takes a grouped stage: where
 * gemm_tc passed its probe and the fast kernels are on, for F16 or BF16
 * weights and 128-bit aligned input rows. */
static bool tc_stage(gpu_rec *rec, const gpu_linear *l, const grouped_push *p) {
  gpu_device *d = gpu_rec_device(rec);
  return gpu_using_fast(d) && gpu_gemm_variant_ok(d, GPU_GEMM_TC64) &&
         (l->type == GPU_F16 || l->type == GPU_BF16) && p->k % 8 == 0 && p->a_off % 4 == 0 &&
         p->a_stride % 4 == 0;
}

/* moe_tc's tile: 64 pairs × 64 rows of an expert (2 × 2 subgroups of 2 × 2
 * matrices), as a prompt gives each expert tens of pairs. */
enum { TC_SG_M = 2, TC_SG_N = 2, TC_TM = 2, TC_TN = 2 };

/* One grouped stage over every expert of l (its rows / per of them). */
static void grouped(gpu_rec *rec, const gpu_linear *l, uint32_t stage, gpu_buffer *a,
                    gpu_buffer *list, gpu_buffer *count, gpu_buffer *out, const grouped_push *p) {
  uint32_t experts = l->rows / p->rows;
  gpu_buffer *bufs[] = {a, list, count, out, l->w, l->scales ? l->scales : l->w};
  if (tc_stage(rec, l, p)) {
    uint32_t spec[7] = {l->type, TC_SG_M, TC_SG_N, TC_TM, TC_TN, 32 * TC_SG_M * TC_SG_N, stage};
    uint32_t bm = TC_SG_M * TC_TM * 16, bn = TC_SG_N * TC_TN * 16;
    gpu_kernel *k = gpu_rec_kernel(rec, "moe_tc", spec, 7);
    gpu_dispatch(rec, k, bufs, 5, p, sizeof *p, (p->rows + bn - 1) / bn, (p->cap + bm - 1) / bm,
                 experts);
    return;
  }
  uint32_t spec[2] = {l->type, stage}, gx = (p->rows + 7) / 8;
  gpu_kernel *k = gpu_rec_kernel(rec, "moe_grouped", spec, 2);
  gpu_dispatch(rec, k, bufs, 6, p, sizeof *p, gx < 65535 ? gx : 65535, experts, 1);
}

/* The lists fit `rows` rows of the experts of l. */
static bool lists_ok(const gpu_linear *l, uint32_t per, gpu_buffer *list, gpu_buffer *count,
                     uint32_t rows) {
  uint32_t experts = l->rows / per;
  return experts <= 65535 && fits_words(list, (uint64_t)experts * rows) && fits_words(count, experts);
}

void gpu_moe_up_grouped(gpu_rec *rec, const gpu_linear *up, uint32_t per, uint32_t k,
                        gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *list,
                        gpu_buffer *count, gpu_buffer *h, uint32_t rows) {
  if (rows == 0) return;
  bool ok = stacked(up, per, k, rows) && lists_ok(up, per, list, count, rows) &&
            gpu_slice_fits(x, x_off, x_stride, rows, up->k) &&
            fits_words(h, (uint64_t)rows * k * per) && h != x && h != list && h != count;
  if (!ok) return bad(rec, "moe_up_grouped", rows);
  grouped_push p = {k, per, up->k, up->wk, rows, x_off, x_stride};
  grouped(rec, up, 0, x, list, count, h, &p);
}

void gpu_moe_down_grouped(gpu_rec *rec, const gpu_linear *down, uint32_t per, uint32_t k,
                          gpu_buffer *h, gpu_buffer *list, gpu_buffer *count, gpu_buffer *wts,
                          gpu_buffer *y, gpu_buffer *c, uint32_t c_off, uint32_t c_stride,
                          uint32_t rows) {
  if (rows == 0) return;
  bool ok = stacked(down, per, k, rows) && lists_ok(down, per, list, count, rows) &&
            fits_words(h, (uint64_t)rows * k * down->k) && fits_words(wts, (uint64_t)rows * k) &&
            fits_words(y, (uint64_t)rows * k * per) && gpu_slice_fits(c, c_off, c_stride, rows, per) &&
            y != h && y != list && y != count && c != y && c != h && c != wts;
  if (!ok) return bad(rec, "moe_down_grouped", rows);
  grouped_push p = {k, per, down->k, down->wk, rows, 0, 0};
  grouped(rec, down, 1, h, list, count, y, &p);
  struct {
    uint32_t t, K, n, c_off, c_stride;
  } cp = {rows, k, per, c_off, c_stride};
  gpu_buffer *bufs[] = {y, wts, c};
  gpu_kernel *kk = gpu_rec_kernel(rec, "moe_combine", NULL, 0);
  uint32_t gx = (per + 63) / 64;
  gpu_dispatch(rec, kk, bufs, 3, &cp, sizeof cp, gx < 1024 ? gx : 1024, gpu_row_groups(rows), 1);
}
