#version 450
// depthwise (portable): the 3×3 stride-2 padding-1 convolutions of NeMo's
// "dw_striding" subsampling, row-chunked so its large first feature maps are
// never stored whole. ⌈n/2⌉ is the size after one such conv.
//
// FIRST = 0: per-channel conv + bias over an image [t][f][ch]:
//   y[r][j][c] = b[c] + Σ_k w[k][c] · x[2r−1+k/3][2j−1+k%3][c]
// x      f32 (binding 0): image row 2·t0−1+i at x[(i·f + col)·x_stride + c]
//        (x_stride ≥ ch: a pointwise GEMM's padded output can be read as is);
//        rows outside the image are padding (never read, x row 0 when t0 = 0)
// w      [9][ch] f32 (binding 1): tap k = 3·dt + df (dt over time, df over
//        frequency); PyTorch's [ch][1][3][3] weight transposed at load
// b      [ch] f32 (binding 2)
// y      [⌈t/2⌉][⌈f/2⌉][ch] f32 (binding 3): output rows t0..t0+rows written
//
// FIRST = 1: the same conv over ReLU(conv0(mel)), conv0 being the 1 → ch conv
// (w0 [9][ch] at binding 4, b0 [ch] at binding 5, same tap order) over the
// one-channel image mel [t][f] (binding 0). ReLU(conv0) [⌈t/2⌉][⌈f/2⌉][ch] is
// never stored: each output takes the 7×7 mel patch under it. y (binding 3)
// gets `rows` rows of [⌈⌈f/2⌉/2⌉][ch]: output rows 2·t0−1.. (what the FIRST = 0
// conv of output rows t0.. reads), rows outside the output written as 0.
//
// CAUSAL = 1 (NeMo's CausalConv2D, cache-aware streaming models): every 3×3
// conv pads 2 before and 1 after, on both axes, instead of 1 and 1: input
// index 2o − 2 + k for output o, and a side of n becomes ⌊n/2⌋ + 1. The rows
// x and y hold start at 2·t0 − 2 instead of 2·t0 − 1.
//
// BATCH = 1 (non-causal only; t0 = 0): gl_WorkGroupID.z picks one of several
// clips' images laid side by side: clip n's input at x[n·x_clip ..], its
// output at y[n·y_clip ..], each as one image above with p.t rows of room and
// lens[n] (binding 6) rows of image (FIRST = 1: mel frames); rows past a
// clip's own output length are written as 0, as transformers' masked
// subsampling zeroes each conv's output past the running length.
//
// One invocation per output value; workgroups of 64 along j·ch + c, one
// output row per workgroup y (more rows in a loop). All in f32.
//
// VEC = 1 (for CPU devices: lavapipe turns every buffer read into a loop over
// the lanes): one invocation per 4 channels c..c+3, every weight, bias and
// (FIRST = 0) x read as a vec4, a mel value read once for the 4. Needs ch,
// x_stride, x_clip and y_clip multiples of 4 (gpu/subsample.c checks). The
// same sums in the same order.
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint FIRST = 0;
layout(constant_id = 1) const uint CAUSAL = 0;
layout(constant_id = 2) const uint BATCH = 0;
layout(constant_id = 3) const uint VEC = 0;
const int PAD = CAUSAL == 1 ? 2 : 1; // padding before each conv's input

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) readonly buffer W0 { float w0[]; };
layout(std430, binding = 5) readonly buffer B0 { float b0[]; };
layout(std430, binding = 6) readonly buffer Lens { uint lens[]; };
// The same buffers 4 floats at a time (VEC = 1).
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer W4 { vec4 w4[]; };
layout(std430, binding = 2) readonly buffer B4 { vec4 b4[]; };
layout(std430, binding = 3) writeonly buffer Y4 { vec4 y4[]; };
layout(std430, binding = 4) readonly buffer W04 { vec4 w04[]; };
layout(std430, binding = 5) readonly buffer B04 { vec4 b04[]; };

layout(push_constant) uniform Push {
  uint t, f, ch;   // the input image (FIRST: the mel image, t × f, one channel)
  uint x_stride;   // FIRST = 0 only
  uint t0, rows;
  uint x_clip, y_clip; // BATCH = 1: floats from one clip's x (y) to the next
} p;

// The image rows of this workgroup's clip and where its x starts (set in main).
uint T;
uint XB;

uint halve(uint n) { return CAUSAL == 1 ? n / 2 + 1 : (n + 1) / 2; }

// Output (r, j, c) of the plain depthwise conv.
float depthwise(int r, int j, uint c) {
  int t = int(T), f = int(p.f), first = 2 * int(p.t0) - PAD;
  float acc = b[c];
  for (int dt = 0; dt < 3; dt++) {
    int ti = 2 * r - PAD + dt;
    if (ti < 0 || ti >= t) continue;
    uint row = uint(ti - first) * p.f;
    for (int df = 0; df < 3; df++) {
      int fi = 2 * j - PAD + df;
      if (fi < 0 || fi >= f) continue;
      acc += w[(3 * dt + df) * p.ch + c] * x[XB + (row + uint(fi)) * p.x_stride + c];
    }
  }
  return acc;
}

// Output (r, j, c) of the depthwise conv over ReLU(conv0(mel)).
float first_depthwise(int r, int j, uint c) {
  int t = int(T), f = int(p.f);
  int t1 = int(halve(T)), f1 = int(halve(p.f));
  // mel rows 4r−3·PAD.. and columns 4j−3·PAD.. (zero outside): all that 9 conv0 outputs see.
  float m[7][7];
  for (int a = 0; a < 7; a++)
    for (int e = 0; e < 7; e++) {
      int ti = 4 * r - 3 * PAD + a, fi = 4 * j - 3 * PAD + e;
      m[a][e] = ti >= 0 && ti < t && fi >= 0 && fi < f ? x[XB + ti * f + fi] : 0.0;
    }
  float w0c[9];
  for (int k = 0; k < 9; k++) w0c[k] = w0[k * p.ch + c];
  float acc = b[c];
  for (int dt = 0; dt < 3; dt++) {
    int s = 2 * r - PAD + dt;
    if (s < 0 || s >= t1) continue; // padding of conv0's output: 0, not ReLU(b0)
    for (int df = 0; df < 3; df++) {
      int u = 2 * j - PAD + df;
      if (u < 0 || u >= f1) continue;
      float v = b0[c];
      for (int et = 0; et < 3; et++)
        for (int ef = 0; ef < 3; ef++) v += w0c[3 * et + ef] * m[2 * dt + et][2 * df + ef];
      acc += w[(3 * dt + df) * p.ch + c] * max(v, 0.0);
    }
  }
  return acc;
}

// depthwise() for channels c..c+3 (c % 4 == 0).
vec4 depthwise4(int r, int j, uint c) {
  int t = int(T), f = int(p.f), first = 2 * int(p.t0) - PAD;
  vec4 acc = b4[c / 4];
  for (int dt = 0; dt < 3; dt++) {
    int ti = 2 * r - PAD + dt;
    if (ti < 0 || ti >= t) continue;
    uint row = uint(ti - first) * p.f;
    for (int df = 0; df < 3; df++) {
      int fi = 2 * j - PAD + df;
      if (fi < 0 || fi >= f) continue;
      acc += w4[((3 * dt + df) * p.ch + c) / 4] * x4[(XB + (row + uint(fi)) * p.x_stride + c) / 4];
    }
  }
  return acc;
}

// first_depthwise() for channels c..c+3 (c % 4 == 0).
vec4 first_depthwise4(int r, int j, uint c) {
  int t = int(T), f = int(p.f);
  int t1 = int(halve(T)), f1 = int(halve(p.f));
  float m[7][7];
  for (int a = 0; a < 7; a++)
    for (int e = 0; e < 7; e++) {
      int ti = 4 * r - 3 * PAD + a, fi = 4 * j - 3 * PAD + e;
      m[a][e] = ti >= 0 && ti < t && fi >= 0 && fi < f ? x[XB + ti * f + fi] : 0.0;
    }
  vec4 w0c[9];
  for (int k = 0; k < 9; k++) w0c[k] = w04[(k * p.ch + c) / 4];
  vec4 bias0 = b04[c / 4], acc = b4[c / 4];
  for (int dt = 0; dt < 3; dt++) {
    int s = 2 * r - PAD + dt;
    if (s < 0 || s >= t1) continue;
    for (int df = 0; df < 3; df++) {
      int u = 2 * j - PAD + df;
      if (u < 0 || u >= f1) continue;
      vec4 v = bias0;
      for (int et = 0; et < 3; et++)
        for (int ef = 0; ef < 3; ef++) v += w0c[3 * et + ef] * m[2 * dt + et][2 * df + ef];
      acc += w4[((3 * dt + df) * p.ch + c) / 4] * max(v, vec4(0.0));
    }
  }
  return acc;
}

void main() {
  uint fo = FIRST == 1 ? halve(halve(p.f)) : halve(p.f);
  if (VEC == 1) {
    uint e = gl_GlobalInvocationID.x, q = p.ch / 4;
    if (e >= fo * q) return;
    int j = int(e / q);
    uint c = 4 * (e % q), clip = BATCH == 1 ? gl_WorkGroupID.z : 0;
    T = BATCH == 1 ? lens[clip] : p.t;
    XB = clip * p.x_clip;
    uint yb = clip * p.y_clip;
    for (uint i = gl_WorkGroupID.y; i < p.rows; i += gl_NumWorkGroups.y) {
      if (FIRST == 1) {
        int r = 2 * int(p.t0) - PAD + int(i);
        bool inside = r >= 0 && r < int(halve(halve(T)));
        y4[(yb + i * fo * p.ch + j * p.ch + c) / 4] = inside ? first_depthwise4(r, j, c) : vec4(0.0);
      } else {
        uint r = p.t0 + i;
        bool inside = BATCH == 0 || r < halve(T);
        y4[(yb + r * fo * p.ch + j * p.ch + c) / 4] = inside ? depthwise4(int(r), j, c) : vec4(0.0);
      }
    }
    return;
  }
  uint e = gl_GlobalInvocationID.x;
  if (e >= fo * p.ch) return;
  int j = int(e / p.ch);
  uint c = e % p.ch, clip = BATCH == 1 ? gl_WorkGroupID.z : 0;
  T = BATCH == 1 ? lens[clip] : p.t;
  XB = clip * p.x_clip;
  uint yb = clip * p.y_clip;
  for (uint i = gl_WorkGroupID.y; i < p.rows; i += gl_NumWorkGroups.y) {
    if (FIRST == 1) {
      int r = 2 * int(p.t0) - PAD + int(i);
      bool inside = r >= 0 && r < int(halve(halve(T)));
      y[yb + i * fo * p.ch + e] = inside ? first_depthwise(r, j, c) : 0.0;
    } else {
      uint r = p.t0 + i;
      bool inside = BATCH == 0 || r < halve(T);
      y[yb + r * fo * p.ch + e] = inside ? depthwise(int(r), j, c) : 0.0;
    }
  }
}
