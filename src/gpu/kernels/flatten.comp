#version 450
// flatten (portable): an image [t][f][ch] → rows [t][ch·f], channel-major,
// the order NeMo's subsampling feeds its output linear
// (x.transpose(1, 2).reshape(b, t, c·f)):
//   y[r][c·f + j] = x[(r·f + j)·x_stride + c]
// x   f32 (binding 0), x_stride ≥ ch floats from one pixel to the next
// y   [t][ch·f] f32 (binding 1)
// One invocation per output value (workgroups of 256 along the row), one row
// per workgroup y (more rows in a loop). A pure copy: nothing rounds.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push { uint t, f, ch, x_stride; } p;

void main() {
  uint width = p.ch * p.f, e = gl_GlobalInvocationID.x;
  if (e >= width) return;
  uint c = e / p.f, j = e % p.f;
  for (uint r = gl_WorkGroupID.y; r < p.t; r += gl_NumWorkGroups.y)
    y[r * width + e] = x[(r * p.f + j) * p.x_stride + c];
}
