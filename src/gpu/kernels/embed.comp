#version 450
// embed (portable): a token's embedding, row `id` of a table kept as a
// linear layer's weight W [n][k] (the same table is the tied output head):
//   c[c_off + i] = W[id][i] + pos[pos_off + i] + bias[i]   for i < k
// pos    f32 (binding 0): learned positions; not read when has_pos = 0
// bias   f32 (binding 1): the table's biases (zeros for a table without),
//        read at 0..k (the host checks k ≤ n + dual)
// c      f32 (binding 2)
// W      [n][wk] in its GGUF type (binding 3), scales (binding 4, Q8_0): as
//        gemm.comp (wk = k rounded up to 32). W is converted to f32 exactly;
//        the sum is in f32.
// ids    uint (binding 5, FROM_IDS = 1): id is read from ids[p.id] (a token
//        the GPU chose: ts_greedy.comp), an id past the table's `rows` taken
//        as 0 (the host checks p.id itself)
// One invocation per value, workgroups of 256.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint WTYPE = 0;
layout(constant_id = 1) const uint FROM_IDS = 0;

layout(std430, binding = 0) readonly buffer Pos { float pos[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
layout(std430, binding = 4) readonly buffer Scales { uint scales[]; };
layout(std430, binding = 5) readonly buffer Ids { uint ids[]; };

layout(push_constant) uniform Push {
  uint id, k, has_pos, pos_off, c_off, wk;
  uint rows; // FROM_IDS = 1: the table's rows
} p;

// W's value number i (row-major) as f32.
float weight(uint i) {
  if (WTYPE == W_F32) return uintBitsToFloat(w[i]);
  if (WTYPE == W_F16) return unpackHalf2x16(w[i / 2])[i % 2];
  if (WTYPE == W_BF16) return unpack_bf16(w[i / 2])[i % 2];
  return q8_scale(scales, i / 32) * float(bitfieldExtract(int(w[i / 4]), int(8 * (i % 4)), 8));
}

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= p.k) return;
  uint id = p.id;
  if (FROM_IDS != 0) {
    id = ids[p.id];
    if (id >= p.rows) id = 0;
  }
  float v = weight(id * p.wk + i);
  if (p.has_pos != 0) v += pos[p.pos_off + i];
  c[p.c_off + i] = v + bias[i];
}
