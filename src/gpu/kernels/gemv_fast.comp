#version 450
// gemv_fast (fast variant: subgroup arithmetic): gemv.comp's contract, one
// row of a linear layer (see there for the bindings, layouts and push
// constants).
//
// A workgroup of THREADS takes R rows of W. Every invocation reads chunks
// of V consecutive weights, one 16-byte word of each of the R rows (V = 4
// F32, 8 F16 or BF16, 16 Q8_0; rows are wk long, wk a multiple of 32) and
// the V values of a under them, chunks THREADS apart. On a GPU (THREADS
// 256, R 4) a decoder's layer (1280 × 1280 F16) is read in one or two words
// an invocation, all in flight at once, where gemv.comp's 32 invocations a
// row each walk it in ten dependent steps and sum through a tree of five
// barriers. On a CPU device the workgroup is one subgroup (THREADS = its
// size, R 8): lavapipe makes every read a loop over the lanes, and a read of
// a feeds R rows. The R partial dots are added by subgroupAdd, the
// subgroups' sums through shared memory after one barrier, in subgroup
// order. W is converted to f32 exactly; sums in f32.
//
// ALIGNED (a_off % 4 == 0) reads a 4 values at a time; else one at a time.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint WTYPE = 0;
layout(constant_id = 1) const uint R = 4; // rows per workgroup (a divisor of 64)
layout(constant_id = 2) const bool ALIGNED = true;
layout(constant_id = 3) const uint THREADS = 256; // a multiple of the subgroup size, ≤ 256

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer W { uvec4 w4[]; };
layout(std430, binding = 4) readonly buffer Scales { uint scales[]; };

layout(push_constant) uniform Push {
  uint n, k, mode;
  float alpha;
  uint dual, a_off, c_off, wk;
} p;

const uint V = WTYPE == W_F32 ? 4 : WTYPE == W_Q8_0 ? 16 : 8;
const uint MAX_SUBGROUPS = 64; // ≤ 256 invocations in subgroups of 4 or more
shared float red[R][MAX_SUBGROUPS];

// a[a_off + x .. + 3], zeros from k on (x % 4 == 0).
vec4 a_four(uint x) {
  uint i = p.a_off + x;
  if (ALIGNED && x + 4 <= p.k) return a4[i / 4];
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; e++)
    if (x + e < p.k) v[e] = a[i + e];
  return v;
}

// a's chunk being read: its first V / 4 vectors. (Not a parameter sized by
// the spec constant: glslang took such a function's calls for another type
// in some runs and not in others.)
vec4 av[4];

// av against W[row]'s chunk at x: the sum of their V products.
float chunk_dot(uint row, uint x) {
  uint at = row * p.wk + x; // in weights
  uvec4 q = w4[at / V];
  if (WTYPE == W_F32) return dot(av[0], uintBitsToFloat(q));
  if (WTYPE == W_F16 || WTYPE == W_BF16)
    return dot(av[0], halves4(WTYPE, q.xy)) + dot(av[1], halves4(WTYPE, q.zw));
  float d = q8_scale(scales, at / 32);
  float s = 0.0;
  for (uint e = 0; e < V / 4; e++) s += dot(av[e], d * unpack_q8(q[e]));
  return s;
}

void main() {
  uint t = gl_LocalInvocationID.x;
  for (uint row0 = gl_WorkGroupID.x * R; row0 < p.n; row0 += gl_NumWorkGroups.x * R) {
    float part[R];
    for (uint r = 0; r < R; r++) part[r] = 0.0;
    for (uint x = t * V; x < p.k; x += THREADS * V) {
      for (uint e = 0; e < V / 4; e++) av[e] = a_four(x + 4 * e);
      for (uint r = 0; r < R; r++) part[r] += chunk_dot(row0 + r, x);
    }
    for (uint r = 0; r < R; r++) {
      float s = subgroupAdd(part[r]);
      if (subgroupElect()) red[r][gl_SubgroupID] = s;
    }
    barrier();
    if (t < R) {
      float sum = 0.0;
      for (uint g = 0; g < gl_NumSubgroups; g++) sum += red[t][g];
      uint row = row0 + t, at = p.c_off + row;
      c[at] = epilogue(p.mode, p.alpha, sum + bias[row], reads_output(p.mode) ? c[at] : 0.0);
      if (row < p.dual) c[p.c_off + p.n + row] = sum + bias[p.n + row];
    }
    barrier(); // red is refilled by the next rows
  }
}
