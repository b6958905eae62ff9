#version 450
// rnnt_lstm: one LSTM layer of the transducer's predictor, fed the token the
// search of clip gl_WorkGroupID.y just emitted (its emit word; nothing
// otherwise), as decode/transducer.c's predict(): gates = (b + Wx·x) + Wh·h,
// in order i, f, g, o; c' = f·c + i·g; h' = o·tanh(c').
// state  uint (binding 0): clip c's words from 16·(c + 1) (rnnt_joint.comp):
//        [0] done, [4] emit, [5] cur, [6] tok
// wts    f32 (binding 1): the weights packed (rnnt_search.comp's layout):
//        embed [vocab][hidden] (layer 0's input is row tok), then per layer
//        Wx [4·hidden][hidden], Wh [4·hidden][hidden], b [4·hidden]
//        (bias_ih + bias_hh)
// h, c   f32 (bindings 2, 3): [clips][2][layers][hidden]: copy cur is read,
//        copy cur ^ 1 written (layer l > 0 reads layer l − 1 there)
// A workgroup of 256 takes U = 4 units: their 16 gate rows, LN = 16
// invocations per row (neighbours read neighbouring words), partial sums
// added in shared memory, where the four gates of a unit meet for the cell
// update. hidden ≤ 2048.
layout(local_size_x = 16, local_size_y = 16) in;
const uint U = 4, LN = 16;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Wts { float wts[]; };
layout(std430, binding = 2) buffer H { float h[]; };
layout(std430, binding = 3) buffer C { float c[]; };

layout(push_constant) uniform Push {
  uint hidden, layer, layers, vocab;
} pc;

shared float xs[2048], hs[2048], px[4 * U][LN], ph[4 * U][LN], gate[4][U];

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

void main() {
  uint sb = 16 * (gl_WorkGroupID.y + 1);
  if (state[sb] != 0 || state[sb + 4] == 0) return;
  uint H = pc.hidden, L = pc.layers, l = pc.layer, cur = state[sb + 5], nxt = cur ^ 1u;
  uint hb = gl_WorkGroupID.y * 2 * L * H; // the clip's h and c
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y, me = y * LN + lane;
  uint wx = pc.vocab * H + l * (8 * H * H + 4 * H), wh = wx + 4 * H * H, b = wh + 4 * H * H;
  for (uint i = me; i < H; i += 256) {
    xs[i] = l == 0 ? wts[state[sb + 6] * H + i] : h[hb + (nxt * L + l - 1) * H + i];
    hs[i] = h[hb + (cur * L + l) * H + i];
  }
  barrier();
  uint k = y / U, u = y % U, j = gl_WorkGroupID.x * U + u, row = k * H + j;
  float s1 = 0.0, s2 = 0.0;
  if (j < H) {
    for (uint i = lane; i < H; i += LN) s1 += wts[wx + row * H + i] * xs[i];
    for (uint i = lane; i < H; i += LN) s2 += wts[wh + row * H + i] * hs[i];
  }
  px[y][lane] = s1;
  ph[y][lane] = s2;
  barrier();
  if (lane == 0 && j < H) {
    float a = 0.0, c2 = 0.0;
    for (uint i = 0; i < LN; i++) a += px[y][i], c2 += ph[y][i];
    gate[k][u] = (wts[b + row] + a) + c2;
  }
  barrier();
  if (y >= U || lane != 0) return;
  j = gl_WorkGroupID.x * U + y;
  if (j >= H) return;
  float ig = sigmoid(gate[0][y]), fg = sigmoid(gate[1][y]), gg = tanh(gate[2][y]),
        og = sigmoid(gate[3][y]);
  float cn = fg * c[hb + (cur * L + l) * H + j] + ig * gg;
  c[hb + (nxt * L + l) * H + j] = cn;
  h[hb + (nxt * L + l) * H + j] = og * tanh(cn);
}
