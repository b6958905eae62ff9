#version 450
// rnnt_pred: the joint's predictor projection of the LSTM's new output, when
// the search of clip gl_WorkGroupID.y emitted a token (its emit word):
//   p[j] = b[j] + Σ_i w[j][i]·h[cur ^ 1][layers − 1][i]
// state  uint (binding 0): clip c's words from 16·(c + 1) (rnnt_joint.comp):
//        [0] done, [4] emit, [5] cur
// wts    f32 (binding 1): the packed weights (rnnt_search.comp): the
//        projection w [joint][hidden] at `at`, then b [joint]
// h      f32 (binding 2): [clips][2][layers][hidden] (rnnt_lstm.comp)
// p      f32 (binding 3): [clips][joint]
// 32 outputs per workgroup, 8 invocations each (as rnnt_joint.comp); the
// LSTM output in shared memory (hidden ≤ 2048).
layout(local_size_x = 8, local_size_y = 32) in;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Wts { float wts[]; };
layout(std430, binding = 2) readonly buffer H { float h[]; };
layout(std430, binding = 3) writeonly buffer P { float pv[]; };

layout(push_constant) uniform Push {
  uint hidden, joint, layers, at;
} pc;

shared float hs[2048], part[32][8];

void main() {
  uint sb = 16 * (gl_WorkGroupID.y + 1);
  if (state[sb] != 0 || state[sb + 4] == 0) return;
  uint H = pc.hidden, at = gl_WorkGroupID.y * 2 * pc.layers * H + ((state[sb + 5] ^ 1u) * pc.layers + pc.layers - 1) * H;
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y;
  for (uint i = y * 8 + lane; i < H; i += 256) hs[i] = h[at + i];
  barrier();
  uint j = gl_WorkGroupID.x * 32 + y;
  float s = 0.0;
  if (j < pc.joint)
    for (uint i = lane; i < H; i += 8) s += wts[pc.at + j * H + i] * hs[i];
  part[y][lane] = s;
  barrier();
  if (lane != 0 || j >= pc.joint) return;
  float sum = 0.0;
  for (uint i = 0; i < 8; i++) sum += part[y][i];
  pv[gl_WorkGroupID.y * pc.joint + j] = wts[pc.at + pc.joint * H + j] + sum;
}
