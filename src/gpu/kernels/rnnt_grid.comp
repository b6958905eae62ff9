#version 450
// rnnt_grid: up to `budget` rounds of the steps search (nn/transducer_gpu.c)
// in one dispatch: the work of rnnt_joint, rnnt_lstm (each layer) and
// rnnt_pred, their code's blocks spread over the dispatch's workgroups
// (the LSTM's blocks shaped so that each workgroup takes about one), with a
// barrier over the whole grid between them where a dispatch boundary stood.
// A round where no clip took a token skips the LSTM and the projection. A
// round pays barriers instead of ~4 dispatches' floors (~4.6 µs each on the
// H200), but a workgroup's blocks run one after another: on the H200 it is
// level with the steps kernels (docs/perf.md, ninth session).
//
// Vulkan does not promise that a dispatch's workgroups run at once, and a
// workgroup that waits on one that cannot start would wait forever. So the
// wait is bounded: a workgroup that has spun `spins` times without the
// others arriving (or whose loop the device cut short) marks the search
// aborted (state word 3) and every workgroup stops at its next barrier;
// the host then searches again in steps, and where the probe's search
// aborts it never uses this kernel. The dispatch has G workgroups, no more
// than the device runs at once (the host's choice, checked by the probe).
//
// Buffers as rnnt_joint.comp (state, enc, p, wts, logits, out: 0 .. 5, the
// TDT durations in the state's header instead of a buffer of their own: the
// runtime's 8 bindings) and rnnt_lstm.comp (h, c: 6, 7); the header's words
// (rnnt_joint.glsl): [1] arrivals at the grid's barriers, [2] workgroups
// done (the last one zeroes both for the next dispatch), [3] aborted (left
// for the host), [8 ..] the durations (up to 8).
// Spec constants: WF, ZS (rnnt_joint), CG (rnnt_lstm), HS (rnnt_pred), then
// the LSTM's and the joint's block shapes.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint WF = 1;
layout(constant_id = 1) const uint ZS = 4096;
layout(constant_id = 2) const uint CG = 1;
layout(constant_id = 3) const uint HS = 2048; // hidden
layout(constant_id = 4) const uint U = 2;     // rnnt_lstm.glsl's block
layout(constant_id = 5) const uint LN = 32;
layout(constant_id = 6) const uint JR = 16;   // rnnt_joint.glsl's block
layout(constant_id = 7) const uint JL = 16;
const uint XS = CG * HS;

layout(std430, binding = 0) coherent buffer State { uint state[]; };
layout(std430, binding = 0) volatile coherent buffer Sync { uint sync[]; }; // the same, read afresh each time
layout(std430, binding = 1) readonly buffer Enc { float enc[]; };
layout(std430, binding = 2) coherent buffer P { float pv[]; };
layout(std430, binding = 3) readonly buffer Wts { float wts[]; };
layout(std430, binding = 3) readonly buffer Wts4 { vec4 wts4[]; }; // the same, by 16 bytes
layout(std430, binding = 4) coherent buffer Logits { float logits[]; };
layout(std430, binding = 0) readonly buffer Dur { uint header[8]; int dur[]; }; // the state's words 8 ..
layout(std430, binding = 5) writeonly buffer Out { uint outv[]; };
layout(std430, binding = 6) coherent buffer H { float h[]; };
layout(std430, binding = 7) coherent buffer C { float c[]; };

layout(push_constant) uniform Push {
  uint stride, joint, rows, act; // rnnt_joint's
  uint vocab, n_dur, max_symbols, at;
  uint hidden, layers, clips, pred_at; // rnnt_lstm's and rnnt_pred's
  uint budget, spins;                  // rounds; spins of a barrier's wait before it gives up
} pc;

#include "rnnt_joint.glsl"
#include "rnnt_lstm.glsl"
#include "rnnt_pred.glsl"

const uint ABORT = 1u << 31; // or-ed into the arrivals: every wait ends

shared bool go;
shared uint seen[4]; // header words 4 .. 7 as the last barrier left them

uint me = gl_LocalInvocationIndex, G = gl_NumWorkGroups.x, syncs = 0;

// A barrier over the grid; false where the search was aborted.
bool grid_sync() {
  syncs++;
  memoryBarrierBuffer();
  barrier();
  if (me == 0) {
    uint want = syncs * G, n = atomicAdd(state[1], 1u) + 1u;
    for (uint i = 0; n < want && i < pc.spins; i++) n = sync[1]; // plain reads: no queue at the atomic unit
    if (n < want) { // waited too long, or the device cut the loop short
      atomicOr(state[1], ABORT);
      atomicExchange(state[3], 1u);
    }
    go = (n & ABORT) == 0u && n >= want;
    // The round's counts, read after the arrivals (a fence between): plain
    // reads, as the spin's (an atomic each, from every workgroup at every
    // barrier, would queue at the one cache line the counts share).
    memoryBarrierBuffer();
    for (uint i = 0; i < 4; i++) seen[i] = sync[4 + i];
  }
  memoryBarrierBuffer();
  barrier();
  return go;
}

void main() {
  uint wg = gl_WorkGroupID.x, H = pc.hidden, L = pc.layers, n = pc.clips;
  uint nbx = (pc.rows + JR - 1) / JR, nu = (H + U - 1) / U, ncg = (n + CG - 1) / CG, nbp = (pc.joint + PR - 1) / PR;
  // The clips searching and the header's counts before any pick of this dispatch.
  uint searching = state[0], ended = 0, e[2], d[2];
  bool ok = grid_sync();
  e[0] = seen[0], e[1] = seen[1], d[0] = seen[2], d[1] = seen[3];
  for (uint k = 0; ok && k < pc.budget && ended < searching; k++) {
    uint par = k & 1u;
    for (uint it = wg; it < nbx * n; it += G) joint_block(me, it % nbx, nbx, it / nbx, par);
    if (!(ok = grid_sync())) break;
    // This round's counts: the next round's picks touch the other parity's.
    uint fed = seen[par] - e[par];
    ended += seen[2 + par] - d[par];
    e[par] = seen[par], d[par] = seen[2 + par];
    if (fed == 0u) continue;
    for (uint l = 0; ok && l < L; l++) {
      for (uint it = wg; it < nu * ncg; it += G) lstm_block(me, it % nu, it / nu, H, l, L, pc.vocab, n);
      ok = grid_sync();
    }
    if (!ok) break;
    for (uint it = wg; it < nbp * n; it += G) pred_block(me, it % nbp, it / nbp, H, pc.joint, L, pc.pred_at);
    ok = grid_sync();
  }
  // The last workgroup out readies the barrier for the next dispatch.
  if (me == 0 && atomicAdd(state[2], 1u) == G - 1u) {
    atomicExchange(state[1], 0u);
    atomicExchange(state[2], 0u);
  }
}
