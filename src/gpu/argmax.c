/* argmax.comp's passes: one workgroup per row, or chunks of a row and then
 * their merge. */
#include "gpu/argmax.h"

#include "base/error.h"
#include "gpu/internal.h"
#include "gpu/norm.h"

#define CHUNK 2048u       /* columns per workgroup of the split pass */
#define MAX_GROUPS 65535u /* workgroups along one dispatch dimension */

static uint32_t chunks_of(uint32_t cols) { return (cols + CHUNK - 1) / CHUNK; }

size_t gpu_argmax_scratch(uint32_t rows, uint32_t cols) {
  return 2 * (size_t)rows * chunks_of(cols);
}

int gpu_argmax_ids_new(gpu_device *dev, uint32_t n, gpu_buffer **out) {
  return gpu_buffer_host(dev, (n ? n : 1) * sizeof(uint32_t), out);
}

/* Whether buf holds `words` 32-bit words (else the failure is recorded). */
static bool holds(gpu_rec *rec, const char *what, const gpu_buffer *buf, uint64_t words) {
  if (buf && words <= UINT32_MAX && words * 4 <= gpu_buffer_size(buf)) return true;
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "argmax: %s needs %llu words, has %llu", what,
                            (unsigned long long)words,
                            (unsigned long long)(buf ? gpu_buffer_size(buf) / 4 : 0)));
  return false;
}

void gpu_argmax(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, uint32_t rows,
                uint32_t cols, gpu_buffer *ids, uint32_t ids_off, gpu_buffer *scratch) {
  if (!gpu_slice_fits(x, x_off, x_stride, rows, cols)) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "argmax: %u rows of %u at %u (stride %u) do not fit x", rows, cols,
                              x_off, x_stride));
    return;
  }
  uint32_t chunks = chunks_of(cols);
  if (chunks == 1 || chunks > MAX_GROUPS) scratch = NULL; /* nothing to split, or too much */
  if (!holds(rec, "ids", ids, (uint64_t)ids_off + rows) ||
      (scratch && !holds(rec, "scratch", scratch, gpu_argmax_scratch(rows, cols))))
    return;
  struct {
    uint32_t rows, cols, x_off, x_stride, ids_off, chunk, chunks, pass;
  } push = {rows, cols, x_off, x_stride, ids_off, CHUNK, chunks, scratch ? 1 : 0};
  gpu_buffer *bufs[] = {x, ids, scratch ? scratch : ids};
  gpu_kernel *k = gpu_rec_kernel(rec, "argmax", NULL, 0);
  uint32_t groups = rows < MAX_GROUPS ? rows : MAX_GROUPS; /* the kernel loops over the rest */
  gpu_dispatch(rec, k, bufs, 3, &push, sizeof push, groups, scratch ? chunks : 1, 1);
  if (!scratch) return;
  push.pass = 2;
  gpu_dispatch(rec, k, bufs, 3, &push, sizeof push, groups, 1, 1);
}
