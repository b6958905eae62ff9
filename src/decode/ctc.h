/* CTC greedy decoding (as NeMo's, and transcribe.cpp's): argmax per frame,
 * runs of one label collapsed, blank (the last class) dropped; and the forced
 * alignment of a known transcript. */
#ifndef STENO_DECODE_CTC_H
#define STENO_DECODE_CTC_H

#include "decode/tokens.h"

/* logits [t][stride], the first `classes` of each row used; blank = classes − 1.
 * Each token starts at the first frame of its run and spans 1 frame; p is the
 * softmax probability of the label there. */
int ctc_greedy(const float *logits, int t, int classes, int stride, dec_tokens *out);

/* CTC forced alignment (torchaudio.functional.forced_align, Viterbi over the
 * 2n + 1 states of blank-interleaved targets): logp [t][stride] log
 * probabilities (the first `classes` of each row), targets[0..n) (none the
 * blank), path[t] gets each frame's label. Ties go as torchaudio's: staying
 * before moving one state before skipping a blank; the last frame ends on the
 * last target unless the trailing blank scores higher. STENO_ERR_INVALID when
 * t < n + the number of repeated neighbours (each repeat needs a blank). */
int ctc_force_align(const float *logp, int t, int classes, int stride, const int *targets, int n,
                    int blank, int *path);

/* The frames [start[k], end[k]) of target k in a forced path
 * (torchaudio.functional.merge_tokens: runs of one label, blanks dropped);
 * returns the runs found (n for a path of ctc_force_align). */
int ctc_spans(const int *path, int t, int blank, int *start, int *end, int n);

#endif
