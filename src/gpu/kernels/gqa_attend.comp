#version 450
// gqa_attend (portable): causal grouped-query attention of nq query rows over
// an f32 K/V cache, no positional rotation (Nemotron-H's attention layers):
//   o_ih = Σ_{j ≤ pos + i} softmax_j(scale · q_ih · K_jg) V_jg,   g = h / (heads / kv_heads)
// Query row i sits at position pos + i, so one call serves a prompt (nq rows
// appended at pos) and a generated token (nq = 1). With F16 (spec constant 0)
// the cache holds f16 values (gpu_pack's pairs, low half first) and its
// offsets and stride count f16 values (even); sums are f32 either way.
// q      f32 (binding 0): row i at q_off + i·q_stride, heads·hd values
// kv     f32 (binding 1): key row j at k_off + j·kv_stride, value row j at
//        v_off + j·kv_stride, kv_heads·hd values each
// o      f32 (binding 2): row i at o_off + i·o_stride, heads·hd values
// hd ≤ 256. Workgroup (head, query row): keys in blocks of 128, one score per
// invocation, an online softmax (running max and sum, partial outputs rescaled
// when the max grows); each invocation accumulates dims l and l + 128. f32.
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint F16 = 0;
const uint WG = 128;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KV { uint kv[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform Push {
  uint nq, heads, kv_heads, hd, pos;
  float scale;
  uint q_off, q_stride, k_off, v_off, kv_stride, o_off, o_stride;
} p;

const float LOWEST = -3.0e38;
shared float qs[256];
shared float ps[WG];
shared float red[WG];

float reduce(float v, bool is_max) {
  uint l = gl_LocalInvocationID.x;
  red[l] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (l < s) red[l] = is_max ? max(red[l], red[l + s]) : red[l] + red[l + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

// Cache value number i (an f32 word, or half i of the f16 pairs).
float cached(uint i) {
  if (F16 != 0) return unpackHalf2x16(kv[i / 2])[i % 2];
  return uintBitsToFloat(kv[i]);
}

void main() {
  uint h = gl_WorkGroupID.x, i = gl_WorkGroupID.y, l = gl_LocalInvocationID.x;
  uint g = h / (p.heads / p.kv_heads), n = p.pos + i + 1;
  for (uint d = l; d < p.hd; d += WG) qs[d] = q[p.q_off + i * p.q_stride + h * p.hd + d];
  barrier();
  float run_max = LOWEST, run_sum = 0.0;
  vec2 acc = vec2(0.0);
  for (uint j0 = 0; j0 < n; j0 += WG) {
    uint j = j0 + l;
    float s = LOWEST;
    if (j < n) {
      uint row = p.k_off + j * p.kv_stride + g * p.hd;
      float dotv = 0.0;
      for (uint d = 0; d < p.hd; d++) dotv += qs[d] * cached(row + d);
      s = p.scale * dotv;
    }
    float new_max = max(run_max, reduce(s, true));
    float e = j < n ? exp(s - new_max) : 0.0;
    ps[l] = e;
    float grow = exp(run_max - new_max);
    run_sum = run_sum * grow + reduce(e, false); // its barriers publish ps too
    run_max = new_max;
    acc *= grow;
    uint block = min(WG, n - j0);
    for (uint jj = 0; jj < block; jj++) {
      uint row = p.v_off + (j0 + jj) * p.kv_stride + g * p.hd;
      if (l < p.hd) acc.x += ps[jj] * cached(row + l);
      if (l + WG < p.hd) acc.y += ps[jj] * cached(row + l + WG);
    }
    barrier(); // ps is refilled by the next block
  }
  uint at = p.o_off + i * p.o_stride + h * p.hd;
  if (l < p.hd) o[at + l] = acc.x / run_sum;
  if (l + WG < p.hd) o[at + l + WG] = acc.y / run_sum;
}
