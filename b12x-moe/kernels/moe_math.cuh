// moe_math.cuh — moe.fused_moe's element math, shared by its simple and decode kernels.  crate: b12x-moe
//   moe_act<ACT>(g, u, L): the expert activation on FC1's BF16 outputs taken to f32 (SiLU-gated
//     with DeepSeek's limit, gpt-oss's SwiGLU-OAI, ReLU^2), the SFU's exp and reciprocal.
//   mxfp8_qdq_block(x): b12x-quant's MXFP8 quantize-then-dequantize of 32 values in place.
//   nvfp4_qdq_block<kDivEnc>(x, enc): b12x-quant's NVFP4 quantize-then-dequantize of 16 values
//     with encode scale enc; kDivEnc = false leaves out the final division by enc (the values
//     then are e2m1 * UE4M3 scale, exact in BF16: the decode path divides its dot products
//     instead).
// Oracle: src/fused_moe/reference.rs (activate, act_operand).
#pragma once
#include "b12x/common.cuh"
#include "b12x/e2m1.cuh"
#include "b12x/quant.cuh"

namespace b12x {

constexpr int kActSilu = 0;
constexpr int kActSwigluOai = 1;
constexpr int kActRelu2 = 2;

// 2^x and 1 / x by the SFU (ex2.approx.ftz, rcp.approx.ftz: relative errors ~2^-22, a few f32
// ulp). 2^x of a large x is +Inf and 1 / Inf is 0, so a sigmoid of a very negative argument is 0;
// .ftz flushes subnormal results, so SiLU is -0 for g in about (-88.7, -87.3) where precise math
// gave ~-1e-36 u (SwiGLU-OAI: gg in about (-52.1, -51.3)).
__device__ __forceinline__ float moe_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float moe_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// 1 / (1 + e^-z) with the SFU's 2^x and reciprocal.
__device__ __forceinline__ float moe_sigmoid(float z) {
  return moe_rcp(1.0f + moe_ex2(z * -1.4426950408889634f));
}

// Session 65: the SFU's exp and reciprocal (~10 instructions per value) instead of the precise
// expf and IEEE division (~60 with their slow paths) — the activation can run in FC1's epilogue
// on SM90's wgmma tiles (PlanOptions::fused_activation), where every instruction is time the
// tensor cores wait, and act_rows is compute-heavy too. Its error (a few f32 ulp) is far inside
// the BF16 rounding that follows; the oracle (f64) is unchanged and every path of the op
// (simple, decode, grouped, fused or not) uses this one function, so they agree bit for bit
// with each other.
template <int ACT>
__device__ __forceinline__ float moe_act(float g, float u, float limit) {
  if constexpr (ACT == kActSilu) {
    // silu(min(g, L)) * clamp(u, -L, L); the clamps as comparisons, so a NaN passes through.
    const float a = g > limit ? limit : g;
    const float b = u > limit ? limit : (u < -limit ? -limit : u);
    return (a * moe_sigmoid(a)) * b;
  } else if constexpr (ACT == kActSwigluOai) {
    const float gg = g > limit ? limit : g;
    const float uu = u > limit ? limit : (u < -limit ? -limit : u);
    return (uu + 1.0f) * (gg * moe_sigmoid(1.702f * gg));
  } else {
    const float r = g > 0.0f ? g : 0.0f;
    return r * r;
  }
}

// Two f32 rounded to a bf16x2 word (lo in the low half).
__device__ __forceinline__ uint32_t moe_pack_bf16x2(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

// The activation chosen at run time (the decode path's epilogue, outside any hot loop).
__device__ __forceinline__ float moe_act_rt(int act, float g, float u, float limit) {
  if (act == kActSilu) return moe_act<kActSilu>(g, u, limit);
  if (act == kActSwigluOai) return moe_act<kActSwigluOai>(g, u, limit);
  return moe_act<kActRelu2>(g, u, limit);
}

// max |x[i]| over x[0, N) into `amax`; false when the block holds NaN or Inf (b12x-quant's
// finite_amax: such a block gets a NaN scale).
template <int N>
__device__ __forceinline__ bool finite_amax(const float* x, float& amax) {
  amax = 0.0f;
  bool finite = true;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    finite = finite && isfinite(x[i]);
    amax = fmaxf(amax, fabsf(x[i]));
  }
  return finite;
}

// MXFP8 (E4M3, UE8M0 per 32, the CeilPow2 rule): code = ceil_pow2(amax * (1/448)),
// q = e4m3(x * 2^(127 - code)), x^ = q * 2^(code - 127); a block holding NaN or Inf becomes NaN,
// an all-zero one zeros.
__device__ __forceinline__ void mxfp8_qdq_block(float* x) {
  float amax;
  const bool finite = finite_amax<32>(x, amax);
  if (!finite || amax == 0.0f) {
#pragma unroll
    for (int i = 0; i < 32; ++i) x[i] = finite ? 0.0f : __uint_as_float(0x7FC00000u);
    return;
  }
  const float p = amax * (1.0f / 448.0f);
  const uint32_t code = p == 0.0f ? 0u : ceil_pow2_code(p);
  const float m = pow2_neg_ue8m0(code), s = ue8m0_value(code);
#pragma unroll
  for (int i = 0; i < 32; ++i) x[i] = ue4m3_value(e4m3x2(x[i] * m, 0.0f) & 0xFFu) * s;
}

// NVFP4 with encode scale `enc`: s = ue4m3(enc * (amax / 6)); a zero scale (f32(s) == 0) gives
// zeros, else r = 1 / (f32(s) * (1 / enc)), q = e2m1(x * r), x^ = (q * f32(s)) / enc (kDivEnc) or
// q * f32(s); a block holding NaN or Inf becomes NaN.
template <bool kDivEnc>
__device__ __forceinline__ void nvfp4_qdq_block(float* x, float enc) {
  float amax;
  if (!finite_amax<16>(x, amax)) {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = __uint_as_float(0x7FC00000u);
    return;
  }
  const float fs = ue4m3_value(ue4m3(enc * (amax / 6.0f)));
  if (fs == 0.0f) {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = 0.0f;
    return;
  }
  const float r = 1.0f / (fs * (1.0f / enc));
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float v = e2m1_value(e2m1_rne(x[i] * r)) * fs;
    x[i] = kDivEnc ? v / enc : v;
  }
}

}  // namespace b12x
