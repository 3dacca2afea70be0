// quant.cuh — the device pieces every quantizer shares (b12x-quant's kernels and the fused
// norm -> quantize epilogue of b12x-norm), so all of them round the same way.
// Spec: spec/formats.md; CPU oracle: b12x_quant::codec / block / layout.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

namespace b12x {

// Two f32 -> E4M3 codes (round to nearest even, saturating to +-448; NaN -> 0x7F): lo in the low
// byte, hi in the high byte. sm_89+ (sm_90a, sm_120a, sm_121a).
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cvt
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

// UE4M3 code of a non-negative u (the E4M3 conversion above; the sign bit stays clear).
__device__ __forceinline__ uint32_t ue4m3(float u) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(u));
  return r & 0xFFu;
}

// The exact value of an E4M3 / UE4M3 code (through f16, which holds every E4M3 value).
__device__ __forceinline__ float ue4m3_value(uint32_t code) {
  uint32_t h2;
  const unsigned short c = (unsigned short)code;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(c));
  return __half2float(__ushort_as_half((unsigned short)(h2 & 0xFFFFu)));
}

// UE8M0 code of ceil_pow2(p) on the f32 bits of p (a non-zero mantissa bumps the exponent field).
__device__ __forceinline__ uint32_t ceil_pow2_code(float p) {
  const uint32_t bits = __float_as_uint(p);
  return (bits >> 23) + ((bits & 0x7FFFFFu) != 0u ? 1u : 0u);
}

// 2^(127 - code) as f32, exactly (code 254 gives the subnormal 2^-127).
__device__ __forceinline__ float pow2_neg_ue8m0(uint32_t code) {
  const uint32_t e = 254u - code;
  return e == 0u ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23);
}

// Byte offset of scale (r, c) in the swizzled 128x4 layout of a [rows, cols] scale matrix,
// cols a multiple of 4 (b12x_quant::layout::swizzled_offset).
__device__ __forceinline__ long long swizzled_offset(int r, int c, int cols) {
  return ((long long)(r >> 7) * (cols >> 2) + (c >> 2)) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (c & 3);
}

// The U chunks of 8 elements one thread takes in the quantizers' flat grids over a
// [rows, chunks] chunk matrix: a CTA covers U * blockDim consecutive chunks and thread t takes
// t, t + blockDim, ... of them (each warp's loads stay coalesced). Indices are 32-bit (the plans
// keep rows * chunks + 2^11 below 2^32). Past the end row == rows.
template <int U>
struct ChunkGrid {
  int row[U];
  int chunk[U];
  __device__ __forceinline__ ChunkGrid(int rows, int chunks) {
    const uint32_t base = blockIdx.x * (blockDim.x * U) + threadIdx.x;
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const uint32_t idx = base + j * blockDim.x;
      const uint32_t r = idx / (uint32_t)chunks;
      row[j] = r < (uint32_t)rows ? (int)r : rows;
      chunk[j] = (int)(idx - r * (uint32_t)chunks);
    }
  }
};

}  // namespace b12x
