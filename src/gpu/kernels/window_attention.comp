#version 450
// window_attention (portable): attention over a sliding window of keys
// (Moonshine Streaming's encoder): query i of head h sees keys s with
// 0 ≤ i − s < left or 0 < s − i < right, i.e. s in [i − left + 1, i + right − 1]
// within 0..t−1:
//   o_i = Σ_s softmax_s(scale · q_i·k_s) · v_s
// q, k, v, o f32 (bindings 0-3): row r of head h at off + r·stride + h·head_dim.
// One workgroup of 64 per (query, head): the window's scores in shared memory
// (at most MAX_KEYS), their max and sum through a shared-memory tree, then
// each invocation sums values for its output dims. f32 throughout.
layout(local_size_x = 64) in;
const uint WG = 64, MAX_KEYS = 1024;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };

layout(push_constant) uniform Push {
  uint t, heads, head_dim, left, right;
  float scale;
  uint q_off, q_stride, k_off, k_stride, v_off, v_stride, o_off, o_stride;
} p;

shared float sc[MAX_KEYS];
shared float red[WG];

float wg_reduce(float x, bool is_max) {
  uint tid = gl_LocalInvocationID.x;
  red[tid] = x;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = is_max ? max(red[tid], red[tid + s]) : red[tid] + red[tid + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.y, hd = p.head_dim;
  for (uint i = gl_WorkGroupID.x; i < p.t; i += gl_NumWorkGroups.x) {
    uint lo = i + 1 >= p.left ? i + 1 - p.left : 0;
    uint hi = min(p.t - 1, i + p.right - (p.right > 0 ? 1 : 0)); // right 0: the current frame last
    uint n = hi + 1 - lo, qa = p.q_off + i * p.q_stride + h * hd;
    float m = -3.402823e38;
    for (uint j = tid; j < n; j += WG) {
      uint ka = p.k_off + (lo + j) * p.k_stride + h * hd;
      float s = 0.0;
      for (uint d = 0; d < hd; d++) s += q[qa + d] * k[ka + d];
      sc[j] = p.scale * s;
      m = max(m, sc[j]);
    }
    m = wg_reduce(m, true);
    float sum = 0.0;
    for (uint j = tid; j < n; j += WG) {
      sc[j] = exp(sc[j] - m);
      sum += sc[j];
    }
    sum = wg_reduce(sum, false); // its barriers also publish sc[]
    for (uint d = tid; d < hd; d += WG) {
      float acc = 0.0;
      for (uint j = 0; j < n; j++) acc += sc[j] * v[p.v_off + (lo + j) * p.v_stride + h * hd + d];
      o[p.o_off + i * p.o_stride + h * hd + d] = acc / sum;
    }
    barrier(); // sc[] is rewritten by the next query
  }
}
