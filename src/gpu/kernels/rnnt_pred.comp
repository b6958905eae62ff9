#version 450
// rnnt_pred: the joint's predictor projection of the LSTM's new output, when
// the search emitted a token (rnnt_pick.comp's state[4]):
//   p[j] = b[j] + Σ_i wt[i][j]·h[cur ^ 1][layers − 1][i]
// state  uint (binding 0): [0] done, [4] emit, [5] cur
// wt     f32 (binding 1): the projection transposed, [hidden][joint]
// b      f32 (binding 2): [joint]
// h      f32 (binding 3): [2][layers][hidden] (rnnt_lstm.comp)
// p      f32 (binding 4): [joint]
// One output per invocation; the LSTM output in shared memory (hidden ≤ 2048).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Wt { float wt[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) readonly buffer H { float h[]; };
layout(std430, binding = 4) writeonly buffer P { float pv[]; };

layout(push_constant) uniform Push {
  uint hidden, joint, layers;
} pc;

shared float hs[2048];

void main() {
  if (state[0] != 0 || state[4] == 0) return;
  uint H = pc.hidden, at = ((state[5] ^ 1u) * pc.layers + pc.layers - 1) * H;
  for (uint i = gl_LocalInvocationID.x; i < H; i += 64) hs[i] = h[at + i];
  barrier();
  uint j = gl_GlobalInvocationID.x;
  if (j >= pc.joint) return;
  float s = 0.0;
  for (uint i = 0; i < H; i++) s += wt[i * pc.joint + j] * hs[i];
  pv[j] = b[j] + s;
}
