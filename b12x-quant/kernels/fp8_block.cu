// fp8_block.cu — quantization.fp8_block: BF16/FP16 rows -> E4M3 codes + one scale per 1xG group
//   (DeepSeek-style activations, G in {32, 64, 128}).   crate: b12x-quant
//   per group: amax = max(max|x|, 1e-4); p = amax * (1/448); s = p (f32 scales) or
//   2^code with code = ceil_pow2(p) on the f32 bits (UE8M0 scales); q = e4m3_satfinite(x / s)
//   (IEEE division). NaN/Inf in a group: scale NaN (f32 0x7FC00000 / UE8M0 0xFF), codes 0.
//   Bit-exact with b12x_quant::block::quantize_block_fp8 with tile (1, G).
// Tensors: x [M, K] bf16|f16 (row stride ldx)   codes [M, K] u8 (row stride ldq bytes)
//   scales [M, K/G] f32 or u8 (row stride lds elements).
// Constraints: K % G == 0; x rows 16-byte aligned, codes rows 8-byte aligned.
// Strategy: G/16 lanes per group, 16 elements (two 16-byte loads) per lane, U units per thread
//   (ChunkGrid: all loads issued first); amax and finiteness by
//   xor shuffles within the group's lanes; cvt.rn.satfinite.e4m3x2 (sm_89+).
// Entry points: b12x_fp8_block_g{32,64,128}_{f32,ue8m0}_t{128,256,512}_u{1,2,4}_{bf16,f16}.
//   Oracle: b12x_quant::block::quantize_block_fp8.
#include "b12x/common.cuh"
#include "b12x/quant.cuh"

struct Fp8BlockParams {
  const void* x;           // [M, K] bf16|f16
  unsigned char* codes;    // [M, K]
  void* scales;            // [M, K/G] f32 or u8
  long long ldx;           // elements
  long long ldq;           // bytes
  long long lds;           // elements of the scale type
  int rows;                // M
  int k;                   // K
};
static_assert(sizeof(Fp8BlockParams) == 56, "mirror of Fp8BlockParams in src/fp8_block.rs");

namespace b12x {
namespace fp8_block {

// One 16-element unit (row, unit) per lane, its two 16-byte halves v[0], v[1] (zeros past the
// end); a group is G/16 consecutive lanes. Every lane of the warp gets here, so the group's amax
// reduction is a full-warp xor shuffle; the row only gates the stores.
template <typename T, int G, bool kUe8m0>
__device__ __forceinline__ void quantize_unit(const Fp8BlockParams& p, const Vec16 (&v)[2], int row, int unit) {
  constexpr int L = G / 16;  // lanes per group
  uint32_t bits = abs_max_bits16x2<T>(v[0].w, v[1].w);
#pragma unroll
  for (int o = 1; o < L; o <<= 1) bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, o));
  uint2 out[2] = {make_uint2(0u, 0u), make_uint2(0u, 0u)};
  float s_f32 = __uint_as_float(0x7FC00000u);
  uint32_t s_code = 0xFFu;
  if (bits < HalfBits<T>::kInf) {
    const float pr = __fmul_rn(fmaxf(HalfBits<T>::to_f32(bits), 1e-4f), 1.0f / 448.0f);
    if constexpr (kUe8m0 && std::is_same<T, bf16>::value) {
      // bf16: the products x * 2^(127 - code) in bf16x2 (2^-22 <= s <= 2^120: a normal factor).
      s_code = ceil_pow2_code(pr);
      const uint32_t m2 = pow2_neg_ue8m0_bf16x2(s_code);
#pragma unroll
      for (int h = 0; h < 2; ++h) out[h] = e4m3_codes8_pow2_bf16(v[h].w, m2);
    } else if constexpr (kUe8m0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float f[8];
        unpack_f32<T>(v[h], f);
        out[h] = block_fp8_ue8m0_codes(f, pr, s_code, s_f32);
      }
    } else {
      s_f32 = pr;
      block_fp8_f32_codes<T, 2>(pr, v, out);
    }
  }
  if (row >= p.rows) return;
  uint2* q = reinterpret_cast<uint2*>(p.codes + (long long)row * p.ldq + unit * 16);
  q[0] = out[0];
  q[1] = out[1];
  if ((unit & (L - 1)) == 0) {
    const long long at = (long long)row * p.lds + unit / L;
    if (kUe8m0) {
      reinterpret_cast<unsigned char*>(p.scales)[at] = (unsigned char)s_code;
    } else {
      reinterpret_cast<float*>(p.scales)[at] = s_f32;
    }
  }
}

// U 16-element units per thread (ChunkGrid over [rows, K/16]), both halves of every unit loaded
// through L1 (the second half of each 32-byte sector is then a hit), all loads issued before any
// conversion; a group's lanes stay together (blockDim and K/16 are multiples of G/16, so a group
// is all live or all past the end); every lane runs every j (zeros past the end) so the
// shuffles see a converged warp.
template <typename T, int G, bool kUe8m0, int U>
__device__ __forceinline__ void quantize(const Fp8BlockParams& p) {
  const ChunkGrid<U> g(p.rows, p.k >> 4);
  Vec16 v[U][2];
  load_units<T, U>(g, p.x, p.ldx, p.rows, v);
#pragma unroll
  for (int j = 0; j < U; ++j) quantize_unit<T, G, kUe8m0>(p, v[j], g.row[j], g.chunk[j]);
}

}  // namespace fp8_block
}  // namespace b12x

#define B12X_FP8_BLOCK(G, SNAME, UE8M0, THREADS, U, T, NAME)                                         \
  extern "C" __global__ void __launch_bounds__(THREADS)                                              \
      b12x_fp8_block_g##G##_##SNAME##_t##THREADS##_u##U##_##NAME(const __grid_constant__ Fp8BlockParams p) { \
    b12x::fp8_block::quantize<T, G, UE8M0, U>(p);                                                    \
  }
#define B12X_FP8_BLOCK_U(G, SNAME, UE8M0, U, T, NAME)                                                \
  B12X_FP8_BLOCK(G, SNAME, UE8M0, 128, U, T, NAME)                                                   \
  B12X_FP8_BLOCK(G, SNAME, UE8M0, 256, U, T, NAME)                                                   \
  B12X_FP8_BLOCK(G, SNAME, UE8M0, 512, U, T, NAME)
#define B12X_FP8_BLOCK_T(G, SNAME, UE8M0, T, NAME)                                                   \
  B12X_FP8_BLOCK_U(G, SNAME, UE8M0, 1, T, NAME)                                                      \
  B12X_FP8_BLOCK_U(G, SNAME, UE8M0, 2, T, NAME)                                                      \
  B12X_FP8_BLOCK_U(G, SNAME, UE8M0, 4, T, NAME)
#define B12X_FP8_BLOCK_S(G, T, NAME)                                                                 \
  B12X_FP8_BLOCK_T(G, f32, false, T, NAME)                                                           \
  B12X_FP8_BLOCK_T(G, ue8m0, true, T, NAME)
#define B12X_FP8_BLOCK_G(T, NAME)                                                                    \
  B12X_FP8_BLOCK_S(32, T, NAME)                                                                      \
  B12X_FP8_BLOCK_S(64, T, NAME)                                                                      \
  B12X_FP8_BLOCK_S(128, T, NAME)

B12X_FP8_BLOCK_G(b12x::bf16, bf16)
B12X_FP8_BLOCK_G(b12x::fp16, f16)
