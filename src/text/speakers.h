/* Who said which words: a transcript joined with a diarizer's speaker turns. */
#ifndef STENO_TEXT_SPEAKERS_H
#define STENO_TEXT_SPEAKERS_H

#include "steno.h"

/* The speaker (from 1) most active over [start_ms, end_ms] (a point: the one
 * speaking then), ties to the lower id; 0 when no turn touches it. */
int speaker_over(const steno_turn *turns, size_t n, int64_t start_ms, int64_t end_ms);

/* Gives r a copy of the turns, each word the speaker most active over it (one
 * no turn covers takes the one before it, or the first after it), and splits
 * each segment where its words' speaker changes (the pieces' text: their words
 * joined by spaces), setting every segment's speaker. */
int result_add_speakers(steno_result *r, const steno_turn *turns, size_t n);

#endif
