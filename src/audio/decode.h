/* Audio and video files decoded with FFmpeg (libavformat, libavcodec,
 * libswresample) into 16 kHz mono float: the best audio stream of any format
 * FFmpeg reads, resampled by swresample, channels mixed as swresample's
 * default matrix mixes them (downmix.h). Decoded a frame at a time as
 * steno_audio_read asks, so memory does not grow with the file's length.
 *
 * The public functions (steno_audio_open/read/duration/close) live in
 * decode.c; this header adds what the library and tests need besides.
 *
 * Bytes come only from the file (or memory) given: FFmpeg is never handed a
 * URL, may use no protocol, and a demuxer that opens other files or the
 * network (SDP, playlists, concat lists) is refused once probed, before it
 * reads anything. FFmpeg's log goes to steno's (errors at info, the rest at debug),
 * which is process-wide: av_log_set_callback is set on the first open. */
#ifndef STENO_AUDIO_DECODE_H
#define STENO_AUDIO_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "steno.h"

/* Opens `size` bytes at `data` (kept, not copied, until closed); `name` is for
 * messages. */
int audio_open_memory(const uint8_t *data, size_t size, const char *name, steno_audio **out);

#endif
