// kv_append.cu — write the new tokens' K and V into a paged KV cache.     crate: b12x-attention
//   for packed row r = cu[b] + i of request b (context length L_b, q_len_b = cu[b+1] - cu[b]):
//     position p = L_b - q_len_b + i, page = page_table[b, p / P], slot = p % P
//     k_cache[page, slot, g, :] = k[r, g, :]                      (same dtype as k)
//                               = e4m3(k[r, g, :] / k_scale[b, g]) (E4M3 cache: f32 division,
//                                  round to nearest even, satfinite; NaN -> 0x7F)
//     and the same for v.
// Tensors: k, v [T, Hkv, D] bf16|f16 (token stride k_stride / v_stride elements, heads
//   contiguous)   k_cache, v_cache [num_pages, P, Hkv, D] bf16|f16|e4m3 (contiguous)
//   k_scale, v_scale [B, Hkv] f32 (E4M3 only)   page_table [B, max_pages] i32 (row stride
//   pt_stride)   seq_lens [B] i32   cu_seqlens_q [B+1] i32   error [1] u32 (fault bits, OR-ed)
// Constraints: D % 8 == 0; k/v rows 16-byte aligned.   Strategy: one thread per 8-element chunk
//   of one (row, KV head), K and V together, loaded before anything else; each CTA then checks
//   that cu_seqlens_q is a valid packing (else nothing is written and FAULT_QUERY_LAYOUT is set;
//   batches of fewer than kSmemCu requests keep it and seq_lens in shared memory), each thread finds its request by
//   binary search and checks its length and page id (src/paging.rs has the rules).
// Entry points: b12x_kv_append_{bf16,f16} (cache dtype = input dtype),
//   b12x_kv_append_{bf16,f16}_e4m3.   Oracle: src/kv_append/reference.rs
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

template <typename TIn, bool kE4m3>
__device__ __forceinline__ void kv_append(const KvAppendParams& p) {
  __shared__ int32_t s_cu[kSmemCu];
  __shared__ int32_t s_len[kSmemCu];
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
  const bool shared_cu = p.batch <= kSmemCu - 1;
  if (shared_cu) {
    for (int j = threadIdx.x; j <= p.batch; j += blockDim.x) {
      s_cu[j] = __ldg(p.cu_seqlens_q + j);
      if (j < p.batch) s_len[j] = __ldg(p.seq_lens + j);
    }
    __syncthreads();
  }
  const auto cu_global = [&](int j) { return __ldg(p.cu_seqlens_q + j); };
  const auto cu_shared = [&](int j) { return s_cu[j]; };
  if (!(shared_cu ? packing_ok_by(cu_shared, p.batch, p.tokens) : packing_ok(p.cu_seqlens_q, p.batch, p.tokens))) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(p.error, kFaultQueryLayout);
    return;
  }
  if (!live) return;
  const int b = shared_cu ? request_of(cu_shared, p.batch, r) : request_of(cu_global, p.batch, r);
  if (b < 0) return;
  // One thread per request row reports its faults (chunk 0 of head 0).
  const bool reporter = g == 0 && c == 0;
  const int row0 = shared_cu ? s_cu[b] : cu_global(b);
  const int q_len = (shared_cu ? s_cu[b + 1] : cu_global(b + 1)) - row0;
  const int len = shared_cu ? s_len[b] : __ldg(p.seq_lens + b);
  if (len < 0 || (long long)len > (long long)p.max_pages * p.page_size) {
    if (reporter) atomicOr(p.error, kFaultLength);
    return;
  }
  if (q_len > len) {
    if (reporter) atomicOr(p.error, kFaultQueryLayout);
    return;
  }
  const int pos = len - q_len + (r - row0);
  const int page = __ldg(p.page_table + (long long)b * p.pt_stride + pos / p.page_size);
  if (page < 0 || page >= p.num_pages) {
    if (reporter) atomicOr(p.error, kFaultPageId);
    return;
  }
  const long long dst = (((long long)page * p.page_size + pos % p.page_size) * p.kv_heads + g) * p.head_dim + c * 8;
  if constexpr (kE4m3) {
    const int s = b * p.kv_heads + g;
    store_chunk_e4m3<TIn>(p.k_cache, dst, kv, __ldg(p.k_scale + s));
    store_chunk_e4m3<TIn>(p.v_cache, dst, vv, __ldg(p.v_scale + s));
  } else {
    st_global_v16(static_cast<TIn*>(p.k_cache) + dst, kv);
    st_global_v16(static_cast<TIn*>(p.v_cache) + dst, vv);
  }
}

}  // namespace b12x

// Each entry point first waits for the kernel before it (a PDL launch, `Plan::with_pdl`;
// launched plainly the wait returns at once), then lets a PDL-launched next kernel
// (attention.paged, which reads only lengths, page tables and keys before the new tokens until
// its own wait) start.
#define B12X_KV_APPEND(NAME, TIN, E4M3)                                                    \
  extern "C" __global__ void __launch_bounds__(b12x::kKvAppendThreads)                     \
      b12x_kv_append_##NAME(const __grid_constant__ b12x::KvAppendParams p) {             \
    b12x::pdl_wait_then_release();                                                         \
    b12x::kv_append<TIN, E4M3>(p);                                                         \
  }

B12X_KV_APPEND(bf16, b12x::bf16, false)
B12X_KV_APPEND(f16, b12x::fp16, false)
B12X_KV_APPEND(bf16_e4m3, b12x::bf16, true)
B12X_KV_APPEND(f16_e4m3, b12x::fp16, true)
