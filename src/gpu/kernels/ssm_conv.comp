#version 450
// ssm_conv (portable): Mamba-2's causal depthwise conv1d over t rows with its
// state, then SiLU (causal_conv1d_fn / causal_conv1d_update):
//   y[r][c] = silu(b[c] + Σ_k w[c][k] · u[r − (K−1) + k][c])
// where u is the K−1 rows of the state followed by the t input rows, and the
// state becomes the last K−1 rows of u. A fresh state (flag) is zeros, as the
// reference pads a prompt's start.
// x      f32 (binding 0): row r at x_off + r·x_stride, ch values
// w      [ch][K] f32 (binding 1), b [ch] f32 (binding 2)
// state  [K−1][ch] f32 (binding 3): oldest row first; read and rewritten
// y      f32 (binding 4): row r at y_off + r·y_stride
// One invocation per channel walks the rows in order (K ≤ MAXK) with the
// window in registers, so the state is updated in place safely.
layout(local_size_x = 64) in;
const uint MAXK = 8;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) buffer State { float state[]; };
layout(std430, binding = 4) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint t, ch, k, fresh;
  uint x_off, x_stride, y_off, y_stride;
} p;

void main() {
  uint c = gl_GlobalInvocationID.x;
  if (c >= p.ch) return;
  float win[MAXK];
  uint h = p.k - 1;
  for (uint j = 0; j < h; j++) win[j] = p.fresh != 0 ? 0.0 : state[j * p.ch + c];
  for (uint r = 0; r < p.t; r++) {
    float u = x[p.x_off + r * p.x_stride + c];
    float acc = b[c];
    for (uint j = 0; j < h; j++) acc += w[c * p.k + j] * win[j];
    acc += w[c * p.k + h] * u;
    for (uint j = 0; j + 1 < h; j++) win[j] = win[j + 1];
    if (h > 0) win[h - 1] = u;
    y[p.y_off + r * p.y_stride + c] = acc / (1.0 + exp(-acc));
  }
  for (uint j = 0; j < h; j++) state[j * p.ch + c] = win[j];
}
