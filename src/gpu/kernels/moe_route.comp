#version 450
// moe_route (portable): Nemotron-H's router (NemotronHTopkRouter) from its
// logits, one invocation per token:
//   p_e = sigmoid(logit_e); q_e = p_e + bias_e (the score correction)
//   groups of E / n_group experts score the sum of their top two q; the top
//   topk_group groups stay, then the top K q among their experts
//   weight_j = p_{e_j} / (Σ_j p_{e_j} + 1e-20 if norm) · scale
// Ties go to the lower index (the scores are floats of random-looking data;
// torch does not define its order either); a NaN score's place is not defined.
// The sigmoids are computed once into shared memory; each of the K picks is
// an argmax over the experts by all invocations, then a tree (one token's
// route was ~215 µs on the H200 as one invocation re-reading the logits).
// logits f32 (binding 0): row r at l_off + r·l_stride, E values
// bias   [E] f32 (binding 1)
// idx    [t][K] uint (binding 2): the chosen experts, best first
// wts    [t][K] f32 (binding 3): their weights
// E ≤ 1024, n_group ≤ 64, K ≤ 32, E / n_group ≥ 2.
layout(local_size_x = 128) in;

layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) writeonly buffer Idx { uint idx[]; };
layout(std430, binding = 3) writeonly buffer Wts { float wts[]; };

layout(push_constant) uniform Push {
  uint t, E, K, n_group, topk_group, norm;
  float scale;
  uint l_off, l_stride;
} p;

const float NONE = -3.0e38;
const uint LANES = 128;

shared float pr[1024], q[1024]; // sigmoid, and the score with its correction
shared float gs[64];            // each group's top-two sum
shared uint usable[32];         // bit e: in a kept group and not yet chosen
shared float bv[LANES];
shared uint bi[LANES], bf[LANES];
shared uint chosen[32];

// The better of two candidates (value, index, found): found first, then the
// larger value, then the lower index — a scan in increasing index order.
void better(uint a, uint b) {
  bool take = bf[b] != 0 && (bf[a] == 0 || bv[b] > bv[a] || (!(bv[a] > bv[b]) && bi[b] < bi[a]));
  if (take) bv[a] = bv[b], bi[a] = bi[b], bf[a] = 1;
}

void main() {
  uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  if (r >= p.t) return; // the whole workgroup
  uint per = p.E / p.n_group;
  for (uint e = tid; e < p.E; e += LANES) {
    float x = 1.0 / (1.0 + exp(-logits[p.l_off + r * p.l_stride + e]));
    pr[e] = x;
    q[e] = x + bias[e];
  }
  if (tid < 32) usable[tid] = 0;
  barrier();
  if (tid < p.n_group) { // the sum of each group's top two
    float a = NONE, b = NONE;
    for (uint e = tid * per; e < (tid + 1) * per; e++) {
      float v = q[e];
      if (v > a) { b = a; a = v; } else if (v > b) b = v;
    }
    gs[tid] = a + b;
  }
  barrier();
  if (tid == 0) { // the kept groups (n_group ≤ 64: one invocation)
    uint keep_lo = 0, keep_hi = 0;
    for (uint j = 0; j < p.topk_group; j++) {
      uint best = 0;
      float v = NONE;
      bool found = false;
      for (uint g = 0; g < p.n_group; g++) {
        bool kept = g < 32 ? (keep_lo & (1u << g)) != 0 : (keep_hi & (1u << (g - 32))) != 0;
        if (!kept && (!found || gs[g] > v)) { best = g; v = gs[g]; found = true; }
      }
      if (best < 32) keep_lo |= 1u << best; else keep_hi |= 1u << (best - 32);
    }
    for (uint e = 0; e < p.E; e++) {
      uint g = e / per;
      bool kept = g < 32 ? (keep_lo & (1u << g)) != 0 : (keep_hi & (1u << (g - 32))) != 0;
      if (kept) usable[e / 32] |= 1u << (e % 32);
    }
  }
  barrier();
  for (uint j = 0; j < p.K; j++) {
    float v = NONE;
    uint best = 0, found = 0;
    for (uint e = tid; e < p.E; e += LANES) // increasing e: the scan's own order
      if ((usable[e / 32] & (1u << (e % 32))) != 0 && (found == 0 || q[e] > v))
        v = q[e], best = e, found = 1;
    bv[tid] = v, bi[tid] = best, bf[tid] = found;
    barrier();
    for (uint s = LANES / 2; s > 0; s >>= 1) {
      if (tid < s) better(tid, tid + s);
      barrier();
    }
    if (tid == 0) {
      chosen[j] = bi[0];
      usable[bi[0] / 32] &= ~(1u << (bi[0] % 32));
    }
    barrier();
  }
  if (tid == 0) {
    float sum = 0.0;
    for (uint j = 0; j < p.K; j++) sum += pr[chosen[j]];
    float denom = p.norm != 0 ? sum + 1e-20 : 1.0;
    for (uint j = 0; j < p.K; j++) {
      idx[r * p.K + j] = chosen[j];
      wts[r * p.K + j] = pr[chosen[j]] / denom * p.scale;
    }
  }
}
