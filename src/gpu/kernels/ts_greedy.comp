#version 450
// ts_greedy (portable): one greedy step of Whisper's search on the GPU, so
// that a decoder can run token after token without the host: the rules of
// decode/whisper.c's wsearch_process on the raw logits, then the argmax and
// its log-softmax —
//   1. suppression: ids whose bit is set in blocked's first `words` words,
//      and at the first step (n = 0) those of the next `words`;
//   2. with TIMESTAMPS (flags bit 0) WhisperTimeStampLogitsProcessor: the
//      <|notimestamps|> id, timestamps in pairs and never decreasing (the
//      last one from gen), the first step's text and timestamps past
//      max_initial, and every text id where the timestamps' log Σ exp beats
//      the best text logit;
//   3. with flags bit 1 the end of text (the benchmarks' fixed token count);
//   4. gen[n] = the first index of the largest processed logit (NaN never
//      chosen, 0 where x[0] is NaN, as argmax.comp), lp[n] = its processed
//      logit − log Σ exp over all of them.
// The same tokens as the host's rules, which take the two log Σ exp in
// double: here they are in f32 (as transformers' log_softmax is), so a token
// could differ only where a timestamps' sum ties the best text logit to ~1e-7.
//
// x        f32 [vocab] (binding 0): the head's raw logits, read only
// blocked  uint (binding 1): 2·words words of bits, id i at bit i % 32 of word i / 32
// gen      uint (binding 2): ids generated so far, gen[0 .. n); gen[n] written
// lp       f32 (binding 3): lp[n] written
// One workgroup of WG invocations; each pass walks the vocabulary.
#extension GL_GOOGLE_include_directive : require

#define WG 256
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Blocked { uint blocked[]; };
layout(std430, binding = 2) buffer Gen { uint gen[]; };
layout(std430, binding = 3) writeonly buffer Lp { float lp[]; };

layout(push_constant) uniform Push {
  uint vocab, eot, no_ts, n, words, flags;
  int max_initial; // < 0: no limit on the first timestamp
} p;

#include "wg_sum.glsl"

const float NEG = -1.0 / 0.0; // −∞

// The larger of a and b, a NaN never taken (the host's max_of).
float bigger(float a, float b) { return b > a ? b : a; }

float wg_max(float v) {
  uint tid = gl_LocalInvocationID.x;
  red[tid] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = bigger(red[tid], red[tid + s]);
    barrier();
  }
  float m = red[0];
  barrier();
  return m;
}

// argmax.comp's ordered keys: as the floats order, −0 = +0, 0 for a NaN.
uint key(float v) {
  uint b = floatBitsToUint(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0u;
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}

shared uint rk[WG], ri[WG];

// The best (key, index) of the workgroup: a larger key, or the same at a lower index.
void wg_best(inout uint k, inout uint i) {
  uint tid = gl_LocalInvocationID.x;
  rk[tid] = k;
  ri[tid] = i;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) {
      uint k2 = rk[tid + s], i2 = ri[tid + s];
      if (k2 > rk[tid] || (k2 == rk[tid] && i2 < ri[tid])) rk[tid] = k2, ri[tid] = i2;
    }
    barrier();
  }
  k = rk[0];
  i = ri[0];
  barrier();
}

// The step's state, the same for every invocation.
uint tb;                  // the first timestamp id
bool last, penult;        // the last (second-to-last) generated id is a timestamp
int ts_last;              // the last generated timestamp, −1: none
uint ts_from, ts_to;      // timestamps in [ts_from, ts_to) masked (never going back)

bool is_blocked(uint i, uint base) { return ((blocked[base + i / 32] >> (i % 32)) & 1u) != 0u; }

// Logit i after suppression and the per-id timestamp rules (not the text mask).
float processed(uint i) {
  float v = x[i];
  if (is_blocked(i, 0u) || (p.n == 0u && is_blocked(i, p.words))) return NEG;
  if ((p.flags & 1u) == 0u) return v;
  if (i == p.no_ts) return NEG;
  if (last && (penult ? i >= tb : i < p.eot)) return NEG;
  if (i >= ts_from && i < ts_to) return NEG;
  if (p.n == 0u) {
    if (i < tb) return NEG;
    if (p.max_initial >= 0 && tb + uint(p.max_initial) + 1u < p.vocab && i >= tb + uint(p.max_initial) + 1u)
      return NEG;
  }
  return v;
}

// Logit i as the choice sees it: processed, the text masked where the
// timestamps won, the end of text masked with flags bit 1.
float chosen_from(uint i, bool text_masked) {
  if ((text_masked && i < tb) || ((p.flags & 2u) != 0u && i == p.eot)) return NEG;
  return processed(i);
}

void main() {
  uint tid = gl_LocalInvocationID.x, V = p.vocab, n = p.n;
  tb = p.no_ts + 1u;
  last = n >= 1u && gen[n - 1u] >= tb;
  penult = n < 2u || gen[n - 2u] >= tb;
  // The last timestamp generated: the largest position holding one.
  uint pk = 0u, pi = 0u;
  for (uint j = tid; j < n; j += WG)
    if (gen[j] >= tb) pk = 1u, pi = j; // each invocation's positions rise
  // wg_best keeps the lowest index of a key: take the highest position by its complement.
  uint qk = pk, qi = pk != 0u ? ~pi : 0xffffffffu;
  wg_best(qk, qi);
  ts_last = qk != 0u ? int(gen[~qi]) : -1;
  ts_from = tb;
  ts_to = ts_last < 0 ? tb : (last && !penult ? uint(ts_last) : uint(ts_last) + 1u);

  // The best text logit and the timestamps' log Σ exp.
  bool text_masked = false;
  if ((p.flags & 1u) != 0u) {
    float text_max = NEG, ts_max = NEG;
    for (uint i = tid; i < V; i += WG) {
      float v = processed(i);
      if (i < tb) text_max = bigger(text_max, v);
      else ts_max = bigger(ts_max, v);
    }
    text_max = wg_max(text_max);
    ts_max = wg_max(ts_max);
    float sum = 0.0;
    if (ts_max != NEG)
      for (uint i = tb + tid; i < V; i += WG) sum += exp(processed(i) - ts_max);
    sum = wg_sum(sum);
    text_masked = ts_max != NEG && ts_max + log(sum) > text_max;
  }

  // The argmax of the processed logits, then its log-softmax.
  uint k = 0u, best = 0xffffffffu;
  float top = NEG;
  for (uint i = tid; i < V; i += WG) {
    float v = chosen_from(i, text_masked);
    uint kv = key(v);
    if (kv > k) k = kv, best = i;
    top = bigger(top, v);
  }
  wg_best(k, best);
  top = wg_max(top);
  uint id = key(chosen_from(0u, text_masked)) == 0u || k == 0u ? 0u : best;
  float sum = 0.0;
  if (top != NEG)
    for (uint i = tid; i < V; i += WG) sum += exp(chosen_from(i, text_masked) - top);
  sum = wg_sum(sum);
  if (tid == 0u) {
    gen[n] = id;
    lp[n] = chosen_from(id, text_masked) - (top == NEG ? NEG : top + log(sum));
  }
}
