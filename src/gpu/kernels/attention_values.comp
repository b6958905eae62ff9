#version 450
// attention_values (portable): o_i = Σ_j p[h][i][j] · v_j for each head h,
// the last step of attention after attention_scores and softmax.
//
// p  [heads][t][t] f32 (binding 0): each query's weights over the keys
// v  f32 (binding 1): row j of head h at v[v_off + j·v_stride + h·head_dim ..]
// o  f32 (binding 2): row i of head h at o[o_off + i·o_stride + h·head_dim ..];
//    only those heads·head_dim columns of each row are written
//
// BATCH = 1: p is [clips·heads][t][t], gl_WorkGroupID.z = clip·heads + h, clip
// n's rows at n·t .. of v and o, lens[n] ≤ t keys its own (binding 3, uint32;
// the weights of the others are exact zeros: they are skipped).
//
// Tile: T queries × T columns of one head (T 64 or 32, spec constant 1) per
// workgroup of 16×16, (T/16)² outputs per invocation, keys in steps of 16
// through shared memory (8 KiB at 64): the small tile makes 4× the
// workgroups where the grid is small (gpu/attention.c).
// Products accumulate in f32. A key of weight 0 still multiplies its v row:
// v must be finite in all t rows.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) readonly buffer P { float pw[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(std430, binding = 3) readonly buffer Lens { uint lens[]; };
layout(constant_id = 0) const uint BATCH = 0;
layout(constant_id = 1) const uint T = 64;

layout(push_constant) uniform Push {
  uint t, head_dim;
  uint v_off, v_stride, o_off, o_stride;
  uint heads; // BATCH = 1
} p;

const uint R = T / 16, KSTEP = 16, WG = 256;
shared float ps[KSTEP][T + 1], vs[KSTEP][T + 1];

void main() {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16 + tx;
  uint c0 = gl_WorkGroupID.x * T, i0 = gl_WorkGroupID.y * T, z = gl_WorkGroupID.z;
  uint h = BATCH == 1 ? z % p.heads : z, clip = BATCH == 1 ? z / p.heads : 0;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH == 1 ? lens[clip] : p.t;
  float acc[R][R];
  [[unroll]] for (uint a = 0; a < R; a++)
    [[unroll]] for (uint b = 0; b < R; b++) acc[a][b] = 0.0;

  for (uint j0 = 0; j0 < len; j0 += KSTEP) {
    // T queries × 16 keys of p and 16 keys × T columns of v.
    for (uint e = tid; e < T * KSTEP; e += WG) {
      uint r = e / KSTEP, jj = e % KSTEP, i = i0 + r, j = j0 + jj;
      ps[jj][r] = i < p.t && j < len ? pw[(z * p.t + i) * p.t + j] : 0.0;
      uint vj = j0 + e / T, c = c0 + e % T;
      vs[e / T][e % T] =
          vj < len && c < p.head_dim ? v[p.v_off + (rb + vj) * p.v_stride + col + c] : 0.0;
    }
    barrier();
    for (uint jj = 0; jj < KSTEP; jj++) {
      float pa[R], vb[R];
      [[unroll]] for (uint a = 0; a < R; a++) pa[a] = ps[jj][ty + 16 * a];
      [[unroll]] for (uint b = 0; b < R; b++) vb[b] = vs[jj][tx + 16 * b];
      [[unroll]] for (uint a = 0; a < R; a++)
        [[unroll]] for (uint b = 0; b < R; b++) acc[a][b] += pa[a] * vb[b];
    }
    barrier();
  }

  [[unroll]] for (uint a = 0; a < R; a++) {
    uint i = i0 + ty + 16 * a;
    if (i >= p.t) continue;
    [[unroll]] for (uint b = 0; b < R; b++) {
      uint c = c0 + tx + 16 * b;
      if (c < p.head_dim) o[p.o_off + (rb + i) * p.o_stride + col + c] = acc[a][b];
    }
  }
}
