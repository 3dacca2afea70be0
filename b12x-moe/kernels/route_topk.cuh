// route_topk.cuh — moe.route_topk's kernel body: router scores, top-k (or hash-table) selection.  crate: b12x-moe
//   s[e] = score(z[t, e]) in f32 (softmax with the row max subtracted; sigmoid; sqrt(softplus),
//   softplus(z) = z above 20) with the precise expf / log1pf / sqrtf and IEEE division;
//   key[e] = s[e] + bias[e]; ids[t, :] = the k largest keys (NaN below every number, ties -> the
//   lower id), or tid2eid[token_ids[t], :] (entries outside [0, E) and token ids outside the table
//   masked: id -1, weight 0, fault bit); w = s[id], renormalized by the f32 sum of the unmasked
//   slots in slot order (IEEE division; a zero sum leaves them), times route_scale.
// Tensors (row-major, strides in elements): logits [T, E] f32   bias [E] f32   token_ids [T] i32
//   tid2eid [vocab, k] i32   ids [T, k] i32   weights [T, k] f32   error [1] u32.
// Constraints: 1 <= k <= min(E, 32), E <= 4096 (the row's scores and keys in shared memory).
// Strategy: one CTA of kRouteThreads per token. The scores go to shared memory (softmax: a block
//   max, then the exponentials and their deterministic block sum); k rounds of a block argmax over
//   the keys not yet taken; thread 0 forms the weights and stores the row.
// Entry points (B12X_ROUTE_TOPK_ENTRIES below): b12x_route_topk_{softmax,sigmoid,sqrtsoftplus} in
//   route_topk.cu (moe.route_topk), b12x_fused_moe_route_topk_* in fused_moe.cu and
//   fused_moe_decode.cu (moe.fused_moe with router logits).   Oracle: src/route_topk/reference.rs
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "b12x/common.cuh"

namespace b12x {

// Mirrored by src/route_topk/params.rs (size and offsets asserted on both sides).
struct RouteTopkParams {
  const float* logits;       // [T, E], row stride logits_stride
  const float* bias;         // [E] (kRouteBias) or null
  const int32_t* token_ids;  // [T] (kRouteHash) or null
  const int32_t* tid2eid;    // [vocab, k] (kRouteHash) or null
  int32_t* ids;              // [T, k], row stride ids_stride
  float* weights;            // [T, k], row stride weights_stride
  unsigned int* error;       // [1] fault bits
  int64_t logits_stride;     // elements between rows of logits
  int64_t ids_stride;        // elements between rows of ids
  int64_t weights_stride;    // elements between rows of weights
  int32_t tokens;            // T
  int32_t experts;           // E
  int32_t top_k;             // k
  int32_t vocab;             // rows of tid2eid (kRouteHash)
  float route_scale;         // multiplies every weight
  int32_t flags;             // kRoute* bits
};
static_assert(sizeof(RouteTopkParams) == 104, "size must match src/route_topk/params.rs");
static_assert(offsetof(RouteTopkParams, logits_stride) == 56, "offset must match params.rs");
static_assert(offsetof(RouteTopkParams, tokens) == 80, "offset must match params.rs");
static_assert(offsetof(RouteTopkParams, route_scale) == 96, "offset must match params.rs");

constexpr int kRouteRenormalize = 1;
constexpr int kRouteHash = 2;
constexpr int kRouteBias = 4;
// Fault bits (src/route_topk/mod.rs: FAULT_EXPERT_ID, FAULT_TOKEN_ID).
constexpr unsigned kRouteFaultExpertId = 1;
constexpr unsigned kRouteFaultTokenId = 2;

constexpr int kRouteThreads = 256;
constexpr int kRouteWarps = kRouteThreads / 32;
constexpr int kRouteMaxExperts = 4096;
constexpr int kRouteMaxTopK = 32;

constexpr int kScoreSoftmax = 0;
constexpr int kScoreSigmoid = 1;
constexpr int kScoreSqrtSoftplus = 2;

// Whether (ka, a) ranks before (kb, b): larger keys first, NaN after every number, ties (and two
// NaNs) to the lower id; b < 0 is "no candidate", after everything.
__device__ __forceinline__ bool route_before(float ka, int a, float kb, int b) {
  if (b < 0) return a >= 0;
  if (a < 0) return false;
  const bool na = ka != ka, nb = kb != kb;
  if (na != nb) return nb;
  if (!na && ka != kb) return ka > kb;
  return a < b;
}

// Deterministic block max (fmaxf: a NaN loses to any number). `s_red` holds 33 floats.
__device__ __forceinline__ float route_block_max(float v, float* s_red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) s_red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float m = lane < kRouteWarps ? s_red[lane] : -INFINITY;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) s_red[32] = m;
  }
  __syncthreads();
  const float m = s_red[32];
  __syncthreads();
  return m;
}

template <int SCORE>
__device__ __forceinline__ float route_score(float z) {
  if constexpr (SCORE == kScoreSigmoid) {
    return 1.0f / (1.0f + expf(-z));
  } else {
    return sqrtf(z > 20.0f ? z : log1pf(expf(z)));
  }
}

template <int SCORE>
__device__ __forceinline__ void route_topk(const RouteTopkParams& p) {
  __shared__ float s_score[kRouteMaxExperts];
  __shared__ float s_key[kRouteMaxExperts];
  __shared__ unsigned char s_taken[kRouteMaxExperts];
  __shared__ float s_red[33];
  __shared__ float s_wkey[kRouteWarps];
  __shared__ int s_wid[kRouteWarps];
  __shared__ int s_ids[kRouteMaxTopK];
  const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int E = p.experts, k = p.top_k;
  const float* z = p.logits + t * p.logits_stride;
  if constexpr (SCORE == kScoreSoftmax) {
    float m = -INFINITY;
    for (int e = tid; e < E; e += kRouteThreads) {
      const float v = __ldg(z + e);
      s_score[e] = v;
      m = fmaxf(m, v);
    }
    m = route_block_max(m, s_red);
    // A NaN logit (or an infinite max: inf - inf) makes the sum NaN, so the whole row is NaN,
    // as the oracle's f64 softmax.
    float sum = 0.0f;
    for (int e = tid; e < E; e += kRouteThreads) {
      const float x = expf(s_score[e] - m);
      s_score[e] = x;
      sum += x;
    }
    sum = block_sum(sum, s_red);
    for (int e = tid; e < E; e += kRouteThreads) s_score[e] = s_score[e] / sum;
  } else {
    for (int e = tid; e < E; e += kRouteThreads) s_score[e] = route_score<SCORE>(__ldg(z + e));
  }
  const bool biased = p.flags & kRouteBias;
  for (int e = tid; e < E; e += kRouteThreads) {
    s_key[e] = biased ? s_score[e] + __ldg(p.bias + e) : s_score[e];
    s_taken[e] = 0;
  }
  __syncthreads();
  if (p.flags & kRouteHash) {
    if (tid < k) {
      const int tok = __ldg(p.token_ids + t);
      int id = -1;
      if (tok < 0 || tok >= p.vocab) {
        atomicOr(p.error, kRouteFaultTokenId);
      } else {
        id = __ldg(p.tid2eid + (long long)tok * k + tid);
        if (id < 0 || id >= E) {
          atomicOr(p.error, kRouteFaultExpertId);
          id = -1;
        }
      }
      s_ids[tid] = id;
    }
  } else {
    for (int r = 0; r < k; ++r) {
      float bk = 0.0f;
      int bi = -1;
      for (int e = tid; e < E; e += kRouteThreads) {
        if (!s_taken[e] && route_before(s_key[e], e, bk, bi)) bk = s_key[e], bi = e;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ok = __shfl_xor_sync(0xffffffffu, bk, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (route_before(ok, oi, bk, bi)) bk = ok, bi = oi;
      }
      if (lane == 0) s_wkey[warp] = bk, s_wid[warp] = bi;
      __syncthreads();
      if (tid == 0) {
        for (int w = 1; w < kRouteWarps; ++w)
          if (route_before(s_wkey[w], s_wid[w], bk, bi)) bk = s_wkey[w], bi = s_wid[w];
        s_ids[r] = bi;
        s_taken[bi] = 1;
      }
      __syncthreads();
    }
  }
  __syncthreads();
  if (tid == 0) {
    float sum = 0.0f;
    for (int i = 0; i < k; ++i)
      if (s_ids[i] >= 0) sum += s_score[s_ids[i]];
    const bool renorm = (p.flags & kRouteRenormalize) && sum != 0.0f;
    int32_t* ids = p.ids + t * p.ids_stride;
    float* w = p.weights + t * p.weights_stride;
    for (int i = 0; i < k; ++i) {
      const int id = s_ids[i];
      ids[i] = id;
      if (id < 0) {
        w[i] = 0.0f;
      } else {
        const float s = s_score[id];
        w[i] = (renorm ? s / sum : s) * p.route_scale;
      }
    }
  }
}

}  // namespace b12x

// The three score functions' entry points, named PREFIX##{softmax,sigmoid,sqrtsoftplus}.
#define B12X_ROUTE_TOPK_ENTRY(PREFIX, NAME, SCORE)                                              \
  extern "C" __global__ void __launch_bounds__(b12x::kRouteThreads)                             \
      PREFIX##NAME(const __grid_constant__ b12x::RouteTopkParams p) {                           \
    b12x::route_topk<SCORE>(p);                                                                 \
  }
#define B12X_ROUTE_TOPK_ENTRIES(PREFIX)                            \
  B12X_ROUTE_TOPK_ENTRY(PREFIX, softmax, b12x::kScoreSoftmax)      \
  B12X_ROUTE_TOPK_ENTRY(PREFIX, sigmoid, b12x::kScoreSigmoid)      \
  B12X_ROUTE_TOPK_ENTRY(PREFIX, sqrtsoftplus, b12x::kScoreSqrtSoftplus)
