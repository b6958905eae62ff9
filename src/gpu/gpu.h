/* The Vulkan compute runtime: one device, storage buffers, kernels (compute
 * pipelines from the embedded SPIR-V), and a recorder that puts many
 * dispatches into one command buffer, submits once and checks that the work
 * really finished.
 *
 * Every kernel sees the same interface: up to GPU_MAX_BINDINGS storage
 * buffers at bindings 0.. of set 0, and up to GPU_MAX_PUSH bytes of push
 * constants. A kernel's specialization constants (ids 0..) pick its variant
 * (weight type, tile size), so one .comp file serves several pipelines. */
#ifndef STENO_GPU_GPU_H
#define STENO_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "steno.h"

#define GPU_MAX_BINDINGS 8
#define GPU_MAX_PUSH 128
#define GPU_MAX_SPEC 10

typedef struct gpu_device gpu_device;
typedef struct gpu_buffer gpu_buffer;
typedef struct gpu_kernel gpu_kernel;
typedef struct gpu_rec gpu_rec;

/* What a device is and offers (filled by the feature probe). */
typedef struct {
  int index;               /* position in the loader's list */
  char name[256];
  char driver[520];        /* driver name and info */
  const char *type;        /* "discrete", "integrated", "virtual", "cpu", "other" */
  uint32_t api_version;    /* VK_MAKE_API_VERSION */
  uint64_t device_memory;  /* bytes in the largest device-local heap */
  bool unified;            /* device-local memory the host can map (iGPU, CPU) */
  uint32_t subgroup_size;
  bool subgroup_arithmetic, subgroup_shuffle, subgroup_ballot; /* in compute shaders */
  bool storage_16bit, float16, int8, storage_8bit;
  bool float64;            /* shaderFloat64 (the GPU log-mel's FFT) */
  bool int_dot;            /* shaderIntegerDotProduct */
  bool bf16;               /* VK_KHR_shader_bfloat16 */
  bool coop_khr, coop_nv;  /* cooperative matrix extensions */
  bool coop2;              /* VK_NV_cooperative_matrix2 with workgroup-scope matrices, flexible
                            * dimensions and tensor addressing, KHR cooperative matrices and the
                            * Vulkan memory model (gemm_cm2's needs) */
  bool exe_stats;          /* VK_KHR_pipeline_executable_properties (STENO_PIPELINE_STATS) */
  char coop_shapes[512];   /* "16x16x16 f16→f32, ..." as the driver lists them */
  uint32_t sm_count;       /* NVIDIA's streaming multiprocessors (VK_NV_shader_sm_builtins), 0: unknown */
  uint32_t max_workgroup_invocations;
  uint32_t max_shared_memory;
  uint64_t max_storage_buffer_range;
} gpu_info;

/* ---- devices ---- */

/* Lists the devices the Vulkan loader sees. *out is malloc'd (free it). */
int gpu_list(gpu_info **out, int *count);

/* Opens the device params name (index or part of the name), else the first
 * discrete GPU, else the first device; with params' fast policy and caches
 * (NULL: steno_model_default_params()). */
int gpu_open(const steno_model_params *params, gpu_device **out);
void gpu_close(gpu_device *dev);
const gpu_info *gpu_device_info(const gpu_device *dev);
/* Whether the device is a CPU (lavapipe): some kernels have a shape of their own there. */
bool gpu_device_is_cpu(const gpu_device *dev);
/* Whether work that a cpu|gpu switch governs runs on dev: the environment
 * variable `name` set to "cpu" says no, "gpu" yes (*forced true, where
 * forced is given), anything else leaves it to the device: yes unless it is
 * a CPU device (lavapipe), where the host does the same work faster. */
bool gpu_work_here(const gpu_device *dev, const char *name, bool *forced);

/* Whether the fast GEMM (cooperative matrices) passed its probe on this device. */
bool gpu_fast_gemm(const gpu_device *dev);

/* On: every fast kernel that passed its probe (tests and benchmarks run
 * both ways). Off: the portable kernels only. A device starts as its
 * params' fast policy says (STENO_FAST_AUTO: the faster of each pair as
 * timed at open). */
void gpu_set_fast(gpu_device *dev, bool on);
bool gpu_using_fast(const gpu_device *dev);

/* The other fast kernels, each behind its own probe (src/gpu/probe.c). */
typedef enum {
  GPU_FAST_NORM,      /* layer_norm with subgroup reductions (norm_fast.comp) */
  GPU_FAST_SOFTMAX,   /* softmax with subgroup reductions (softmax_fast.comp) */
  GPU_FAST_CONV_GLU,  /* conv_glu with subgroup reductions (conv_glu_fast.comp) */
  GPU_FAST_ATTENTION, /* flash attention, no t² scores (flash.comp); needs no feature */
  GPU_FAST_ATTENTION_TC, /* flash attention on the tensor cores (flash_tc.comp), relative too */
  GPU_FAST_ATTENTION_MM, /* attention on the tensor cores with hi + lo products, plain only: in
                            one dispatch (flash_mm.comp, head sizes up to 64, no chunked mask)
                            or scores and values as two products (attention_scores_tc.comp,
                            attention_values_tc.comp) */
  GPU_FAST_GEMM_CPU,     /* the GEMM for CPU devices: a block of outputs per subgroup, no shared
                            memory (gemm_cpu.comp); where the fast GEMM does not take it */
  GPU_FAST_GEMV,         /* a decoder's one-row product: every invocation a 16-byte word of each
                            of a few rows, subgroup sums (gemv_fast.comp) */
  GPU_FAST_ATTENTION_CPU, /* attention scores for CPU devices: a block of queries × keys per
                             subgroup, no shared memory (attention_scores_cpu.comp) */
  GPU_FAST_KINDS
} gpu_fast_kernel;

/* Whether kernel k passed its probe on this device; whether it is used
 * (passed, and gpu_set_fast on); its name for `steno devices`. */
bool gpu_fast_passed(const gpu_device *dev, gpu_fast_kernel k);
/* Whether the device has what kernel k needs (subgroup arithmetic, cooperative matrices). */
bool gpu_fast_offered(const gpu_device *dev, gpu_fast_kernel k);
bool gpu_fast_used(const gpu_device *dev, gpu_fast_kernel k);
/* Whether it passed and was timed faster than its portable twin here. */
bool gpu_fast_chosen(const gpu_device *dev, gpu_fast_kernel k);
/* Why kernel k is never chosen by timing on this device (used only with
 * every fast kernel on), or NULL where the timing decides. */
const char *gpu_fast_untimed(const gpu_device *dev, gpu_fast_kernel k);
const char *gpu_fast_name(gpu_fast_kernel k);

/* Prints one device's description (as `steno devices` shows it). */
void gpu_info_print(const gpu_info *info, FILE *out);

/* ---- buffers ---- */

/* A device storage buffer of `bytes` (≥ 4), contents undefined. */
int gpu_buffer_new(gpu_device *dev, size_t bytes, gpu_buffer **out);
void gpu_buffer_free(gpu_buffer *buf);
size_t gpu_buffer_size(const gpu_buffer *buf);

/* Host → device and device → host copies, waited for. Through a staging
 * buffer, or a plain memcpy where the buffer's memory is mapped (unified). */
int gpu_upload(gpu_buffer *buf, size_t offset, const void *data, size_t bytes);
int gpu_download(gpu_buffer *buf, size_t offset, void *data, size_t bytes);

/* Batched uploads (model loading): while on, a staged gpu_upload copies the
 * data into staging and returns; the copies go to the GPU a staging half at a
 * time, and all before any download or recorded run (gpu_upload_settle).
 * Turning it off sends and waits for the rest. No effect on a unified device. */
int gpu_upload_batch(gpu_device *dev, bool on);
/* Sends and waits for the queued uploads (the batch stays on). */
int gpu_upload_settle(gpu_device *dev);

/* A recorder for work done once while loading (weights converted on the GPU),
 * begun if it was not. gpu_load_work_done runs it at once, or, while uploads
 * are batched, leaves it for the end of the batch (one run for the model). */
int gpu_load_work(gpu_device *dev, gpu_rec **rec);
int gpu_load_work_done(gpu_device *dev);
/* A buffer of `bytes` for load work to read (weights as the file stores
 * them, before a kernel converts them), freed by the device once that work
 * has run. While uploads are batched, the work so far is run first (and its
 * scratch freed) when the scratch held would pass 256 MiB: a model's
 * conversions never hold more than that on top of its weights. */
int gpu_load_scratch(gpu_device *dev, size_t bytes, gpu_buffer **out);

/* A buffer that kernels write and the host reads with a plain memcpy in
 * gpu_download, no copy submission of its own (the recorder's last barrier
 * makes shader writes visible to the host): host-cached memory where the
 * device has it, else host-coherent; device memory where it is mapped
 * (unified). For small outputs read back after every run (logits). */
int gpu_buffer_readback_new(gpu_device *dev, size_t bytes, gpu_buffer **out);

/* A call's input that the host writes in place and the call's own
 * submission moves to the device, instead of a gpu_upload of its own (a copy
 * into staging, a submission and a wait): host-coherent memory on a discrete
 * GPU, copied by gpu_input_record; a unified device's kernels read it where
 * it was written. Zeroed: empty. */
typedef struct {
  gpu_buffer *host, *device; /* device: NULL on a unified device */
  size_t room, bytes;        /* bytes each holds; the last gpu_input_map's */
} gpu_input;

/* Room for `bytes` (grown to at least `room`: a caller's size that follows its
 * arena's, not each call's) and *host, where to write them. */
int gpu_input_map(gpu_device *dev, gpu_input *in, size_t bytes, size_t room, void **host);
/* Records the copy of the last map's bytes to the device (none where unified)
 * and gives the buffer kernels read. */
gpu_buffer *gpu_input_record(gpu_rec *rec, gpu_input *in);
void gpu_input_free(gpu_input *in);

/* A new buffer holding a copy of `bytes` of `data`. */
int gpu_buffer_from(gpu_device *dev, const void *data, size_t bytes, gpu_buffer **out);

/* Bytes of device memory in buffers now, and the most there was at once. */
size_t gpu_memory_used(const gpu_device *dev);
size_t gpu_memory_peak(const gpu_device *dev);

/* ---- kernels ---- */

/* The pipeline of kernel `name` (a src/gpu/kernels/NAME.comp) with the given
 * specialization constants (ids 0..nspec-1, 32-bit each); made on first use
 * and cached in the device. */
int gpu_kernel_get(gpu_device *dev, const char *name, const uint32_t *spec, int nspec,
                   gpu_kernel **out);

/* ---- recorder ---- */

/* A recorder keeps its command buffers and descriptor sets across calls: a
 * caller that records the same dispatches over the same buffers again
 * allocates nothing. */
int gpu_rec_new(gpu_device *dev, gpu_rec **out);
void gpu_rec_free(gpu_rec *rec);

/* Starts a new recording (after a run, or to discard one). */
int gpu_rec_begin(gpu_rec *rec);

/* Records one dispatch of `k` over `bufs` (bound at 0..n-1; unused bindings
 * get a spare buffer) with `push` as push constants and a barrier before it
 * so it sees the results of every earlier dispatch. */
void gpu_dispatch(gpu_rec *rec, gpu_kernel *k, gpu_buffer *const *bufs, int n, const void *push,
                  size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz);

/* Ends a submission here and starts the next, so the GPU runs what was
 * recorded while the rest is recorded (and drivers that cancel long
 * submissions see short ones); at most two are in flight. Call it only where
 * no host write to a buffer that later dispatches read comes before the run.
 * Only where splitting is on (a discrete GPU, STENO_SPLIT=1, gpu_rec_split);
 * otherwise a no-op. */
int gpu_rec_flush(gpu_rec *rec);
void gpu_rec_split(gpu_rec *rec, bool on);
bool gpu_rec_splits(const gpu_rec *rec); /* whether gpu_rec_flush splits */

/* Between on and off, dispatches run side by side: the first waits for
 * everything recorded before it as always, the others do not wait for it or
 * for each other (none may read what another of the group writes, nor write
 * what another reads or writes); the first dispatch after the group waits
 * for all of them. */
void gpu_rec_together(gpu_rec *rec, bool on);

/* Records a copy of `bytes` from src at src_off into dst at dst_off, after
 * every earlier dispatch and before every later one. dst may be a readback
 * buffer (gpu_buffer_readback_new): the host reads it with gpu_download once
 * the submission holding the copy has finished. */
void gpu_copy(gpu_rec *rec, gpu_buffer *src, size_t src_off, gpu_buffer *dst, size_t dst_off,
              size_t bytes);
/* Records filling `bytes` of dst at dst_off with the 32-bit word (both in
 * words), ordered as gpu_copy is. */
void gpu_fill(gpu_rec *rec, gpu_buffer *dst, size_t dst_off, size_t bytes, uint32_t word);
/* Records writing `bytes` (in words, at most GPU_UPDATE_MAX) of data into dst
 * at dst_off, ordered as gpu_copy is: the data goes in the recording itself
 * (copied now), no upload of its own (a staging copy, a submission and a
 * wait). For a call's small setup (a search's state). */
enum { GPU_UPDATE_MAX = 65536 };
void gpu_update(gpu_rec *rec, gpu_buffer *dst, size_t dst_off, const void *data, size_t bytes);

/* With STENO_PROFILE=1: time every kernel this recorder runs, and print the
 * totals under `title` to stderr when it is freed (profile.c). */
void gpu_rec_profile(gpu_rec *rec, const char *title);

/* Submits what is recorded, waits, and checks every submission's completion
 * mark: a driver that dropped work makes this an error, never a stale result. */
int gpu_rec_run(gpu_rec *rec);

/* gpu_rec_run in two halves, for a caller that works on the host while the
 * GPU runs: submit what is recorded, then wait and check the marks. Nothing
 * the submission reads or writes may be touched between them. */
int gpu_rec_submit(gpu_rec *rec);
int gpu_rec_wait(gpu_rec *rec);

/* Dispatches recorded since gpu_rec_begin (for tests and benchmarks). */
int gpu_rec_dispatches(const gpu_rec *rec);

gpu_device *gpu_rec_device(const gpu_rec *rec);

/* Records a failure found while recording (an op that could not get its
 * kernel, a bad shape): later dispatches are skipped and gpu_rec_run returns
 * `status`. Returns `status`. */
int gpu_rec_fail(gpu_rec *rec, int status);

/* The kernel `name` for a dispatch into `rec`, or NULL after recording the
 * failure (so op functions can stay void). */
gpu_kernel *gpu_rec_kernel(gpu_rec *rec, const char *name, const uint32_t *spec, int nspec);

#endif
