#version 450
// add_rows (portable): y[y_off + r·y_stride + i] = a[a_off + r·a_stride + i]
// + b[b_off + r·b_stride + i] for i < n, r < rows (f32; bindings a 0, b 1,
// y 2). Each invocation reads its own a and b before writing, so y may be a
// or b at the same offset and stride. Workgroups of 256 along the row, rows
// along y; loops past the counts.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows, n, a_off, a_stride, b_off, b_stride, y_off, y_stride;
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y)
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256)
      y[p.y_off + r * p.y_stride + i] = a[p.a_off + r * p.a_stride + i] + b[p.b_off + r * p.b_stride + i];
}
