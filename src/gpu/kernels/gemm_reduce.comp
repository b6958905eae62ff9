#version 450
// gemm_reduce: the end of a split-k gemm (gemm.comp with splits > 1):
// c [m][n + dual] = epilogue(Σ_z part[z][m][n] + bias), and the first `dual`
// outputs again at n + j with the second bias, as gemm.comp writes them.
// One invocation per output, in rows of 256.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };

layout(push_constant) uniform Push {
  uint m, n, splits, mode;
  float alpha;
  uint dual;
} p;

void main() {
  uint col = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
  if (col >= p.n || row >= p.m) return;
  float s = 0.0;
  for (uint z = 0; z < p.splits; z++) s += part[(z * p.m + row) * p.n + col];
  uint width = p.n + p.dual, at = row * width + col;
  c[at] = epilogue(p.mode, p.alpha, s + bias[col], reads_output(p.mode) ? c[at] : 0.0);
  if (col < p.dual) c[row * width + p.n + col] = s + bias[p.n + col];
}
