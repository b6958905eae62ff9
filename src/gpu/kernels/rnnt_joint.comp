#version 450
// rnnt_joint: greedy transducer search (RNN-T and TDT) as decode/transducer.c's
// transducer_greedy, for every clip of a batch that is still searching (clip
// = gl_WorkGroupID.y): the search's decisions up to and including the next
// token that is not blank, in two parts in one dispatch:
// 1. every workgroup: the joint network at the WF frames from the one the
//    clip's search is at (fewer at the clip's end; spec constant 0),
//      z_w = act(enc[first + step + w] + p),  logits_w[r] = b[r] + Σ_c w[r][c]·z_w[c]
//    (the bias added to the whole sum, as joint()), each weight read once for
//    all WF frames, each logit summed in the same order as for one frame;
// 2. the clip's workgroup that finishes last (a counter in its state): the
//    picks — the token (first maximum of the vocabulary's logits, blank =
//    vocab − 1), for TDT the duration (first maximum of the duration logits),
//    the token's confidence, and the move — again and again while they are
//    blanks that land inside the window: a blank leaves the predictor's
//    output as it is, so the next frame's logits are already there. A token
//    ends the dispatch (the LSTM takes it next), as does a blank that moves
//    past the window, or the end of the search. Each pick is one of
//    transducer_greedy's steps (the steps-left budget counts picks). One
//    dispatch for what took a joint and a pick dispatch per decision: the
//    search is bound by dispatch latency (docs/perf.md).
// state  uint (binding 0): words 0 .. 15 a header, [0] the clips still
//        searching (decremented as each ends); clip c's 16 words from 16·(c + 1),
//        written by its last workgroup's invocation 0:
//        [0] done  [1] step (frame)  [2] steps left  [3] tokens of duration 0 at this frame
//        [4] emit: the LSTM takes `tok` this step  [5] cur: which h/c copy is current
//        [6] tok  [7] tokens out  [8] room for tokens  [9] workgroups finished
//        [10] t (frames)  [11] first (its encoder row)  [12] base (its first token in out)
//        [13] rounds: the dispatches that picked for it (the host sizes its chunks by them)
// enc    f32 (binding 1): the joint's encoder projection, frame s of the clip
//        at (first + s)·stride
// p      f32 (binding 2): the predictor's projection [clips][joint]
// wts    f32 (binding 3): the packed weights (rnnt_search.comp): the output
//        layer w [rows][joint] at `at`, then b [rows]
// logits f32 (binding 4): [clips][WF][rows] (vocabulary with blank, then TDT durations)
// dur    int (binding 5): the durations in frames (TDT)
// out    uint (binding 6): per token id, frame, frames, confidence (f32 bits),
//        clip c's from base
// A workgroup of 256 takes 32 rows, 8 invocations per row (neighbours read
// neighbouring words), their partial sums added in shared memory; the WF
// frames' z in shared memory too (WF·joint ≤ ZS, spec constant 1). A token
// that is not blank is written out and fed to the LSTM (emit); the previous
// dispatch's emit makes its new state current here. Confidence: 1 −
// H(softmax)/ln(vocab) in f32 (the CPU path sums in f64). Nothing for a clip
// once it is done.
layout(local_size_x = 8, local_size_y = 32) in;
layout(constant_id = 0) const uint WF = 1;
layout(constant_id = 1) const uint ZS = 4096;

layout(std430, binding = 0) coherent buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Enc { float enc[]; };
layout(std430, binding = 2) readonly buffer P { float pv[]; };
layout(std430, binding = 3) readonly buffer Wts { float wts[]; };
layout(std430, binding = 4) coherent buffer Logits { float logits[]; };
layout(std430, binding = 5) readonly buffer Dur { int dur[]; };
layout(std430, binding = 6) writeonly buffer Out { uint outv[]; };

layout(push_constant) uniform Push {
  uint stride, joint, rows, act; // act: 0 ReLU, 1 sigmoid, 2 tanh
  uint vocab, n_dur, max_symbols, at;
} pc;

const uint WORDS = 16; // a clip's state words (and the header's)

shared float z[ZS], part[WF][32][8];
shared float sv[256];
shared uint si[256];
shared float red[256];
shared bool last, again;
uint sb, lb; // the clip's state and logits

// The first maximum of x[at .. at + n) over this invocation's share, then over the workgroup.
void first_max(uint at0, uint n) {
  uint l = gl_LocalInvocationID.y * 8 + gl_LocalInvocationID.x;
  float best = 0.0;
  uint at = 0xffffffffu;
  for (uint i = l; i < n; i += 256) {
    float x = logits[at0 + i];
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

// The picks and moves (part 2), by the last workgroup: window frames f0 .. f0 + nw − 1.
void pick_steps(uint me, uint f0, uint nw) {
  uint l = me, V = pc.vocab, blank = V - 1;
  if (l == 0) state[sb + 13] += 1u;
  for (;;) {
    uint at0 = lb + (state[sb + 1] - f0) * pc.rows; // this decision's frame's logits
    first_max(at0, V);
    uint tok = si[0];
    float mx = sv[0];
    float conf = 0.0;
    if (tok != blank) {
      float s = 0.0;
      for (uint i = l; i < V; i += 256) s += exp(logits[at0 + i] - mx);
      total(s);
      float sum = red[0];
      barrier();
      float e = 0.0;
      for (uint i = l; i < V; i += 256) {
        float q = exp(logits[at0 + i] - mx) / sum;
        e -= q * log(q + 1e-10);
      }
      total(e);
      conf = 1.0 - red[0] / log(float(V));
    }
    if (l == 0) {
      int d = 1;
      if (pc.n_dur > 0) {
        uint best = 0;
        for (uint k = 1; k < pc.n_dur; k++)
          if (logits[at0 + V + k] > logits[at0 + V + best]) best = k;
        d = dur[best];
      }
      uint step = state[sb + 1], left = state[sb + 2], symbols = state[sb + 3], n = state[sb + 7];
      uint cur = state[sb + 5] ^ state[sb + 4]; // the last token has been fed: its state is current
      uint emit = 0;
      if (tok != blank) {
        if (n < state[sb + 8]) {
          uint o = 4 * (state[sb + 12] + n);
          outv[o + 0] = tok;
          outv[o + 1] = step;
          outv[o + 2] = uint(d);
          outv[o + 3] = floatBitsToUint(conf);
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
      bool go = step < state[sb + 10] && left > 0 && n < state[sb + 8];
      state[sb + 0] = go ? 0 : 1;
      state[sb + 1] = step;
      state[sb + 2] = go ? left - 1 : left;
      state[sb + 3] = symbols;
      state[sb + 4] = emit;
      state[sb + 5] = cur;
      state[sb + 6] = tok;
      state[sb + 7] = n;
      state[sb + 9] = 0; // the counter, for the next dispatch
      if (!go) atomicAdd(state[0], 0xffffffffu); // one clip fewer searching
      // Another pick here: a blank whose next frame's logits are in the window.
      again = go && emit == 0u && step < f0 + nw;
    }
    memoryBarrierBuffer(); // the state invocation 0 wrote, for the next pick's reads
    barrier();
    if (!again) return;
  }
}

void main() {
  sb = WORDS * (gl_WorkGroupID.y + 1);
  lb = gl_WorkGroupID.y * WF * pc.rows;
  if (state[sb] != 0) return;
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y, me = y * 8 + lane;
  uint f0 = state[sb + 1], t = state[sb + 10], nw = min(WF, t - f0);
  uint e = (state[sb + 11] + f0) * pc.stride, pb = gl_WorkGroupID.y * pc.joint;
  for (uint c = me; c < WF * pc.joint; c += 256) { // frames past the clip's end: zeros, unused
    uint w = c / pc.joint, cc = c - w * pc.joint;
    float v = w < nw ? enc[e + w * pc.stride + cc] + pv[pb + cc] : 0.0;
    z[c] = w >= nw ? 0.0 : pc.act == 0 ? max(v, 0.0) : pc.act == 1 ? 1.0 / (1.0 + exp(-v)) : tanh(v);
  }
  barrier();
  uint r = gl_WorkGroupID.x * 32 + y;
  float s[WF];
  for (uint w = 0; w < WF; w++) s[w] = 0.0;
  if (r < pc.rows)
    for (uint c = lane; c < pc.joint; c += 8) {
      float wv = wts[pc.at + r * pc.joint + c];
      for (uint w = 0; w < WF; w++) s[w] += wv * z[w * pc.joint + c];
    }
  for (uint w = 0; w < WF; w++) part[w][y][lane] = s[w];
  barrier();
  if (lane == 0 && r < pc.rows) {
    for (uint w = 0; w < nw; w++) {
      float sum = 0.0;
      for (uint i = 0; i < 8; i++) sum += part[w][y][i];
      logits[lb + w * pc.rows + r] = wts[pc.at + pc.rows * pc.joint + r] + sum;
    }
  }
  // Hand-off: this workgroup's logits visible, then count it in.
  memoryBarrierBuffer();
  barrier();
  if (me == 0) last = atomicAdd(state[sb + 9], 1u) == gl_NumWorkGroups.x - 1;
  barrier();
  if (!last) return;
  memoryBarrierBuffer();
  pick_steps(me, f0, nw);
}
