#version 450
// wmel: Whisper's log-mel frames (src/frontend/whisper_mel.c's wmel_compute
// before its normalization) on the GPU, one frame a workgroup:
//   frame t's samples s = t·hop − N/2 + j, j < N, of the clip zero-padded to
//   `len` and reflected at both ends (torch.stft's center, pad_mode reflect);
//   X_k = Σ_j x_j·w_j·e^(−2πijk/N) for k ≤ N/2 in double, as N = N1·N2 (any N:
//   Whisper's 400 = 16·25): N2 DFTs of N1 points, twiddles, then for each bin
//   a DFT of N2 terms (N·N1 + (N/2 + 1)·N2 products where a direct DFT makes
//   (N/2 + 1)·N); power |X_k|², mel m = Σ weight·power in double over the
//   filter's bins in order, out = f32(log10(max(mel, 1e-10))).
// Also each frame's largest value (`top`), for wmel_norm's maximum.
// Bindings: 0 x: the clip's samples; 1 tw: N pairs (cos, −sin)(2πk/N), then the
// window [N] (doubles); 2 bank: the sparse filterbank (first bin [F], weight
// starts [F + 1], the weights as f32 bits); 3 y [frames][F]; 4 top [frames].
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint N = 400;
layout(constant_id = 1) const uint N1 = 16; // N = N1·N2
layout(constant_id = 2) const uint N2 = 25;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Tw { double tw[]; };
layout(std430, binding = 2) readonly buffer Bank { uint bank[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) writeonly buffer Top { float top[]; };

layout(push_constant) uniform Push {
  uint n, len, frames, F, hop;
} p;

shared dvec2 w[N];
shared dvec2 y1[N]; // [n2][k1]: the first stage's DFTs, twiddled
shared double s[N];
shared double pw[N / 2 + 1];
shared float most[64];

const uint WG = gl_WorkGroupSize.x;

// Sample i of the clip zero-padded to len, reflected at both ends (the edge
// not repeated).
float sample_at(int i) {
  if (i < 0) i = -i;
  if (i >= int(p.len)) i = 2 * (int(p.len) - 1) - i;
  return i >= 0 && uint(i) < p.n ? x[i] : 0.0;
}

void frame(uint t) {
  uint lid = gl_LocalInvocationID.x;
  int start = int(t * p.hop) - int(N / 2);
  for (uint j = lid; j < N; j += WG) s[j] = double(sample_at(start + int(j))) * tw[2 * N + j];
  barrier();
  // y1[n2][k1] = W_N^(n2·k1) · Σ_n1 s[N2·n1 + n2]·W_N1^(n1·k1), W_N1 = W_N^N2.
  for (uint i = lid; i < N; i += WG) {
    uint n2 = i / N1, k1 = i % N1, at = 0, step = N2 * k1 % N;
    double re = 0.0, im = 0.0;
    for (uint n1 = 0; n1 < N1; n1++) {
      double v = s[N2 * n1 + n2];
      re += v * w[at].x;
      im += v * w[at].y;
      at += step;
      if (at >= N) at -= N;
    }
    dvec2 t = w[n2 * k1 % N];
    y1[i] = dvec2(re * t.x - im * t.y, re * t.y + im * t.x);
  }
  barrier();
  // X[k1 + N1·k2] = Σ_n2 y1[n2][k1]·W_N2^(n2·k2), W_N2 = W_N^N1.
  for (uint k = lid; k <= N / 2; k += WG) {
    uint k1 = k % N1, k2 = k / N1, at = 0, step = N1 * k2 % N;
    double re = 0.0, im = 0.0;
    for (uint n2 = 0; n2 < N2; n2++) {
      dvec2 a = y1[n2 * N1 + k1], t = w[at];
      re += a.x * t.x - a.y * t.y;
      im += a.x * t.y + a.y * t.x;
      at += step;
      if (at >= N) at -= N;
    }
    pw[k] = re * re + im * im;
  }
  barrier();
  float high = -1.0 / 0.0;
  for (uint m = lid; m < p.F; m += WG) {
    uint first = bank[m], s0 = bank[p.F + m], s1 = bank[p.F + m + 1], wb = 2 * p.F + 1;
    double acc = 0.0;
    for (uint q = s0; q < s1; q++) acc += double(uintBitsToFloat(bank[wb + q])) * pw[first + q - s0];
    // log10 of the double (its exponent apart: energies past f32's range, as the
    // CPU's log10 in double takes them).
    int e;
    double mant = frexp(max(acc, 1e-10), e);
    float v = (log2(float(mant)) + float(e)) * 0.30102999566398120;
    y[t * p.F + m] = v;
    high = max(high, v);
  }
  most[lid] = high;
  barrier();
  for (uint h = WG / 2; h > 0; h >>= 1) {
    if (lid < h) most[lid] = max(most[lid], most[lid + h]);
    barrier();
  }
  if (lid == 0) top[t] = most[0];
}

void main() {
  uint lid = gl_LocalInvocationID.x;
  for (uint k = lid; k < N; k += WG) w[k] = dvec2(tw[2 * k], tw[2 * k + 1]);
  // Frames past the grid's width in turn (the grid's x is at most 65 535).
  for (uint t = gl_WorkGroupID.x; t < p.frames; t += gl_NumWorkGroups.x) frame(t);
}
