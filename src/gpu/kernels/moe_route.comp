#version 450
// moe_route (portable): Nemotron-H's router (NemotronHTopkRouter) from its
// logits, one invocation per token:
//   p_e = sigmoid(logit_e); q_e = p_e + bias_e (the score correction)
//   groups of E / n_group experts score the sum of their top two q; the top
//   topk_group groups stay, then the top K q among their experts
//   weight_j = p_{e_j} / (Σ_j p_{e_j} + 1e-20 if norm) · scale
// Ties go to the lower index (the scores are floats of random-looking data;
// torch does not define its order either).
// logits f32 (binding 0): row r at l_off + r·l_stride, E values
// bias   [E] f32 (binding 1)
// idx    [t][K] uint (binding 2): the chosen experts, best first
// wts    [t][K] f32 (binding 3): their weights
// E ≤ 1024, n_group ≤ 64, K ≤ 32, E / n_group ≥ 2.
layout(local_size_x = 64) in;

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

float prob(uint r, uint e) { return 1.0 / (1.0 + exp(-logits[p.l_off + r * p.l_stride + e])); }
float choice(uint r, uint e) { return prob(r, e) + bias[e]; }

void main() {
  uint r = gl_GlobalInvocationID.x;
  if (r >= p.t) return;
  uint per = p.E / p.n_group;
  float gs[64];
  for (uint g = 0; g < p.n_group; g++) { // the sum of each group's top two
    float a = NONE, b = NONE;
    for (uint e = g * per; e < (g + 1) * per; e++) {
      float q = choice(r, e);
      if (q > a) { b = a; a = q; } else if (q > b) b = q;
    }
    gs[g] = a + b;
  }
  uint keep_lo = 0, keep_hi = 0; // kept groups, bits 0..63
  for (uint j = 0; j < p.topk_group; j++) {
    uint best = 0;
    float bv = NONE;
    bool found = false;
    for (uint g = 0; g < p.n_group; g++) {
      bool kept = g < 32 ? (keep_lo & (1u << g)) != 0 : (keep_hi & (1u << (g - 32))) != 0;
      if (!kept && (!found || gs[g] > bv)) { best = g; bv = gs[g]; found = true; }
    }
    if (best < 32) keep_lo |= 1u << best; else keep_hi |= 1u << (best - 32);
  }
  uint chosen[32];
  float sum = 0.0;
  for (uint j = 0; j < p.K; j++) {
    uint best = 0;
    float bv = NONE;
    bool found = false;
    for (uint e = 0; e < p.E; e++) {
      uint g = e / per;
      bool kept = g < 32 ? (keep_lo & (1u << g)) != 0 : (keep_hi & (1u << (g - 32))) != 0;
      bool taken = false;
      for (uint i = 0; i < j; i++) taken = taken || chosen[i] == e;
      float q = choice(r, e);
      if (kept && !taken && (!found || q > bv)) { best = e; bv = q; found = true; }
    }
    chosen[j] = best;
    sum += prob(r, best);
  }
  float denom = p.norm != 0 ? sum + 1e-20 : 1.0;
  for (uint j = 0; j < p.K; j++) {
    idx[r * p.K + j] = chosen[j];
    wts[r * p.K + j] = prob(r, chosen[j]) / denom * p.scale;
  }
}
