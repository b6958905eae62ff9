/* What the kernel tests share: the device, float buffers in and out, and the
 * plain C references of the activations and epilogues. */
#ifndef STENO_TEST_GPU_TEST_H
#define STENO_TEST_GPU_TEST_H

#include "check.h"
#include "gpu/gpu.h"
#include "gpu/linear.h"

/* The kernels' tolerance: |got − want| ≤ 2e-5 · max|want|. */
#define KERNEL_TOL 2e-5f

/* The device the tests run on (opened once; exits the test if there is none). */
gpu_device *test_device(void);

/* A new device opened with STENO_NO_MAP=1, the path a discrete GPU takes
 * (staged transfers, inputs copied in the submission), on whatever device
 * this is; NULL after a failed check. The caller closes it. */
gpu_device *test_staged_device(void);

/* A recorder, begun. */
gpu_rec *test_rec(void);

/* A buffer holding n floats (or n random floats from seed). */
gpu_buffer *test_upload(const float *x, size_t n);
gpu_buffer *test_random_buffer(size_t n, uint32_t seed);

/* Runs what `rec` recorded and reads n floats of `out` into a malloc'd array. */
float *test_run_read(gpu_rec *rec, gpu_buffer *out, size_t n);

float *test_floats(size_t n);              /* zeroed */
float *test_random(size_t n, uint32_t seed);

/* Opens tests/fixtures/NAME.gguf and NAME.ref.gguf (each NULL after a failed check). */
struct gguf_file;
void fixture_open(const char *name, struct gguf_file **model, struct gguf_file **ref);

float ref_silu(float x);
float ref_gelu(float x); /* erf GELU */
float ref_epilogue(gpu_epi e, float alpha, float v, float old);

#endif
