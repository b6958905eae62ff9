/* What the gpu layer's files share; nothing outside src/gpu includes this. */
#ifndef STENO_GPU_INTERNAL_H
#define STENO_GPU_INTERNAL_H

#include <pthread.h>
#include <vulkan/vulkan.h>

#include "gpu/gpu.h"
#include "gpu/linear.h"

/* What Debian 12's Vulkan headers (1.3.239) predate, as the Vulkan registry
 * defines it: KHR cooperative matrices (their properties: the device list;
 * their features: gemm_cm2) and NVIDIA's cooperative_matrix2 (gemm_cm2). */
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  uint32_t scope;
} VkCooperativeMatrixPropertiesKHR;
#define STENO_STYPE_COOP_PROPS_KHR ((VkStructureType)1000506001)
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice, uint32_t *, VkCooperativeMatrixPropertiesKHR *);
#else
#define STENO_STYPE_COOP_PROPS_KHR VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
#endif
#define GPU_VK_COOP2_EXTENSION "VK_NV_cooperative_matrix2"
#define GPU_STYPE_COOP_KHR_FEATURES ((VkStructureType)1000506000)
#define GPU_STYPE_COOP2_FEATURES ((VkStructureType)1000593000)
typedef struct {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperative_matrix, robust_buffer_access;
} gpu_vk_coop_khr_features;
typedef struct {
  VkStructureType sType;
  void *pNext;
  VkBool32 workgroup_scope, flexible_dimensions, reductions, conversions, per_element_operations,
      tensor_addressing, block_loads;
} gpu_vk_coop2_features;

/* Device memory shared by the buffers made while a model loads (a few
 * allocations instead of one per tensor); freed with its last buffer. */
typedef struct gpu_block {
  VkDeviceMemory mem;
  VkDeviceSize size, used;
  uint32_t type; /* memory type index */
  int refs;      /* buffers in it, plus one while it is the one being filled */
} gpu_block;

struct gpu_buffer {
  gpu_device *dev;
  VkBuffer buf;
  VkDeviceMemory mem; /* its own memory, or VK_NULL_HANDLE in a block */
  gpu_block *block;
  uint64_t serial;    /* unique per device: a new buffer may reuse a freed one's VkBuffer handle */
  size_t size;
  void *map; /* persistently mapped host-visible memory, or NULL */
};

struct gpu_kernel {
  char name[64];
  uint32_t spec[GPU_MAX_SPEC];
  int nspec;
  VkShaderModule module;
  VkPipeline pipeline;
};

struct gpu_device {
  VkInstance inst;
  VkPhysicalDevice pd;
  VkDevice dev;
  VkQueue queue;
  uint32_t family;
  gpu_info info;
  VkPhysicalDeviceMemoryProperties mem;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  pthread_mutex_t lock; /* kernels, staging, counters */
  gpu_kernel **kernels;
  int nkernels;
  /* Transfers: a host-visible staging buffer in two halves, each with its
   * command buffer and fence, so one half fills while the other copies. */
  VkCommandPool xfer_pool;
  VkCommandBuffer xfer[2];
  VkFence xfer_fence[2];
  gpu_buffer *staging;
  /* Downloads land in host-cached memory where the device has it: reading the
   * write-combined staging above from the CPU is slow (NVIDIA's first
   * host-visible type is uncached). Else the same buffer as staging. */
  gpu_buffer *readback;
  /* gpu_upload_batch: uploads are copied into the half being filled and their
   * copies recorded in its command buffer, which is submitted when the half is
   * full, and before any other transfer or submission; big copies into
   * staging are split over `copiers`. */
  bool batch;
  int bhalf;          /* the half being filled */
  size_t bfill;       /* its bytes used */
  bool brecording;    /* xfer[bhalf] is open */
  bool bpending[2];   /* a half's copies were submitted and not yet waited for */
  struct pool *copiers;
  gpu_block *bblock;         /* the block buffers made during the batch go into */
  size_t bblocks, bbuffers;  /* blocks made, buffers put in them (for the log) */
  size_t bbytes, bcopies;    /* this batch's uploads (for the log) */
  double bcopy_s, bwait_s;   /* its time copying into staging, waiting for a half */
  gpu_rec *load_rec;  /* gpu_load_work's recorder */
  bool load_open;     /* it holds dispatches not yet run */
  gpu_buffer *lscratch[64]; /* gpu_load_scratch's buffers, freed once the load work has run */
  int nlscratch;
  size_t lscratch_bytes;
  bool q8_gpu; /* gpu_q8_split_force: Q8_0 split on the GPU even where memory is mapped */
  gpu_buffer *spare; /* bound where a kernel has fewer buffers than bindings */
  size_t used, peak;
  uint64_t serials;   /* buffers made so far (gpu_buffer.serial) */
  VkDebugUtilsMessengerEXT messenger; /* with STENO_VALIDATE */
  char invalid[512];  /* the first validation error since the last check */
  pthread_mutex_t invalid_lock; /* its own: messages arrive inside Vulkan calls made under `lock` */
  bool coop;       /* cooperative matrices and f16 arithmetic enabled at creation */
  bool coop2;      /* ... and cooperative_matrix2 (gpu_info.coop2) */
  bool fast_gemm;  /* a cooperative-matrix GEMM passed its probe */
  bool gemm_ok[GPU_GEMM_VARIANTS]; /* which ones (gpu_gemm_variant) */
  gpu_gemm_variant gemm_force;     /* GPU_GEMM_AUTO, or one for benchmarks */
  gpu_gemm_variant gemm_pick[2][2]; /* the fastest here, by [Q8_0][m ≥ GEMM_BIG_M]; AUTO: portable */
  enum { GPU_FAST_OFF, GPU_FAST_CHOSEN, GPU_FAST_ALL } use_fast; /* gpu_set_fast, fast_policy */
  bool fast[GPU_FAST_KINDS];   /* the other fast kernels that passed their probes */
  bool faster[GPU_FAST_KINDS]; /* ... and beat their portable twins here (or a CPU device) */
  gpu_buffer *scratch;          /* split-k GEMM partial sums (gpu_device_scratch) */
  gpu_buffer *scratch16;        /* a in f16 for gemm_tc (gpu_device_scratch16) */
  uint32_t a16_min_m;           /* gpu_gemm_a16: 0 the default */
  VkPipelineCache pcache;       /* pcache.c: loaded from disk at open, saved at close */
  int fast_policy;              /* STENO_FAST_* (steno_model_params.fast) */
  int no_cache;                 /* STENO_NO_*_CACHE bits */
  char cache_dir[1024];         /* the caches' folder ("": the default place) */
  char pcache_path[1024];       /* its file ("": none) */
  size_t pcache_loaded;         /* bytes read from it */
  bool pcache_made;             /* pipelines were made since */
  bool stats;                   /* STENO_PIPELINE_STATS: each kernel's compiled statistics logged */
  char ir_dir[1024];            /* STENO_PIPELINE_IR: where their internal representations go */
  pthread_mutex_t scratch_lock;
  pthread_mutex_t queue_lock;   /* Vulkan wants submissions to one queue serialized */
};

/* gpu_list on an instance the caller made (gpu_open lists and opens on one);
 * *handles (where handles is not NULL): the devices' handles in the same order,
 * malloc'd, so that the chosen one is opened without enumerating again. */
int gpu_list_instance(VkInstance inst, gpu_info **out, VkPhysicalDevice **handles, int *count);

/* vkQueueSubmit under the queue's lock: recorders of different sessions (threads)
 * and transfers share the device's one queue. */
VkResult gpu_queue_submit(gpu_device *d, const VkSubmitInfo *si, VkFence fence);

/* Runs the fast kernels' probes, and on a GPU times each one that passes
 * against its portable twin: the faster is chosen. */
void gpu_probe_fast(gpu_device *dev);

/* The device's scratch buffer of `bytes` (made at the first call; every
 * later call must ask for the same size), or NULL with the error set. Work on
 * one queue with full barriers between dispatches can share it. */
gpu_buffer *gpu_device_scratch(gpu_device *dev, size_t bytes);
/* The same for the f16 copies of a that gemm_tc reads at many rows (linear.c). */
gpu_buffer *gpu_device_scratch16(gpu_device *dev, size_t bytes);

/* The pipeline cache on disk (pcache.c): opened before the first pipeline,
 * written back at close if pipelines were made. */
void gpu_pcache_open(gpu_device *dev);
void gpu_pcache_close(gpu_device *dev);

/* The fast kernels' probe results and choices from disk (pcache.c): true if
 * a file of this device, driver and build set them; saved after probing. */
bool gpu_probe_cache_load(gpu_device *dev);
void gpu_probe_cache_save(const gpu_device *dev);

/* The fast GEMM variant a device uses without timing (m ≥ GEMM_BIG_M: big). */
gpu_gemm_variant gpu_gemm_default(const gpu_device *dev, bool big);

/* Workgroups for a fast row kernel (64 invocations, one subgroup per row). */
uint32_t gpu_subgroup_row_groups(const gpu_device *dev, uint32_t rows);

/* The kernel profiler (profile.c, STENO_PROFILE=1): timestamps after each
 * dispatch, summed per kernel and grid, printed to stderr when freed. */
typedef struct gpu_prof gpu_prof;
bool gpu_prof_wanted(void);
gpu_prof *gpu_prof_new(gpu_device *dev, const char *title); /* NULL: none */
void gpu_prof_begin(gpu_prof *g, VkCommandBuffer cb);
void gpu_prof_mark(gpu_prof *g, VkCommandBuffer cb, const gpu_kernel *k, uint32_t gx,
                   uint32_t gy, uint32_t gz);
void gpu_prof_collect(gpu_prof *g);
/* A call's host times: recording it, and from its submission to its fence. */
void gpu_prof_host(gpu_prof *g, double record_s, double wait_s);
void gpu_prof_free(gpu_prof *g);

int gpu_vk_error(VkResult r, const char *what);
int gpu_instance(VkInstance *out);
bool gpu_validating(void); /* STENO_VALIDATE is set */

/* STENO_ERR_GPU with the validation layer's first error since the last call, or 0. */
int gpu_check_valid(gpu_device *dev);
void gpu_probe(VkInstance inst, VkPhysicalDevice pd, int index, gpu_info *info);
int gpu_choose(const gpu_info *infos, int n, const steno_model_params *params, int *chosen);

/* A buffer in host-visible, coherent memory, mapped (staging, marks). */
int gpu_buffer_host(gpu_device *dev, size_t bytes, gpu_buffer **out);
/* The same in host-cached memory, for the CPU to read (an error where the
 * device has no such memory type for it). */
int gpu_buffer_host_cached(gpu_device *dev, size_t bytes, gpu_buffer **out);

#endif
