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
// state  uint (binding 0): words 0 .. 15 a header (rnnt_joint.glsl), [0] the
//        clips still searching (decremented as each ends); clip c's 16 words from 16·(c + 1),
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
// logits f32 (binding 4): per clip WF frames of rows (vocabulary with blank, then TDT
//        durations), then the frames' block summaries (rnnt_joint.glsl)
// dur    int (binding 5): the durations in frames (TDT)
// out    uint (binding 6): per token id, frame, frames, confidence (f32 bits),
//        clip c's from base
// A workgroup of 256 takes JR rows, JL invocations a row (rnnt_joint.glsl;
// spec constants 2 and 3), their partial sums added in shared memory; the WF
// frames' z in shared memory too (WF·joint ≤ ZS, spec constant 1). A token
// that is not blank is written out and fed to the LSTM (emit); the previous
// dispatch's emit makes its new state current here. Confidence: 1 −
// H(softmax)/ln(vocab) in f32 (the CPU path sums in f64). Nothing for a clip
// once it is done.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint WF = 1;
layout(constant_id = 1) const uint ZS = 4096;
layout(constant_id = 2) const uint JR = 16;
layout(constant_id = 3) const uint JL = 16;

layout(std430, binding = 0) coherent buffer State { uint state[]; };
layout(std430, binding = 1) readonly buffer Enc { float enc[]; };
layout(std430, binding = 2) readonly buffer P { float pv[]; };
layout(std430, binding = 3) readonly buffer Wts { float wts[]; };
layout(std430, binding = 3) readonly buffer Wts4 { vec4 wts4[]; }; // the same, by 16 bytes
layout(std430, binding = 4) coherent buffer Logits { float logits[]; };
layout(std430, binding = 5) readonly buffer Dur { int dur[]; };
layout(std430, binding = 6) writeonly buffer Out { uint outv[]; };

layout(push_constant) uniform Push {
  uint stride, joint, rows, act; // act: 0 ReLU, 1 sigmoid, 2 tanh
  uint vocab, n_dur, max_symbols, at;
} pc;

#include "rnnt_joint.glsl"

void main() {
  joint_block(gl_LocalInvocationIndex, gl_WorkGroupID.x, gl_NumWorkGroups.x, gl_WorkGroupID.y, 0);
}
