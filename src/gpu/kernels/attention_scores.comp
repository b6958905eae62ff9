#version 450
// attention_scores (portable): the scaled scores of multi-head attention,
// s[h][i][j] = scale · q_i·k_j over head h's head_dim columns, and with
// RELATIVE (Transformer-XL, NeMo's RelPositionMultiHeadAttention)
// s[h][i][j] = scale · ((q+u)_i·k_j + (q+v)_i·pos[j − i + t − 1]).
//
// q, k, qv  f32 (bindings 0, 1, 2): row i of head h at
//           X[X_off + i·X_stride + h·head_dim ..], head_dim values; q is q+u
//           and qv is q+v with RELATIVE (qv is not read without it)
// pos       f32 (binding 3, RELATIVE only): 2t − 1 rows of heads·head_dim at
//           pos[pos_off + r·pos_stride ..]; row r is relative position t − 1 − r
// s         [heads][t][t] f32 (binding 4): heads·t² floats, within the
//           device's storage buffer range (often 4 GiB: t ≈ 16000 for 4
//           heads, 11000 for 8)
//
// With chunk > 0 (NeMo's chunked_limited attention), key j counts for query i
// only when j/chunk is in [i/chunk − left_chunks, i/chunk]; other scores are
// written as −1e30, which the softmax turns into exact zeros.
//
// BATCH = 1 (transformers' padded batch): gl_WorkGroupID.z = clip·heads + h
// over clips of t rows each (clip n's rows n·t .. of q, k, qv; pos shared),
// lens[n] ≤ t of them its own (binding 5, uint32): keys past that are written
// as −1e30 like the chunk mask; s is [clips·heads][t][t].
//
// Tile: T queries × T keys of one head (T 64 or 32, spec constant 3) per
// workgroup of 16×16, (T/16)² scores per invocation, head_dim in steps of
// KSTEP (8, 16 or 32, spec constant 2) through shared memory (with RELATIVE
// also the tile's 2T − 1 pos rows; 10 KiB in all at 64 × 8, 41 KiB at 64 ×
// 32, 21 KiB at 32 × 32). A step is a chain of loads, a barrier and the
// products: at t = 138 (Parakeet's 11 s) the 72 workgroups of 64 took head_dim
// 128 in 16 such steps in 40 µs on the H200, so a small grid takes the
// longest steps that fit the device and the small tile (gpu/attention.c).
// Columns past head_dim and rows past t read as 0. Products accumulate in f32.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint RELATIVE = 0;
layout(constant_id = 1) const uint BATCH = 0;
layout(constant_id = 2) const uint KSTEP = 8;
layout(constant_id = 3) const uint T = 64;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer QV { float qv[]; };
layout(std430, binding = 3) readonly buffer Pos { float pos[]; };
layout(std430, binding = 4) writeonly buffer S { float s[]; };
layout(std430, binding = 5) readonly buffer Lens { uint lens[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  float scale;
  uint q_off, q_stride, k_off, k_stride;
  uint qv_off, qv_stride, pos_off, pos_stride;
  uint chunk, left_chunks;
  uint heads; // BATCH = 1
} p;

bool kept(uint i, uint j) {
  if (p.chunk == 0) return true;
  uint ci = i / p.chunk, cj = j / p.chunk;
  return cj <= ci && ci - cj <= p.left_chunks;
}

const uint R = T / 16, PROWS = 2 * T - 1, WG = 256;
shared float qs[KSTEP][T + 1], ks[KSTEP][T + 1], qvs[KSTEP][T + 1];
shared float ps[KSTEP][PROWS + 1];

void main() {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16 + tx;
  uint i0 = gl_WorkGroupID.y * T, j0 = gl_WorkGroupID.x * T, z = gl_WorkGroupID.z;
  uint h = BATCH == 1 ? z % p.heads : z, clip = BATCH == 1 ? z / p.heads : 0;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH == 1 ? lens[clip] : p.t;
  // The tile's pos rows are base .. base + 2T − 2: (i, j) reads row
  // base + T − 1 + (j − j0) − (i − i0).
  int base = int(j0) - int(i0) + int(p.t) - int(T);
  float acc[R][R];
  [[unroll]] for (uint a = 0; a < R; a++)
    [[unroll]] for (uint b = 0; b < R; b++) acc[a][b] = 0.0;

  for (uint d0 = 0; d0 < p.head_dim; d0 += KSTEP) {
    // 64 rows × 8 columns of q, k (and q+v): two values per invocation.
    for (uint e = tid; e < T * KSTEP; e += WG) {
      uint r = e / KSTEP, dd = e % KSTEP, d = col + d0 + dd;
      bool in_d = d0 + dd < p.head_dim;
      uint i = i0 + r, j = j0 + r;
      qs[dd][r] = in_d && i < p.t ? q[p.q_off + (rb + i) * p.q_stride + d] : 0.0;
      ks[dd][r] = in_d && j < p.t ? k[p.k_off + (rb + j) * p.k_stride + d] : 0.0;
      if (RELATIVE != 0)
        qvs[dd][r] = in_d && i < p.t ? qv[p.qv_off + (rb + i) * p.qv_stride + d] : 0.0;
    }
    if (RELATIVE != 0)
      for (uint e = tid; e < PROWS * KSTEP; e += WG) {
        uint r = e / KSTEP, dd = e % KSTEP;
        int pr = base + int(r);
        bool ok = d0 + dd < p.head_dim && pr >= 0 && pr < int(2 * p.t - 1);
        ps[dd][r] = ok ? pos[p.pos_off + uint(pr) * p.pos_stride + col + d0 + dd] : 0.0;
      }
    barrier();
    for (uint dd = 0; dd < KSTEP; dd++) {
      float qa[R], kb[R];
      [[unroll]] for (uint a = 0; a < R; a++) qa[a] = qs[dd][ty + 16 * a];
      [[unroll]] for (uint b = 0; b < R; b++) kb[b] = ks[dd][tx + 16 * b];
      [[unroll]] for (uint a = 0; a < R; a++)
        [[unroll]] for (uint b = 0; b < R; b++) acc[a][b] += qa[a] * kb[b];
      if (RELATIVE != 0) {
        // Query ty + 16a, key tx + 16b: pos row tx − ty + T − 1 + 16(b − a),
        // that is tx + 15 − ty + 16m with m = b − a + R − 1.
        float va[R], pm[2 * R - 1];
        [[unroll]] for (uint a = 0; a < R; a++) va[a] = qvs[dd][ty + 16 * a];
        [[unroll]] for (uint m = 0; m < 2 * R - 1; m++) pm[m] = ps[dd][tx + 15 - ty + 16 * m];
        [[unroll]] for (uint a = 0; a < R; a++)
          [[unroll]] for (uint b = 0; b < R; b++) acc[a][b] += va[a] * pm[b + R - 1 - a];
      }
    }
    barrier();
  }

  [[unroll]] for (uint a = 0; a < R; a++) {
    uint i = i0 + ty + 16 * a;
    if (i >= p.t) continue;
    [[unroll]] for (uint b = 0; b < R; b++) {
      uint j = j0 + tx + 16 * b;
      if (j < p.t) s[(z * p.t + i) * p.t + j] = kept(i, j) && j < len ? p.scale * acc[a][b] : -1e30;
    }
  }
}
