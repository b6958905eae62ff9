// rnnt_pred.glsl: one workgroup's share of the predictor projection
// (rnnt_pred.comp says what it computes): outputs PR·bx .. PR·bx + PR − 1
// of clip cl, PL invocations an output, each taking every PL-th group of 4
// columns (one 16-byte load where the rows are whole vec4s). Shared by
// rnnt_pred.comp and rnnt_grid.comp. The including kernel declares the
// buffers state, wts (and wts4, the same by 16 bytes), h and pv; a
// workgroup of 256 invocations, me = PL·y + lane; HS ≥ hidden floats of
// shared memory.
const uint PR = 8, PL = 32;

shared float hp[HS], pp[PR][PL];

// H hidden units, L layers, J outputs, the weights at `at` in wts.
void pred_block(uint me, uint bx, uint cl, uint H, uint J, uint L, uint at) {
  uint sb = 16 * (cl + 1);
  if (state[sb] != 0 || state[sb + 4] == 0) return;
  uint hb = cl * 2 * L * H + ((state[sb + 5] ^ 1u) * L + L - 1) * H;
  uint lane = me % PL, y = me / PL;
  for (uint i = me; i < H; i += 256) hp[i] = h[hb + i];
  barrier();
  uint j = bx * PR + y;
  float s = 0.0;
  if (j < J && (H & 3u) == 0u && (at & 3u) == 0u) {
    for (uint q = lane; q < H / 4u; q += PL)
      s += dot(wts4[(at + j * H) / 4u + q], vec4(hp[4u * q], hp[4u * q + 1u], hp[4u * q + 2u], hp[4u * q + 3u]));
  } else if (j < J) {
    for (uint i = lane; i < H; i += PL) s += wts[at + j * H + i] * hp[i];
  }
  pp[y][lane] = s;
  barrier();
  if (lane == 0 && j < J) {
    float sum = 0.0;
    for (uint i = 0; i < PL; i++) sum += pp[y][i];
    pv[cl * J + j] = wts[at + J * H + j] + sum;
  }
  barrier(); // hp and pp are free for the next block
}
