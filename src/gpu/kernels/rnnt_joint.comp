#version 450
// rnnt_joint: the transducer's joint network at the frame the greedy search
// is at (gpu/transducer.c; the search's state in rnnt_pick.comp):
//   z = act(enc[step] + p),  logits[r] = b[r] + Σ_c w[r][c]·z[c]
// as decode/transducer.c's joint() (the bias added to the whole sum).
// state   uint (binding 0): [0] done, [1] step
// enc     f32 (binding 1): the joint's encoder projection, frame s at s·stride
// p       f32 (binding 2): the predictor's projection [joint]
// wt      f32 (binding 3): the output layer transposed, [joint][rows]
// b       f32 (binding 4): [rows]
// logits  f32 (binding 5): [rows] (vocabulary with blank, then TDT durations)
// A workgroup of 256 takes 32 rows, 8 invocations per row (neighbours read
// neighbouring words), their partial sums added in shared memory; z in
// shared memory too (joint ≤ 4096). Nothing once done.
layout(local_size_x = 8, local_size_y = 32) in;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Enc { float enc[]; };
layout(std430, binding = 2) readonly buffer P { float pv[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) readonly buffer B { float b[]; };
layout(std430, binding = 5) writeonly buffer Logits { float logits[]; };

layout(push_constant) uniform Push {
  uint stride, joint, rows, act; // act: 0 ReLU, 1 sigmoid, 2 tanh
} pc;

shared float z[4096], part[32][8];

void main() {
  if (state[0] != 0) return;
  uint e = state[1] * pc.stride;
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y, me = y * 8 + lane;
  for (uint c = me; c < pc.joint; c += 256) {
    float v = enc[e + c] + pv[c];
    z[c] = pc.act == 0 ? max(v, 0.0) : pc.act == 1 ? 1.0 / (1.0 + exp(-v)) : tanh(v);
  }
  barrier();
  uint r = gl_WorkGroupID.x * 32 + y;
  float s = 0.0;
  if (r < pc.rows)
    for (uint c = lane; c < pc.joint; c += 8) s += w[r * pc.joint + c] * z[c];
  part[y][lane] = s;
  barrier();
  if (lane != 0 || r >= pc.rows) return;
  float sum = 0.0;
  for (uint i = 0; i < 8; i++) sum += part[y][i];
  logits[r] = b[r] + sum;
}
