#version 450
// attention_scores_cpu (fast variant for CPU drivers such as lavapipe;
// subgroup arithmetic): attention_scores.comp's scores — plain, RELATIVE,
// the chunked mask, BATCH — with its bindings, push constants and layouts
// (see there), no shared memory and no barriers.
//
// A CPU driver runs a subgroup as the lanes of a SIMD vector and makes every
// buffer or shared-memory read a loop over the lanes; attention_scores.comp's
// tile stages through shared memory behind barriers. Here a workgroup is one
// subgroup and owns R queries × C keys of one head (gemm_cpu.comp's scheme):
// each lane takes 4 consecutive head_dim columns of every chunk of 4·LANES,
// reads q (and q+v) of its R queries and k of its C keys once per chunk (and
// with RELATIVE the R + C − 1 pos rows its pairs reach: a pair's row is
// j − i + t − 1, shared along each diagonal), and the lanes' partial sums are
// added by subgroupAdd; each lane writes every LANES-th score. Queries and
// keys past t read row t − 1 and are not written. Sums in f32, in another
// order than attention_scores.comp's.
//
// ALIGNED (every offset and stride of q, k, q+v and pos, and head_dim,
// multiples of 4) reads 4 floats at a time; else one at a time.
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 4) in;
layout(constant_id = 0) const uint RELATIVE = 0;
layout(constant_id = 1) const uint BATCH = 0;
layout(constant_id = 2) const uint R = 4; // queries per workgroup
layout(constant_id = 3) const uint C = 8; // keys per workgroup
layout(constant_id = 4) const uint LANES = 8; // the subgroup's size
layout(constant_id = 5) const bool ALIGNED = true;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 0) readonly buffer Q4 { vec4 q4[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer K4 { vec4 k4[]; };
layout(std430, binding = 2) readonly buffer QV { float qv[]; };
layout(std430, binding = 2) readonly buffer QV4 { vec4 qv4[]; };
layout(std430, binding = 3) readonly buffer Pos { float pos[]; };
layout(std430, binding = 3) readonly buffer Pos4 { vec4 pos4[]; };
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

// Values at .. at + 3 of each buffer (at: a row's start plus a column d of
// the head, d < head_dim); one at a time unless ALIGNED, 0 past head_dim.
#define READ4(name, buf, buf4)                                             \
  vec4 name(uint at, uint d) {                                            \
    if (ALIGNED) return buf4[at / 4];                                      \
    vec4 v = vec4(0.0);                                                    \
    for (uint e = 0; e < 4; e++)                                           \
      if (d + e < p.head_dim) v[e] = buf[at + e];                          \
    return v;                                                              \
  }
READ4(q_at, q, q4)
READ4(k_at, k, k4)
READ4(qv_at, qv, qv4)
READ4(pos_at, pos, pos4)

void main() {
  uint lane = gl_LocalInvocationID.x;
  uint i0 = gl_WorkGroupID.y * R, j0 = gl_WorkGroupID.x * C, z = gl_WorkGroupID.z;
  uint h = BATCH == 1 ? z % p.heads : z, clip = BATCH == 1 ? z / p.heads : 0;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH == 1 ? lens[clip] : p.t;
  uint last = p.t - 1;
  float acc[R][C];
  for (uint r = 0; r < R; r++)
    for (uint c = 0; c < C; c++) acc[r][c] = 0.0;
  for (uint kb = 0; kb < p.head_dim; kb += 4 * LANES) {
    uint d = kb + 4 * lane;
    if (d >= p.head_dim) continue; // the last chunk's lanes past head_dim
    vec4 kv[C], pv[R + C - 1];
    for (uint c = 0; c < C; c++) kv[c] = k_at(p.k_off + (rb + min(j0 + c, last)) * p.k_stride + col + d, d);
    // Pair (r, c) reads pos row j0 + c − i0 − r + t − 1: pv[c − r + R − 1]
    // (rows of pairs past t clamped: they are not written).
    for (uint m = 0; RELATIVE != 0 && m < R + C - 1; m++) {
      int pr = clamp(int(j0) - int(i0) + int(last) + int(m) - int(R - 1), 0, 2 * int(last));
      pv[m] = pos_at(p.pos_off + uint(pr) * p.pos_stride + col + d, d);
    }
    for (uint r = 0; r < R; r++) {
      uint i = min(i0 + r, last);
      vec4 qa = q_at(p.q_off + (rb + i) * p.q_stride + col + d, d);
      for (uint c = 0; c < C; c++) acc[r][c] += dot(qa, kv[c]);
      if (RELATIVE == 0) continue;
      vec4 va = qv_at(p.qv_off + (rb + i) * p.qv_stride + col + d, d);
      for (uint c = 0; c < C; c++) acc[r][c] += dot(va, pv[c + R - 1 - r]);
    }
  }

  // The sums, then each lane writes every LANES-th score (r·C + c).
  float sum[R * C];
  for (uint r = 0; r < R; r++)
    for (uint c = 0; c < C; c++) sum[r * C + c] = subgroupAdd(acc[r][c]);
  for (uint o = 0; o < R * C; o += LANES) {
    float v = sum[o];
    for (uint x = 1; x < LANES && o + x < R * C; x++) v = lane == x ? sum[o + x] : v;
    uint at = o + lane, i = i0 + at / C, j = j0 + at % C;
    if (at >= R * C || i >= p.t || j >= p.t) continue;
    s[(z * p.t + i) * p.t + j] = kept(i, j) && j < len ? p.scale * v : -1e30;
  }
}
