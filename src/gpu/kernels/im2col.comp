#version 450
// im2col (portable): the columns of a conv1d over x [t][ch], so the conv is a
// GEMM with the weight [out][ch][kernel] flattened to [out][ch·kernel].
//
// x   f32 (binding 0): row s at x_off + s·x_stride, ch values
// col [t_out][width] f32 (binding 1), t_out = (t + 2·pad − kernel) / stride + 1:
//     col[i][c·kernel + k] = x[i·stride + k − pad][c], 0 outside rows 0..t−1;
//     columns from ch·kernel to width are 0 (the GEMM's k padding)
// Workgroups: (width / 256 rounded up, t_out folded to ≤ 65535); an exact copy.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Col { float col[]; };

layout(push_constant) uniform Push {
  uint t, ch, kernel, stride, pad;
  uint x_off, x_stride, width, t_out;
} p;

void main() {
  uint j = gl_GlobalInvocationID.x;
  if (j >= p.width) return;
  uint c = j / p.kernel, k = j % p.kernel;
  for (uint i = gl_WorkGroupID.y; i < p.t_out; i += gl_NumWorkGroups.y) {
    int s = int(i * p.stride + k) - int(p.pad);
    float v = 0.0;
    if (c < p.ch && s >= 0 && s < int(p.t)) v = x[p.x_off + uint(s) * p.x_stride + c];
    col[i * p.width + j] = v;
  }
}
