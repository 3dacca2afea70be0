// rope_math.cuh — attention.rope's per-pair arithmetic, shared by the attention kernels
// (b12x-attention/kernels/rope.cuh) and gemm.bf16_gemv's rope epilogue (b12x-gemm), so that both
// round exactly alike.   crate: b12x-core
#pragma once

namespace b12x {

// One pair: a' = a c - b s, b' = b c + a s, every product and sum rounded to f32 (no FMA, so
// the CPU oracle's f32 arithmetic is the same).
__device__ __forceinline__ void rope_rotate(float& a, float& b, float c, float s) {
  const float na = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  const float nb = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  a = na;
  b = nb;
}

// The scaled cos and sin of pair j at `pos`: from the table `[max_position, R]` f32 (cos of
// pair j at column j, sin at R/2 + j) when it is set, else sincosf(pos · inv_freq_j) — the
// element-wise form of rope.cuh's cos_sin4 (same operations, same bits).
__device__ __forceinline__ void rope_cos_sin(const float* table, int rotary_dim, float inv_freq_j, float scale,
                                             int pos, int j, float& c, float& s) {
  if (table != nullptr) {
    const float* row = table + (long long)pos * rotary_dim;
    c = __ldg(row + j);
    s = __ldg(row + rotary_dim / 2 + j);
  } else {
    sincosf(__fmul_rn(float(pos), inv_freq_j), &s, &c);
  }
  c = __fmul_rn(c, scale);
  s = __fmul_rn(s, scale);
}

}  // namespace b12x
