// rmsnorm.cu — RMSNorm, optionally fused with a residual add.          crate: b12x-norm
//   y[t,:] = x[t,:] * rsqrt(mean(x[t,:]^2) + eps) * w[:]    (fp32 math, one rounding to TOut)
//   add form: r = round(x + residual) is written back to residual, then y = rmsnorm(r).
// Tensors (row-major, strides in elements):  x [T, D]  residual [T, D]  w [D]  y [T, D], one dtype
// Constraints: D % 8 == 0, D <= 16384, 16-byte aligned rows.   Strategy: one CTA per row, the
//   row held in registers as 16-byte vectors, deterministic fp32 block reduce; the quantized
//   outputs (v2..v8) swap vectors between neighbour lanes so each lane quantizes two consecutive
//   vectors (16 elements per block slot).
// Entry points: b12x_rmsnorm_v{1,2,4,8}_{bf16,f16,f32}, b12x_rmsnorm_add_v{1,2,4,8}_{bf16,f16,f32};
//   fused quantized output (norm.rmsnorm_quant): b12x_rmsnorm[_add]_{mxfp8,fp8b128f32,fp8b128ue8m0,nvfp4}_v{1,2,4,8}_{bf16,f16}.
//   and two rows per CTA (plain form): b12x_rmsnorm_{mxfp8,fp8b128f32,fp8b128ue8m0,nvfp4}_v4r2_{bf16,f16}.
// Oracle: src/rmsnorm/reference.rs
#include <stddef.h>

#include <type_traits>

#include "b12x/common.cuh"
#include "b12x/e2m1.cuh"
#include "b12x/quant.cuh"

#include "quant_row.cuh"

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
  uint32_t flags;           // kRmsnorm* bits (zero: none); norm.rmsnorm_quant passes zero
};
// flags: a PDL launch lets the next PDL kernel launch at entry, before its own wait
// (Plan::with_early_release): the next kernel's pre-wait part may then run beside the kernel
// before this one, not only beside this one.
constexpr uint32_t kRmsnormReleaseAtEntry = 1;
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

// Parameters of the fused entry points: the plain ones, then the quantized outputs.
// Mirrored by src/rmsnorm_quant.rs.
struct RmsnormQuantParams : RmsnormParams {
  unsigned char* codes;  // [T, D] e4m3 or [T, D/2] e2m1 pairs (NVFP4), row stride ldq bytes
  void* scales;          // [T, D/32] u8 (MXFP8), [T, D/128] f32|u8 (block FP8), [T, D/16] u8 (NVFP4);
                         //   row stride lds elements
  int64_t ldq;
  int64_t lds;
  const float* enc;      // [1] NVFP4 encode scale (given), else null
};
static_assert(sizeof(RmsnormQuantParams) == 112, "size must match src/rmsnorm_quant.rs");

template <int kQuant>
__device__ __forceinline__ QuantRow quant_row(const RmsnormQuantParams& p, int64_t row, float enc, const float* rcp) {
  constexpr int kScaleBytes = kQuant == kQuantFp8B128F32 ? 4 : 1;
  QuantRow q;
  q.codes = p.codes + row * p.ldq;
  q.scales = static_cast<unsigned char*>(p.scales) + row * p.lds * kScaleBytes;
  q.enc = enc;
  q.rcp = rcp;
  // Opaque: kept in registers, not recomputed from the parameters at every store.
  asm volatile("" : "+l"(q.codes), "+l"(q.scales));
  return q;
}

// One vector of y: (x · rrms) · w in f32, rounded to TOut (what rmsnorm stores and the quantizers
// see).
template <typename TIn, typename TOut>
__device__ __forceinline__ Vec16 norm_vec(const Vec16& x, const Vec16& w, float rrms) {
  constexpr int VEC = VecN<TIn>::value;
  float f_x[VEC], f_w[VEC], f_y[VEC];
  unpack_f32<TIn>(x, f_x);
  unpack_f32<TIn>(w, f_w);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f_y[j] = (f_x[j] * rrms) * f_w[j];
  return pack_from_f32<TOut>(f_y);
}

// One CTA normalizes row blockIdx.x. Thread `tid` owns the 16-byte vectors tid + k * blockDim.x,
// k < kVecsPerThread, so each load instruction of a warp covers 512 contiguous bytes.
template <typename TIn, int kVecsPerThread, bool kHasResidual, int kQuant = kQuantNone,
          typename P = RmsnormParams>
__device__ __forceinline__ void rmsnorm_row(const P& p) {
  using TOut = TIn;
  constexpr int VEC = VecN<TIn>::value;
  static_assert(kVecsPerThread == 1 || kVecsPerThread == 2 || kVecsPerThread == 4 ||
                    kVecsPerThread == 8,
                "the variant table in mod.rs lists 1, 2, 4, 8");
  static_assert(kMaxCols % (VEC * kVecsPerThread * 32) == 0, "rmsnorm_max_threads is whole warps");
  __shared__ float s_red[33];
  // NVFP4: the block-scale reciprocals, written before block_sum's barriers, read after them.
  __shared__ float s_rcp[kQuant == kQuantNvfp4 ? 128 : 1];

  // Vector tid + k * blockDim of the row is slot k of thread tid (the loads and the sum of
  // squares of every output, so its reduction order is rmsnorm's). The quantized outputs (v2..v8)
  // then pair them (quantize_row).
  const auto vidx = [](int k) -> int { return threadIdx.x + k * blockDim.x; };
  const int64_t row = blockIdx.x;
  const int nvec = p.cols / VEC;
  const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const TIn*>(p.x) + row * p.x_stride);
  const Vec16* g_w = static_cast<const Vec16*>(p.w);
  Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<TOut*>(p.y) + row * p.y_stride);  // unused when kQuant

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
    const int i = vidx(k);
    r_x[k] = Vec16{};
    if (i < nvec) r_x[k] = ld_global_cg_v16(g_x + i);
  }
  if constexpr (kHasResidual) {
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int i = vidx(k);
      r_res[k] = Vec16{};
      if (i < nvec) r_res[k] = ld_global_cg_v16(g_res + i);
    }
  }
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int i = vidx(k);
    if constexpr (kQuant == kQuantNvfp4) r_w[k] = Vec16{};  // y_of reads every slot
    if (i < nvec) r_w[k] = ld_global_v16(g_w + i);
  }

  float enc = 0.0f;
  if constexpr (kQuant == kQuantNvfp4) {
    enc = *p.enc;
    nvfp4_rcp_table(enc, s_rcp);
  }

  float r_ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    float f_x[VEC];
    unpack_f32<TIn>(r_x[k], f_x);
    if constexpr (kHasResidual) {
      // r = round(x + residual): the rounded sum is the new residual and the normalized input.
      const int i = vidx(k);
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
  const QuantRow qr = [&] {
    if constexpr (kQuant != kQuantNone) {
      return quant_row<kQuant>(p, row, enc, s_rcp);
    } else {
      return QuantRow{};
    }
  }();

  // y rounded to the output dtype (what rmsnorm stores, and what the quantizer sees) of slot k;
  // zeros past the row end. NVFP4 computes it without the branch: past the row end x and w are
  // zero, so y is 0 (NaN if rrms is not finite), and those vectors only ever form whole blocks of
  // their own (D is a multiple of the block), whose results are never stored. (The branch-free
  // form was 1.4-4.2% faster for NVFP4; the E4M3 outputs' kernels needed more registers with it
  // and were slower at 9 of 12 shapes, up to 5.9%: bench-results/2026-12-01-h200-k/yof.)
  const auto y_of = [&](int k, int i) {
    Vec16 yv{};
    if (kQuant == kQuantNvfp4 || i < nvec) yv = norm_vec<TIn, TOut>(r_x[k], r_w[k], rrms);
    return yv;
  };
  if constexpr (kQuant != kQuantNone) {
    quantize_row<kQuant, TOut, kVecsPerThread>(qr, nvec, y_of);
  } else {
    // y_of's body, written out: through the lambda ptxas schedules the plain kernels differently
    // (SASS differs on sm_90a), and these are the validated, benchmarked norm.rmsnorm kernels.
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int i = vidx(k);
      Vec16 yv{};
      if (i < nvec) {
        float f_x[VEC], f_w[VEC], f_y[VEC];
        unpack_f32<TIn>(r_x[k], f_x);
        unpack_f32<TIn>(r_w[k], f_w);
#pragma unroll
        for (int j = 0; j < VEC; ++j) f_y[j] = (f_x[j] * rrms) * f_w[j];
        yv = pack_from_f32<TOut>(f_y);
        st_global_v16(g_y + i, yv);
      }
    }
  }
}

// Two rows per CTA (norm.rmsnorm_quant's "v4r2" configs, plain form): CTA c normalizes rows 2c
// and 2c + 1 with rmsnorm_row's layout and reduction, so each row's outputs equal the one-row
// kernel's with the same kVecsPerThread bit for bit. w is loaded once for both rows and both rows'
// loads are in flight together, with half the CTAs (and barriers) of the one-row grid: at the same
// registers per thread an SM holds more rows in flight (4 CTAs of 7 warps at D = 7168 hold 8 rows
// where v4 holds 5). The host launches ceil(T / 2) CTAs; a last odd row leaves the second idle.
template <typename TIn, int kVecsPerThread, int kQuant>
__device__ __forceinline__ void rmsnorm_quant_two_rows(const RmsnormQuantParams& p) {
  using TOut = TIn;
  constexpr int VEC = VecN<TIn>::value;
  static_assert(VEC == 8 && kQuant != kQuantNone, "quantized outputs take bf16/f16 rows");
  __shared__ float s_red[2][33];
  __shared__ float s_rcp[kQuant == kQuantNvfp4 ? 128 : 1];
  const auto vidx = [](int k) -> int { return threadIdx.x + k * blockDim.x; };
  const int nvec = p.cols / VEC;
  const int64_t row0 = 2 * (int64_t)blockIdx.x;
  const bool has1 = row0 + 1 < p.rows;  // CTA-uniform
  Vec16 r_x[2][kVecsPerThread];
  Vec16 r_w[kVecsPerThread];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const TIn*>(p.x) + (row0 + r) * p.x_stride);
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int i = vidx(k);
      r_x[r][k] = Vec16{};
      if (i < nvec && (r == 0 || has1)) r_x[r][k] = ld_global_cg_v16(g_x + i);
    }
  }
  const Vec16* g_w = static_cast<const Vec16*>(p.w);
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int i = vidx(k);
    r_w[k] = Vec16{};
    if (i < nvec) r_w[k] = ld_global_v16(g_w + i);
  }
  float enc = 0.0f;
  if constexpr (kQuant == kQuantNvfp4) {
    enc = *p.enc;
    nvfp4_rcp_table(enc, s_rcp);
  }
  float ss[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      float f_x[VEC];
      unpack_f32<TIn>(r_x[r][k], f_x);
#pragma unroll
      for (int j = 0; j < VEC; ++j) ss[r] = fmaf(f_x[j], f_x[j], ss[r]);
    }
  // block_sum for both rows under the same two barriers (per row the same operations in the same
  // order, so the same bits).
  {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    const float v0 = warp_sum(ss[0]), v1 = warp_sum(ss[1]);
    if (lane == 0) {
      s_red[0][warp] = v0;
      s_red[1][warp] = v1;
    }
    __syncthreads();
    if (warp == 0) {
      const float t0 = warp_sum(lane < nwarps ? s_red[0][lane] : 0.0f);
      const float t1 = warp_sum(lane < nwarps ? s_red[1][lane] : 0.0f);
      if (lane == 0) {
        s_red[0][32] = t0;
        s_red[1][32] = t1;
      }
    }
    __syncthreads();
    ss[0] = s_red[0][32];
    ss[1] = s_red[1][32];
  }
  // Keep the rows packed across the barrier (as rmsnorm_row).
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k)
      asm volatile("" : "+r"(r_x[r][k].w[0]), "+r"(r_x[r][k].w[1]), "+r"(r_x[r][k].w[2]), "+r"(r_x[r][k].w[3]));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (r == 1 && !has1) break;
    const float rrms = rsqrtf(ss[r] / static_cast<float>(p.cols) + p.eps);
    const QuantRow qr = quant_row<kQuant>(p, row0 + r, enc, s_rcp);
    // rmsnorm_row's y_of.
    const auto y_of = [&](int k, int i) {
      Vec16 yv{};
      if (kQuant == kQuantNvfp4 || i < nvec) yv = norm_vec<TIn, TOut>(r_x[r][k], r_w[k], rrms);
      return yv;
    };
    quantize_row<kQuant, TOut, kVecsPerThread>(qr, nvec, y_of);
  }
}

}  // namespace b12x

// One entry point per (form, kVecsPerThread, dtype); the variant table in src/rmsnorm/mod.rs
// lists exactly these symbols. Each first waits for the kernel before it (a PDL launch,
// `Plan::with_pdl`; launched plainly the wait returns at once), then lets a PDL-launched next
// kernel (a GEMV streaming its weight) start, whose own wait still waits for this grid; with
// kRmsnormReleaseAtEntry the next kernel may launch before that wait.
// (The norm.rmsnorm_quant entry points below do not.)
#define B12X_RMSNORM_KERNEL(NAME, TIN, KV, HAS_RESIDUAL)                                \
  extern "C" __global__ void __launch_bounds__(b12x::rmsnorm_max_threads<TIN, KV>()) \
      NAME(const __grid_constant__ b12x::RmsnormParams p) {                            \
    if (p.flags & b12x::kRmsnormReleaseAtEntry) b12x::pdl_launch_dependents();          \
    b12x::pdl_wait_then_release();                                                      \
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

// Fused norm -> quantize: quantized output only (codes + scales; y is not written).
// Register bounds: the plain (no residual) v4 forms are capped at 48 registers, where none spills
// on sm_90a. An SM sub-partition then holds 10 warps (16384 registers) instead of 9 (56 allocated)
// or 8 (NVFP4, 64): D = 4096 rows (4-warp CTAs) fit 10 CTAs per SM instead of 9, D = 7168 rows
// (7-warp CTAs) 5 instead of 4 for NVFP4 and still 5 for the E4M3 outputs (ncu, session 23).
// The plain v8 forms of the power-of-two E4M3 outputs (MXFP8, block FP8 UE8M0) take 72 (7 warps
// per sub-partition instead of 6: D = 7168's 4-warp CTAs 7 per SM instead of 6); block FP8 f32
// and NVFP4 spill at 72 and keep the launch bound (80 registers on sm_90a).
// On sm_120a/121a the NVFP4 form (hardware E2M1 conversion) spills at 48 and takes 56. The other
// forms keep the launch bound alone (the residual forms' v4 spill at 56).
#define B12X_RQ_BOUNDS(TIN, KV, HAS_RESIDUAL, QUANT, QNAME) \
  B12X_RQ_BOUNDS_##KV##_##HAS_RESIDUAL(TIN, KV, QUANT, QNAME)
#define B12X_RQ_BOUNDS_LB(TIN, KV, QUANT, QNAME) __launch_bounds__(b12x::rmsnorm_max_threads<TIN, KV>())
#define B12X_RQ_BOUNDS_1_false B12X_RQ_BOUNDS_LB
#define B12X_RQ_BOUNDS_2_false B12X_RQ_BOUNDS_LB
#define B12X_RQ_BOUNDS_4_false(TIN, KV, QUANT, QNAME) \
  __maxnreg__(B12X_SM120_FEATURES && QUANT == b12x::kQuantNvfp4 ? 56 : 48)
#define B12X_RQ_BOUNDS_8_false(TIN, KV, QUANT, QNAME) B12X_RQ_V8_##QNAME(TIN, KV, QUANT, QNAME)
#define B12X_RQ_V8_mxfp8(TIN, KV, QUANT, QNAME) __maxnreg__(72)
#define B12X_RQ_V8_fp8b128ue8m0(TIN, KV, QUANT, QNAME) __maxnreg__(72)
#define B12X_RQ_V8_fp8b128f32 B12X_RQ_BOUNDS_LB
#define B12X_RQ_V8_nvfp4 B12X_RQ_BOUNDS_LB
#define B12X_RQ_BOUNDS_1_true B12X_RQ_BOUNDS_LB
#define B12X_RQ_BOUNDS_2_true B12X_RQ_BOUNDS_LB
#define B12X_RQ_BOUNDS_4_true B12X_RQ_BOUNDS_LB
#define B12X_RQ_BOUNDS_8_true B12X_RQ_BOUNDS_LB
#define B12X_RMSNORM_QUANT_KERNEL(NAME, TIN, KV, HAS_RESIDUAL, QUANT, QNAME)            \
  extern "C" __global__ void B12X_RQ_BOUNDS(TIN, KV, HAS_RESIDUAL, QUANT, QNAME)       \
      NAME(const __grid_constant__ b12x::RmsnormQuantParams p) {                       \
    b12x::rmsnorm_row<TIN, KV, HAS_RESIDUAL, QUANT, b12x::RmsnormQuantParams>(p);       \
  }
#define B12X_RMSNORM_QUANT_V(FORM, RES, QNAME, QUANT, TIN, TNAME)                                          \
  B12X_RMSNORM_QUANT_KERNEL(b12x_rmsnorm##FORM##_##QNAME##_v1_##TNAME, TIN, 1, RES, QUANT, QNAME)                 \
  B12X_RMSNORM_QUANT_KERNEL(b12x_rmsnorm##FORM##_##QNAME##_v2_##TNAME, TIN, 2, RES, QUANT, QNAME)                 \
  B12X_RMSNORM_QUANT_KERNEL(b12x_rmsnorm##FORM##_##QNAME##_v4_##TNAME, TIN, 4, RES, QUANT, QNAME)                 \
  B12X_RMSNORM_QUANT_KERNEL(b12x_rmsnorm##FORM##_##QNAME##_v8_##TNAME, TIN, 8, RES, QUANT, QNAME)
#define B12X_RMSNORM_QUANT_FORMS(QNAME, QUANT, TIN, TNAME)                                                 \
  B12X_RMSNORM_QUANT_V(, false, QNAME, QUANT, TIN, TNAME)                                                  \
  B12X_RMSNORM_QUANT_V(_add, true, QNAME, QUANT, TIN, TNAME)
// M(QNAME, QUANT, TIN, TNAME) for each quantized output.
#define B12X_RQ_EACH_OUTPUT(M, TIN, TNAME)                \
  M(mxfp8, b12x::kQuantMxfp8, TIN, TNAME)                 \
  M(fp8b128f32, b12x::kQuantFp8B128F32, TIN, TNAME)       \
  M(fp8b128ue8m0, b12x::kQuantFp8B128Ue8m0, TIN, TNAME)   \
  M(nvfp4, b12x::kQuantNvfp4, TIN, TNAME)

B12X_RQ_EACH_OUTPUT(B12X_RMSNORM_QUANT_FORMS, b12x::bf16, bf16)
B12X_RQ_EACH_OUTPUT(B12X_RMSNORM_QUANT_FORMS, b12x::fp16, f16)

// Two rows per CTA (plain form, kVecsPerThread 4: norm.rmsnorm_quant's "v4r2" configs), capped at
// 64 registers for the power-of-two E4M3 outputs and 72 for block FP8 f32 and NVFP4 (none spills
// there on sm_90a; on sm_120a/121a NVFP4, with the hardware E2M1 conversion, spills at 72 and
// takes 80). At D = 7168 (7-warp CTAs) either cap holds 4 CTAs, 8 rows, per SM;
// at D = 4096 64 registers hold 8 CTAs (16 rows) and 72 hold 7 (session 24, rows-r4: 72 was
// 3-5% faster for block FP8 f32 and NVFP4 at D = 7168, and up to 6% slower for the others).
#define B12X_RQ2_CAP_mxfp8 64
#define B12X_RQ2_CAP_fp8b128ue8m0 64
#define B12X_RQ2_CAP_fp8b128f32 72
#define B12X_RQ2_CAP_nvfp4 (B12X_SM120_FEATURES ? 80 : 72)
#define B12X_RMSNORM_QUANT_TWO_ROWS(QNAME, QUANT, TIN, TNAME)                                 \
  extern "C" __global__ void __maxnreg__(B12X_RQ2_CAP_##QNAME)                                \
      b12x_rmsnorm_##QNAME##_v4r2_##TNAME(const __grid_constant__ b12x::RmsnormQuantParams p) { \
    b12x::rmsnorm_quant_two_rows<TIN, 4, QUANT>(p);                                           \
  }
B12X_RQ_EACH_OUTPUT(B12X_RMSNORM_QUANT_TWO_ROWS, b12x::bf16, bf16)
B12X_RQ_EACH_OUTPUT(B12X_RMSNORM_QUANT_TWO_ROWS, b12x::fp16, f16)
