/* Loading a model's tensors from its GGUF file onto the GPU (or into host
 * memory), with the checks that make a wrong file a clear error. */
#ifndef STENO_NN_WEIGHTS_H
#define STENO_NN_WEIGHTS_H

#include "gpu/linear.h"
#include "gpu/norm.h"
#include "io/gguf.h"

/* The types a linear layer may have in a published file. */
#define W_LINEAR_TYPES                                                                      \
  (GGUF_MASK(GGUF_TYPE_F32) | GGUF_MASK(GGUF_TYPE_F16) | GGUF_MASK(GGUF_TYPE_BF16) |        \
   GGUF_MASK(GGUF_TYPE_Q8_0) | GGUF_MASK(GGUF_TYPE_Q4_0) | GGUF_MASK(GGUF_TYPE_Q4_1) |      \
   GGUF_MASK(GGUF_TYPE_Q5_0) | GGUF_MASK(GGUF_TYPE_Q5_1) | GGUF_MASK(GGUF_TYPE_Q4_K) |      \
   GGUF_MASK(GGUF_TYPE_Q5_K) | GGUF_MASK(GGUF_TYPE_Q6_K))
#define W_CONV_TYPES (GGUF_MASK(GGUF_TYPE_F32) | GGUF_MASK(GGUF_TYPE_F16))
#define W_F32 GGUF_MASK(GGUF_TYPE_F32)

/* A linear layer from tensors `names` (each [k, rows_i] in ne order, types in
 * `types`) stacked along the output, with nbias biases (see gpu_linear_new).
 * rows[i] > 0 checks tensor i's rows; k > 0 checks the inputs. A type the
 * GPU kernels do not read is dequantized to F32 here. */
int w_linear(gpu_device *dev, const gguf_file *f, const char *const *names, int n,
             const int64_t *rows, int64_t k, uint64_t types, const float *bias, size_t nbias,
             gpu_linear *out);

/* A tensor of exactly `count` elements (any shape) dequantized into a new
 * host array. Optional: *out = NULL when the tensor is absent and !required. */
int w_host(const gguf_file *f, const char *name, uint64_t types, size_t count, bool required,
           float **out);

/* The same, uploaded to a new GPU buffer. */
int w_gpu(gpu_device *dev, const gguf_file *f, const char *name, uint64_t types, size_t count,
          gpu_buffer **out);

/* A LayerNorm from NAME.weight and NAME.bias ([n] F32). */
int w_norm(gpu_device *dev, const gguf_file *f, const char *name, size_t n, float eps,
           gpu_norm *out);
void w_norm_free(gpu_norm *n);

#endif
