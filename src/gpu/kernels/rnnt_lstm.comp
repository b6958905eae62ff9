#version 450
// rnnt_lstm: one LSTM layer of the transducer's predictor, fed the token the
// search of each clip just emitted (its emit word; nothing otherwise), as
// decode/transducer.c's predict(): gates = (b + Wx·x) + Wh·h, in order i, f,
// g, o; c' = f·c + i·g; h' = o·tanh(c').
// state  uint (binding 0): clip c's words from 16·(c + 1) (rnnt_joint.comp):
//        [0] done, [4] emit, [5] cur, [6] tok
// wts    f32 (binding 1): the weights packed (rnnt_search.comp's layout):
//        embed [vocab][hidden] (layer 0's input is row tok), then per layer
//        Wx [4·hidden][hidden], Wh [4·hidden][hidden], b [4·hidden]
//        (bias_ih + bias_hh)
// h, c   f32 (bindings 2, 3): [clips][2][layers][hidden]: copy cur is read,
//        copy cur ^ 1 written (layer l > 0 reads layer l − 1 there)
// A workgroup of 256 takes U = 4 units — their 16 gate rows, LN = 16
// invocations per row (neighbours read neighbouring words) — for CG clips
// (spec constant 0; clips gl_WorkGroupID.y·CG ..): each weight read once
// serves all of them (a batch's search streams the weights once per CG
// clips, not once per clip). Each clip's sums are taken in the same order
// as with one clip a workgroup. Partial sums are added in shared memory,
// where the four gates of a unit meet for the cell update; x and h of the
// clips in shared memory too: XS = CG·hidden floats each (spec constant 1).
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint CG = 1;
layout(constant_id = 1) const uint XS = 2048;
const uint U = 4, LN = 16;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Wts { float wts[]; };
layout(std430, binding = 2) buffer H { float h[]; };
layout(std430, binding = 3) buffer C { float c[]; };

layout(push_constant) uniform Push {
  uint hidden, layer, layers, vocab, clips;
} pc;

shared float xs[XS], hs[XS], px[CG][4 * U][LN], ph[CG][4 * U][LN], gate[CG][4][U];
shared bool any;

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

// Whether clip c (of the batch) takes a token this step.
bool feeds(uint c) {
  if (c >= pc.clips) return false;
  uint sb = 16u * (c + 1u);
  return state[sb] == 0u && state[sb + 4] != 0u;
}

void main() {
  uint H = pc.hidden, L = pc.layers, l = pc.layer, c0 = gl_WorkGroupID.y * CG;
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y, me = y * LN + lane;
  if (me == 0u) {
    bool a = false;
    for (uint g = 0u; g < CG; g++) a = a || feeds(c0 + g);
    any = a;
  }
  barrier();
  if (!any) return;
  uint wx = pc.vocab * H + l * (8u * H * H + 4u * H), wh = wx + 4u * H * H, b = wh + 4u * H * H;
  for (uint g = 0u; g < CG; g++) {
    uint cl = c0 + g, sb = 16u * (cl + 1u);
    bool on = feeds(cl);
    uint cur = on ? state[sb + 5] : 0u, hb = cl * 2u * L * H;
    for (uint i = me; i < H; i += 256u) {
      xs[g * H + i] = !on ? 0.0 : l == 0u ? wts[state[sb + 6] * H + i] : h[hb + ((cur ^ 1u) * L + l - 1u) * H + i];
      hs[g * H + i] = on ? h[hb + (cur * L + l) * H + i] : 0.0;
    }
  }
  barrier();
  uint k = y / U, u = y % U, j = gl_WorkGroupID.x * U + u, row = k * H + j;
  float s1[CG], s2[CG];
  for (uint g = 0u; g < CG; g++) s1[g] = 0.0, s2[g] = 0.0;
  if (j < H) {
    for (uint i = lane; i < H; i += LN) {
      float w = wts[wx + row * H + i];
      for (uint g = 0u; g < CG; g++) s1[g] += w * xs[g * H + i];
    }
    for (uint i = lane; i < H; i += LN) {
      float w = wts[wh + row * H + i];
      for (uint g = 0u; g < CG; g++) s2[g] += w * hs[g * H + i];
    }
  }
  for (uint g = 0u; g < CG; g++) px[g][y][lane] = s1[g], ph[g][y][lane] = s2[g];
  barrier();
  if (lane < CG && j < H) {
    uint g = lane;
    float a = 0.0, c2 = 0.0;
    for (uint i = 0u; i < LN; i++) a += px[g][y][i], c2 += ph[g][y][i];
    gate[g][k][u] = (wts[b + row] + a) + c2;
  }
  barrier();
  // The cell update: invocation (lane g, row y < U) for clip c0 + g's unit y.
  if (y >= U || lane >= CG) return;
  uint g = lane, cl = c0 + g;
  j = gl_WorkGroupID.x * U + y;
  if (j >= H || !feeds(cl)) return;
  uint cur = state[16u * (cl + 1u) + 5], nxt = cur ^ 1u, hb = cl * 2u * L * H;
  float ig = sigmoid(gate[g][0][y]), fg = sigmoid(gate[g][1][y]), gg = tanh(gate[g][2][y]),
        og = sigmoid(gate[g][3][y]);
  float cn = fg * c[hb + (cur * L + l) * H + j] + ig * gg;
  c[hb + (nxt * L + l) * H + j] = cn;
  h[hb + (nxt * L + l) * H + j] = og * tanh(cn);
}
