#version 450
// attention_values (portable): o_i = Σ_j p[h][i][j] · v_j for each head h,
// the last step of attention after attention_scores and softmax.
//
// p  [heads][t][t] f32 (binding 0): each query's weights over the keys
// v  f32 (binding 1): row j of head h at v[v_off + j·v_stride + h·head_dim ..]
// o  f32 (binding 2): row i of head h at o[o_off + i·o_stride + h·head_dim ..];
//    only those heads·head_dim columns of each row are written
//
// Tile: 64 queries × 64 columns of one head per workgroup of 16×16, 4×4
// outputs per invocation, keys in steps of 16 through shared memory (8 KiB).
// Products accumulate in f32. A key of weight 0 still multiplies its v row:
// v must be finite in all t rows.
layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) readonly buffer P { float pw[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  uint v_off, v_stride, o_off, o_stride;
} p;

const uint T = 64, KSTEP = 16, WG = 256;
shared float ps[KSTEP][T + 1], vs[KSTEP][T + 1];

void main() {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16 + tx;
  uint c0 = gl_WorkGroupID.x * T, i0 = gl_WorkGroupID.y * T, h = gl_WorkGroupID.z;
  uint col = h * p.head_dim;
  float acc[4][4];
  for (uint a = 0; a < 4; a++)
    for (uint b = 0; b < 4; b++) acc[a][b] = 0.0;

  for (uint j0 = 0; j0 < p.t; j0 += KSTEP) {
    // 64 queries × 16 keys of p and 16 keys × 64 columns of v: four each.
    for (uint e = tid; e < T * KSTEP; e += WG) {
      uint r = e / KSTEP, jj = e % KSTEP, i = i0 + r, j = j0 + jj;
      ps[jj][r] = i < p.t && j < p.t ? pw[(h * p.t + i) * p.t + j] : 0.0;
      uint vj = j0 + e / T, c = c0 + e % T;
      vs[e / T][e % T] = vj < p.t && c < p.head_dim ? v[p.v_off + vj * p.v_stride + col + c] : 0.0;
    }
    barrier();
    for (uint jj = 0; jj < KSTEP; jj++) {
      float pa[4], vb[4];
      for (uint a = 0; a < 4; a++) pa[a] = ps[jj][ty + 16 * a];
      for (uint b = 0; b < 4; b++) vb[b] = vs[jj][tx + 16 * b];
      for (uint a = 0; a < 4; a++)
        for (uint b = 0; b < 4; b++) acc[a][b] += pa[a] * vb[b];
    }
    barrier();
  }

  for (uint a = 0; a < 4; a++) {
    uint i = i0 + ty + 16 * a;
    if (i >= p.t) continue;
    for (uint b = 0; b < 4; b++) {
      uint c = c0 + tx + 16 * b;
      if (c < p.head_dim) o[p.o_off + i * p.o_stride + col + c] = acc[a][b];
    }
  }
}
