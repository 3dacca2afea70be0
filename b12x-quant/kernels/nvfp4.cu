// nvfp4.cu — quantization.nvfp4: BF16/FP16 rows -> E2M1 pairs + UE4M3 block scales (one per 16)
//   + the f32 encode scale enc.   crate: b12x-quant
//   enc given (device f32 [1]) or computed: A = max|x| over the finite elements (amax pass into a
//   u32 scratch cell, zeroed by the host before it), enc = min(2688 / A, 2^126) if A > 0 else 1,
//   written to enc_out by the quantize pass. Per block of 16, each step one f32 operation:
//   s = ue4m3(enc * (amax / 6)); s == 0 -> codes 0; else r = 1 / (f32(s) * (1 / enc)),
//   q = e2m1(x * r). NaN/Inf in a block: scale 0x7F, codes 0. Bit-exact with
//   b12x_quant::block::quantize_nvfp4.
// Tensors: x [M, K] bf16|f16 (row stride ldx)   codes [M, K/2] u8 (row stride ldq bytes, element 2i
//   in the low nibble)   scales [M, K/16] u8 row-major and/or scales_sw (swizzled 128x4, padding
//   rows written 0)   enc_in / enc_out f32 [1]   amax u32 [1] scratch.
// Constraints: K % 16 == 0 (K % 64 == 0 with scales_sw); x rows 16-byte aligned, codes rows 4-byte aligned.
// Strategy: amax pass: grid-stride 16-byte loads (4 in flight per thread, x walked backwards so
//   the quantize pass finds its first rows in L2), warp + CTA max, one atomicMax on the f32 bits
//   (non-negative floats order like their bits). Quantize pass: one lane per block of 16 (two
//   16-byte loads), U blocks per thread (configs t{128,256,512}_u{1,2,4}); dense rows address
//   block i of the flat list as x[16i], codes[8i], scales[i] (strided rows: ChunkGrid's row and
//   block, a separate non-inlined path); one branch per block (the usual block, RN(amax r) < 7,
//   encodes its magnitudes without a clamp: nvfp4_codes8_below7); UE4M3 via
//   cvt.rn.satfinite.e4m3x2; r per scale code from a per-CTA table of the 128 reciprocals
//   (filled while the loads are in flight); E2M1 in software on sm_90, the hardware
//   cvt.rn.satfinite.e2m1x2.f32 on sm_120a / sm_121a (e2m1x2_hw, unvalidated: never run).
// Entry points: b12x_nvfp4_amax_{bf16,f16}, b12x_nvfp4_t{128,256,512}_u{1,2,4}_{bf16,f16}.
//   Oracle: b12x_quant::block::quantize_nvfp4.
#include "b12x/common.cuh"
#include "b12x/e2m1.cuh"
#include "b12x/quant.cuh"

struct Nvfp4Params {
  const void* x;              // [M, K] bf16|f16
  unsigned char* codes;       // [M, K/2]
  unsigned char* scales;      // [M, K/16] or nullptr
  unsigned char* scales_sw;   // swizzled or nullptr
  const float* enc_in;        // [1] given encode scale, or nullptr (computed)
  float* enc_out;             // [1] computed encode scale output, or nullptr (given)
  unsigned int* amax;         // [1] scratch: f32 bits of the tensor's finite amax (computed mode)
  long long ldx;              // elements
  long long ldq;              // bytes
  long long lds;              // bytes
  int rows;                   // M
  int rows_sw;                // M, or ceil(M/128)*128 with scales_sw
  int k;                      // K
  int pad;
};
static_assert(sizeof(Nvfp4Params) == 96, "mirror of Nvfp4Params in src/nvfp4.rs");

namespace b12x {
namespace nvfp4 {

// The encode scale: given, or from the amax pass.
__device__ __forceinline__ float encode_scale(const Nvfp4Params& p) {
  if (p.enc_in != nullptr) return *p.enc_in;
  const float a = __uint_as_float(*reinterpret_cast<volatile unsigned int*>(p.amax));
  return a > 0.0f ? fminf(__fdiv_rn(2688.0f, a), __uint_as_float(253u << 23)) : 1.0f;  // 2^126
}

// Grid-stride over the chunks, 4 loads in flight per thread, walking x from its end back to
// its start: the start, which the quantize pass reads first, is then the most recently read and
// partly still in L2.
template <typename T>
__device__ __forceinline__ void amax_pass(const Nvfp4Params& p) {
  constexpr int U = 4;
  const uint32_t chunks = (uint32_t)p.k >> 3;
  const uint32_t total = (uint32_t)p.rows * chunks;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  float m = 0.0f;
  for (unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; base < total;
       base += stride * U) {
    Vec16 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const unsigned long long idx = base + j * stride;
      if (idx < total) {
        const uint32_t r = total - 1u - (uint32_t)idx;
        const uint32_t row = r / chunks;
        v[j] = ld_global_stream_v16(reinterpret_cast<const T*>(p.x) + (long long)row * p.ldx + (r - row * chunks) * 8);
      }
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
      if (base + j * stride < total) {
        float f[8];
        unpack_f32<T>(v[j], f);
#pragma unroll
        for (int i = 0; i < 8; ++i) m = isfinite(f[i]) ? fmaxf(m, fabsf(f[i])) : m;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float s_max[32];
  if ((threadIdx.x & 31) == 0) s_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float b = 0.0f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) b = fmaxf(b, s_max[w]);
    if (b > 0.0f) atomicMax(p.amax, __float_as_uint(b));
  }
}

// One NVFP4 block: its 16 elements, loaded as two 16-byte halves v[0], v[1] (zeros past the last
// row). One lane per block: no shuffle, one scale per lane. One branch per block: the scale code
// is selected (0x7F for a NaN/Inf block), every block is encoded with its table entry r, and the
// codes of NaN/Inf and zero-scale blocks are then cleared — the codec's values, with fewer
// branches than testing both cases first (issue-bound on sm_90). The usual block has
// RN(amax r) < 7 and takes nvfp4_codes8_below7 (no clamp, no fabs); a saturated or subnormal
// scale (products up to 7 and beyond) and code 0 / 0x7F (r = Inf / NaN) take nvfp4_codes8.
struct Block {
  uint32_t code;    // UE4M3 scale
  uint32_t out[2];  // E2M1 pairs of elements 0-7 and 8-15
};
template <typename T>
__device__ __forceinline__ Block encode_block(float enc, const float* s_rcp, const Vec16 (&v)[2]) {
  const Vec16 a[2] = {abs16(v[0]), abs16(v[1])};
  const uint32_t bits = max(max_bits16(a[0].w), max_bits16(a[1].w));
  const bool finite = bits < HalfBits<T>::kInf;
  const float amax = HalfBits<T>::to_f32(finite ? bits : 0u);
  Block b;
  b.code = finite ? ue4m3(__fmul_rn(enc, div_by_6(amax))) : 0x7Fu;
  const float r = s_rcp[b.code];
  b.out[0] = b.out[1] = 0u;
  if (__fmul_rn(amax, r) < 7.0f) {  // every |x| r < 7 (false for r = Inf or NaN)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float f[8];
      unpack_f32<T>(a[h], f);
      b.out[h] = nvfp4_codes8_below7(v[h].w, f, r);
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float f[8];
      unpack_f32<T>(v[h], f);
      nvfp4_codes8(v[h].w, f, r, b.out[h]);
    }
  }
  // finite inputs give codes 0..126; code 0 is the only zero scale
  const bool keep = finite && b.code != 0u;
#pragma unroll
  for (int h = 0; h < 2; ++h) b.out[h] = keep ? b.out[h] : 0u;
  return b;
}

// The block's codes at q (its row's codes + blk * 8 bytes; 4-byte aligned).
__device__ __forceinline__ void store_codes(unsigned char* q, const Block& b) {
  uint32_t* q4 = reinterpret_cast<uint32_t*>(q);
  q4[0] = b.out[0];
  q4[1] = b.out[1];
}

// The swizzled scale of block (row, blk), rows up to rows_sw (padding rows get the zero scale
// their zero inputs give).
__device__ __forceinline__ void store_scale_sw(const Nvfp4Params& p, int row, int blk, uint32_t code) {
  if (p.scales_sw != nullptr && row < p.rows_sw) p.scales_sw[swizzled_offset(row, blk, p.k >> 4)] = (unsigned char)code;
}

// The encode scale and the CTA's table of the 128 block reciprocals (nvfp4_rcp_table: one IEEE
// reciprocal per code instead of one per block), built while the loads are in flight.
__device__ __forceinline__ float prepare_table(const Nvfp4Params& p, float* s_rcp) {
  const float enc = encode_scale(p);
  nvfp4_rcp_table(enc, s_rcp);
  if (p.enc_out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *p.enc_out = enc;
  __syncthreads();
  return enc;
}

// The quantize pass: U blocks of 16 per thread over the flat [rows_sw, K/16] block list (a CTA
// covers U * blockDim consecutive blocks, thread t takes t, t + blockDim, ...: each warp covers
// 512 consecutive elements per slot), both 16-byte halves of every block loaded (through L1, so
// the second half of each 32-byte sector is a hit) before any conversion.
// Strided rows: row and block from ChunkGrid, 64-bit addresses from the row strides.
template <typename T, int U>
__device__ __noinline__ void quantize_strided(const Nvfp4Params& p, float* s_rcp) {
  const ChunkGrid<U> g(p.rows_sw, p.k >> 4);
  Vec16 v[U][2];
  load_units<T, U>(g, p.x, p.ldx, p.rows, v);
  const float enc = prepare_table(p, s_rcp);
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const Block b = encode_block<T>(enc, s_rcp, v[j]);
    const int row = g.row[j], blk = g.chunk[j];
    if (row < p.rows) {
      store_codes(p.codes + (long long)row * p.ldq + blk * 8, b);
      if (p.scales != nullptr) p.scales[(long long)row * p.lds + blk] = (unsigned char)b.code;
    }
    store_scale_sw(p, row, blk, b.code);
  }
}

// Dense rows (x, codes and row-major scales without row padding, the usual case): block i of the
// flat list is x[16i ..], codes[8i ..] and scales[i], so every address is one multiply-add of the
// block index (no division per slot, no 64-bit row arithmetic); row and block are derived only
// for the swizzled scales. Indices are 32-bit: the plans keep rows * K/8 + 2^11 below 2^32.
template <typename T, int U>
__device__ __forceinline__ void quantize_dense(const Nvfp4Params& p, float* s_rcp) {
  const uint32_t chunks = (uint32_t)p.k >> 4;
  const uint32_t live = (uint32_t)p.rows * chunks;  // blocks of rows < M
  const uint32_t base = blockIdx.x * (blockDim.x * U) + threadIdx.x;
  Vec16 v[U][2];
  load_dense<T, U>(p.x, base, live, v);
  const float enc = prepare_table(p, s_rcp);
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const uint32_t i = base + j * blockDim.x;
    const Block b = encode_block<T>(enc, s_rcp, v[j]);
    if (i < live) {
      store_codes(p.codes + (size_t)i * 8, b);
      if (p.scales != nullptr) p.scales[i] = (unsigned char)b.code;
    }
    if (p.scales_sw != nullptr) {
      const uint32_t row = i / chunks;
      store_scale_sw(p, (int)min(row, (uint32_t)p.rows_sw), (int)(i - row * chunks), b.code);
    }
  }
}

template <typename T, int U>
__device__ __forceinline__ void quantize(const Nvfp4Params& p) {
  __shared__ float s_rcp[128];
  const long long chunks = p.k >> 4;
  const bool dense = p.ldx == p.k && p.ldq == chunks * 8 && (p.scales == nullptr || p.lds == chunks);
  if (dense) {
    quantize_dense<T, U>(p, s_rcp);
  } else {
    quantize_strided<T, U>(p, s_rcp);
  }
}

}  // namespace nvfp4
}  // namespace b12x

#define B12X_NVFP4_AMAX(T, NAME)                                                                     \
  extern "C" __global__ void __launch_bounds__(256) b12x_nvfp4_amax_##NAME(const __grid_constant__ Nvfp4Params p) { \
    b12x::nvfp4::amax_pass<T>(p);                                                                    \
  }
// u4: at most 64 registers (1024 threads per SM resident), as before the below-7 encoder, whose
// shared magnitudes would otherwise take t128_u4 and t256_u4 to 70 (u1 / u2 keep the plain bound:
// an explicit minimum of 1 CTA changes ptxas's register choice for them).
#define B12X_NVFP4_BOUNDS_1(THREADS) __launch_bounds__(THREADS)
#define B12X_NVFP4_BOUNDS_2(THREADS) __launch_bounds__(THREADS)
#define B12X_NVFP4_BOUNDS_4(THREADS) __launch_bounds__(THREADS, 1024 / THREADS)
#define B12X_NVFP4(THREADS, U, T, NAME)                                                              \
  extern "C" __global__ void B12X_NVFP4_BOUNDS_##U(THREADS) b12x_nvfp4_t##THREADS##_u##U##_##NAME(   \
      const __grid_constant__ Nvfp4Params p) {                                                       \
    b12x::nvfp4::quantize<T, U>(p);                                                                  \
  }
#define B12X_NVFP4_U(U, T, NAME)                                                                     \
  B12X_NVFP4(128, U, T, NAME)                                                                        \
  B12X_NVFP4(256, U, T, NAME)                                                                        \
  B12X_NVFP4(512, U, T, NAME)
#define B12X_NVFP4_T(T, NAME)                                                                        \
  B12X_NVFP4_U(1, T, NAME)                                                                           \
  B12X_NVFP4_U(2, T, NAME)                                                                           \
  B12X_NVFP4_U(4, T, NAME)

B12X_NVFP4_AMAX(b12x::bf16, bf16)
B12X_NVFP4_AMAX(b12x::fp16, f16)
B12X_NVFP4_T(b12x::bf16, bf16)
B12X_NVFP4_T(b12x::fp16, f16)
