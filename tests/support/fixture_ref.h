/* Reading the reference dumps (tests/fixtures/NAME.ref.gguf, written by the
 * scripts/dump_*.py scripts): per clip, tensors named CLIP.WHAT and keys named
 * ref.CLIP.WHAT. */
#ifndef STENO_TEST_FIXTURE_REF_H
#define STENO_TEST_FIXTURE_REF_H

#include <stddef.h>

#include "io/gguf.h"

/* Tensor `clip.what` as floats (the file's own memory) and its count in *n;
 * NULL (a failed check) where it is missing or not F32. */
const float *ref_tensor(const gguf_file *ref, const char *clip, const char *what, size_t *n);

/* Key `ref.clip.what`; NULL (a failed check) where it is missing. */
const gguf_kv *ref_key(const gguf_file *ref, const char *clip, const char *what);

/* Largest |got − want| over n values. */
float max_abs(const float *got, const float *want, size_t n);

#endif
