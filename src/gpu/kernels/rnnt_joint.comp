#version 450
// rnnt_joint: one step of greedy transducer search (RNN-T and TDT) as
// decode/transducer.c's transducer_greedy, in two parts in one dispatch:
// 1. every workgroup: the joint network at the frame the search is at,
//      z = act(enc[step] + p),  logits[r] = b[r] + Σ_c w[r][c]·z[c]
//    (the bias added to the whole sum, as joint());
// 2. the workgroup that finishes last (a counter in state[9]): the pick —
//    the token (first maximum of the vocabulary's logits, blank = vocab − 1),
//    for TDT the duration (first maximum of the duration logits), the
//    token's confidence, and the move. One dispatch instead of two: the
//    search is bound by dispatch latency (docs/perf.md).
// state  uint (binding 0), written by the last workgroup's invocation 0:
//        [0] done  [1] step (frame)  [2] steps left  [3] tokens of duration 0 at this frame
//        [4] emit: the LSTM takes `tok` this step  [5] cur: which h/c copy is current
//        [6] tok  [7] tokens out  [8] room for tokens  [9] workgroups finished
// enc    f32 (binding 1): the joint's encoder projection, frame s at
//        (first + s)·stride
// p      f32 (binding 2): the predictor's projection [joint]
// wts    f32 (binding 3): the packed weights (rnnt_search.comp): the output
//        layer w [rows][joint] at `at`, then b [rows]
// logits f32 (binding 4): [rows] (vocabulary with blank, then TDT durations)
// dur    int (binding 5): the durations in frames (TDT)
// out    uint (binding 6): per token id, frame, frames, confidence (f32 bits)
// A workgroup of 256 takes 32 rows, 8 invocations per row (neighbours read
// neighbouring words), their partial sums added in shared memory; z in
// shared memory too (joint ≤ 4096). A token that is not blank is written out
// and fed to the LSTM (emit); the previous step's emit makes its new state
// current here. Confidence: 1 − H(softmax)/ln(vocab) in f32 (the CPU path
// sums in f64). Nothing once done.
layout(local_size_x = 8, local_size_y = 32) in;

layout(std430, binding = 0) coherent buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Enc { float enc[]; };
layout(std430, binding = 2) readonly buffer P { float pv[]; };
layout(std430, binding = 3) readonly buffer Wts { float wts[]; };
layout(std430, binding = 4) coherent buffer Logits { float logits[]; };
layout(std430, binding = 5) readonly buffer Dur { int dur[]; };
layout(std430, binding = 6) writeonly buffer Out { uint outv[]; };

layout(push_constant) uniform Push {
  uint stride, joint, rows, act; // act: 0 ReLU, 1 sigmoid, 2 tanh
  uint t, vocab, n_dur, max_symbols;
  uint at, first;
} pc;

shared float z[4096], part[32][8];
shared float sv[256];
shared uint si[256];
shared float red[256];
shared bool last;

// The first maximum over this invocation's share of x[0..n), then over the workgroup.
void first_max(uint n) {
  uint l = gl_LocalInvocationID.y * 8 + gl_LocalInvocationID.x;
  float best = 0.0;
  uint at = 0xffffffffu;
  for (uint i = l; i < n; i += 256) {
    float x = logits[i];
    if (at == 0xffffffffu || x > best) best = x, at = i;
  }
  sv[l] = best;
  si[l] = at;
  barrier();
  for (uint w = 128; w > 0; w >>= 1) {
    if (l < w) {
      float o = sv[l + w];
      uint oi = si[l + w];
      if (oi != 0xffffffffu && (si[l] == 0xffffffffu || o > sv[l] || (o == sv[l] && oi < si[l])))
        sv[l] = o, si[l] = oi;
    }
    barrier();
  }
}

// Σ over the workgroup of each invocation's v (the result in red[0]).
void total(float v) {
  uint l = gl_LocalInvocationID.y * 8 + gl_LocalInvocationID.x;
  red[l] = v;
  barrier();
  for (uint w = 128; w > 0; w >>= 1) {
    if (l < w) red[l] += red[l + w];
    barrier();
  }
}

// The pick and the move (part 2), by the last workgroup.
void pick_step(uint me) {
  uint l = me, V = pc.vocab, blank = V - 1;
  first_max(V);
  uint tok = si[0];
  float mx = sv[0];
  float conf = 0.0;
  if (tok != blank) {
    float s = 0.0;
    for (uint i = l; i < V; i += 256) s += exp(logits[i] - mx);
    total(s);
    float sum = red[0];
    barrier();
    float e = 0.0;
    for (uint i = l; i < V; i += 256) {
      float q = exp(logits[i] - mx) / sum;
      e -= q * log(q + 1e-10);
    }
    total(e);
    conf = 1.0 - red[0] / log(float(V));
  }
  if (l != 0) return;
  int d = 1;
  if (pc.n_dur > 0) {
    uint best = 0;
    for (uint k = 1; k < pc.n_dur; k++)
      if (logits[V + k] > logits[V + best]) best = k;
    d = dur[best];
  }
  uint step = state[1], left = state[2], symbols = state[3], n = state[7];
  uint cur = state[5] ^ state[4]; // last step's token has been fed: its state is current
  uint emit = 0;
  if (tok != blank) {
    if (n < state[8]) {
      outv[4 * n + 0] = tok;
      outv[4 * n + 1] = step;
      outv[4 * n + 2] = uint(d);
      outv[4 * n + 3] = floatBitsToUint(conf);
    }
    n++;
    emit = 1;
  }
  // The move of transducer.c's advance(): a blank moves on by its duration
  // (at least 1; RNN-T: 1), a token by its duration (RNN-T: 0), and the
  // max_symbols-th token of duration 0 at one frame by 1.
  uint move = tok == blank ? max(uint(d), 1u) : pc.n_dur > 0 ? uint(d) : 0u;
  if (move == 0u && ++symbols >= pc.max_symbols) move = 1u;
  if (move != 0u) {
    step += move;
    symbols = 0u;
  }
  bool go = step < pc.t && left > 0 && n < state[8];
  state[0] = go ? 0 : 1;
  state[1] = step;
  state[2] = go ? left - 1 : left;
  state[3] = symbols;
  state[4] = emit;
  state[5] = cur;
  state[6] = tok;
  state[7] = n;
  state[9] = 0; // the counter, for the next step
}

void main() {
  if (state[0] != 0) return;
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y, me = y * 8 + lane;
  uint e = (pc.first + state[1]) * pc.stride;
  for (uint c = me; c < pc.joint; c += 256) {
    float v = enc[e + c] + pv[c];
    z[c] = pc.act == 0 ? max(v, 0.0) : pc.act == 1 ? 1.0 / (1.0 + exp(-v)) : tanh(v);
  }
  barrier();
  uint r = gl_WorkGroupID.x * 32 + y;
  float s = 0.0;
  if (r < pc.rows)
    for (uint c = lane; c < pc.joint; c += 8) s += wts[pc.at + r * pc.joint + c] * z[c];
  part[y][lane] = s;
  barrier();
  if (lane == 0 && r < pc.rows) {
    float sum = 0.0;
    for (uint i = 0; i < 8; i++) sum += part[y][i];
    logits[r] = wts[pc.at + pc.rows * pc.joint + r] + sum;
  }
  // Hand-off: this workgroup's logits visible, then count it in.
  memoryBarrierBuffer();
  barrier();
  if (me == 0) last = atomicAdd(state[9], 1u) == gl_NumWorkGroups.x - 1;
  barrier();
  if (!last) return;
  memoryBarrierBuffer();
  pick_step(me);
}
