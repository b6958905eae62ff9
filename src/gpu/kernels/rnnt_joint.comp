#version 450
// rnnt_joint: the transducer's joint network at the frame the greedy search
// is at (gpu/transducer.c; the search's state in rnnt_pick.comp):
//   z = act(enc[step] + p),  logits[r] = b[r] + Σ_c wt[c][r]·z[c]
// as decode/transducer.c's joint() (the bias added to the whole sum).
// state   uint (binding 0): [0] done, [1] step
// enc     f32 (binding 1): the joint's encoder projection, frame s at s·stride
// p       f32 (binding 2): the predictor's projection [joint]
// wt      f32 (binding 3): the output layer transposed, [joint][rows]
// b       f32 (binding 4): [rows]
// logits  f32 (binding 5): [rows] (vocabulary with blank, then TDT durations)
// One row per invocation, reading column r of wt (neighbours read
// neighbouring words); z in shared memory (joint ≤ 4096). Nothing once done.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Enc { float enc[]; };
layout(std430, binding = 2) readonly buffer P { float pv[]; };
layout(std430, binding = 3) readonly buffer Wt { float wt[]; };
layout(std430, binding = 4) readonly buffer B { float b[]; };
layout(std430, binding = 5) writeonly buffer Logits { float logits[]; };

layout(push_constant) uniform Push {
  uint stride, joint, rows, act; // act: 0 ReLU, 1 sigmoid, 2 tanh
} pc;

shared float z[4096];

void main() {
  if (state[0] != 0) return;
  uint e = state[1] * pc.stride;
  for (uint c = gl_LocalInvocationID.x; c < pc.joint; c += 256) {
    float v = enc[e + c] + pv[c];
    z[c] = pc.act == 0 ? max(v, 0.0) : pc.act == 1 ? 1.0 / (1.0 + exp(-v)) : tanh(v);
  }
  barrier();
  uint r = gl_GlobalInvocationID.x;
  if (r >= pc.rows) return;
  float s = 0.0;
  for (uint c = 0; c < pc.joint; c++) s += wt[c * pc.rows + r] * z[c];
  logits[r] = b[r] + s;
}
