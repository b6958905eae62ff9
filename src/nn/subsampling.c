/* The subsampling stems: loading their weights and recording their kernels. */
#include "nn/subsampling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/conv.h"
#include "gpu/subsample.h"
#include "nn/weights.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* A 3×3 conv's weight, PyTorch [C][1][3][3], as [9][C]; and its bias. */
static int conv3x3(gpu_device *dev, const gguf_file *f, size_t C, const char *w, const char *b,
                   gpu_buffer **wb, gpu_buffer **bb) {
  float *pt = NULL, *t = mem_alloc(9 * C, sizeof *t);
  if (!t) return STENO_ERR_NOMEM;
  int st = w_host(f, w, W_CONV_TYPES, 9 * C, true, &pt);
  for (size_t c = 0; !st && c < C; c++)
    for (size_t k = 0; k < 9; k++) t[k * C + c] = pt[c * 9 + k];
  if (!st) st = gpu_buffer_from(dev, t, 9 * C * sizeof *t, wb);
  if (!st) st = w_gpu(dev, f, b, W_F32, C, bb);
  free(t);
  free(pt);
  return st;
}

/* A side after one conv of s's padding. */
static uint32_t side(const dw_subsampling *s, uint32_t n) {
  return s->causal ? gpu_halve_causal(n) : gpu_halve(n);
}

static int dw_load(gpu_device *dev, const gguf_file *f, dw_subsampling *s) {
  const char *p = "enc.pre_encode.";
  char w[96], b[96];
  int64_t C = s->channels, F8 = side(s, side(s, side(s, s->mels)));
  struct {
    int idx;
    gpu_buffer **w, **b;
  } convs[] = {{0, &s->w0, &s->b0}, {2, &s->w2, &s->b2}, {5, &s->w5, &s->b5}};
  for (int i = 0; i < 3; i++) {
    snprintf(w, sizeof w, "%sconv.%d.weight", p, convs[i].idx);
    snprintf(b, sizeof b, "%sconv.%d.bias", p, convs[i].idx);
    TRY(conv3x3(dev, f, (size_t)C, w, b, convs[i].w, convs[i].b));
  }
  struct {
    const char *name;
    gpu_linear *l;
    int64_t rows, k;
  } lin[] = {{"conv.3", &s->pw3, C, C}, {"conv.6", &s->pw6, C, C}, {"out", &s->out, s->d, C * F8}};
  for (int i = 0; i < 3; i++) {
    float *bias;
    const char *names[1] = {w};
    snprintf(b, sizeof b, "%s%s.bias", p, lin[i].name);
    snprintf(w, sizeof w, "%s%s.weight", p, lin[i].name);
    TRY(w_host(f, b, W_F32, (size_t)lin[i].rows, true, &bias));
    uint64_t types = i == 2 ? W_LINEAR_TYPES : W_CONV_TYPES;
    int st = w_linear(dev, f, names, 1, &lin[i].rows, lin[i].k, types, bias, (size_t)lin[i].rows,
                      lin[i].l);
    free(bias);
    if (st) return st;
  }
  return 0;
}

static int load(gpu_device *dev, const gguf_file *f, uint32_t channels, uint32_t mels, uint32_t d,
                bool causal, dw_subsampling *s) {
  memset(s, 0, sizeof *s);
  s->channels = channels, s->mels = mels, s->d = d, s->causal = causal;
  int st = dw_load(dev, f, s);
  if (st) dw_subsampling_free(s);
  return st;
}

int dw_subsampling_load(gpu_device *dev, const gguf_file *f, uint32_t channels, uint32_t mels,
                        uint32_t d, dw_subsampling *s) {
  return load(dev, f, channels, mels, d, false, s);
}

int dw_subsampling_load_causal(gpu_device *dev, const gguf_file *f, uint32_t channels,
                               uint32_t mels, uint32_t d, dw_subsampling *s) {
  return load(dev, f, channels, mels, d, true, s);
}

uint32_t dw_subsampling_out(const dw_subsampling *s, uint32_t valid) {
  return side(s, side(s, side(s, valid)));
}

void dw_subsampling_free(dw_subsampling *s) {
  gpu_buffer *b[] = {s->w0, s->b0, s->w2, s->b2, s->w5, s->b5};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  gpu_linear_free(&s->pw3);
  gpu_linear_free(&s->pw6);
  gpu_linear_free(&s->out);
  memset(s, 0, sizeof *s);
}

uint32_t dw_subsampling_frames(uint32_t valid) { return gpu_halve(gpu_halve(gpu_halve(valid))); }

void dw_subsampling_scratch_free(dw_subsampling_scratch *s) {
  gpu_buffer *b[] = {s->a, s->b, s->c, s->d, s->flat, s->lens0, s->lens4};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  memset(s, 0, sizeof *s);
}

int dw_subsampling_scratch_new(gpu_device *dev, const dw_subsampling *s, uint32_t frames,
                               dw_subsampling_scratch *out) {
  return dw_subsampling_scratch_new_batch(dev, s, frames, 1, out);
}

int dw_subsampling_scratch_new_batch(gpu_device *dev, const dw_subsampling *s, uint32_t frames,
                                     uint32_t n, dw_subsampling_scratch *out) {
  memset(out, 0, sizeof *out);
  if (!n || (n > 1 && s->causal))
    return err_set(STENO_ERR_INVALID, "subsampling: a batch of %u clips%s", n,
                   s->causal ? " of a causal stem" : "");
  size_t F = s->mels, C = s->channels, Cp = pad64(s->channels);
  size_t F4 = side(s, side(s, (uint32_t)F)), F8 = side(s, (uint32_t)F4);
  size_t T4 = side(s, side(s, frames)), T8 = side(s, (uint32_t)T4), f = sizeof(float);
  /* The first depthwise conv's rows from −1 (causal: −2) on. */
  size_t R4 = T4 + (s->causal ? 2 : 1);
  int st = gpu_buffer_new(dev, n * R4 * F4 * C * f, &out->a);
  if (!st) st = gpu_buffer_new(dev, n * R4 * F4 * Cp * f, &out->b);
  if (!st) st = gpu_buffer_new(dev, n * T8 * F8 * C * f, &out->c);
  if (!st) st = gpu_buffer_new(dev, n * T8 * F8 * Cp * f, &out->d);
  if (!st) st = gpu_buffer_new(dev, n * T8 * F8 * C * f, &out->flat);
  if (!st && n > 1) st = gpu_buffer_new(dev, n * sizeof(uint32_t), &out->lens0);
  if (!st && n > 1) st = gpu_buffer_new(dev, n * sizeof(uint32_t), &out->lens4);
  if (st) {
    dw_subsampling_scratch_free(out);
    return st;
  }
  out->frames = frames;
  out->batch = n;
  return 0;
}

int dw_subsampling_set_lens(dw_subsampling_scratch *sc, const uint32_t *valid, uint32_t clips) {
  if (clips < 2 || clips > sc->batch)
    return err_set(STENO_ERR_INVALID, "subsampling: %u clips in room for %u", clips, sc->batch);
  uint32_t *l4 = mem_alloc(clips, sizeof *l4);
  if (!l4) return STENO_ERR_NOMEM;
  int st = 0;
  for (uint32_t i = 0; i < clips && !st; i++) {
    if (!valid[i] || valid[i] > sc->frames)
      st = err_set(STENO_ERR_INVALID, "subsampling: clip %u of %u mel frames (1 to %u)", i,
                   valid[i], sc->frames);
    else l4[i] = gpu_halve(gpu_halve(valid[i]));
  }
  if (!st) st = gpu_upload(sc->lens0, 0, valid, clips * sizeof *valid);
  if (!st) st = gpu_upload(sc->lens4, 0, l4, clips * sizeof *l4);
  free(l4);
  return st;
}

void dw_subsampling_forward_batch(gpu_rec *rec, const dw_subsampling *s,
                                  dw_subsampling_scratch *a, gpu_buffer *mel, uint32_t pitch,
                                  uint32_t clips, gpu_buffer *x, float scale) {
  uint32_t F = s->mels, C = s->channels, Cp = pad64(C);
  uint32_t F4 = gpu_halve(gpu_halve(F)), F8 = gpu_halve(F4);
  uint32_t T4 = gpu_halve(gpu_halve(pitch)), T8 = gpu_halve(T4), R4 = T4 + 1;
  if (s->causal || clips < 2 || clips > a->batch || pitch > a->frames) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "subsampling: %u clips of %u frames%s", clips,
                              pitch, s->causal ? " of a causal stem" : ""));
    return;
  }
  /* As dw_subsampling_forward, each clip in its own rows: conv0 + ReLU fused
   * into conv2 (rows −1 .. T4 − 1 of each), pointwise over all, conv5. */
  gpu_subsample_batch b0 = {clips, a->lens0, pitch * F, R4 * F4 * C};
  gpu_first_depthwise_batch(rec, mel, s->w0, s->b0, s->w2, s->b2, a->a, pitch, F, C, R4, &b0);
  gpu_gemm(rec, a->a, &s->pw3, a->b, clips * R4 * F4, GPU_EPI_RELU, 0);
  gpu_subsample_batch b4 = {clips, a->lens4, R4 * F4 * Cp, T8 * F8 * C};
  gpu_depthwise_batch(rec, a->b, Cp, s->w5, s->b5, a->c, T4, F4, C, T8, &b4);
  gpu_gemm(rec, a->c, &s->pw6, a->d, clips * T8 * F8, GPU_EPI_RELU, 0);
  gpu_flatten(rec, a->d, Cp, a->flat, clips * T8, F8, C);
  if (scale != 0)
    gpu_gemm(rec, a->flat, &s->out, x, clips * T8, GPU_EPI_SCALE, scale);
  else
    gpu_gemm(rec, a->flat, &s->out, x, clips * T8, GPU_EPI_BIAS, 0);
}

void dw_subsampling_forward(gpu_rec *rec, const dw_subsampling *s, dw_subsampling_scratch *a,
                            gpu_buffer *mel, uint32_t tm, gpu_buffer *x, float scale) {
  uint32_t F = s->mels, C = s->channels, Cp = pad64(C);
  uint32_t F4 = side(s, side(s, F)), F8 = side(s, F4);
  uint32_t T4 = side(s, side(s, tm)), T8 = side(s, T4);
  if (s->causal) {
    /* The same with rows −2 .. T4 − 1 (two rows of padding before). */
    gpu_first_depthwise_causal(rec, mel, s->w0, s->b0, s->w2, s->b2, a->a, tm, F, C, 0, T4 + 2);
    gpu_gemm(rec, a->a, &s->pw3, a->b, (T4 + 2) * F4, GPU_EPI_RELU, 0);
    gpu_depthwise_causal(rec, a->b, Cp, s->w5, s->b5, a->c, T4, F4, C, 0, T8);
  } else {
    /* conv0 + ReLU fused into depthwise conv2: rows −1 .. T4 − 1 (row −1 is padding). */
    gpu_first_depthwise(rec, mel, s->w0, s->b0, s->w2, s->b2, a->a, tm, F, C, 0, T4 + 1);
    gpu_gemm(rec, a->a, &s->pw3, a->b, (T4 + 1) * F4, GPU_EPI_RELU, 0);
    gpu_depthwise(rec, a->b, Cp, s->w5, s->b5, a->c, T4, F4, C, 0, T8);
  }
  gpu_gemm(rec, a->c, &s->pw6, a->d, T8 * F8, GPU_EPI_RELU, 0);
  gpu_flatten(rec, a->d, Cp, a->flat, T8, F8, C);
  if (scale != 0)
    gpu_gemm(rec, a->flat, &s->out, x, T8, GPU_EPI_SCALE, scale);
  else
    gpu_gemm(rec, a->flat, &s->out, x, T8, GPU_EPI_BIAS, 0);
}

/* ---- conv1d (GigaAM) ---- */

static gpu_conv1d conv1d_shape(const conv1d_subsampling *s) {
  return (gpu_conv1d){s->kernel, 2, (s->kernel - 1) / 2};
}

/* A conv [d][in][k] as a linear layer over im2col's columns (c·k + tap). */
static int conv1d_layer(gpu_device *dev, const gguf_file *f, int i, uint32_t in, uint32_t d,
                        uint32_t kernel, gpu_linear *out) {
  char w[64], b[64];
  snprintf(w, sizeof w, "enc.pre_encode.conv.%d.weight", i);
  snprintf(b, sizeof b, "enc.pre_encode.conv.%d.bias", i);
  const int64_t ne[3] = {kernel, in, d};
  const gguf_tensor *t;
  TRY(gguf_tensor_get(f, w, W_CONV_TYPES, 3, ne, &t));
  float *bias;
  TRY(w_host(f, b, W_F32, d, true, &bias));
  gpu_weight part = {t->data, d};
  int st = gpu_linear_new(dev, t->type == GGUF_TYPE_F16 ? GPU_F16 : GPU_F32, kernel * in, &part, 1,
                          bias, d, out);
  free(bias);
  return st ? err_wrap(st, "%s: '%s': ", f->name, w) : 0;
}

int conv1d_subsampling_load(gpu_device *dev, const gguf_file *f, uint32_t mels, uint32_t d,
                            uint32_t kernel, conv1d_subsampling *s) {
  memset(s, 0, sizeof *s);
  if (kernel % 2 == 0 || kernel > 63)
    return err_set(STENO_ERR_FORMAT, "%s: subsampling kernel %u (odd, at most 63)", f->name, kernel);
  s->mels = mels, s->d = d, s->kernel = kernel;
  int st = conv1d_layer(dev, f, 0, mels, d, kernel, &s->conv0);
  if (!st) st = conv1d_layer(dev, f, 2, d, d, kernel, &s->conv2);
  if (st) conv1d_subsampling_free(s);
  return st;
}

void conv1d_subsampling_free(conv1d_subsampling *s) {
  gpu_linear_free(&s->conv0);
  gpu_linear_free(&s->conv2);
  memset(s, 0, sizeof *s);
}

uint32_t conv1d_subsampling_frames(const conv1d_subsampling *s, uint32_t valid) {
  gpu_conv1d c = conv1d_shape(s);
  return gpu_conv1d_rows(c, gpu_conv1d_rows(c, valid));
}

void conv1d_subsampling_scratch_free(conv1d_subsampling_scratch *s) {
  gpu_buffer *b[] = {s->col0, s->h, s->col1};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  memset(s, 0, sizeof *s);
}

int conv1d_subsampling_scratch_new(gpu_device *dev, const conv1d_subsampling *s, uint32_t frames,
                                   conv1d_subsampling_scratch *out) {
  memset(out, 0, sizeof *out);
  gpu_conv1d c = conv1d_shape(s);
  size_t t2 = gpu_conv1d_rows(c, frames), t4 = gpu_conv1d_rows(c, (uint32_t)t2), f = sizeof(float);
  t2 += !t2, t4 += !t4; /* never a 0-byte buffer */
  int st = gpu_buffer_new(dev, t2 * s->conv0.wk * f, &out->col0);
  if (!st) st = gpu_buffer_new(dev, t2 * gpu_linear_width(&s->conv0) * f, &out->h);
  if (!st) st = gpu_buffer_new(dev, t4 * s->conv2.wk * f, &out->col1);
  if (st) {
    conv1d_subsampling_scratch_free(out);
    return st;
  }
  out->frames = frames;
  return 0;
}

void conv1d_subsampling_forward(gpu_rec *rec, const conv1d_subsampling *s,
                                conv1d_subsampling_scratch *a, gpu_buffer *mel, uint32_t tm,
                                gpu_buffer *x) {
  gpu_conv1d c = conv1d_shape(s);
  uint32_t t2 = gpu_conv1d_rows(c, tm), t4 = gpu_conv1d_rows(c, t2);
  uint32_t w0 = gpu_linear_width(&s->conv0);
  gpu_im2col(rec, mel, 0, s->mels, a->col0, s->conv0.wk, tm, s->mels, c);
  gpu_gemm_strided(rec, a->col0, s->conv0.wk, &s->conv0, a->h, t2, GPU_EPI_RELU, 0);
  gpu_im2col(rec, a->h, 0, w0, a->col1, s->conv2.wk, t2, s->d, c);
  gpu_gemm_strided(rec, a->col1, s->conv2.wk, &s->conv2, x, t4, GPU_EPI_RELU, 0);
}
