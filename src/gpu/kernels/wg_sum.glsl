// wg_sum: the sum of every invocation's v over a workgroup of WG invocations
// along x (WG a power of two, a constant the kernel defines before it
// includes this), by a tree in shared memory in a fixed order (the same sum
// from run to run); every invocation gets it, and red is free again after.
shared float red[WG];

float wg_sum(float v) {
  uint tid = gl_LocalInvocationID.x;
  red[tid] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    barrier();
  }
  float sum = red[0];
  barrier();
  return sum;
}
