// best_key: argmax.comp's and ts_greedy.comp's choice of the largest value —
// the C loop `if (x[i] > x[best]) best = i` over ordered integer keys made
// from the floats' bits, so that a driver's float compares (NaN, denormals
// flushed) cannot change the answer — and its workgroup reduction over WG
// invocations along x (WG a power of two, a constant the kernel defines
// before it includes this).

// Keys order as the floats do, −0 and +0 alike; 0 only for a NaN (a non-NaN
// negative's complement is at least 0x007fffff, the key of −inf).
uint key(float v) {
  uint b = floatBitsToUint(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0u;
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}

// (k, i) := (k2, i2) where that one wins: a larger key, or the same key at a lower index.
void take(inout uint k, inout uint i, uint k2, uint i2) {
  if (k2 > k || (k2 == k && i2 < i)) k = k2, i = i2;
}

shared uint rk[WG], ri[WG];

// The workgroup's best of every invocation's (k, i), seen by all; rk and ri
// are free again after.
void wg_best(inout uint k, inout uint i) {
  uint l = gl_LocalInvocationID.x;
  rk[l] = k;
  ri[l] = i;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (l < s) {
      uint a = rk[l], b = ri[l];
      take(a, b, rk[l + s], ri[l + s]);
      rk[l] = a;
      ri[l] = b;
    }
    barrier();
  }
  k = rk[0];
  i = ri[0];
  barrier();
}
