#version 450
// q8_split: a Q8_0 layer's blocks as the file stores them (34 bytes each: an
// f16 scale, then 32 int8 weights) into the layout gpu_linear keeps — int8
// data [blocks][32] and f16 scales [blocks] — on the GPU at load, instead of
// on the host (linear.c's q8_split). One invocation per pair of blocks (68
// bytes = 17 words, so every pair starts on a word): pair j reads raw words
// 17j .. 17j + 16 and writes data words 16j .. 16j + 15 and scales word j.
// Blocks from `blocks` on (the rows that pad the layer to its tile) are zeros;
// raw holds `blocks` blocks, its size rounded up to a word.
// The grid is (x, y) groups of 256 pairs, pair = (y · groups_x + x) · 256 + local.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Raw { uint raw[]; };
layout(std430, binding = 1) writeonly buffer Data { uint data[]; };
layout(std430, binding = 2) writeonly buffer Scales { uint scales[]; };

layout(push_constant) uniform Push {
  uint blocks, pairs; // blocks in raw; pairs to write (all blocks of the padded layer / 2)
} p;

void main() {
  uint j = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (j >= p.pairs) return;
  uint w0 = 17u * j, s0 = 0u, s1 = 0u;
  // Block 2j starts on word w0: its scale is the word's low half, its data
  // the 32 bytes from the high half on.
  bool first = 2u * j < p.blocks, second = 2u * j + 1u < p.blocks;
  if (first) s0 = raw[w0] & 0xffffu;
  for (uint i = 0u; i < 8u; i++)
    data[16u * j + i] = first ? (raw[w0 + i] >> 16) | (raw[w0 + i + 1u] << 16) : 0u;
  // Block 2j + 1 starts half way through word w0 + 8: its scale is that
  // word's high half, its data the 8 whole words after it.
  if (second) s1 = raw[w0 + 8u] >> 16;
  for (uint i = 0u; i < 8u; i++) data[16u * j + 8u + i] = second ? raw[w0 + 9u + i] : 0u;
  scales[j] = s0 | (s1 << 16);
}
