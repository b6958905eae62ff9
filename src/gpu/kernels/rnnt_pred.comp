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
// 8 outputs per workgroup, 32 invocations each (rnnt_pred.glsl); the LSTM
// output in shared memory (hidden ≤ 2048).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Wts { float wts[]; };
layout(std430, binding = 1) readonly buffer Wts4 { vec4 wts4[]; }; // the same, by 16 bytes
layout(std430, binding = 2) readonly buffer H { float h[]; };
layout(std430, binding = 3) writeonly buffer P { float pv[]; };

layout(push_constant) uniform Push {
  uint hidden, joint, layers, at;
} pc;

const uint HS = 2048;
#include "rnnt_pred.glsl"

void main() {
  pred_block(gl_LocalInvocationIndex, gl_WorkGroupID.x, gl_WorkGroupID.y, pc.hidden, pc.joint, pc.layers, pc.at);
}
