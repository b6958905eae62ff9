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
// part     (binding 4): PARTS words per workgroup of pass 0
// Two passes (push constant pass): 0, workgroup g of `groups` over ids
// [g·slice, (g+1)·slice): the best text logit (the rule's, end of text
// included), and over the text ids and the timestamps apart, the best
// (ordered key, id) and the running (max, Σ exp(v − max)) of the values the
// choice sees; 1, one workgroup: those combined, the text masked or not, the
// choice and its log-probability. A step is latency, not work: one workgroup
// walking the whole vocabulary took 310 µs on the H200.
#extension GL_GOOGLE_include_directive : require

#define WG 256
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Blocked { uint blocked[]; };
layout(std430, binding = 2) buffer Gen { uint gen[]; };
layout(std430, binding = 3) writeonly buffer Lp { float lp[]; };
layout(std430, binding = 4) buffer Part { uint part[]; };

layout(push_constant) uniform Push {
  uint vocab, eot, no_ts, n, words, flags;
  int max_initial; // < 0: no limit on the first timestamp
  uint pass, groups, slice;
} p;

const uint PARTS = 9; // rule max; text key, id, max, sum; timestamps' key, id, max, sum

#include "best_key.glsl"

const float NEG = -1.0 / 0.0; // −∞

// The larger of a and b, a NaN never taken (the host's max_of).
float bigger(float a, float b) { return b > a ? b : a; }

shared float red[WG];

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

// The step's state, the same for every invocation.
uint tb;                  // the first timestamp id
bool last, penult;        // the last (second-to-last) generated id is a timestamp
uint ts_to;               // timestamps in [tb, ts_to) masked (never going back)

bool is_blocked(uint i, uint base) { return ((blocked[base + i / 32] >> (i % 32)) & 1u) != 0u; }

// Logit i after suppression and the per-id timestamp rules (not the text mask).
float processed(uint i) {
  float v = x[i];
  if (is_blocked(i, 0u) || (p.n == 0u && is_blocked(i, p.words))) return NEG;
  if ((p.flags & 1u) == 0u) return v;
  if (i == p.no_ts) return NEG;
  if (last && (penult ? i >= tb : i < p.eot)) return NEG;
  if (i >= tb && i < ts_to) return NEG;
  if (p.n == 0u) {
    if (i < tb) return NEG;
    if (p.max_initial >= 0 && tb + uint(p.max_initial) + 1u < p.vocab && i >= tb + uint(p.max_initial) + 1u)
      return NEG;
  }
  return v;
}

// Logit i as the choice sees it before the text mask: the end of text masked with flags bit 1.
float choice_value(uint i) { return (p.flags & 2u) != 0u && i == p.eot ? NEG : processed(i); }

// (m, s) a running max and Σ exp(v − m) over values v, −∞ adding nothing, a NaN making s NaN
// (the host's sum in double takes exp(NaN − top) too).
vec2 add_exp(vec2 ms, float v) {
  if (isnan(v)) return vec2(ms.x, v);
  if (v == NEG) return ms;
  if (v > ms.x) return vec2(v, ms.y * exp(ms.x - v) + 1.0);
  return vec2(ms.x, ms.y + exp(v - ms.x));
}

vec2 join_exp(vec2 a, vec2 b) {
  if (a.x == NEG) return isnan(a.y) ? vec2(b.x, a.y) : b;
  if (b.x == NEG) return isnan(b.y) ? vec2(a.x, b.y) : a;
  float m = max(a.x, b.x);
  return vec2(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

shared vec2 rms[WG];

vec2 wg_join(vec2 ms) {
  uint tid = gl_LocalInvocationID.x;
  rms[tid] = ms;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) rms[tid] = join_exp(rms[tid], rms[tid + s]);
    barrier();
  }
  vec2 r = rms[0];
  barrier();
  return r;
}

float lse(vec2 ms) { return ms.x == NEG ? NEG : ms.x + log(ms.y); }

void state() {
  uint tid = gl_LocalInvocationID.x, n = p.n;
  tb = p.no_ts + 1u;
  last = n >= 1u && gen[n - 1u] >= tb;
  penult = n < 2u || gen[n - 2u] >= tb;
  // The last timestamp generated: the highest position holding one
  // (wg_best keeps the lowest id of a key: positions go in complemented).
  uint pk = 0u, pi = 0u;
  for (uint j = tid; j < n; j += WG)
    if (gen[j] >= tb) pk = 1u, pi = j; // each invocation's positions rise
  uint qk = pk, qi = pk != 0u ? ~pi : 0xffffffffu;
  wg_best(qk, qi);
  int ts_last = qk != 0u ? int(gen[~qi]) : -1;
  ts_to = ts_last < 0 ? tb : (last && !penult ? uint(ts_last) : uint(ts_last) + 1u);
}

void main() {
  uint tid = gl_LocalInvocationID.x, V = p.vocab, g = gl_WorkGroupID.x;
  state();
  if (p.pass == 0u) {
    float rule_max = NEG;
    uint tk = 0u, ti = 0xffffffffu, sk = 0u, si = 0xffffffffu;
    vec2 tms = vec2(NEG, 0.0), sms = vec2(NEG, 0.0);
    uint end = min((g + 1u) * p.slice, V);
    for (uint i = g * p.slice + tid; i < end; i += WG) {
      float v = processed(i), c = choice_value(i);
      uint kc = key(c);
      if (i < tb) {
        rule_max = bigger(rule_max, v);
        if (kc > tk) tk = kc, ti = i;
        tms = add_exp(tms, c);
      } else {
        if (kc > sk) sk = kc, si = i;
        sms = add_exp(sms, c);
      }
    }
    rule_max = wg_max(rule_max);
    wg_best(tk, ti);
    wg_best(sk, si);
    tms = wg_join(tms);
    sms = wg_join(sms);
    if (tid == 0u) {
      uint at = g * PARTS;
      part[at] = floatBitsToUint(rule_max);
      part[at + 1u] = tk, part[at + 2u] = ti;
      part[at + 3u] = floatBitsToUint(tms.x), part[at + 4u] = floatBitsToUint(tms.y);
      part[at + 5u] = sk, part[at + 6u] = si;
      part[at + 7u] = floatBitsToUint(sms.x), part[at + 8u] = floatBitsToUint(sms.y);
    }
    return;
  }
  // Pass 1: the groups' parts, in order (each invocation's groups rise).
  float rule_max = NEG;
  uint tk = 0u, ti = 0xffffffffu, sk = 0u, si = 0xffffffffu;
  vec2 tms = vec2(NEG, 0.0), sms = vec2(NEG, 0.0);
  for (uint q = tid; q < p.groups; q += WG) {
    uint at = q * PARTS;
    rule_max = bigger(rule_max, uintBitsToFloat(part[at]));
    if (part[at + 1u] > tk) tk = part[at + 1u], ti = part[at + 2u];
    tms = join_exp(tms, vec2(uintBitsToFloat(part[at + 3u]), uintBitsToFloat(part[at + 4u])));
    if (part[at + 5u] > sk) sk = part[at + 5u], si = part[at + 6u];
    sms = join_exp(sms, vec2(uintBitsToFloat(part[at + 7u]), uintBitsToFloat(part[at + 8u])));
  }
  rule_max = wg_max(rule_max);
  wg_best(tk, ti);
  wg_best(sk, si);
  tms = wg_join(tms);
  sms = wg_join(sms);
  if (tid != 0u) return;
  // The timestamps' log Σ exp (their values as the rule sees them: the end of
  // text is no timestamp, so the choice's are the rule's) against the best text logit.
  bool text_masked = (p.flags & 1u) != 0u && sms.x != NEG && lse(sms) > rule_max;
  uint k = sk, best = si;
  vec2 all = sms;
  if (!text_masked) {
    if (tk >= k) k = tk, best = ti; // a tie goes to the text id, the lower
    all = join_exp(tms, sms);
  }
  float x0 = text_masked && 0u < tb ? NEG : choice_value(0u);
  uint id = key(x0) == 0u || k == 0u ? 0u : best;
  float vid = text_masked && id < tb ? NEG : choice_value(id);
  gen[p.n] = id;
  lp[p.n] = vid - lse(all);
}
