/* What the loader tests share: a model file rewritten with changes (through
 * gw_rewrite) and opened from memory, and the check that a family's loader
 * refuses such a copy with a message naming the culprit. */
#ifndef STENO_TEST_LOAD_CHECK_H
#define STENO_TEST_LOAD_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf_write.h"
#include "io/gguf.h"

/* src rewritten with e, opened from memory (one check: that it opens; NULL if
 * not). *bytes holds the file's image: free it after gguf_close. */
gguf_file *lc_rewrite(const gguf_file *src, gw_edit e, uint8_t **bytes);

/* A family's loader as the checks call it: loads f on the test device, frees
 * whatever it made, sets *made to whether it gave a model, returns its status. */
typedef int (*lc_loader)(const gguf_file *f, bool *made);

/* Loading src rewritten with e fails: a status other than 0 (want_st where that
 * is not 0), no model, and a message containing `want` (three checks). */
void lc_load_fails(const gguf_file *src, gw_edit e, lc_loader load, int want_st, const char *want);

#endif
