/* The frontends' frame loop spread over the CPU's cores. Frames are
 * independent, and each chunk starts at an even frame (frames go through the
 * FFT in pairs), so the result is the same however the frames are split; so
 * are clips, so a batch's clips can run side by side (frames_run_clips). */
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

/* Computes one clip's features (its frames_run inside); a status. */
typedef int (*frames_clip_fn)(void *ctx, int clip);

/* Runs fn for clips [0, clips) side by side: one clip per thread at a time on
 * min(clips, CPUs) threads (the calling thread's pool_limit_threads counts as
 * the CPUs), each clip's frames_run taking its share of the CPUs (CPUs /
 * threads, at least 1), so the outputs are the ones the clips get one after
 * another. Every clip runs; the status and message are those of the first
 * clip in order that failed, as one after another would stop at. */
int frames_run_clips(int clips, frames_clip_fn fn, void *ctx);

#endif
