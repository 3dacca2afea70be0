// blockscaled_gemv.cu — gemm.blockscaled, decode path (M <= 16): FP4 weights x BF16 activations
// (W4A16).                                                                       crate: b12x-gemm
//   y[m,n] = out_scale * sum_k x[m,k] * W[n,k] (+ bias[n])   (f32 accumulate, bias added in f32,
//   one rounding to TOut), W = E2M1 code * block scale (NVFP4: UE4M3 per 16 k; MXFP4: UE8M0 per 32)
// Tensors: codes [N, K/2] bytes (pack_weight layout v2: row-major, bit-permuted 32-bit words),
//   scales in the swizzled 128x4 layout (b12x_quant::layout), x [M, K] bf16 (row stride ldx),
//   bias [N] bf16|f32, y [M, N] TOut (row stride ldy).
// Constraints: K % 32 == 0 (the codes' rows are whole 16-byte lines for the TMA); M <= 8 * NT.
// Strategy (src/blockscaled/README.md): one to three persistent CTAs per SM walk an even share of
//   the flat (row block of 128 rows, KB x 256-k) unit list (stream-K). A producer warp keeps a ring
//   of stages in flight (stage 0 requested first, the rest kStaggerNs later): per 256-k box the
//   codes as one TMA box (128 rows x 128 bytes, 128-byte swizzle, zero past N and K), the unit's
//   swizzled scale tiles as one bulk copy, and x (8 NT tokens x 256 k) staged with cp.async by the
//   warp's 32 lanes in the order the consumers read it (zero past M and K; the stage's full barrier
//   counts the TMA bytes and the 32 lanes' cp.async arrivals). Eight consumer warps own 16 rows
//   each: lane (g, t) takes the 64 contiguous k 64t .. 64t + 63 of a box (16-byte chunks 2t and 2t
//   + 1 of its rows' box lines: conflict free under the swizzle), turns each adjacent pair of codes
//   of a layout-v2 word into a bf16x2 of code * 2^-126 with rotates and masks (9 ALU instructions
//   per word, b12x/fp4_dequant.cuh), scales it by the block's BF16 scale (exact) and feeds swap-AB
//   mma.sync m16n8k16 (16 weight rows x 8 tokens) with x's bf16 pairs as staged. The MMA sums over
//   k, so this K permutation, applied to both operands, changes only the summation order. Row
//   blocks shared by neighbouring CTAs are merged by the last warp to arrive, in CTA order (tagged
//   counters, no memset): bitwise reproducible.
// Entry points: b12x_bsgemv_w4a16_{nvfp4,mxfp4}_nt{1,2}_kb{1,2}_{bf16,f16,f32}out (BsGemvParams).
// Oracle: src/blockscaled/reference.rs.
#include "b12x/common.cuh"
#include "b12x/fp4_dequant.cuh"
#include "b12x/mma.cuh"
#include "b12x/mma_sm120.cuh"
#include "b12x/wgmma_sm90.cuh"
#include "b12x/quant.cuh"
#include "b12x/bsgemv_decode.cuh"


using b12x::BsGemvParams;

// Occupancy: NT = 1 three CTAs per SM on SM90 (72 registers; 228 KB of shared memory), NT = 2
// two (96 registers); two and one on SM120 (100 KB of shared memory per SM).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define B12X_BSGEMV_MIN_CTAS(NT) ((NT) == 1 ? 2 : 1)
#else
#define B12X_BSGEMV_MIN_CTAS(NT) ((NT) == 1 ? 3 : 2)
#endif

#define B12X_BSGEMV(FMT, FMTNAME, W, NT, KB, TOUT, OUTNAME)                                                    \
  extern "C" __global__ void __launch_bounds__(32 * (b12x::bsgemv::kConsumers + 1), B12X_BSGEMV_MIN_CTAS(NT))                   \
      b12x_bsgemv_##W##_##FMTNAME##_nt##NT##_kb##KB##_##OUTNAME##out(const __grid_constant__ BsGemvParams p) { \
    b12x::bsgemv::gemv<b12x::bsgemv::Fmt::FMT, NT, KB, TOUT>(p, b12x::bsgemv::DenseRows{p});            \
  }

// The entry-point table in src/blockscaled/gemv.rs lists exactly these.
#define B12X_BSGEMV_OUTS(FMT, FMTNAME, W, NT, KB)           \
  B12X_BSGEMV(FMT, FMTNAME, W, NT, KB, b12x::bf16, bf16) \
  B12X_BSGEMV(FMT, FMTNAME, W, NT, KB, b12x::fp16, f16)  \
  B12X_BSGEMV(FMT, FMTNAME, W, NT, KB, float, f32)
#define B12X_BSGEMV_FMT(FMT, FMTNAME, W)  \
  B12X_BSGEMV_OUTS(FMT, FMTNAME, W, 1, 1) \
  B12X_BSGEMV_OUTS(FMT, FMTNAME, W, 1, 2) \
  B12X_BSGEMV_OUTS(FMT, FMTNAME, W, 2, 1) \
  B12X_BSGEMV_OUTS(FMT, FMTNAME, W, 2, 2)

#ifndef B12X_PROTO_ENTRY_POINTS  // bench/proto harnesses instantiate their own
B12X_BSGEMV_FMT(Nvfp4, nvfp4, w4a16)
B12X_BSGEMV_FMT(Mxfp4, mxfp4, w4a16)
B12X_BSGEMV_FMT(Mxfp8, mxfp8, w8a16)
B12X_BSGEMV_FMT(Fp8Block, fp8block, w8a16)
B12X_BSGEMV_FMT(Fp8Tensor, fp8tensor, w8a16)
#endif

// ---- quantized activations: x -> x̂ = dequant(quant(x)) in BF16, before the GEMV -------------
// gemm.blockscaled's fused activation quantization (W4A8 / W8A8 forms): per group of G = 32
// (MXFP8, UE8M0 CeilPow2: b12x_quant::block::quantize_mx) or G = 32 / 128 (block FP8 1 x G, UE8M0:
// quantize_block_fp8, amax floored at 1e-4) consecutive k of a token row: scale code = ceil_pow2
// of amax / 448, codes = E4M3(x * 2^(127 - code)), x̂ = code value * 2^(code - 127) — the
// quantizer's rules through b12x/quant.cuh, so x̂ equals b12x-quant's dequantize(quantize(x))
// (a block with NaN/Inf: NaN; MX all zeros: +0), rounded to BF16, which holds it exactly for
// scales 2^-124 .. 2^119. The GEMV then stages x̂ as a BF16 x. One thread per 8 k; the G / 8
// threads of a group reduce its amax with shuffles.
struct BsQuantXParams {
  const b12x::bf16* x;  // [M, K] bf16, row stride ldx
  b12x::bf16* xhat;     // [M, K] bf16, contiguous
  long long ldx;
  int m, k;
  int group;  // 32 or 128 (K % group == 0)
  int floor;  // 1: amax = max(amax, 1e-4) (block FP8); 0: MX (amax 0 -> zeros)
  // The native kernels' staging instead of x̂ (xhat nullptr): E4M3 codes [M, K] contiguous and
  // the UE8M0 scale bytes per 32 k in the swizzled tiles of b12x_bsgemm_stage_xq (live blocks
  // only; the kernels ignore the padding).
  unsigned char* xcodes;
  unsigned char* xscales;
  int ktiles;
  int reserved;
};
static_assert(sizeof(BsQuantXParams) == 64, "mirror of gemv.rs");

extern "C" __global__ void __launch_bounds__(256) b12x_bsgemv_quant_x(const __grid_constant__ BsQuantXParams p) {
  using namespace b12x;
  const int per_row = p.k / 8;
  const long long chunks = (long long)p.m * per_row;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = i < chunks;  // whole groups are live or not: K % group == 0, blocks of 256
  const long long row = live ? i / per_row : 0;
  const int col = live ? int(i - row * per_row) * 8 : 0;
  uint4 raw = make_uint4(0u, 0u, 0u, 0u);
  if (live) raw = *reinterpret_cast<const uint4*>(p.x + row * p.ldx + col);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = __uint_as_float((e & 1) ? (w[e >> 1] & 0xFFFF0000u) : (w[e >> 1] << 16));
  float amax = 0.0f;
  int bad = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (isfinite(v[e])) amax = fmaxf(amax, fabsf(v[e]));
    else bad = 1;
  }
  for (int o = 1; o < p.group / 8; o <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  }
  uint32_t out[4] = {0u, 0u, 0u, 0u};  // +0 (MX: a block of zeros)
  uint32_t c2[4] = {0u, 0u, 0u, 0u}, sbyte = 0u;  // native staging: codes 0, scale 2^-127 for a zero block
  if (bad) {
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = 0x7FC07FC0u;  // the scale is NaN: every x̂ of the block
    sbyte = 255u;                                        // native: the NaN scale, zero codes
  } else if (p.floor || amax != 0.0f) {
    if (p.floor) amax = fmaxf(amax, 1e-4f);
    const float pr = amax * (1.0f / 448.0f);
    const uint32_t code = pr == 0.0f ? 0u : ceil_pow2_code(pr);
    sbyte = code;
    const float to_code = pow2_neg_ue8m0(code);  // 2^(127 - code)
    const float back = code == 0u ? __uint_as_float(0x00400000u) : __uint_as_float(code << 23);  // 2^(code - 127)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      c2[j] = e4m3x2(v[2 * j] * to_code, v[2 * j + 1] * to_code);
      const uint32_t h2 = e4m3x2_to_f16x2((unsigned short)c2[j]);
      const float lo = __half2float(__ushort_as_half((unsigned short)(h2 & 0xFFFFu))) * back;
      const float hi = __half2float(__ushort_as_half((unsigned short)(h2 >> 16))) * back;
      uint32_t b;
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(b) : "f"(hi), "f"(lo));
      out[j] = b;
    }
  }
  if (!live) return;
  if (p.xhat != nullptr) *reinterpret_cast<uint4*>(p.xhat + row * p.k + col) = make_uint4(out[0], out[1], out[2], out[3]);
  if (p.xcodes != nullptr) {
    *reinterpret_cast<uint2*>(p.xcodes + row * p.k + col) =
        make_uint2((c2[0] & 0xFFFFu) | (c2[1] << 16), (c2[2] & 0xFFFFu) | (c2[3] << 16));
    if ((col & 31) == 0) {  // the first thread of each 32-k block writes its scale byte
      const int r = int(row & 127);
      p.xscales[((row >> 7) * p.ktiles + (col >> 7)) * 512 + (r & 31) * 16 + (r >> 5) * 4 + ((col >> 5) & 3)] =
          (unsigned char)sbyte;
    }
  }
}

// ---- pre-quantized activations: codes + scales -> x̂ in BF16, before the GEMM ---------------
// gemm.blockscaled with activations the caller quantized (b12x-quant's quantizers, row-major
// scales): x̂ = code value x block scale, computed in f32 (exact) and rounded to BF16, which holds
// it exactly for MXFP8 / block-FP8 UE8M0 scale bytes 3 .. 246 (E4M3 codes are multiples of 2^-9
// below 2^9) and for every NVFP4 block (E2M1 x UE4M3: at most 6 significant bits, 2^-10 .. 2688).
// The tensor-level f32 scale (NVFP4's encode scale, per-tensor FP8's scale) stays out of x̂: the
// GEMM's epilogue applies it (BsGemvParams::xmult). Scale byte 255 (UE8M0) or 0x7F (UE4M3, bit 7
// ignored): NaN, as formats.md decodes them. One thread per 8 k of a token row; whole groups of
// 16, 32 or 128 k share one scale byte. Block FP8 1 x 128 with f32 scales (mode 2): x̂ is the
// codes' values (exact in BF16), and the first thread of each group copies its f32 scale to
// xsf[row][K / 128], which the block-FP8 weight kernels multiply into their promotions
// (bsgemv::kXScaleF32): no f32 scale times an E4M3 code is exact in BF16.
struct BsDequantXParams {
  const unsigned char* codes;   // [M, K] E4M3 bytes or [M, K / 2] E2M1 pairs (low nibble first), row stride ldq bytes
  const unsigned char* scales;  // [M, K / group] UE8M0 / UE4M3 bytes or f32 (mode 2), row stride lds elements;
                                // nullptr: per-tensor (scale 1)
  b12x::bf16* xhat;             // [M, K] bf16, contiguous
  long long ldq, lds;
  int m, k;
  int group;  // k per scale: 16 (NVFP4), 32 or 128
  int mode;   // 0: E4M3 with UE8M0 scales; 1: E2M1 pairs with UE4M3 scales; 2: E4M3 with f32 scales (group 128)
  float* xsf;  // mode 2: [M, K / 128] f32, contiguous (scratch)
};
static_assert(sizeof(BsDequantXParams) == 64, "mirror of gemv.rs");

extern "C" __global__ void __launch_bounds__(256) b12x_bsgemv_dequant_x(const __grid_constant__ BsDequantXParams p) {
  using namespace b12x;
  const int per_row = p.k / 8;
  const long long chunks = (long long)p.m * per_row;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  const long long row = i / per_row;
  const int col = int(i - row * per_row) * 8;
  float scale = 1.0f;
  if (p.mode == 2) {
    if (col % 128 == 0) p.xsf[row * (p.k / 128) + col / 128] = reinterpret_cast<const float*>(p.scales)[row * p.lds + col / 128];
  } else if (p.scales != nullptr) {
    const uint32_t sb = p.scales[row * p.lds + col / p.group];
    if (p.mode == 1) scale = ue4m3_value(sb & 0x7Fu);  // 0x7F: NaN
    else scale = sb == 255u ? __uint_as_float(0x7FC00000u) : sb == 0u ? __uint_as_float(0x00400000u) : __uint_as_float(sb << 23);
  }
  float v[8];
  if (p.mode == 1) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(p.codes + row * p.ldq + col / 2);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      // E2M1 magnitude m: 0, 0.5, then 2^(m / 2 - 1) (1 + (m & 1) / 2); bit 3 the sign.
      const uint32_t c = (w >> (4 * e)) & 0xFu, m = c & 7u;
      const uint32_t mag = m == 0u ? 0u : m == 1u ? 0x3F000000u : ((126u + (m >> 1)) << 23) | ((m & 1u) << 22);
      v[e] = __uint_as_float(mag | ((c & 8u) << 28));
    }
  } else {
    const uint2 w = *reinterpret_cast<const uint2*>(p.codes + row * p.ldq + col);
    const uint32_t ws[2] = {w.x, w.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t h2 = e4m3x2_to_f16x2((unsigned short)(ws[j >> 1] >> (16 * (j & 1))));
      v[2 * j] = __half2float(__ushort_as_half((unsigned short)(h2 & 0xFFFFu)));
      v[2 * j + 1] = __half2float(__ushort_as_half((unsigned short)(h2 >> 16)));
    }
  }
  uint32_t out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t b;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(b) : "f"(v[2 * j + 1] * scale), "f"(v[2 * j] * scale));
    out[j] = b;
  }
  *reinterpret_cast<uint4*>(p.xhat + row * p.k + col) = make_uint4(out[0], out[1], out[2], out[3]);
}

// ---- middle and prefill buckets (M > 16): the tiled kernel bodies are b12x/bsgemm_tile.cuh (mma.sync)
// and b12x/bsgemm_wgmma.cuh (SM90 wgmma)
#include "b12x/bsgemm_tile.cuh"
#include "b12x/bsgemm_wgmma.cuh"

namespace b12x {
namespace bsgemm {

// ---- SM120 native block-scaled MMAs: x quantized too ----------------------------------------
// The tiled kernel's CTA tiles, ring, loaders and epilogue with both operands as codes and the
// scales applied by the MMA (mma.sync kind::mxf8f6f4.block_scale, m16n8k32, UE8M0 per 32 k):
// MXFP8 x (staged by b12x_bsgemm_stage_xq: codes [M, K] contiguous, scales in 512-byte swizzled
// 128 x 4 tiles [ceil(M / 128)][ktiles]) times a packed MXFP8 weight (E4M3 rows, swizzled UE8M0).
// x and weight code rows are staged alike (128 bytes per k-tile, chunk c at c ^ 2 (row & 3)). The
// MMA sums its 32 k in any order with one scale per operand row, so lane t takes the 8 contiguous
// bytes 8t .. 8t + 7 of a 32-k group for both operands (logical k 4t + j <-> byte 8t + j, 16 + 4t
// + j <-> 8t + 4 + j: A registers {lo.x, hi.x, lo.y, hi.y}, B {x.x, x.y}), the FP8 dequantization
// path's conflict-free 8-byte loads. Scale registers (selectors zero): lanes t = 0 / 1 carry the
// weight rows g / g + 8 (SF_A), lanes t = 0 x row g (SF_B), byte 0. sm_120a / sm_121a run the
// instruction (UNVALIDATED: no SM120 GPU); other targets build the same kernel around
// bsmma::mma_bs_emulated (the H200 runs it in the GPU suite: everything but the instruction).
// QKind::Mxf8: the weight's UE8M0 scales in swizzled 128 x 4 tiles (MXFP8); QKind::Fp8Block: a
// block-FP8 weight with UE8M0 scales (pack_weight widens them to f32 rows: the byte is the f32's
// exponent field) per 128 x 128 or 32 x 32 tile (flags). x: MXFP8 or block FP8 1 x 32 / 1 x 128
// with UE8M0 scales, staged as one scale byte per 32 k either way. QKind::Mxf4 (W4A8): an MXFP4
// weight (layout v3: 64 code bytes per row and k-tile, the same swizzled UE8M0 tiles as MXFP8) x
// the same x, through the E2M1 x E4M3 form of the instruction: lane t's layout-v2 word (k 8t ..
// 8t + 7 of the group) becomes the two byte-container words of e2m1_sm90_containers (elements
// (0, 4, 1, 5) and (2, 6, 3, 7): 16 ALU per word), and x's 8 bytes take that order with two PRMTs
// (the group's k order is free: one scale per operand row). QKind::Nvf4 (NVFP4 x NVFP4): an NVFP4
// weight (layout v3, swizzled UE4M3 tiles, two per k-tile) x NVFP4 x (staged by
// b12x_bsgemm_stage_xq: 64 code bytes per row and k-tile, each word's nibbles in
// e2m1_nibble_elem's order, UE4M3 scales in two swizzled tiles per k-tile), through kind::mxf4nvf4
// (m16n8k64, scale_vec::4X): two k-steps of 64 k per k-tile; lane t's words 8 s + t and 8 s + 4 +
// t of a k-step s (its k 8t .. 8t + 7 and 32 + 8t ..) as the instruction places them, the weight's
// converted by e2m1_sm90_nibbles (7 ALU per word), x's as staged; a row's four UE4M3 of the k-step
// are one 32-bit word of its swizzled tile (the scale register as the instruction reads it).
enum class QKind { Mxf8, Fp8Block, Mxf4, Nvf4 };

template <QKind Q, int WM, int WN>
struct QTile {
  static constexpr bool kFp4x = Q == QKind::Nvf4;
  static constexpr int BM = 32 * WM, BN = 32 * WN;
  static constexpr int RB = kFp4x ? 64 : 128;                                // x code bytes per row and k-tile
  static constexpr int WRB = Q == QKind::Mxf4 || Q == QKind::Nvf4 ? 64 : 128;  // the weight's
  static constexpr int kScaleTiles = kFp4x ? 2 : 1;  // swizzled 128 x 4 scale tiles per k-tile and 128 rows
  static constexpr uint32_t kX = BM * uint32_t(RB), kW = BN * uint32_t(WRB), kXS = 512u * kScaleTiles;
  static constexpr uint32_t kStage = kX + kW + kScaleSmem + kXS;
  static_assert(BN == 128 || BN == 256, "scale staging covers one or two 128-row blocks");
  static_assert(BN / 128 * kScaleTiles * 512 <= int(kScaleSmem), "the weight's scale tiles fit the stage");
};

template <QKind Q>
__device__ __forceinline__ void qmma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], uint32_t sfa,
                                     uint32_t sfb) {
#if B12X_SM120_FEATURES
  if constexpr (Q == QKind::Nvf4) {
    bsmma::mma_nvf4(d, a, b, d, sfa, sfb);
  } else if constexpr (Q == QKind::Mxf4) {
    bsmma::mma_mxf8_e2m1_e4m3(d, a, b, d, sfa, sfb);
  } else {
    bsmma::mma_mxf8_e4m3(d, a, b, d, sfa, sfb);
  }
#else
  bsmma::mma_bs_emulated<Q == QKind::Nvf4 ? 1 : Q == QKind::Mxf4 ? 3 : 0>(d, a, b, d, sfa, sfb);
#endif
}

template <QKind Q, int WM, int WN, typename TOut>
__device__ __forceinline__ void qgemm(const BsGemmParams& p) {
  using T = QTile<Q, WM, WN>;
  constexpr int BM = T::BM, BN = T::BN, RB = T::RB;
  __shared__ __align__(8) uint64_t s_bar[kMaxStages];
  extern __shared__ __align__(16) unsigned char s_dyn[];
  const uint32_t ring = (smem_addr(s_dyn) + 127u) & ~127u;  // the launch adds 128 bytes of slack
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t bar0 = smem_addr(s_bar);
  const CtaWork cw = cta_work<BM, BN>(p, bar0);
  const int m0 = cw.m0, n0 = cw.n0, kt0 = cw.kt0, ktiles = cw.ktiles, S = p.stages;
  __syncthreads();

  auto load = [&](int kt, int s) {
    const uint32_t st = ring + uint32_t(s) * T::kStage;
    // x's staged code rows (K bytes each), the weight's, the weight's scales (MX: a 512-byte tile
    // per 128-row block; block FP8: the tiles' f32), and the x rows' block's scale tile.
    load_code_rows<BM, RB>(st, reinterpret_cast<const unsigned char*>(p.x), p.ldx, m0, p.m, T::kFp4x ? p.k / 2 : p.k,
                           kt, tid);
    load_code_rows<BN, T::WRB>(st + T::kX, p.codes, p.row_bytes, n0, p.n, p.row_bytes, kt, tid);
    const uint32_t ss = st + T::kX + T::kW;
    if constexpr (Q != QKind::Fp8Block) {
      load_scale_tiles<T::kScaleTiles, BN>(ss, p, n0, kt, tid);
    } else {
      load_block_scales<BN>(ss, p, n0, kt, tid);
    }
    constexpr int kXsChunks = int(T::kXS / 16);
    if (tid >= 128 && tid < 128 + kXsChunks) {  // threads 0 .. 127 may copy the weight's scales
      const int c = tid - 128;
      bsgemv::cp_async<16>(ss + kScaleSmem + 16u * c,
                           p.xscales + ((long long)(m0 / 128) * p.ktiles + kt) * T::kXS + 16 * c, true);
    }
    bsgemv::cp_async_mbar_arrive(bar0 + 8 * s);
  };

  constexpr int XT = 2 * WM, WT = WN / 2;
  const int wm = warp & 1, wn = warp >> 1;
  const int xrow0 = wm * 16 * WM, nrow0 = wn * 8 * WN;
  const uint32_t sc_row = uint32_t(g * 16 + ((nrow0 & 127) >> 5) * 4), sc_blk = uint32_t(nrow0 >> 7);
  auto sc_off = [&](int i, int h) {
    return 512u * T::kScaleTiles * sc_blk + sc_row + 256u * (i & 1) + 4u * (i >> 1) + 128u * h;
  };
  // x row r of the CTA sits at row (m0 + r) % 128 of its block's tile.
  auto xs_off = [&](int r) {
    const int b = (m0 + r) & 127;
    return uint32_t((b & 31) * 16 + (b >> 5) * 4);
  };
  float acc[WT][XT][4];
#pragma unroll
  for (int i = 0; i < WT; ++i)
#pragma unroll
    for (int j = 0; j < XT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  for (int s = 0; s < S - 1 && s < ktiles; ++s) load(kt0 + s, s);
  int slot = 0, phase = 0;
  for (int kt = 0; kt < ktiles; ++kt) {
    mbar_wait(bar0 + 8 * slot, uint32_t(phase));
    __syncthreads();  // every warp is done with the slot of k-tile kt - 1: refill it
    if (kt + S - 1 < ktiles) load(kt0 + kt + S - 1, (slot + S - 1) % S);
    const uint32_t xs = ring + uint32_t(slot) * T::kStage, ws = xs + T::kX, ss = ws + T::kW, xss = ss + kScaleSmem;
    if constexpr (Q == QKind::Nvf4) {
#pragma unroll
      for (int S2 = 0; S2 < 2; ++S2) {  // 64-k step: chunks 2 S2 and 2 S2 + 1 of the 64-byte rows
        // The step's 16-k blocks past K: scale 0 for x (codes there are zeros already).
        const int nv = p.k / 16 - ((kt0 + kt) * 8 + 4 * S2);
        const uint32_t kmask = nv >= 4 ? 0xFFFFFFFFu : nv <= 0 ? 0u : (1u << (8 * nv)) - 1u;
        uint32_t xb[XT][2], sfb[XT];
#pragma unroll
        for (int j = 0; j < XT; ++j) {
          const int r = xrow0 + 8 * j + g;
          xb[j][0] = bsgemv::ld_shared_u32(xs + w_pos<false>(r, 2 * S2) + 4u * t);
          xb[j][1] = bsgemv::ld_shared_u32(xs + w_pos<false>(r, 2 * S2 + 1) + 4u * t);
          sfb[j] = bsgemv::ld_shared_u32(xss + 512u * S2 + xs_off(r)) & kmask;
        }
#pragma unroll
        for (int i = 0; i < WT; ++i) {
          const int r = nrow0 + 16 * i + g;
          // A: rows r, r + 8 at k 8t .. (chunk 2 S2) and 32 + 8t .. (chunk 2 S2 + 1).
          const uint32_t a[4] = {e2m1_sm90_nibbles(bsgemv::ld_shared_u32(ws + w_pos<false>(r, 2 * S2) + 4u * t)),
                                 e2m1_sm90_nibbles(bsgemv::ld_shared_u32(ws + w_pos<false>(r + 8, 2 * S2) + 4u * t)),
                                 e2m1_sm90_nibbles(bsgemv::ld_shared_u32(ws + w_pos<false>(r, 2 * S2 + 1) + 4u * t)),
                                 e2m1_sm90_nibbles(bsgemv::ld_shared_u32(ws + w_pos<false>(r + 8, 2 * S2 + 1) + 4u * t))};
          const uint32_t sfa = bsgemv::ld_shared_u32(ss + sc_off(i, t & 1) + 512u * S2);
#pragma unroll
          for (int j = 0; j < XT; ++j) {
            const uint32_t b[2] = {xb[j][0], xb[j][1]};
            qmma<Q>(acc[i][j], a, b, sfa, sfb[j]);
          }
        }
      }
    } else {
#pragma unroll
      for (int T4 = 0; T4 < 4; ++T4) {  // 32-k group: one MMA k-step, one scale byte
        const uint32_t cb = 8u * (t & 1);
        // Groups past K: zero codes, and scale 0 for x (its staged padding may hold anything).
        const bool kin = (kt0 + kt) * 4 + T4 < p.k / 32;
        uint2 xb[XT];
        uint32_t sfb[XT];
#pragma unroll
        for (int j = 0; j < XT; ++j) {
          const int r = xrow0 + 8 * j + g;
          xb[j] = bsgemv::ld_shared_v2(xs + w_pos<true>(r, 2 * T4 + (t >> 1)) + cb);
          if constexpr (Q == QKind::Mxf4) {  // x's 8 bytes in the weight containers' element order
            const uint2 v = xb[j];
            xb[j] = make_uint2(__byte_perm(v.x, v.y, e2m1_container_x_selector(0)),
                               __byte_perm(v.x, v.y, e2m1_container_x_selector(1)));
          }
          sfb[j] = kin ? (bsgemv::ld_shared_u32(xss + xs_off(r)) >> (8 * T4)) & 0xFFu : 0u;
        }
#pragma unroll
        for (int i = 0; i < WT; ++i) {
          const int r = nrow0 + 16 * i + g;
          uint2 lo, hi;
          if constexpr (Q == QKind::Mxf4) {
            // Word t of the group's 16 bytes (k 8t .. 8t + 7) of rows r, r + 8 as byte containers.
            const uint32_t wl = bsgemv::ld_shared_u32(ws + w_pos<false>(r, T4) + 4u * t);
            const uint32_t wh = bsgemv::ld_shared_u32(ws + w_pos<false>(r + 8, T4) + 4u * t);
            lo = make_uint2(e2m1_sm90_containers<0>(wl), e2m1_sm90_containers<1>(wl));
            hi = make_uint2(e2m1_sm90_containers<0>(wh), e2m1_sm90_containers<1>(wh));
          } else {
            lo = bsgemv::ld_shared_v2(ws + w_pos<true>(r, 2 * T4 + (t >> 1)) + cb);
            hi = bsgemv::ld_shared_v2(ws + w_pos<true>(r + 8, 2 * T4 + (t >> 1)) + cb);
          }
          uint32_t sfa;
          if constexpr (Q != QKind::Fp8Block) {
            sfa = (bsgemv::ld_shared_u32(ss + sc_off(i, t & 1)) >> (8 * T4)) & 0xFFu;
          } else {
            // The f32 of weight row r + 8 (t & 1)'s tile: its exponent field is the UE8M0 byte.
            const int rr = r + 8 * (t & 1);
            const uint32_t off = (p.flags & bsgemv::kTile32) ? 16u * uint32_t(rr >> 5) + 4u * T4 : 16u * uint32_t(rr >> 7);
            sfa = (__float_as_uint(bsgemv::ld_shared_f32(ss + off)) >> 23) & 0xFFu;
          }
          const uint32_t a[4] = {lo.x, hi.x, lo.y, hi.y};
#pragma unroll
          for (int j = 0; j < XT; ++j) {
            const uint32_t b[2] = {xb[j].x, xb[j].y};
            qmma<Q>(acc[i][j], a, b, sfa, sfb[j]);
          }
        }
      }
    }
    if (++slot == S) slot = 0, phase ^= 1;
  }
  finish<WT, XT, BM, BN, TOut>(p, cw, acc, xrow0, nrow0);
}

}  // namespace bsgemm
}  // namespace b12x

// x of the native kernels, staged from b12x-quant's MXFP8 or block-FP8 (UE8M0, 1 x 32 / 1 x 128)
// output: codes [M, K] (row stride ldq bytes) copied to contiguous rows, the UE8M0 scales [M, K /
// group] (row stride lds) as one byte per 32 k (a 1 x 128 scale four times) rearranged into
// 512-byte swizzled 128 x 4 tiles [ceil(M / 128)][ktiles] (row r, block column c at tile
// (r / 128, c / 4), byte (r % 32) 16 + ((r % 128) / 32) 4 + c % 4), padding rows and columns 0
// (a zero code times any finite scale). NVFP4 (group 16): codes [M, K / 2] E2M1 pairs to
// contiguous rows of K / 2 bytes with every word's nibbles in e2m1_nibble_elem's order (the NVFP4
// weight's converted words), the UE4M3 scales (bit 7 ignored, as the dequantizing pre-pass) one
// byte per 16 k, two tiles per k-tile: [ceil(M / 128)][ktiles][2][512]. Thread i copies 8 code
// bytes (i < M K / 8, NVFP4 M K / 16: two 4-byte loads, NVFP4 rows are 4-byte aligned) and writes
// scale byte i.
struct BsStageXqParams {
  const unsigned char* codes;
  const unsigned char* scales;
  unsigned char* xcodes;   // [M, K] (NVFP4 [M, K / 2]) contiguous
  unsigned char* xscales;  // [ceil(M / 128)][ktiles][512] (NVFP4 [..][ktiles][2][512])
  long long ldq, lds;
  int m, k;
  int ktiles;
  int group;  // k per user scale byte: 16 (NVFP4), 32 (MXFP8, block FP8 1 x 32) or 128 (block FP8 1 x 128)
};
static_assert(sizeof(BsStageXqParams) == 64, "mirror of gemv.rs");

extern "C" __global__ void __launch_bounds__(256) b12x_bsgemm_stage_xq(const __grid_constant__ BsStageXqParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool fp4 = p.group == 16;
  const int row_bytes = fp4 ? p.k / 2 : p.k, per_row = row_bytes / 8;
  if (i < (long long)p.m * per_row) {
    const long long row = i / per_row;
    const int col = int(i - row * per_row) * 8;
    const unsigned char* src = p.codes + row * p.ldq + col;
    uint2 v;
    if (fp4) {  // NVFP4 x rows are only 4-byte aligned
      const uint32_t lo = *reinterpret_cast<const uint32_t*>(src), hi = *reinterpret_cast<const uint32_t*>(src + 4);
      v = make_uint2(b12x::e2m1_nibble_x_word(lo), b12x::e2m1_nibble_x_word(hi));
    } else {
      v = *reinterpret_cast<const uint2*>(src);
    }
    *reinterpret_cast<uint2*>(p.xcodes + row * row_bytes + col) = v;
  }
  const int per_kt = fp4 ? 2 : 1, unit = fp4 ? 16 : 32;  // tiles per k-tile; k per staged scale byte
  const long long tiles = (long long)((p.m + 127) / 128) * p.ktiles * per_kt;
  if (i < tiles * 512) {
    const long long tile = i >> 9;
    const int b = int(i & 511), blk = int(tile / (p.ktiles * per_kt)), tc = int(tile - (long long)blk * p.ktiles * per_kt);
    // Byte b of the tile: row (b / 16) % 32 + 32 ((b % 16) / 4) of the block, column b % 4.
    const int r = blk * 128 + ((b >> 4) & 31) + 32 * ((b & 15) >> 2), c = tc * 4 + (b & 3);
    const unsigned char sb = (r < p.m && c < p.k / unit) ? p.scales[(long long)r * p.lds + c * unit / p.group] : 0;
    p.xscales[i] = fp4 ? (unsigned char)(sb & 0x7Fu) : sb;
  }
}

using b12x::BsGemmParams;

// The SM90-only wgmma kernels: 128 x 256 tiles (MT = 2, wn8), block FP8 also 128 x 128 (MT = 1,
// wn4); a trapping body on other targets.
// W w8a8f32 (XS true): block-FP8 weights x block FP8 1 x 128 x with f32 scales.
#define B12X_BSGEMM_WG(FMT, FMTNAME, W, MT, XS, TOUT, OUTNAME)                                               \
  extern "C" __global__ void __launch_bounds__(b12x::bsgemm::kThreads, 1)                                    \
      b12x_bsgemm_wg_##W##_##FMTNAME##_wn##MT##_##OUTNAME##out(const __grid_constant__ BsGemmParams p) {     \
    b12x::bsgemm::wgemm<b12x::bsgemv::Fmt::FMT, MT / 4, TOUT, XS>(p);                                      \
  }
#define B12X_BSGEMM_WG_OUTS(FMT, FMTNAME, W, WN, XS)          \
  B12X_BSGEMM_WG(FMT, FMTNAME, W, WN, XS, b12x::bf16, bf16) \
  B12X_BSGEMM_WG(FMT, FMTNAME, W, WN, XS, b12x::fp16, f16)  \
  B12X_BSGEMM_WG(FMT, FMTNAME, W, WN, XS, float, f32)

// Tile shapes (src/blockscaled/gemv.rs lists the entry points): 128 x 256 (prefill), 64 x 256,
// 32 x 128 (middle); block FP8 128 x 128 and 64 x 128 (its per-tile partial sums double the
// accumulators). One CTA per SM for 128-row tiles, two otherwise.
#define B12X_BSGEMM(FMT, FMTNAME, W, WM, WN, MINB, XS, TOUT, OUTNAME)                                         \
  extern "C" __global__ void __launch_bounds__(b12x::bsgemm::kThreads, MINB)                                      \
      b12x_bsgemm_##W##_##FMTNAME##_wm##WM##_wn##WN##_##OUTNAME##out(const __grid_constant__ BsGemmParams p) { \
    b12x::bsgemm::gemm<b12x::bsgemv::Fmt::FMT, WM, WN, TOUT, XS>(p);                                          \
  }
#define B12X_BSGEMM_OUTS(FMT, FMTNAME, W, WM, WN, MINB, XS)           \
  B12X_BSGEMM(FMT, FMTNAME, W, WM, WN, MINB, XS, b12x::bf16, bf16) \
  B12X_BSGEMM(FMT, FMTNAME, W, WM, WN, MINB, XS, b12x::fp16, f16)  \
  B12X_BSGEMM(FMT, FMTNAME, W, WM, WN, MINB, XS, float, f32)
#define B12X_BSGEMM_FMT(FMT, FMTNAME, W, WN_BIG, XS)   \
  B12X_BSGEMM_OUTS(FMT, FMTNAME, W, 4, WN_BIG, 1, XS) \
  B12X_BSGEMM_OUTS(FMT, FMTNAME, W, 2, WN_BIG, 1, XS) \
  B12X_BSGEMM_OUTS(FMT, FMTNAME, W, 1, 4, 2, XS)

#ifndef B12X_PROTO_ENTRY_POINTS  // bench/proto harnesses instantiate their own
B12X_BSGEMM_FMT(Nvfp4, nvfp4, w4a16, 8, false)
B12X_BSGEMM_FMT(Mxfp4, mxfp4, w4a16, 8, false)
B12X_BSGEMM_FMT(Mxfp8, mxfp8, w8a16, 8, false)
B12X_BSGEMM_FMT(Fp8Block, fp8block, w8a16, 4, false)
B12X_BSGEMM_FMT(Fp8Block, fp8block, w8a8f32, 4, true)
B12X_BSGEMM_FMT(Fp8Tensor, fp8tensor, w8a16, 8, false)
B12X_BSGEMM_WG_OUTS(Nvfp4, nvfp4, w4a16, 8, false)
B12X_BSGEMM_WG_OUTS(Mxfp4, mxfp4, w4a16, 8, false)
B12X_BSGEMM_WG_OUTS(Mxfp8, mxfp8, w8a16, 8, false)
B12X_BSGEMM_WG_OUTS(Fp8Block, fp8block, w8a16, 8, false)
B12X_BSGEMM_WG_OUTS(Fp8Block, fp8block, w8a16, 4, false)
B12X_BSGEMM_WG_OUTS(Fp8Block, fp8block, w8a8f32, 8, true)
B12X_BSGEMM_WG_OUTS(Fp8Block, fp8block, w8a8f32, 4, true)
B12X_BSGEMM_WG_OUTS(Fp8Tensor, fp8tensor, w8a16, 8, false)
#endif

// The native kernels (E4M3 x with UE8M0 scales x an MXFP8, UE8M0 block-FP8 or MXFP4 weight; NVFP4
// x x an NVFP4 weight), the same tile shapes.
#define B12X_BSQGEMM(KIND, KINDNAME, WM, WN, MINB, TOUT, OUTNAME)                                             \
  extern "C" __global__ void __launch_bounds__(b12x::bsgemm::kThreads, MINB)                                      \
      b12x_bsgemm_native_##KINDNAME##_wm##WM##_wn##WN##_##OUTNAME##out(const __grid_constant__ BsGemmParams p) { \
    b12x::bsgemm::qgemm<b12x::bsgemm::QKind::KIND, WM, WN, TOUT>(p);                                          \
  }
#define B12X_BSQGEMM_OUTS(KIND, KINDNAME, WM, WN, MINB)           \
  B12X_BSQGEMM(KIND, KINDNAME, WM, WN, MINB, b12x::bf16, bf16) \
  B12X_BSQGEMM(KIND, KINDNAME, WM, WN, MINB, b12x::fp16, f16)  \
  B12X_BSQGEMM(KIND, KINDNAME, WM, WN, MINB, float, f32)
#ifndef B12X_PROTO_ENTRY_POINTS  // bench/proto harnesses instantiate their own
B12X_BSQGEMM_OUTS(Mxf8, mxf8, 4, 8, 1)
B12X_BSQGEMM_OUTS(Mxf8, mxf8, 2, 8, 1)
B12X_BSQGEMM_OUTS(Mxf8, mxf8, 1, 4, 2)
B12X_BSQGEMM_OUTS(Fp8Block, fp8block, 4, 8, 1)
B12X_BSQGEMM_OUTS(Fp8Block, fp8block, 2, 8, 1)
B12X_BSQGEMM_OUTS(Fp8Block, fp8block, 1, 4, 2)
B12X_BSQGEMM_OUTS(Mxf4, mxf4, 4, 8, 1)
B12X_BSQGEMM_OUTS(Mxf4, mxf4, 2, 8, 1)
B12X_BSQGEMM_OUTS(Mxf4, mxf4, 1, 4, 2)
B12X_BSQGEMM_OUTS(Nvf4, nvf4, 4, 8, 1)
B12X_BSQGEMM_OUTS(Nvf4, nvf4, 2, 8, 1)
B12X_BSQGEMM_OUTS(Nvf4, nvf4, 1, 4, 2)
#endif

