#include "gpu/decode.h"

#include <math.h>

#include "base/error.h"

#define MAX_GROUPS 65535u
#define GEMV_ROWS 8  /* rows per gemv workgroup */
#define GEMV_FAST_ROWS 4 /* ... per gemv_fast workgroup of 256 (a divisor of 64) */
#define GEMV_CPU_ROWS 8  /* ... of one subgroup, on a CPU device */
#define GROUP 256    /* invocations per embed and pack workgroup */
#define MAX_HEAD_DIM 256
#define ATTEND_CHUNK 256 /* keys per split (attend.comp's CHUNK) */

/* True where `buf` holds `words` 4-byte values; else records the failure. */
static bool holds(gpu_rec *rec, const char *op, const char *name, gpu_buffer *buf,
                  uint64_t words) {
  if (buf && words <= UINT32_MAX && gpu_buffer_size(buf) / 4 >= words) return true;
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "%s: %s holds %zu values, needs %llu", op, name,
                            buf ? gpu_buffer_size(buf) / 4 : 0, (unsigned long long)words));
  return false;
}

static uint32_t capped(uint64_t groups) {
  return groups < MAX_GROUPS ? (uint32_t)groups : MAX_GROUPS;
}

/* True for a loaded layer (Q8_0 with its scales); else records the failure. */
static bool linear_ok(gpu_rec *rec, const char *op, const gpu_linear *l) {
  if (l && l->w && l->bias && l->type <= GPU_Q8_0 && (l->type != GPU_Q8_0 || l->scales) && l->n &&
      l->k && l->wk >= l->k)
    return true;
  gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "%s: not a loaded linear layer", op));
  return false;
}

void gpu_gemv(gpu_rec *rec, gpu_buffer *a, uint32_t a_off, const gpu_linear *l, gpu_buffer *c,
              uint32_t c_off, gpu_epi epi, float alpha) {
  if (!linear_ok(rec, "gemv", l)) return;
  if (epi > GPU_EPI_RELU2) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "gemv: epilogue %d", (int)epi));
    return;
  }
  if (!holds(rec, "gemv", "a", a, (uint64_t)a_off + l->k) ||
      !holds(rec, "gemv", "c", c, (uint64_t)c_off + l->n + l->dual))
    return;
  gpu_device *d = gpu_rec_device(rec);
  const gpu_info *info = gpu_device_info(d);
  uint32_t sg = info->subgroup_size;
  bool fast = gpu_fast_used(d, GPU_FAST_GEMV) && sg >= 4 && sg <= 256;
  /* A CPU device's workgroup is one subgroup (gemv_fast.comp). */
  bool cpu = gpu_device_is_cpu(d);
  uint32_t rows = cpu ? GEMV_CPU_ROWS : GEMV_FAST_ROWS;
  uint32_t spec[4] = {l->type, rows, a_off % 4 == 0, cpu ? sg : 256};
  gpu_kernel *k = fast ? gpu_rec_kernel(rec, "gemv_fast", spec, 4) : gpu_rec_kernel(rec, "gemv", spec, 1);
  struct {
    uint32_t n, k, mode;
    float alpha;
    uint32_t dual, a_off, c_off, wk;
  } push = {l->n, l->k, epi, alpha, l->dual, a_off, c_off, l->wk};
  gpu_buffer *bufs[] = {a, l->bias, c, l->w, l->scales ? l->scales : l->bias};
  gpu_dispatch(rec, k, bufs, 5, &push, sizeof push,
               capped(l->n / (fast ? rows : GEMV_ROWS)), 1, 1);
}

/* embed.comp: token `id`, or with ids the token at ids[id]. */
static void embed(gpu_rec *rec, const gpu_linear *l, uint32_t id, gpu_buffer *ids, gpu_buffer *pos,
                  uint32_t pos_off, gpu_buffer *c, uint32_t c_off) {
  if (!linear_ok(rec, "embed", l)) return;
  if ((!ids && id >= l->rows) || l->k > l->n + l->dual) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "embed: token %u of a %u×%u table", id, l->rows,
                              l->k));
    return;
  }
  if ((ids && !holds(rec, "embed", "ids", ids, (uint64_t)id + 1)) ||
      (pos && !holds(rec, "embed", "pos", pos, (uint64_t)pos_off + l->k)) ||
      !holds(rec, "embed", "c", c, (uint64_t)c_off + l->k))
    return;
  uint32_t spec[2] = {l->type, ids != NULL};
  gpu_kernel *k = gpu_rec_kernel(rec, "embed", spec, 2);
  uint32_t push[7] = {id, l->k, pos != NULL, pos_off, c_off, l->wk, l->rows};
  gpu_buffer *bufs[] = {pos ? pos : l->bias, l->bias, c, l->w, l->scales ? l->scales : l->bias,
                        ids ? ids : l->bias};
  gpu_dispatch(rec, k, bufs, 6, push, sizeof push, (l->k + GROUP - 1) / GROUP, 1, 1);
}

void gpu_embed(gpu_rec *rec, const gpu_linear *l, uint32_t id, gpu_buffer *pos, uint32_t pos_off,
               gpu_buffer *c, uint32_t c_off) {
  embed(rec, l, id, NULL, pos, pos_off, c, c_off);
}

void gpu_embed_from(gpu_rec *rec, const gpu_linear *l, gpu_buffer *ids, uint32_t at,
                    gpu_buffer *pos, uint32_t pos_off, gpu_buffer *c, uint32_t c_off) {
  if (!ids) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "embed: no ids buffer"));
    return;
  }
  embed(rec, l, at, ids, pos, pos_off, c, c_off);
}

/* ts_greedy's ids per workgroup of its first pass. */
#define TS_SLICE 1024
#define TS_PARTS 9 /* words per workgroup */

/* ts_greedy's first-pass workgroups for a vocabulary. */
static uint32_t ts_groups(uint32_t vocab) { return (vocab + TS_SLICE - 1) / TS_SLICE; }

size_t gpu_ts_greedy_scratch(uint32_t vocab) { return (size_t)ts_groups(vocab) * TS_PARTS; }

void gpu_ts_greedy(gpu_rec *rec, gpu_buffer *logits, const gpu_ts_rules *r, gpu_buffer *gen,
                   gpu_buffer *lp, uint32_t n, gpu_buffer *scratch) {
  if (!r->vocab || r->eot >= r->vocab || r->no_timestamps >= r->vocab ||
      (uint64_t)r->words * 32 < r->vocab) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "ts_greedy: rules for a vocabulary of %u", r->vocab));
    return;
  }
  if (!holds(rec, "ts_greedy", "logits", logits, r->vocab) ||
      !holds(rec, "ts_greedy", "blocked", r->blocked, 2ull * r->words) ||
      !holds(rec, "ts_greedy", "gen", gen, (uint64_t)n + 1) ||
      !holds(rec, "ts_greedy", "lp", lp, (uint64_t)n + 1) ||
      !holds(rec, "ts_greedy", "scratch", scratch, gpu_ts_greedy_scratch(r->vocab)))
    return;
  uint32_t groups = ts_groups(r->vocab);
  struct {
    uint32_t vocab, eot, no_ts, n, words, flags;
    int32_t max_initial;
    uint32_t pass, groups, slice;
  } push = {r->vocab, r->eot, r->no_timestamps, n, r->words,
            (r->timestamps ? 1u : 0u) | (r->no_eot ? 2u : 0u), r->max_initial, 0, groups, TS_SLICE};
  gpu_buffer *bufs[] = {logits, r->blocked, gen, lp, scratch};
  gpu_kernel *k = gpu_rec_kernel(rec, "ts_greedy", NULL, 0);
  gpu_dispatch(rec, k, bufs, 5, &push, sizeof push, groups, 1, 1);
  push.pass = 1;
  gpu_dispatch(rec, k, bufs, 5, &push, sizeof push, 1, 1, 1);
}

size_t gpu_attend_scratch(uint32_t n, uint32_t heads, uint32_t head_dim) {
  return (size_t)heads * ((n + ATTEND_CHUNK - 1) / ATTEND_CHUNK) * (head_dim + 2);
}

void gpu_attend(gpu_rec *rec, gpu_buffer *q, uint32_t q_off, gpu_buffer *kv, uint32_t kv_off,
                gpu_buffer *o, uint32_t o_off, uint32_t n, uint32_t heads, uint32_t head_dim,
                gpu_buffer *scratch) {
  if (!n || !heads || heads > MAX_GROUPS || head_dim < 2 || head_dim > MAX_HEAD_DIM ||
      head_dim % 2) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "attend: %u keys, %u heads of %u", n, heads,
                              head_dim));
    return;
  }
  uint64_t d = (uint64_t)heads * head_dim;
  uint32_t splits = (n + ATTEND_CHUNK - 1) / ATTEND_CHUNK;
  if (splits == 1 || splits > MAX_GROUPS) scratch = NULL; /* nothing to split, or too much */
  if (!holds(rec, "attend", "q", q, q_off + d) ||
      !holds(rec, "attend", "kv", kv, kv_off + n * d) ||
      !holds(rec, "attend", "o", o, o_off + d) ||
      (scratch && !holds(rec, "attend", "scratch", scratch, gpu_attend_scratch(n, heads, head_dim))))
    return;
  struct {
    uint32_t n, hd, d;
    float scale;
    uint32_t q_off, kv_off, o_off;
  } push = {n, head_dim, (uint32_t)d, 1.0f / sqrtf((float)head_dim), q_off, kv_off, o_off};
  gpu_buffer *bufs[] = {q, kv, o, scratch ? scratch : o};
  /* A pipeline per head size (its loops unroll) and stage: 0 whole, 1 split, 2 merge. */
  uint32_t spec[2] = {head_dim / 2, scratch ? 1 : 0};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "attend", spec, 2), bufs, 4, &push, sizeof push, heads,
               scratch ? splits : 1, 1);
  if (!scratch) return;
  spec[1] = 2;
  gpu_dispatch(rec, gpu_rec_kernel(rec, "attend", spec, 2), bufs, 4, &push, sizeof push, heads, 1,
               1);
}

/* pack.comp, its x clamped to ±65504 first where clamp is set. */
static void pack(gpu_rec *rec, bool clamp, gpu_buffer *x, uint32_t src, uint32_t src_stride,
                 gpu_buffer *y, uint32_t dst, uint32_t dst_stride, uint32_t rows, uint32_t pairs) {
  if (!rows || !pairs) return;
  uint64_t last = rows - 1;
  if (!holds(rec, "pack", "x", x, src + last * src_stride + 2 * (uint64_t)pairs) ||
      !holds(rec, "pack", "y", y, dst + last * dst_stride + (uint64_t)pairs))
    return;
  uint32_t spec = clamp;
  gpu_kernel *k = gpu_rec_kernel(rec, "pack", &spec, 1);
  uint32_t push[6] = {rows, pairs, src, src_stride, dst, dst_stride};
  gpu_buffer *bufs[] = {x, y};
  gpu_dispatch(rec, k, bufs, 2, push, sizeof push, capped((pairs + (uint64_t)GROUP - 1) / GROUP),
               capped(rows), 1);
}

void gpu_pack(gpu_rec *rec, gpu_buffer *x, uint32_t src, uint32_t src_stride, gpu_buffer *y,
              uint32_t dst, uint32_t dst_stride, uint32_t rows, uint32_t pairs) {
  pack(rec, false, x, src, src_stride, y, dst, dst_stride, rows, pairs);
}

void gpu_pack_clamped(gpu_rec *rec, gpu_buffer *x, uint32_t src, uint32_t src_stride, gpu_buffer *y,
                      uint32_t dst, uint32_t dst_stride, uint32_t rows, uint32_t pairs) {
  pack(rec, true, x, src, src_stride, y, dst, dst_stride, rows, pairs);
}
