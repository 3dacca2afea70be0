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
#include "kv_append.cuh"

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
