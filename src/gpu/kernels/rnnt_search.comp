#version 450
// rnnt_search: the whole greedy transducer search (RNN-T and TDT) of
// decode/transducer.c's transducer_greedy in one dispatch, one workgroup per
// clip, up to `budget` steps per dispatch (the host polls the caller's abort
// and redispatches until every clip is done). A step: the joint at the
// clip's frame, the pick (first maxima, confidence), the move with NeMo's
// per-frame cap, and, where a token was emitted, the LSTM layers and the
// predictor projection on it. One workgroup per clip because Vulkan gives no
// guarantee that workgroups run at the same time, so they may not wait on
// one another; within one, barrier() is all the synchronisation there is.
// Core Vulkan compute only: no subgroups, no 16-bit types; but long loops,
// which some devices cut off, so the probe first runs count_loops (budget ~0).
//
// state uint (binding 0): 16 words per clip (PS_* in nn/transducer_gpu.c):
//       [0] done [1] step (frame) [2] steps left [3] tokens of duration 0 at
//       this frame [4] tokens out [5] room [6] out base (tokens) [7] frames
//       [8] enc row of frame 0 [9] fresh: zero the LSTM and feed it blank
// enc   f32 (binding 1): the joint's encoder projection, frame s of a clip at
//       row first + s, rows of `stride`
// wts   f32 (binding 2): the weights packed as gpu_transducer_new lays them:
//       embed [vocab][H]; per layer wx [4H][H], wh [4H][H], b [4H];
//       pred_w [J][H], pred_b [J]; out_w [rows][J], out_b [rows]
// dur   int (binding 3): TDT durations in frames
// work  f32 (binding 4): per clip `work` floats: h [L][H], c [L][H],
//       gates [4H], p [J], logits [rows]
// out   uint (binding 5): per token id, frame, frames, confidence (f32 bits)
// w16   f16 (binding 6, WF16 = 1, spec constant 1): wts's matrices (wx, wh,
//       pred_w, out_w) as f16 at the same element offsets, read by the
//       products instead of wts where every value is exactly an f16 (the same
//       products from half the bytes: each clip's workgroup reads them all
//       every step); embeddings and biases stay in wts
//
// Matrix-vector products: K = 8 invocations per output row (neighbours read
// neighbouring words, 16 bytes each where hidden and joint are multiples of
// 4), WG / K rows per pass, the 8 partial sums added in
// order by the row's first invocation (rnnt_joint's order); partials
// double-buffered so one barrier per pass suffices. Vectors read by every
// row (z, x, h) sit in shared memory (J ≤ 4096, 2H ≤ 4096). Workgroup size
// WG (spec constant 0) a power of two ≥ 64.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint WF16 = 0;
const uint WG = gl_WorkGroupSize.x, K = 8, P = WG / K, VS = 4096;

layout(std430, binding = 0) coherent buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Enc { float enc[]; };
layout(std430, binding = 2) readonly buffer Wts { float wts[]; };
layout(std430, binding = 2) readonly buffer Wts4 { vec4 wts4[]; }; // the same, by 16 bytes
layout(std430, binding = 3) readonly buffer Dur { int dur[]; };
layout(std430, binding = 4) coherent buffer Work { float work[]; };
layout(std430, binding = 5) writeonly buffer Out { uint outv[]; };
layout(std430, binding = 6) readonly buffer W16 { uvec2 w16q[]; }; // 4 halves a word pair
layout(std430, binding = 6) readonly buffer W16s { uint w16s[]; }; // the same, 2 halves a word

layout(push_constant) uniform Push {
  uint stride, hidden, joint, layers;
  uint vocab, n_dur, act, max_symbols; // act: 0 ReLU, 1 sigmoid, 2 tanh
  uint budget, work;                   // steps per dispatch; floats of work per clip
  uint quads;                          // hidden and joint multiples of 4: vec4 loads
} pc;

const uint S_DONE = 0, S_STEP = 1, S_LEFT = 2, S_SYMBOLS = 3, S_OUT = 4, S_ROOM = 5, S_BASE = 6,
           S_T = 7, S_FIRST = 8, S_FRESH = 9, S_WORDS = 16;

shared float vs[VS];
shared float red[4 * WG]; // two pairs of partial-sum buffers; argmax values
shared uint ri[WG];       // argmax indices (not through floats: a device may flush denormals)
shared uint st[S_WORDS];
shared uint pick_tok;

uint me = gl_LocalInvocationID.x;

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

// The packed weights' offsets (floats).
uint off_layer(uint l) {
  uint H = pc.hidden;
  return pc.vocab * H + l * (8 * H * H + 4 * H);
}
uint off_pred() { return off_layer(pc.layers); }
uint off_out() { return off_pred() + pc.joint * pc.hidden + pc.joint; }

// Σ_c wts[wo + r·cols + c]·vs[xo + c] over this invocation's share of c:
// with 16-byte loads where rows and offsets are whole vec4s (pc.quads).
float partial(uint wo, uint xo, uint r, uint cols, uint lane) {
  float s = 0.0;
  if (pc.quads != 0) {
    uint q = (wo + r * cols) / 4, n = cols / 4;
    for (uint c = lane; c < n; c += K) {
      uint x = xo + 4 * c;
      uvec2 h = WF16 == 1 ? w16q[q + c] : uvec2(0);
      vec4 w = WF16 == 1 ? vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y)) : wts4[q + c];
      s += dot(w, vec4(vs[x], vs[x + 1], vs[x + 2], vs[x + 3]));
    }
  } else {
    for (uint c = lane; c < cols; c += K) {
      uint e = wo + r * cols + c;
      float w = WF16 == 1 ? unpackHalf2x16(w16s[e / 2])[e % 2] : wts[e];
      s += w * vs[xo + c];
    }
  }
  return s;
}

// dst[r] = (wts[bo + r] + Σ_c wts[wo + r·cols + c]·vs[xo + c])
//          (+ Σ_c wts[w2 + r·cols + c]·vs[x2 + c] where two), into work[dst + r].
void matvec(uint wo, uint bo, uint xo, bool two, uint w2, uint x2, uint cols, uint rows, uint dst) {
  uint lane = me % K, slot = me / K;
  for (uint r0 = 0, pass = 0; r0 < rows; r0 += P, pass ^= 1) {
    uint r = r0 + slot, at = pass * 2 * WG;
    float s = 0.0, s2 = 0.0;
    if (r < rows) {
      s = partial(wo, xo, r, cols, lane);
      if (two) s2 = partial(w2, x2, r, cols, lane);
    }
    red[at + me] = s;
    red[at + WG + me] = s2;
    barrier();
    if (lane == 0 && r < rows) {
      float a = 0.0, b = 0.0;
      for (uint i = 0; i < K; i++) a += red[at + me + i], b += red[at + WG + me + i];
      work[dst + r] = two ? (wts[bo + r] + a) + b : wts[bo + r] + a;
    }
  }
  memoryBarrierBuffer();
  barrier();
}

// The LSTM on token tok from the clip's state (in place: every gate is
// computed from the old h before a cell moves on), then the projection p.
void predict(uint w, uint tok) {
  uint H = pc.hidden, L = pc.layers, G = w + 2 * L * H;
  for (uint l = 0; l < L; l++) {
    uint h = w + l * H, c = w + (L + l) * H, lo = off_layer(l);
    for (uint i = me; i < H; i += WG) {
      vs[i] = l == 0 ? wts[tok * H + i] : work[h - H + i];
      vs[H + i] = work[h + i];
    }
    barrier();
    matvec(lo, lo + 8 * H * H, 0, true, lo + 4 * H * H, H, H, 4 * H, G);
    for (uint j = me; j < H; j += WG) {
      float ig = sigmoid(work[G + j]), fg = sigmoid(work[G + H + j]), gg = tanh(work[G + 2 * H + j]),
            og = sigmoid(work[G + 3 * H + j]);
      float cn = fg * work[c + j] + ig * gg;
      work[c + j] = cn;
      work[h + j] = og * tanh(cn);
    }
    memoryBarrierBuffer();
    barrier();
  }
  for (uint i = me; i < H; i += WG) vs[i] = work[w + (L - 1) * H + i];
  barrier();
  uint po = off_pred();
  matvec(po, po + pc.joint * H, 0, false, 0, 0, H, pc.joint, G + 4 * H);
}

// The first maximum of work[x .. x + n) (in red[0], its index in ri[0]).
void first_max(uint x, uint n) {
  float best = 0.0;
  uint at = 0xffffffffu;
  for (uint i = me; i < n; i += WG) {
    float v = work[x + i];
    if (at == 0xffffffffu || v > best) best = v, at = i;
  }
  red[me] = best;
  ri[me] = at;
  barrier();
  for (uint w = WG / 2; w > 0; w >>= 1) {
    if (me < w) {
      float o = red[me + w];
      uint oi = ri[me + w], mi = ri[me];
      if (oi != 0xffffffffu && (mi == 0xffffffffu || o > red[me] || (o == red[me] && oi < mi)))
        red[me] = o, ri[me] = oi;
    }
    barrier();
  }
}

// Σ over the workgroup of each invocation's v (in red[0]).
float total(float v) {
  barrier();
  red[me] = v;
  barrier();
  for (uint w = WG / 2; w > 0; w >>= 1) {
    if (me < w) red[me] += red[me + w];
    barrier();
  }
  return red[0];
}

// 1 − H(softmax(logits))/ln(vocab) in f32 (rnnt_joint's formula).
float confidence(uint lg, float mx) {
  uint V = pc.vocab;
  float s = 0.0;
  for (uint i = me; i < V; i += WG) s += exp(work[lg + i] - mx);
  float sum = total(s), e = 0.0;
  for (uint i = me; i < V; i += WG) {
    float q = exp(work[lg + i] - mx) / sum;
    e -= q * log(q + 1e-10);
  }
  return 1.0 - total(e) / log(float(V));
}

// The move of transducer.c's advance() and the token's record, by
// invocation 0 on the shared state; pick_tok = the token to feed, or ~0.
void move(uint lg, uint tok, float conf) {
  uint blank = pc.vocab - 1;
  int d = 1;
  if (pc.n_dur > 0) {
    uint best = 0;
    for (uint k = 1; k < pc.n_dur; k++)
      if (work[lg + pc.vocab + k] > work[lg + pc.vocab + best]) best = k;
    d = dur[best];
  }
  uint step = st[S_STEP], symbols = st[S_SYMBOLS], n = st[S_OUT];
  if (tok != blank) {
    uint o = 4 * (st[S_BASE] + n);
    outv[o] = tok, outv[o + 1] = step, outv[o + 2] = uint(d), outv[o + 3] = floatBitsToUint(conf);
    n++;
  }
  uint mv = tok == blank ? max(uint(d), 1u) : pc.n_dur > 0 ? uint(d) : 0u;
  if (mv == 0u && ++symbols >= pc.max_symbols) mv = 1u;
  if (mv != 0u) step += mv, symbols = 0u;
  bool go = step < st[S_T] && st[S_LEFT] > 0 && n < st[S_ROOM];
  st[S_DONE] = go ? 0 : 1;
  st[S_STEP] = step;
  st[S_LEFT] = go ? st[S_LEFT] - 1 : st[S_LEFT];
  st[S_SYMBOLS] = symbols;
  st[S_OUT] = n;
  pick_tok = go && tok != blank ? tok : 0xffffffffu;
}

// One step of the search at the clip's frame.
void step(uint w) {
  uint H = pc.hidden, L = pc.layers, J = pc.joint, R = pc.vocab + pc.n_dur;
  uint p = w + 2 * L * H + 4 * H, lg = p + J;
  uint e = (st[S_FIRST] + st[S_STEP]) * pc.stride;
  for (uint c = me; c < J; c += WG) {
    float v = enc[e + c] + work[p + c];
    vs[c] = pc.act == 0 ? max(v, 0.0) : pc.act == 1 ? sigmoid(v) : tanh(v);
  }
  barrier();
  matvec(off_out(), off_out() + R * J, 0, false, 0, 0, J, R, lg);
  first_max(lg, pc.vocab);
  uint tok = ri[0];
  float mx = red[0], conf = 0.0;
  if (tok != pc.vocab - 1) conf = confidence(lg, mx);
  if (me == 0) move(lg, tok, conf);
  barrier();
  if (pick_tok != 0xffffffffu) predict(w, pick_tok);
}

// The probe's loop count (budget ~0): a flat loop of n = pc.work iterations
// and a nested one of 512 × n/512, counted into state[0] and state[1]; the
// step of 1 + (i & state[S_FRESH]) (0 there) keeps a compiler from folding
// them. A device that stops long loops (lavapipe: 65 535 iterations per
// invocation in all) counts fewer.
void count_loops() {
  uint a = 0, b = 0, x = state[S_FRESH];
  for (uint i = 0; i < pc.work; i++) a += 1u + (i & x);
  for (uint i = 0; i < 512u; i++)
    for (uint j = 0; j < pc.work / 512u; j++) b += 1u + (j & x);
  if (me == 0) state[0] = a, state[1] = b;
}

void main() {
  uint clip = gl_WorkGroupID.x, w = clip * pc.work;
  if (pc.budget == 0xffffffffu) {
    count_loops();
    return;
  }
  if (me < S_WORDS) st[me] = state[clip * S_WORDS + me];
  barrier();
  if (st[S_DONE] != 0) return;
  if (st[S_FRESH] != 0) {
    // The search starts from blank fed to a zero state (transducer_stream_new).
    for (uint i = me; i < 2 * pc.layers * pc.hidden; i += WG) work[w + i] = 0.0;
    memoryBarrierBuffer();
    barrier();
    predict(w, pc.vocab - 1);
  }
  for (uint k = 0; k < pc.budget && st[S_DONE] == 0; k++) {
    step(w);
    barrier();
  }
  if (me == 0) st[S_FRESH] = 0;
  barrier();
  if (me < S_WORDS) state[clip * S_WORDS + me] = st[me];
}
