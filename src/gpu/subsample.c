#include "gpu/subsample.h"

#include "base/error.h"

/* Workgroup width of depthwise.comp and flatten.comp. */
#define DW_GROUP 64
#define FLAT_GROUP 256
#define MAX_GROUPS 65535u

/* True where `buf` holds `floats` floats; else records the failure. */
static bool holds(gpu_rec *rec, const char *op, const char *name, gpu_buffer *buf,
                  uint64_t floats) {
  if (buf && floats <= UINT32_MAX && gpu_buffer_size(buf) / 4 >= floats) return true;
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "%s: %s holds %zu floats, needs %llu", op, name,
                            buf ? gpu_buffer_size(buf) / 4 : 0, (unsigned long long)floats));
  return false;
}

/* Shared checks of the image shape and the chunk; false after recording a failure. */
static bool shape_ok(gpu_rec *rec, const char *op, uint32_t t, uint32_t f, uint32_t ch,
                     uint32_t t0, uint32_t rows, uint32_t fo) {
  if (t && f && ch && t0 < (1u << 28) && rows < (1u << 28) &&
      ((uint64_t)fo * ch + DW_GROUP - 1) / DW_GROUP <= MAX_GROUPS)
    return true;
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "%s: image %u×%u×%u, rows %u..+%u", op, t, f, ch,
                            t0, rows));
  return false;
}

/* A batch's shape: clips that fit a dispatch, their lengths, non-causal
 * convs from row 0; true for none. */
static bool batch_ok(gpu_rec *rec, const char *op, const gpu_subsample_batch *bt, bool causal,
                     uint32_t t0) {
  if (!bt) return true;
  if (bt->batch && bt->batch <= MAX_GROUPS && bt->lens && !causal && t0 == 0 &&
      gpu_buffer_size(bt->lens) / 4 >= bt->batch && (bt->batch == 1 || (bt->x_clip && bt->y_clip)))
    return true;
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "%s: a batch of %u clips (%u, %u floats apart)%s",
                            op, bt->batch, bt->x_clip, bt->y_clip,
                            causal || t0 ? " needs non-causal convs from row 0" : ""));
  return false;
}

static uint32_t groups(uint64_t n, uint32_t size) { return (uint32_t)((n + size - 1) / size); }

/* depthwise.comp's VEC shape (4 channels an invocation, vec4 reads) on a CPU
 * device, where every buffer read costs a loop over the lanes; its layouts
 * must be whole vec4s. gpu_subsample_vec turns it off for tests. */
static bool vec_allowed = true;
void gpu_subsample_vec(bool on) { vec_allowed = on; }

static bool use_vec(gpu_rec *rec, uint32_t ch, uint32_t x_stride, const gpu_subsample_batch *bt) {
  return vec_allowed && gpu_device_is_cpu(gpu_rec_device(rec)) && ch % 4 == 0 && x_stride % 4 == 0 &&
         (!bt || (bt->x_clip % 4 == 0 && bt->y_clip % 4 == 0));
}

/* The plain depthwise conv; causal: NeMo's CausalConv2D padding (2 before, 1 after);
 * bt: several clips (non-causal, t0 = 0), or NULL. */
static void depthwise(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *w, gpu_buffer *b,
                      gpu_buffer *y, uint32_t t, uint32_t f, uint32_t ch, uint32_t t0, uint32_t rows,
                      bool causal, const gpu_subsample_batch *bt) {
  const char *op = "depthwise";
  uint32_t pad = causal ? 2 : 1, fo = causal ? gpu_halve_causal(f) : gpu_halve(f);
  uint32_t to = causal ? gpu_halve_causal(t) : gpu_halve(t);
  if (!shape_ok(rec, op, t, f, ch, t0, rows, fo) || !batch_ok(rec, op, bt, causal, t0)) return;
  if (x_stride < ch || t0 + rows > to) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "depthwise: rows %u..+%u of %u, stride %u < %u",
                              t0, rows, to, x_stride, ch));
    return;
  }
  if (!rows) return;
  /* x's rows: image rows 2·t0 − pad up to the last one read. */
  uint64_t last = 2 * (uint64_t)(t0 + rows) - pad;
  if (last > t - 1) last = t - 1;
  uint64_t xrows = last + 1 + pad - 2 * (uint64_t)t0;
  uint32_t n = bt ? bt->batch : 1, xc = bt ? bt->x_clip : 0, yc = bt ? bt->y_clip : 0;
  if (!holds(rec, op, "x", x, (n - 1) * (uint64_t)xc + (xrows * f - 1) * x_stride + ch) ||
      !holds(rec, op, "w", w, 9 * (uint64_t)ch) || !holds(rec, op, "b", b, ch) ||
      !holds(rec, op, "y", y, (n - 1) * (uint64_t)yc + (uint64_t)(t0 + rows) * fo * ch))
    return;
  bool vec = use_vec(rec, ch, x_stride, bt);
  uint32_t spec[4] = {0, causal, bt != NULL, vec};
  gpu_kernel *k = gpu_rec_kernel(rec, "depthwise", spec, 4);
  uint32_t push[8] = {t, f, ch, x_stride, t0, rows, xc, yc};
  gpu_buffer *bufs[] = {x, w, b, y, w, b, bt ? bt->lens : w};
  gpu_dispatch(rec, k, bufs, 7, push, sizeof push, groups((uint64_t)fo * ch / (vec ? 4 : 1), DW_GROUP),
               rows < MAX_GROUPS ? rows : MAX_GROUPS, n);
}

void gpu_depthwise(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *w, gpu_buffer *b,
                   gpu_buffer *y, uint32_t t, uint32_t f, uint32_t ch, uint32_t t0, uint32_t rows) {
  depthwise(rec, x, x_stride, w, b, y, t, f, ch, t0, rows, false, NULL);
}

void gpu_depthwise_causal(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *w,
                          gpu_buffer *b, gpu_buffer *y, uint32_t t, uint32_t f, uint32_t ch,
                          uint32_t t0, uint32_t rows) {
  depthwise(rec, x, x_stride, w, b, y, t, f, ch, t0, rows, true, NULL);
}

void gpu_depthwise_batch(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *w,
                         gpu_buffer *b, gpu_buffer *y, uint32_t t, uint32_t f, uint32_t ch,
                         uint32_t rows, const gpu_subsample_batch *bt) {
  depthwise(rec, x, x_stride, w, b, y, t, f, ch, 0, rows, false, bt);
}

static void first_depthwise(gpu_rec *rec, gpu_buffer *mel, gpu_buffer *w0, gpu_buffer *b0,
                            gpu_buffer *w, gpu_buffer *b, gpu_buffer *y, uint32_t t, uint32_t f,
                            uint32_t ch, uint32_t t0, uint32_t rows, bool causal,
                            const gpu_subsample_batch *bt) {
  const char *op = "first_depthwise";
  uint32_t fo = causal ? gpu_halve_causal(gpu_halve_causal(f)) : gpu_halve(gpu_halve(f));
  if (!shape_ok(rec, op, t, f, ch, t0, rows, fo) || !batch_ok(rec, op, bt, causal, t0) || !rows)
    return;
  uint32_t n = bt ? bt->batch : 1, xc = bt ? bt->x_clip : 0, yc = bt ? bt->y_clip : 0;
  if (!holds(rec, op, "mel", mel, (n - 1) * (uint64_t)xc + (uint64_t)t * f) ||
      !holds(rec, op, "w0", w0, 9 * (uint64_t)ch) || !holds(rec, op, "b0", b0, ch) ||
      !holds(rec, op, "w", w, 9 * (uint64_t)ch) || !holds(rec, op, "b", b, ch) ||
      !holds(rec, op, "y", y, (n - 1) * (uint64_t)yc + (uint64_t)rows * fo * ch))
    return;
  bool vec = use_vec(rec, ch, ch, bt);
  uint32_t spec[4] = {1, causal, bt != NULL, vec};
  gpu_kernel *k = gpu_rec_kernel(rec, "depthwise", spec, 4);
  uint32_t push[8] = {t, f, ch, ch, t0, rows, xc, yc};
  gpu_buffer *bufs[] = {mel, w, b, y, w0, b0, bt ? bt->lens : w};
  gpu_dispatch(rec, k, bufs, 7, push, sizeof push, groups((uint64_t)fo * ch / (vec ? 4 : 1), DW_GROUP),
               rows < MAX_GROUPS ? rows : MAX_GROUPS, n);
}

void gpu_first_depthwise(gpu_rec *rec, gpu_buffer *mel, gpu_buffer *w0, gpu_buffer *b0,
                         gpu_buffer *w, gpu_buffer *b, gpu_buffer *y, uint32_t t, uint32_t f,
                         uint32_t ch, uint32_t t0, uint32_t rows) {
  first_depthwise(rec, mel, w0, b0, w, b, y, t, f, ch, t0, rows, false, NULL);
}

void gpu_first_depthwise_causal(gpu_rec *rec, gpu_buffer *mel, gpu_buffer *w0, gpu_buffer *b0,
                                gpu_buffer *w, gpu_buffer *b, gpu_buffer *y, uint32_t t,
                                uint32_t f, uint32_t ch, uint32_t t0, uint32_t rows) {
  first_depthwise(rec, mel, w0, b0, w, b, y, t, f, ch, t0, rows, true, NULL);
}

void gpu_first_depthwise_batch(gpu_rec *rec, gpu_buffer *mel, gpu_buffer *w0, gpu_buffer *b0,
                               gpu_buffer *w, gpu_buffer *b, gpu_buffer *y, uint32_t t,
                               uint32_t f, uint32_t ch, uint32_t rows,
                               const gpu_subsample_batch *bt) {
  first_depthwise(rec, mel, w0, b0, w, b, y, t, f, ch, 0, rows, false, bt);
}

void gpu_flatten(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *y, uint32_t t,
                 uint32_t f, uint32_t ch) {
  const char *op = "flatten";
  uint64_t width = (uint64_t)ch * f;
  if (!f || !ch || x_stride < ch || groups(width, FLAT_GROUP) > MAX_GROUPS) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "flatten: image %u×%u×%u, stride %u", t, f, ch,
                              x_stride));
    return;
  }
  if (!t) return;
  if (!holds(rec, op, "x", x, ((uint64_t)t * f - 1) * x_stride + ch) ||
      !holds(rec, op, "y", y, t * width))
    return;
  gpu_kernel *k = gpu_rec_kernel(rec, "flatten", NULL, 0);
  uint32_t push[4] = {t, f, ch, x_stride};
  gpu_buffer *bufs[] = {x, y};
  gpu_dispatch(rec, k, bufs, 2, push, sizeof push, groups(width, FLAT_GROUP),
               t < MAX_GROUPS ? t : MAX_GROUPS, 1);
}
