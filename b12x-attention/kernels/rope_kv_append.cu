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
//   before they wait for it, and load q, K and V after. Optionally (warm_blocks > 0) a third
//   part, the grid's last CTAs, reads the batch's cached K and V through L2 without waiting
//   (warm_cache): under PDL it runs beside the QKV projection, so the attention after this kernel
//   reads its keys from L2. The kernel's static shared memory stays small (kRopeKvSmemCu) so
//   that its CTAs fit on SMs a GEMV's CTAs fill.
// Entry points: b12x_rope_kv_append_{bf16,f16}_{neox,gptj}{,_table}{,_e4m3}.
//   Oracle: src/rope_kv_append/mod.rs (rope's then kv_append's references).
#include "b12x/mma.cuh"
#include "kv_append.cuh"
#include "rope.cuh"

namespace b12x {

// Mirrored by src/rope_kv_append/params.rs (size and offsets asserted on both sides).
struct RopeKvAppendParams {
  RopeParams rope;        // q only (kv_heads = 0); K's rotation reads its rotary fields
  KvAppendParams append;  // k (unrotated), v, caches, the batch
  int32_t q_blocks;       // CTAs of the q part (the grid's first)
  int32_t flags;          // kRopeKv* bits
  int32_t warm_blocks;    // CTAs of the warm part (the grid's last; 0: none)
  int32_t reserved;
};
// flags: read the batch and form cos / sin before the wait (PDL plans).
constexpr int kRopeKvEarly = 1;
// flags: the warm part reads with an L2 evict-last policy (else the default policy).
constexpr int kRopeKvWarmEvictLast = 2;
// flags: the warm part issues prefetch.global.L2 per 128-byte line instead of loads.
constexpr int kRopeKvWarmPrefetch = 4;
// flags: every CTA lets the next PDL kernel launch at entry, before its own wait
// (Plan::with_early_release; the next kernel's pre-wait part may run beside the kernel before
// this one).
constexpr int kRopeKvReleaseAtEntry = 8;
// flags: never set by the host; keeps the warm part's loads alive (see warm_cache).
constexpr int kRopeKvWarmSink = 1 << 30;
static_assert(sizeof(RopeKvAppendParams) == 1256, "size must match src/rope_kv_append/params.rs");
static_assert(offsetof(RopeKvAppendParams, append) == 1112, "offset must match params.rs");
static_assert(offsetof(RopeKvAppendParams, q_blocks) == 1240, "offset must match params.rs");
static_assert(offsetof(RopeKvAppendParams, flags) == 1244, "offset must match params.rs");
static_assert(offsetof(RopeKvAppendParams, warm_blocks) == 1248, "offset must match params.rs");
// Batches of fewer requests than this stage cu_seqlens_q and seq_lens in shared memory here
// (2 KB, not kv_append's 16 KB: this kernel's CTAs then fit beside a QKV GEMV's, see the warm part).
constexpr int kRopeKvSmemCu = 256;
// The warm part: 16-byte loads per lane in flight per piece (a piece is 32 * kWarmLoads * 16 bytes).
constexpr int kWarmLoads = 8;
constexpr int kWarmPieceBytes = 32 * kWarmLoads * 16;

// The K/V part: chunk c of KV head g of packed row r. `early` (a PDL launch): the position, the
// slot and cos / sin first, then the wait for the kernel before it, then k and v; else the wait
// first and the old order (k, v and the position loads out together, then the slot).
template <typename T, bool kNeox, bool kTable, bool kE4m3>
__device__ __forceinline__ void kv_rope_append(const RopeKvAppendParams& P, unsigned block, bool early) {
  if (!early) pdl_wait_then_release();
  const RopeParams& rp = P.rope;
  const KvAppendParams& p = P.append;
  __shared__ KvAppendSmemN<kRopeKvSmemCu> sm;
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

// The warm part (CTA wb of warm_blocks): reads the batch's cached K and V, the positions
// [0, L_b - q_b) of each request (the keys attention.paged will read besides the new ones),
// through L2 and drops them, so that the attention after this kernel finds them there. It lets
// the next PDL kernel launch at once and never waits: no kernel of the step writes those
// positions (this one writes only the new tokens' slots), and by the time a PDL launch of this
// kernel runs every kernel before the one it overlaps has completed (each releases its
// dependents only after its own wait). Untrusted lengths, packings and page ids are skipped,
// never reported (the K/V part reports them). The work is cut into pieces of kWarmPieceBytes of
// one page of one cache, spread over every warp of the part; lane i resolves the page of the
// warp's piece i of each round of 32 (one exposed metadata round trip per 32 pieces).
// Timeline hook for bench/proto/warm_overlap_proto.cu (empty in the build): point 0 at the
// warm CTA's start, 1 at its end.
#ifndef B12X_ROPE_KV_WARM_TRACE
#define B12X_ROPE_KV_WARM_TRACE(point, wb) ((void)0)
#endif

template <int kEs>
__device__ __forceinline__ void warm_cache(const RopeKvAppendParams& P, int wb) {
  B12X_ROPE_KV_WARM_TRACE(0, wb);
  pdl_launch_dependents();
  const KvAppendParams& p = P.append;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long row_bytes = (long long)p.kv_heads * p.head_dim * kEs;
  const long long page_bytes = row_bytes * p.page_size;
  const int per_page = (int)((page_bytes + kWarmPieceBytes - 1) / kWarmPieceBytes);
  const long long total = (long long)p.batch * p.max_pages * 2 * per_page;
  const long long gw = (long long)wb * (blockDim.x >> 5) + warp, nw = (long long)P.warm_blocks * (blockDim.x >> 5);
  const bool prefetch = P.flags & kRopeKvWarmPrefetch;
  const bool evict_last = P.flags & kRopeKvWarmEvictLast;
  const uint64_t policy = l2_policy_evict_last();
  uint32_t acc = 0;
  for (long long round = gw; round < total; round += 32 * nw) {
    // Lane i: piece round + i * nw -> its first byte and its length (0: nothing to read).
    const unsigned char* src = nullptr;
    int n = 0;
    const long long u = round + lane * nw;
    if (u < total) {
      const int q = (int)(u % per_page);
      const long long pj = u / per_page;
      const int kv = (int)(pj & 1);
      const long long bj = pj >> 1;
      const int b = (int)(bj / p.max_pages), j = (int)(bj % p.max_pages);
      const int len = __ldg(p.seq_lens + b);
      const int q_len = __ldg(p.cu_seqlens_q + b + 1) - __ldg(p.cu_seqlens_q + b);
      const bool ok = len >= 0 && (long long)len <= (long long)p.max_pages * p.page_size && q_len >= 0 && q_len <= len;
      const long long cached = ok ? (long long)(len - q_len) - (long long)j * p.page_size : 0;
      if (cached > 0) {
        const int page = __ldg(p.page_table + (long long)b * p.pt_stride + j);
        const long long bytes = min(cached, (long long)p.page_size) * row_bytes - (long long)q * kWarmPieceBytes;
        if (page >= 0 && page < p.num_pages && bytes > 0) {
          src = static_cast<const unsigned char*>(kv ? p.v_cache : p.k_cache) + page * page_bytes +
                (long long)q * kWarmPieceBytes;
          n = (int)min(bytes, (long long)kWarmPieceBytes);
        }
      }
    }
    for (int i = 0; i < 32; ++i) {
      const int ni = __shfl_sync(0xffffffffu, n, i);
      if (ni == 0) continue;
      const unsigned char* si = reinterpret_cast<const unsigned char*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(src), i));
      if (prefetch) {
        // One prefetch per 128-byte line of the piece.
        for (int o = lane * 128; o < ni; o += 32 * 128) {
          if (evict_last)
            asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(si + o));
          else
            asm volatile("prefetch.global.L2 [%0];" ::"l"(si + o));
        }
        continue;
      }
      // Every load of the piece goes out before any result is used (the XOR below; every word
      // of every load, so that no two loads share a destination register).
      Vec16 v[kWarmLoads];
#pragma unroll
      for (int k = 0; k < kWarmLoads; ++k) {
        const int o = (lane + 32 * k) * 16;
        v[k] = Vec16{{0u, 0u, 0u, 0u}};
        if (o < ni) {
          if (evict_last)
            asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                         : "=r"(v[k].w[0]), "=r"(v[k].w[1]), "=r"(v[k].w[2]), "=r"(v[k].w[3])
                         : "l"(si + o), "l"(policy));
          else
            asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[k].w[0]), "=r"(v[k].w[1]), "=r"(v[k].w[2]), "=r"(v[k].w[3])
                         : "l"(si + o));
        }
      }
#pragma unroll
      for (int k = 0; k < kWarmLoads; ++k) acc ^= v[k].w[0] ^ v[k].w[1] ^ v[k].w[2] ^ v[k].w[3];
    }
  }
  // Never true in practice (the host never sets the bit): a use of the loaded words.
  if ((P.flags & kRopeKvWarmSink) && acc == 0x9e3779b9u) atomicOr(p.error, 0u);
  B12X_ROPE_KV_WARM_TRACE(1, wb);
}

}  // namespace b12x

// Every thread waits for the kernel before it (griddepcontrol.wait: a PDL launch,
// `Plan::with_pdl`; launched plainly the wait returns at once) before it reads q, k or v or
// writes anything, then lets a PDL-launched next kernel (attention.paged) start: first thing,
// or with kRopeKvEarly (set for PDL plans) after it has read its position, its slot (the batch)
// and formed cos and sin; with kRopeKvReleaseAtEntry at entry, before the wait. The q part and
// the K/V part are whole CTAs (uniform barriers).
#define B12X_ROPE_KV_APPEND(NAME, T, NEOX, TABLE, E4M3)                                            \
  extern "C" __global__ void __launch_bounds__(b12x::kKvAppendThreads)                             \
      b12x_rope_kv_append_##NAME(const __grid_constant__ b12x::RopeKvAppendParams p) {            \
    const bool early = p.flags & b12x::kRopeKvEarly;                                               \
    if (p.flags & b12x::kRopeKvReleaseAtEntry) b12x::pdl_launch_dependents();                      \
    const int warm = (int)blockIdx.x - ((int)gridDim.x - p.warm_blocks);                           \
    if (warm >= 0)                                                                                 \
      b12x::warm_cache<E4M3 ? 1 : 2>(p, warm);                                                     \
    else if ((int)blockIdx.x < p.q_blocks)                                                         \
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
