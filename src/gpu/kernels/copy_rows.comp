#version 450
// copy_rows (portable): y[y_off + r·y_stride + i] = x[x_off + r·x_stride + i]
// for i < cols, r < rows: a slice of wider rows into another (a layer's new
// keys and values into its cache). x and y are different buffers.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows, cols, x_off, x_stride, y_off, y_stride;
} p;

void main() {
  uint r = gl_WorkGroupID.y;
  for (; r < p.rows; r += gl_NumWorkGroups.y)
    for (uint i = gl_GlobalInvocationID.x; i < p.cols; i += gl_NumWorkGroups.x * 64)
      y[p.y_off + r * p.y_stride + i] = x[p.x_off + r * p.x_stride + i];
}
