#version 450
// ssm_scan (portable): Mamba-2's selective scan, one token after another, for
// a prompt (the reference's chunked scan computes the same recurrence) and for
// each generated token (selective_state_update):
//   dt   = max(softplus(dt_raw[h] + dt_bias[h]), dt_min)   (dt_min: the prompt's
//          clamp at time_step_min; 0 for one token, which the reference leaves unclamped)
//   s    = s · exp(−dt · exp(A_log[h])) + dt · B[g] · x[h][p]        (state [N])
//   y    = s · C[g] + D[h] · x[h][p]
// for heads h (group g = h / (heads / groups)) and head dims p < P.
// u      f32 (binding 0): row r at u_off + r·u_stride: x [heads·P] at 0, B
//        [groups·N] at b_col, C [groups·N] at c_col (the conv's output)
// dt     f32 (binding 1): row r at dt_off + r·dt_stride, heads values
// par    f32 (binding 2): A_log [heads], then D [heads], then dt_bias [heads]
// state  [heads][P][N] f32 (binding 3): read (unless fresh: zeros) and rewritten
// y      f32 (binding 4): row r at y_off + r·y_stride, heads·P values
// Workgroup (h, block of 4 dims p); 32 lanes over n, each holding N/32 (≤ 8)
// states in registers across the rows; a shared-memory tree sums s·C.
layout(local_size_x = 32, local_size_y = 4) in;
const uint LANES = 32, ROWS = 4, PER = 8;

layout(std430, binding = 0) readonly buffer U { float u[]; };
layout(std430, binding = 1) readonly buffer Dt { float dtv[]; };
layout(std430, binding = 2) readonly buffer Par { float par[]; };
layout(std430, binding = 3) buffer State { float state[]; };
layout(std430, binding = 4) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint t, heads, P, N, groups, fresh;
  uint u_off, u_stride, b_col, c_col;
  uint dt_off, dt_stride, y_off, y_stride;
  float dt_min;
} p;

shared float red[ROWS][LANES];

// torch's softplus (beta 1, threshold 20).
float softplus(float v) { return v > 20.0 ? v : log(1.0 + exp(v)); }

void main() {
  uint lane = gl_LocalInvocationID.x, ry = gl_LocalInvocationID.y;
  uint h = gl_WorkGroupID.x, pd = gl_WorkGroupID.y * ROWS + ry;
  bool live = pd < p.P;
  uint g = h / (p.heads / p.groups);
  float A = -exp(par[h]), D = par[p.heads + h], bias = par[2 * p.heads + h];
  uint sbase = (h * p.P + pd) * p.N;
  float s[PER];
  for (uint i = 0; i < PER; i++) {
    uint n = lane + i * LANES;
    s[i] = live && n < p.N && p.fresh == 0 ? state[sbase + n] : 0.0;
  }
  for (uint r = 0; r < p.t; r++) {
    uint row = p.u_off + r * p.u_stride;
    float dt = max(softplus(dtv[p.dt_off + r * p.dt_stride + h] + bias), p.dt_min);
    float dA = exp(dt * A);
    float xv = live ? u[row + h * p.P + pd] : 0.0;
    float part = 0.0;
    for (uint i = 0; i < PER; i++) {
      uint n = lane + i * LANES;
      if (n < p.N) {
        s[i] = s[i] * dA + dt * u[row + p.b_col + g * p.N + n] * xv;
        part += s[i] * u[row + p.c_col + g * p.N + n];
      }
    }
    red[ry][lane] = part;
    barrier();
    for (uint k = LANES / 2; k > 0; k >>= 1) {
      if (lane < k) red[ry][lane] += red[ry][lane + k];
      barrier();
    }
    if (lane == 0 && live) y[p.y_off + r * p.y_stride + h * p.P + pd] = red[ry][0] + D * xv;
    barrier(); // red is refilled by the next row
  }
  for (uint i = 0; i < PER; i++) {
    uint n = lane + i * LANES;
    if (live && n < p.N) state[sbase + n] = s[i];
  }
}
