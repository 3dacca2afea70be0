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
//   of one (row, KV head), K and V together; each CTA first checks that cu_seqlens_q is a valid
//   packing (else nothing is written and FAULT_QUERY_LAYOUT is set), then each thread finds its
//   request by binary search and checks its length and page id (src/paging.rs has the rules).
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

// The request owning packed row r of a valid packing (cu[b] <= r < cu[b+1]), or -1 for a row
// at or past cu[B] (batch padding). Empty requests are skipped by taking the last b.
__device__ __forceinline__ int request_of(const int32_t* cu, int batch, int r) {
  if (r >= __ldg(cu + batch) || r < __ldg(cu)) return -1;
  int lo = 0, hi = batch;  // cu[lo] <= r < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (__ldg(cu + mid) <= r)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Eight values / scale to E4M3 (one 8-byte store).
template <typename TIn>
__device__ __forceinline__ void store_chunk_e4m3(void* cache, long long elem, const Vec16& v, float scale) {
  float f[8];
  unpack_f32<TIn>(v, f);
  uint32_t w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t lo = e4m3x2(__fdiv_rn(f[4 * i], scale), __fdiv_rn(f[4 * i + 1], scale));
    const uint32_t hi = e4m3x2(__fdiv_rn(f[4 * i + 2], scale), __fdiv_rn(f[4 * i + 3], scale));
    w[i] = lo | (hi << 16);
  }
  uint8_t* dst = static_cast<uint8_t*>(cache) + elem;
  asm volatile("st.global.v2.u32 [%0], {%1,%2};" ::"l"(dst), "r"(w[0]), "r"(w[1]) : "memory");
}

template <typename TIn, bool kE4m3>
__device__ __forceinline__ void kv_append(const KvAppendParams& p) {
  if (!packing_ok(p.cu_seqlens_q, p.batch, p.tokens)) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(p.error, kFaultQueryLayout);
    return;
  }
  const int chunks = p.head_dim / 8;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long per_row = (long long)p.kv_heads * chunks;
  if (i >= (long long)p.tokens * per_row) return;
  const int r = int(i / per_row);
  const int g = int(i % per_row) / chunks;
  const int c = int(i % chunks);
  const int b = request_of(p.cu_seqlens_q, p.batch, r);
  if (b < 0) return;
  // One thread per request row reports its faults (chunk 0 of head 0).
  const bool reporter = g == 0 && c == 0;
  const int row0 = __ldg(p.cu_seqlens_q + b);
  const int q_len = __ldg(p.cu_seqlens_q + b + 1) - row0;
  const int len = __ldg(p.seq_lens + b);
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
  const Vec16 kv = ld_global_v16(static_cast<const TIn*>(p.k) + r * p.k_stride + g * p.head_dim + c * 8);
  const Vec16 vv = ld_global_v16(static_cast<const TIn*>(p.v) + r * p.v_stride + g * p.head_dim + c * 8);
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

#define B12X_KV_APPEND(NAME, TIN, E4M3)                                                    \
  extern "C" __global__ void __launch_bounds__(b12x::kKvAppendThreads)                     \
      b12x_kv_append_##NAME(const __grid_constant__ b12x::KvAppendParams p) {             \
    b12x::kv_append<TIN, E4M3>(p);                                                         \
  }

B12X_KV_APPEND(bf16, b12x::bf16, false)
B12X_KV_APPEND(f16, b12x::fp16, false)
B12X_KV_APPEND(bf16_e4m3, b12x::bf16, true)
B12X_KV_APPEND(f16_e4m3, b12x::fp16, true)
