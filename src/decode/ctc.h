/* CTC greedy decoding (as NeMo's, and transcribe.cpp's): argmax per frame,
 * runs of one label collapsed, blank (the last class) dropped. */
#ifndef STENO_DECODE_CTC_H
#define STENO_DECODE_CTC_H

#include "decode/tokens.h"

/* logits [t][stride], the first `classes` of each row used; blank = classes − 1.
 * Each token starts at the first frame of its run and spans 1 frame; p is the
 * softmax probability of the label there. */
int ctc_greedy(const float *logits, int t, int classes, int stride, dec_tokens *out);

#endif
