/* The frontends' frame loop spread over the CPU's cores. Frames are
 * independent, and each chunk starts at an even frame (frames go through the
 * FFT in pairs), so the result is the same however the frames are split. */
#ifndef STENO_FRONTEND_FRAMES_H
#define STENO_FRONTEND_FRAMES_H

#include <stddef.h>

enum { FRAMES_MAX_CHUNKS = 16 };

/* Computes frames [t0, t1) of chunk `chunk` with `scratch` to itself. */
typedef void (*frames_fn)(void *ctx, size_t t0, size_t t1, int chunk, double *scratch);

/* Runs fn over frames [0, count) in at most FRAMES_MAX_CHUNKS chunks (one
 * thread each, one per online CPU, a few hundred frames at least), giving each
 * chunk `scratch` doubles of its own. STENO_ERR_NOMEM when those cannot be had. */
int frames_run(size_t count, size_t scratch, frames_fn fn, void *ctx);

#endif
