#include "gpu/ssm.h"

#include "base/error.h"
#include "gpu/norm.h"

static void bad(gpu_rec *rec, const char *op, uint32_t rows, uint32_t n) {
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "%s: bad shape or slice (%u rows of %u)", op, rows,
                            n));
}

void gpu_rms_norm(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *z,
                  uint32_t z_off, uint32_t z_stride, gpu_buffer *w, float eps, uint32_t group,
                  gpu_buffer *y, uint32_t y_off, uint32_t y_stride, uint32_t rows, uint32_t n) {
  if (rows == 0) return;
  bool in_place = x == y && x_off == y_off && x_stride == y_stride;
  bool ok = group > 0 && n % group == 0 && n / group <= 65535 && eps >= 0 &&
            gpu_slice_fits(x, x_off, x_stride, rows, n) &&
            gpu_slice_fits(y, y_off, y_stride, rows, n) && gpu_slice_fits(w, 0, n, 1, n) &&
            (!z || gpu_slice_fits(z, z_off, z_stride, rows, n)) && z != y &&
            (in_place || x != y ||
             gpu_slices_apart(x_off, x_stride, n, y_off, y_stride, n, rows));
  if (!ok) return bad(rec, "rms_norm", rows, n);
  struct {
    uint32_t rows, n, group, gated;
    float eps;
    uint32_t x_off, x_stride, z_off, z_stride, y_off, y_stride;
  } p = {rows, n, group, z != NULL, eps, x_off, x_stride, z_off, z_stride, y_off, y_stride};
  uint32_t wg = group > 512 ? 256 : group > 128 ? 128 : 64;
  gpu_buffer *bufs[] = {x, z ? z : x, w, y};
  gpu_kernel *k = gpu_rec_kernel(rec, "rms_norm", &wg, 1);
  gpu_dispatch(rec, k, bufs, 4, &p, sizeof p, gpu_row_groups(rows), n / group, 1);
}

void gpu_ssm_conv(gpu_rec *rec, const gpu_conv_state *c, bool fresh, gpu_buffer *x,
                  uint32_t x_off, uint32_t x_stride, gpu_buffer *y, uint32_t y_off,
                  uint32_t y_stride, uint32_t rows) {
  if (rows == 0) return;
  uint32_t ch = c->ch;
  bool ok = ch > 0 && c->k >= 2 && c->k <= 8 && x != y && c->state != x && c->state != y &&
            gpu_slice_fits(x, x_off, x_stride, rows, ch) &&
            gpu_slice_fits(y, y_off, y_stride, rows, ch) &&
            gpu_slice_fits(c->w, 0, ch * c->k, 1, ch * c->k) && gpu_slice_fits(c->b, 0, ch, 1, ch) &&
            gpu_slice_fits(c->state, 0, ch, c->k - 1, ch);
  if (!ok) return bad(rec, "ssm_conv", rows, ch);
  struct {
    uint32_t t, ch, k, fresh, x_off, x_stride, y_off, y_stride;
  } p = {rows, ch, c->k, fresh, x_off, x_stride, y_off, y_stride};
  gpu_buffer *bufs[] = {x, c->w, c->b, c->state, y};
  gpu_kernel *k = gpu_rec_kernel(rec, "ssm_conv", NULL, 0);
  gpu_dispatch(rec, k, bufs, 5, &p, sizeof p, (ch + 63) / 64, 1, 1);
}

void gpu_ssm_scan(gpu_rec *rec, const gpu_scan_state *s, bool fresh, float dt_min, gpu_buffer *u,
                  uint32_t u_off, uint32_t u_stride, uint32_t b_col, uint32_t c_col,
                  gpu_buffer *dt, uint32_t dt_off, uint32_t dt_stride, gpu_buffer *y,
                  uint32_t y_off, uint32_t y_stride, uint32_t rows) {
  if (rows == 0) return;
  uint64_t xd = (uint64_t)s->heads * s->P, gn = (uint64_t)s->groups * s->N;
  bool ok = s->heads > 0 && s->P > 0 && s->N > 0 && s->N <= 256 && s->groups > 0 &&
            s->heads % s->groups == 0 && s->heads <= 65535 && xd <= UINT32_MAX / 4 &&
            gn <= UINT32_MAX / 4 && b_col >= xd && c_col >= b_col + gn && dt_min >= 0 &&
            y != u && y != dt && s->state != u && s->state != y && s->state != dt &&
            gpu_slice_fits(u, u_off, u_stride, rows, (uint32_t)(c_col + gn)) &&
            gpu_slice_fits(dt, dt_off, dt_stride, rows, s->heads) &&
            gpu_slice_fits(y, y_off, y_stride, rows, (uint32_t)xd) &&
            gpu_slice_fits(s->par, 0, 3 * s->heads, 1, 3 * s->heads) &&
            gpu_slice_fits(s->state, 0, (uint32_t)(xd * s->N), 1, (uint32_t)(xd * s->N));
  if (!ok) return bad(rec, "ssm_scan", rows, (uint32_t)xd);
  struct {
    uint32_t t, heads, P, N, groups, fresh;
    uint32_t u_off, u_stride, b_col, c_col, dt_off, dt_stride, y_off, y_stride;
    float dt_min;
  } p = {rows,  s->heads, s->P,   s->N,      s->groups, fresh,    u_off, u_stride,
         b_col, c_col,    dt_off, dt_stride, y_off,     y_stride, dt_min};
  gpu_buffer *bufs[] = {u, dt, s->par, s->state, y};
  gpu_kernel *k = gpu_rec_kernel(rec, "ssm_scan", NULL, 0);
  gpu_dispatch(rec, k, bufs, 5, &p, sizeof p, s->heads, (s->P + 3) / 4, 1);
}
