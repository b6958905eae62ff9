/* An experiment, outside the engine: a GEMM through VK_NV_cooperative_matrix2
 * (workgroup-scope matrices loaded by tensor addressing), on its own Vulkan
 * device with those features on. Debian 12's glslang cannot compile such a
 * kernel, so src/gpu/kernels/gemm_cm2.sh writes it as SPIR-V assembly (the
 * instructions spirv-as does not know as raw words) and spirv-as assembles
 * it; this program binds it as gpu_gemm would (a 0, W 3, the pieces 5).
 *
 *   cm2_gemm query                  what the device offers (extensions,
 *                                   features, workgroup-scope sizes)
 *   cm2_gemm run KERNEL.spv BM BN BK THREADS MxNxK[/S]...
 *                                   C = A·Bᵀ (A m×k, B n×k, f16; C f32), k cut
 *                                   into S pieces (partial sums side by side,
 *                                   added here as gemm_reduce would): checks
 *                                   sampled outputs against doubles on the CPU,
 *                                   then times the kernel alone (µs a call,
 *                                   TFLOP/s), warmed 200 ms first, best of 3
 *                                   submissions.
 * Only this program enables the features; nothing here reaches libsteno. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vulkan.h>

/* Debian 12's Vulkan headers (1.3.239) predate these; values from the
 * Vulkan registry. */
#define ST_COOPMAT_FEATURES_KHR 1000506000
#define ST_COOPMAT_PROPERTIES_KHR 1000506001
#define ST_COOPMAT2_FEATURES_NV 1000593000
#define ST_COOPMAT_FLEX_PROPERTIES_NV 1000593001
#define ST_COOPMAT2_PROPERTIES_NV 1000593002

typedef struct {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
} coopmat_features_khr;

typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t m, n, k, a, b, c, result;
  VkBool32 saturating;
  uint32_t scope;
} coopmat_props_khr;

typedef struct {
  VkStructureType sType;
  void *pNext;
  VkBool32 workgroup_scope, flexible_dimensions, reductions, conversions, per_element,
      tensor_addressing, block_loads;
} coopmat2_features;

typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t wg_max_size, flex_max_dimension, wg_reserved_shared;
} coopmat2_props;

typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t m_gran, n_gran, k_gran, a, b, c, result;
  VkBool32 saturating;
  uint32_t scope, invocations;
} coopmat_flex_props;

typedef VkResult(VKAPI_PTR *flex_fn)(VkPhysicalDevice, uint32_t *, coopmat_flex_props *);
typedef VkResult(VKAPI_PTR *khr_props_fn)(VkPhysicalDevice, uint32_t *, coopmat_props_khr *);

static void die(const char *what, VkResult r) {
  fprintf(stderr, "cm2_gemm: %s failed (%d)\n", what, (int)r);
  exit(1);
}
#define VK(call)                          \
  do {                                    \
    VkResult r_ = (call);                 \
    if (r_ != VK_SUCCESS) die(#call, r_); \
  } while (0)

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static VkInstance instance;
static VkPhysicalDevice phys;

static void open_instance(void) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "cm2_gemm",
                           .apiVersion = VK_API_VERSION_1_3};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pApplicationInfo = &app};
  VK(vkCreateInstance(&ci, NULL, &instance));
  uint32_t n = 0;
  VK(vkEnumeratePhysicalDevices(instance, &n, NULL));
  if (n == 0) die("no Vulkan device", VK_ERROR_INITIALIZATION_FAILED);
  VkPhysicalDevice list[8];
  n = n > 8 ? 8 : n;
  VK(vkEnumeratePhysicalDevices(instance, &n, list));
  phys = list[0];
  for (uint32_t i = 0; i < n; i++) { /* a discrete GPU first */
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(list[i], &p);
    if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) {
      phys = list[i];
      break;
    }
  }
}

static int has_extension(const char *name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL);
  VkExtensionProperties *e = calloc(n, sizeof *e);
  vkEnumerateDeviceExtensionProperties(phys, NULL, &n, e);
  int found = 0;
  for (uint32_t i = 0; i < n; i++) found |= strcmp(e[i].extensionName, name) == 0;
  free(e);
  return found;
}

static const char *type_name(uint32_t t) {
  static const char *names[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
  return t < 11 ? names[t] : "other";
}

static void query(void) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(phys, &p);
  printf("device %s, API %u.%u.%u, driver %u\n", p.deviceName, VK_VERSION_MAJOR(p.apiVersion),
         VK_VERSION_MINOR(p.apiVersion), VK_VERSION_PATCH(p.apiVersion), p.driverVersion);
  const char *ext[] = {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2",
                       "VK_NV_cooperative_matrix", "VK_EXT_cooperative_matrix_maintenance1",
                       "VK_KHR_vulkan_memory_model", "VK_KHR_shader_float16_int8"};
  for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
    printf("  %-40s %s\n", ext[i], has_extension(ext[i]) ? "yes" : "no");
  coopmat2_features f2 = {.sType = ST_COOPMAT2_FEATURES_NV};
  coopmat_features_khr fk = {.sType = ST_COOPMAT_FEATURES_KHR, .pNext = &f2};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &fk};
  vkGetPhysicalDeviceFeatures2(phys, &f);
  printf("KHR coopmat %u; cm2: workgroup scope %u, flexible dims %u, reductions %u, conversions %u, "
         "per-element %u, tensor addressing %u, block loads %u\n",
         fk.cooperativeMatrix, f2.workgroup_scope, f2.flexible_dimensions, f2.reductions, f2.conversions,
         f2.per_element, f2.tensor_addressing, f2.block_loads);
  coopmat2_props p2 = {.sType = ST_COOPMAT2_PROPERTIES_NV};
  VkPhysicalDeviceProperties2 pp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p2};
  vkGetPhysicalDeviceProperties2(phys, &pp);
  printf("cm2 properties: workgroup-scope max workgroup size %u, flexible max dimension %u, reserved shared %u\n",
         p2.wg_max_size, p2.flex_max_dimension, p2.wg_reserved_shared);
  khr_props_fn kp = (khr_props_fn)vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  if (kp) {
    uint32_t n = 0;
    kp(phys, &n, NULL);
    coopmat_props_khr *l = calloc(n, sizeof *l);
    for (uint32_t i = 0; i < n; i++) l[i].sType = ST_COOPMAT_PROPERTIES_KHR;
    kp(phys, &n, l);
    for (uint32_t i = 0; i < n; i++)
      printf("  KHR %ux%ux%u %s·%s+%s→%s scope %u\n", l[i].m, l[i].n, l[i].k, type_name(l[i].a),
             type_name(l[i].b), type_name(l[i].c), type_name(l[i].result), l[i].scope);
    free(l);
  }
  flex_fn ff = (flex_fn)vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
  if (ff) {
    uint32_t n = 0;
    ff(phys, &n, NULL);
    coopmat_flex_props *l = calloc(n, sizeof *l);
    for (uint32_t i = 0; i < n; i++) l[i].sType = ST_COOPMAT_FLEX_PROPERTIES_NV;
    ff(phys, &n, l);
    for (uint32_t i = 0; i < n; i++)
      printf("  flex granularity %ux%ux%u %s·%s+%s→%s scope %u, %u invocations\n", l[i].m_gran, l[i].n_gran,
             l[i].k_gran, type_name(l[i].a), type_name(l[i].b), type_name(l[i].c), type_name(l[i].result),
             l[i].scope, l[i].invocations);
    free(l);
  }
}

/* ---- run ---- */

static VkDevice dev;
static VkQueue queue;
static uint32_t queue_family;
static VkPhysicalDeviceMemoryProperties mem_props;

static void open_device(void) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, NULL);
  VkQueueFamilyProperties q[16];
  n = n > 16 ? 16 : n;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, q);
  queue_family = 0;
  for (uint32_t i = 0; i < n; i++)
    if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family = i;
      break;
    }
  float prio = 1;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = queue_family,
                                .queueCount = 1,
                                .pQueuePriorities = &prio};
  coopmat2_features f2 = {.sType = ST_COOPMAT2_FEATURES_NV,
                          .workgroup_scope = 1,
                          .flexible_dimensions = 1,
                          .tensor_addressing = 1};
  coopmat_features_khr fk = {.sType = ST_COOPMAT_FEATURES_KHR, .pNext = &f2, .cooperativeMatrix = 1};
  VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                          .pNext = &fk,
                                          .subgroupSizeControl = 1,
                                          .computeFullSubgroups = 1};
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                          .pNext = &f13,
                                          .shaderFloat16 = 1,
                                          .vulkanMemoryModel = 1};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                          .pNext = &f12,
                                          .storageBuffer16BitAccess = 1};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  const char *ext[] = {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"};
  VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                           .pNext = &f,
                           .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi,
                           .enabledExtensionCount = 2,
                           .ppEnabledExtensionNames = ext};
  VK(vkCreateDevice(phys, &ci, NULL, &dev));
  vkGetDeviceQueue(dev, queue_family, 0, &queue);
  vkGetPhysicalDeviceMemoryProperties(phys, &mem_props);
}

typedef struct {
  VkBuffer buf;
  VkDeviceMemory mem;
  void *map; /* host-visible buffers only */
} buffer;

/* A buffer in memory with exactly these properties wanted (the first type
 * that has them all). The kernel's operands live in device-local memory,
 * staged through a host-visible buffer, and the check reads host copies in
 * ordinary memory: the fifteenth session's version took host-visible memory
 * (device-local where the driver offered it so, else the host's, which the
 * H200 would read over PCIe) and checked by reading the mapped, uncached
 * inputs back — 4096³ and 1500 × 5120 × 1280 did not finish in 40 s. */
static buffer make_buffer(VkDeviceSize size, VkMemoryPropertyFlags want, VkBufferUsageFlags usage) {
  buffer b = {0};
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = usage};
  VK(vkCreateBuffer(dev, &bi, NULL, &b.buf));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, b.buf, &req);
  for (uint32_t i = 0; i < mem_props.memoryTypeCount && !b.mem; i++) {
    if (!(req.memoryTypeBits & (1u << i)) || (mem_props.memoryTypes[i].propertyFlags & want) != want) continue;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = i};
    if (vkAllocateMemory(dev, &ai, NULL, &b.mem) != VK_SUCCESS) b.mem = VK_NULL_HANDLE;
  }
  if (!b.mem) die("allocating a buffer", VK_ERROR_OUT_OF_DEVICE_MEMORY);
  VK(vkBindBufferMemory(dev, b.buf, b.mem, 0));
  if (want & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) VK(vkMapMemory(dev, b.mem, 0, VK_WHOLE_SIZE, 0, &b.map));
  return b;
}

static buffer device_buffer(VkDeviceSize size) {
  return make_buffer(size, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                     VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                         VK_BUFFER_USAGE_TRANSFER_DST_BIT);
}

static buffer staging_buffer(VkDeviceSize size) {
  return make_buffer(size, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT);
}

static void free_buffer(buffer *b) {
  if (b->map) vkUnmapMemory(dev, b->mem);
  vkDestroyBuffer(dev, b->buf, NULL);
  vkFreeMemory(dev, b->mem, NULL);
}

/* Copies size bytes from one buffer to another and waits. */
static void copy_buffer(VkCommandBuffer cb, VkFence fence, VkBuffer from, VkBuffer to, VkDeviceSize size) {
  VK(vkResetCommandBuffer(cb, 0));
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VK(vkBeginCommandBuffer(cb, &bi));
  VkBufferCopy region = {0, 0, size};
  vkCmdCopyBuffer(cb, from, to, 1, &region);
  VK(vkEndCommandBuffer(cb));
  VkSubmitInfo sub = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  VK(vkResetFences(dev, 1, &fence));
  VK(vkQueueSubmit(queue, 1, &sub, fence));
  VK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
}

static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
  int ee = (int)e - 127 + 15;
  if (ee <= 0) return (uint16_t)sign; /* the inputs here are never that small */
  if (ee >= 31) return (uint16_t)(sign | 0x7c00);
  uint32_t h = sign | ((uint32_t)ee << 10) | (m >> 13);
  uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)h;
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  uint32_t x;
  if (e == 0) {
    float f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  x = sign | ((e - 15 + 127) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rand_unit(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((rng >> 40) & 0xffffff) / 16777216.0f * 2 - 1;
}

typedef struct { /* gemm_tc's */
  uint32_t m, n, k, mode;
  float alpha;
  uint32_t dual, lda, wk, splits, kc;
} push;

static int run(const char *path, uint32_t bm, uint32_t bn, uint32_t bk, uint32_t threads, int argc, char **argv) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "cm2_gemm: cannot open %s\n", path), 1;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint32_t *code = malloc((size_t)size);
  if (fread(code, 1, (size_t)size, f) != (size_t)size) return fprintf(stderr, "cm2_gemm: short read\n"), 1;
  fclose(f);
  open_device();

  VkDescriptorSetLayoutBinding bind[6];
  for (int i = 0; i < 6; i++)
    bind[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                             .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                             .descriptorCount = 1,
                                             .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                         .bindingCount = 6,
                                         .pBindings = bind};
  VkDescriptorSetLayout dsl;
  VK(vkCreateDescriptorSetLayout(dev, &dli, NULL, &dsl));
  VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = sizeof(push)};
  VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .setLayoutCount = 1,
                                    .pSetLayouts = &dsl,
                                    .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pr};
  VkPipelineLayout pl;
  VK(vkCreatePipelineLayout(dev, &pli, NULL, &pl));
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = (size_t)size,
                                  .pCode = code};
  VkShaderModule sm;
  VK(vkCreateShaderModule(dev, &smi, NULL, &sm));
  /* gemm_tc's numbering: SG_M = SG_N = 1, TM = BM / 16, TN = BN / 16 */
  uint32_t spec[8] = {1, 1, 1, bm / 16, bn / 16, threads, bk, 1};
  VkSpecializationMapEntry me[8];
  for (int i = 0; i < 8; i++) me[i] = (VkSpecializationMapEntry){(uint32_t)i, (uint32_t)(4 * i), 4};
  VkSpecializationInfo si = {8, me, sizeof spec, spec};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
      .requiredSubgroupSize = 32};
  VkComputePipelineCreateInfo cpi = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .pNext = &rss,
                .flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = sm,
                .pName = "main",
                .pSpecializationInfo = &si},
      .layout = pl};
  VkPipeline pipe;
  double t0 = now_ms();
  VK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &pipe));
  printf("pipeline %ux%ux%u, %u invocations: made in %.1f ms\n", bm, bn, bk, threads, now_ms() - t0);

  VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 6};
  VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                    .maxSets = 1,
                                    .poolSizeCount = 1,
                                    .pPoolSizes = &ps};
  VkDescriptorPool dp;
  VK(vkCreateDescriptorPool(dev, &dpi, NULL, &dp));
  VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = queue_family};
  VkCommandPool cp;
  VK(vkCreateCommandPool(dev, &cpci, NULL, &cp));
  VkCommandBufferAllocateInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .commandPool = cp,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
  VkCommandBuffer cb;
  VK(vkAllocateCommandBuffers(dev, &cbi, &cb));
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  VK(vkCreateFence(dev, &fci, NULL, &fence));

  int failed = 0;
  for (int s = 0; s < argc; s++) {
    push p = {0};
    uint32_t splits = 1;
    if (sscanf(argv[s], "%ux%ux%u/%u", &p.m, &p.n, &p.k, &splits) < 3 || !p.m || !p.n || !p.k || !splits ||
        bm % 16 || bn % 16)
      return fprintf(stderr, "cm2_gemm: bad shape %s (MxNxK[/S])\n", argv[s]), 2;
    p.kc = (p.k + splits - 1) / splits;
    p.kc = (p.kc + bk - 1) / bk * bk;
    splits = (p.k + p.kc - 1) / p.kc;
    p.splits = splits, p.lda = p.wk = p.k;
    size_t na = (size_t)p.m * p.k, nb = (size_t)p.n * p.k, nc = (size_t)splits * p.m * p.n;
    uint16_t *ah = malloc(na * 2), *bh = malloc(nb * 2);
    float *ch = malloc(nc * 4);
    if (!ah || !bh || !ch) return fprintf(stderr, "cm2_gemm: out of memory\n"), 1;
    for (size_t i = 0; i < na; i++) ah[i] = to_half(rand_unit());
    for (size_t i = 0; i < nb; i++) bh[i] = to_half(rand_unit());
    /* a's rows up to the next multiple of bm: the unclamped variants read them */
    size_t na_pad = (size_t)(p.m + bm - 1) / bm * bm * p.k;
    buffer a = device_buffer(na_pad * 2), b = device_buffer(nb * 2), c = device_buffer(nc * 4);
    buffer stage = staging_buffer(nc * 4 > na * 2 ? nc * 4 > nb * 2 ? nc * 4 : nb * 2 : na * 2 > nb * 2 ? na * 2 : nb * 2);
    memcpy(stage.map, ah, na * 2);
    copy_buffer(cb, fence, stage.buf, a.buf, na * 2);
    memcpy(stage.map, bh, nb * 2);
    copy_buffer(cb, fence, stage.buf, b.buf, nb * 2);
    memset(stage.map, 0xff, nc * 4); /* NaN: an unwritten output shows */
    copy_buffer(cb, fence, stage.buf, c.buf, nc * 4);
    VkDescriptorSet set;
    VK(vkResetDescriptorPool(dev, dp, 0));
    VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                       .descriptorPool = dp,
                                       .descriptorSetCount = 1,
                                       .pSetLayouts = &dsl};
    VK(vkAllocateDescriptorSets(dev, &dai, &set));
    VkDescriptorBufferInfo dbi[6] = {{a.buf, 0, VK_WHOLE_SIZE}, {c.buf, 0, VK_WHOLE_SIZE}, {c.buf, 0, VK_WHOLE_SIZE},
                                     {b.buf, 0, VK_WHOLE_SIZE}, {c.buf, 0, VK_WHOLE_SIZE}, {c.buf, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[6];
    for (int i = 0; i < 6; i++)
      w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                    .dstSet = set,
                                    .dstBinding = (uint32_t)i,
                                    .descriptorCount = 1,
                                    .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                    .pBufferInfo = &dbi[i]};
    vkUpdateDescriptorSets(dev, 6, w, 0, NULL);
    uint32_t gx = (p.n + bn - 1) / bn, gy = (p.m + bm - 1) / bm;
    /* reps dispatches a submission, a barrier between them as the engine records them */
    double flop = 2.0 * p.m * p.n * p.k;
    int reps = (int)(2e10 / flop);
    reps = reps < 1 ? 1 : reps > 200 ? 200 : reps;
    double best = 1e30;
    for (int pass = 0; pass < 5; pass++) {
      int count = pass == 0 ? 1 : reps;
      VK(vkResetCommandBuffer(cb, 0));
      VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      VK(vkBeginCommandBuffer(cb, &bi));
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
      vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &set, 0, NULL);
      vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof p, &p);
      for (int r = 0; r < count; r++) {
        vkCmdDispatch(cb, gx, gy, splits);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &mb, 0, NULL, 0, NULL);
      }
      VK(vkEndCommandBuffer(cb));
      VkSubmitInfo sub = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
      /* pass 0: one call to check; pass 1: 200 ms of warming; then three timed */
      double until = now_ms() + (pass == 1 ? 200 : 0);
      do {
        VK(vkResetFences(dev, 1, &fence));
        double s0 = now_ms();
        VK(vkQueueSubmit(queue, 1, &sub, fence));
        VK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        double dt = now_ms() - s0;
        if (pass >= 2 && dt < best) best = dt;
      } while (now_ms() < until);
      if (pass == 0) { /* check sampled outputs */
        copy_buffer(cb, fence, c.buf, stage.buf, nc * 4);
        memcpy(ch, stage.map, nc * 4);
        double worst = 0;
        int bad = 0;
        for (int t = 0; t < 4096; t++) {
          uint32_t i = (uint32_t)(t * 2654435761u) % p.m, j = (uint32_t)(t * 40503u + 7) % p.n;
          if (t < 4) i = t & 1 ? p.m - 1 : 0, j = t & 2 ? p.n - 1 : 0; /* the corners */
          double ref = 0, mag = 0;
          for (uint32_t x = 0; x < p.k; x++) {
            double v = (double)from_half(ah[(size_t)i * p.k + x]) * from_half(bh[(size_t)j * p.k + x]);
            ref += v, mag += fabs(v);
          }
          double got = 0;
          for (uint32_t z = 0; z < splits; z++) got += ch[((size_t)z * p.m + i) * p.n + j];
          double err = fabs(got - ref) / (mag + 1e-30);
          if (!(err <= 1e-5)) bad++;
          if (err > worst || err != err) worst = err;
        }
        printf("  %ux%ux%u/%u: %s (worst relative error %.2e, %d of 4096 samples off)\n", p.m, p.n, p.k,
               splits, bad ? "WRONG" : "correct", worst, bad);
        failed |= bad != 0;
      }
    }
    double us = best / reps * 1e3;
    printf("  %ux%ux%u/%u: %.2f us a call (%d a submission), %.1f TFLOP/s, grid %ux%ux%u\n", p.m, p.n, p.k,
           splits, us, reps, flop / us * 1e-6, gx, gy, splits);
    free_buffer(&a), free_buffer(&b), free_buffer(&c), free_buffer(&stage);
    free(ah), free(bh), free(ch);
  }
  return failed;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* lines out as they come: a run cut short keeps them */
  if (argc < 2) {
    fprintf(stderr, "usage: cm2_gemm query | run KERNEL.spv BM BN BK THREADS MxNxK[/S]...\n");
    return 2;
  }
  open_instance();
  if (!strcmp(argv[1], "query")) {
    query();
    return 0;
  }
  if (!strcmp(argv[1], "run") && argc >= 7)
    return run(argv[2], (uint32_t)atoi(argv[3]), (uint32_t)atoi(argv[4]), (uint32_t)atoi(argv[5]),
               (uint32_t)atoi(argv[6]), argc - 7, argv + 7);
  fprintf(stderr, "usage: cm2_gemm query | run KERNEL.spv BM BN BK THREADS MxNxK[/S]...\n");
  return 2;
}
