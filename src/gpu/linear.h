/* Linear layers on the GPU: `c = epilogue(a·Wᵀ + b)` (gemm, many rows) and
 * the one-row forms for decoders (gemv, embed). W stays in its GGUF type. */
#ifndef STENO_GPU_LINEAR_H
#define STENO_GPU_LINEAR_H

#include "gpu/gpu.h"
#include "gpu/norm.h"

/* Weight types as the kernels number them (common.glsl's W_*). */
typedef enum { GPU_F32 = 0, GPU_F16 = 1, GPU_BF16 = 2, GPU_Q8_0 = 3 } gpu_wtype;

/* Epilogues (common.glsl's E_*). */
typedef enum {
  GPU_EPI_BIAS = 0,
  GPU_EPI_SILU = 1,
  GPU_EPI_RELU = 2,
  GPU_EPI_RESIDUAL = 3,      /* c += alpha · v */
  GPU_EPI_GELU = 4,          /* erf GELU */
  GPU_EPI_GELU_RESIDUAL = 5, /* c += GELU(v) */
  GPU_EPI_SCALE = 6,         /* c = alpha · v (Parakeet's xscaling) */
  GPU_EPI_RELU2 = 7,         /* relu(v)² (Nemotron-H's MLP and experts) */
} gpu_epi;

/* One weight stacked into a linear layer: `rows` rows of k values in the
 * layer's type, as the GGUF file stores them (Q8_0: 34-byte blocks). */
typedef struct {
  const void *data;
  uint32_t rows;
} gpu_weight;

typedef struct {
  uint32_t n;     /* output columns: the stacked rows padded to a multiple of 64 */
  uint32_t rows;  /* the stacked rows before padding */
  uint32_t k;     /* inputs */
  uint32_t wk;    /* weights per row as stored: k rounded up to 32, zeros after k */
  uint32_t dual;  /* outputs written again after the n others with a second bias */
  gpu_wtype type;
  gpu_buffer *w;
  gpu_buffer *scales; /* Q8_0's f16 scales, else NULL */
  gpu_buffer *w16;    /* Q8_0: an f16 copy [n][wk] for gemm_tc (which reads BF16 as stored), made at load
                       * where that kernel passed its probe; else NULL */
  gpu_buffer *bias;   /* n + dual values */
} gpu_linear;

/* Bytes of `count` weights of type t (count a multiple of 32 for Q8_0). */
size_t gpu_wtype_bytes(gpu_wtype t, size_t count);

/* Uploads weights stacked along the output (q|k|v), with `nbias` biases:
 * 0 (zeros), the stacked rows, or the rows plus `dual` second biases for the
 * first `dual` outputs. */
int gpu_linear_new(gpu_device *dev, gpu_wtype type, uint32_t k, const gpu_weight *parts,
                   int nparts, const float *bias, size_t nbias, gpu_linear *out);
void gpu_linear_free(gpu_linear *l);

/* For tests: Q8_0 layers split into data and scales by q8_split.comp even on a
 * device whose memory is mapped (where the CPU does it by default). */
void gpu_q8_split_force(gpu_device *dev, bool on_gpu);

/* Records l's BF16 or Q8_0 weights converted to f16 [n][wk] into dst (n·wk·2
 * bytes), rounded to nearest even: the copy gemm_tc reads. */
void gpu_weights_to_f16(gpu_rec *rec, const gpu_linear *l, gpu_buffer *dst);

/* Output row stride: n + dual. */
static inline uint32_t gpu_linear_width(const gpu_linear *l) { return l->n + l->dual; }

/* c [m][width] = epilogue(a [m][k] · Wᵀ + b); residual epilogues read c. */
void gpu_gemm(gpu_rec *rec, gpu_buffer *a, const gpu_linear *l, gpu_buffer *c, uint32_t m,
              gpu_epi epi, float alpha);

/* The same with a's rows `lda` (≥ k) floats apart. */
void gpu_gemm_strided(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l,
                      gpu_buffer *c, uint32_t m, gpu_epi epi, float alpha);

/* gpu_gemm_strided without cutting k and with a read as it is (whatever the
 * rows): GEMMs recorded side by side (gpu_rec_together) must not share the
 * device's split-k scratch or its f16 copy of a. */
void gpu_gemm_whole(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l,
                    gpu_buffer *c, uint32_t m, gpu_epi epi, float alpha);

/* gpu_gemm_strided, then y = LayerNorm(the first `cols` columns of c's m
 * rows) with n, y's rows y_stride floats apart from 0 — what gpu_layer_norm
 * (c, 0, width, n, y, 0, y_stride, m, cols) would write after it. Where the
 * GEMM splits k (few rows), its reduce writes both in one dispatch. */
void gpu_gemm_norm(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l, gpu_buffer *c,
                   uint32_t m, gpu_epi epi, float alpha, uint32_t cols, const gpu_norm *n,
                   gpu_buffer *y, uint32_t y_stride);

/* gpu_gemm_norm, then c's first cols columns = LayerNorm(y) with n2 (over
 * the GEMM's output, which they replace): what gpu_layer_norm(y, .., n2, c,
 * 0, width, ..) would write after it. Where the GEMM splits k, its reduce
 * writes all three in one dispatch (a Conformer block's last LayerNorm and
 * the next block's first). */
void gpu_gemm_norm2(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l, gpu_buffer *c,
                    uint32_t m, gpu_epi epi, float alpha, uint32_t cols, const gpu_norm *n,
                    gpu_buffer *y, uint32_t y_stride, const gpu_norm *n2);

/* The fast GEMM kernels: gemm_coop.comp's 64×64 tile, gemm_tiled.comp with a
 * 64×64 or a 128×128 tile (both keep a to ~21 bits: f16 hi + lo), and
 * gemm_tc.comp (a rounded to f16, double-buffered, split k) with a 64×128 or
 * a 128×128 tile. Each is probed at device open and timed with the portable
 * kernel at a small and a large m (on a GPU); gpu_gemm uses the fastest for
 * its weight type and m. */
typedef enum {
  GPU_GEMM_AUTO = 0,
  GPU_GEMM_COOP64,
  GPU_GEMM_TILED64,
  GPU_GEMM_TILED128,
  GPU_GEMM_TC64,
  GPU_GEMM_TC128,
  GPU_GEMM_TC128W, /* gemm_tc's 128×128 tile on 16 subgroups of 2×2 (for large m) */
  GPU_GEMM_TC128K, /* the same with k in steps of 64 (one shared stage) */
  GPU_GEMM_CM2,    /* gemm_cm2: 128×128 through cooperative_matrix2 (a in f16, pieces for gemm_reduce) */
  GPU_GEMM_CM2U,   /* gemm_cm2u: the same, k by 64, loads unchecked (whole tiles of n and k only) */
  GPU_GEMM_CM2UL,  /* gemm_cm2u with 256 rows a tile (ggml's large tile) */
  GPU_GEMM_VARIANTS
} gpu_gemm_variant;

/* A variant's kernel and tile (the probe and gpu_gemm share them). a16: it
 * rounds a to f16 (its result is that of f16(a)·W); bk: gemm_tc's k step (32
 * or 64; 0 for the other kernels, which never split k). */
typedef struct {
  const char *kernel;
  uint32_t sg_m, sg_n, tm, tn;
  bool a16;
  uint32_t bk;
} gpu_gemm_tile;
extern const gpu_gemm_tile gpu_gemm_tiles[GPU_GEMM_VARIANTS];
/* The variants through cooperative_matrix2 (enabled by STENO_GEMM_CM2=1). */
static inline bool gpu_gemm_is_cm2(gpu_gemm_variant v) {
  return v == GPU_GEMM_CM2 || v == GPU_GEMM_CM2U || v == GPU_GEMM_CM2UL;
}
/* ... those of them whose loads are unchecked (gemm_cm2u). */
static inline bool gpu_gemm_is_cm2u(gpu_gemm_variant v) { return v == GPU_GEMM_CM2U || v == GPU_GEMM_CM2UL; }
gpu_kernel *gpu_gemm_kernel(gpu_rec *rec, gpu_gemm_variant v, gpu_wtype type);
/* gemm_tc's tile v reading a in f16 (its ATYPE 1). */
gpu_kernel *gpu_gemm_kernel_a16(gpu_rec *rec, gpu_gemm_variant v, gpu_wtype type);

/* For benchmarks: forces one variant (if it passed its probe) or AUTO. */
void gpu_gemm_force(gpu_device *dev, gpu_gemm_variant v);
/* From how many rows gemm_tc reads a as f16 that a pack dispatch wrote
 * first, rounded as gemm_tc rounds it when staging (the same products, half
 * the bytes of a in the GEMM): 0 the default (1 024; the H200 ran the GEMM
 * 1.34× faster that way at 4096³), 1 always, UINT32_MAX never. For tests and
 * benchmarks. */
void gpu_gemm_a16(gpu_device *dev, uint32_t min_m);
/* How gpu_gemm runs m rows through l (its own recording follows this plan):
 * the variant (AUTO: portable), its bm × bn tile, k cut into `splits` pieces
 * of kc summed by gemm_reduce. split: the kernel takes the split-k push
 * constants. For bench/gemm_tc_sweep and test_gemm. */
typedef struct {
  gpu_gemm_variant v;
  uint32_t bm, bn, splits, kc;
  bool split;
  bool a16; /* a is first written in f16 (pack.comp) for gemm_tc to read (gpu_gemm_a16) */
  bool parts; /* the kernel writes partial sums that gemm_reduce finishes: k split, or gemm_cm2 */
  bool cpu; /* v is AUTO and the kernel gemm_cpu.comp (GPU_FAST_GEMM_CPU; never splits k) */
} gpu_gemm_plan;
void gpu_gemm_plan_for(const gpu_device *dev, const gpu_linear *l, uint32_t lda, uint32_t m,
                       gpu_gemm_plan *out);
bool gpu_gemm_variant_ok(const gpu_device *dev, gpu_gemm_variant v);
/* Whether it is the one chosen for some weight type and size here. */
bool gpu_gemm_variant_used(const gpu_device *dev, gpu_gemm_variant v);

#endif
