// activation.cuh — the SwiGLU activation math, shared by every kernel that applies it.  crate: b12x-core
//   silu_mul_vec<T>(g, u, L): eight elements of silu(min(g, L)) * clamp(u, -L, L), f32 math
//   (precise expf, IEEE add / division / multiply), one rounding to T.  L = +inf: no limit.
//   silu_mul_f32(g, u, L): one element of the same, unrounded.
// Users: activation.silu_and_mul (b12x-norm/kernels/silu_and_mul.cu) and gemm.bf16_gemv's fused
//   x load (b12x-gemm/kernels/bf16_gemv.cu, the `_silu` entry points): one definition, so the
//   fused GEMV multiplies W by exactly the bits the standalone op writes.
// Host oracle: b12x_core::testing::silu_mul (the same steps; only expf differs, see there).
#pragma once
#include "b12x/common.cuh"

namespace b12x {

// One vector of y: silu(min(g, L)) * clamp(u, -L, L) in f32, rounded to T. The clamps are written
// as comparisons so a NaN passes through (torch.clamp), where fminf would return L.
template <typename T>
__device__ __forceinline__ Vec16 silu_mul_vec(const Vec16& g, const Vec16& u, float limit) {
  float f_g[8], f_u[8], f_y[8];
  unpack_f32<T>(g, f_g);
  unpack_f32<T>(u, f_u);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float a = f_g[j] > limit ? limit : f_g[j];
    const float b = f_u[j] > limit ? limit : (f_u[j] < -limit ? -limit : f_u[j]);
    // expf (not __expf): within 2 ulp (CUDA C Programming Guide, "Mathematical Functions").
    f_y[j] = __fmul_rn(__fdiv_rn(a, __fadd_rn(1.0f, expf(-a))), b);
  }
  return pack_from_f32<T>(f_y);
}

// One element of silu_mul_vec before its rounding, for kernels that form elements one at a time
// (bf16_gemv's shared fused load). The same operations as silu_mul_vec's loop body, which keeps
// its own copy so activation.silu_and_mul's code stays what was validated: change both or
// neither (gpu_bf16_gemv checks the fused GEMV against that op bit for bit).
__device__ __forceinline__ float silu_mul_f32(float g, float u, float limit) {
  const float a = g > limit ? limit : g;
  const float b = u > limit ? limit : (u < -limit ? -limit : u);
  return __fmul_rn(__fdiv_rn(a, __fadd_rn(1.0f, expf(-a))), b);
}

}  // namespace b12x
