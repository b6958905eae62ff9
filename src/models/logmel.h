/* A family's log-mel features on the GPU (gpu/logmel.h: NeMo's, Whisper's)
 * from its CPU frontend's constants, and where they run: STENO_FEATURES=cpu or gpu decides;
 * by default the GPU where the device offers it and is not a CPU (lavapipe
 * makes the frames faster on the host's threads). A device's log-mel is
 * checked once against the CPU's at load, as a fast kernel's probe is, and
 * left unused if it differs. */
#ifndef STENO_MODELS_LOGMEL_H
#define STENO_MODELS_LOGMEL_H

#include "frontend/mel.h"
#include "frontend/whisper_mel.h"
#include "gpu/logmel.h"

/* The GPU kernels' view of the frontend (arrays borrowed from it). */
void logmel_config(const mel_frontend *mel, gpu_logmel_config *c);

/* *out: the GPU log-mel where it is to be used and passed its check, else
 * NULL (the CPU's features); an error only where memory or the device fail. */
int logmel_for_model(gpu_device *dev, const mel_frontend *mel, gpu_logmel **out);

/* The largest difference between the GPU's features and the CPU's over a test
 * signal of `samples` samples (the load's check: 0.6 s), or a negative status. */
double logmel_check(gpu_device *dev, const mel_frontend *mel, const gpu_logmel *lm, size_t samples);

/* The same for Whisper's frontend: its kernels' view of it, the model's
 * choice (checked against wmel_compute at load), and the check: the largest
 * difference over a test signal of `samples` samples padded to the window. */
void wmel_gpu_config(const wmel *mel, gpu_wmel_config *c);
int wmel_for_model(gpu_device *dev, const wmel *mel, gpu_wmel **out);
double wmel_check(gpu_device *dev, const wmel *mel, const gpu_wmel *wm, size_t samples);

#endif
