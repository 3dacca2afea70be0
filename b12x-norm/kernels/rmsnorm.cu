// rmsnorm.cu — RMSNorm, optionally fused with a residual add.          crate: b12x-norm
//   y[t,:] = x[t,:] * rsqrt(mean(x[t,:]^2) + eps) * w[:]    (fp32 math, one rounding to TOut)
//   add form: r = round(x + residual) is written back to residual, then y = rmsnorm(r).
// Tensors (row-major, strides in elements):  x [T, D]  residual [T, D]  w [D]  y [T, D], one dtype
// Constraints: D % 8 == 0, D <= 16384, 16-byte aligned rows.   Strategy: one CTA per row, the
//   row held in registers as 16-byte vectors, deterministic fp32 block reduce.
// Entry points: b12x_rmsnorm_v{1,2,4,8}_{bf16,f16,f32}, b12x_rmsnorm_add_v{1,2,4,8}_{bf16,f16,f32}.
// Oracle: src/rmsnorm/reference.rs
#include <stddef.h>

#include "b12x/common.cuh"

namespace b12x {

// Mirrored by src/rmsnorm/params.rs (size and offsets asserted on both sides).
// Every tensor has the dtype of the entry point; strides are in elements.
struct RmsnormParams {
  const void* x;            // [T, D], row stride x_stride; y may alias it
  void* residual;           // [T, D], row stride residual_stride; overwritten with x + residual
                            //   (add form only; null otherwise)
  const void* w;            // [D]
  void* y;                  // [T, D], row stride y_stride
  int64_t x_stride;         // elements between rows of x
  int64_t residual_stride;  // elements between rows of residual
  int64_t y_stride;         // elements between rows of y
  int32_t rows;             // T: live row count; the grid has one CTA per row
  int32_t cols;             // D
  float eps;                // added to mean(x^2) before the rsqrt
  uint32_t reserved;        // zero; pads the struct to a multiple of 8 bytes
};
static_assert(sizeof(RmsnormParams) == 72, "size must match src/rmsnorm/params.rs");
static_assert(offsetof(RmsnormParams, residual) == 8, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, w) == 16, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, y) == 24, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, x_stride) == 32, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, residual_stride) == 40, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, y_stride) == 48, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, rows) == 56, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, cols) == 60, "offset must match params.rs");
static_assert(offsetof(RmsnormParams, eps) == 64, "offset must match params.rs");

// The largest D a plan accepts (mod.rs: MAX_COLS).
constexpr int kMaxCols = 16384;
// Hardware limit on threads per CTA.
constexpr int kMaxBlockThreads = 1024;

// Block size bound of one variant: the host launches round_up(ceil(D / VEC / kVecsPerThread), 32)
// threads, at most this many. A tight bound lets ptxas give large-kVecsPerThread variants the
// registers to hold a whole row without spilling.
template <typename TIn, int kVecsPerThread>
constexpr int rmsnorm_max_threads() {
  return kMaxCols / VecN<TIn>::value / kVecsPerThread < kMaxBlockThreads
             ? kMaxCols / VecN<TIn>::value / kVecsPerThread
             : kMaxBlockThreads;
}

// One CTA normalizes row blockIdx.x. Thread `tid` owns the 16-byte vectors tid + k * blockDim.x,
// k < kVecsPerThread, so each load instruction of a warp covers 512 contiguous bytes.
template <typename TIn, int kVecsPerThread, bool kHasResidual>
__device__ __forceinline__ void rmsnorm_row(const RmsnormParams& p) {
  using TOut = TIn;
  constexpr int VEC = VecN<TIn>::value;
  static_assert(kVecsPerThread == 1 || kVecsPerThread == 2 || kVecsPerThread == 4 ||
                    kVecsPerThread == 8,
                "the variant table in mod.rs lists 1, 2, 4, 8");
  static_assert(kMaxCols % (VEC * kVecsPerThread * 32) == 0, "rmsnorm_max_threads is whole warps");
  __shared__ float s_red[33];

  const int64_t row = blockIdx.x;
  const int nvec = p.cols / VEC;
  const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const TIn*>(p.x) + row * p.x_stride);
  const Vec16* g_w = static_cast<const Vec16*>(p.w);
  Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<TOut*>(p.y) + row * p.y_stride);

  // x and residual may be written by this grid (y may alias x), so they use coherent loads; w is
  // read-only and goes through the non-coherent path. All loads are issued before any math so a
  // thread has its whole row in flight at once. Out-of-row vectors stay zero: they add nothing to
  // the sum of squares and are never stored.
  Vec16 r_x[kVecsPerThread];
  Vec16 r_res[kVecsPerThread];
  Vec16 r_w[kVecsPerThread];
  Vec16* g_res = nullptr;
  if constexpr (kHasResidual) {
    g_res = reinterpret_cast<Vec16*>(static_cast<TIn*>(p.residual) + row * p.residual_stride);
  }
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    r_x[k] = Vec16{};
    if (i < nvec) r_x[k] = ld_global_cg_v16(g_x + i);
  }
  if constexpr (kHasResidual) {
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      r_res[k] = Vec16{};
      if (i < nvec) r_res[k] = ld_global_cg_v16(g_res + i);
    }
  }
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) r_w[k] = ld_global_v16(g_w + i);
  }

  float r_ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    float f_x[VEC];
    unpack_f32<TIn>(r_x[k], f_x);
    if constexpr (kHasResidual) {
      // r = round(x + residual): the rounded sum is the new residual and the normalized input.
      const int i = threadIdx.x + k * blockDim.x;
      float f_res[VEC];
      unpack_f32<TIn>(r_res[k], f_res);
#pragma unroll
      for (int j = 0; j < VEC; ++j) f_x[j] += f_res[j];
      r_x[k] = pack_from_f32<TIn>(f_x);
      if (i < nvec) st_global_v16(g_res + i, r_x[k]);
      unpack_f32<TIn>(r_x[k], f_x);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) r_ss = fmaf(f_x[j], f_x[j], r_ss);
  }
  const float ss = block_sum(r_ss, s_red);
  // Keep the row packed across the barrier: without this fence the compiler reuses the unpacked
  // floats of the sum of squares below, which doubles the registers a row needs.
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    asm volatile("" : "+r"(r_x[k].w[0]), "+r"(r_x[k].w[1]), "+r"(r_x[k].w[2]), "+r"(r_x[k].w[3]));
  }
  // IEEE division and addition (no fast math); rsqrtf is within 2 ulp (CUDA C Programming Guide,
  // "Mathematical Functions"). The oracle's tolerance accounts for it.
  const float rrms = rsqrtf(ss / static_cast<float>(p.cols) + p.eps);

#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) {
      float f_x[VEC], f_w[VEC], f_y[VEC];
      unpack_f32<TIn>(r_x[k], f_x);
      unpack_f32<TIn>(r_w[k], f_w);
#pragma unroll
      for (int j = 0; j < VEC; ++j) f_y[j] = (f_x[j] * rrms) * f_w[j];
      st_global_v16(g_y + i, pack_from_f32<TOut>(f_y));
    }
  }
}

}  // namespace b12x

// One entry point per (form, kVecsPerThread, dtype); the variant table in src/rmsnorm/mod.rs
// lists exactly these symbols.
#define B12X_RMSNORM_KERNEL(NAME, TIN, KV, HAS_RESIDUAL)                                \
  extern "C" __global__ void __launch_bounds__(b12x::rmsnorm_max_threads<TIN, KV>()) \
      NAME(const __grid_constant__ b12x::RmsnormParams p) {                            \
    b12x::rmsnorm_row<TIN, KV, HAS_RESIDUAL>(p);                                        \
  }

B12X_RMSNORM_KERNEL(b12x_rmsnorm_v1_bf16, b12x::bf16, 1, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v2_bf16, b12x::bf16, 2, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v4_bf16, b12x::bf16, 4, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v8_bf16, b12x::bf16, 8, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v1_f16, b12x::fp16, 1, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v2_f16, b12x::fp16, 2, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v4_f16, b12x::fp16, 4, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v8_f16, b12x::fp16, 8, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v1_f32, float, 1, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v2_f32, float, 2, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v4_f32, float, 4, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_v8_f32, float, 8, false)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v1_bf16, b12x::bf16, 1, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v2_bf16, b12x::bf16, 2, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v4_bf16, b12x::bf16, 4, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v8_bf16, b12x::bf16, 8, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v1_f16, b12x::fp16, 1, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v2_f16, b12x::fp16, 2, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v4_f16, b12x::fp16, 4, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v8_f16, b12x::fp16, 8, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v1_f32, float, 1, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v2_f32, float, 2, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v4_f32, float, 4, true)
B12X_RMSNORM_KERNEL(b12x_rmsnorm_add_v8_f32, float, 8, true)
