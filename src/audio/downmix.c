#include "audio/downmix.h"

#include <math.h>

/* swresample's default mono gains by speaker bit (FL, FR, FC, LFE, BL, BR,
 * FLC, FRC, BC, SL, SR); positions past these (top speakers) get none, as
 * swresample gives them. */
static const float position_gain[] = {
    (float)M_SQRT1_2, (float)M_SQRT1_2, 1.0f, 0.0f, 0.5f, 0.5f,
    (float)M_SQRT1_2, (float)M_SQRT1_2, 0.5f, 0.5f, 0.5f,
};

/* FFmpeg's default layouts (av_channel_layout_default) for 1 to 8 channels. */
static const uint64_t default_mask[] = {0, 0x4, 0x3, 0xb, 0x107, 0x607, 0x60f, 0x70f, 0x63f};

void downmix_gains(uint64_t mask, int channels, float *gain) {
  int bits = 0;
  for (uint64_t m = mask; m; m &= m - 1) bits++;
  if (bits < channels) mask = channels <= 8 ? default_mask[channels] : 0;
  int c = 0;
  for (int bit = 0; bit < 64 && c < channels && mask; bit++)
    if (mask >> bit & 1)
      gain[c++] = bit < (int)(sizeof position_gain / sizeof *position_gain) ? position_gain[bit] : 0.0f;
  for (; c < channels; c++) gain[c] = 1.0f / (float)channels; /* no positions: the mean */
}

void downmix(const float *in, size_t frames, int channels, const float *gain, float *out) {
  double energy[DOWNMIX_MAX_CHANNELS] = {0}, cross[DOWNMIX_MAX_CHANNELS] = {0};
  float sign[DOWNMIX_MAX_CHANNELS];
  int ref = 0;
  for (size_t i = 0; i < frames; i++)
    for (int c = 0; c < channels; c++) energy[c] += (double)in[i * channels + c] * in[i * channels + c];
  for (int c = 1; c < channels; c++)
    if (gain[c] * gain[c] * energy[c] > gain[ref] * gain[ref] * energy[ref]) ref = c;
  for (size_t i = 0; i < frames; i++)
    for (int c = 0; c < channels; c++) cross[c] += (double)in[i * channels + c] * in[i * channels + ref];
  for (int c = 0; c < channels; c++) sign[c] = cross[c] < -0.5 * sqrt(energy[c] * energy[ref]) ? -gain[c] : gain[c];
  for (size_t i = 0; i < frames; i++) {
    float s = 0;
    for (int c = 0; c < channels; c++) s += sign[c] * in[i * channels + c];
    out[i] = s;
  }
}
