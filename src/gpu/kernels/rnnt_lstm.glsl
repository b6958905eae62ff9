// rnnt_lstm.glsl: one workgroup's share of an LSTM layer of the search's
// predictor (rnnt_lstm.comp says what it computes): units U·bx .. U·bx +
// U − 1 of layer l for clips gy·CG .. gy·CG + CG − 1: their 4·U gate rows,
// LN invocations a row, each taking every LN-th group of 4 columns (one
// 16-byte load where the rows are whole vec4s) so that a row's neighbours
// read neighbouring bytes and each invocation's chain of loads is short (the
// search waits on these latencies, not on bandwidth: docs/perf.md). Shared
// by rnnt_lstm.comp (one layer per dispatch) and rnnt_grid.comp (a round's
// layers in one dispatch). The including kernel declares the buffers state,
// wts (and wts4, the same by 16 bytes), h and c and the spec constants CG,
// XS, U and LN (4·U·LN ≤ 256); a workgroup of 256 invocations, me = LN·y +
// lane (those past the 4·U rows only stage and wait).

shared float xs[XS], hs[XS], px[CG][4 * U][LN], ph[CG][4 * U][LN], gate[CG][4][U];
shared bool any;

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

// Whether clip c (of `clips`) takes a token this step.
bool feeds(uint c, uint clips) {
  if (c >= clips) return false;
  uint sb = 16u * (c + 1u);
  return state[sb] == 0u && state[sb + 4] != 0u;
}

// H hidden units, L layers, embeddings of `vocab` rows first in wts.
void lstm_block(uint me, uint bx, uint gy, uint H, uint l, uint L, uint vocab, uint clips) {
  uint c0 = gy * CG, lane = me % LN, y = me / LN;
  if (me == 0u) {
    bool a = false;
    for (uint g = 0u; g < CG; g++) a = a || feeds(c0 + g, clips);
    any = a;
  }
  barrier();
  if (!any) return;
  uint wx = vocab * H + l * (8u * H * H + 4u * H), wh = wx + 4u * H * H, b = wh + 4u * H * H;
  for (uint g = 0u; g < CG; g++) {
    uint cl = c0 + g, sb = 16u * (cl + 1u);
    bool on = feeds(cl, clips);
    uint cur = on ? state[sb + 5] : 0u, hb = cl * 2u * L * H;
    for (uint i = me; i < H; i += 256u) {
      xs[g * H + i] = !on ? 0.0 : l == 0u ? wts[state[sb + 6] * H + i] : h[hb + ((cur ^ 1u) * L + l - 1u) * H + i];
      hs[g * H + i] = on ? h[hb + (cur * L + l) * H + i] : 0.0;
    }
  }
  barrier();
  uint k = y / U, u = y % U, j = bx * U + u, row = k * H + j;
  bool mine = y < 4u * U && j < H; // a gate row of this block
  float s1[CG], s2[CG];
  for (uint g = 0u; g < CG; g++) s1[g] = 0.0, s2[g] = 0.0;
  if (mine && (H & 3u) == 0u && (wx & 3u) == 0u) {
    for (uint q = lane; q < H / 4u; q += LN) {
      vec4 w = wts4[(wx + row * H) / 4u + q], v = wts4[(wh + row * H) / 4u + q];
      for (uint g = 0u; g < CG; g++) {
        uint i = g * H + 4u * q;
        s1[g] += dot(w, vec4(xs[i], xs[i + 1u], xs[i + 2u], xs[i + 3u]));
        s2[g] += dot(v, vec4(hs[i], hs[i + 1u], hs[i + 2u], hs[i + 3u]));
      }
    }
  } else if (mine) {
    for (uint i = lane; i < H; i += LN) {
      float w = wts[wx + row * H + i], v = wts[wh + row * H + i];
      for (uint g = 0u; g < CG; g++) s1[g] += w * xs[g * H + i], s2[g] += v * hs[g * H + i];
    }
  }
  if (y < 4u * U)
    for (uint g = 0u; g < CG; g++) px[g][y][lane] = s1[g], ph[g][y][lane] = s2[g];
  barrier();
  // A gate row's sums, clip g by invocation (row, g mod LN).
  for (uint g = lane; mine && g < CG; g += LN) {
    float a = 0.0, c2 = 0.0;
    for (uint i = 0u; i < LN; i++) a += px[g][y][i], c2 += ph[g][y][i];
    gate[g][k][u] = (wts[b + row] + a) + c2;
  }
  barrier();
  // The cell update: clip c0 + g's unit y by invocation (row y < U, g mod LN).
  j = bx * U + y;
  for (uint g = lane; y < U && j < H && g < CG; g += LN) {
    uint cl = c0 + g;
    if (feeds(cl, clips)) {
      uint cur = state[16u * (cl + 1u) + 5], nxt = cur ^ 1u, hb = cl * 2u * L * H;
      float ig = sigmoid(gate[g][0][y]), fg = sigmoid(gate[g][1][y]), gg = tanh(gate[g][2][y]),
            og = sigmoid(gate[g][3][y]);
      float cn = fg * c[hb + (cur * L + l) * H + j] + ig * gg;
      c[hb + (nxt * L + l) * H + j] = cn;
      h[hb + (nxt * L + l) * H + j] = og * tanh(cn);
    }
  }
  // gate, xs, hs and any are read above: free for the next block once all are past here.
  barrier();
}
