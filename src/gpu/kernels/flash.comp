#version 450
// flash (fast attention): attention_scores + softmax + attention_values in
// one pass with no t² buffer: online softmax over blocks of keys (FlashAttention).
// Same contract as gpu_attention / gpu_rel_attention (RELATIVE = 1 is not used
// yet: it hangs on lavapipe, see docs/perf.md; attention.c keeps the portable
// path for relative attention):
//   s(i, j) = scale · (q_i·k_j [+ (q+v)_i·pos[j − i + t − 1] with RELATIVE])
//   o_i = Σ_j softmax_j(s(i, ·)) · v_j over the keys the mask keeps; 0 if none.
//
// q, k, v, qv  f32 (bindings 0, 1, 2, 3): row i of head h at
//              X[X_off + i·X_stride + h·head_dim ..]; qv read only with RELATIVE
// pos          f32 (binding 4, RELATIVE only): 2t − 1 rows, row r at pos_off + r·pos_stride
// mask         [t] uint (binding 5, read only when `masked`): 0 = key ignored
// o            f32 (binding 6): row i of head h at o_off + i·o_stride + h·head_dim
//
// One workgroup per (64 queries, head); one query per invocation, its q (and
// q+v) and its output accumulator in private vec4 arrays of HD/4 (spec
// constant 1: head_dim itself, a multiple of 16 up to 128: the loops need
// no bounds checks). Keys go in blocks of 16, read straight from the buffers
// (every invocation of a workgroup reads the same rows: the cache serves
// them); per block the scores, their max, one rescale of the running sum and
// accumulator, then the weighted v rows. Written for lavapipe, where it is
// the fast path (docs/perf.md): llvmpipe runs compute shaders as coroutines,
// and LLVM's coroutine frame building grew with the cube of the values alive
// in unrolled code — the fully unrolled HD = 128 kernel took 4 minutes to
// compile. So no shared memory, no barrier, and loops over dims unrolled
// only four vec4 deep (0.3 s). lavapipe also caps an invocation's loop
// iterations at 65535 in all: attention.c keeps long inputs off this kernel
// there (flash_fits). All in f32: only the order of the sums differs from
// the portable path.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint RELATIVE = 0;
layout(constant_id = 1) const uint HD = 64;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer QV { float qv[]; };
layout(std430, binding = 4) readonly buffer Pos { float pos[]; };
layout(std430, binding = 5) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 6) writeonly buffer O { float o[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  float scale;
  uint masked;
  uint q_off, q_stride, k_off, k_stride, v_off, v_stride;
  uint qv_off, qv_stride, pos_off, pos_stride, o_off, o_stride;
} p;

const uint BQ = 64, BK = 16, HD4 = HD / 4;

// A loop over the HD4 vec4 of a row: four per iteration, unrolled inside.
#define FOR_DIMS(c) \
  [[dont_unroll]] for (uint c0 = 0; c0 < HD4; c0 += 4) [[unroll]] for (uint c = c0; c < c0 + 4; c++)

// Four values from dim 4c of a row at `at`.
#define LOAD4(buf, at, c) \
  vec4(buf[(at) + 4 * (c) + 0], buf[(at) + 4 * (c) + 1], buf[(at) + 4 * (c) + 2], \
       buf[(at) + 4 * (c) + 3])

void main() {
  uint l = gl_LocalInvocationID.x, h = gl_WorkGroupID.y, i = gl_WorkGroupID.x * BQ + l;
  if (i >= p.t) return;
  uint col = h * p.head_dim;
  vec4 qr[HD4], qvr[HD4], acc[HD4];
  uint qa = p.q_off + i * p.q_stride + col, qva = p.qv_off + i * p.qv_stride + col;
  FOR_DIMS(c) {
    qr[c] = LOAD4(q, qa, c);
    if (RELATIVE != 0) qvr[c] = LOAD4(qv, qva, c);
    acc[c] = vec4(0.0);
  }
  float m = -3.0e38, sum = 0.0;
  for (uint j0 = 0; j0 < p.t; j0 += BK) {
    float s[BK];
    float bm = -3.0e38;
    bool any = false;
    for (uint r = 0; r < BK; r++) {
      uint j = j0 + r;
      s[r] = -3.0e38;
      if (j >= p.t || (p.masked != 0 && mask[j] == 0)) continue;
      float a = 0.0;
      uint ka = p.k_off + j * p.k_stride + col;
      FOR_DIMS(c) a += dot(qr[c], LOAD4(k, ka, c));
      if (RELATIVE != 0) {
        uint at = p.pos_off + (j + p.t - 1 - i) * p.pos_stride + col;
        FOR_DIMS(c) a += dot(qvr[c], LOAD4(pos, at, c));
      }
      s[r] = p.scale * a;
      bm = max(bm, s[r]);
      any = true;
    }
    if (!any) continue;
    float mn = max(m, bm), corr = exp(m - mn);
    sum *= corr;
    FOR_DIMS(c) acc[c] *= corr;
    for (uint r = 0; r < BK; r++) {
      if (s[r] == -3.0e38) continue;
      float w = exp(s[r] - mn);
      sum += w;
      uint va = p.v_off + (j0 + r) * p.v_stride + col;
      FOR_DIMS(c) acc[c] += w * LOAD4(v, va, c);
    }
    m = mn;
  }
  float inv = sum > 0.0 ? 1.0 / sum : 0.0;
  uint oa = p.o_off + i * p.o_stride + col;
  FOR_DIMS(c) {
    [[unroll]] for (uint e = 0; e < 4; e++) o[oa + 4 * c + e] = acc[c][e] * inv;
  }
}
