/* The Whisper search's scans as plain C loops, as decode/whisper.c wrote them
 * before it vectorized them: test_whisper_text's reference for the fast scans
 * and bench/whisper_token's "before". */
#ifndef STENO_TEST_PLAIN_SCANS_H
#define STENO_TEST_PLAIN_SCANS_H

/* The first index of x's largest value over [0, n). */
int plain_argmax(const float *x, int n);

/* log Σ exp(x[i]) over [from, to), in double from the largest (−∞ if all are). */
double plain_logsumexp(const float *x, int from, int to);

#endif
