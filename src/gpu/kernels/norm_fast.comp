#version 450
// norm_fast: norm.comp's plain LayerNorm (no RoPE) with one subgroup per row,
// several rows per workgroup, statistics by subgroupAdd instead of a
// shared-memory tree. Used by gpu_layer_norm only after its probe passed.
//
// x    f32 (binding 0): row i at x_off + i·x_stride, n values
// g, b [n] f32 (bindings 1, 2): LayerNorm weight and bias
// y    f32 (binding 3): row i at y_off + i·y_stride; may be x itself (each lane
//      reads the x of exactly the values it writes, after the statistics)
// Workgroups of 64: row = group · subgroups + subgroup, looping by the grid, so
// any subgroup size (8, 32, 64) covers every row. Statistics as norm.comp's:
// mean, then mean of (x − mean)², in f32; only the order of the sums differs.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows, n;
  float eps;
  uint x_off, x_stride, y_off, y_stride;
} p;

void main() {
  // A subgroup wider than the workgroup has only WG lanes.
  uint lane = gl_SubgroupInvocationID, lanes = min(gl_SubgroupSize, gl_WorkGroupSize.x);
  uint step = gl_NumWorkGroups.x * gl_NumSubgroups;
  for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < p.rows; row += step) {
    uint xa = p.x_off + row * p.x_stride, ya = p.y_off + row * p.y_stride;
    float s = 0.0;
    for (uint i = lane; i < p.n; i += lanes) s += x[xa + i];
    float mean = subgroupAdd(s) / float(p.n), v = 0.0;
    for (uint i = lane; i < p.n; i += lanes) {
      float c = x[xa + i] - mean;
      v += c * c;
    }
    float rstd = inversesqrt(subgroupAdd(v) / float(p.n) + p.eps);
    for (uint i = lane; i < p.n; i += lanes) y[ya + i] = (x[xa + i] - mean) * rstd * g[i] + b[i];
  }
}
