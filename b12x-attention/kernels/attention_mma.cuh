// attention_mma.cuh — what the attention kernels share about their tensor-core arithmetic.
//                                                                       crate: b12x-attention
//   MmaOf<T>: the m16n8k16 MMA with f32 accumulators for the element type T (bf16 or f16) and
//   the packing of two f32 values into one T x 2 operand register; the base-2 constants and the
//   lazy running maximum of the online softmax.
#pragma once
#include "b12x/common.cuh"
#include "b12x/mma.cuh"

namespace b12x {

constexpr float kLn2 = 0.6931471805599453f;
constexpr float kLog2e = 1.4426950408889634f;

// Largest log2 of a probability before an online softmax's running maximum moves: a row's
// maximum moves only when a block's exceeds it by more than this (or it was -inf), so
// probabilities stay <= 2^8 (exact after the final division by l) and O is rescaled rarely.
constexpr float kLazyLog2 = 8.0f;

// 2^x with denormal results flushed to zero (one MUFU.EX2; exp2f adds a denormal-range fixup).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <typename T>
struct MmaOf;
template <>
struct MmaOf<bf16> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_m16n8k16_bf16_f32(d, a, b);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};
template <>
struct MmaOf<fp16> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_m16n8k16_f16_f32(d, a, b);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

}  // namespace b12x
