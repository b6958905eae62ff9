#version 450
// argmax (portable): the index of the largest of `cols` values in each of
// `rows` rows, as the C loop `best = 0; for i ≥ 1: if (x[i] > x[best]) best = i`
// picks it: the lowest index among equal largest values (−0 equals +0), a NaN
// never chosen, and 0 where x[0] is NaN (or every value is). Values compare as
// ordered integer keys made from their bits, so a driver's float compares
// (NaN, denormals flushed) cannot change the answer.
//
// x     f32 (binding 0): row r at x[x_off + r·x_stride ..], cols values
// ids   uint (binding 1): passes 0 and 2 write ids[ids_off + r], the row's argmax
// part  uint (binding 2): pass 1 writes and pass 2 reads, for row r and chunk c,
//       part[2·(r·chunks + c)] the chunk's best key (0: none) and then its index
//
// pass 0: one workgroup per row over the whole row.
// pass 1: workgroup (row, c) over columns [c·chunk, min((c+1)·chunk, cols)).
// pass 2: one workgroup per row over the row's `chunks` bests.
// Rows past the workgroup count are taken in a loop (row += groups along x).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 128) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Ids { uint ids[]; };
layout(std430, binding = 2) buffer Part { uint part[]; };

layout(push_constant) uniform Push {
  uint rows, cols, x_off, x_stride, ids_off, chunk, chunks, pass;
} p;

const uint WG = 128;
const uint NONE = 0xffffffffu;

#include "best_key.glsl"

// The best of columns [c0, c1) of the row at xr (each invocation's columns
// rise, so a strictly larger key keeps the lowest index).
void scan(uint xr, uint c0, uint c1, inout uint k, inout uint i) {
  for (uint c = c0 + gl_LocalInvocationID.x; c < c1; c += WG) {
    uint kc = key(x[xr + c]);
    if (kc > k) k = kc, i = c;
  }
  wg_best(k, i);
}

// The C loop's answer from the row's best: 0 where x[0] is NaN or nothing won.
uint answer(uint xr, uint k, uint i) {
  return key(x[xr]) == 0u || k == 0u ? 0u : i;
}

void main() {
  uint l = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint xr = p.x_off + row * p.x_stride, k = 0u, i = NONE;
    if (p.pass == 0u) {
      scan(xr, 0u, p.cols, k, i);
      if (l == 0u) ids[p.ids_off + row] = answer(xr, k, i);
    } else if (p.pass == 1u) {
      uint c = gl_WorkGroupID.y, c0 = c * p.chunk;
      scan(xr, c0, min(c0 + p.chunk, p.cols), k, i);
      uint at = 2u * (row * p.chunks + c);
      if (l == 0u) part[at] = k, part[at + 1u] = i;
    } else {
      for (uint c = l; c < p.chunks; c += WG) {
        uint at = 2u * (row * p.chunks + c);
        take(k, i, part[at], part[at + 1u]);
      }
      wg_best(k, i);
      if (l == 0u) ids[p.ids_off + row] = answer(xr, k, i);
    }
  }
}
