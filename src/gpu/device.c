/* Vulkan instance, device selection and the feature probe. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"
#include "gpu/internal.h"

int gpu_vk_error(VkResult r, const char *what) {
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return err_set(STENO_ERR_NOMEM, "%s: out of %s memory", what,
                     r == VK_ERROR_OUT_OF_HOST_MEMORY ? "host" : "device");
    case VK_ERROR_DEVICE_LOST:
      return err_set(STENO_ERR_GPU, "%s: the GPU device was lost (driver reset or crash)", what);
    default:
      return err_set(STENO_ERR_GPU, "%s failed (VkResult %d)", what, (int)r);
  }
}

static const char no_driver[] =
    "no Vulkan device found: install your GPU's Vulkan driver, or Mesa's lavapipe to run on the "
    "CPU (Debian/Ubuntu: apt-get install libvulkan1 mesa-vulkan-drivers)";

static bool has_extension(const VkExtensionProperties *ext, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(ext[i].extensionName, name)) return true;
  return false;
}

bool gpu_validating(void) {
  const char *validate = getenv("STENO_VALIDATE");
  return validate && *validate && strcmp(validate, "0");
}

int gpu_instance(VkInstance *out) {
  VkApplicationInfo app = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = "steno",
      .apiVersion = VK_API_VERSION_1_2,
  };
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pApplicationInfo = &app};
  const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char *ext[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  if (gpu_validating()) {
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = ext;
  }
  VkResult r = vkCreateInstance(&ci, NULL, out);
  if (r == VK_ERROR_LAYER_NOT_PRESENT)
    return err_set(STENO_ERR_GPU,
                   "STENO_VALIDATE is set but the validation layer is missing "
                   "(apt-get install vulkan-validationlayers)");
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) return err_set(STENO_ERR_GPU, "%s", no_driver);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "vkCreateInstance");
  return 0;
}

static const char *type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

static const char *component_name(uint32_t t) {
  /* VkComponentTypeKHR/NV share values. */
  static const char *names[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64",
                                "u8",  "u16", "u32", "u64"};
  if (t < 11) return names[t];
  if (t == 1000141000) return "bf16";
  return "?";
}

static void append(char *dst, size_t cap, const char *s) {
  size_t n = strlen(dst);
  if (n + 1 < cap) snprintf(dst + n, cap - n, "%s", s);
}

static void probe_coop(VkInstance inst, VkPhysicalDevice pd, gpu_info *info) {
  char shape[64];
  if (info->coop_khr) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (get && get(pd, &n, NULL) == VK_SUCCESS && n) {
      VkCooperativeMatrixPropertiesKHR *p = calloc(n, sizeof *p);
      for (uint32_t i = 0; p && i < n; i++) p[i].sType = STENO_STYPE_COOP_PROPS_KHR;
      if (p && get(pd, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) {
          snprintf(shape, sizeof shape, "%s%ux%ux%u %s→%s", info->coop_shapes[0] ? ", " : "",
                   p[i].MSize, p[i].NSize, p[i].KSize, component_name(p[i].AType),
                   component_name(p[i].ResultType));
          append(info->coop_shapes, sizeof info->coop_shapes, shape);
        }
      free(p);
    }
  } else if (info->coop_nv) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (get && get(pd, &n, NULL) == VK_SUCCESS && n) {
      VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
      for (uint32_t i = 0; p && i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
      if (p && get(pd, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) {
          snprintf(shape, sizeof shape, "%s%ux%ux%u %s→%s", info->coop_shapes[0] ? ", " : "",
                   p[i].MSize, p[i].NSize, p[i].KSize, component_name(p[i].AType),
                   component_name(p[i].DType));
          append(info->coop_shapes, sizeof info->coop_shapes, shape);
        }
      free(p);
    }
  }
}

void gpu_probe(VkInstance inst, VkPhysicalDevice pd, int index, gpu_info *info) {
  memset(info, 0, sizeof *info);
  info->index = index;
  VkPhysicalDeviceDriverProperties driver = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties sub = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &driver};
  VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                       .pNext = &sub};
  vkGetPhysicalDeviceProperties2(pd, &props);
  const VkPhysicalDeviceProperties *p = &props.properties;
  snprintf(info->name, sizeof info->name, "%s", p->deviceName);
  snprintf(info->driver, sizeof info->driver, "%s %s", driver.driverName, driver.driverInfo);
  info->type = type_name(p->deviceType);
  info->api_version = p->apiVersion;
  info->subgroup_size = sub.subgroupSize;
  bool compute = sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT;
  info->subgroup_arithmetic = compute && (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  info->subgroup_shuffle = compute && (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  info->subgroup_ballot = compute && (sub.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
  info->max_workgroup_invocations = p->limits.maxComputeWorkGroupInvocations;
  info->max_shared_memory = p->limits.maxComputeSharedMemorySize;
  info->max_storage_buffer_range = p->limits.maxStorageBufferRange;

  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  uint32_t next = 0;
  vkEnumerateDeviceExtensionProperties(pd, NULL, &next, NULL);
  VkExtensionProperties *ext = calloc(next ? next : 1, sizeof *ext);
  if (ext) vkEnumerateDeviceExtensionProperties(pd, NULL, &next, ext);
  else next = 0;
  bool dot_ext = p->apiVersion >= VK_API_VERSION_1_3 ||
                 has_extension(ext, next, "VK_KHR_shader_integer_dot_product");
  if (dot_ext) f12.pNext = &dot;
  VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                     .pNext = &f11};
  if (p->apiVersion >= VK_API_VERSION_1_2) {
    vkGetPhysicalDeviceFeatures2(pd, &feats);
    info->storage_16bit = f11.storageBuffer16BitAccess;
    info->float16 = f12.shaderFloat16;
    info->int8 = f12.shaderInt8;
    info->storage_8bit = f12.storageBuffer8BitAccess;
    info->int_dot = dot_ext && dot.shaderIntegerDotProduct;
    info->float64 = feats.features.shaderFloat64;
  }
  info->bf16 = has_extension(ext, next, "VK_KHR_shader_bfloat16");
  info->coop_khr = has_extension(ext, next, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  info->coop_nv = has_extension(ext, next, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  info->exe_stats = has_extension(ext, next, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  if (info->coop_khr && has_extension(ext, next, GPU_VK_COOP2_EXTENSION) &&
      p->apiVersion >= VK_API_VERSION_1_2) {
    gpu_vk_coop2_features c2 = {.sType = GPU_STYPE_COOP2_FEATURES};
    gpu_vk_coop_khr_features ck = {.sType = GPU_STYPE_COOP_KHR_FEATURES, .pNext = &c2};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &ck};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    info->coop2 = ck.cooperative_matrix && c2.workgroup_scope && c2.flexible_dimensions &&
                  c2.tensor_addressing && f12.vulkanMemoryModel;
  }
  if (has_extension(ext, next, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sm};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    info->sm_count = sm.shaderSMCount;
  }
  free(ext);
  probe_coop(inst, pd, info);

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; i++)
    if ((mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        mem.memoryHeaps[i].size > info->device_memory)
      info->device_memory = mem.memoryHeaps[i].size;
  bool mappable_local = false;
  for (uint32_t i = 0; i < mem.memoryTypeCount; i++) {
    VkMemoryPropertyFlags f = mem.memoryTypes[i].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
        (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
      mappable_local = true;
  }
  /* A discrete GPU may map a small BAR window too; only unified devices map everything. */
  info->unified = mappable_local && p->deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
}

int gpu_list_instance(VkInstance inst, gpu_info **out, VkPhysicalDevice **handles, int *count) {
  *out = NULL;
  if (handles) *handles = NULL;
  *count = 0;
  uint32_t n = 0;
  VkResult r = vkEnumeratePhysicalDevices(inst, &n, NULL);
  if (r != VK_SUCCESS || n == 0)
    return r != VK_SUCCESS ? gpu_vk_error(r, "vkEnumeratePhysicalDevices")
                           : err_set(STENO_ERR_GPU, "%s", no_driver);
  VkPhysicalDevice *pds = mem_alloc(n, sizeof *pds);
  gpu_info *infos = mem_alloc(n, sizeof *infos);
  if (!pds || !infos) {
    free(pds);
    free(infos);
    return STENO_ERR_NOMEM;
  }
  vkEnumeratePhysicalDevices(inst, &n, pds);
  for (uint32_t i = 0; i < n; i++) gpu_probe(inst, pds[i], (int)i, &infos[i]);
  if (handles) *handles = pds;
  else free(pds);
  *out = infos;
  *count = (int)n;
  return 0;
}

int gpu_list(gpu_info **out, int *count) {
  VkInstance inst;
  TRY(gpu_instance(&inst));
  int st = gpu_list_instance(inst, out, NULL, count);
  vkDestroyInstance(inst, NULL);
  return st;
}

/* params' device by index or by part of its name; else discrete, integrated,
 * virtual, cpu. */
int gpu_choose(const gpu_info *infos, int n, const steno_model_params *p, int *chosen) {
  const char *want = p->device_name && *p->device_name ? p->device_name : NULL;
  if (want && p->device >= 0)
    return err_set(STENO_ERR_INVALID, "device %d and device name '%s': set one, not both", p->device, want);
  if (want) {
    for (int j = 0; j < n; j++)
      if (strcasestr(infos[j].name, want)) {
        *chosen = j;
        return 0;
      }
    return err_set(STENO_ERR_GPU, "device '%s': no device's name contains it (steno devices lists them)", want);
  }
  if (p->device >= n || p->device < -1)
    return err_set(STENO_ERR_GPU, "device %d: there %s %d device%s (0..%d; steno devices lists them)",
                   p->device, n == 1 ? "is" : "are", n, n == 1 ? "" : "s", n - 1);
  if (p->device >= 0) {
    *chosen = p->device;
    return 0;
  }
  static const char *order[] = {"discrete", "integrated", "virtual", "cpu", "other"};
  for (int o = 0; o < 5; o++)
    for (int j = 0; j < n; j++)
      if (!strcmp(infos[j].type, order[o])) {
        *chosen = j;
        return 0;
      }
  *chosen = 0;
  return 0;
}

void gpu_info_print(const gpu_info *d, FILE *out) {
  fprintf(out, "%d: %s (%s)\n", d->index, d->name, d->type);
  fprintf(out, "   driver: %s, Vulkan %u.%u.%u\n", d->driver, VK_API_VERSION_MAJOR(d->api_version),
          VK_API_VERSION_MINOR(d->api_version), VK_API_VERSION_PATCH(d->api_version));
  fprintf(out, "   memory: %.1f GiB device-local%s\n", (double)d->device_memory / (1 << 30),
          d->unified ? " (unified with the host)" : "");
  fprintf(out, "   subgroup: %u lanes%s%s%s\n", d->subgroup_size,
          d->subgroup_arithmetic ? ", arithmetic" : "", d->subgroup_shuffle ? ", shuffle" : "",
          d->subgroup_ballot ? ", ballot" : "");
  fprintf(out, "   16-bit storage: %s, f16 arithmetic: %s, 8-bit storage: %s, int8: %s, f64: %s\n",
          d->storage_16bit ? "yes" : "no", d->float16 ? "yes" : "no",
          d->storage_8bit ? "yes" : "no", d->int8 ? "yes" : "no", d->float64 ? "yes" : "no");
  fprintf(out, "   integer dot product: %s, bf16: %s\n", d->int_dot ? "yes" : "no",
          d->bf16 ? "yes" : "no");
  fprintf(out, "   cooperative matrix: %s%s%s%s\n",
          d->coop_khr ? "KHR" : "", d->coop_khr && d->coop_nv ? " and NV" : d->coop_nv ? "NV" : "",
          !d->coop_khr && !d->coop_nv ? "no" : "", d->coop2 ? ", NV cooperative_matrix2" : "");
  if (d->coop_shapes[0]) fprintf(out, "      %s\n", d->coop_shapes);
  fprintf(out, "   workgroup: %u invocations, %u bytes shared\n", d->max_workgroup_invocations,
          d->max_shared_memory);
  if (d->sm_count) fprintf(out, "   streaming multiprocessors: %u\n", d->sm_count);
}
