// quant_row.cuh — the quantizing row epilogue of the b12x-norm row kernels.      crate: b12x-norm
//   A row of y (already rounded to bf16/f16) held as 16-byte vectors, thread tid owning vectors
//   tid + k * blockDim.x, is quantized in registers to MXFP8 (E4M3 + UE8M0 per 32), block FP8
//   (E4M3 + f32 or UE8M0 per 1x128) or NVFP4 (E2M1 pairs + UE4M3 per 16, given encode scale),
//   bit for bit as b12x-quant's standalone quantizers (the same helpers of b12x/quant.cuh).
// Used by: rmsnorm.cu (norm.rmsnorm_quant), silu_and_mul.cu (activation.silu_and_mul).
#pragma once

#include <stdint.h>

#include <type_traits>

#include "b12x/common.cuh"
#include "b12x/e2m1.cuh"
#include "b12x/quant.cuh"

namespace b12x {

// Quantized outputs of a row kernel (kQuant); 0 = plain y.
constexpr int kQuantNone = 0;
constexpr int kQuantMxfp8 = 1;         // E4M3 + UE8M0 per 32
constexpr int kQuantFp8B128F32 = 2;    // E4M3 + f32 scale per 1x128 (DeepSeek)
constexpr int kQuantFp8B128Ue8m0 = 3;  // E4M3 + UE8M0 scale per 1x128
constexpr int kQuantNvfp4 = 4;         // E2M1 pairs + UE4M3 per 16, given f32 encode scale

// Where one row's quantized output goes: its codes and scales (row bases, computed once per row)
// and, for NVFP4, the encode scale (read once per row) and the table of block-scale reciprocals.
struct QuantRow {
  unsigned char* codes;  // row `row` of codes
  unsigned char* scales; // row `row` of scales (bytes; f32 scales are 4 each)
  float enc;             // NVFP4: the given encode scale *p.enc
  const float* rcp;      // NVFP4: shared table, rcp[c] = RN(1 / (f32(c) * RN(1 / enc))) (nvfp4_rcp_table)
};

// 16-byte vectors per scale block of a quantized output: MXFP8 32 elements, block FP8 128,
// NVFP4 16.
template <int kQuant>
constexpr uint32_t kBlockVecs = kQuant == kQuantMxfp8 ? 4 : kQuant == kQuantNvfp4 ? 2 : 16;

// The E4M3 outputs of quantize_vec (MXFP8, block FP8), given the block's reduced amax bits.
template <int kQuant, typename T, int NV>
__device__ __forceinline__ void quantize_fp8_vec(const QuantRow& qr, uint32_t i, const Vec16 (&yv)[NV], bool live,
                                                 bool swapped, uint32_t bits, bool finite, float amax) {
  uint2 out[NV];
#pragma unroll
  for (int h = 0; h < NV; ++h) out[h] = make_uint2(0u, 0u);
  uint32_t code = 0xFFu;
  float s_f32 = __uint_as_float(0x7FC00000u);
  if (finite) {
    if constexpr (kQuant == kQuantMxfp8) {
      code = 0u;
      if (bits != 0u) {
        code = ceil_pow2_code(__fmul_rn(amax, 1.0f / 448.0f));
        if constexpr (std::is_same<T, bf16>::value) {
          // bf16: the product in bf16x2 (code <= 247 for a finite bf16 amax: m is normal).
          const uint32_t m2 = pow2_neg_ue8m0_bf16x2(code);
#pragma unroll
          for (int h = 0; h < NV; ++h) out[h] = e4m3_codes8_pow2_bf16(yv[h].w, m2);
        } else {
          const float m = pow2_neg_ue8m0(code);
#pragma unroll
          for (int h = 0; h < NV; ++h) {
            float f[8];
            unpack_f32<T>(yv[h], f);
            uint32_t c[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) c[j] = e4m3x2(__fmul_rn(f[2 * j], m), __fmul_rn(f[2 * j + 1], m));
            out[h].x = c[0] | (c[1] << 16);
            out[h].y = c[2] | (c[3] << 16);
          }
        }
      }
    } else {
      const float pr = __fmul_rn(fmaxf(amax, 1e-4f), 1.0f / 448.0f);
      if constexpr (kQuant == kQuantFp8B128Ue8m0 && std::is_same<T, bf16>::value) {
        // bf16: x * 2^(127 - code) in bf16x2 (block_fp8_ue8m0_codes' product; 2^-22 <= s <= 2^120,
        // so the factor is normal).
        code = ceil_pow2_code(pr);
        const uint32_t m2 = pow2_neg_ue8m0_bf16x2(code);
#pragma unroll
        for (int h = 0; h < NV; ++h) out[h] = e4m3_codes8_pow2_bf16(yv[h].w, m2);
      } else if constexpr (kQuant == kQuantFp8B128Ue8m0) {
#pragma unroll
        for (int h = 0; h < NV; ++h) {
          float f[8];
          unpack_f32<T>(yv[h], f);
          out[h] = block_fp8_ue8m0_codes(f, pr, code, s_f32);
        }
      } else {
        s_f32 = pr;
        block_fp8_f32_codes<T, NV>(pr, yv, out);
      }
    }
  }
  if (!live) return;
  // One store per vector: the plan promises 8-byte aligned code rows only.
#pragma unroll
  for (int h = 0; h < NV; ++h) *reinterpret_cast<uint2*>(qr.codes + (i + (h ^ swapped)) * 8) = out[h];
  constexpr uint32_t B = kBlockVecs<kQuant>;
  if ((i & (B - 1)) == 0) {
    if constexpr (kQuant == kQuantFp8B128F32) {
      reinterpret_cast<float*>(qr.scales)[i / B] = s_f32;
    } else {
      qr.scales[i / B] = (unsigned char)code;
    }
  }
}

// Quantizes the NV consecutive vectors i .. i + NV - 1 of its row (NV = 1, or 2 for the paired
// layout: 16 elements per lane; `swapped`: yv[0] is vector i + 1 and yv[1] vector i) — the
// outputs y already rounded to T, packed in yv. The lanes holding one block are NV apart
// (kBlockVecs / NV of them; paired, the even and the odd lanes each form their own groups).
// Every lane of the CTA calls this for each of its slots (past the row end: zeros, or for NVFP4
// whole dead blocks; `live` false) so the block reduction is a full-warp shuffle; `live` gates the stores. Exactly the math of
// b12x-quant's mx / fp8_block / nvfp4 kernels on the rounded y, through the same helpers
// (b12x/quant.cuh).
template <int kQuant, typename T, int NV>
__device__ __forceinline__ void quantize_vec(const QuantRow& qr, uint32_t i, const Vec16 (&yv)[NV], bool live,
                                             bool swapped = false) {
  static_assert(NV == 1 || NV == 2, "one or two vectors per lane");
  // NVFP4 keeps the magnitudes: its usual blocks encode them (nvfp4_codes8_below7).
  Vec16 ya[NV];
  uint32_t bits;
  if constexpr (kQuant == kQuantNvfp4) {
#pragma unroll
    for (int h = 0; h < NV; ++h) ya[h] = abs16(yv[h]);
    bits = max_bits16(ya[0].w);
    if constexpr (NV == 2) bits = max(bits, max_bits16(ya[1].w));
  } else {
    if constexpr (NV == 2) {
      bits = abs_max_bits16x2<T>(yv[0].w, yv[1].w);
    } else {
      bits = abs_max_bits16(yv[0].w);
    }
  }
#pragma unroll
  for (uint32_t o = NV; o < kBlockVecs<kQuant>; o <<= 1) bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, o));
  const bool finite = bits < HalfBits<T>::kInf;
  const float amax = HalfBits<T>::to_f32(bits);
  if constexpr (kQuant == kQuantNvfp4) {
    // Exactly quantization.nvfp4 (given mode): s = ue4m3(enc * (amax / 6)); r = 1 / (f32(s) * (1 / enc)),
    // looked up per scale code; as its encode_block, one branch per block: RN(amax r) < 7 (the
    // usual block) takes nvfp4_codes8_below7, anything else (saturated or subnormal scales,
    // code 0 / 0x7F: r = Inf / NaN) the general nvfp4_codes8; NaN/Inf blocks (scale 0x7F) and
    // zero scales (code 0) then have their codes cleared.
    const float a = finite ? amax : 0.0f;
    const uint32_t code = finite ? ue4m3(__fmul_rn(qr.enc, div_by_6(a))) : 0x7Fu;
    const float r = qr.rcp[code];
    uint32_t q[NV];
#pragma unroll
    for (int h = 0; h < NV; ++h) q[h] = 0u;
    if (__fmul_rn(a, r) < 7.0f) {
#pragma unroll
      for (int h = 0; h < NV; ++h) {
        float f[8];
        unpack_f32<T>(ya[h], f);
        q[h] = nvfp4_codes8_below7(yv[h].w, f, r);
      }
    } else {
#pragma unroll
      for (int h = 0; h < NV; ++h) {
        float f[8];
        unpack_f32<T>(yv[h], f);
        nvfp4_codes8(yv[h].w, f, r, q[h]);
      }
    }
    const bool keep = finite && code != 0u;
#pragma unroll
    for (int h = 0; h < NV; ++h) q[h] = keep ? q[h] : 0u;
    if (!live) return;
    // One store per vector: the plan promises 4-byte aligned code rows only.
#pragma unroll
    for (int h = 0; h < NV; ++h) *reinterpret_cast<uint32_t*>(qr.codes + (i + (h ^ swapped)) * 4) = q[h];
    if ((i & (kBlockVecs<kQuant> - 1)) == 0) qr.scales[i / kBlockVecs<kQuant>] = (unsigned char)code;
  } else {
    quantize_fp8_vec<kQuant, T, NV>(qr, i, yv, live, swapped, bits, finite, amax);
  }
}

// The quantizing epilogue of one row: y_of(k, i) is the rounded y vector of slot k (vector i
// = tid + k * blockDim.x of the row; zeros past the row end, see rmsnorm_row). With two or more
// slots (kPaired) the two lanes of an even/odd neighbour pair swap one vector of slots k and
// k + 1, so each lane quantizes two consecutive vectors (16 elements per block slot) and the block
// reductions and scales are per 16 elements instead of per 8 (as the flat quantizers). Every lane
// quantizes (zeros or dead blocks past the row end) so the block reductions are full-warp.
template <int kQuant, typename TOut, int kVecsPerThread, typename YOf>
__device__ __forceinline__ void quantize_row(const QuantRow& qr, int nvec, const YOf& y_of) {
  static_assert(VecN<TOut>::value == 8, "quantized outputs take bf16/f16 rows");
  const auto vidx = [](int k) -> int { return threadIdx.x + k * blockDim.x; };
  if constexpr (kVecsPerThread >= 2) {
    const bool odd = threadIdx.x & 1;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; k += 2) {
      const Vec16 y0 = y_of(k, vidx(k)), y1 = y_of(k + 1, vidx(k + 1));
      // An even lane keeps its slot-k vector and takes its odd neighbour's (the next vector); the
      // odd lane keeps its slot-(k+1) vector and takes the even lane's (the previous one).
      // yv[0] is the lane's own vector, yv[1] the neighbour's: vectors i + odd and i + 1 - odd.
      Vec16 yv[2];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        yv[0].w[w] = odd ? y1.w[w] : y0.w[w];
        yv[1].w[w] = __shfl_xor_sync(0xFFFFFFFFu, odd ? y0.w[w] : y1.w[w], 1);
      }
      const int i = odd ? vidx(k + 1) - 1 : vidx(k);  // even: nvec is even (D is a multiple of 16)
      quantize_vec<kQuant, TOut, 2>(qr, (uint32_t)i, yv, i < nvec, odd);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int i = vidx(k);
      const Vec16 yv[1] = {y_of(k, i)};
      quantize_vec<kQuant, TOut, 1>(qr, (uint32_t)i, yv, i < nvec);
    }
  }
}

}  // namespace b12x
