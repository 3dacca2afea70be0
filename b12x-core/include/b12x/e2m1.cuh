// e2m1.cuh — E2M1 (FP4) encoding in software, shared by the quantizer kernels (b12x-quant, the
// fused norm -> quantize of b12x-norm) and the host
// reference test (tests/cuda_ref/fp_ref.cu compiles it for the CPU and checks it against CUDA's
// __nv_cvt_float_to_fp4 on the dense sweep): SM90 has no E2M1 cvt instruction.
#pragma once
#include <math.h>
#include <stdint.h>

#if !defined(__CUDACC__) && !defined(__host__)
#define __host__
#define __device__
#define __forceinline__ inline
#endif

namespace b12x {

// E2M1 code of y in the low 4 bits: round to nearest on {0, .5, 1, 1.5, 2, 3, 4, 6} with ties to
// the even code (0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2, 2.5->2, 3.5->4, 5->4), saturating at 6;
// the sign kept (also on zero: -0 -> 0x8); NaN -> 0x7 (what CUDA's host conversion returns).
__host__ __device__ __forceinline__ uint32_t e2m1_rne(float y) {
  if (isnan(y)) return 0x7u;
  const uint32_t s = signbit(y) ? 0x8u : 0u;
  const float a = fabsf(y);
  uint32_t c;
  if (a <= 0.25f) c = 0u;
  else if (a < 0.75f) c = 1u;
  else if (a <= 1.25f) c = 2u;
  else if (a < 1.75f) c = 3u;
  else if (a <= 2.5f) c = 4u;
  else if (a < 3.5f) c = 5u;
  else if (a <= 5.0f) c = 6u;
  else c = 7u;
  return s | c;
}

}  // namespace b12x
