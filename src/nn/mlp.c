/* Nemotron-H's feed-forward mixers: the dense MLP (NemotronHMLP: up, relu²,
 * down) and the mixture of experts (NemotronHMoE: the router picks k experts
 * per row, each a relu² MLP, their outputs weighted and summed, plus the
 * shared expert's). */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "nn/hybrid.h"
#include "nn/weights.h"

/* Every expert of NAME ([E][rows][k] as ne [k, rows, E]) as one stacked layer. */
static int load_experts(gpu_device *dev, const gguf_file *f, const char *name, uint32_t experts,
                        uint32_t rows, uint32_t k, gpu_linear *out) {
  const gguf_tensor *t;
  int64_t ne[] = {k, rows, experts};
  TRY(gguf_tensor_get(f, name, W_LINEAR_TYPES, 3, ne, &t));
  gpu_wtype type;
  switch (t->type) {
    case GGUF_TYPE_F32: type = GPU_F32; break;
    case GGUF_TYPE_F16: type = GPU_F16; break;
    case GGUF_TYPE_BF16: type = GPU_BF16; break;
    case GGUF_TYPE_Q8_0: type = GPU_Q8_0; break;
    default: return err_set(STENO_ERR_UNSUPPORTED, "%s: '%s' has type %s (experts read F32, F16, "
                            "BF16, Q8_0)", f->name, name, gguf_type_name(t->type));
  }
  gpu_weight part = {t->data, experts * rows};
  int st = gpu_linear_new(dev, type, k, &part, 1, NULL, 0, out);
  /* The experts kernel reads the weights as stored: no f16 copy for gemm_tc. */
  gpu_buffer_free(out->w16);
  out->w16 = NULL;
  return st ? err_wrap(st, "%s: '%s': ", f->name, name) : 0;
}

static int load_moe(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
                    mlp_block *b) {
  char name[256];
  uint32_t E = d->router.experts;
  snprintf(name, sizeof name, "%sgate", prefix);
  TRY(hybrid_load_linear(dev, f, name, E, d->d, &b->gate));
  snprintf(name, sizeof name, "%sgate.e_score_correction_bias", prefix);
  TRY(w_gpu(dev, f, name, W_F32, E, &b->bias));
  snprintf(name, sizeof name, "%sexperts.up_proj.weight", prefix);
  TRY(load_experts(dev, f, name, E, d->moe_ff, d->d, &b->experts_up));
  snprintf(name, sizeof name, "%sexperts.down_proj.weight", prefix);
  return load_experts(dev, f, name, E, d->d, d->moe_ff, &b->experts_down);
}

int mlp_load(gpu_device *dev, const gguf_file *f, const char *prefix, const hybrid_dims *d,
             bool moe, mlp_block *b) {
  memset(b, 0, sizeof *b);
  char up[256], down[256];
  const char *inner = moe ? "shared_experts." : "";
  uint32_t ff = moe ? d->shared_ff : d->ff;
  snprintf(up, sizeof up, "%s%sup_proj", prefix, inner);
  snprintf(down, sizeof down, "%s%sdown_proj", prefix, inner);
  int st = hybrid_load_linear(dev, f, up, ff, d->d, &b->up);
  if (!st) st = hybrid_load_linear(dev, f, down, d->d, ff, &b->down);
  if (!st && moe) st = load_moe(dev, f, prefix, d, b);
  if (st) mlp_free(b);
  return st;
}

void mlp_free(mlp_block *b) {
  gpu_linear *l[] = {&b->up, &b->down, &b->gate, &b->experts_up, &b->experts_down};
  for (size_t i = 0; i < sizeof l / sizeof *l; i++) gpu_linear_free(l[i]);
  gpu_buffer_free(b->bias);
  b->bias = NULL;
}

void mlp_record(gpu_rec *rec, const hybrid_dims *d, const mlp_block *b, hybrid_scratch *s,
                uint32_t rows) {
  if (b->gate.w) { /* the routed experts first; the shared expert adds after */
    uint32_t k = d->router.k, E = d->router.experts;
    hybrid_linear(rec, s->h, d->stride, &b->gate, s->wide, rows, GPU_EPI_BIAS);
    gpu_moe_route(rec, &d->router, s->wide, 0, gpu_linear_width(&b->gate), b->bias, s->idx, s->wts,
                  rows);
    if (rows == 1) { /* one token: each chosen expert's weights are read once anyway */
      gpu_moe_up(rec, &b->experts_up, d->moe_ff, k, s->h, 0, d->stride, s->idx, s->eh, rows);
      gpu_moe_down(rec, &b->experts_down, d->d, k, s->eh, s->idx, s->wts, s->x, 0, d->stride,
                   rows);
    } else { /* a prompt: pairs grouped by expert, its weights read once per batch of them */
      gpu_moe_lists(rec, E, k, s->idx, s->list, s->count, rows);
      gpu_moe_up_grouped(rec, &b->experts_up, d->moe_ff, k, s->h, 0, d->stride, s->list,
                         s->count, s->eh, rows);
      gpu_moe_down_grouped(rec, &b->experts_down, d->d, k, s->eh, s->list, s->count, s->wts,
                           s->ey, s->x, 0, d->stride, rows);
    }
  }
  hybrid_linear(rec, s->h, d->stride, &b->up, s->wide, rows, GPU_EPI_RELU2);
  hybrid_linear(rec, s->wide, gpu_linear_width(&b->up), &b->down, s->x, rows, GPU_EPI_RESIDUAL);
}
