#version 450
// softmax (portable): y[r][·] = softmax(scale · x[r][·]) over `cols` values of
// each of `rows` rows, numerically stable (the row's largest scale·x is
// subtracted before exp).
//
// x     f32 (binding 0): row r at x[x_off + r·x_stride ..], cols values
// y     f32 (binding 1): row r at y[y_off + r·y_stride ..]; may be x itself
//       (each value is read and then written by the same invocation)
// mask  [cols] uint (binding 2, read only when `masked`): column c counts
//       only where mask[c] != 0; masked columns get 0, and a row whose
//       columns are all masked gets 0 everywhere (never NaN)
//
// One workgroup of 128 per row; rows past 65535 workgroups are taken in a
// loop (row += the workgroup count). Three passes over the row (max, sum of
// exp, write) with tree reductions in shared memory; all in f32.
layout(local_size_x = 128) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer Mask { uint mask[]; };

layout(push_constant) uniform Push {
  uint rows, cols;
  uint x_off, x_stride, y_off, y_stride;
  float scale;
  uint masked;
} p;

const uint WG = 128;
shared float red[WG];

bool counts(uint c) { return p.masked == 0 || mask[c] != 0; }

// The reduction of every invocation's `v` (max or sum), seen by all.
float reduce(float v, bool is_max) {
  uint l = gl_LocalInvocationID.x;
  red[l] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (l < s) red[l] = is_max ? max(red[l], red[l + s]) : red[l] + red[l + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  uint l = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint xr = p.x_off + row * p.x_stride, yr = p.y_off + row * p.y_stride;
    float mx = -3.0e38;
    for (uint c = l; c < p.cols; c += WG)
      if (counts(c)) mx = max(mx, p.scale * x[xr + c]);
    mx = reduce(mx, true);
    float sum = 0.0;
    for (uint c = l; c < p.cols; c += WG)
      if (counts(c)) sum += exp(p.scale * x[xr + c] - mx);
    sum = reduce(sum, false);
    // sum ≥ 1 unless every column is masked (then the row is all zeros).
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    for (uint c = l; c < p.cols; c += WG)
      y[yr + c] = counts(c) ? exp(p.scale * x[xr + c] - mx) * inv : 0.0;
  }
}
