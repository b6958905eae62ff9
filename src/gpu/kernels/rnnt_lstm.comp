#version 450
// rnnt_lstm: one LSTM layer of the transducer's predictor, fed the token the
// search just emitted (rnnt_pick.comp's state[4]; nothing otherwise), as
// decode/transducer.c's predict(): gates = (b + Wx·x) + Wh·h, in order i, f,
// g, o; c' = f·c + i·g; h' = o·tanh(c').
// state  uint (binding 0): [0] done, [4] emit, [5] cur, [6] tok
// embed  f32 (binding 1): [vocab][hidden]: layer 0's input is row tok
// wxt    f32 (binding 2): this layer's Wx transposed, [hidden][4·hidden]
// wht    f32 (binding 3): Wh transposed, [hidden][4·hidden]
// b      f32 (binding 4): [4·hidden] (bias_ih + bias_hh)
// h, c   f32 (bindings 5, 6): [2][layers][hidden]: copy cur is read, copy
//        cur ^ 1 written (layer l > 0 reads layer l − 1 there)
// A workgroup of 256 takes 64 units, one gate of one unit per invocation
// (column reads: neighbours read neighbouring words); the four gates meet in
// shared memory for the cell update. hidden ≤ 2048.
layout(local_size_x = 64, local_size_y = 4) in;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Embed { float embed[]; };
layout(std430, binding = 2) readonly buffer Wx { float wxt[]; };
layout(std430, binding = 3) readonly buffer Wh { float wht[]; };
layout(std430, binding = 4) readonly buffer B { float b[]; };
layout(std430, binding = 5) buffer H { float h[]; };
layout(std430, binding = 6) buffer C { float c[]; };

layout(push_constant) uniform Push {
  uint hidden, layer, layers;
} pc;

shared float xs[2048], hs[2048], gate[4][64];

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

void main() {
  if (state[0] != 0 || state[4] == 0) return;
  uint H = pc.hidden, L = pc.layers, l = pc.layer, cur = state[5], nxt = cur ^ 1u;
  uint me = gl_LocalInvocationID.y * 64 + gl_LocalInvocationID.x;
  for (uint i = me; i < H; i += 256) {
    xs[i] = l == 0 ? embed[state[6] * H + i] : h[(nxt * L + l - 1) * H + i];
    hs[i] = h[(cur * L + l) * H + i];
  }
  barrier();
  uint u = gl_LocalInvocationID.x, k = gl_LocalInvocationID.y, j = gl_WorkGroupID.x * 64 + u;
  if (j < H) {
    uint row = k * H + j, w = 4 * H;
    float s1 = 0.0, s2 = 0.0;
    for (uint i = 0; i < H; i++) s1 += wxt[i * w + row] * xs[i];
    for (uint i = 0; i < H; i++) s2 += wht[i * w + row] * hs[i];
    gate[k][u] = (b[row] + s1) + s2;
  }
  barrier();
  if (k != 0 || j >= H) return;
  float ig = sigmoid(gate[0][u]), fg = sigmoid(gate[1][u]), gg = tanh(gate[2][u]),
        og = sigmoid(gate[3][u]);
  float cn = fg * c[(cur * L + l) * H + j] + ig * gg;
  c[(nxt * L + l) * H + j] = cn;
  h[(nxt * L + l) * H + j] = og * tanh(cn);
}
