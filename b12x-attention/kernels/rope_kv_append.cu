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
//   8-element chunk of one (row, KV head) as kv_append: the slot resolved, K rotated in f32 (a
//   row whose position is outside [0, max_position) is stored unrotated; the q part reports
//   FAULT_POSITION) and stored with V. Plain launches load K and V first (NeoX: the partner
//   chunk too), beside the batch's loads; PDL plans (flags kRopeKvEarly) read what the kernel
//   before them cannot have written (the positions, the batch, the table) and form cos / sin
//   before they wait for it, and load q, K and V after.
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
  int32_t flags;          // bit 0 (kRopeKvEarly): read the batch and form cos / sin before the wait (PDL)
};
constexpr int kRopeKvEarly = 1;
static_assert(sizeof(RopeKvAppendParams) == 1248, "size must match src/rope_kv_append/params.rs");
static_assert(offsetof(RopeKvAppendParams, append) == 1112, "offset must match params.rs");
static_assert(offsetof(RopeKvAppendParams, q_blocks) == 1240, "offset must match params.rs");
static_assert(offsetof(RopeKvAppendParams, flags) == 1244, "offset must match params.rs");

// The K/V part: chunk c of KV head g of packed row r. `early` (a PDL launch): the position, the
// slot and cos / sin first, then the wait for the kernel before it, then k and v; else the wait
// first and the old order (k, v and the position loads out together, then the slot).
template <typename T, bool kNeox, bool kTable, bool kE4m3>
__device__ __forceinline__ void kv_rope_append(const RopeKvAppendParams& P, unsigned block, bool early) {
  if (!early) pdl_wait_then_release();
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
  // K's and V's rows (formed for every thread, dereferenced only by live ones: moving them into
  // load_kv made ptxas spill the GPT-J entry points).
  const T* krow = static_cast<const T*>(p.k) + r * p.k_stride + g * p.head_dim;
  const T* vrow = static_cast<const T*>(p.v) + r * p.v_stride + g * p.head_dim;
  Vec16 kv{}, kp{}, vv{};
  auto load_kv = [&] {
    if (live) {
      kv = ld_global_v16(krow + c * 8);
      if (owner) kp = ld_global_v16(krow + (c + hc) * 8);
      vv = ld_global_v16(vrow + c * 8);
    }
  };
  if (!early) load_kv();
  const int pos = live && rot ? __ldg(rp.positions + r) : 0;
  long long dst = 0;
  int b = 0;
  unsigned fault;
  const bool ok = kv_append_slot(p, block, live, r, g, c, sm, dst, b, fault);
  // The pairs this thread rotates: NeoX owners 8 (two sets of 4), GPT-J 4; none outside the
  // rotary dims or at a position outside [0, max_position) (stored unrotated; the q part reports).
  const bool turn = ok && rot && pos >= 0 && pos < rp.max_position && (!kNeox || owner);
  float cs[2][4], sn[2][4];
  if (turn) {
    if constexpr (kNeox) {
      cos_sin4<kTable>(rp, s_inv, pos, lc * 8, cs[0], sn[0]);
      cos_sin4<kTable>(rp, s_inv, pos, lc * 8 + 4, cs[1], sn[1]);
    } else {
      cos_sin4<kTable>(rp, s_inv, pos, lc * 4, cs[0], sn[0]);
    }
  }
  if (early) pdl_wait_then_release();
  kv_report(p, fault);
  if (!ok) return;
  if (early) load_kv();
  if (turn) {
    if constexpr (kNeox) {
#pragma unroll
      for (int q4 = 0; q4 < 2; ++q4)
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          const int e = q4 * 2 + w;  // word e holds elements 2e, 2e + 1
          float2 a = to_f32x2<T>(kv.w[e]), bb = to_f32x2<T>(kp.w[e]);
          rotate(a.x, bb.x, cs[q4][2 * w], sn[q4][2 * w]);
          rotate(a.y, bb.y, cs[q4][2 * w + 1], sn[q4][2 * w + 1]);
          kv.w[e] = from_f32x2<T>(a.x, a.y);
          kp.w[e] = from_f32x2<T>(bb.x, bb.y);
        }
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float2 ab = to_f32x2<T>(kv.w[e]);
        rotate(ab.x, ab.y, cs[0][e], sn[0][e]);
        kv.w[e] = from_f32x2<T>(ab.x, ab.y);
      }
    }
  }
  if (!partner) kv_store_chunk<T, kE4m3>(p.k_cache, p.k_scale, p, b, g, dst, kv);
  if (owner) kv_store_chunk<T, kE4m3>(p.k_cache, p.k_scale, p, b, g, dst + hc * 8, kp);
  kv_store_chunk<T, kE4m3>(p.v_cache, p.v_scale, p, b, g, dst, vv);
}

}  // namespace b12x

// Every thread waits for the kernel before it (griddepcontrol.wait: a PDL launch,
// `Plan::with_pdl`; launched plainly the wait returns at once) before it reads q, k or v or
// writes anything, then lets a PDL-launched next kernel (attention.paged) start: first thing,
// or with kRopeKvEarly (set for PDL plans) after it has read its position, its slot (the batch)
// and formed cos and sin. The q part and the K/V part are whole CTAs (uniform barriers).
#define B12X_ROPE_KV_APPEND(NAME, T, NEOX, TABLE, E4M3)                                            \
  extern "C" __global__ void __launch_bounds__(b12x::kKvAppendThreads)                             \
      b12x_rope_kv_append_##NAME(const __grid_constant__ b12x::RopeKvAppendParams p) {            \
    const bool early = p.flags & b12x::kRopeKvEarly;                                               \
    if ((int)blockIdx.x < p.q_blocks)                                                              \
      b12x::rope<T, NEOX, TABLE>(p.rope, blockIdx.x, early);                                       \
    else                                                                                           \
      b12x::kv_rope_append<T, NEOX, TABLE, E4M3>(p, blockIdx.x - p.q_blocks, early);               \
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
