// conv_glu.comp's and conv_glu_fast.comp's depthwise conv, included after
// their bindings (h, w, bias, lens), BATCH and push constants (t, ch, kernel,
// h_off, h_stride, left, seg).
const uint TAPS = 8;

// The depthwise conv of the GLU output at row i, channel c, plus its bias.
float conv(uint i, uint c) {
  int first = int(i) - int(p.left), lo = 0, hi = int(p.t);
  if (BATCH == 1) {
    uint clip = i / p.seg;
    lo = int(clip * p.seg);
    hi = lo + int(lens[clip]);
  }
  // Taps in groups of TAPS, each group's loads issued together before its
  // products: a tap at a time (the loop's bounds check skipping rows outside
  // the clip) took 14.1 µs a call at Parakeet's 11 s on the H200, this 10.4.
  // A row outside the clip adds a 0 product.
  float acc = 0.0;
  for (uint k0 = 0; k0 < p.kernel; k0 += TAPS) {
    float hv[TAPS], gv[TAPS], wv[TAPS];
    [[unroll]] for (uint j = 0; j < TAPS; j++) {
      int s = first + int(k0 + j);
      bool in_row = k0 + j < p.kernel && s >= lo && s < hi;
      uint at = in_row ? p.h_off + uint(s) * p.h_stride + c : 0;
      hv[j] = in_row ? h[at] : 0.0;
      gv[j] = in_row ? h[at + p.ch] : 0.0;
      wv[j] = k0 + j < p.kernel ? w[c * p.kernel + k0 + j] : 0.0;
    }
    [[unroll]] for (uint j = 0; j < TAPS; j++) acc += wv[j] * (hv[j] / (1.0 + exp(-gv[j])));
  }
  return bias[c] + acc;
}
