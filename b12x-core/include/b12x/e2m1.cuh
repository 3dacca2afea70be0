// e2m1.cuh — E2M1 (FP4) encoding in software, shared by the quantizer kernels (b12x-quant, the
// fused norm -> quantize of b12x-norm) and the host
// reference test (tests/cuda_ref/fp_ref.cu compiles it for the CPU and checks it against CUDA's
// __nv_cvt_float_to_fp4 on the dense sweep): SM90 has no E2M1 cvt instruction.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hostdevice.cuh"

namespace b12x {

// E2M1 code of y in the low 4 bits: round to nearest on {0, .5, 1, 1.5, 2, 3, 4, 6} with ties to
// the even code (0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2, 2.5->2, 3.5->4, 5->4), saturating at 6;
// the sign kept (also on zero: -0 -> 0x8); NaN -> 0x7 (what CUDA's host conversion returns).
//
// Branch-free: with a = min(|y|, 6), the code is min(rne(2a), rne(a) + 2, rne(a/2) + 4) —
// each term is the code on one binade range ([0, 2) step 0.5, [2, 4) step 1, [4, 6] step 2) and
// is >= the right one elsewhere (rne is monotone), and on each range the code's parity is the
// parity of the rounded integer, so ties go to the even code; clamping at 6 saturates (code 7).
// rne(t) for 0 <= t <= 12 is the low bits of t + 1.5 * 2^23 (one rounding: 2a, a and a/2 are
// exact). Every f32 input is checked against CUDA's __nv_cvt_float_to_fp4 by b12x-quant's
// cuda_host_reference test.
// The magnitude part without the clamp, for 0 <= t < 7: the bits of 1.5 * 2^23 + code(t)
// (0x4B400000 + a code 0..7: bits 3..21 are zero), so `& 7` is the code and a left shift by 10
// or more leaves only the code. Below 7, rne(t / 2) + 4 <= 7, so the min of the three candidates
// is already the code (the NVFP4 quantizers' usual blocks, whose products all stay below 7, call
// it directly). b12x-quant's cuda_host_reference test checks it against __nv_cvt_float_to_fp4 on
// every f32 in [0, 7), and the 0x4B400000 + 0..7 form that pack_e2m1_nibbles in b12x/quant.cuh
// adds up.
__host__ __device__ __forceinline__ uint32_t e2m1_mag_bits_below7(float t) {
  const float magic = 12582912.0f;  // 1.5 * 2^23: its ulp is 1, its low 22 bits zero
  uint32_t b1, b2, b3;
  {
    const float t1 = t * 2.0f + magic;
    const float t2 = t + (magic + 2.0f);
    const float t3 = t * 0.5f + (magic + 4.0f);
    memcpy(&b1, &t1, 4);
    memcpy(&b2, &t2, 4);
    memcpy(&b3, &t3, 4);
  }
  const uint32_t c = b1 < b2 ? b1 : b2;
  return c < b3 ? c : b3;
}

// The magnitude part of any non-NaN y, for callers that place the signs themselves: the same
// bits for a = min(|y|, 6) (the clamp saturates at code 7).
__host__ __device__ __forceinline__ uint32_t e2m1_mag_bits_not_nan(float y) {
  return e2m1_mag_bits_below7(fminf(fabsf(y), 6.0f));
}

// The signed code: the magnitude's code and y's sign in bit 3.
__host__ __device__ __forceinline__ uint32_t e2m1_rne_not_nan(float y) {
  uint32_t ybits;
  memcpy(&ybits, &y, 4);
  // bit 3: the sign (ybits >> 28 < 16); one LOP3
  return (e2m1_mag_bits_not_nan(y) & 0x7u) | ((ybits >> 28) & ~0x7u);
}

__host__ __device__ __forceinline__ uint32_t e2m1_rne(float y) { return isnan(y) ? 0x7u : e2m1_rne_not_nan(y); }

}  // namespace b12x
