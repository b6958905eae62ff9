#version 450
// moe_combine (portable): c[t][i] += Σ_j wt[t][j] · y[t·K + j][i] for i < n:
// the grouped experts' outputs weighted by the router, in slot order, added to
// the residual (c rows at c_off + t·c_stride).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer Wt { float wt[]; };
layout(std430, binding = 2) buffer C { float c[]; };

layout(push_constant) uniform Push {
  uint t, K, n, c_off, c_stride;
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.t; r += gl_NumWorkGroups.y)
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 64) {
      float s = 0.0;
      for (uint j = 0; j < p.K; j++) s += wt[r * p.K + j] * y[(r * p.K + j) * p.n + i];
      c[p.c_off + r * p.c_stride + i] += s;
    }
}
