// mx.cu — quantization.mxfp8 / quantization.mxfp4: BF16/FP16 rows -> E4M3 or E2M1 codes + UE8M0
//   block scales.   crate: b12x-quant
//   per block of 32 along K: amax = max|x| (any NaN/Inf: scale 0xFF, codes 0; amax 0: scale 0,
//   codes 0); code = ceil_pow2(amax * (1/448 or 1/6)) on the f32 bits;
//   q = encode_satfinite(x * 2^(127-code)). Bit-exact with b12x_quant::block::quantize_mx
//   (ScaleRule::CeilPow2, no amax floor). E4M3 through cvt.rn.satfinite (sm_89+); E2M1 in
//   software on sm_90 (no E2M1 cvt): e2m1x2 of b12x/quant.cuh on bf16x2 / f16x2 pairs of the
//   scaled values (exact: the power-of-two scaling is exact in those types); on sm_120a /
//   sm_121a the hardware cvt.rn.satfinite.e2m1x2.f32 of the exact f32 products (e2m1x2_hw,
//   unvalidated: never run).
// Tensors: x [M, K] bf16|f16 (row stride ldx)   codes [M, K] u8 (E4M3) or [M, K/2] u8 (E2M1
//   pairs, element 2i in the low nibble), row stride ldq bytes
//   scales [M, K/32] u8 row-major (row stride lds) and/or scales_sw: swizzled 128x4 layout of
//   [M, K/32] (see b12x_quant::layout), rows M .. ceil(M/128)*128 written as 0.
// Constraints: K % 32 == 0 (K % 128 == 0 with scales_sw); x rows 16-byte aligned, codes rows
//   8-byte (E4M3) or 4-byte (E2M1) aligned.
// Strategy: 2 lanes per block, 16 elements (two 16-byte loads) per lane, for both formats.
//   U slots per thread (a CTA covers U * blockDim slots, all loads issued first; dense rows
//   address slot i as x[16i], codes[8i or 16i], scales[i/2]; strided rows through ChunkGrid, a
//   separate non-inlined path); amax and "any NaN/Inf" as one unsigned
//   max of the 16-bit magnitudes over the block's lanes (full-warp xor shuffles, every lane
//   present); two 8-byte (E4M3) or 4-byte (E2M1) stores of codes per lane; the block's first
//   lane stores the scale byte(s). Memory bound: 2 B read, ~1.03 (0.53) B written per element.
// Entry points: b12x_mx{fp8,fp4}_t{128,256,512}_u{1,2,4}_{bf16,f16}; b12x_mx_e2m1x2_probe_{bf16,f16}
//   (tests only).   Oracle: b12x_quant::block::quantize_mx.
#include "b12x/common.cuh"
#include "b12x/e2m1.cuh"
#include "b12x/quant.cuh"

#include <type_traits>

struct MxParams {
  const void* x;           // [M, K] bf16|f16
  unsigned char* codes;    // [M, K] e4m3
  unsigned char* scales;   // [M, K/32] ue8m0 row-major, or nullptr
  unsigned char* scales_sw;  // swizzled 128x4 [ceil(M/128)*128, K/32], or nullptr
  long long ldx;           // elements
  long long ldq;           // bytes
  long long lds;           // bytes (row-major scales)
  int rows;                // M
  int rows_sw;             // rows covered by the grid: M, or ceil(M/128)*128 with scales_sw
  int k;                   // K
  int pad;
};
static_assert(sizeof(MxParams) == 72, "mirror of MxParams in src/mx.rs");

namespace b12x {
namespace mx {

// enc(h, i, a, b) for every pair i < 4 of each half h of v, with a, b the pair's f32 products
// x * m (exact: m is a power of two).
template <typename T, typename F>
__device__ __forceinline__ void for_scaled_pairs(const Vec16 (&v)[2], float m, F&& enc) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float f[8];
    unpack_f32<T>(v[h], f);
#pragma unroll
    for (int i = 0; i < 4; ++i) enc(h, i, __fmul_rn(f[2 * i], m), __fmul_rn(f[2 * i + 1], m));
  }
}

// One 16-element unit per lane, its two 16-byte halves v[0], v[1]; a block of 32 is a lane pair
// (unit & 1 == lane & 1). Units past the last row hold zeros. Every lane of the warp gets here,
// so the pair's amax reduction is a full-warp shuffle; the caller's row test only gates the stores.
struct Unit {
  uint32_t code;  // UE8M0 scale of the unit's block of 32
  uint2 out[2];   // E4M3: 8 codes per half; E2M1: 8 nibbles in .x
};
template <typename T, bool kFp4>
__device__ __forceinline__ Unit encode_unit(const Vec16 (&v)[2]) {
  uint32_t bits = abs_max_bits16x2<T>(v[0].w, v[1].w);
  bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, 1));
  const bool finite = bits < HalfBits<T>::kInf;
  Unit u;
  uint32_t& code = u.code;
  uint2 (&out)[2] = u.out;
  code = finite ? 0u : 0xFFu;
  out[0] = out[1] = make_uint2(0u, 0u);
  if (finite && bits != 0u) {
    const float amax = HalfBits<T>::to_f32(bits);
    code = ceil_pow2_code(__fmul_rn(amax, kFp4 ? 1.0f / 6.0f : 1.0f / 448.0f));
    if constexpr (kFp4) {
#if B12X_SM120_FEATURES
      // SM120/SM121: the hardware conversion of the exact f32 products x * 2^(127-code)
      // (e2m1x2_hw; unvalidated, see b12x/quant.cuh).
      for_scaled_pairs<T>(v, pow2_neg_ue8m0(code),
                          [&](int h, int i, float a, float b) { out[h].x |= e2m1x2_hw(a, b) << (8 * i); });
#else
      if constexpr (std::is_same<T, bf16>::value) {
        // x * 2^(127-code) in bf16 is exact (a power-of-two scaling; results below bf16's
        // normal range are far below E2M1's 0.25 and keep their sign), so encode pairs in bf16.
        const uint32_t m2 = pow2_neg_ue8m0_bf16x2(code);
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) out[h].x |= e2m1x2<bf16>(bf16x2_fma(v[h].w[i], m2, 0x80008000u)) << (8 * i);
      } else {
        // f16 input: x * m <= 6 in f32, then to f16 — exact for every |y| >= 2^-14, and smaller
        // values are +-0 in E2M1 either way.
        for_scaled_pairs<T>(v, pow2_neg_ue8m0(code), [&](int h, int i, float a, float b) {
          const __half2 y = __floats2half2_rn(a, b);
          out[h].x |= e2m1x2<fp16>(*reinterpret_cast<const uint32_t*>(&y)) << (8 * i);
        });
      }
#endif
    } else if constexpr (std::is_same<T, bf16>::value) {
      // bf16: the products in bf16x2 (exact, as for E2M1 above; code <= 247 here).
      const uint32_t m2 = pow2_neg_ue8m0_bf16x2(code);
#pragma unroll
      for (int h = 0; h < 2; ++h) out[h] = e4m3_codes8_pow2_bf16(v[h].w, m2);
    } else {
      uint32_t c[2][4];
      for_scaled_pairs<T>(v, pow2_neg_ue8m0(code), [&](int h, int i, float a, float b) { c[h][i] = e4m3x2(a, b); });
#pragma unroll
      for (int h = 0; h < 2; ++h) out[h] = make_uint2(c[h][0] | (c[h][1] << 16), c[h][2] | (c[h][3] << 16));
    }
  }
  return u;
}

// The unit's codes at q (its row's codes + unit * 8 (E2M1) or * 16 (E4M3) bytes).
template <bool kFp4>
__device__ __forceinline__ void store_codes(unsigned char* q, const Unit& u) {
  if constexpr (kFp4) {
    uint32_t* q4 = reinterpret_cast<uint32_t*>(q);
    q4[0] = u.out[0].x;
    q4[1] = u.out[1].x;
  } else {
    uint2* q8 = reinterpret_cast<uint2*>(q);
    q8[0] = u.out[0];
    q8[1] = u.out[1];
  }
}

// U 16-element units per thread over the flat [rows_sw, K/16] unit list (each warp covers 512
// consecutive elements per slot), both halves of every unit loaded through L1 (the second half of
// each 32-byte sector is then a hit), all loads issued before converting any.
// Strided rows: row and unit from ChunkGrid, 64-bit addresses from the row strides.
template <typename T, bool kFp4, int U>
__device__ __noinline__ void quantize_strided(const MxParams& p) {
  const ChunkGrid<U> g(p.rows_sw, p.k >> 4);
  Vec16 v[U][2];
  load_units<T, U>(g, p.x, p.ldx, p.rows, v);
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const Unit u = encode_unit<T, kFp4>(v[j]);
    const int row = g.row[j], unit = g.chunk[j];
    if (row < p.rows) store_codes<kFp4>(p.codes + (long long)row * p.ldq + unit * (kFp4 ? 8 : 16), u);
    if ((unit & 1) == 0 && row < p.rows_sw) {
      const int blk = unit >> 1;
      if (p.scales != nullptr && row < p.rows) p.scales[(long long)row * p.lds + blk] = (unsigned char)u.code;
      if (p.scales_sw != nullptr) p.scales_sw[swizzled_offset(row, blk, p.k >> 5)] = (unsigned char)u.code;
    }
  }
}

// Dense rows (x, codes and row-major scales without row padding): unit i of the flat list is
// x[16i], codes[8i] (E2M1) or [16i] (E4M3), and its block's scale is scales[i / 2] (K/16 is
// even); row and unit are derived only for the swizzled scales. 32-bit indices: the plans keep
// rows * K/8 + 2^11 below 2^32.
template <typename T, bool kFp4, int U>
__device__ __forceinline__ void quantize_dense(const MxParams& p) {
  const uint32_t chunks = (uint32_t)p.k >> 4;
  const uint32_t live = (uint32_t)p.rows * chunks;  // units of rows < M
  const uint32_t base = blockIdx.x * (blockDim.x * U) + threadIdx.x;
  Vec16 v[U][2];
  load_dense<T, U>(p.x, base, live, v);
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const uint32_t i = base + j * blockDim.x;
    const Unit u = encode_unit<T, kFp4>(v[j]);
    if (i < live) store_codes<kFp4>(p.codes + (size_t)i * (kFp4 ? 8 : 16), u);
    if ((i & 1u) == 0u) {
      if (p.scales != nullptr && i < live) p.scales[i >> 1] = (unsigned char)u.code;
      if (p.scales_sw != nullptr) {
        const uint32_t row = i / chunks;
        if (row < (uint32_t)p.rows_sw)
          p.scales_sw[swizzled_offset((int)row, (int)((i - row * chunks) >> 1), p.k >> 5)] = (unsigned char)u.code;
      }
    }
  }
}

template <typename T, bool kFp4, int U>
__device__ __forceinline__ void quantize(const MxParams& p) {
  const long long chunks = p.k >> 4;
  const bool dense =
      p.ldx == p.k && p.ldq == chunks * (kFp4 ? 8 : 16) && (p.scales == nullptr || p.lds == chunks / 2);
  if (dense) {
    quantize_dense<T, kFp4, U>(p);
  } else {
    quantize_strided<T, kFp4, U>(p);
  }
}

}  // namespace mx
}  // namespace b12x

#define B12X_MX(FMT, FP4, THREADS, U, T, NAME)                                                       \
  extern "C" __global__ void __launch_bounds__(THREADS) b12x_mx##FMT##_t##THREADS##_u##U##_##NAME(   \
      const __grid_constant__ MxParams p) {                                                          \
    b12x::mx::quantize<T, FP4, U>(p);                                                                \
  }
#define B12X_MX_U(FMT, FP4, U, T, NAME)                                                              \
  B12X_MX(FMT, FP4, 128, U, T, NAME)                                                                 \
  B12X_MX(FMT, FP4, 256, U, T, NAME)                                                                 \
  B12X_MX(FMT, FP4, 512, U, T, NAME)
#define B12X_MX_T(FMT, FP4, T, NAME)                                                                 \
  B12X_MX_U(FMT, FP4, 1, T, NAME)                                                                    \
  B12X_MX_U(FMT, FP4, 2, T, NAME)                                                                    \
  B12X_MX_U(FMT, FP4, 4, T, NAME)
#define B12X_MX_ALL(FMT, FP4)                                                                        \
  B12X_MX_T(FMT, FP4, b12x::bf16, bf16)                                                              \
  B12X_MX_T(FMT, FP4, b12x::fp16, f16)

B12X_MX_ALL(fp8, false)
B12X_MX_ALL(fp4, true)

// Probe of the packed E2M1 encoder (tests only): out[i] = e2m1x2<W>(in[i]) for i < n.
struct E2m1ProbeParams {
  const uint32_t* in;
  unsigned char* out;
  long long n;
};
#define B12X_E2M1_PROBE(W, NAME)                                                                     \
  extern "C" __global__ void __launch_bounds__(256) b12x_mx_e2m1x2_probe_##NAME(                    \
      const __grid_constant__ E2m1ProbeParams p) {                                                   \
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;                            \
    if (i < p.n) p.out[i] = (unsigned char)b12x::e2m1x2<W>(p.in[i]);                                 \
  }
B12X_E2M1_PROBE(b12x::bf16, bf16)
B12X_E2M1_PROBE(b12x::fp16, f16)
