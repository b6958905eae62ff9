/* Allocation helpers with overflow checks: a size that overflows or an
 * allocation that fails sets STENO_ERR_NOMEM and returns NULL. */
#ifndef STENO_BASE_MEM_H
#define STENO_BASE_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* a·b into *out; false on overflow. */
static inline bool mul_ok(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool add_ok(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

void *mem_alloc(size_t n, size_t size);   /* zeroed; n·size checked */
void *mem_realloc(void *p, size_t n, size_t size);
char *mem_strdup(const char *s);

#endif
