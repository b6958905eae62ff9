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
// A workgroup of 256 takes U units — their 4·U gate rows, LN invocations a
// row (rnnt_lstm.glsl; spec constants 2 and 3) — for CG clips
// (spec constant 0; clips gl_WorkGroupID.y·CG ..): each weight read once
// serves all of them (a batch's search streams the weights once per CG
// clips, not once per clip). Each clip's sums are taken in the same order
// as with one clip a workgroup. Partial sums are added in shared memory,
// where the four gates of a unit meet for the cell update; x and h of the
// clips in shared memory too: XS = CG·hidden floats each (spec constant 1).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint CG = 1;
layout(constant_id = 1) const uint XS = 2048;
layout(constant_id = 2) const uint U = 2;
layout(constant_id = 3) const uint LN = 32;

layout(std430, binding = 0) readonly buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Wts { float wts[]; };
layout(std430, binding = 1) readonly buffer Wts4 { vec4 wts4[]; }; // the same, by 16 bytes
layout(std430, binding = 2) buffer H { float h[]; };
layout(std430, binding = 3) buffer C { float c[]; };

layout(push_constant) uniform Push {
  uint hidden, layer, layers, vocab, clips;
} pc;

#include "rnnt_lstm.glsl"

void main() {
  lstm_block(gl_LocalInvocationIndex, gl_WorkGroupID.x, gl_WorkGroupID.y, pc.hidden, pc.layer, pc.layers,
             pc.vocab, pc.clips);
}
