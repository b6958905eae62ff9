#version 450
// swiglu (portable): the gated MLP's middle (Moonshine's decoder):
//   y[y_off + r·y_stride + i] = x[v] · SiLU(x[v + n]),  v = x_off + r·x_stride + i,
//   SiLU(g) = g / (1 + e^−g),   for i < n, r < rows
// x f32 (binding 0): rows of [value n | gate n]; y f32 (binding 1). Each
// invocation reads its own value and gate before writing, so y may be x at the
// same offset and stride (in place: the values are overwritten by the result).
// Workgroups of 256 along the row, rows along y; loops past the counts.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows, n, x_off, x_stride, y_off, y_stride;
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y)
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256) {
      uint v = p.x_off + r * p.x_stride + i;
      float g = x[v + p.n];
      y[p.y_off + r * p.y_stride + i] = x[v] * (g / (1.0 + exp(-g)));
    }
}
