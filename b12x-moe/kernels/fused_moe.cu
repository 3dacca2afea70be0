// fused_moe.cu — moe.fused_moe, the simple path (FP4 experts: W4A16, W4A8 MX, NVFP4 x NVFP4).  crate: b12x-moe
//   Per pair p = (t, slot), e = ids[t, slot] (skipped outside [0, E)), w = weights[t, slot]:
//   g, u = bf16(sum_c x[t, c] * W1_e[r, c])  (r = j gate, I + j up; non-gated: g only)
//   h[p, j] = bf16(w * act(g, u))          y_pairs[p, o] = bf16(sum_j h[p, j] * W2_e[o, j])
//   y[t, o] = bf16(sum over valid slots, in slot order, of f32(y_pairs[p, o]))
//   W = e2m1 * scale (MXFP4: UE8M0 per 32, exact; NVFP4: (e2m1 * UE4M3 per 16) / enc, the IEEE
//   division b12x-quant's dequantizer does), f32 accumulation in c / j order, the activation of
//   moe_math.cuh (the SFU's exp and reciprocal).
//   W4A8 MX / NVFP4 recipes: x's row (FC1) and h's row (FC2) are replaced by b12x-quant's
//   quantize-then-dequantize (MXFP8: E4M3, UE8M0 per 32, CeilPow2; NVFP4: E2M1, UE4M3 per 16 with
//   the expert's calibrated encode scale a1[e] / a2[e]) before the dot products.
// Tensors: x [T, Hd] bf16 (row stride ldx)   ids [T, k] i32   weights [T, k] f32 (contiguous)
//   W1 codes [E, R1, Hd/2] u8 (E2M1 pairs, element 2i in the low nibble), scales [E, R1, Hd/B] u8
//   W2 codes [E, Hd, I/2] u8, scales [E, Hd, I/B] u8, enc [E] f32 per matrix (NVFP4 weights)
//   a1, a2 [E] f32 (the NVFP4 recipe's activation encode scales)
//   h [P, I] bf16 and y_pairs [P, Hd] bf16 (scratch, P = T k)   y [T, Hd] bf16 (row stride ldy).
// Constraints: Hd, I multiples of B (16 NVFP4, 32 MXFP4), Hd, I <= kMoeMaxRow.
// Strategy: the oracle's loops on the GPU, for correctness first: FC1 CTAs (row block, pair) with
//   one thread per output row (its gate and up rows), x's row staged in shared memory as f32; FC2
//   the same over h; the combine one CTA per token. Each pair reads its expert's weights itself
//   (no sharing between the tokens of an expert) and threads read rows, not columns: slow by
//   design — the fast decode and grouped paths come next (src/fused_moe/README.md).
// Entry points: b12x_fused_moe_simple_fc1_{w4a16_nvfp4,w4a16_mxfp4,w4a8_mx,nvfp4}_{silu,oai,relu2},
//   b12x_fused_moe_simple_fc2_{w4a16_nvfp4,w4a16_mxfp4,w4a8_mx,nvfp4}, b12x_fused_moe_combine,
//   b12x_fused_moe_route_topk_{softmax,sigmoid,sqrtsoftplus} (router logits in the op).
//   Oracle: src/fused_moe/reference.rs
#include <stddef.h>
#include <stdint.h>

#include "b12x/common.cuh"
#include "b12x/e2m1.cuh"
#include "b12x/quant.cuh"
#include "moe_math.cuh"
#include "route_topk.cuh"

namespace b12x {

// Mirrored by src/fused_moe/params.rs (size and offsets asserted on both sides).
struct FusedMoeParams {
  const bf16* x;                   // [T, Hd], row stride ldx
  const int32_t* ids;              // [T, k]
  const float* weights;            // [T, k]
  const unsigned char* w1_codes;   // [E, R1, Hd/2]
  const unsigned char* w1_scales;  // [E, R1, Hd/B]
  const float* w1_enc;             // [E] (NVFP4) or null
  const unsigned char* w2_codes;   // [E, Hd, I/2]
  const unsigned char* w2_scales;  // [E, Hd, I/B]
  const float* w2_enc;             // [E] (NVFP4) or null
  const float* a1_enc;             // [E]: x's NVFP4 encode scale per expert (NVFP4 recipe) or null
  const float* a2_enc;             // [E]: h's NVFP4 encode scale per expert (NVFP4 recipe) or null
  bf16* h;                         // [T k, I] scratch
  bf16* y_pairs;                   // [T k, Hd] scratch
  bf16* y;                         // [T, Hd], row stride ldy
  unsigned int* error;             // [1] fault bits
  int64_t ldx;                     // elements between rows of x
  int64_t ldy;                     // elements between rows of y
  int32_t tokens;                  // T
  int32_t top_k;                   // k
  int32_t experts;                 // E
  int32_t hidden;                  // Hd
  int32_t inter;                   // I
  float limit;                     // the activation's limit (+inf: none)
  int32_t flags;                   // zero
  int32_t reserved;                // zero
};
static_assert(sizeof(FusedMoeParams) == 168, "size must match src/fused_moe/params.rs");
static_assert(offsetof(FusedMoeParams, ldx) == 120, "offset must match params.rs");
static_assert(offsetof(FusedMoeParams, tokens) == 136, "offset must match params.rs");
static_assert(offsetof(FusedMoeParams, limit) == 156, "offset must match params.rs");

// Fault bit (src/fused_moe/mod.rs: FAULT_EXPERT_ID).
constexpr unsigned kMoeFaultExpertId = 1;
constexpr int kMoeThreads = 128;
constexpr int kMoeMaxRow = 8192;

// Recipes: the weights' format and what the activations go through.
constexpr int kW4a16Nvfp4 = 0;
constexpr int kW4a16Mxfp4 = 1;
constexpr int kW4a8Mx = 2;
constexpr int kNvfp4 = 3;
template <int RECIPE>
constexpr bool kNvfp4Weights = RECIPE == kW4a16Nvfp4 || RECIPE == kNvfp4;

// Element c of row `row` of an FP4 matrix with K columns: codes row-major [rows, K/2], scales
// [rows, K/B]; NVFP4 divides by `enc` (each step one f32 operation, as the CPU dequantizer).
template <bool kNvfp4>
__device__ __forceinline__ float fp4_at(const unsigned char* codes, const unsigned char* scales, long long row,
                                        int K, int c, float enc) {
  constexpr int B = kNvfp4 ? 16 : 32;
  const uint32_t byte = codes[row * (K / 2) + c / 2];
  const float v = e2m1_value(c & 1 ? byte >> 4 : byte);
  const uint32_t s = scales[row * (K / B) + c / B];
  if constexpr (kNvfp4) {
    return (v * ue4m3_value(s)) / enc;
  } else {
    return v * ue8m0_value(s);
  }
}

// The row quantizers of the simple path: one thread per block of v[0, n) in place (moe_math.cuh's
// block rules: MXFP8 per 32, NVFP4 per 16 with encode scale enc, divided by it as b12x-quant's
// dequantizer does); the caller synchronizes before and after.
__device__ __forceinline__ void mxfp8_qdq_row(float* v, int n) {
  for (int b = threadIdx.x; b < n / 32; b += blockDim.x) mxfp8_qdq_block(v + b * 32);
}
__device__ __forceinline__ void nvfp4_qdq_row(float* v, int n, float enc) {
  for (int b = threadIdx.x; b < n / 16; b += blockDim.x) nvfp4_qdq_block<true>(v + b * 16, enc);
}

// The recipe's activation operand: row v[0, n) as the GEMM sees it (W4A16: as is).
template <int RECIPE>
__device__ __forceinline__ void act_operand(float* v, int n, const float* a_enc, int e) {
  if constexpr (RECIPE == kW4a8Mx) {
    __syncthreads();
    mxfp8_qdq_row(v, n);
  } else if constexpr (RECIPE == kNvfp4) {
    __syncthreads();
    nvfp4_qdq_row(v, n, __ldg(a_enc + e));
  }
}

// The pair's expert, or -1 when its id is outside [0, E).
__device__ __forceinline__ int moe_expert(const FusedMoeParams& p, int pair) {
  const int e = __ldg(p.ids + pair);
  return e >= 0 && e < p.experts ? e : -1;
}

template <int RECIPE, int ACT>
__device__ __forceinline__ void moe_fc1(const FusedMoeParams& p) {
  constexpr bool kNvfp4 = kNvfp4Weights<RECIPE>;
  __shared__ float s_x[kMoeMaxRow];
  const int pair = blockIdx.y, t = pair / p.top_k;
  const int e = moe_expert(p, pair);
  if (e < 0) return;
  const int hd = p.hidden, I = p.inter;
  const bf16* x = p.x + t * p.ldx;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) s_x[c] = __bfloat162float(x[c]);
  act_operand<RECIPE>(s_x, hd, p.a1_enc, e);
  __syncthreads();
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= I) return;
  const bool gated = ACT != kActRelu2;
  const long long r1 = gated ? 2LL * I : I;
  const float enc = kNvfp4 ? __ldg(p.w1_enc + e) : 1.0f;
  float g = 0.0f, u = 0.0f;
  for (int c = 0; c < hd; ++c) {
    g += s_x[c] * fp4_at<kNvfp4>(p.w1_codes, p.w1_scales, e * r1 + j, hd, c, enc);
    if (gated) u += s_x[c] * fp4_at<kNvfp4>(p.w1_codes, p.w1_scales, e * r1 + I + j, hd, c, enc);
  }
  const float gb = __bfloat162float(__float2bfloat16_rn(g));
  const float ub = __bfloat162float(__float2bfloat16_rn(u));
  const float w = __ldg(p.weights + pair);
  p.h[(long long)pair * I + j] = __float2bfloat16_rn(w * moe_act<ACT>(gb, ub, p.limit));
}

template <int RECIPE>
__device__ __forceinline__ void moe_fc2(const FusedMoeParams& p) {
  constexpr bool kNvfp4 = kNvfp4Weights<RECIPE>;
  __shared__ float s_h[kMoeMaxRow];
  const int pair = blockIdx.y;
  const int e = moe_expert(p, pair);
  if (e < 0) return;
  const int hd = p.hidden, I = p.inter;
  for (int j = threadIdx.x; j < I; j += blockDim.x) s_h[j] = __bfloat162float(p.h[(long long)pair * I + j]);
  act_operand<RECIPE>(s_h, I, p.a2_enc, e);
  __syncthreads();
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= hd) return;
  const float enc = kNvfp4 ? __ldg(p.w2_enc + e) : 1.0f;
  float acc = 0.0f;
  for (int j = 0; j < I; ++j) acc += s_h[j] * fp4_at<kNvfp4>(p.w2_codes, p.w2_scales, (long long)e * hd + o, I, j, enc);
  p.y_pairs[(long long)pair * hd + o] = __float2bfloat16_rn(acc);
}

// y[t] = bf16(sum of the valid slots' y_pairs, in slot order); a bad id sets the fault bit once
// per slot.
__device__ __forceinline__ void moe_combine(const FusedMoeParams& p) {
  const int t = blockIdx.x, k = p.top_k, hd = p.hidden;
  if (threadIdx.x < k && moe_expert(p, t * k + threadIdx.x) < 0) atomicOr(p.error, kMoeFaultExpertId);
  for (int o = threadIdx.x; o < hd; o += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < k; ++s) {
      const int pair = t * k + s;
      if (moe_expert(p, pair) >= 0) acc += __bfloat162float(p.y_pairs[(long long)pair * hd + o]);
    }
    p.y[t * p.ldy + o] = __float2bfloat16_rn(acc);
  }
}

}  // namespace b12x

#define B12X_MOE_FC1(NAME, RECIPE, ACT)                                                              \
  extern "C" __global__ void __launch_bounds__(b12x::kMoeThreads)                                    \
      b12x_fused_moe_simple_fc1_##NAME(const __grid_constant__ b12x::FusedMoeParams p) {             \
    b12x::moe_fc1<RECIPE, ACT>(p);                                                                   \
  }
#define B12X_MOE_FC1_ACTS(NAME, RECIPE)                         \
  B12X_MOE_FC1(NAME##_silu, RECIPE, b12x::kActSilu)             \
  B12X_MOE_FC1(NAME##_oai, RECIPE, b12x::kActSwigluOai)         \
  B12X_MOE_FC1(NAME##_relu2, RECIPE, b12x::kActRelu2)
B12X_MOE_FC1_ACTS(w4a16_nvfp4, b12x::kW4a16Nvfp4)
B12X_MOE_FC1_ACTS(w4a16_mxfp4, b12x::kW4a16Mxfp4)
B12X_MOE_FC1_ACTS(w4a8_mx, b12x::kW4a8Mx)
B12X_MOE_FC1_ACTS(nvfp4, b12x::kNvfp4)

#define B12X_MOE_FC2(NAME, RECIPE)                                                                   \
  extern "C" __global__ void __launch_bounds__(b12x::kMoeThreads)                                    \
      b12x_fused_moe_simple_fc2_##NAME(const __grid_constant__ b12x::FusedMoeParams p) {             \
    b12x::moe_fc2<RECIPE>(p);                                                                        \
  }
B12X_MOE_FC2(w4a16_nvfp4, b12x::kW4a16Nvfp4)
B12X_MOE_FC2(w4a16_mxfp4, b12x::kW4a16Mxfp4)
B12X_MOE_FC2(w4a8_mx, b12x::kW4a8Mx)
B12X_MOE_FC2(nvfp4, b12x::kNvfp4)

extern "C" __global__ void __launch_bounds__(b12x::kMoeThreads)
    b12x_fused_moe_combine(const __grid_constant__ b12x::FusedMoeParams p) {
  b12x::moe_combine(p);
}

// Router logits routed inside the op (Query::router): moe.route_topk's kernel into the scratch's
// topk_ids / topk_weights, launched first.
B12X_ROUTE_TOPK_ENTRIES(b12x_fused_moe_route_topk_)
