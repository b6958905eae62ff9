// rnnt_joint.glsl: one workgroup's share of a search round (rnnt_joint.comp
// says what a round is): joint_block computes 32 rows of the joint's logits
// for the clip's window of frames, and the clip's workgroup that finishes
// last goes on to the picks. Shared by rnnt_joint.comp (a round per
// dispatch) and rnnt_grid.comp (many rounds per dispatch). The including
// kernel declares the buffers state, enc, pv, wts (and wts4, the same by 16
// bytes), logits, dur and outv (rnnt_joint.comp's header), the push
// constants pc.stride, joint, rows, act, vocab, n_dur, max_symbols and
// pc.at, and the spec constants WF, ZS, JR and JL: a block's rows, and
// invocations a row (JR·JL ≤ 256; each invocation takes every JL-th group
// of 4 columns, one 16-byte load where the rows are whole vec4s, so that
// its chain of loads is short: the search waits on latencies); a workgroup
// of 256 invocations, me = JL·y + lane (those past the JR rows only stage
// and wait).
//
// The state's header words: [0] the clips still searching; [1] .. [3]
// rnnt_grid's barrier (arrivals, exits, abort); [4 + r] and [6 + r] the
// tokens emitted and the clips ended in rounds of parity r, counted up from
// the search's start (rnnt_grid tells a round's from the next one's by them).

const uint WORDS = 16; // a clip's state words (and the header's)

shared float z[ZS], part[WF][JR][JL];
shared float sv[256];
shared uint si[256];
shared float red[256];
shared bool last, again;

// The first maximum of logits[at0 .. at0 + n) over this invocation's share, then over the workgroup.
void first_max(uint me, uint at0, uint n) {
  float best = 0.0;
  uint at = 0xffffffffu;
  for (uint i = me; i < n; i += 256) {
    float x = logits[at0 + i];
    if (at == 0xffffffffu || x > best) best = x, at = i;
  }
  sv[me] = best;
  si[me] = at;
  barrier();
  for (uint w = 128; w > 0; w >>= 1) {
    if (me < w) {
      float o = sv[me + w];
      uint oi = si[me + w];
      if (oi != 0xffffffffu && (si[me] == 0xffffffffu || o > sv[me] || (o == sv[me] && oi < si[me])))
        sv[me] = o, si[me] = oi;
    }
    barrier();
  }
}

// Σ over the workgroup of each invocation's v (the result in red[0]).
void total(uint me, float v) {
  red[me] = v;
  barrier();
  for (uint w = 128; w > 0; w >>= 1) {
    if (me < w) red[me] += red[me + w];
    barrier();
  }
}

// The picks and moves (part 2) for the clip whose state is at sb and logits
// at lb, by the last workgroup: window frames f0 .. f0 + nw − 1; par is the
// round's parity (the header's counters).
void pick_steps(uint me, uint sb, uint lb, uint f0, uint nw, uint par) {
  uint V = pc.vocab, blank = V - 1;
  if (me == 0) state[sb + 13] += 1u;
  for (;;) {
    uint at0 = lb + (state[sb + 1] - f0) * pc.rows; // this decision's frame's logits
    first_max(me, at0, V);
    uint tok = si[0];
    float mx = sv[0];
    float conf = 0.0;
    if (tok != blank) {
      float s = 0.0;
      for (uint i = me; i < V; i += 256) s += exp(logits[at0 + i] - mx);
      total(me, s);
      float sum = red[0];
      barrier();
      float e = 0.0;
      for (uint i = me; i < V; i += 256) {
        float q = exp(logits[at0 + i] - mx) / sum;
        e -= q * log(q + 1e-10);
      }
      total(me, e);
      conf = 1.0 - red[0] / log(float(V));
    }
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
  uint sb = WORDS * (cl + 1), lb = cl * WF * pc.rows;
  if (state[sb] != 0) return;
  uint lane = me % JL, y = me / JL;
  uint f0 = state[sb + 1], t = state[sb + 10], nw = min(WF, t - f0);
  uint e = (state[sb + 11] + f0) * pc.stride, pb = cl * pc.joint;
  for (uint c = me; c < WF * pc.joint; c += 256) { // frames past the clip's end: zeros, unused
    uint w = c / pc.joint, cc = c - w * pc.joint;
    float v = w < nw ? enc[e + w * pc.stride + cc] + pv[pb + cc] : 0.0;
    z[c] = w >= nw ? 0.0 : pc.act == 0 ? max(v, 0.0) : pc.act == 1 ? 1.0 / (1.0 + exp(-v)) : tanh(v);
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
  if (lane < nw && mine) { // invocation (row y, lane w): frame w's logit of the row
    float sum = 0.0;
    for (uint i = 0; i < JL; i++) sum += part[lane][y][i];
    logits[lb + lane * pc.rows + r] = wts[pc.at + pc.rows * J + r] + sum;
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
