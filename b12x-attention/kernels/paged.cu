// paged.cu — attention of new query tokens against a paged KV cache (decode, extend/verify).
//                                                                       crate: b12x-attention
//   row (packed row r = cu[b] + i, head h; KV head g = h / (H / Hkv)) at position
//   t = L_b - q_len_b + i sees keys p in [t - W, t] (W = window_left, -1: [0, t]):
//     s_p = scale * q . k_p;  L = log(sum_p exp(s_p) + exp(sink_h));  o = sum_p exp(s_p - L) v_p;
//     lse = L (natural log, includes the sink; -inf for a row without keys or sink, o = 0).
//   E4M3 caches: k_p = code * k_scale[b, g] (applied to s), v_p = code * v_scale[b, g] (to o).
// Tensors: q [T, H, D] bf16|f16 (row stride q_stride, heads contiguous)   k_cache, v_cache
//   [num_pages, P, Hkv, D] (q's dtype or e4m3)   k_scale, v_scale [B, Hkv] f32   sinks [H] f32
//   page_table [B, max_pages] i32 (row stride pt_stride)   seq_lens [B], cu_seqlens_q [B+1] i32
//   o [T, H, D] q's dtype (row stride o_stride)   lse [T, H] f32 (row stride lse_stride; optional)
//   error [1] u32   scratch: partials, partial_ml, counters (split merges).
// Constraints: D in {64, 96, 128, 256}, P % 16 == 0, H / Hkv <= 16, 16-byte aligned rows.
// Strategy: CTA (split, tile, b*Hkv+g) takes one tile of a request's rows of one KV head (the
//   q_len * G rows of (token, head in group): 16 per tile, or 8 in the _n8 variants) and a chunk
//   of the keys they see. Its warps take 16-key blocks in turn (one page each: chunks start on
//   16-key boundaries), each streaming its blocks through a 2- or 3-stage ring of 16-byte
//   cp.async pieces into swizzled, 128-byte-aligned rows (the page ids of a warp's next 32
//   blocks fetched in one load). 16-row tiles: S = Q K^T and O += P V with mma.sync m16n8k16,
//   P from the S registers, Q fragments in registers for D <= 128. 8-row tiles: S^T = K Q^T and
//   O^T += V^T P^T (keys / d as the MMA's M), P^T transposed by movmatrix. An online softmax in
//   base 2 per warp with a lazy running maximum and masks on edge blocks only; warps merge
//   through shared memory. E4M3 caches: raw codes by ldmatrix (K) and ldmatrix.trans (V),
//   converted to f16 in registers (one cvt per pair; d permuted so no shuffle is needed), the
//   MMAs in f16 with Q stored as f16 * 2^-4 (exact for |q| in [2^-10, 2^20)). A request's key
//   range is split over up to max_splits CTAs (chunks of >= min_chunk keys, from the device
//   lengths: the grid is fixed, so a captured graph replays any lengths). Split partials merge
//   in split order with the sink: launched as clusters of the grid's x (<= 8 splits), through
//   distributed shared memory, each split finishing a share of the outputs (16-row tiles read
//   the peers' partials after a cluster barrier; 8-row tiles push each share into its
//   finisher's shared memory before one); otherwise through scratch, by the last CTA to
//   arrive (arrive_tagged).
//   Untrusted indices follow src/paging.rs: masked rows, fault bits.
// Entry points: b12x_paged_{bf16,f16,bf16_e4m3}_d{64,96,128,256} (2-stage rings, 16-row
//   tiles), ..._d{64,96,128}_s3 (3-stage rings), ..._d{64,96,128}[_s3]_n8 (8-row tiles, S^T = K Q^T),
//   ..._d{64,96,128}_s6_n8 (bf16/f16: 6-stage rings), ..._d{64,96,128}_s3_n8_w8 (8 warps per CTA).
// Oracle: src/paged/reference.rs
#include "paged.cuh"

// STAGES: depth of each warp's cp.async ring (STAGES - 1 blocks in flight while one is
// computed). MINB: CTAs per SM the register budget must allow (what shared memory allows on
// SM90: 3 at D <= 128 with 2 stages, 2 with 3 stages of bf16/f16 or at D = 256).
// SM120/SM121 (100 KB of shared memory per SM) never hold more than 2 of these CTAs per SM: the
// register budget there is for 2.
// (B12X_PAGED_MINB, in paged.cuh, caps MINB at 2 there.)
#define B12X_PAGED(NAME, T, E4M3, D, WARPS, STAGES, SWAP, MINB, SUFFIX)            \
  extern "C" __global__ void __launch_bounds__(32 * WARPS, B12X_PAGED_MINB(MINB)) \
      b12x_paged_##NAME##_d##D##SUFFIX(                                            \
          const __grid_constant__ b12x::PagedParams p) {                           \
    b12x::paged_attention<T, E4M3, D, WARPS, STAGES, SWAP>(p);                     \
  }
#define B12X_PAGED_ALL_D(NAME, T, E4M3, MINB_S3, MINB_N8)        \
  B12X_PAGED(NAME, T, E4M3, 64, 4, 2, false, 3, )               \
  B12X_PAGED(NAME, T, E4M3, 96, 4, 2, false, 3, )               \
  B12X_PAGED(NAME, T, E4M3, 128, 4, 2, false, 3, )              \
  B12X_PAGED(NAME, T, E4M3, 256, 2, 2, false, 2, )              \
  B12X_PAGED(NAME, T, E4M3, 64, 4, 3, false, MINB_S3, _s3)      \
  B12X_PAGED(NAME, T, E4M3, 96, 4, 3, false, MINB_S3, _s3)      \
  B12X_PAGED(NAME, T, E4M3, 128, 4, 3, false, MINB_S3, _s3)     \
  B12X_PAGED(NAME, T, E4M3, 64, 4, 2, true, MINB_N8, _n8)       \
  B12X_PAGED(NAME, T, E4M3, 96, 4, 2, true, MINB_N8, _n8)       \
  B12X_PAGED(NAME, T, E4M3, 128, 4, 2, true, MINB_N8, _n8)      \
  B12X_PAGED(NAME, T, E4M3, 64, 4, 3, true, MINB_S3, _s3_n8)    \
  B12X_PAGED(NAME, T, E4M3, 96, 4, 3, true, MINB_S3, _s3_n8)    \
  B12X_PAGED(NAME, T, E4M3, 128, 4, 3, true, MINB_S3, _s3_n8)

// 6-stage rings (5 blocks in flight per warp), 8-row BF16/FP16 decode tiles only: one CTA per
// SM (~201 KB of shared memory at D = 128), for grids of at most one CTA per SM, where each
// warp's chain of blocks is long and nothing else hides its latency (decode at B = 1).
#define B12X_PAGED_DEEP_D(NAME, T)                       \
  B12X_PAGED(NAME, T, false, 64, 4, 6, true, 1, _s6_n8)  \
  B12X_PAGED(NAME, T, false, 96, 4, 6, true, 1, _s6_n8)  \
  B12X_PAGED(NAME, T, false, 128, 4, 6, true, 1, _s6_n8)

// 8-warp CTAs (`_w8`) on 3-stage 8-row (decode) tiles: twice the warps share a CTA's keys, each
// with half the chain of blocks. For grids of at most one CTA per SM (decode at small B), where a
// warp is bound by its own instruction chain, not by memory: ncu on the 4-warp B = 1 decode
// tile found one warp per scheduler issuing every 5.2 cycles at 27% of DRAM bandwidth
// (bench-results/2026-12-04-h200-g/call1). One CTA per SM (~201 KB of shared memory at
// D = 128 BF16; too large for SM120's 99 KB, which the host refuses).
#define B12X_PAGED_WIDE_D(NAME, T, E4M3)                      \
  B12X_PAGED(NAME, T, E4M3, 64, 8, 3, true, 1, _s3_n8_w8)   \
  B12X_PAGED(NAME, T, E4M3, 96, 8, 3, true, 1, _s3_n8_w8)   \
  B12X_PAGED(NAME, T, E4M3, 128, 8, 3, true, 1, _s3_n8_w8)

// 8-row E4M3 tiles fit 4 CTAs per SM on SM90 (shared memory allows 5; registers <= 128).
B12X_PAGED_ALL_D(bf16, b12x::bf16, false, 2, 3)
B12X_PAGED_ALL_D(f16, b12x::fp16, false, 2, 3)
B12X_PAGED_DEEP_D(bf16, b12x::bf16)
B12X_PAGED_DEEP_D(f16, b12x::fp16)
B12X_PAGED_ALL_D(bf16_e4m3, b12x::bf16, true, 3, 4)
B12X_PAGED_WIDE_D(bf16, b12x::bf16, false)
B12X_PAGED_WIDE_D(f16, b12x::fp16, false)
B12X_PAGED_WIDE_D(bf16_e4m3, b12x::bf16, true)
