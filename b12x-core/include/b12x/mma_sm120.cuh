// mma_sm120.cuh — the block-scaled warp MMAs of sm_120a / sm_121a (RTX 50xx, RTX PRO 6000, DGX
// Spark) and where their operands live: fragment and scale-factor index functions (host and
// device: the CPU suite checks them against the PTX ISA's formulas, b12x-gemm/tests/
// sm120_fragments.rs) and the mma.sync wrappers (device, SM120 targets only; CI checks their SASS,
// QMMA.SF / OMMA.SF, in the built cubins). UNVALIDATED on hardware: we have no SM120 GPU; the
// probe kernels of b12x-gemm/kernels/bsmma_probe.cu run these MMAs against the CPU oracle there.
//
// Sources (PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions"): "Matrix Fragments for
// mma.m16n8k32" and "... m16n8k64", "Block Scaling for mma.sync", "mma" (alternate floating
// point types with block scaling); cross-checked against CUTLASS's cute/atom/mma_traits_sm120.hpp
// layouts. Notation: lane in [0, 32), g = lane / 4 (groupID), t = lane % 4 (threadID_in_group).
//
//   m16n8k32 kind::mxf8f6f4 (one element per byte; E2M1 sits in bits [5:2] of its byte):
//     A [16 x 32]: register r (0..3), byte j:   m = g + 8 (r & 1),   k = 4t + j + 16 (r >> 1)
//     B [32 x 8]:  register r (0..1), byte j:   k = 4t + j + 16 r,   n = g
//   m16n8k64 kind::mxf4 / mxf4nvf4 (two E2M1 per byte, element j in bits [4j + 3 : 4j]):
//     A [16 x 64]: register r (0..3), nibble j: m = g + 8 (r & 1),   k = 8t + j + 32 (r >> 1)
//     B [64 x 8]:  register r (0..1), nibble j: k = 8t + j + 32 r,   n = g
//   C, D [16 x 8] f32, element i (0..3):        m = g + 8 (i >> 1),  n = 2t + (i & 1)
//   Scale factors, S = 1 / 2 / 4 per row of A and column of B (scale_vec::1X / 2X / 4X), chunk s
//   covering k in [s K / S, (s + 1) K / S); with all four selectors {byte-id, thread-id} zero
//   (the only form these wrappers emit, as CUTLASS and llama.cpp): SF_A[m][s] is byte s of the
//   scale-a register of lane 4 (m % 8) + m / 8, SF_B[s][n] byte s of the scale-b register of lane
//   4 n; the other lanes' scale registers are ignored.
#pragma once
#include <stdint.h>

#include "hostdevice.cuh"

namespace b12x {
namespace bsmma {

// A (row, column) of a fragment's matrix: (m, k) for A, (k, n) for B, (m, n) for C/D.
struct Coord {
  int row;
  int col;
};

// m16n8k32 (kind::mxf8f6f4): byte j of A register r of `lane`.
__host__ __device__ constexpr Coord k32_a(int lane, int r, int j) {
  return Coord{(lane >> 2) + 8 * (r & 1), 4 * (lane & 3) + j + 16 * (r >> 1)};
}
// m16n8k32: byte j of B register r of `lane`, as (k, n).
__host__ __device__ constexpr Coord k32_b(int lane, int r, int j) {
  return Coord{4 * (lane & 3) + j + 16 * r, lane >> 2};
}
// m16n8k64 (kind::mxf4 / mxf4nvf4): nibble j of A register r of `lane`.
__host__ __device__ constexpr Coord k64_a(int lane, int r, int j) {
  return Coord{(lane >> 2) + 8 * (r & 1), 8 * (lane & 3) + j + 32 * (r >> 1)};
}
// m16n8k64: nibble j of B register r of `lane`, as (k, n).
__host__ __device__ constexpr Coord k64_b(int lane, int r, int j) {
  return Coord{8 * (lane & 3) + j + 32 * r, lane >> 2};
}
// C and D (both shapes): element i of `lane`.
__host__ __device__ constexpr Coord cd(int lane, int i) {
  return Coord{(lane >> 2) + 8 * (i >> 1), 2 * (lane & 3) + (i & 1)};
}
// The lane whose scale-a register supplies row m's scale factors (selectors zero).
__host__ __device__ constexpr int sfa_lane(int m) { return 4 * (m & 7) + (m >> 3); }
// The lane whose scale-b register supplies column n's scale factors (selectors zero).
__host__ __device__ constexpr int sfb_lane(int n) { return 4 * n; }
// The rows (of A, m) and columns (of B, n) whose scale factors `lane` supplies; -1: none.
__host__ __device__ constexpr int sfa_row_of(int lane) { return (lane & 3) < 2 ? (lane >> 2) + 8 * (lane & 1) : -1; }
__host__ __device__ constexpr int sfb_col_of(int lane) { return (lane & 3) == 0 ? lane >> 2 : -1; }
// An E2M1 code (low 4 bits) in its kind::mxf8f6f4 byte container (bits [5:2], padding zero).
__host__ __device__ constexpr uint32_t e2m1_container(uint32_t code) { return (code & 0xFu) << 2; }

}  // namespace bsmma

#if defined(__CUDACC__)
namespace bsmma {

// ---- the same products without the instructions (any target) ---------------------------------
// The portable definition of the MMAs below, computed from the same registers: each lane fetches
// the A rows and B columns of its four D elements from the lanes that hold them (the placement
// above) with shuffles, decodes every element and scale exactly (E4M3 / E2M1 codes, UE8M0 /
// UE4M3 scales) and accumulates the products in f32, k in order. The SM120 kernels build with it
// on other targets, so that a GPU without block-scaled MMAs (the H200) runs and checks their data
// movement — fragment gathers, scale registers, epilogues — against the CPU oracle; only the
// instruction itself stays unvalidated. Slow (~100 instructions per lane and MMA): for tests.
// kKind: 0 = m16n8k32 E4M3 x E4M3, UE8M0 1X; 1 = m16n8k64 E2M1 x E2M1, UE4M3 4X (NVFP4);
// 2 = m16n8k64 E2M1 x E2M1, UE8M0 2X (MXFP4); 3 = m16n8k32 E2M1 (byte containers) x E4M3, UE8M0 1X
// (W4A8: MXFP4 weight x MXFP8 activation).

__device__ inline float e4m3_value_emu(uint32_t c) {
  const uint32_t e = (c >> 3) & 15u, m = c & 7u;
  float v = e == 15u && m == 7u ? __int_as_float(0x7FC00000) : e == 0u ? float(m) * 0.001953125f  // 2^-9
                                                                       : float(8u + m) * exp2f(float(int(e) - 10));
  return (c & 0x80u) ? -v : v;
}
__device__ inline float e2m1_value_emu(uint32_t c) {
  const uint32_t m = c & 7u;
  const float v = m < 2u ? 0.5f * float(m) : float(2u + (m & 1u)) * exp2f(float(int(m >> 1) - 2));
  return (c & 8u) ? -v : v;
}
__device__ inline float ue8m0_value_emu(uint32_t b) {
  return b == 255u ? __int_as_float(0x7FC00000) : exp2f(float(int(b) - 127));
}

template <int kKind>
__device__ inline void mma_bs_emulated(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                       const float (&c)[4], uint32_t sfa, uint32_t sfb) {
  constexpr bool kK64 = kKind == 1 || kKind == 2;
  constexpr int kChunkK = kKind == 1 ? 16 : 32;  // k per scale
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Scale registers of rows g, g + 8 (lanes 4g, 4g + 1) and columns 2t, 2t + 1 (lanes 8t, 8t + 4).
  const uint32_t sa[2] = {__shfl_sync(0xffffffffu, sfa, 4 * g), __shfl_sync(0xffffffffu, sfa, 4 * g + 1)};
  const uint32_t sb[2] = {__shfl_sync(0xffffffffu, sfb, 8 * t), __shfl_sync(0xffffffffu, sfb, 8 * t + 4)};
  auto scale = [&](uint32_t reg, int chunk) {
    const uint32_t byte = (reg >> (8 * chunk)) & 0xFFu;
    return kKind == 1 ? e4m3_value_emu(byte & 0x7Fu) : ue8m0_value_emu(byte);
  };
  float acc[4] = {c[0], c[1], c[2], c[3]};
  for (int tp = 0; tp < 4; ++tp) {
    uint32_t ar[4], br[2][2];
#pragma unroll
    for (int r = 0; r < 4; ++r) ar[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + tp);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 2; ++r) br[h][r] = __shfl_sync(0xffffffffu, b[r], 4 * (2 * t + h) + tp);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int rs = r & 1, kh = r >> 1;  // A register r: row g + 8 rs, k half kh (B register kh)
      // FP4 (8 nibbles per register): a loop, or a kernel's unrolled k loop holding dozens of
      // these grows past what the compiler unrolls (the 128 x 256 NVFP4 kernel's accumulators then
      // went to the stack, indexed by a loop counter).
#pragma unroll(kK64 ? 1 : 4)
      for (int j = 0; j < (kK64 ? 8 : 4); ++j) {
        const int k = kK64 ? 8 * tp + j + 32 * kh : 4 * tp + j + 16 * kh;
        const int chunk = k / kChunkK;
        const float av = (kK64           ? e2m1_value_emu(ar[r] >> (4 * j))
                          : kKind == 3 ? e2m1_value_emu((ar[r] >> (8 * j + 2)) & 0xFu)
                                       : e4m3_value_emu((ar[r] >> (8 * j)) & 0xFFu)) *
                         scale(sa[rs], chunk);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float bv = (kK64 ? e2m1_value_emu(br[h][kh] >> (4 * j)) : e4m3_value_emu((br[h][kh] >> (8 * j)) & 0xFFu)) *
                           scale(sb[h], chunk);
          acc[2 * rs + h] = fmaf(av, bv, acc[2 * rs + h]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] = acc[i];
}

}  // namespace bsmma
#endif

#if defined(__CUDACC__) && B12X_SM120_FEATURES
namespace bsmma {

// void NAME(d, a, b, c, sfa, sfb): D = (A * SF_A) (B * SF_B) + C by the mma.sync INSTR, all four
// selectors {byte-id, thread-id} zero.
#define B12X_BSMMA_WRAPPER(NAME, INSTR)                                                                     \
  __device__ __forceinline__ void NAME(float(&d)[4], const uint32_t(&a)[4], const uint32_t(&b)[2],          \
                                       const float(&c)[4], uint32_t sfa, uint32_t sfb) {                    \
    asm volatile(INSTR                                                                                      \
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13}, %14, {%16, %16}, %15," \
                 " {%16, %16};"                                                                             \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), \
                   "f"(c[2]), "f"(c[3]), "r"(sfa), "r"(sfb), "h"((uint16_t)0));                             \
  }

// m16n8k32, E4M3 x E4M3, one UE8M0 per 32 of K (byte 0 of the scale registers).
B12X_BSMMA_WRAPPER(mma_mxf8_e4m3,
                   "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0")
// The same with E2M1 x E2M1 (each code in its byte container, e2m1_container): FP4 operands at the
// FP8 shape (kind::mxf8f6f4 takes mixed types too).
B12X_BSMMA_WRAPPER(mma_mxf8_e2m1,
                   "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0")
// m16n8k32, E2M1 (byte containers) x E4M3, one UE8M0 per 32 of K: W4A8 (MXFP4 weight as A, MXFP8
// activation as B).
B12X_BSMMA_WRAPPER(mma_mxf8_e2m1_e4m3,
                   "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e4m3.f32.ue8m0")
// m16n8k64, packed E2M1 x E2M1, UE8M0 per 32 of K (MXFP4: bytes 0, 1 of the scale registers).
// Written as kind::mxf4nvf4 scale_vec::2X (CUTLASS's form; the same SASS as kind::mxf4).
B12X_BSMMA_WRAPPER(mma_mxf4,
                   "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0")
// m16n8k64, packed E2M1 x E2M1, UE4M3 per 16 of K (NVFP4: bytes 0..3 of the scale registers; bit
// 7 of each zero).
B12X_BSMMA_WRAPPER(mma_nvf4,
                   "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3")
#undef B12X_BSMMA_WRAPPER

}  // namespace bsmma
#endif

}  // namespace b12x
