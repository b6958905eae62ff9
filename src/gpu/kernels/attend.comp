#version 450
// attend (portable): attention of one query per head over an f16 K/V cache,
// for decoders making one token (self-attention over the tokens so far,
// cross-attention over the encoder's frames):
//   o_h = Σ_j softmax_j(scale · q_h·K_jh) V_jh   over keys j < n
// q       f32 (binding 0): heads·hd values from q_off, head h at h·hd;
//         rounded to f16 here, as the cache is
// kv      f16 pairs (binding 1): cache row j at word kv_off + j·d (d =
//         heads·hd): K of all heads (d/2 words, head h from h·hd/2), then V
//         of all heads (d/2 words); what gpu_pack writes
// o       f32 (binding 2): heads·hd values from o_off
// scratch f32 (binding 3, STAGE 1 and 2): [heads][splits][hd + 2], a split's
//         unnormalised output, then its max score and its sum of exp
// hd even and ≤ 256; n ≥ 1, any size.
//
// STAGE 0: one workgroup of 256 per head over all keys. STAGE 1: workgroup
// (head, s) over keys s·CHUNK.. (CHUNK = 256), into scratch; STAGE 2: one
// workgroup per head merges the splits (rescaled to the largest max) into o.
// Splitting puts heads·⌈n/256⌉ workgroups to work instead of heads.
//
// Keys come in blocks of 256, one score per invocation, with an online
// softmax: the running max and sum are carried across blocks and the partial
// outputs rescaled when the max grows. For the values, invocation (g, i)
// takes value pair i of keys g, g + G, … of the block (G = ⌊256/(hd/2)⌋
// groups); a final pass in shared memory sums the groups. exp and sums in f32.
layout(local_size_x = 256) in;
// head_dim / 2, fixed per pipeline so the loops over a row unroll and their
// loads are all in flight at once (0: take it from the push constants).
layout(constant_id = 0) const uint PAIRS = 0;
layout(constant_id = 1) const uint STAGE = 0;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KV { uint kv[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(std430, binding = 3) buffer Scratch { float scratch[]; };

layout(push_constant) uniform Push {
  uint n, hd, d;
  float scale;
  uint q_off, kv_off, o_off;
} p;

const uint WG = 256, CHUNK = 256;
const float LOWEST = -3.0e38; // below any score; exp(LOWEST − score) is 0
shared uint qs[WG / 2]; // q as f16 pairs: kept packed, so no compiler can skip the rounding
shared float ps[WG];
shared float red[WG];
shared vec2 part[WG];

// The reduction (max or sum) of every invocation's v, seen by all.
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

// STAGE 2: o_h = Σ_s e^(m_s − M) acc_s / Σ_s e^(m_s − M) sum_s, M the largest m_s.
void merge(uint h) {
  uint l = gl_LocalInvocationID.x, splits = (p.n + CHUNK - 1) / CHUNK, row = p.hd + 2;
  uint base = h * splits * row;
  if (l >= p.hd) return;
  float big = LOWEST, sum = 0.0, v = 0.0;
  for (uint s = 0; s < splits; s++) big = max(big, scratch[base + s * row + p.hd]);
  for (uint s = 0; s < splits; s++) {
    float w = exp(scratch[base + s * row + p.hd] - big);
    sum += w * scratch[base + s * row + p.hd + 1];
    v += w * scratch[base + s * row + l];
  }
  o[p.o_off + h * p.hd + l] = v / sum;
}

void main() {
  uint h = gl_WorkGroupID.x, l = gl_LocalInvocationID.x;
  if (STAGE == 2) {
    merge(h);
    return;
  }
  uint pairs = PAIRS != 0 ? PAIRS : p.hd / 2, groups = WG / pairs;
  uint per = (WG + groups - 1) / groups; // keys of a block per value group
  uint kbase = p.kv_off + h * pairs, vbase = kbase + p.d / 2;
  uint first = STAGE == 1 ? gl_WorkGroupID.y * CHUNK : 0;
  uint end = STAGE == 1 ? min(p.n, first + CHUNK) : p.n;
  if (l < pairs) {
    uint i = p.q_off + h * p.hd + 2 * l;
    qs[l] = packHalf2x16(vec2(q[i], q[i + 1]));
  }
  barrier();

  uint g = l / pairs, pi = l % pairs;
  float run_max = LOWEST, run_sum = 0.0;
  vec2 acc = vec2(0.0);
  for (uint j0 = first; j0 < end; j0 += WG) {
    uint j = j0 + l;
    float s = LOWEST;
    if (j < end) {
      float dot2 = 0.0;
      uint row = kbase + j * p.d;
      for (uint i = 0; i < pairs; i++)
        dot2 += dot(unpackHalf2x16(qs[i]), unpackHalf2x16(kv[row + i]));
      s = p.scale * dot2;
    }
    float new_max = max(run_max, reduce(s, true));
    float e = j < end ? exp(s - new_max) : 0.0;
    ps[l] = e;
    float grow = exp(run_max - new_max);
    run_sum = run_sum * grow + reduce(e, false); // reduce's barriers also publish ps
    run_max = new_max;
    acc *= grow;
    uint block = min(WG, end - j0);
    for (uint t = 0; t < per; t++) {
      uint jj = g + t * groups;
      if (g < groups && jj < block)
        acc += ps[jj] * unpackHalf2x16(kv[vbase + (j0 + jj) * p.d + pi]);
    }
    barrier(); // ps is refilled by the next block
  }

  part[l] = g < groups ? acc : vec2(0.0);
  barrier();
  if (l < pairs) {
    vec2 sum = vec2(0.0);
    for (uint k = 0; k < groups; k++) sum += part[k * pairs + l];
    if (STAGE == 1) {
      uint at = (h * gl_NumWorkGroups.y + gl_WorkGroupID.y) * (p.hd + 2);
      scratch[at + 2 * l] = sum.x;
      scratch[at + 2 * l + 1] = sum.y;
      if (l == 0) {
        scratch[at + p.hd] = run_max;
        scratch[at + p.hd + 1] = run_sum;
      }
    } else {
      o[p.o_off + h * p.hd + 2 * l] = sum.x / run_sum;
      o[p.o_off + h * p.hd + 2 * l + 1] = sum.y / run_sum;
    }
  }
}
