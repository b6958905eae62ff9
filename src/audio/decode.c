#include "audio/decode.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libswresample/swresample.h>

#include "audio/downmix.h"
#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"

enum {
  OUT_RATE = 16000,
  IO_BUFFER = 1 << 16,
  MAX_CHANNELS = 64,          /* swresample's limit */
  MIN_RATE = 1000,            /* below this there is no speech band to resample */
  MAX_RATE = 1000000,
  MAX_BAD_IN_A_ROW = 100,     /* undecodable packets before the file counts as corrupt */
};

/* Where the bytes come from: a file descriptor, or memory when fd < 0. */
typedef struct {
  int fd;
  bool own_fd, seekable;
  const uint8_t *mem;
  size_t mem_size, mem_at;
  int64_t bytes;  /* read so far */
  int io_errno;   /* a failed read (not the end) */
} source;

struct steno_audio {
  char name[256]; /* for messages */
  source src;
  AVIOContext *io;
  AVFormatContext *fmt;
  AVCodecContext *dec;
  AVPacket *pkt;
  AVFrame *frame;
  int stream;
  SwrContext *swr;
  int swr_rate, swr_format; /* what swr converts from */
  AVChannelLayout swr_layout;
  float gain[MAX_CHANNELS]; /* each channel's share of the mono mix */
  float *mix;               /* swr's output: 16 kHz, every channel */
  size_t mix_cap;
  float *pend;              /* converted samples not yet read */
  size_t pend_n, pend_at, pend_cap;
  int bad_in_a_row, bad;    /* undecodable packets */
  char bad_why[128];
  int demux_error;          /* why the demuxer stopped, when not at the end */
  uint64_t produced;        /* samples out so far */
  bool demuxed, done;
  double duration;
};

/* ---- FFmpeg's log → steno's ---- */

static _Thread_local char ff_last_error[256]; /* FFmpeg's last error line, for messages */

static void ff_log(void *avcl, int level, const char *fmt, va_list vl) {
  if (level > AV_LOG_WARNING) return;
  char line[512];
  int prefix = 0; /* not "[wav @ 0x55...]": the component's name alone */
  av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &prefix);
  size_t n = strlen(line);
  while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
  if (!n) return;
  const AVClass *cls = avcl ? *(const AVClass **)avcl : NULL;
  const char *who = cls && cls->item_name ? cls->item_name(avcl) : "ffmpeg";
  if (level <= AV_LOG_ERROR) snprintf(ff_last_error, sizeof ff_last_error, "%s: %s", who, line);
  log_msg(level <= AV_LOG_ERROR ? STENO_LOG_INFO : STENO_LOG_DEBUG, "ffmpeg %s: %s", who, line);
}

static void ff_setup(void) { av_log_set_callback(ff_log); }

/* An FFmpeg failure as a steno error: our words, FFmpeg's code and its last log line. */
static int ff_fail(int code, int averr, const char *fmt, const char *name) {
  char what[256];
  snprintf(what, sizeof what, fmt, name);
  if (ff_last_error[0])
    return err_set(code, "%s: %s (%s)", what, av_err2str(averr), ff_last_error);
  return err_set(code, "%s: %s", what, av_err2str(averr));
}

/* ---- the byte source, as an AVIOContext ---- */

static int source_read(void *opaque, uint8_t *buf, int size) {
  source *s = opaque;
  if (s->fd < 0) {
    size_t n = s->mem_size - s->mem_at < (size_t)size ? s->mem_size - s->mem_at : (size_t)size;
    memcpy(buf, s->mem + s->mem_at, n);
    s->mem_at += n;
    s->bytes += (int64_t)n;
    return n ? (int)n : AVERROR_EOF;
  }
  for (;;) {
    ssize_t n = read(s->fd, buf, (size_t)size);
    if (n > 0) {
      s->bytes += n;
      return (int)n;
    }
    if (n == 0) return AVERROR_EOF;
    if (errno != EINTR) {
      s->io_errno = errno;
      return AVERROR(errno);
    }
  }
}

static int64_t source_seek(void *opaque, int64_t offset, int whence) {
  source *s = opaque;
  whence &= ~AVSEEK_FORCE;
  if (s->fd >= 0) {
    if (whence == AVSEEK_SIZE) {
      struct stat st;
      return fstat(s->fd, &st) ? AVERROR(errno) : (int64_t)st.st_size;
    }
    off_t at = lseek(s->fd, (off_t)offset, whence);
    return at < 0 ? AVERROR(errno) : (int64_t)at;
  }
  int64_t size = (int64_t)s->mem_size, at;
  if (whence == AVSEEK_SIZE) return size;
  if (whence == SEEK_SET) at = offset;
  else if (whence == SEEK_CUR) at = (int64_t)s->mem_at + offset;
  else if (whence == SEEK_END) at = size + offset;
  else return AVERROR(EINVAL);
  if (at < 0 || at > size) return AVERROR(EINVAL);
  s->mem_at = (size_t)at;
  return at;
}

/* Demuxers that reference other files (HLS, concat, DASH) may not open them. */
static int refuse_open(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                       AVDictionary **options) {
  (void)pb, (void)flags, (void)options;
  av_log(s, AV_LOG_ERROR, "not opening '%s': steno reads only the file it was given\n", url);
  return AVERROR(EPERM);
}

/* Demuxers whose input is a description of other resources, not media: an
 * SDP file starts RTP over UDP, playlists and manifests (HLS, DASH, IMF) and
 * concat lists name other files or URLs, image2 expands a file name pattern,
 * lavfi and the script readers run what they read. Refused by name after
 * probing, before the demuxer reads anything; those with AVFMT_NOFILE (RTP,
 * RTSP, SAP, devices) ignore our bytes and open their own. A deny list, not
 * an allow list of containers: the other two guards (refuse_open above,
 * NO_PROTOCOL below) already stop a demuxer we do not name from opening
 * anything, while an allow list would refuse real media FFmpeg reads. */
static const char *const opens_others[] = {
    "sdp", "rtp", "rtsp", "sap", "hls", "applehttp", "dash", "imf", "concat",
    "image2", "lavfi", "avisynth", "vapoursynth",
};

static bool opens_other_resources(const AVInputFormat *f) {
  if (f->flags & AVFMT_NOFILE) return true;
  for (size_t i = 0; i < sizeof opens_others / sizeof *opens_others; i++)
    if (av_match_name(opens_others[i], f->name)) return true;
  return false;
}

/* A protocol name that matches none: a nested context FFmpeg opens by itself
 * (SDP's RTP sessions, a playlist's segments) inherits this whitelist and
 * may use no protocol at all, file and network alike. */
#define NO_PROTOCOL "none"

/* ---- opening ---- */

/* Probing or opening the container failed: why, in the user's words. */
static int open_failed(steno_audio *a, int e) {
  if (a->src.io_errno) return err_set(STENO_ERR_IO, "%s: read error: %s", a->name, strerror(a->src.io_errno));
  if (a->src.bytes == 0) return err_set(STENO_ERR_FORMAT, "%s: empty file", a->name);
  return ff_fail(STENO_ERR_FORMAT, e, "%s: not an audio or video file FFmpeg can read", a->name);
}

/* Which demuxer FFmpeg would pick for our bytes, refused when it opens
 * other resources. The probe rewinds from its own buffer, so a pipe works. */
static int probe_format(steno_audio *a, const char *probe_name, const AVInputFormat **fmt) {
  int e = av_probe_input_buffer2(a->io, fmt, probe_name, NULL, 0, 0);
  if (e < 0) return open_failed(a, e);
  if (opens_other_resources(*fmt))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %s input is not allowed: it can open other files or the network",
                   a->name, (*fmt)->name);
  return 0;
}

static int open_container(steno_audio *a, const char *probe_name) {
  unsigned char *buf = av_malloc(IO_BUFFER);
  a->io = buf ? avio_alloc_context(buf, IO_BUFFER, 0, &a->src, source_read, NULL,
                                   a->src.seekable ? source_seek : NULL)
              : NULL;
  if (!a->io) {
    av_free(buf);
    return err_set(STENO_ERR_NOMEM, "%s: out of memory", a->name);
  }
  const AVInputFormat *format = NULL;
  TRY(probe_format(a, probe_name, &format));
  if (!(a->fmt = avformat_alloc_context())) return err_set(STENO_ERR_NOMEM, "%s: out of memory", a->name);
  a->fmt->pb = a->io;
  a->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  a->fmt->io_open = refuse_open;
  AVDictionary *opts = NULL;
  av_dict_set(&opts, "protocol_whitelist", NO_PROTOCOL, 0);
  int e = avformat_open_input(&a->fmt, probe_name, format, &opts); /* frees fmt on failure */
  av_dict_free(&opts);
  if (e < 0) return open_failed(a, e);
  if ((e = avformat_find_stream_info(a->fmt, NULL)) < 0)
    return ff_fail(STENO_ERR_FORMAT, e, "%s: cannot read its streams", a->name);
  return 0;
}

static int open_decoder(steno_audio *a) {
  const AVCodec *codec = NULL;
  int e = av_find_best_stream(a->fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (e == AVERROR_STREAM_NOT_FOUND) return err_set(STENO_ERR_FORMAT, "%s: no audio stream", a->name);
  if (e < 0 || !codec) {
    int s = av_find_best_stream(a->fmt, AVMEDIA_TYPE_AUDIO, -1, -1, NULL, 0);
    const char *id = s >= 0 ? avcodec_get_name(a->fmt->streams[s]->codecpar->codec_id) : "?";
    return err_set(STENO_ERR_UNSUPPORTED, "%s: no decoder for its audio (%s)", a->name, id);
  }
  a->stream = e;
  for (unsigned i = 0; i < a->fmt->nb_streams; i++)
    if ((int)i != a->stream) a->fmt->streams[i]->discard = AVDISCARD_ALL;
  AVStream *st = a->fmt->streams[a->stream];
  if (!(a->dec = avcodec_alloc_context3(codec))) return err_set(STENO_ERR_NOMEM, "%s: out of memory", a->name);
  a->dec->pkt_timebase = st->time_base;
  if ((e = avcodec_parameters_to_context(a->dec, st->codecpar)) < 0 || (e = avcodec_open2(a->dec, codec, NULL)) < 0)
    return ff_fail(STENO_ERR_FORMAT, e, "%s: cannot open its audio decoder", a->name);
  int rate = a->dec->sample_rate, channels = a->dec->ch_layout.nb_channels;
  if (rate < MIN_RATE || rate > MAX_RATE)
    return err_set(STENO_ERR_FORMAT, "%s: sample rate %d Hz (steno takes %d to %d Hz)", a->name, rate,
                   MIN_RATE, MAX_RATE);
  if (channels < 1 || channels > MAX_CHANNELS)
    return err_set(STENO_ERR_FORMAT, "%s: %d channels (steno takes 1 to %d)", a->name, channels,
                   MAX_CHANNELS);
  if (a->fmt->duration > 0 && a->fmt->duration != AV_NOPTS_VALUE)
    a->duration = (double)a->fmt->duration / AV_TIME_BASE;
  else if (st->duration > 0 && st->duration != AV_NOPTS_VALUE)
    a->duration = (double)st->duration * av_q2d(st->time_base);
  if (!(a->pkt = av_packet_alloc()) || !(a->frame = av_frame_alloc()))
    return err_set(STENO_ERR_NOMEM, "%s: out of memory", a->name);
  return 0;
}

/* Takes over src (its fd, when owned, is closed with the stream). */
static int open_source(const source *src, const char *name, const char *probe_name, steno_audio **out) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, ff_setup);
  *out = NULL;
  steno_audio *a = mem_alloc(1, sizeof *a);
  if (!a) {
    if (src->own_fd) close(src->fd);
    return STENO_ERR_NOMEM;
  }
  a->src = *src;
  snprintf(a->name, sizeof a->name, "%s", name);
  ff_last_error[0] = 0;
  int st = open_container(a, probe_name);
  if (!st) st = open_decoder(a);
  if (st) {
    steno_audio_close(a);
    return st;
  }
  *out = a;
  return 0;
}

int steno_audio_open(const char *path, steno_audio **out) {
  if (!path || !out) return err_set(STENO_ERR_INVALID, "steno_audio_open: NULL argument");
  *out = NULL;
  bool in = !strcmp(path, "-");
  source src = {.fd = in ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC), .own_fd = !in};
  const char *name = in ? "standard input" : path;
  if (src.fd < 0) return err_set(STENO_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat stt;
  if (fstat(src.fd, &stt) == 0 && S_ISDIR(stt.st_mode)) {
    close(src.fd);
    return err_set(STENO_ERR_IO, "%s: is a directory", path);
  }
  src.seekable = lseek(src.fd, 0, SEEK_CUR) >= 0 && S_ISREG(stt.st_mode);
  return open_source(&src, name, in ? "" : path, out);
}

int audio_open_memory(const uint8_t *data, size_t size, const char *name, steno_audio **out) {
  if (!out || (!data && size)) return err_set(STENO_ERR_INVALID, "audio_open_memory: NULL argument");
  source src = {.fd = -1, .seekable = true, .mem = data, .mem_size = size};
  return open_source(&src, name ? name : "memory", "", out);
}

void steno_audio_close(steno_audio *a) {
  if (!a) return;
  swr_free(&a->swr);
  av_channel_layout_uninit(&a->swr_layout);
  free(a->mix);
  av_frame_free(&a->frame);
  av_packet_free(&a->pkt);
  avcodec_free_context(&a->dec);
  avformat_close_input(&a->fmt);
  if (a->io) av_freep(&a->io->buffer);
  avio_context_free(&a->io);
  if (a->src.own_fd) close(a->src.fd);
  free(a->pend);
  free(a);
}

double steno_audio_duration(const steno_audio *a) { return a ? a->duration : 0; }

/* ---- decoding ---- */

static int pend_reserve(steno_audio *a, size_t n) {
  if (n <= a->pend_cap) return 0;
  float *p = mem_realloc(a->pend, n, sizeof *p);
  if (!p) return err_set(STENO_ERR_NOMEM, "%s: out of memory", a->name);
  a->pend = p;
  a->pend_cap = n;
  return 0;
}

/* Runs swr on `in` samples (NULL: drains it) and mixes its output down into
 * the pending buffer. */
static int resample(steno_audio *a, const uint8_t **in, int count) {
  int room = swr_get_out_samples(a->swr, count);
  if (room < 0) return ff_fail(STENO_ERR_FORMAT, room, "%s: cannot resample", a->name);
  size_t channels = (size_t)a->swr_layout.nb_channels, need = ((size_t)room + 1) * channels;
  TRY(pend_reserve(a, a->pend_n + (size_t)room + 1));
  if (need > a->mix_cap) {
    float *p = mem_realloc(a->mix, need, sizeof *p);
    if (!p) return err_set(STENO_ERR_NOMEM, "%s: out of memory", a->name);
    a->mix = p;
    a->mix_cap = need;
  }
  uint8_t *o = (uint8_t *)a->mix;
  int got = swr_convert(a->swr, &o, room, in, count);
  if (got < 0) return ff_fail(STENO_ERR_FORMAT, got, "%s: cannot resample", a->name);
  downmix(a->mix, (size_t)got, (int)channels, a->gain, a->pend + a->pend_n);
  a->pend_n += (size_t)got;
  a->produced += (uint64_t)got;
  return 0;
}

/* A resampler from the frame's rate and format to 16 kHz float, every
 * channel kept for downmix (downmix.h). A stream that changes mid-way gets a
 * new one. */
static int resampler_for(steno_audio *a, const AVFrame *f) {
  int channels = f->ch_layout.nb_channels;
  if (f->sample_rate < MIN_RATE || f->sample_rate > MAX_RATE || channels < 1 || channels > MAX_CHANNELS)
    return err_set(STENO_ERR_FORMAT, "%s: a frame of %d Hz, %d channels", a->name, f->sample_rate, channels);
  if (a->swr && f->sample_rate == a->swr_rate && f->format == a->swr_format &&
      !av_channel_layout_compare(&f->ch_layout, &a->swr_layout))
    return 0;
  if (a->swr) TRY(resample(a, NULL, 0));
  swr_free(&a->swr);
  av_channel_layout_uninit(&a->swr_layout);
  AVChannelLayout layout = {0};
  int e = av_channel_layout_copy(&layout, &f->ch_layout);
  if (e >= 0)
    e = swr_alloc_set_opts2(&a->swr, &layout, AV_SAMPLE_FMT_FLT, OUT_RATE, &layout, f->format,
                            f->sample_rate, 0, NULL);
  if (e >= 0) e = swr_init(a->swr);
  if (e < 0) {
    av_channel_layout_uninit(&layout);
    swr_free(&a->swr);
    return ff_fail(STENO_ERR_FORMAT, e, "%s: cannot set up the resampler", a->name);
  }
  downmix_gains(layout.order == AV_CHANNEL_ORDER_NATIVE ? layout.u.mask : 0, channels, a->gain);
  a->swr_layout = layout;
  a->swr_rate = f->sample_rate;
  a->swr_format = f->format;
  return 0;
}

/* A packet the decoder refused: skipped, unless too many come in a row. */
static int bad_packet(steno_audio *a, int e) {
  if (e == AVERROR(ENOMEM)) return err_set(STENO_ERR_NOMEM, "%s: out of memory", a->name);
  a->bad++;
  snprintf(a->bad_why, sizeof a->bad_why, "%s", av_err2str(e));
  if (++a->bad_in_a_row >= MAX_BAD_IN_A_ROW)
    return err_set(STENO_ERR_FORMAT, "%s: %d packets in a row could not be decoded (%s): the file is corrupt",
                   a->name, a->bad_in_a_row, a->bad_why);
  return 0;
}

/* The demuxer stopped: the end, a read error, or a damaged tail (judged once
 * the decoder is drained, by stream_ended). */
static int end_of_input(steno_audio *a, int e) {
  if (a->src.io_errno)
    return err_set(STENO_ERR_IO, "%s: read error: %s", a->name, strerror(a->src.io_errno));
  if (e != AVERROR_EOF) a->demux_error = e;
  a->demuxed = true;
  return avcodec_send_packet(a->dec, NULL) < 0 ? err_set(STENO_ERR_FORMAT, "%s: cannot flush the decoder", a->name) : 0;
}

/* The last sample is out. Nothing decoded is an error unless the stream
 * simply held no samples (an empty recording): packets were refused, or the
 * demuxer failed before any audio, as an MP4 whose index (moov) comes after
 * its samples does when read from a pipe. A damaged tail after some audio
 * is kept as an end. */
static int stream_ended(steno_audio *a) {
  char why[160] = "";
  if (a->demux_error) snprintf(why, sizeof why, "%s", av_err2str(a->demux_error));
  if (a->produced && a->demux_error)
    log_warn("%s: stopped reading after %.1f s of audio: %s", a->name, (double)a->produced / OUT_RATE, why);
  if (a->produced) return 0;
  if (a->bad)
    return err_set(STENO_ERR_FORMAT, "%s: no audio could be decoded (%d bad packets: %s)", a->name, a->bad,
                   a->bad_why);
  if (!a->demux_error) return 0;
  if (!a->src.seekable && av_match_name("mp4", a->fmt->iformat->name))
    return err_set(STENO_ERR_FORMAT, "%s: no audio could be read (%s): an MP4/M4A/MOV with its index "
                   "(moov) at the end cannot be read from a pipe; give its path, or remux it with "
                   "ffmpeg -movflags +faststart", a->name, why);
  return err_set(STENO_ERR_FORMAT, "%s: no audio could be read (%s)", a->name, why);
}

/* Hands the decoder its next packet of our stream (or the end). */
static int feed(steno_audio *a) {
  for (;;) {
    int e = av_read_frame(a->fmt, a->pkt);
    if (e < 0) return end_of_input(a, e);
    if (a->pkt->stream_index != a->stream) {
      av_packet_unref(a->pkt);
      continue;
    }
    e = avcodec_send_packet(a->dec, a->pkt);
    av_packet_unref(a->pkt);
    if (e >= 0) return 0;
    TRY(bad_packet(a, e));
  }
}

/* Decodes until some samples are pending, or the end. */
static int decode_more(steno_audio *a) {
  a->pend_at = a->pend_n = 0;
  while (!a->pend_n && !a->done) {
    int e = avcodec_receive_frame(a->dec, a->frame);
    if (e >= 0) {
      a->bad_in_a_row = 0;
      int st = resampler_for(a, a->frame);
      if (!st) st = resample(a, (const uint8_t **)a->frame->extended_data, a->frame->nb_samples);
      av_frame_unref(a->frame);
      TRY(st);
    } else if (e == AVERROR_EOF) {
      if (a->swr) TRY(resample(a, NULL, 0));
      a->done = true;
      TRY(stream_ended(a));
    } else if (e == AVERROR(EAGAIN) && !a->demuxed) {
      TRY(feed(a));
    } else if (e == AVERROR(EAGAIN)) {
      return err_set(STENO_ERR_FORMAT, "%s: the decoder stalled", a->name);
    } else {
      TRY(bad_packet(a, e));
    }
  }
  return 0;
}

int steno_audio_read(steno_audio *a, float *pcm, size_t max, size_t *got) {
  if (!a || !got || (!pcm && max)) return err_set(STENO_ERR_INVALID, "steno_audio_read: NULL argument");
  *got = 0;
  while (*got < max) {
    if (a->pend_at == a->pend_n) {
      if (a->done) break;
      TRY(decode_more(a));
      continue;
    }
    size_t k = a->pend_n - a->pend_at < max - *got ? a->pend_n - a->pend_at : max - *got;
    memcpy(pcm + *got, a->pend + a->pend_at, k * sizeof *pcm);
    a->pend_at += k;
    *got += k;
  }
  return 0;
}
