/* Many channels to one, for both audio readers (FFmpeg's and the WAV-only
 * one): swresample's default matrix for a mono output, what `ffmpeg -ac 1`
 * does (centre at full gain, front left and right at −3 dB, surrounds and
 * back at −6 dB, LFE dropped; not normalized, as swresample leaves a float
 * output), rather than an average, which drops a 5.1 film's dialogue (the
 * centre) by 15.6 dB. test_audio checks the table against swr_build_matrix2.
 * Channels in opposite phase, which any plain sum cancels (a stereo file with
 * one side wired backwards), are turned over first: see downmix(). */
#ifndef STENO_AUDIO_DOWNMIX_H
#define STENO_AUDIO_DOWNMIX_H

#include <stddef.h>
#include <stdint.h>

enum { DOWNMIX_MAX_CHANNELS = 64 };

/* The gain of each of `channels` channels. mask: their speaker positions, in
 * order (the bits of WAVE_FORMAT_EXTENSIBLE's dwChannelMask, which are
 * FFmpeg's AV_CH_*); 0, or fewer bits than channels: FFmpeg's default layout
 * for that count (mono, stereo, 2.1, 4.0, 5.0, 5.1, 6.1, 7.1), and past 8
 * channels, with no positions known, the mean. */
void downmix_gains(uint64_t mask, int channels, float *gain);

/* out[i] = Σc gain[c]·in[i·channels + c] over `frames` interleaved frames.
 * A channel whose correlation with the strongest one (by gain × energy) over
 * these frames is below −0.5 is added turned over: opposite-phase stereo
 * keeps its level instead of vanishing, and real recordings, whose channels
 * correlate at 0 or above, mix as the matrix says. */
void downmix(const float *in, size_t frames, int channels, const float *gain, float *out);

#endif
