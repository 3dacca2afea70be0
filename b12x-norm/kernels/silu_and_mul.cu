// silu_and_mul.cu — SiLU-gated product (the SwiGLU activation), optionally quantized.  crate: b12x-norm
//   g = x[t, j], u = x[t, I + j] (j < I); with a limit L: g <- min(g, L), u <- clamp(u, -L, L);
//   y[t, j] = (g / (1 + expf(-g))) * u    (f32 math: precise expf, IEEE division; one rounding to T;
//   silu_mul_vec in b12x/activation.cuh, shared with gemm.bf16_gemv's fused `_silu` x load)
//   quantized outputs: y rounded to T first, then quantize_row (quant_row.cuh), bit for bit the
//   standalone quantizers of b12x-quant applied to that y.
// Tensors (row-major, strides in elements):  x [T, 2I] bf16|f16   y [T, I] (same dtype)   or
//   codes [T, I] e4m3 / [T, I/2] e2m1 pairs + scales [T, I/32] u8 | [T, I/128] f32|u8 | [T, I/16] u8.
// Constraints: I % 8 == 0 (and % block for quantized outputs), I <= 32768, 16-byte aligned rows.
// Strategy: norm.rmsnorm's row layout without the reduction — CTA (t, c) holds the chunk c of
//   blockDim * kVecsPerThread 16-byte vectors of row t's g and u in registers (all loads in flight
//   before any math); thread tid owns vectors tid + k * blockDim of its chunk. The host picks the
//   block size so a row is split into 1, 2, 4 or 8 chunks (grid.y): small T still fills the SMs.
// Entry points: b12x_silu_and_mul_v{1,2,4,8}_{bf16,f16} (y),
//   b12x_silu_and_mul_{mxfp8,fp8b128f32,fp8b128ue8m0,nvfp4}_v{1,2,4,8}_{bf16,f16} (quantized).
// Oracle: src/silu_and_mul/reference.rs
#include <stddef.h>

#include "b12x/activation.cuh"
#include "b12x/common.cuh"
#include "quant_row.cuh"

namespace b12x {

// Mirrored by src/silu_and_mul/params.rs (size and offsets asserted on both sides).
struct SiluAndMulParams {
  const void* x;          // [T, 2I], row stride x_stride: gate x[t, :I], up x[t, I:]
  void* y;                // [T, I], row stride y_stride (plain entry points; null otherwise)
  unsigned char* codes;   // [T, I] e4m3 or [T, I/2] e2m1 pairs, row stride ldq bytes (quantized)
  void* scales;           // [T, I/32] u8, [T, I/128] f32|u8 or [T, I/16] u8, row stride lds elements
  const float* enc;       // [1] NVFP4 encode scale (given), else null
  int64_t x_stride;       // elements between rows of x
  int64_t y_stride;       // elements between rows of y
  int64_t ldq;            // bytes between rows of codes
  int64_t lds;            // elements between rows of scales
  int32_t rows;           // T: the grid has T x chunks CTAs
  int32_t cols;           // I
  float limit;            // L (> 0), or +inf: no limit
  uint32_t reserved;      // zero; pads the struct to a multiple of 8 bytes
};
static_assert(sizeof(SiluAndMulParams) == 88, "size must match src/silu_and_mul/params.rs");
static_assert(offsetof(SiluAndMulParams, y) == 8, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, codes) == 16, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, scales) == 24, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, enc) == 32, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, x_stride) == 40, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, y_stride) == 48, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, ldq) == 56, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, lds) == 64, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, rows) == 72, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, cols) == 76, "offset must match params.rs");
static_assert(offsetof(SiluAndMulParams, limit) == 80, "offset must match params.rs");

// The largest CTA the host launches (mod.rs: MAX_BLOCK_THREADS); the launch bound of every entry.
constexpr int kSiluMaxThreads = 512;

template <typename T, int kVecsPerThread, int kQuant>
__device__ __forceinline__ void silu_and_mul_chunk(const SiluAndMulParams& p) {
  static_assert(VecN<T>::value == 8, "bf16/f16 rows");
  static_assert(kVecsPerThread == 1 || kVecsPerThread == 2 || kVecsPerThread == 4 || kVecsPerThread == 8,
                "the variant table in mod.rs lists 1, 2, 4, 8");
  // NVFP4: the block-scale reciprocals, written before the barrier below.
  __shared__ float s_rcp[kQuant == kQuantNvfp4 ? 128 : 1];
  const auto vidx = [](int k) -> int { return threadIdx.x + k * blockDim.x; };
  const int64_t row = blockIdx.x;
  const int chunk = blockDim.x * kVecsPerThread;
  // The chunk's first vector and its live vectors (a multiple of the quantizer block: I is, and
  // chunk is a multiple of 32 vectors).
  const int c0 = blockIdx.y * chunk;
  const int nvec = min(p.cols / 8 - c0, chunk);
  const T* g_row = static_cast<const T*>(p.x) + row * p.x_stride;
  const Vec16* g_g = reinterpret_cast<const Vec16*>(g_row) + c0;
  const Vec16* g_u = reinterpret_cast<const Vec16*>(g_row + p.cols) + c0;

  // x is read once and never written by this grid (outputs are disjoint): non-coherent streaming
  // loads, all issued before any math. Past the chunk's end g = u = 0, so y = 0 there.
  Vec16 r_g[kVecsPerThread], r_u[kVecsPerThread];
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int i = vidx(k);
    r_g[k] = Vec16{};
    if (i < nvec) r_g[k] = ld_global_stream_v16(g_g + i);
  }
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int i = vidx(k);
    r_u[k] = Vec16{};
    if (i < nvec) r_u[k] = ld_global_stream_v16(g_u + i);
  }
  const float limit = p.limit;

  if constexpr (kQuant == kQuantNone) {
    Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<T*>(p.y) + row * p.y_stride) + c0;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int i = vidx(k);
      if (i < nvec) st_global_v16(g_y + i, silu_mul_vec<T>(r_g[k], r_u[k], limit));
    }
  } else {
    constexpr int kScaleBytes = kQuant == kQuantFp8B128F32 ? 4 : 1;
    constexpr int kCodeBytesPerVec = kQuant == kQuantNvfp4 ? 4 : 8;
    float enc = 0.0f;
    if constexpr (kQuant == kQuantNvfp4) {
      enc = *p.enc;
      nvfp4_rcp_table(enc, s_rcp);
      __syncthreads();
    }
    // The chunk's codes and scales: quantize_row indexes vectors from the chunk start.
    QuantRow qr;
    qr.codes = p.codes + row * p.ldq + (int64_t)c0 * kCodeBytesPerVec;
    qr.scales = static_cast<unsigned char*>(p.scales) +
                (row * p.lds + c0 / (int)kBlockVecs<kQuant>) * kScaleBytes;
    qr.enc = enc;
    qr.rcp = s_rcp;
    asm volatile("" : "+l"(qr.codes), "+l"(qr.scales));
    // Every slot, live or not (zeros past the end form whole dead blocks whose stores are gated).
    const auto y_of = [&](int k, int) { return silu_mul_vec<T>(r_g[k], r_u[k], limit); };
    quantize_row<kQuant, T, kVecsPerThread>(qr, nvec, y_of);
  }
}

}  // namespace b12x

// One entry point per (output, kVecsPerThread, dtype); the variant table in src/silu_and_mul/mod.rs
// lists exactly these symbols. Each first waits for the kernel before it (a PDL launch,
// `Plan::with_pdl`; launched plainly the wait returns at once), then lets a PDL-launched next
// kernel (a GEMV) start, whose own wait still waits for this grid.
#define B12X_SILU_KERNEL(NAME, T, KV, QUANT)                                                 \
  extern "C" __global__ void __launch_bounds__(b12x::kSiluMaxThreads)                      \
      NAME(const __grid_constant__ b12x::SiluAndMulParams p) {                              \
    b12x::pdl_wait_then_release();                                                           \
    b12x::silu_and_mul_chunk<T, KV, QUANT>(p);                                               \
  }
#define B12X_SILU_V(PREFIX, QUANT, T, TNAME)                      \
  B12X_SILU_KERNEL(PREFIX##_v1_##TNAME, T, 1, QUANT)              \
  B12X_SILU_KERNEL(PREFIX##_v2_##TNAME, T, 2, QUANT)              \
  B12X_SILU_KERNEL(PREFIX##_v4_##TNAME, T, 4, QUANT)              \
  B12X_SILU_KERNEL(PREFIX##_v8_##TNAME, T, 8, QUANT)
#define B12X_SILU_EACH_OUTPUT(T, TNAME)                                                 \
  B12X_SILU_V(b12x_silu_and_mul, b12x::kQuantNone, T, TNAME)                            \
  B12X_SILU_V(b12x_silu_and_mul_mxfp8, b12x::kQuantMxfp8, T, TNAME)                     \
  B12X_SILU_V(b12x_silu_and_mul_fp8b128f32, b12x::kQuantFp8B128F32, T, TNAME)           \
  B12X_SILU_V(b12x_silu_and_mul_fp8b128ue8m0, b12x::kQuantFp8B128Ue8m0, T, TNAME)       \
  B12X_SILU_V(b12x_silu_and_mul_nvfp4, b12x::kQuantNvfp4, T, TNAME)

B12X_SILU_EACH_OUTPUT(b12x::bf16, bf16)
B12X_SILU_EACH_OUTPUT(b12x::fp16, f16)
