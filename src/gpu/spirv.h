/* The kernels' SPIR-V, embedded at build time (see cmake/embed_spirv.cmake). */
#ifndef STENO_GPU_SPIRV_H
#define STENO_GPU_SPIRV_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const char *name;      /* the .comp file's name without extension */
  const uint32_t *words;
  size_t size;           /* bytes */
} gpu_spirv_entry;

extern const gpu_spirv_entry gpu_spirv[]; /* ends with a NULL name */

#endif
