#include "gpu/window.h"

#include <math.h>

#include "base/error.h"
#include "gpu/norm.h"

#define MAX_KEYS 1024 /* window_attention.comp's shared scores */

static bool slice_ok(const gpu_attn_slice *s, uint32_t t, uint32_t cols) {
  return gpu_slice_fits(s->buf, s->offset, s->stride, t, cols);
}

void gpu_window_attention(gpu_rec *rec, const gpu_attn *a, uint32_t left, uint32_t right) {
  uint32_t w = a->heads * a->head_dim;
  bool ok = a->t && a->heads && a->head_dim && (uint64_t)a->heads * a->head_dim <= UINT32_MAX &&
            left >= 1 && (uint64_t)left + right <= MAX_KEYS + 1 && slice_ok(&a->q, a->t, w) &&
            slice_ok(&a->k, a->t, w) && slice_ok(&a->v, a->t, w) && slice_ok(&a->o, a->t, w) &&
            a->o.buf != a->q.buf && a->o.buf != a->k.buf && a->o.buf != a->v.buf;
  if (!ok) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "window_attention: bad shape or slices (%u rows, %u heads of %u, "
                              "window %u/%u)",
                              a->t, a->heads, a->head_dim, left, right));
    return;
  }
  float scale = a->scale != 0 ? a->scale : 1.0f / sqrtf((float)a->head_dim);
  struct {
    uint32_t t, heads, head_dim, left, right;
    float scale;
    uint32_t q_off, q_stride, k_off, k_stride, v_off, v_stride, o_off, o_stride;
  } push = {a->t,        a->heads,    a->head_dim, left,         right,
            scale,       a->q.offset, a->q.stride, a->k.offset,  a->k.stride,
            a->v.offset, a->v.stride, a->o.offset, a->o.stride};
  gpu_kernel *k = gpu_rec_kernel(rec, "window_attention", NULL, 0);
  gpu_buffer *bufs[] = {a->q.buf, a->k.buf, a->v.buf, a->o.buf};
  gpu_dispatch(rec, k, bufs, 4, &push, sizeof push, gpu_row_groups(a->t), a->heads, 1);
}
