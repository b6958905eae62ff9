/* The bundled default model: what `steno run FILE...` uses when no model is named.
 * A small English CTC model trained on espeak-ng speech (docs/default-model.md). */
#ifndef STENO_DEFAULT_MODEL_H
#define STENO_DEFAULT_MODEL_H

#define DEFAULT_MODEL_FILE "steno-en-tiny-ctc.gguf"

/* Whether `arg`, the first operand of steno run, is an input rather than a model:
 * "-" (standard input), or an existing file whose name does not end in .gguf or
 * .bin and whose first bytes are not a model's magic (GGUF, whisper.cpp's ggml).
 * Anything else (a model path, a name to pull, a missing file or a folder) stays
 * the model, so its error reads as one. */
int default_model_applies(const char *arg);

/* The default model's path: $STENO_MODEL when set, else the first of
 * <executable's dir>/../share/steno/models/FILE (an installed steno) and
 * STENO_MODELS_DIR/FILE (the source tree it was built from) that exists.
 * Returns the path (kept until the next call), or NULL after printing where it
 * looked on stderr. */
const char *default_model_path(void);

#endif
