#version 450
// wmel_norm: Whisper's normalization of wmel's frames, in place, and the rows
// after them: with top the largest of the computed frames' values (and of the
// padding's frame where there is padding),
//   rows < audio:          x = (max(x, top − 8) + 4) / 4
//   audio ≤ rows < frames: the padding's frame (pad [F]) so normalized
//   frames ≤ rows < all:   0 (a window reaching past the clip reads zeros).
// Every workgroup finds top itself (audio values of `top`), then takes rows
// gl_WorkGroupID.x, + gl_NumWorkGroups.x, ...
// Bindings: 0 top [audio]; 1 pad [F]; 2 y [all][F].
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Top { float top[]; };
layout(std430, binding = 1) readonly buffer Pad { float pad[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint audio, frames, all, F;
  float pad_top;
} p;

shared float most[256];

void main() {
  uint lid = gl_LocalInvocationID.x;
  float high = p.audio < p.frames ? p.pad_top : -1.0 / 0.0;
  for (uint t = lid; t < p.audio; t += 256) high = max(high, top[t]);
  most[lid] = high;
  barrier();
  for (uint h = 128; h > 0; h >>= 1) {
    if (lid < h) most[lid] = max(most[lid], most[lid + h]);
    barrier();
  }
  precise float floor_at = most[0] - 8.0;
  for (uint r = gl_WorkGroupID.x; r < p.all; r += gl_NumWorkGroups.x)
    for (uint m = lid; m < p.F; m += 256) {
      uint at = r * p.F + m;
      if (r >= p.frames) {
        y[at] = 0.0;
        continue;
      }
      precise float v = (max(r < p.audio ? y[at] : pad[m], floor_at) + 4.0) / 4.0;
      y[at] = v;
    }
}
