#version 450
// softmax_fast: softmax.comp's contract (same bindings and push constants,
// masks, all-masked rows → 0, y may be x) with one subgroup per row, several
// rows per workgroup, max and sum by subgroupMax/subgroupAdd. Used by
// gpu_softmax and the attention's softmax only after its probe passed.
// Workgroups of 64: row = group · subgroups + subgroup, looping by the grid,
// so any subgroup size covers every row. All in f32; only the order of the
// sum differs from softmax.comp.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer Mask { uint mask[]; };

layout(push_constant) uniform Push {
  uint rows, cols;
  uint x_off, x_stride, y_off, y_stride;
  float scale;
  uint masked;
} p;

bool counts(uint c) { return p.masked == 0 || mask[c] != 0; }

void main() {
  uint lane = gl_SubgroupInvocationID, lanes = min(gl_SubgroupSize, gl_WorkGroupSize.x);
  uint step = gl_NumWorkGroups.x * gl_NumSubgroups;
  for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < p.rows; row += step) {
    uint xr = p.x_off + row * p.x_stride, yr = p.y_off + row * p.y_stride;
    float mx = -3.0e38;
    for (uint c = lane; c < p.cols; c += lanes)
      if (counts(c)) mx = max(mx, p.scale * x[xr + c]);
    mx = subgroupMax(mx);
    float sum = 0.0;
    for (uint c = lane; c < p.cols; c += lanes)
      if (counts(c)) sum += exp(p.scale * x[xr + c] - mx);
    sum = subgroupAdd(sum);
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    for (uint c = lane; c < p.cols; c += lanes)
      y[yr + c] = counts(c) ? exp(p.scale * x[xr + c] - mx) * inv : 0.0;
  }
}
