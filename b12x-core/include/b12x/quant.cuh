// quant.cuh — the device pieces every quantizer shares (b12x-quant's kernels and the fused
// norm -> quantize epilogue of b12x-norm), so all of them round the same way.
// Spec: spec/formats.md; CPU oracle: b12x_quant::codec / block / layout.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "b12x/common.cuh"
#include "b12x/e2m1.cuh"

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

// Two E4M3 codes (low byte first) -> their exact values as f16x2 (f16 holds every E4M3 value).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(unsigned short codes) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(codes));
  return h2;
}

// The exact value of an E4M3 / UE4M3 code (through f16).
__device__ __forceinline__ float ue4m3_value(uint32_t code) {
  const uint32_t h2 = e4m3x2_to_f16x2((unsigned short)code);
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

// The value a UE8M0 scale code stands for, exactly: 2^(code - 127) (code 0: the subnormal 2^-127;
// 0xFF: NaN), as b12x_quant::codec::ue8m0_decode.
__device__ __forceinline__ float ue8m0_value(uint32_t code) {
  if (code == 0xFFu) return __uint_as_float(0x7FC00000u);
  return code == 0u ? __uint_as_float(0x00400000u) : __uint_as_float(code << 23);
}

// The value of an E2M1 code (the low 4 bits), exactly, as b12x_quant::codec::e2m1_decode:
// magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} (m < 2 the subnormal m / 2, else (1 + (m & 1) / 2) *
// 2^(m / 2 - 1)), bit 3 the sign (0x8 is -0).
__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const uint32_t m = code & 7u;
  const float v = m < 2u ? 0.5f * (float)m : ((m & 1u) ? 1.5f : 1.0f) * __uint_as_float(((m >> 1) + 126u) << 23);
  return (code & 8u) ? -v : v;
}

// Byte offset of scale (r, c) in the swizzled 128x4 layout of a [rows, cols] scale matrix,
// cols a multiple of 4 (b12x_quant::layout::swizzled_offset).
__device__ __forceinline__ long long swizzled_offset(int r, int c, int cols) {
  return ((long long)(r >> 7) * (cols >> 2) + (c >> 2)) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (c & 3);
}

// ---- block amax on the 16-bit input bits ---------------------------------------------------
// bf16 and f16 bit patterns with the sign cleared order like their magnitudes, and Inf/NaN sort
// above every finite value, so one unsigned max over the 16-bit magnitudes gives both the block's
// amax and whether it holds a non-finite element (VIMNMX.U16x2 on sm_90 and sm_120).

// The largest 16-bit magnitude (sign cleared) of the 8 halves of v.
__device__ __forceinline__ uint32_t abs_max_bits16(const uint32_t (&w)[4]) {
  const uint32_t m = 0x7FFF7FFFu;
  const uint32_t a = __vmaxu2(__vmaxu2(w[0] & m, w[1] & m), __vmaxu2(w[2] & m, w[3] & m));
  return max(a & 0xFFFFu, a >> 16);
}

// The same for the 16 halves of two vectors through the 16-bit float max with absolute inputs
// (`max.NaN.xorsign.abs`, HMNMX2 on sm_90 and sm_120): seven pairwise maxima of |a|, |b| keep the
// largest magnitude bit for bit (a max returns one of its inputs; the xorsign only touches the
// sign, cleared at the end), and any NaN turns the result into the canonical NaN 0x7FFF, which
// like every Inf/NaN magnitude sorts at or above HalfBits<T>::kInf: the same amax and the same
// finiteness as abs_max_bits16 over both vectors, in 11 instructions instead of 18.
template <typename T>
__device__ __forceinline__ uint32_t hmax_abs2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  } else {
    asm("max.NaN.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
}
template <typename T>
__device__ __forceinline__ uint32_t abs_max_bits16x2(const uint32_t (&v)[4], const uint32_t (&u)[4]) {
  const uint32_t a = hmax_abs2<T>(hmax_abs2<T>(v[0], v[1]), hmax_abs2<T>(v[2], v[3]));
  const uint32_t b = hmax_abs2<T>(hmax_abs2<T>(u[0], u[1]), hmax_abs2<T>(u[2], u[3]));
  const uint32_t m = hmax_abs2<T>(a, b) & 0x7FFF7FFFu;
  return max(m & 0xFFFFu, m >> 16);
}

// Magnitude bits at and above which a bf16 / f16 is Inf or NaN.
template <typename T>
struct HalfBits;
template <>
struct HalfBits<__nv_bfloat16> {
  static constexpr uint32_t kInf = 0x7F80u;
  static __device__ __forceinline__ float to_f32(uint32_t h) { return __uint_as_float(h << 16); }
};
template <>
struct HalfBits<__half> {
  static constexpr uint32_t kInf = 0x7C00u;
  static __device__ __forceinline__ float to_f32(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }
};

// ---- packed E2M1 of two 16-bit values ------------------------------------------------------
// The E2M1 codes of the two halves of y2 (bf16x2 or f16x2: element 0 in the low half), element 0
// in the low nibble of the result's low byte, element 1 in its high nibble; bits 8..31 zero.
// The same rule as e2m1_rne (b12x/e2m1.cuh) evaluated in the 16-bit type, two at a time:
// a = min(|y|, 6); code = min(rne(2a), rne(a) + 2, rne(a/2) + 4), rne(t) the low bits of
// t + 1.5 * 2^p (p = 7 for bf16, 10 for f16: its ulp is 1 on [0, 12]). Exact for every value the
// halves hold (no NaN: the quantizers zero non-finite blocks before encoding).
template <typename W>
__device__ __forceinline__ uint32_t e2m1x2(uint32_t y2);

__device__ __forceinline__ uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t f16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

__device__ __forceinline__ uint32_t e2m1x2_finish(uint32_t y2, uint32_t b1, uint32_t b2, uint32_t b3, uint32_t k2) {
  uint32_t c = __vminu2(__vminu2(b1, b2), b3) - k2;  // every half >= k: no borrow between halves
  c |= (y2 >> 12) & 0x00080008u;
  return (c | (c >> 12)) & 0xFFu;
}

template <>
__device__ __forceinline__ uint32_t e2m1x2<__nv_bfloat16>(uint32_t y2) {
  // bf16: 6 = 0x40C0, 2 = 0x4000, 1 = 0x3F80, 0.5 = 0x3F00; 192 = 1.5 * 2^7 = 0x4340.
  const uint32_t a = __vminu2(y2 & 0x7FFF7FFFu, 0x40C040C0u);
  const uint32_t b1 = bf16x2_fma(a, 0x40004000u, 0x43404340u);  // 2a + 192
  const uint32_t b2 = bf16x2_fma(a, 0x3F803F80u, 0x43424342u);  // a + 194
  const uint32_t b3 = bf16x2_fma(a, 0x3F003F00u, 0x43444344u);  // a/2 + 196
  return e2m1x2_finish(y2, b1, b2, b3, 0x43404340u);
}

template <>
__device__ __forceinline__ uint32_t e2m1x2<__half>(uint32_t y2) {
  // f16: 6 = 0x4600, 2 = 0x4000, 1 = 0x3C00, 0.5 = 0x3800; 1536 = 1.5 * 2^10 = 0x6600.
  const uint32_t a = __vminu2(y2 & 0x7FFF7FFFu, 0x46004600u);
  const uint32_t b1 = f16x2_fma(a, 0x40004000u, 0x66006600u);  // 2a + 1536
  const uint32_t b2 = f16x2_fma(a, 0x3C003C00u, 0x66026602u);  // a + 1538
  const uint32_t b3 = f16x2_fma(a, 0x38003800u, 0x66046604u);  // a/2 + 1540
  return e2m1x2_finish(y2, b1, b2, b3, 0x66006600u);
}

// ---- hardware E2M1 (SM120 / SM121 only) ------------------------------------------------------
#if B12X_SM120_FEATURES
// The E2M1 codes of two f32 values, lo in the low nibble and hi in the high one (bits 8..31
// zero): cvt.rn.satfinite.e2m1x2.f32, the conversion CUDA's __nv_cvt_float2_to_fp4x2 uses on
// these targets, whose host path our software encoder equals on every f32 (b12x-quant's
// cuda_host_reference test). Round to nearest even, saturating at +-6, the sign kept on zero.
// Not for NaN (the quantizers never pass one). UNVALIDATED: compiled for sm_120a / sm_121a on
// every build, never run (no SM120 hardware); the GPU suites check it bit for bit there.
__device__ __forceinline__ uint32_t e2m1x2_hw(float lo, float hi) {
  unsigned short r;
  asm("{ .reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, %2, %1; mov.b16 %0, {t, 0}; }" : "=h"(r) : "f"(lo), "f"(hi));
  return r;
}
#endif

// ---- NVFP4 codes of one half-block ---------------------------------------------------------
// The sign bits of the 8 16-bit values in w (bf16 or f16; element i in half i % 2 of w[i / 2],
// its sign in bit 15 of the half) at bit 4i + 3: the sign bits of
// their 8 E2M1 nibbles (element i in nibble i). Four byte permutes with sign replication (a
// selector nibble with bit 3 set copies the selected byte's top bit into all 8 bits) gather
// elements 0, 2, 4, 6 and 1, 3, 5, 7 into one byte each, and one LOP3 keeps bit 3 of the even
// bytes and bit 7 of the odd ones — 5 instructions for 8 signs instead of 2 per element.
__device__ __forceinline__ uint32_t nibble_signs(const uint32_t (&w)[4]) {
  uint32_t a, b, even, odd;
  asm("prmt.b32 %0, %1, %2, 0xFBD9;" : "=r"(a) : "r"(w[0]), "r"(w[1]));  // bytes: e0 e2 e1 e3
  asm("prmt.b32 %0, %1, %2, 0xFBD9;" : "=r"(b) : "r"(w[2]), "r"(w[3]));  // bytes: e4 e6 e5 e7
  asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(even) : "r"(a), "r"(b));     // e0 e2 e4 e6
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(odd) : "r"(a), "r"(b));      // e1 e3 e5 e7
  return (even & 0x08080808u) | (odd & 0x80808080u);
}

// The 8 nibbles of one half-block: c[i] = 1.5 * 2^23 + code_i (the bits e2m1_mag_bits_not_nan
// returns, code_i <= 7) and the signs of the 16-bit inputs w (nibble_signs). Every c[i] carries
// the same magic M = 0x4B400000, so sum(c[i] 16^i) = sum(code_i 16^i) + M * 0x11111111 modulo
// 2^32, and the codes' sum has no carries between nibbles: one shift-add per nibble and one
// three-input add (the signs minus the constant) instead of masking every code first.
__device__ __forceinline__ uint32_t pack_e2m1_nibbles(const uint32_t (&c)[8], const uint32_t (&w)[4]) {
  constexpr uint32_t kMagic = 0x4B400000u * 0x11111111u;  // modulo 2^32
  uint32_t m = c[0];
#pragma unroll
  for (int i = 1; i < 8; ++i) m += c[i] << (4 * i);
  return m + (nibble_signs(w) - kMagic);
}

// The E2M1 codes of f[i] * r (element i in nibble i) for a finite r = 1 / (f32(s) * (1 / enc)) of
// the block (b12x_quant::block::quantize_nvfp4); f are the values of the 16-bit inputs w.
// SM120/SM121 convert pairs in hardware (e2m1x2_hw), other targets in software — the magnitudes
// per element, the signs of all 8 at once from w (r > 0, so f[i] * r has the sign of f[i], also
// when it is +-0).
__device__ __forceinline__ uint32_t nvfp4_codes8_finite_r(const uint32_t (&w)[4], const float (&f)[8], float r) {
#if B12X_SM120_FEATURES
  uint32_t q = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) q |= e2m1x2_hw(__fmul_rn(f[2 * i], r), __fmul_rn(f[2 * i + 1], r)) << (8 * i);
  return q;
#else
  uint32_t c[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) c[i] = e2m1_mag_bits_not_nan(__fmul_rn(f[i], r));
  return pack_e2m1_nibbles(c, w);
#endif
}

// The codes of a block whose largest product is small: every |f[i]| * r < 7 (the caller checks
// RN(amax * r) < 7, which RN's monotonicity extends to every element). f holds the magnitudes
// (the 16-bit words with their signs cleared, widened); the signs come from w as in
// nvfp4_codes8_finite_r. Below 7 the E2M1 rule needs no clamp — rne(t / 2) + 4 <= 7 and the min
// of the three candidates is the code — and t = |f| r >= 0 needs no fabs: one instruction per
// element fewer than nvfp4_codes8_finite_r, the same codes. SM120/SM121: the hardware path.
__device__ __forceinline__ uint32_t nvfp4_codes8_below7(const uint32_t (&w)[4], const float (&f)[8], float r) {
#if B12X_SM120_FEATURES
  return nvfp4_codes8_finite_r(w, f, r);
#else
  uint32_t c[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) c[i] = e2m1_mag_bits_below7(__fmul_rn(f[i], r));
  return pack_e2m1_nibbles(c, w);
#endif
}

// The 8 16-bit values of v with their signs cleared (bf16/f16 magnitudes), opaque to the
// compiler: the block amax (max_bits16) and the widened magnitudes of nvfp4_codes8_below7 then
// share one mask per word, instead of ptxas re-deriving a shifted mask per element.
__device__ __forceinline__ Vec16 abs16(const Vec16& v) {
  Vec16 a;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a.w[i] = v.w[i] & 0x7FFF7FFFu;
    asm volatile("" : "+r"(a.w[i]));
  }
  return a;
}

// The largest 16-bit value of a, whose signs are clear (abs16): abs_max_bits16 without the mask.
__device__ __forceinline__ uint32_t max_bits16(const uint32_t (&a)[4]) {
  const uint32_t m = __vmaxu2(__vmaxu2(a[0], a[1]), __vmaxu2(a[2], a[3]));
  return max(m & 0xFFFFu, m >> 16);
}

// ORs into q the same codes for any other r (Inf: a huge given enc over a tiny block; NaN):
// element by element, as the codec (0 * Inf is NaN, code 7).
__device__ __forceinline__ void nvfp4_codes8_any_r(const float (&f)[8], float r, uint32_t& q) {
#pragma unroll
  for (int i = 0; i < 8; ++i) q |= e2m1_rne(__fmul_rn(f[i], r)) << (4 * i);
}

// ORs into q the E2M1 codes of f[i] * r (element i in nibble i): nvfp4_codes8_finite_r when r is
// finite, nvfp4_codes8_any_r otherwise.
__device__ __forceinline__ void nvfp4_codes8(const uint32_t (&w)[4], const float (&f)[8], float r, uint32_t& q) {
  if (r <= 3.4028235e38f) {
    q |= nvfp4_codes8_finite_r(w, f, r);
  } else {
    nvfp4_codes8_any_r(f, r, q);
  }
}

// ---- NVFP4 block-scale reciprocals -------------------------------------------------------
// s_rcp[c] = RN(1 / RN(f32(c) * RN(1 / enc))) for every UE4M3 code c: the r that quantizes a
// block with scale code c (b12x_quant::block::quantize_nvfp4), one IEEE reciprocal per code
// instead of one per block. Every thread of the CTA takes part; the caller synchronizes before
// reading (entries 0 and 0x7F, zero and NaN scales, are never used).
__device__ __forceinline__ void nvfp4_rcp_table(float enc, float* s_rcp) {
  const float inv_enc = __fdiv_rn(1.0f, enc);
  for (int c = threadIdx.x; c < 128; c += blockDim.x) s_rcp[c] = __frcp_rn(__fmul_rn(ue4m3_value(c), inv_enc));
}

// ---- exact division by a block scale -----------------------------------------------------
// x / s rounded to nearest even, as IEEE division, given r = RN(1 / s) (one reciprocal per
// block), s > 0: q0 = RN(x r) is within 1 ulp of x / s, the remainder x - s q0 is exact in one
// FMA, and RN(q0 + rem r) is the correctly rounded quotient (Markstein's theorem; round to
// nearest, no overflow). The remainder is a multiple of ulp(s) ulp(q0), so it is exact (if
// subnormal) when |x / s| >= 2^-11 and s >= 2^-90; smaller quotients come out within 1 ulp, and
// every value below 2^-10 is +-0 in E4M3 anyway. The remainder is formed negated,
// n = s q0 - x, and added as -n: the same values, but for x = +-0 the sum of zeros
// (-n) r + q0 = -0 + q0 keeps x's sign (rem r + q0 = +0 + -0 would give +0), so no sign fix is
// needed (three instructions).
__device__ __forceinline__ float div_by_scale(float x, float s, float r) {
  const float q0 = __fmul_rn(x, r);
  const float n = __fmaf_rn(q0, s, -x);
  return __fmaf_rn(-n, r, q0);
}

// a / 6 for a >= 0 rounded as IEEE division (the NVFP4 scale step amax / 6): div_by_scale when
// the quotient is large enough for its remainder to be exact, the full division below (tiny blocks).
__device__ __forceinline__ float div_by_6(float a) {
  return a >= 0x1p-100f ? div_by_scale(a, 6.0f, 1.0f / 6.0f) : __fdiv_rn(a, 6.0f);
}

// The U slots one thread takes in the quantizers' flat grids over a [rows, slots] matrix (a slot
// is 16 elements of a row: unit u covers elements [16u, 16u + 16)): a CTA covers U * blockDim
// consecutive slots and thread t takes t, t + blockDim, ... of them (each warp's loads stay
// coalesced: 512 consecutive elements per slot). Indices are 32-bit (the plans keep
// rows * K/8 + 2^11 below 2^32, so rows * K/16 fits too). Past the end row == rows.
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

// One slot: the 16 elements at src() as two 16-byte halves when live, else zeros (the address
// is formed only for a live slot).
template <typename T, typename Src>
__device__ __forceinline__ void load_slot(bool live, Src&& src, Vec16 (&v)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) v[h].w[0] = v[h].w[1] = v[h].w[2] = v[h].w[3] = 0u;
  if (live) {
    const T* p = src();
    v[0] = ld_global_v16(p);
    v[1] = ld_global_v16(p + 8);
  }
}

// The dense quantizers' loads: slot j of this thread is flat unit base + j * blockDim.x, i.e.
// x[16 i ..] of a [rows, K] tensor without row padding, live below `live` units.
template <typename T, int U>
__device__ __forceinline__ void load_dense(const void* x, uint32_t base, uint32_t live, Vec16 (&v)[U][2]) {
  const T* xt = reinterpret_cast<const T*>(x);
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const uint32_t i = base + j * blockDim.x;
    load_slot<T>(i < live, [&] { return xt + (size_t)i * 16; }, v[j]);
  }
}

// Loads the U 16-element slots of g from x ([rows, K] of T, row stride ldx elements) as two
// 16-byte halves each, all loads issued before any use. Through L1 (not L1::no_allocate): the
// two halves of a lane share 32-byte sectors, so the second load of each pair is an L1 hit.
// Slots past the last row read nothing and hold zeros.
template <typename T, int U>
__device__ __forceinline__ void load_units(const ChunkGrid<U>& g, const void* x, long long ldx, int rows,
                                           Vec16 (&v)[U][2]) {
#pragma unroll
  for (int j = 0; j < U; ++j)
    load_slot<T>(
        g.row[j] < rows,
        [&] { return reinterpret_cast<const T*>(x) + (long long)g.row[j] * ldx + g.chunk[j] * 16; }, v[j]);
}

// ---- E4M3 of a quotient by a block FP8 scale, in two instructions -------------------------
// e4m3(x / s) for the block FP8 f32 scales s = RN(max(amax, 1e-4) * RN(1/448)) < 2^64, where x
// is a bf16 or f16 value with |x| <= amax (the group's max): q = RN(x r + RN(x rlo)) with the
// round-down reciprocal r = RD(1 / s) and rlo = RN((1 - r s) r) >= 0 (1 - r s is exact in one
// FMA). q is not always the IEEE quotient (it differs in the last bit for ~4 in 10^5 pairs), but
// it is within ~2^-47 of x / s, and x / s lies at least that far from every E4M3 rounding
// boundary whenever it is not on one, so e4m3(q) == e4m3(RN(x / s)). The proof is exhaustive:
// `b12x-quant/tests/block_fp8_division.rs` checks every bf16 and every f16 pair (x, amax).
// Both product terms carry x's sign (r, rlo >= 0), so x = -0 gives -0. Above 2^64, rlo could be
// subnormal and lose the bits that matter: block_fp8_f32_codes takes the three-instruction division.
__device__ __forceinline__ float div_by_block_scale(float x, float r, float rlo) {
  return __fmaf_rn(x, r, __fmul_rn(x, rlo));
}

// The E4M3 codes of 8 values, packed in order (e4m3x2 pairs, the lower index in the low byte).
__device__ __forceinline__ uint2 e4m3_codes8(const float (&q)[8]) {
  uint32_t c[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) c[i] = e4m3x2(q[2 * i], q[2 * i + 1]);
  return make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
}

// 2^(127 - code) as bf16 bits in both halves, for code <= 253 (the exponent field 254 - code >= 1;
// code 254 would be the subnormal 2^-127 = 0x0040, also handled).
__device__ __forceinline__ uint32_t pow2_neg_ue8m0_bf16x2(uint32_t code) {
  const uint32_t e = 254u - code;
  const uint32_t h = e == 0u ? 0x0040u : (e << 7);
  return h | (h << 16);
}

// The E4M3 codes of the 8 bf16 values in w times the power of two m2 (bf16x2 bits, both halves),
// packed in order. The product is taken in bf16x2, which is exact whenever it is a normal bf16
// (a power-of-two scaling), i.e. the same value as the f32 product; below bf16's normal range
// (|x m| < 2^-126) it may round, but every such value is +-0 in E4M3 either way and keeps its
// sign (the -0 addend leaves +-0 products as they are). One bf16x2 instruction per pair instead
// of an f32 multiply per element.
__device__ __forceinline__ uint2 e4m3_codes8_pow2_bf16(const uint32_t (&w)[4], uint32_t m2) {
  uint32_t c[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t p = bf16x2_fma(w[i], m2, 0x80008000u);
    c[i] = e4m3x2(__uint_as_float(p << 16), __uint_as_float(p & 0xFFFF0000u));
  }
  return make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
}

// Block FP8 (DeepSeek 1xG) with UE8M0 scales: the E4M3 codes of the 8 values f of one lane, given
// the group's pr = max(amax, 1e-4) / 448: s = 2^code, code = ceil_pow2(pr), and x / s is the
// exact product x * 2^(127 - code) (s >= 2^-22). s_code / s_f32 receive the scale.
__device__ __forceinline__ uint2 block_fp8_ue8m0_codes(const float (&f)[8], float pr, uint32_t& s_code,
                                                       float& s_f32) {
  s_code = ceil_pow2_code(pr);
  s_f32 = __uint_as_float(s_code << 23);
  const float r = __uint_as_float((254u - s_code) << 23);
  float q[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) q[i] = __fmul_rn(f[i], r);
  return e4m3_codes8(q);
}

// RD(1 / s) for a normal s with 2^-125 < s < 2^125: exactly __frcp_rd(s), whose fast path this is
// (rcp.approx, then one Newton step with directed roundings: e = RP(1 - s y) is its
// -RM(s y - 1), r = RM(y e + y)) without the range test and call-out that guard its other
// inputs — 3 instructions instead of 10 per block in the block FP8 quantizers.
__device__ __forceinline__ float rcp_rd_normal(float s) {
  float y, e, r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(s));
  asm("fma.rp.f32 %0, %1, %2, 0f3F800000;" : "=f"(e) : "f"(-s), "f"(y));
  asm("fma.rm.f32 %0, %1, %2, %2;" : "=f"(r) : "f"(e), "f"(y));
  return r;
}

// Block FP8 with f32 scales s = pr: the E4M3 codes of a lane's NV vectors v of 8 values of T,
// as e4m3(IEEE x / s): div_by_block_scale below 2^64 (every real group), div_by_scale above. One
// branch per lane around all NV vectors, so each path is one straight-line block (a branch per
// vector split the lane's work and was slower).
template <typename T, int NV>
__device__ __forceinline__ void block_fp8_f32_codes(float pr, const Vec16 (&v)[NV], uint2 (&out)[NV]) {
  if (pr < 0x1p64f) {
    const float r = rcp_rd_normal(pr);  // pr >= 1e-4 / 448 > 2^-23: normal
    const float rlo = __fmul_rn(__fmaf_rn(-r, pr, 1.0f), r);
#pragma unroll
    for (int h = 0; h < NV; ++h) {
      float f[8], q[8];
      unpack_f32<T>(v[h], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = div_by_block_scale(f[i], r, rlo);
      out[h] = e4m3_codes8(q);
    }
  } else {
    const float r = __frcp_rn(pr);
#pragma unroll
    for (int h = 0; h < NV; ++h) {
      float f[8], q[8];
      unpack_f32<T>(v[h], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = div_by_scale(f[i], pr, r);
      out[h] = e4m3_codes8(q);
    }
  }
}

}  // namespace b12x
