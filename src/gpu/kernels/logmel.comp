#version 450
// logmel: NeMo's log-mel frames (src/frontend/mel.c's mel_compute before its
// normalization) on the GPU, for clips side by side. Workgroup (x, clip) makes
// the clip's frames 2x and 2x + 1 from one complex FFT of N points in double:
//   frame t's samples s = t·hop − N/2 + j, j < N (0 outside the clip),
//   pre-emphasized: v = x[s] − pre·x[s − 1] (s > 0, pre ≠ 0), else x[s];
//   z_j = (a_j·w_j, b_j·w_j) for the pair's frames a, b; Z = FFT(z);
//   |A_k|² = (s.re² + d.im²)/4, |B_k|² = (s.im² + d.re²)/4 with s = Z_k + Z_(N−k),
//   d = Z_k − Z_(N−k), each rounded to f32; mel m = Σ weight·power in double
//   over the filter's bins in order; out = log(f32(mel) + 2^-24).
// Rows valid ≤ t < pitch are written as 0 (the CPU's zero frame and a batch's
// padding).
// Bindings: 0 `in`: per clip four words (sample offset into `in`, samples,
// valid frames, 0) as float bits, then the samples; 1 `tw`: N/2 twiddle pairs
// e^(−2πik/N) (re, im), then the window [N] (doubles); 2 `bank`: the sparse
// filterbank: first bin [F], weight starts [F + 1], then the weights (f32 bits);
// 3 `y`: [clips][pitch][F] f32.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint N = 512;
layout(constant_id = 2) const uint LOGN = 9;

layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) readonly buffer Tw { double tw[]; };
layout(std430, binding = 2) readonly buffer Bank { uint bank[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint pitch, F, hop;
  float pre;
} p;

shared dvec2 z[N];
shared dvec2 w[N / 2];
shared float pw[2][N / 2 + 1];

const uint WG = gl_WorkGroupSize.x;

// Sample j of frame t of a clip of n samples at `off`, pre-emphasized.
float sample_at(uint off, uint n, uint t, uint j) {
  int s = int(t * p.hop + j) - int(N / 2);
  if (s < 0 || uint(s) >= n) return 0.0;
  if (s == 0 || p.pre == 0.0) return x[off + uint(s)];
  precise float v = x[off + uint(s)] - p.pre * x[off + uint(s) - 1];
  return v;
}

// Frames t0 and t0 + 1 of clip gl_WorkGroupID.y (the workgroup's together).
void frames(uint t0) {
  uint lid = gl_LocalInvocationID.x, clip = gl_WorkGroupID.y;
  uint off = floatBitsToUint(x[4 * clip]), n = floatBitsToUint(x[4 * clip + 1]);
  uint valid = floatBitsToUint(x[4 * clip + 2]);
  uint row = clip * p.pitch + t0;
  bool second = t0 + 1 < p.pitch;
  if (t0 >= valid) {
    for (uint m = lid; m < p.F; m += WG) {
      y[row * p.F + m] = 0.0;
      if (second) y[(row + 1) * p.F + m] = 0.0;
    }
    return;
  }
  bool pair = t0 + 1 < valid;
  for (uint k = lid; k < N / 2; k += WG) w[k] = dvec2(tw[2 * k], tw[2 * k + 1]);
  for (uint j = lid; j < N; j += WG) {
    double win = tw[N + j];
    float a = sample_at(off, n, t0, j), b = pair ? sample_at(off, n, t0 + 1, j) : 0.0;
    z[bitfieldReverse(j) >> (32 - LOGN)] = dvec2(double(a) * win, double(b) * win);
  }
  barrier();
  // Radix-2 stages in place (decimation in time from the bit-reversed order).
  for (uint span = 1; span < N; span <<= 1) {
    uint stride = N / (2 * span);
    for (uint bf = lid; bf < N / 2; bf += WG) {
      uint pos = bf & (span - 1), i = 2 * bf - pos, j = i + span;
      dvec2 r = w[pos * stride], v = z[j], u = z[i];
      dvec2 t = dvec2(r.x * v.x - r.y * v.y, r.x * v.y + r.y * v.x);
      z[i] = u + t;
      z[j] = u - t;
    }
    barrier();
  }
  for (uint k = lid; k <= N / 2; k += WG) {
    dvec2 f = z[k], g = z[(N - k) & (N - 1)], s = f + g, d = f - g;
    pw[0][k] = float(0.25 * (s.x * s.x + d.y * d.y));
    pw[1][k] = float(0.25 * (s.y * s.y + d.x * d.x));
  }
  barrier();
  const float guard = 5.960464477539063e-08;
  for (uint m = lid; m < p.F; m += WG) {
    uint first = bank[m], s0 = bank[p.F + m], s1 = bank[p.F + m + 1], wb = 2 * p.F + 1;
    double acc0 = 0.0, acc1 = 0.0;
    for (uint q = s0; q < s1; q++) {
      double wt = double(uintBitsToFloat(bank[wb + q]));
      acc0 += wt * double(pw[0][first + q - s0]);
      acc1 += wt * double(pw[1][first + q - s0]);
    }
    y[row * p.F + m] = log(float(acc0) + guard);
    if (second) y[(row + 1) * p.F + m] = pair ? log(float(acc1) + guard) : 0.0;
  }
}

void main() {
  // Pairs past the grid's width in turn (the grid's x is at most 65 535).
  for (uint g = gl_WorkGroupID.x; 2 * g < p.pitch; g += gl_NumWorkGroups.x) frames(2 * g);
}
