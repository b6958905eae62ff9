#version 450
// logmel_norm: NeMo's per-feature normalization of logmel's frames, in place
// (src/frontend/mel.c's mel_normalize): over a clip's valid frames, for each
// feature m, mean = f32(Σ x / valid) and scale = f32(sqrt(Σ d² / (valid − 1)))
// + 1e-5 with d = f32(x − mean), sums in double; then x = (x − mean) / scale.
// Workgroup (g, clip) takes features 32g … 32g + 31: invocation (i, r) feature
// 32g + i over frames r, r + 8, …, in four sums side by side (frames r + 8q + 32j
// for sum q: four loads in flight, not one), added in q order; then the 8
// invocations' sums are added in r order.
// Binding 0: logmel's `in` (the clips' valid frames at word 4·clip + 2);
// binding 1: y [clips][pitch][F].
layout(local_size_x = 32, local_size_y = 8) in;

layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint pitch, F;
} p;

shared double part[8][32];

// The sum of the 8 rows' partial sums of feature column i, in row order.
double total(uint i, double mine) {
  part[gl_LocalInvocationID.y][i] = mine;
  barrier();
  double s = 0.0;
  for (uint r = 0; r < 8; r++) s += part[r][i];
  barrier();
  return s;
}

void main() {
  uint i = gl_LocalInvocationID.x, r = gl_LocalInvocationID.y, clip = gl_WorkGroupID.y;
  uint m = 32 * gl_WorkGroupID.x + i;
  uint valid = min(floatBitsToUint(x[4 * clip + 2]), p.pitch);
  bool on = m < p.F && valid >= 2;
  uint base = clip * p.pitch * p.F + m;
  dvec4 sum = dvec4(0.0);
  if (on)
    for (uint t = r; t < valid; t += 32)
      for (uint q = 0; q < 4; q++)
        if (t + 8 * q < valid) sum[q] += double(y[base + (t + 8 * q) * p.F]);
  float mean = float(total(i, ((sum.x + sum.y) + sum.z) + sum.w) / double(valid));
  dvec4 sq = dvec4(0.0);
  if (on)
    for (uint t = r; t < valid; t += 32)
      for (uint q = 0; q < 4; q++)
        if (t + 8 * q < valid) {
          precise float d = y[base + (t + 8 * q) * p.F] - mean;
          sq[q] += double(d) * double(d);
        }
  double var = total(i, ((sq.x + sq.y) + sq.z) + sq.w) / double(valid - 1);
  precise float scale = float(sqrt(var)) + 1e-5;
  if (on)
    for (uint t = r; t < valid; t += 8) {
      precise float d = y[base + t * p.F] - mean;
      y[base + t * p.F] = float(double(d) / double(scale));
    }
}
