// rnnt_joint.glsl: one workgroup's share of a search round (rnnt_joint.comp
// says what a round is): joint_block computes 32 rows of the joint's logits
// for the clip's window of frames, and the clip's workgroup that finishes
// last goes on to the picks. Shared by rnnt_joint.comp (a round per
// dispatch) and rnnt_grid.comp (many rounds per dispatch). The including
// kernel declares the buffers state, enc, pv, wts (and wts4, the same by 16
// bytes), logits, dur and outv (rnnt_joint.comp's header), the push
// constants pc.stride, joint, rows, act, vocab, n_dur, max_symbols and
// pc.at, and the spec constants WF, ZS, JR and JL: a block's rows, and
// invocations a row (JR a power of two ≥ 16, JL ≥ 8, JR·JL ≤ 256; each invocation takes every JL-th group
// of 4 columns, one 16-byte load where the rows are whole vec4s, so that
// its chain of loads is short: the search waits on latencies); a workgroup
// of 256 invocations, me = JL·y + lane (those past the JR rows only stage
// and wait).
//
// A clip's logits: WF frames of `rows`, then per frame NB = ⌈rows / 16⌉
// slots of 4 floats, a block's summary of its vocabulary rows (part of
// the softmax: the largest logit m, its row, Σ e^(x − m) and Σ e^(x − m)·(x
// − m)) that the picks combine instead of passing over every logit.
//
// The state's header words: [0] the clips still searching; [1] .. [3]
// rnnt_grid's barrier (arrivals, exits, abort); [4 + r] and [6 + r] the
// tokens emitted and the clips ended in rounds of parity r, counted up from
// the search's start (rnnt_grid tells a round's from the next one's by them);
// [8 ..] rnnt_grid's TDT durations.

const uint WORDS = 16; // a clip's state words (and the header's)

shared float z[ZS], part[WF][JR][JL];
shared bool last, again;

// Summary slots a frame (for blocks of 16 rows or more), a clip's floats in
// logits (WF frames of rows, then their summaries), and where frame w's
// summaries start for the clip whose logits are at lb.
uint slots() { return (pc.rows + 15) / 16; }
uint clip_floats() { return WF * (pc.rows + 4 * slots()); }
uint summaries(uint lb, uint w) { return lb + WF * pc.rows + 4 * slots() * w; }

// a and b, summaries (m, row, S, T) of two sets of logits (row < 0: none),
// made one: the first of the largest, S and T taken to the larger m.
vec4 combine(vec4 a, vec4 b) {
  if (b.y < 0.0) return a;
  if (a.y < 0.0) return b;
  float m = max(a.x, b.x), ea = exp(a.x - m), eb = exp(b.x - m);
  float row = b.x > a.x || (b.x == a.x && b.y < a.y) ? b.y : a.y;
  return vec4(m, row, a.z * ea + b.z * eb, ea * (a.w + (a.x - m) * a.z) + eb * (b.w + (b.x - m) * b.z));
}

shared vec4 sum4[256];

// The summary of the n block summaries at logits[at .. at + 4n), over the workgroup (in sum4[0]).
void combine_blocks(uint me, uint at, uint n) {
  vec4 a = vec4(0.0, -1.0, 0.0, 0.0);
  for (uint b = me; b < n; b += 256)
    a = combine(a, vec4(logits[at + 4 * b], logits[at + 4 * b + 1], logits[at + 4 * b + 2], logits[at + 4 * b + 3]));
  sum4[me] = a;
  barrier();
  for (uint w = 128; w > 0; w >>= 1) {
    if (me < w) sum4[me] = combine(sum4[me], sum4[me + w]);
    barrier();
  }
}

// The picks and moves (part 2) for the clip whose state is at sb and logits
// at lb, by the last workgroup: window frames f0 .. f0 + nw − 1; par is the
// round's parity (the header's counters).
void pick_steps(uint me, uint sb, uint lb, uint f0, uint nw, uint par) {
  uint V = pc.vocab, blank = V - 1;
  if (me == 0) state[sb + 13] += 1u;
  uint nbx = (pc.rows + JR - 1) / JR;
  for (;;) {
    uint w = state[sb + 1] - f0, at0 = lb + w * pc.rows; // this decision's frame's logits
    // The token (first maximum of the vocabulary's logits) and its
    // confidence 1 − H(softmax)/ln(vocab), H = ln S − T/S, from the blocks'
    // summaries.
    combine_blocks(me, summaries(lb, w), nbx);
    vec4 all = sum4[0];
    uint tok = uint(all.y);
    float conf = 0.0;
    if (tok != blank) conf = 1.0 - (log(all.z) - all.w / all.z) / log(float(V));
    if (me == 0) {
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
      state[sb + 9] = 0; // the counter, for the next round
      if (go && emit != 0u) atomicAdd(state[4 + par], 1u);
      if (!go) {
        atomicAdd(state[0], 0xffffffffu); // one clip fewer searching
        atomicAdd(state[6 + par], 1u);
      }
      // Another pick here: a blank whose next frame's logits are in the window.
      again = go && emit == 0u && step < f0 + nw;
    }
    memoryBarrierBuffer(); // the state invocation 0 wrote, for the next pick's reads
    barrier();
    if (!again) return;
  }
}

// Row block bx (of nbx) of clip cl's joint, then, in the clip's last
// workgroup to finish, its picks.
void joint_block(uint me, uint bx, uint nbx, uint cl, uint par) {
  uint sb = WORDS * (cl + 1), lb = cl * clip_floats();
  if (state[sb] != 0) return;
  uint lane = me % JL, y = me / JL;
  uint f0 = state[sb + 1], t = state[sb + 10], nw = min(WF, t - f0);
  uint e = (state[sb + 11] + f0) * pc.stride, pb = cl * pc.joint;
  for (uint c = me; c < pc.joint; c += 256) { // frames past the clip's end: zeros, unused
    float p = pv[pb + c];
    for (uint w = 0; w < WF; w++) {
      float v = w < nw ? enc[e + w * pc.stride + c] + p : 0.0;
      z[w * pc.joint + c] = w >= nw ? 0.0 : pc.act == 0 ? max(v, 0.0) : pc.act == 1 ? 1.0 / (1.0 + exp(-v)) : tanh(v);
    }
  }
  barrier();
  uint r = bx * JR + y, J = pc.joint;
  bool mine = y < JR && r < pc.rows; // a row of this block
  float s[WF];
  for (uint w = 0; w < WF; w++) s[w] = 0.0;
  if (mine && (J & 3u) == 0u && (pc.at & 3u) == 0u) {
    for (uint q = lane; q < J / 4u; q += JL) {
      vec4 wv = wts4[(pc.at + r * J) / 4u + q];
      for (uint w = 0; w < WF; w++) {
        uint i = w * J + 4u * q;
        s[w] += dot(wv, vec4(z[i], z[i + 1u], z[i + 2u], z[i + 3u]));
      }
    }
  } else if (mine) {
    for (uint c = lane; c < J; c += JL) {
      float wv = wts[pc.at + r * J + c];
      for (uint w = 0; w < WF; w++) s[w] += wv * z[w * J + c];
    }
  }
  if (y < JR)
    for (uint w = 0; w < WF; w++) part[w][y][lane] = s[w];
  barrier();
  float x = 0.0;
  if (lane < nw && mine) { // invocation (row y, lane w): frame w's logit of the row
    float sum = 0.0;
    for (uint i = 0; i < JL; i++) sum += part[lane][y][i];
    x = wts[pc.at + pc.rows * J + r] + sum;
    logits[lb + lane * pc.rows + r] = x;
  }
  // The block's summary of each frame's vocabulary rows (a tree over its
  // rows in part, which the sums no longer need): (x, row, 1, 0) a row.
  barrier();
  bool row = lane < nw && mine && r < pc.vocab;
  if (lane < WF && y < JR) part[lane][y][0] = row ? x : 0.0, part[lane][y][1] = row ? float(r) : -1.0;
  if (lane < WF && y < JR) part[lane][y][2] = 1.0, part[lane][y][3] = 0.0;
  barrier();
  for (uint k = JR / 2; k > 0; k >>= 1) {
    if (lane < nw && y < k) {
      vec4 a = vec4(part[lane][y][0], part[lane][y][1], part[lane][y][2], part[lane][y][3]);
      vec4 b = vec4(part[lane][y + k][0], part[lane][y + k][1], part[lane][y + k][2], part[lane][y + k][3]);
      a = combine(a, b);
      part[lane][y][0] = a.x, part[lane][y][1] = a.y, part[lane][y][2] = a.z, part[lane][y][3] = a.w;
    }
    barrier();
  }
  if (lane < nw && y == 0) {
    uint at = summaries(lb, lane) + 4 * bx;
    for (uint i = 0; i < 4; i++) logits[at + i] = part[lane][0][i];
  }
  // Hand-off: this workgroup's logits visible, then count it in.
  memoryBarrierBuffer();
  barrier();
  if (me == 0) last = atomicAdd(state[sb + 9], 1u) == nbx - 1;
  barrier();
  if (!last) return;
  memoryBarrierBuffer();
  pick_steps(me, sb, lb, f0, nw, par);
}
