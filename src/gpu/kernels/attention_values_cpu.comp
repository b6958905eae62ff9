#version 450
// attention_values_cpu (fast variant for CPU drivers such as lavapipe;
// subgroup size as a spec constant): attention_values.comp's o_i = Σ_j
// p[h][i][j] · v_j, with its bindings, push constants and layouts (see
// there, BATCH included), no shared memory and no barriers.
//
// A workgroup is one subgroup and owns R queries × 4·LANES columns of one
// head: each lane takes 4 consecutive columns and walks the keys 4 at a
// time, reading 4 weights of each of its R queries and 4 rows of v as vec4s
// (ALIGNED: t, v_off, v_stride and head_dim multiples of 4; else one value
// at a time), so a read feeds 4·R or 16 products; keys past the clip's own
// are skipped as attention_values.comp skips them. Queries past t read row
// t − 1 and are not written. Sums in f32, in another order.
layout(local_size_x_id = 2) in;
layout(constant_id = 0) const uint BATCH = 0;
layout(constant_id = 1) const uint R = 4;     // queries per workgroup
layout(constant_id = 2) const uint LANES = 8; // the subgroup's size
layout(constant_id = 3) const bool ALIGNED = true;

layout(std430, binding = 0) readonly buffer P { float pw[]; };
layout(std430, binding = 0) readonly buffer P4 { vec4 pw4[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 1) readonly buffer V4 { vec4 v4[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(std430, binding = 3) readonly buffer Lens { uint lens[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  uint v_off, v_stride, o_off, o_stride;
  uint heads; // BATCH = 1
} p;

void main() {
  uint lane = gl_LocalInvocationID.x;
  uint c = gl_WorkGroupID.x * 4 * LANES + 4 * lane, i0 = gl_WorkGroupID.y * R, z = gl_WorkGroupID.z;
  if (c >= p.head_dim) return; // no subgroup operation below: lanes may leave
  uint h = BATCH == 1 ? z % p.heads : z, clip = BATCH == 1 ? z / p.heads : 0;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH == 1 ? lens[clip] : p.t;
  uint last = p.t - 1;
  vec4 acc[R];
  for (uint r = 0; r < R; r++) acc[r] = vec4(0.0);
  for (uint j = 0; j < len; j += 4) {
    // v rows j .. j + 3 (rows past len: weight 0, read as 0), columns c .. c + 3.
    vec4 vr[4];
    for (uint e = 0; e < 4; e++) {
      uint at = p.v_off + (rb + j + e) * p.v_stride + col + c;
      if (ALIGNED && j + e < len) {
        vr[e] = v4[at / 4];
      } else {
        vr[e] = vec4(0.0);
        for (uint q = 0; q < 4 && j + e < len; q++)
          if (c + q < p.head_dim) vr[e][q] = v[at + q];
      }
    }
    for (uint r = 0; r < R; r++) {
      uint at = (z * p.t + min(i0 + r, last)) * p.t + j;
      vec4 w = vec4(0.0);
      // t % 4 == 0: within the row (weights past len are exact zeros, their v rows 0)
      if (ALIGNED) w = pw4[at / 4];
      else
        for (uint e = 0; e < 4; e++)
          if (j + e < len) w[e] = pw[at + e];
      acc[r] += w.x * vr[0] + w.y * vr[1] + w.z * vr[2] + w.w * vr[3];
    }
  }
  for (uint r = 0; r < R; r++) {
    uint i = i0 + r;
    if (i >= p.t) break;
    for (uint q = 0; q < 4; q++)
      if (c + q < p.head_dim) o[p.o_off + (rb + i) * p.o_stride + col + c + q] = acc[r][q];
  }
}
