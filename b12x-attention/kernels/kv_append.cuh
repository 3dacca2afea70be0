// kv_append.cuh — attention.kv_append's parameters, slot resolution and stores, shared by
// kernels/kv_append.cu and kernels/rope_kv_append.cu (semantics in kv_append.cu's header).
// crate: b12x-attention
#pragma once
#include <stddef.h>

#include "b12x/common.cuh"
#include "b12x/quant.cuh"
#include "paging.cuh"

namespace b12x {

// Mirrored by src/kv_append/params.rs (size and offsets asserted on both sides).
struct KvAppendParams {
  const void* k;              // [T, Hkv, D], token stride k_stride
  const void* v;              // [T, Hkv, D], token stride v_stride
  void* k_cache;              // [num_pages, P, Hkv, D]
  void* v_cache;              // [num_pages, P, Hkv, D]
  const float* k_scale;       // [B, Hkv] (E4M3 cache; null otherwise)
  const float* v_scale;       // [B, Hkv]
  const int32_t* page_table;  // [B, max_pages], row stride pt_stride
  const int32_t* seq_lens;    // [B]
  const int32_t* cu_seqlens_q;  // [B + 1]
  unsigned int* error;        // [1]
  int64_t k_stride;           // elements between rows of k
  int64_t v_stride;           // elements between rows of v
  int32_t tokens;             // T: packed rows of k and v
  int32_t batch;              // B
  int32_t max_pages;          // page table entries per request
  int32_t pt_stride;          // elements between rows of page_table
  int32_t num_pages;
  int32_t kv_heads;           // Hkv
  int32_t head_dim;           // D
  int32_t page_size;          // P
};
static_assert(sizeof(KvAppendParams) == 128, "size must match src/kv_append/params.rs");
static_assert(offsetof(KvAppendParams, k_stride) == 80, "offset must match params.rs");
static_assert(offsetof(KvAppendParams, tokens) == 96, "offset must match params.rs");
static_assert(offsetof(KvAppendParams, page_size) == 124, "offset must match params.rs");

constexpr int kKvAppendThreads = 256;
// Batches of fewer requests than this keep cu_seqlens_q and seq_lens in shared memory (each CTA
// loads both at once, coalesced, and every thread finds its request and length there: one
// dependent round trip less before the page id); larger ones read them in global memory.
constexpr int kSmemCu = 2048;

// The request owning packed row r of a valid packing cu (cu[b] <= r < cu[b+1]: global memory or
// the shared copy), or -1 for a row at or past cu[B] (batch padding). Empty requests are skipped
// by taking the last b.
template <typename Load>
__device__ __forceinline__ int request_of(Load cu, int batch, int r) {
  if (r >= cu(batch) || r < cu(0)) return -1;
  int lo = 0, hi = batch;  // cu[lo] <= r < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (cu(mid) <= r)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Eight values / scale to E4M3 (one 8-byte store). x / scale is the f32 division rounded to
// nearest: for a scale in [2^-90, 2^100] (positive, normal, finite; rcp = RN(1 / scale)) through
// div_by_scale's three instructions, exact whenever |x / scale| >= 2^-11 and within an ulp below
// (where E4M3 has only +-0); an x whose product x * rcp overflows (or an infinite or NaN x) makes
// div_by_scale NaN, and then takes x * rcp itself (+-Inf saturates to +-448 as the true quotient
// does; NaN stays NaN). Any other scale (zero, negative, subnormal, huge, Inf, NaN) takes the
// IEEE division. The GPU suite checks every 16-bit input at 32 scales against the oracle.
template <typename TIn>
__device__ __forceinline__ void store_chunk_e4m3(void* cache, long long elem, const Vec16& v, float scale) {
  float f[8];
  unpack_f32<TIn>(v, f);
  float q[8];
  if (scale >= 0x1p-90f && scale <= 0x1p100f) {
    const float rcp = __frcp_rn(scale);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float q0 = __fmul_rn(f[j], rcp);
      const float d = div_by_scale(f[j], scale, rcp);
      q[j] = d != d ? q0 : d;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) q[j] = __fdiv_rn(f[j], scale);
  }
  const uint2 w = e4m3_codes8(q);
  uint8_t* dst = static_cast<uint8_t*>(cache) + elem;
  asm volatile("st.global.v2.u32 [%0], {%1,%2};" ::"l"(dst), "r"(w.x), "r"(w.y) : "memory");
}

// Shared-memory copy of a small batch's cu_seqlens_q and seq_lens (batches of fewer than kCap
// requests; larger ones are read in global memory).
template <int kCap>
struct KvAppendSmemN {
  int32_t cu[kCap];
  int32_t len[kCap];
};
using KvAppendSmem = KvAppendSmemN<kSmemCu>;

// Where chunk c (8 elements) of KV head g of packed row r goes: dst, its element offset in
// either cache, and b, its request. Checks the packing, the request's length and its page id
// (src/paging.rs has the rules); `fault` gets the bits this thread reports (the packing's by
// thread 0 of the grid's first K/V CTA, `block` 0; a row's by its chunk 0 of head 0; else 0:
// the caller ORs them into the error word, kv_report); false when the chunk writes nothing (a
// fault, batch padding, or !live). Reads only the batch (cu_seqlens_q, seq_lens, page_table) and
// writes nothing. Every thread of the CTA must call it (a small batch is staged in shared memory
// first).
template <int kCap>
__device__ __forceinline__ bool kv_append_slot(const KvAppendParams& p, unsigned block, bool live, int r, int g,
                                               int c, KvAppendSmemN<kCap>& sm, long long& dst, int& b,
                                               unsigned& fault) {
  fault = 0;
  const bool shared_cu = p.batch <= kCap - 1;
  if (shared_cu) {
    for (int j = threadIdx.x; j <= p.batch; j += blockDim.x) {
      sm.cu[j] = __ldg(p.cu_seqlens_q + j);
      if (j < p.batch) sm.len[j] = __ldg(p.seq_lens + j);
    }
    __syncthreads();
  }
  const auto cu_global = [&](int j) { return __ldg(p.cu_seqlens_q + j); };
  const auto cu_shared = [&](int j) { return sm.cu[j]; };
  if (!(shared_cu ? packing_ok_by(cu_shared, p.batch, p.tokens) : packing_ok(p.cu_seqlens_q, p.batch, p.tokens))) {
    if (block == 0 && threadIdx.x == 0) fault = kFaultQueryLayout;
    return false;
  }
  if (!live) return false;
  b = shared_cu ? request_of(cu_shared, p.batch, r) : request_of(cu_global, p.batch, r);
  if (b < 0) return false;
  // One thread per request row reports its faults (chunk 0 of head 0).
  const bool reporter = g == 0 && c == 0;
  const int row0 = shared_cu ? sm.cu[b] : cu_global(b);
  const int q_len = (shared_cu ? sm.cu[b + 1] : cu_global(b + 1)) - row0;
  const int len = shared_cu ? sm.len[b] : __ldg(p.seq_lens + b);
  if (len < 0 || (long long)len > (long long)p.max_pages * p.page_size) {
    if (reporter) fault = kFaultLength;
    return false;
  }
  if (q_len > len) {
    if (reporter) fault = kFaultQueryLayout;
    return false;
  }
  const int pos = len - q_len + (r - row0);
  const int page = __ldg(p.page_table + (long long)b * p.pt_stride + pos / p.page_size);
  if (page < 0 || page >= p.num_pages) {
    if (reporter) fault = kFaultPageId;
    return false;
  }
  dst = (((long long)page * p.page_size + pos % p.page_size) * p.kv_heads + g) * p.head_dim + c * 8;
  return true;
}

// ORs a thread's fault bits from kv_append_slot into the error word (nothing for none).
__device__ __forceinline__ void kv_report(const KvAppendParams& p, unsigned fault) {
  if (fault != 0) atomicOr(p.error, fault);
}

// Stores one 8-element chunk into a cache at element offset dst (E4M3: divided by the scale of
// (request b, head g)).
template <typename TIn, bool kE4m3>
__device__ __forceinline__ void kv_store_chunk(void* cache, const float* scales, const KvAppendParams& p, int b,
                                               int g, long long dst, const Vec16& v) {
  if constexpr (kE4m3) {
    store_chunk_e4m3<TIn>(cache, dst, v, __ldg(scales + b * p.kv_heads + g));
  } else {
    st_global_v16(static_cast<TIn*>(cache) + dst, v);
  }
}

template <typename TIn, bool kE4m3>
__device__ __forceinline__ void kv_append(const KvAppendParams& p) {
  __shared__ KvAppendSmem sm;
  // 32-bit indices: the plan keeps max_tokens * kv_heads * head_dim / 8 within i32.
  const uint32_t chunks = p.head_dim / 8;
  const uint32_t per_row = p.kv_heads * chunks;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = i < (uint32_t)p.tokens * per_row;
  const int r = live ? int(i / per_row) : 0;
  const uint32_t in_row = i - (uint32_t)r * per_row;
  const int g = int(in_row / chunks);
  const int c = int(in_row - (uint32_t)g * chunks);
  // The new token's K and V depend on nothing the batch says: their loads go out first, beside
  // the packing's.
  Vec16 kv{}, vv{};
  if (live) {
    kv = ld_global_v16(static_cast<const TIn*>(p.k) + r * p.k_stride + g * p.head_dim + c * 8);
    vv = ld_global_v16(static_cast<const TIn*>(p.v) + r * p.v_stride + g * p.head_dim + c * 8);
  }
  long long dst = 0;
  int b = 0;
  unsigned fault;
  const bool ok = kv_append_slot(p, blockIdx.x, live, r, g, c, sm, dst, b, fault);
  kv_report(p, fault);
  if (!ok) return;
  kv_store_chunk<TIn, kE4m3>(p.k_cache, p.k_scale, p, b, g, dst, kv);
  kv_store_chunk<TIn, kE4m3>(p.v_cache, p.v_scale, p, b, g, dst, vv);
}

}  // namespace b12x
