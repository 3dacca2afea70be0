// paged_rope.cu — attention.rope_paged: attention.rope, attention.kv_append and attention.paged
// of a decode step in one launch.                                          crate: b12x-attention
//   o = paged(rope(q), cache ∪ {rope(k_new), v_new}) exactly as rope_kv_append then paged compute
//   it: q rotated with rope's arithmetic and rounded to q's dtype (rope.cu's header), the new
//   tokens' K rotated the same way and stored with V into their slots as kv_append stores them
//   (E4M3 codes included, kv_append.cu's header), then the attention of paged.cu's header over
//   the cache holding them. q itself is read, never written.
// Tensors: paged's (PagedParams; the caches are written at the new tokens' slots) and rope's
//   positions [T] i32 and optional cos/sin table [max_position, R] f32 (RopeParams), the new
//   rows k, v [T, Hkv, D] (q's dtype, row strides k_stride, v_stride).
// Constraints: paged's 8-row (decode) tiles (max_q_len * H / Hkv <= 8, D <= 128); rope's; NeoX
//   pairs need R % 16 == 0 (a thread owns a chunk of 8 of the first half and its partner).
// Strategy: paged.cuh's kernel with kRope: every CTA stages its tile's Q rows, rotates them in
//   shared memory (4 pairs per thread) and converts them as usual (E4M3: f16 * 2^-4); the CTA
//   whose chunk of keys holds new positions first stores those keys and values (after the PDL
//   wait, beside the Q loads) and passes a barrier before its ring issues their blocks, so the
//   blocks it reads back hold them. Blocks issued before the wait hold only older keys (as in
//   paged.cu). With several 8-row tiles per (request, KV head) (extend plans), tiles whose key
//   ranges share a new position store the same bytes into its slot.
// Entry points: b12x_paged_rope_{bf16,f16,bf16_e4m3}_d{64,96,128}{_n8,_s3_n8,_s3_n8_w8} and
//   b12x_paged_rope_{bf16,f16}_d{64,96,128}_s6_n8: the twins of paged.cu's 8-row variants.
// Oracle: rope_kv_append's then paged's (src/rope_paged/mod.rs; tests/gpu_rope_paged.rs checks
//   bit equality with the two ops).
#include "paged.cuh"

#define B12X_PAGED_ROPE(NAME, T, E4M3, D, WARPS, STAGES, MINB, SUFFIX)                    \
  extern "C" __global__ void __launch_bounds__(32 * WARPS, B12X_PAGED_MINB(MINB))        \
      b12x_paged_rope_##NAME##_d##D##SUFFIX(const __grid_constant__ b12x::PagedRopeParams f) { \
    b12x::paged_attention<T, E4M3, D, WARPS, STAGES, true, true>(f.attn, &f);             \
  }
// The MINB of paged.cu's twins.
#define B12X_PAGED_ROPE_D(NAME, T, E4M3, MINB_S3, MINB_N8)   \
  B12X_PAGED_ROPE(NAME, T, E4M3, 64, 4, 2, MINB_N8, _n8)     \
  B12X_PAGED_ROPE(NAME, T, E4M3, 96, 4, 2, MINB_N8, _n8)     \
  B12X_PAGED_ROPE(NAME, T, E4M3, 128, 4, 2, MINB_N8, _n8)    \
  B12X_PAGED_ROPE(NAME, T, E4M3, 64, 4, 3, MINB_S3, _s3_n8)  \
  B12X_PAGED_ROPE(NAME, T, E4M3, 96, 4, 3, MINB_S3, _s3_n8)  \
  B12X_PAGED_ROPE(NAME, T, E4M3, 128, 4, 3, MINB_S3, _s3_n8) \
  B12X_PAGED_ROPE(NAME, T, E4M3, 64, 8, 3, 1, _s3_n8_w8)     \
  B12X_PAGED_ROPE(NAME, T, E4M3, 96, 8, 3, 1, _s3_n8_w8)     \
  B12X_PAGED_ROPE(NAME, T, E4M3, 128, 8, 3, 1, _s3_n8_w8)
#define B12X_PAGED_ROPE_DEEP_D(NAME, T)                  \
  B12X_PAGED_ROPE(NAME, T, false, 64, 4, 6, 1, _s6_n8)   \
  B12X_PAGED_ROPE(NAME, T, false, 96, 4, 6, 1, _s6_n8)   \
  B12X_PAGED_ROPE(NAME, T, false, 128, 4, 6, 1, _s6_n8)

B12X_PAGED_ROPE_D(bf16, b12x::bf16, false, 2, 3)
B12X_PAGED_ROPE_D(f16, b12x::fp16, false, 2, 3)
B12X_PAGED_ROPE_D(bf16_e4m3, b12x::bf16, true, 3, 4)
B12X_PAGED_ROPE_DEEP_D(bf16, b12x::bf16)
B12X_PAGED_ROPE_DEEP_D(f16, b12x::fp16)
