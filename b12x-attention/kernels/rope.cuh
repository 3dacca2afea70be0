// rope.cuh — attention.rope's parameters and per-thread rotation, shared by kernels/rope.cu and
// kernels/rope_kv_append.cu (the math and rounding points are in rope.cu's header).   crate: b12x-attention
#pragma once
#include <stddef.h>

#include "b12x/common.cuh"
#include "b12x/rope_math.cuh"
#include "paging.cuh"

namespace b12x {

constexpr int kRopeThreads = 256;
constexpr int kMaxPairs = 256;  // R <= 512

// Mirrored by src/rope/params.rs (size and offsets asserted on both sides).
struct RopeParams {
  void* q;                   // [T, H, D], row stride q_stride
  void* k;                   // [T, Hkv, D], row stride k_stride (null: no k)
  const int32_t* positions;  // [T]
  const float* cos_sin;      // [max_position, R] (table mode; null otherwise)
  unsigned int* error;       // [1]
  int64_t q_stride;          // elements between rows of q
  int64_t k_stride;          // elements between rows of k
  int32_t tokens;            // T
  int32_t heads;             // H
  int32_t kv_heads;          // Hkv (0 without k)
  int32_t head_dim;          // D
  int32_t rotary_dim;        // R
  int32_t rotary_offset;     // off: the first rotated dim
  int32_t max_position;      // positions must lie in [0, max_position)
  float scale;               // multiplies cos and sin (YaRN's mscale ratio; 1 otherwise)
  float inv_freq[kMaxPairs];  // R/2 entries used
};
static_assert(sizeof(RopeParams) == 1112, "size must match src/rope/params.rs");
static_assert(offsetof(RopeParams, q_stride) == 40, "offset must match params.rs");
static_assert(offsetof(RopeParams, tokens) == 56, "offset must match params.rs");
static_assert(offsetof(RopeParams, scale) == 84, "offset must match params.rs");
static_assert(offsetof(RopeParams, inv_freq) == 88, "offset must match params.rs");

template <typename T>
__device__ __forceinline__ float2 to_f32x2(uint32_t w) {
  const T* e = reinterpret_cast<const T*>(&w);
  return make_float2(to_f32<T>(e[0]), to_f32<T>(e[1]));
}

template <typename T>
__device__ __forceinline__ uint32_t from_f32x2(float a, float b) {
  uint32_t w;
  T* e = reinterpret_cast<T*>(&w);
  e[0] = from_f32<T>(a);
  e[1] = from_f32<T>(b);
  return w;
}

// One pair: a' = a c - b s, b' = b c + a s (b12x/rope_math.cuh: every product and sum rounded
// to f32, no FMA, as the CPU oracle).
__device__ __forceinline__ void rotate(float& a, float& b, float c, float s) { rope_rotate(a, b, c, s); }

// The scaled cos and sin of pairs j0 .. j0 + 3 at `pos` (table mode: read from the table;
// else from inv_freq staged in s_inv), as every rotation here uses them.
template <bool kTable>
__device__ __forceinline__ void cos_sin4(const RopeParams& p, const float* s_inv, int pos, int j0, float (&c)[4],
                                         float (&s)[4]) {
  if constexpr (kTable) {
    const float* tab = p.cos_sin + (long long)pos * p.rotary_dim + j0;
    const float4 c4 = __ldg(reinterpret_cast<const float4*>(tab));
    const float4 s4 = __ldg(reinterpret_cast<const float4*>(tab + p.rotary_dim / 2));
    c[0] = c4.x, c[1] = c4.y, c[2] = c4.z, c[3] = c4.w;
    s[0] = s4.x, s[1] = s4.y, s[2] = s4.z, s[3] = s4.w;
  } else {
    const float fpos = float(pos);
#pragma unroll
    for (int e = 0; e < 4; ++e) sincosf(__fmul_rn(fpos, s_inv[j0 + e]), &s[e], &c[e]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    c[e] = __fmul_rn(c[e], p.scale);
    s[e] = __fmul_rn(s[e], p.scale);
  }
}

// The rope of the (row, head, 4-pair) units of CTA `block` (one grid of q and k heads: kv_heads
// = 0 rotates q only). Every thread of the CTA must call it (table-less mode syncs the CTA).
// Each thread waits for the kernel before it (pdl_wait_then_release) before it reads q / k or
// writes anything: first thing (`early` false), or (`early`) once it has read its position and
// formed cos and sin, so that under PDL the positions (and the table) are read while that
// kernel still runs.
template <typename T, bool kNeox, bool kTable>
__device__ __forceinline__ void rope(const RopeParams& p, unsigned block, bool early) {
  if (!early) pdl_wait_then_release();
  __shared__ float s_inv[kMaxPairs];
  const int half = p.rotary_dim / 2;
  if constexpr (!kTable) {
    for (int j = threadIdx.x; j < half; j += blockDim.x) s_inv[j] = p.inv_freq[j];
    __syncthreads();
  }
  // 32-bit indices: the plan keeps max_tokens * (H + Hkv) * R / 8 within i32.
  const uint32_t chunks = p.rotary_dim / 8;
  const uint32_t heads = p.heads + p.kv_heads;
  const uint32_t per_row = heads * chunks;
  const uint32_t i = block * blockDim.x + threadIdx.x;
  if (i >= (uint32_t)p.tokens * per_row) {
    if (early) pdl_wait_then_release();
    return;
  }
  const int t = int(i / per_row);
  const uint32_t in_row = i - (uint32_t)t * per_row;
  const int h = int(in_row / chunks);
  const int c = int(in_row - (uint32_t)h * chunks);
  const int j0 = c * 4;  // the first of this thread's 4 pairs
  const int pos = __ldg(p.positions + t);
  const bool in_range = pos >= 0 && pos < p.max_position;
  T* row = h < p.heads ? static_cast<T*>(p.q) + t * p.q_stride + (long long)h * p.head_dim
                       : static_cast<T*>(p.k) + t * p.k_stride + (long long)(h - p.heads) * p.head_dim;
  row += p.rotary_offset;
  uint2* const pa = reinterpret_cast<uint2*>(row + j0);          // NeoX: a's 4 values
  uint2* const pb = reinterpret_cast<uint2*>(row + half + j0);   // NeoX: b's 4 values
  uint4* const pab = reinterpret_cast<uint4*>(row + 2 * j0);     // GPT-J: the 4 pairs
  uint4 v{};  // the 4 pairs as loaded (NeoX: a's 8 bytes in x, y; b's in z, w)
  auto load = [&] {
    if (!in_range) return;
    if constexpr (kNeox) {
      const uint2 va = *pa, vb = *pb;
      v = make_uint4(va.x, va.y, vb.x, vb.y);
    } else {
      v = *pab;
    }
  };
  // Plain order: the loads go out before cos and sin are formed (their latency overlaps it).
  if (!early) load();
  float cs[4], sn[4];
  if (in_range) cos_sin4<kTable>(p, s_inv, pos, j0, cs, sn);
  if (early) pdl_wait_then_release();
  if (!in_range) {
    if (h == 0 && c == 0) atomicOr(p.error, kFaultPosition);
    return;
  }
  if (early) load();
  float a[4], b[4];
  if constexpr (kNeox) {
    const float2 a01 = to_f32x2<T>(v.x), a23 = to_f32x2<T>(v.y);
    const float2 b01 = to_f32x2<T>(v.z), b23 = to_f32x2<T>(v.w);
    a[0] = a01.x, a[1] = a01.y, a[2] = a23.x, a[3] = a23.y;
    b[0] = b01.x, b[1] = b01.y, b[2] = b23.x, b[3] = b23.y;
  } else {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = to_f32x2<T>(w[e]);
      a[e] = f.x, b[e] = f.y;
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) rotate(a[e], b[e], cs[e], sn[e]);
  if constexpr (kNeox) {
    *pa = make_uint2(from_f32x2<T>(a[0], a[1]), from_f32x2<T>(a[2], a[3]));
    *pb = make_uint2(from_f32x2<T>(b[0], b[1]), from_f32x2<T>(b[2], b[3]));
  } else {
    *pab = make_uint4(from_f32x2<T>(a[0], b[0]), from_f32x2<T>(a[1], b[1]), from_f32x2<T>(a[2], b[2]),
                      from_f32x2<T>(a[3], b[3]));
  }
}

}  // namespace b12x
