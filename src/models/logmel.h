/* A family's NeMo log-mel features on the GPU (gpu/logmel.h) from its CPU
 * frontend's constants, and where they run: STENO_FEATURES=cpu or gpu decides;
 * by default the GPU where the device offers it and is not a CPU (lavapipe
 * makes the frames faster on the host's threads). A device's log-mel is
 * checked once against the CPU's at load, as a fast kernel's probe is, and
 * left unused if it differs. */
#ifndef STENO_MODELS_LOGMEL_H
#define STENO_MODELS_LOGMEL_H

#include "frontend/mel.h"
#include "gpu/logmel.h"

/* The GPU kernels' view of the frontend (arrays borrowed from it). */
void logmel_config(const mel_frontend *mel, gpu_logmel_config *c);

/* *out: the GPU log-mel where it is to be used and passed its check, else
 * NULL (the CPU's features); an error only where memory or the device fail. */
int logmel_for_model(gpu_device *dev, const mel_frontend *mel, gpu_logmel **out);

/* The largest difference between the GPU's features and the CPU's over a test
 * signal of `samples` samples (the load's check: 0.6 s), or a negative status. */
double logmel_check(gpu_device *dev, const mel_frontend *mel, const gpu_logmel *lm, size_t samples);

#endif
