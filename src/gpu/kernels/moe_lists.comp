#version 450
// moe_lists (portable): which (token, slot) pairs chose each expert, for the
// grouped expert GEMVs: one invocation per expert e walks idx [pairs] in order
// and writes the pairs that chose e to list[e·cap ..] (in increasing order),
// their number to count[e]. A token chooses an expert at most once, so
// cap = tokens bounds every list.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Idx { uint idx[]; };
layout(std430, binding = 1) writeonly buffer List { uint list[]; };
layout(std430, binding = 2) writeonly buffer Count { uint count[]; };

layout(push_constant) uniform Push {
  uint experts, pairs, cap;
} p;

void main() {
  uint e = gl_GlobalInvocationID.x;
  if (e >= p.experts) return;
  uint n = 0;
  for (uint q = 0; q < p.pairs; q++)
    if (idx[q] == e && n < p.cap) list[e * p.cap + n++] = q;
  count[e] = n;
}
