// rope_kv_append.cu — attention.rope and attention.kv_append in one launch.  crate: b12x-attention
//   q [T, H, D] is rotated in place exactly as attention.rope does (rope.cu's header has the math
//   and the rounding points); each new token's K row is rotated the same way on its way into the
//   cache and V copied, exactly as attention.kv_append would store the rotated row (kv_append.cu's
//   header: slots, E4M3 codes, faults). k itself is read, never written.
// Tensors: those of the two ops (RopeParams with kv_heads = 0: q only; KvAppendParams: k, v,
//   caches, batch); K's rotation takes rope's positions, table or frequencies, scale and range.
// Constraints: both ops'; NeoX pairs need R % 16 == 0 (a thread owns one 8-element chunk of the
//   first half and its partner chunk of the second).
// Strategy: one grid: the first q_blocks CTAs are rope's q-only grid; the rest one thread per
//   8-element chunk of one (row, KV head) as kv_append, K and V loaded first (NeoX: the partner
//   chunk too), the slot resolved, then K rotated in f32 (a row whose position is outside
//   [0, max_position) is stored unrotated; the q part reports FAULT_POSITION) and stored.
// Entry points: b12x_rope_kv_append_{bf16,f16}_{neox,gptj}{,_table}{,_e4m3}.
//   Oracle: src/rope_kv_append/mod.rs (rope's then kv_append's references).
#include "rope.cuh"
#include "kv_append.cuh"

namespace b12x {

// Mirrored by src/rope_kv_append/params.rs (size and offsets asserted on both sides).
struct RopeKvAppendParams {
  RopeParams rope;        // q only (kv_heads = 0); K's rotation reads its rotary fields
  KvAppendParams append;  // k (unrotated), v, caches, the batch
  int32_t q_blocks;       // CTAs of the q part (the grid's first)
  int32_t pad;
};
static_assert(sizeof(RopeKvAppendParams) == 1248, "size must match src/rope_kv_append/params.rs");
static_assert(offsetof(RopeKvAppendParams, append) == 1112, "offset must match params.rs");
static_assert(offsetof(RopeKvAppendParams, q_blocks) == 1240, "offset must match params.rs");

// The scaled cos and sin of pairs j0 .. j0 + 3 at `pos`, as rope() forms them.
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

template <typename T, bool kNeox, bool kTable, bool kE4m3>
__device__ __forceinline__ void kv_rope_append(const RopeKvAppendParams& P, unsigned block) {
  const RopeParams& rp = P.rope;
  const KvAppendParams& p = P.append;
  __shared__ KvAppendSmem sm;
  __shared__ float s_inv[kMaxPairs];
  if constexpr (!kTable) {
    for (int j = threadIdx.x; j < rp.rotary_dim / 2; j += blockDim.x) s_inv[j] = rp.inv_freq[j];
    __syncthreads();
  }
  // 32-bit indices: the plan keeps max_tokens * kv_heads * head_dim / 8 within i32.
  const uint32_t chunks = p.head_dim / 8;
  const uint32_t per_row = p.kv_heads * chunks;
  const uint32_t i = block * blockDim.x + threadIdx.x;
  const bool live = i < (uint32_t)p.tokens * per_row;
  const int r = live ? int(i / per_row) : 0;
  const uint32_t in_row = i - (uint32_t)r * per_row;
  const int g = int(in_row / chunks);
  const int c = int(in_row - (uint32_t)g * chunks);
  // This chunk within the rotary dims (lc in [0, R/8)); NeoX: the first half's chunks own their
  // partner chunk hc further (and store it), the second half's store no K.
  const int lc = c - rp.rotary_offset / 8;
  const int hc = rp.rotary_dim / 16;
  const bool rot = lc >= 0 && lc < rp.rotary_dim / 8;
  const bool owner = kNeox && rot && lc < hc;
  const bool partner = kNeox && rot && lc >= hc;
  Vec16 kv{}, kp{}, vv{};
  int pos = 0;
  if (live) {
    const T* krow = static_cast<const T*>(p.k) + r * p.k_stride + g * p.head_dim;
    kv = ld_global_v16(krow + c * 8);
    if (owner) kp = ld_global_v16(krow + (c + hc) * 8);
    vv = ld_global_v16(static_cast<const T*>(p.v) + r * p.v_stride + g * p.head_dim + c * 8);
    if (rot) pos = __ldg(rp.positions + r);
  }
  long long dst = 0;
  int b = 0;
  if (!kv_append_slot(p, block, live, r, g, c, sm, dst, b)) return;
  if (rot && pos >= 0 && pos < rp.max_position) {
    if constexpr (kNeox) {
      if (owner) {
#pragma unroll
        for (int q4 = 0; q4 < 2; ++q4) {
          float cs[4], sn[4];
          cos_sin4<kTable>(rp, s_inv, pos, lc * 8 + q4 * 4, cs, sn);
#pragma unroll
          for (int w = 0; w < 2; ++w) {
            const int e = q4 * 2 + w;  // word e holds elements 2e, 2e + 1
            float2 a = to_f32x2<T>(kv.w[e]), bb = to_f32x2<T>(kp.w[e]);
            rotate(a.x, bb.x, cs[2 * w], sn[2 * w]);
            rotate(a.y, bb.y, cs[2 * w + 1], sn[2 * w + 1]);
            kv.w[e] = from_f32x2<T>(a.x, a.y);
            kp.w[e] = from_f32x2<T>(bb.x, bb.y);
          }
        }
      }
    } else {
      float cs[4], sn[4];
      cos_sin4<kTable>(rp, s_inv, pos, lc * 4, cs, sn);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float2 ab = to_f32x2<T>(kv.w[e]);
        rotate(ab.x, ab.y, cs[e], sn[e]);
        kv.w[e] = from_f32x2<T>(ab.x, ab.y);
      }
    }
  }
  if (!partner) kv_store_chunk<T, kE4m3>(p.k_cache, p.k_scale, p, b, g, dst, kv);
  if (owner) kv_store_chunk<T, kE4m3>(p.k_cache, p.k_scale, p, b, g, dst + hc * 8, kp);
  kv_store_chunk<T, kE4m3>(p.v_cache, p.v_scale, p, b, g, dst, vv);
}

}  // namespace b12x

// Each entry point first waits for the kernel before it (a PDL launch, `Plan::with_pdl`;
// launched plainly the wait returns at once), then lets a PDL-launched next kernel
// (attention.paged) start. The q part and the K/V part are whole CTAs (uniform barriers).
#define B12X_ROPE_KV_APPEND(NAME, T, NEOX, TABLE, E4M3)                                            \
  extern "C" __global__ void __launch_bounds__(b12x::kKvAppendThreads)                             \
      b12x_rope_kv_append_##NAME(const __grid_constant__ b12x::RopeKvAppendParams p) {            \
    b12x::pdl_wait_then_release();                                                                 \
    if ((int)blockIdx.x < p.q_blocks)                                                              \
      b12x::rope<T, NEOX, TABLE>(p.rope, blockIdx.x);                                              \
    else                                                                                           \
      b12x::kv_rope_append<T, NEOX, TABLE, E4M3>(p, blockIdx.x - p.q_blocks);                      \
  }
#define B12X_ROPE_KV_APPEND_STYLES(DT, T, E4M3, SUFFIX)            \
  B12X_ROPE_KV_APPEND(DT##_neox##SUFFIX, T, true, false, E4M3)     \
  B12X_ROPE_KV_APPEND(DT##_gptj##SUFFIX, T, false, false, E4M3)    \
  B12X_ROPE_KV_APPEND(DT##_neox_table##SUFFIX, T, true, true, E4M3) \
  B12X_ROPE_KV_APPEND(DT##_gptj_table##SUFFIX, T, false, true, E4M3)

B12X_ROPE_KV_APPEND_STYLES(bf16, b12x::bf16, false, )
B12X_ROPE_KV_APPEND_STYLES(f16, b12x::fp16, false, )
B12X_ROPE_KV_APPEND_STYLES(bf16, b12x::bf16, true, _e4m3)
B12X_ROPE_KV_APPEND_STYLES(f16, b12x::fp16, true, _e4m3)
