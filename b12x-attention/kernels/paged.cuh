// paged.cuh — attention.paged's parameters and kernel template, shared by kernels/paged.cu and
// kernels/paged_rope.cu (the op's math, tensors, constraints and strategy are in paged.cu's header;
// the fused rope + append of attention.rope_paged in paged_rope.cu's).   crate: b12x-attention
#pragma once
#include <stddef.h>

#include "b12x/common.cuh"
#include "b12x/mma.cuh"
#include "b12x/quant.cuh"
#include "attention_mma.cuh"
#include "kv_append.cuh"
#include "paging.cuh"
#include "rope.cuh"

namespace b12x {

// Mirrored by src/paged/params.rs (size and offsets asserted on both sides).
struct PagedParams {
  const void* q;                 // [T, H, D], row stride q_stride
  const void* k_cache;           // [num_pages, P, Hkv, D]
  const void* v_cache;           // [num_pages, P, Hkv, D]
  const float* k_scale;          // [B, Hkv] (E4M3 caches; null otherwise)
  const float* v_scale;          // [B, Hkv]
  const float* sinks;            // [H] or null
  const int32_t* page_table;     // [B, max_pages], row stride pt_stride
  const int32_t* seq_lens;       // [B]
  const int32_t* cu_seqlens_q;   // [B + 1]
  void* o;                       // [T, H, D], row stride o_stride
  float* lse;                    // [T, H], row stride lse_stride, or null
  unsigned int* error;           // [1]
  float* partials;               // [B * Hkv * tiles, max_splits, 16, D] f32 (max_splits > 1)
  float* partial_ml;             // [B * Hkv * tiles, max_splits, 16, 2] f32
  unsigned long long* counters;  // [B * Hkv * tiles] tagged arrival words
  int64_t q_stride;              // elements between rows of q
  int64_t o_stride;              // elements between rows of o
  int64_t lse_stride;            // elements between rows of lse
  int32_t tokens;                // T
  int32_t batch;                 // B
  int32_t max_pages;
  int32_t pt_stride;
  int32_t num_pages;
  int32_t heads;                 // H
  int32_t kv_heads;              // Hkv
  int32_t page_size;             // P
  int32_t tiles;                 // row tiles per (request, KV head): ceil(max_q_len * G / 16)
  int32_t max_splits;            // gridDim.x
  int32_t min_chunk;             // fewest keys per split (multiple of 16)
  float scale_log2;              // softmax scale * log2(e)
  int32_t window_left;           // -1: off
  uint32_t flags;                // kPagedPdl
};
// PagedParams::flags: a programmatic dependent launch. Before griddepcontrol.wait the kernel
// reads only the lengths, cu_seqlens_q, the page table, the scales and the ring's first blocks
// whose keys all precede the request's new tokens (kRope: also the positions and the cos / sin
// table); Q, later blocks and every write come after.
constexpr uint32_t kPagedPdl = 1;
static_assert(sizeof(PagedParams) == 200, "size must match src/paged/params.rs");
static_assert(offsetof(PagedParams, q_stride) == 120, "offset must match params.rs");
static_assert(offsetof(PagedParams, tokens) == 144, "offset must match params.rs");
static_assert(offsetof(PagedParams, scale_log2) == 188, "offset must match params.rs");

// attention.rope_paged (kernels/paged_rope.cu): the attention's parameters, then rope's rotary
// fields and the new tokens' K and V rows. Mirrored by src/rope_paged/params.rs (size and
// offsets asserted on both sides).
struct PagedRopeParams {
  PagedParams attn;  // q: the unrotated rows (read only); k_cache / v_cache: written (the new keys)
  RopeParams rope;   // positions, cos_sin (table mode; null: computed), rotary fields, scale,
                     // inv_freq; its q, k, error, strides and head counts are unused
  const void* k;     // [T, Hkv, D] the new keys, unrotated, row stride k_stride
  const void* v;     // [T, Hkv, D] the new values, row stride v_stride
  int64_t k_stride;
  int64_t v_stride;
  int32_t neox;      // 1: NeoX halves, 0: GPT-J pairs
  int32_t reserved;
};
static_assert(sizeof(PagedRopeParams) == 1352, "size must match src/rope_paged/params.rs");
static_assert(offsetof(PagedRopeParams, rope) == 200, "offset must match params.rs");
static_assert(offsetof(PagedRopeParams, k) == 1312, "offset must match params.rs");
static_assert(offsetof(PagedRopeParams, neox) == 1344, "offset must match params.rs");

// The scaled cos and sin of pairs j0 .. j0 + 3 at `pos`, as cos_sin4 forms them (table mode
// when the table pointer is set, else sincosf of pos * inv_freq from the parameters).
__device__ __forceinline__ void rope_cos_sin4_rt(const RopeParams& rp, int pos, int j0, float (&c)[4], float (&s)[4]) {
  if (rp.cos_sin != nullptr)
    cos_sin4<true>(rp, nullptr, pos, j0, c, s);
  else
    cos_sin4<false>(rp, rp.inv_freq, pos, j0, c, s);
}

// Most splits the cluster merge takes (grid x = cluster x <= 8, the portable cluster size);
// mirrored by src/paged/mod.rs (MAX_CLUSTER_SPLITS).
constexpr int kMaxClusterSplits = 8;

// Shared-memory geometry of one variant. The Q tile: 16 rows x D elements of T with a 16-byte
// pad per row. The K/V rings: 16-key blocks of rows of D elements of the cache (T or E4M3),
// each row 128-byte aligned and unpadded with its 16-byte chunks XOR-swizzled within each
// 128-byte group (chunk c of row r at (c & ~7) | ((c ^ r) & 7)): cp.async pieces of one global
// line land in one aligned 128-byte segment (a padded pitch splits the L2 requests: 2.6x the
// requests, 1.5x the sectors, measured), and ldmatrix rows fall in distinct banks.
template <typename T, bool kE4m3, int D, int WARPS, int STAGES, bool kSwap>
struct PagedSmem {
  static constexpr int kPitch = D + 8;                          // elements per Q row
  static constexpr int kTile = 16 * kPitch * 2;                 // bytes of the Q tile
  static constexpr int kEs = kE4m3 ? 1 : 2;                     // bytes per cache element
  static constexpr int kRowBytes = (D * kEs + 127) / 128 * 128; // bytes per ring row
  static constexpr int kRingTile = 16 * kRowBytes;              // bytes of one 16-key block
  // Per warp: STAGES stages of (K, V) blocks.
  static constexpr int kWarp = STAGES * 2 * kRingTile;
  static constexpr int kQ = kTile;
  static constexpr int kMerge = WARPS * 16 * D * 4 + WARPS * 16 * 2 * 4;  // O, m, l per warp
  static constexpr int kStage = WARPS * kWarp;
  // 8-row tiles merging in a cluster: what the peers push, in an area of its own (they push
  // while this CTA may still stream): O of the 8-element chunks this split finishes, [split]
  // [ceil(chunks / splits)][8] <= (8 * D / 8 + kMaxClusterSplits - 1) * 8 floats, and (m, l)
  // per row, [split][8][2].
  static constexpr int kRecvO = kSwap ? (D + kMaxClusterSplits - 1) * 8 * 4 : 0;
  static constexpr int kRecvMl = kSwap ? kMaxClusterSplits * 8 * 2 * 4 : 0;
  // Offset of the pushed partials: past the merged (m, l) of 16 rows after the per-warp ones.
  static constexpr int kRecv = kQ + (kStage > kMerge ? kStage : kMerge) + 16 * 2 * 4;
  static constexpr int kBytes = kRecv + kRecvO + kRecvMl;
};

// src/paged/mod.rs (Query::smem_bytes) mirrors kBytes by hand; these pin both sides to the same
// numbers (tests/paged.rs asserts them for the Rust formula).
static_assert(PagedSmem<bf16, false, 128, 4, 2, true>::kBytes == 74848, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, false, 128, 4, 3, true>::kBytes == 107616, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, false, 128, 4, 6, true>::kBytes == 205920, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, true, 128, 4, 2, true>::kBytes == 42592, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, true, 64, 4, 3, true>::kBytes == 54368, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, false, 96, 4, 2, true>::kBytes == 72800, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, false, 256, 2, 2, false>::kBytes == 74112, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, false, 64, 4, 3, false>::kBytes == 51584, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, true, 128, 4, 2, false>::kBytes == 37760, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, false, 128, 8, 3, true>::kBytes == 205920, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, true, 128, 8, 3, true>::kBytes == 107616, "see Query::smem_bytes");
static_assert(PagedSmem<bf16, false, 64, 8, 3, true>::kBytes == 103520, "see Query::smem_bytes");

// o = 0 and lse = -inf for rows [r0, r1) of (token, head in group) of request rows row0.. and
// KV head g (a masked request), or for whole packed rows (bad packing: g < 0).
template <typename T, int D>
__device__ __forceinline__ void zero_rows(const PagedParams& p, int row0, int g, int r0, int r1) {
  const int G = p.heads / p.kv_heads;
  for (int idx = threadIdx.x; idx < (r1 - r0) * (D / 8); idx += blockDim.x) {
    const int rr = r0 + idx / (D / 8), c = idx % (D / 8);
    const int row = row0 + rr / G, h = g * G + rr % G;
    Vec16 z{{0u, 0u, 0u, 0u}};
    st_global_v16(static_cast<T*>(p.o) + row * p.o_stride + h * D + c * 8, z);
    if (c == 0 && p.lse) p.lse[row * p.lse_stride + h] = -INFINITY;
  }
}

// The transpose of the 8 x 8 b16 matrix a warp holds one 32-bit pair per lane (lane (g, t):
// row g, columns 2t, 2t + 1) in the same layout.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-movmatrix
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}

// Byte offset of 16-byte chunk c of row r of a ring block (see PagedSmem).
template <int kRowBytes>
__device__ __forceinline__ uint32_t ring_offset(int r, int c) {
  return r * kRowBytes + 16 * ((c & ~7) | ((c ^ r) & 7));
}

template <bool kF16, typename T>
struct MmaTypeOf {
  using type = T;
};
template <typename T>
struct MmaTypeOf<true, T> {
  using type = fp16;
};

// Per-CTA timeline hooks for bench/proto/paged_trace_proto.cu (empty in the build): point, and a
// value the stamp must wait for.
#ifndef B12X_PAGED_TRACE
#define B12X_PAGED_TRACE(point, dep) ((void)0)
#endif
// Experiment hook for the same harness (empty in the build): runs at CTA entry, once the
// request index b is known and before its lengths are loaded.
#ifndef B12X_PAGED_ENTRY
#define B12X_PAGED_ENTRY(p, b) ((void)0)
#endif

// E4M3 caches run the MMAs in f16: a code pair converts to f16 x 2 in one instruction, exactly,
// and Q (bf16) is stored as f16 times kQScaleE4m3 (a power of two: exact for |q| in
// [2^-10, 2^20), which keeps bf16 q inside f16's range), compensated in the logit scale.
constexpr float kQScaleE4m3 = 0.0625f;

// kRope (8-row tiles only; attention.rope_paged): `f` holds the rope and the new rows. Q is
// rotated in shared memory as it is staged (rope's arithmetic and rounding), and each CTA first
// stores the new tokens' K (rotated) and V whose positions fall in its chunk of keys into the
// caches (kv_append's slots and stores), then streams its chunk as usual, so it reads them back
// exactly as the unfused attention after rope_kv_append would.
template <typename T, bool kE4m3, int D, int WARPS, int STAGES, bool kSwap, bool kRope = false>
__device__ __forceinline__ void paged_attention(const PagedParams& p, const PagedRopeParams* f = nullptr) {
  static_assert(!kRope || kSwap, "the fused rope + append has 8-row (decode) tiles only");
  using Smem = PagedSmem<T, kE4m3, D, WARPS, STAGES, kSwap>;
  // Rows per tile: 16 (S = Q K^T, query rows as the MMA's M), or 8 with kSwap (S^T = K Q^T:
  // 16 keys as M, the tile's 8 rows as N; half the MMAs and accumulators of a 16-row tile when
  // a tile holds at most 8 rows, as decode with a group of <= 8 does).
  constexpr int kRows = kSwap ? 8 : 16;
  using Mma = MmaOf<typename MmaTypeOf<kE4m3, T>::type>;
  constexpr int kPitch = Smem::kPitch;
  extern __shared__ __align__(128) unsigned char s_dyn[];
  __shared__ int s_last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = p.heads / p.kv_heads;
  const int b = blockIdx.z / p.kv_heads, g = blockIdx.z % p.kv_heads;
  const int tile = blockIdx.y, split = blockIdx.x;
  // PDL: every write and every read the kernel before this one may write waits for it (once),
  // and the next PDL kernel is released right after it. (Released after the CTA's streaming
  // instead, 3 of 6 x8 decode rows got 5-8% slower: bench-results/2026-12-01-h200-i/call4.)
  bool waited = !(p.flags & kPagedPdl);
  auto wait_once = [&] {
    if (!waited) pdl_wait_then_release();
    waited = true;
  };
  B12X_PAGED_TRACE(0, split);
  B12X_PAGED_ENTRY(p, b);
  const int* cu = p.cu_seqlens_q;
  // The request's geometry from its (untrusted) values; checked before use below.
  const int row0 = __ldg(cu + b), q_len = __ldg(cu + b + 1) - row0;
  const int len = __ldg(p.seq_lens + b);
  const bool bad_len = len < 0 || (long long)len > (long long)p.max_pages * p.page_size;
  const bool bad_req = bad_len || q_len > len;
  const long long rows_req = (long long)max(q_len, 0) * G;
  const int tile_rows = (int)min((long long)kRows, rows_req - tile * (long long)kRows);
  // The packing check's loads go out with the request's (one round trip, not two).
  const bool packed = packing_ok(cu, p.batch, p.tokens);
  // Keys the tile's rows see: [k_lo, k_hi), split into chunks aligned to 16 keys.
  const int t0 = len - q_len;  // position of new token 0
  const int t_first = t0 + (tile * kRows) / G, t_last = t0 + (tile * kRows + max(tile_rows, 1) - 1) / G;
  const int k_lo = p.window_left >= 0 ? max(0, t_first - p.window_left) : 0;
  const int k_hi = t_last + 1;
  const int base = k_lo & ~15;
  const int span = k_hi - base;
  int chunk = max(p.min_chunk, (span + p.max_splits - 1) / p.max_splits);
  chunk = (chunk + 15) & ~15;
  const int splits = max(1, (span + chunk - 1) / chunk);
  // Most CTAs of a capacity-sized grid have no split to take: they leave before any barrier
  // (split 0 always stays: it writes masked rows and covers a bad packing).
  if (split > 0 && (bad_req || tile_rows <= 0 || split >= splits)) return;

  if (!packed) {
    wait_once();
    // Every packed row is masked: the first split of each (tile, b, g) CTA zeroes a share.
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0) atomicOr(p.error, kFaultQueryLayout);
    if (split == 0) {
      const int id = blockIdx.z * p.tiles + tile, n = gridDim.z * p.tiles;
      for (int row = id; row < p.tokens; row += n) {
        for (int idx = threadIdx.x; idx < p.heads * (D / 8); idx += blockDim.x) {
          const int h = idx / (D / 8), c = idx % (D / 8);
          st_global_v16(static_cast<T*>(p.o) + row * p.o_stride + h * D + c * 8, Vec16{{0u, 0u, 0u, 0u}});
          if (c == 0 && p.lse) p.lse[row * p.lse_stride + h] = -INFINITY;
        }
      }
    }
    return;
  }
  if (tile_rows <= 0) return;  // no rows here (empty request, or beyond its tiles)
  if (bad_req) {
    wait_once();
    if (threadIdx.x == 0 && tile == 0 && g == 0) atomicOr(p.error, bad_len ? kFaultLength : kFaultQueryLayout);
    zero_rows<T, D>(p, row0, g, tile * kRows, tile * kRows + tile_rows);
    return;
  }
  const int c_lo = base + split * chunk;
  const int c_hi = min(k_hi, c_lo + chunk);
  B12X_PAGED_TRACE(1, c_hi);
  // 8-row tiles whose splits are a cluster push their partials into the peers' shared memory
  // (see the merge at the end). Pushes may start only once every peer has started: this
  // arrival, with its wait before the first push, is that phase of the cluster barrier (every
  // CTA of a cluster shares (request, KV head, tile), so all or none of its live CTAs get here;
  // splits past `splits` have left, and exited threads do not hold a cluster barrier up).
  const bool push = kSwap && splits > 1 && cluster_size() > 1;
  if (push) cluster_arrive_relaxed();

  // Per-lane fragment rows: c0,c1 -> row lr, c2,c3 -> row lr + 8 (kSwap: c0,c2 -> row 2t,
  // c1,c3 -> row 2t + 1). Rows past tile_rows hold q = 0 (finite logits) and are never
  // written, so only keys are masked.
  const int lr = lane >> 2, lt = lane & 3, lc = 2 * lt;
  int t_row[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) t_row[e] = t0 + (tile * kRows + (kSwap ? lc + e : lr + 8 * e)) / G;
  // Keys every row of the tile sees: blocks inside [full_lo, full_hi) skip the mask.
  const int full_lo = p.window_left >= 0 ? max(c_lo, t_last - p.window_left) : c_lo;
  const int full_hi = min(c_hi, t_first + 1);
  const float k_scale = kE4m3 ? __ldg(p.k_scale + b * p.kv_heads + g) : 1.0f;
  const float s_mul = p.scale_log2 * k_scale * (kE4m3 ? 1.0f / kQScaleE4m3 : 1.0f);

  // O accumulators: D / 8 n8 tiles of 16 rows, or (kSwap) D / 16 m16 tiles of O^T (16 d x 8 rows).
  constexpr int kAcc = kSwap ? D / 16 : D / 8;
  float acc[kAcc][4];
#pragma unroll
  for (int n = 0; n < kAcc; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  // Running maximum (log2 units, lazy: see kLazyLog2) and sum per fragment row.
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  // O *= corr per fragment row (element e of a tile is in row e >> 1; kSwap: e & 1).
  auto rescale = [&](const float(&corr)[2]) {
#pragma unroll
    for (int n = 0; n < kAcc; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] *= corr[kSwap ? (e & 1) : (e >> 1)];
  };

  unsigned char* s_q = s_dyn;
  unsigned char* s_work = s_dyn + Smem::kQ;
  // Q tile -> shared (rows past tile_rows zero); every warp waits for the whole tile. With 8-row
  // tiles (decode) the global loads go out first (fetch_q, before the first KV blocks' page ids
  // are known: session 17 measured the first block landing ~1-2 us earlier), the shared stores and
  // the barrier after the blocks are issued (load_q). 16-row tiles load and store in one pass
  // inside load_q: holding their Q registers across the issue spills.
  constexpr bool kEarlyQ = kSwap;
  constexpr int kQPer = kEarlyQ ? (16 * (D / 8) + 32 * WARPS - 1) / (32 * WARPS) : 1;
  auto q_src = [&](int r, int c) {
    const int rr = tile * kRows + r;
    const int row = row0 + rr / G, h = g * G + rr % G;
    return static_cast<const T*>(p.q) + row * p.q_stride + h * D + c * 8;
  };
  Vec16 q_regs[kQPer];
  auto fetch_q = [&] {
#pragma unroll
    for (int i = 0; i < kQPer; ++i) {
      const int idx = threadIdx.x + i * 32 * WARPS;
      const int r = idx / (D / 8), c = idx % (D / 8);
      q_regs[i] = Vec16{{0u, 0u, 0u, 0u}};
      if (idx < 16 * (D / 8) && r < tile_rows) q_regs[i] = ld_global_v16(q_src(r, c));
    }
  };
  auto store_q = [&](int r, int c, Vec16 v) {
    if constexpr (kE4m3) {
      if (r < tile_rows) {
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.w[w]));
          v.w[w] = Mma::pack(f.x * kQScaleE4m3, f.y * kQScaleE4m3);
        }
      }
    }
    *reinterpret_cast<Vec16*>(s_q + (r * kPitch + c * 8) * 2) = v;
  };
  // kRope: the first Q unit's position and cos / sin (formed before the PDL wait, below).
  float q_cs[4] = {0.f, 0.f, 0.f, 0.f}, q_sn[4] = {0.f, 0.f, 0.f, 0.f};
  int q_pos = -1;
  // kRope: rope on the staged Q rows (rows < tile_rows; 4 pairs per thread and pass), every
  // product and sum as attention.rope forms them, rounded to T. A row whose position is outside
  // [0, max_position) stays unrotated and sets kFaultPosition (its token's first head reports).
  auto rope_q_tile = [&] {
    if constexpr (kRope) {
      const RopeParams& rp = f->rope;
      const int units = rp.rotary_dim / 8, half = rp.rotary_dim / 2;
      for (int u = threadIdx.x; u < tile_rows * units; u += blockDim.x) {
        const int r = u / units, j0 = (u - r * units) * 4;
        const int rr = tile * kRows + r;
        // The first unit's position and cos / sin were formed before the wait.
        const bool first = u == (int)threadIdx.x;
        const int pos = first ? q_pos : __ldg(rp.positions + row0 + rr / G);
        if (pos < 0 || pos >= rp.max_position) {
          if (j0 == 0 && split == 0 && g == 0 && rr % G == 0) atomicOr(p.error, kFaultPosition);
          continue;
        }
        float cs[4], sn[4];
        if (first) {
#pragma unroll
          for (int e = 0; e < 4; ++e) cs[e] = q_cs[e], sn[e] = q_sn[e];
        } else {
          rope_cos_sin4_rt(rp, pos, j0, cs, sn);
        }
        T* row = reinterpret_cast<T*>(s_q + r * kPitch * 2) + rp.rotary_offset;
        float a[4], b2[4];
        uint2* const pa = reinterpret_cast<uint2*>(row + (f->neox ? j0 : 2 * j0));
        uint2* const pb = reinterpret_cast<uint2*>(row + (f->neox ? half + j0 : 2 * j0 + 4));
        const uint2 va = *pa, vb = *pb;
        const float2 x0 = to_f32x2<T>(va.x), x1 = to_f32x2<T>(va.y), y0 = to_f32x2<T>(vb.x), y1 = to_f32x2<T>(vb.y);
        if (f->neox) {
          a[0] = x0.x, a[1] = x0.y, a[2] = x1.x, a[3] = x1.y;
          b2[0] = y0.x, b2[1] = y0.y, b2[2] = y1.x, b2[3] = y1.y;
        } else {
          a[0] = x0.x, b2[0] = x0.y, a[1] = x1.x, b2[1] = x1.y;
          a[2] = y0.x, b2[2] = y0.y, a[3] = y1.x, b2[3] = y1.y;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) rotate(a[e], b2[e], cs[e], sn[e]);
        if (f->neox) {
          *pa = make_uint2(from_f32x2<T>(a[0], a[1]), from_f32x2<T>(a[2], a[3]));
          *pb = make_uint2(from_f32x2<T>(b2[0], b2[1]), from_f32x2<T>(b2[2], b2[3]));
        } else {
          *pa = make_uint2(from_f32x2<T>(a[0], b2[0]), from_f32x2<T>(a[1], b2[1]));
          *pb = make_uint2(from_f32x2<T>(a[2], b2[2]), from_f32x2<T>(a[3], b2[3]));
        }
      }
      __syncthreads();
    }
  };
  // kRope: the new tokens' K (rotated) and V of KV head g at positions [max(c_lo, t0), c_hi)
  // (this CTA's chunk) -> their cache slots, one thread per 8-element chunk (NeoX: a chunk of
  // the first rotary half rotates and stores its partner chunk too), then a barrier: the ring
  // reads them back after it. A slot whose page id is out of range is skipped (the ring's issue
  // of its block reports kFaultPageId); a position outside [0, max_position) stores its key
  // unrotated (the Q rotation reports it).
  auto append_new = [&] {
    if constexpr (kRope) {
      const int n_lo = max(c_lo, t0);
      if (c_hi <= n_lo) return;
      const RopeParams& rp = f->rope;
      constexpr int kC = D / 8;
      const int hc = rp.rotary_dim / 16, off = rp.rotary_offset / 8;
      for (int idx = threadIdx.x; idx < (c_hi - n_lo) * kC; idx += blockDim.x) {
        const int pos = n_lo + idx / kC, c = idx % kC;
        const int row = row0 + (pos - t0);
        const int lc = c - off;
        const bool rot = lc >= 0 && lc < rp.rotary_dim / 8;
        const bool owner = f->neox && rot && lc < hc, partner = f->neox && rot && lc >= hc;
        const T* krow = static_cast<const T*>(f->k) + row * f->k_stride + g * D;
        const T* vrow = static_cast<const T*>(f->v) + row * f->v_stride + g * D;
        const Vec16 vv = ld_global_v16(vrow + c * 8);
        Vec16 kv{}, kp{};
        if (!partner) kv = ld_global_v16(krow + c * 8);
        if (owner) kp = ld_global_v16(krow + (c + hc) * 8);
        const int rpos = rot && !partner ? __ldg(rp.positions + row) : 0;
        const int page = __ldg(p.page_table + (long long)b * p.pt_stride + pos / p.page_size);
        if (page < 0 || page >= p.num_pages) continue;
        const long long dst = (((long long)page * p.page_size + pos % p.page_size) * p.kv_heads + g) * D + c * 8;
        if (rot && !partner && rpos >= 0 && rpos < rp.max_position) {
          if (f->neox) {
            float cs[2][4], sn[2][4];
            rope_cos_sin4_rt(rp, rpos, lc * 8, cs[0], sn[0]);
            rope_cos_sin4_rt(rp, rpos, lc * 8 + 4, cs[1], sn[1]);
#pragma unroll
            for (int q4 = 0; q4 < 2; ++q4)
#pragma unroll
              for (int w = 0; w < 2; ++w) {
                const int e = q4 * 2 + w;
                float2 x = to_f32x2<T>(kv.w[e]), y = to_f32x2<T>(kp.w[e]);
                rotate(x.x, y.x, cs[q4][2 * w], sn[q4][2 * w]);
                rotate(x.y, y.y, cs[q4][2 * w + 1], sn[q4][2 * w + 1]);
                kv.w[e] = from_f32x2<T>(x.x, x.y);
                kp.w[e] = from_f32x2<T>(y.x, y.y);
              }
          } else {
            float cs[4], sn[4];
            rope_cos_sin4_rt(rp, rpos, lc * 4, cs, sn);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              float2 ab = to_f32x2<T>(kv.w[e]);
              rotate(ab.x, ab.y, cs[e], sn[e]);
              kv.w[e] = from_f32x2<T>(ab.x, ab.y);
            }
          }
        }
        void* kc = const_cast<void*>(p.k_cache);
        void* vc = const_cast<void*>(p.v_cache);
        if constexpr (kE4m3) {
          const float ks = __ldg(p.k_scale + b * p.kv_heads + g), vs = __ldg(p.v_scale + b * p.kv_heads + g);
          if (!partner) store_chunk_e4m3<T>(kc, dst, kv, ks);
          if (owner) store_chunk_e4m3<T>(kc, dst + hc * 8, kp, ks);
          store_chunk_e4m3<T>(vc, dst, vv, vs);
        } else {
          if (!partner) st_global_v16(static_cast<T*>(kc) + dst, kv);
          if (owner) st_global_v16(static_cast<T*>(kc) + dst + hc * 8, kp);
          st_global_v16(static_cast<T*>(vc) + dst, vv);
        }
      }
      __syncthreads();
    }
  };
  auto load_q = [&] {
    if constexpr (kRope) {
      // Raw Q -> shared; rotate rows < tile_rows in place; then (E4M3) the f16 conversion.
#pragma unroll
      for (int i = 0; i < kQPer; ++i) {
        const int idx = threadIdx.x + i * 32 * WARPS;
        if (idx < 16 * (D / 8)) *reinterpret_cast<Vec16*>(s_q + ((idx / (D / 8)) * kPitch + (idx % (D / 8)) * 8) * 2) = q_regs[i];
      }
      __syncthreads();
      rope_q_tile();
      if constexpr (kE4m3) {
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kQPer; ++i) {
          const int idx = threadIdx.x + i * 32 * WARPS;
          const int r = idx / (D / 8), c = idx % (D / 8);
          if (idx < 16 * (D / 8)) store_q(r, c, *reinterpret_cast<const Vec16*>(s_q + (r * kPitch + c * 8) * 2));
        }
      }
    } else if constexpr (kEarlyQ) {
#pragma unroll
      for (int i = 0; i < kQPer; ++i) {
        const int idx = threadIdx.x + i * 32 * WARPS;
        if (idx < 16 * (D / 8)) store_q(idx / (D / 8), idx % (D / 8), q_regs[i]);
      }
    } else {
      for (int idx = threadIdx.x; idx < 16 * (D / 8); idx += blockDim.x) {
        const int r = idx / (D / 8), c = idx % (D / 8);
        Vec16 v{{0u, 0u, 0u, 0u}};
        if (r < tile_rows) v = ld_global_v16(q_src(r, c));
        store_q(r, c, v);
      }
    }
    __syncthreads();
  };

  unsigned char* s_warp = s_work + warp * Smem::kWarp;
  const int n_blocks = (c_hi - c_lo + 15) / 16;  // c_lo is 16-aligned
  // Issues block j of this warp's ring into stage `st` (16-byte cp.async pieces, keys at or past
  // c_hi zero-filled; one commit group per block); returns whether its page is valid.
  // Page ids of this warp's blocks, 32 at a time: lane i holds the page of the warp's block
  // k + i (blocks j = warp + WARPS * k, issued in order), so a block's issue does not wait on
  // its own page-table load (one exposed load per 32 blocks instead of one per block).
  int pg_cache = 0, k_issue = 0;
  bool early_fault = false;
  constexpr int kEs = Smem::kEs;
  constexpr int kChunks = D * kEs / 16;                            // 16-byte chunks per key (<= 32)
  constexpr int kKeysPerPass = 32 / kChunks;                       // keys one warp-wide copy covers
  constexpr int kPasses = (16 + kKeysPerPass - 1) / kKeysPerPass;  // copies per 16-key block
  constexpr int kRowBytes = Smem::kRowBytes;
  constexpr int kStageTile = Smem::kRingTile;
  const int lane_key = lane / kChunks, lane_c = lane % kChunks;
  const bool lane_on = lane < kKeysPerPass * kChunks;
  const long long row_bytes = (long long)p.kv_heads * D * kEs;  // bytes between tokens
  const long long pass_bytes = row_bytes * kKeysPerPass;
  const long long lane_src = lane_key * row_bytes + (long long)g * D * kEs + lane_c * 16;
  auto issue = [&](int j, int st) -> bool {
    const int pos0 = c_lo + 16 * j;
    if ((k_issue & 31) == 0) {
      const int jj = j + WARPS * lane;  // < n_blocks: its page index is < ceil(c_hi / P) <= max_pages
      pg_cache = jj < n_blocks ? __ldg(p.page_table + (long long)b * p.pt_stride + (c_lo + 16 * jj) / p.page_size) : 0;
    }
    const int page = __shfl_sync(0xffffffffu, pg_cache, k_issue & 31);
    ++k_issue;
    const bool ok = page >= 0 && page < p.num_pages;
    if (!ok) {
      // (Before a PDL wait the fault is kept and reported after it.)
      if (lane == 0) {
        if (waited) atomicOr(p.error, kFaultPageId);
        else early_fault = true;
      }
      return false;
    }
    // Lane pieces: pass i copies chunk lane_c of key lane_key + i * kKeysPerPass (constant
    // per lane; only the block's base address and the zero-fill bound change per block).
    const long long tok0 = (long long)page * p.page_size + pos0 % p.page_size;
    const long long off = tok0 * row_bytes + lane_src;
    const unsigned char* src_k = static_cast<const unsigned char*>(p.k_cache) + off;
    const unsigned char* src_v = static_cast<const unsigned char*>(p.v_cache) + off;
    const uint32_t dst_k = smem_addr(s_warp) + st * 2 * kStageTile;
    // Keys at or past c_hi (stale slots of the last page) read as zeros: masked probabilities
    // are 0 and 0 * V must not meet a NaN or Inf there.
    const int keys_left = c_hi - pos0 - lane_key;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      if (lane_on && lane_key + i * kKeysPerPass < 16) {
        const bool valid = i * kKeysPerPass < keys_left;
        const uint32_t at = dst_k + ring_offset<kRowBytes>(lane_key + i * kKeysPerPass, lane_c);
        cp_async_cg_16_zfill(at, src_k + i * pass_bytes, valid);
        cp_async_cg_16_zfill(at + kStageTile, src_v + i * pass_bytes, valid);
      }
    }
    return true;
  };

  // Bit s: the page of the block in stage s is valid. The first STAGES - 1 blocks go out
  // before the Q tile is loaded (their latency covers both).
  unsigned ok_bits = 0;
  // PDL, 8-row (decode) tiles: the first blocks whose 16 keys all precede the new tokens
  // (positions < t0, which no kernel of this step writes) go out before the wait; Q and the
  // rest after it. (16-row tiles wait first: the early issue spills their registers.)
  int s_pre = 0;
  // kRope: this thread's first Q unit (row, 4 pairs) has its position and cos / sin formed here,
  // before the PDL wait (positions are not written by the kernel before this one; rope_q_tile
  // reports a bad position after the wait).
  if constexpr (kRope) {
    const RopeParams& rp = f->rope;
    const int units = rp.rotary_dim / 8;
    if ((int)threadIdx.x < tile_rows * units) {
      const int r = threadIdx.x / units, j0 = (threadIdx.x - r * units) * 4;
      q_pos = __ldg(rp.positions + row0 + (tile * kRows + r) / G);
      if (q_pos >= 0 && q_pos < rp.max_position) rope_cos_sin4_rt(rp, q_pos, j0, q_cs, q_sn);
    }
  }
  if (!waited) {
    if constexpr (kSwap) {
      for (; s_pre < STAGES - 1; ++s_pre) {
        const int j = warp + s_pre * WARPS;
        if (j >= n_blocks || c_lo + 16 * j + 16 > t0) break;
        if (issue(j, s_pre)) ok_bits |= 1u << s_pre;
        cp_async_commit();
      }
    }
    wait_once();
    if (early_fault && lane == 0) atomicOr(p.error, kFaultPageId);
  }
  if constexpr (kEarlyQ) fetch_q();
  // kRope: the new keys go into the cache before any block holding them is issued: first
  // thing when the initial blocks of some warp reach t0 (a short chunk), else after the initial
  // blocks are issued, so that their loads cover the append's (every later block is issued in
  // the main loop, after append_new's barrier).
  const bool append_first = kRope && c_lo + 16 * min(n_blocks, (STAGES - 1) * WARPS) > t0;
  if (append_first) append_new();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < s_pre) continue;
    if (warp + s * WARPS < n_blocks && issue(warp + s * WARPS, s)) ok_bits |= 1u << s;
    cp_async_commit();
  }
  if (!append_first) append_new();
  load_q();
  // 16-row tiles: Q fragments (the A operand of S = Q K^T), from the Q tile; in registers for
  // D <= 128 (D = 256 reloads them per block: its accumulators leave no room). E4M3: d permuted within each
  // 16: the lane's k indices {2t, 2t+1, 2t+8, 2t+9} hold q's d = 4t..4t+3, which are the four
  // codes one 32-bit word of a K row gives it (see the K fragments below); a dot product does
  // not care about the order of d.
  auto q_frag = [&](int kk, uint32_t (&a)[4]) {
    if constexpr (kE4m3) {
      const uint2 top = *reinterpret_cast<const uint2*>(s_q + (lr * kPitch + kk * 16 + 4 * lt) * 2);
      const uint2 bot = *reinterpret_cast<const uint2*>(s_q + ((lr + 8) * kPitch + kk * 16 + 4 * lt) * 2);
      a[0] = top.x;
      a[1] = bot.x;
      a[2] = top.y;
      a[3] = bot.y;
    } else {
      ldmatrix_x4(a, smem_addr(s_q + ((lane & 15) * kPitch + kk * 16 + (lane >> 4) * 8) * 2));
    }
  };
  constexpr bool kQRegs = D <= 128 && !kSwap;
  uint32_t qf[kQRegs ? D / 16 : 1][4];
  // kSwap: Q^T fragments (the B operand of S^T = K Q^T): b0 = q[row g][k 2t, 2t+1], b1 =
  // q[row g][k 2t+8, 2t+9] (E4M3: the permuted d order, q's d = 4t..4t+3).
  uint32_t qb[kSwap ? D / 16 : 1][2];
  if constexpr (kSwap) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      if constexpr (kE4m3) {
        const uint2 v = *reinterpret_cast<const uint2*>(s_q + (lr * kPitch + kk * 16 + 4 * lt) * 2);
        qb[kk][0] = v.x;
        qb[kk][1] = v.y;
      } else {
        qb[kk][0] = *reinterpret_cast<const uint32_t*>(s_q + (lr * kPitch + kk * 16 + lc) * 2);
        qb[kk][1] = *reinterpret_cast<const uint32_t*>(s_q + (lr * kPitch + kk * 16 + lc + 8) * 2);
      }
    }
  }
  if constexpr (kQRegs) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) q_frag(kk, qf[kk]);
  }
  // The A fragment of chunk kk (a register array, or a fresh load into `tmp`).
  auto q_at = [&](int kk, uint32_t (&tmp)[4]) -> const uint32_t(&)[4] {
    if constexpr (kQRegs) {
      return qf[kk];
    } else {
      q_frag(kk, tmp);
      return tmp;
    }
  };
  for (int j = warp, it = 0; j < n_blocks; j += WARPS, ++it) {
    const int st = it % STAGES, st_next = (it + STAGES - 1) % STAGES;
    const int j_next = j + (STAGES - 1) * WARPS;
    if (j_next < n_blocks) {
      if (issue(j_next, st_next))
        ok_bits |= 1u << st_next;
      else
        ok_bits &= ~(1u << st_next);
    }
    cp_async_commit();
    cp_async_wait<STAGES - 1>();
    if (it == 0) B12X_PAGED_TRACE(2, ok_bits);
    const bool ok_cur = (ok_bits >> st) & 1u;
    if constexpr (kSwap) {
      // S^T = K Q^T: 16 keys x 8 rows; lane (g, t) holds keys g, g + 8 of rows 2t, 2t + 1
      // (e = 0: (g, 2t), 1: (g, 2t+1), 2: (g+8, 2t), 3: (g+8, 2t+1)). Two MMA chains.
      float st4[4] = {0.f, 0.f, 0.f, 0.f}, st4b[4] = {0.f, 0.f, 0.f, 0.f};
      if (ok_cur) {
        const int i = lane >> 3;
        if constexpr (kE4m3) {
          // A = K codes: matrix i = (keys 8 (i & 1).., chunk 2c + (i >> 1)); a word of key g
          // holds d 4t..4t+3: lo pair -> k (2t, 2t+1), hi pair -> k (2t+8, 2t+9).
          const unsigned char* k_raw = s_warp + (st * 2) * kStageTile;
#pragma unroll
          for (int c = 0; c < D / 32; ++c) {
            uint32_t w[4];
            ldmatrix_x4(w, smem_addr(k_raw + ring_offset<kRowBytes>(8 * (i & 1) + (lane & 7), 2 * c + (i >> 1))));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint32_t a[4] = {e4m3x2_to_f16x2((unsigned short)(w[2 * h] & 0xFFFFu)),
                                     e4m3x2_to_f16x2((unsigned short)(w[2 * h + 1] & 0xFFFFu)),
                                     e4m3x2_to_f16x2((unsigned short)(w[2 * h] >> 16)),
                                     e4m3x2_to_f16x2((unsigned short)(w[2 * h + 1] >> 16))};
              Mma::run(h ? st4b : st4, a, qb[2 * c + h]);
            }
          }
        } else {
          const unsigned char* k_tile = s_warp + (st * 2) * kStageTile;
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t a[4];
            ldmatrix_x4(a, smem_addr(k_tile + ring_offset<kRowBytes>(lane & 15, 2 * kk + (lane >> 4))));
            Mma::run((kk & 1) ? st4b : st4, a, qb[kk]);
          }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) st4[e] += st4b[e];
      }
      const int pos0 = c_lo + 16 * j;
      if (!(ok_cur && pos0 >= full_lo && pos0 + 16 <= full_hi)) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = pos0 + lr + 8 * (e >> 1), r = e & 1;
          const bool vis = ok_cur && key < c_hi && key <= t_row[r] && (p.window_left < 0 || key >= t_row[r] - p.window_left);
          if (!vis) st4[e] = -INFINITY;
        }
      }
      float corr[2];
      bool moved = false;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = fmaxf(st4[r], st4[r + 2]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float ms = mx * s_mul;
        const bool move = ms > m_run[r] + kLazyLog2;
        corr[r] = move ? exp2_ftz(m_run[r] - ms) : 1.0f;
        m_run[r] = move ? ms : m_run[r];
        moved |= move;
        const float neg_m = m_run[r] == -INFINITY ? 0.0f : -m_run[r];
        st4[r] = exp2_ftz(fmaf(st4[r], s_mul, neg_m));
        st4[r + 2] = exp2_ftz(fmaf(st4[r + 2], s_mul, neg_m));
        // A partial sum over this lane's keys (the lanes of one t are summed at the end).
        l_run[r] = l_run[r] * corr[r] + (st4[r] + st4[r + 2]);
      }
      if (__any_sync(0xffffffffu, moved)) rescale(corr);
      if (ok_cur) {
        // P^T (16 keys x 8 rows) as the B operand: (key g, rows 2t, 2t+1) pairs transposed by
        // movmatrix to (keys 2t, 2t+1, row g).
        const uint32_t bp[2] = {movmatrix_trans(Mma::pack(st4[0], st4[1])), movmatrix_trans(Mma::pack(st4[2], st4[3]))};
        const int i = lane >> 3;
        if constexpr (kE4m3) {
          // A = V^T codes by ldmatrix.trans: matrix i = (keys 8 (i & 1).., chunk 2c + (i >> 1))
          // gives lane (g, t) keys 2t, 2t+1 at d 2g, 2g+1 of the chunk: bytes 0, 2 -> m-row g
          // (even d), bytes 1, 3 -> m-row g + 8 (odd d) of m-tile 2c + h.
          const unsigned char* v_raw = s_warp + (st * 2 + 1) * kStageTile;
#pragma unroll
          for (int c = 0; c < D / 32; ++c) {
            uint32_t w[4];
            ldmatrix_x4_trans(w, smem_addr(v_raw + ring_offset<kRowBytes>(8 * (i & 1) + (lane & 7), 2 * c + (i >> 1))));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint32_t a[4] = {e4m3x2_to_f16x2((unsigned short)__byte_perm(w[2 * h], 0u, 0x20u)),
                                     e4m3x2_to_f16x2((unsigned short)__byte_perm(w[2 * h], 0u, 0x31u)),
                                     e4m3x2_to_f16x2((unsigned short)__byte_perm(w[2 * h + 1], 0u, 0x20u)),
                                     e4m3x2_to_f16x2((unsigned short)__byte_perm(w[2 * h + 1], 0u, 0x31u))};
              Mma::run(acc[2 * c + h], a, bp);
            }
          }
        } else {
          // A = V^T by ldmatrix.trans: matrix i = (keys 8 (i >> 1).., chunk 2md + (i & 1)).
          const unsigned char* v_tile = s_warp + (st * 2 + 1) * kStageTile;
#pragma unroll
          for (int md = 0; md < D / 16; ++md) {
            uint32_t a[4];
            ldmatrix_x4_trans(a, smem_addr(v_tile + ring_offset<kRowBytes>(8 * (i >> 1) + (lane & 7), 2 * md + (i & 1))));
            Mma::run(acc[md], a, bp);
          }
        }
      }
    } else {
    __syncwarp();

    // S = Q K^T for 16 rows x 16 keys (two n8 tiles); odd k chunks accumulate apart (four
    // independent MMA chains of D / 32 instead of two of D / 16), summed after.
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    float s_odd[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    if (ok_cur) {
      if constexpr (kE4m3) {
        // Raw codes by ldmatrix (b16 = two codes): matrix i = (keys 8 (i >> 1).., d 32c + 16 (i & 1)..)
        // gives lane (g, t) the codes of key g at d 4t..4t+3 of its 16: one word, two cvts, the
        // B fragment of the permuted d order.
        const unsigned char* k_raw = s_warp + (st * 2) * kStageTile;
        const int i = lane >> 3;
#pragma unroll
        for (int c = 0; c < D / 32; ++c) {
          uint32_t w[4];
          ldmatrix_x4(w, smem_addr(k_raw + ring_offset<kRowBytes>(8 * (i >> 1) + (lane & 7), 2 * c + (i & 1))));
#pragma unroll
          for (int m = 0; m < 4; ++m) {
            const uint32_t bk[2] = {e4m3x2_to_f16x2((unsigned short)(w[m] & 0xFFFFu)),
                                    e4m3x2_to_f16x2((unsigned short)(w[m] >> 16))};
            uint32_t tmp[4];
            Mma::run((m & 1) ? s_odd[m >> 1] : s[m >> 1], q_at(2 * c + (m & 1), tmp), bk);
          }
        }
      } else {
        const unsigned char* k_tile = s_warp + (st * 2) * kStageTile;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t bk[4];
          ldmatrix_x4(bk, smem_addr(k_tile + ring_offset<kRowBytes>((lane >> 4) * 8 + (lane & 7), 2 * kk + ((lane >> 3) & 1))));
          const uint32_t b0[2] = {bk[0], bk[1]}, b1[2] = {bk[2], bk[3]};
          uint32_t tmp[4];
          const uint32_t(&a)[4] = q_at(kk, tmp);
          Mma::run((kk & 1) ? s_odd[0] : s[0], a, b0);
          Mma::run((kk & 1) ? s_odd[1] : s[1], a, b1);
        }
      }
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] += s_odd[n][e];
    }
    // Mask (edge blocks only), then the online softmax per row in log2 units.
    const int pos0 = c_lo + 16 * j;
    if (!(ok_cur && pos0 >= full_lo && pos0 + 16 <= full_hi)) {
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = pos0 + n * 8 + lc + (e & 1), r = e >> 1;
          const bool vis = ok_cur && key < c_hi && key <= t_row[r] && (p.window_left < 0 || key >= t_row[r] - p.window_left);
          if (!vis) s[n][e] = -INFINITY;
        }
    }
    float corr[2];
    bool moved = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ms = mx * s_mul;  // s_mul > 0: -inf stays -inf
      const bool move = ms > m_run[r] + kLazyLog2;  // also from -inf to a finite maximum
      corr[r] = move ? exp2_ftz(m_run[r] - ms) : 1.0f;
      m_run[r] = move ? ms : m_run[r];
      moved |= move;
      const float neg_m = m_run[r] == -INFINITY ? 0.0f : -m_run[r];
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[n][e] = exp2_ftz(fmaf(s[n][e], s_mul, neg_m));
          sum += s[n][e];
        }
      l_run[r] = l_run[r] * corr[r] + sum;
    }
    if (__any_sync(0xffffffffu, moved)) rescale(corr);
    if (ok_cur) {
      // O += P V: P (16 x 16 keys) from the S registers.
      const uint32_t a[4] = {Mma::pack(s[0][0], s[0][1]), Mma::pack(s[0][2], s[0][3]), Mma::pack(s[1][0], s[1][1]),
                             Mma::pack(s[1][2], s[1][3])};
      if constexpr (kE4m3) {
        // Raw codes by ldmatrix.trans: matrix i = (keys 8 (i & 1).., d 32c + 16 (i >> 1)..) gives lane
        // (g, t) the codes of keys 2t, 2t+1 at d 2g and 2g + 1 (bytes 0, 2 and 1, 3): two B
        // fragments, for the n8 tiles of even and of odd d (acc[4c + 2h + parity]).
        const unsigned char* v_raw = s_warp + (st * 2 + 1) * kStageTile;
        const int i = lane >> 3;
#pragma unroll
        for (int c = 0; c < D / 32; ++c) {
          uint32_t w[4];
          ldmatrix_x4_trans(w, smem_addr(v_raw + ring_offset<kRowBytes>(8 * (i & 1) + (lane & 7), 2 * c + (i >> 1))));
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int par = 0; par < 2; ++par) {
              const uint32_t sel = par ? 0x31u : 0x20u;
              const uint32_t bv[2] = {e4m3x2_to_f16x2((unsigned short)__byte_perm(w[2 * h], 0u, sel)),
                                      e4m3x2_to_f16x2((unsigned short)__byte_perm(w[2 * h + 1], 0u, sel))};
              Mma::run(acc[4 * c + 2 * h + par], a, bv);
            }
        }
      } else {
        const unsigned char* v_tile = s_warp + (st * 2 + 1) * kStageTile;
#pragma unroll
        for (int nd = 0; nd < D / 16; ++nd) {
          uint32_t bv[4];
          ldmatrix_x4_trans(bv, smem_addr(v_tile + ring_offset<kRowBytes>(lane & 15, 2 * nd + (lane >> 4))));
          const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
          Mma::run(acc[2 * nd], a, b0);
          Mma::run(acc[2 * nd + 1], a, b1);
        }
      }
    }
    }
    __syncwarp();  // this stage is free before the next issue into it
  }
  cp_async_wait<0>();
  B12X_PAGED_TRACE(3, 0);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if constexpr (kSwap) {
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 4);
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 8);
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 16);
    } else {
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
  }
  __syncthreads();  // every warp is done with its ring: the merge area overlays it
  B12X_PAGED_TRACE(10, 0);

  // Warp partials -> shared: O [warp][16][D], then m, l [warp][16][2].
  float* s_o = reinterpret_cast<float*>(s_work);
  float* s_ml = s_o + WARPS * 16 * D;
#pragma unroll
  for (int n = 0; n < kAcc; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int r, d;
      if constexpr (kSwap) {
        // m16 tile n of O^T: element e at (m-row lr + 8 (e >> 1), row 2t + (e & 1)); E4M3:
        // m-row g <-> d 16n + 2g, m-row g + 8 <-> d 16n + 2g + 1.
        r = lc + (e & 1);
        d = kE4m3 ? 16 * n + 2 * lr + (e >> 1) : 16 * n + lr + 8 * (e >> 1);
      } else {
        // E4M3: n8 tile 4c + 2h + parity holds d = 32c + 16h + 2 * column + parity.
        const int col = lc + (e & 1);
        d = kE4m3 ? 32 * (n >> 2) + 16 * ((n >> 1) & 1) + 2 * col + (n & 1) : n * 8 + col;
        r = lr + 8 * (e >> 1);
      }
      if (r < tile_rows) s_o[(warp * 16 + r) * D + d] = acc[n][e];  // the merge reads only these
    }
  if (kSwap ? lane < 4 : (lane & 3) == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = kSwap ? lc + r : lr + 8 * r;
      s_ml[(warp * 16 + row) * 2] = m_run[r];
      s_ml[(warp * 16 + row) * 2 + 1] = l_run[r];
    }
  }
  __syncthreads();
  B12X_PAGED_TRACE(11, 0);

  const float v_scale = kE4m3 ? __ldg(p.v_scale + b * p.kv_heads + g) : 1.0f;
  // Joins head h's sink (if any) to a row's merged (m, l) (base 2); returns the factor its
  // unnormalized O takes (0 for a row without keys, whose O is 0).
  auto join_sink = [&](int h, float& m, float& l) {
    const float sk = __ldg(p.sinks + h) * kLog2e;
    const float m2 = fmaxf(m, sk);
    const float f = m == -INFINITY ? 0.0f : exp2f(m - m2);
    l = l * f + exp2f(sk - m2);
    m = m2;
    return f;
  };
  if constexpr (kSwap) {
    if (push) {
      // Cluster merge of 8-row tiles, pushed: the tile's outputs are 8-element chunks (row r,
      // d 8c..8c+7), chunk ch finished by split ch % splits. Each split merges its warps per
      // chunk (as the other merges do) and stores the chunk's O and the rows' (m, l) into the
      // finishing split's receive area (st.shared::cluster: no round trip); after one cluster
      // barrier (release / acquire) each split sums its chunks over the splits in split order
      // from its own shared memory and writes them. Same sums in the same order as the scratch
      // and pull merges (same bits); no CTA reads another's shared memory, so none waits on
      // its peers before leaving.
      const int nch = tile_rows * (D / 8), per = (nch + splits - 1) / splits;
      const uint32_t recv_o = smem_addr(s_dyn + Smem::kRecv), recv_ml = recv_o + Smem::kRecvO;
      cluster_wait();  // every peer has started (the arrival above)
      for (int ch = threadIdx.x; ch < nch; ch += blockDim.x) {
        const int r = ch / (D / 8), d0 = ch % (D / 8) * 8;
        float m = -INFINITY;
        for (int w = 0; w < WARPS; ++w) m = fmaxf(m, s_ml[(w * 16 + r) * 2]);
        float o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, l = 0.0f;
        if (m != -INFINITY) {
          for (int w = 0; w < WARPS; ++w) {
            const float f = exp2f(s_ml[(w * 16 + r) * 2] - m);
            const float4* src = reinterpret_cast<const float4*>(s_o + (w * 16 + r) * D + d0);
            const float4 a = src[0], c = src[1];
            o[0] += f * a.x; o[1] += f * a.y; o[2] += f * a.z; o[3] += f * a.w;
            o[4] += f * c.x; o[5] += f * c.y; o[6] += f * c.z; o[7] += f * c.w;
            l += f * s_ml[(w * 16 + r) * 2 + 1];
          }
        }
        const uint32_t at = mapa_shared(recv_o + (split * per + ch / splits) * 32, ch % splits);
        st_shared_cluster_v4_f32(at, o[0], o[1], o[2], o[3]);
        st_shared_cluster_v4_f32(at + 16, o[4], o[5], o[6], o[7]);
        if (d0 == 0) {
#pragma unroll 1
          for (int q = 0; q < splits; ++q) st_shared_cluster_v2_f32(mapa_shared(recv_ml + (split * 8 + r) * 8, q), m, l);
        }
      }
      B12X_PAGED_TRACE(4, 0);
      cluster_arrive_release();
      cluster_wait();
      B12X_PAGED_TRACE(5, 0);
      const float* r_o = reinterpret_cast<const float*>(s_dyn + Smem::kRecv);
      const float* r_ml = reinterpret_cast<const float*>(s_dyn + Smem::kRecv + Smem::kRecvO);
      for (int j = threadIdx.x; j * splits + split < nch; j += blockDim.x) {
        const int ch = j * splits + split, r = ch / (D / 8), d0 = ch % (D / 8) * 8;
        // (Loops kept rolled: code that runs once per CTA, fetched cold, is what it costs.)
        float m = -INFINITY;
#pragma unroll 1
        for (int sp = 0; sp < splits; ++sp) m = fmaxf(m, r_ml[(sp * 8 + r) * 2]);
        B12X_PAGED_TRACE(7, __float_as_int(m));
        float o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, l = 0.0f;
#pragma unroll 1
        for (int sp = 0; sp < splits; ++sp) {
          const float w = m == -INFINITY ? 0.0f : exp2f(r_ml[(sp * 8 + r) * 2] - m);
          l += w * r_ml[(sp * 8 + r) * 2 + 1];
          if (m != -INFINITY) {
            const float4* src = reinterpret_cast<const float4*>(r_o + (sp * per + j) * 8);
            const float4 a = src[0], c = src[1];
            o[0] += w * a.x; o[1] += w * a.y; o[2] += w * a.z; o[3] += w * a.w;
            o[4] += w * c.x; o[5] += w * c.y; o[6] += w * c.z; o[7] += w * c.w;
          }
        }
        const int rr = tile * kRows + r;
        const int row = row0 + rr / G, h = g * G + rr % G;
        const float f = p.sinks ? join_sink(h, m, l) : 1.0f;
        B12X_PAGED_TRACE(8, __float_as_int(o[7]) ^ __float_as_int(l));
        const float norm = v_scale / l;  // one division per chunk, not 8 (each ~36 instructions)
        B12X_PAGED_TRACE(9, __float_as_int(norm));
        float out[16 / sizeof(T)];
#pragma unroll
        for (int e = 0; e < 8; ++e) out[e] = m == -INFINITY ? 0.0f : (p.sinks ? o[e] * f : o[e]) * norm;
        st_global_v16(static_cast<T*>(p.o) + row * p.o_stride + h * D + d0, pack_from_f32<T>(out));
        if (d0 == 0 && p.lse) p.lse[row * p.lse_stride + h] = m == -INFINITY ? -INFINITY : (m + log2f(l)) * kLn2;
      }
      B12X_PAGED_TRACE(6, 0);
      return;
    }
  }

  // Merge the warps (in warp order) for every (row, d) of the tile's rows: into warp 0's slots.
  for (int idx = threadIdx.x; idx < tile_rows * D; idx += blockDim.x) {
    const int r = idx / D;
    float m = -INFINITY;
    for (int w = 0; w < WARPS; ++w) m = fmaxf(m, s_ml[(w * 16 + r) * 2]);
    float o = 0.0f, l = 0.0f;
    if (m != -INFINITY) {
      for (int w = 0; w < WARPS; ++w) {
        const float f = exp2f(s_ml[(w * 16 + r) * 2] - m);
        o += f * s_o[(w * 16) * D + idx];
        l += f * s_ml[(w * 16 + r) * 2 + 1];
      }
    }
    s_o[idx] = o;  // warp 0's slot: read above only by this thread
    if (idx % D == 0) {
      // m, l of the merged row go after every warp's O (slots no thread reads any more).
      s_ml[WARPS * 32 + r * 2] = m;
      s_ml[WARPS * 32 + r * 2 + 1] = l;
    }
  }
  __syncthreads();
  B12X_PAGED_TRACE(4, 0);
  const float* m_l = s_ml + WARPS * 32;

  const long long slot = (long long)blockIdx.z * p.tiles + tile;
  // Writes the final rows from per-row (m, l) and unnormalized O (base 2), adding the sink:
  // elements first, first + stride, ... of the tile's rows x D.
  auto finish = [&](int first, int stride, auto&& o_at, auto&& ml_at) {
    for (int idx = first; idx < tile_rows * D; idx += stride) {
      const int r = idx / D, d = idx % D;
      const int rr = tile * kRows + r;
      const int row = row0 + rr / G, h = g * G + rr % G;
      float m = ml_at(r, 0), l = ml_at(r, 1), o = o_at(r, d);
      if (p.sinks) o *= join_sink(h, m, l);
      const bool empty = m == -INFINITY;
      const float out = empty ? 0.0f : o * (v_scale / l);  // as the pushed merge rounds it
      static_cast<T*>(p.o)[row * p.o_stride + h * D + d] = from_f32<T>(out);
      if (d == 0 && p.lse) p.lse[row * p.lse_stride + h] = empty ? -INFINITY : (m + log2f(l)) * kLn2;
    }
  };
  if (splits == 1) {
    finish(threadIdx.x, blockDim.x, [&](int r, int d) { return s_o[r * D + d]; },
           [&](int r, int i) { return m_l[r * 2 + i]; });
    B12X_PAGED_TRACE(6, 0);
    return;
  }
  if (!kSwap && cluster_size() > 1) {  // (8-row tiles pushed theirs above)
    // Cluster merge: the grid's splits of this (request, KV head, tile) are one cluster (rank =
    // split). Each active split keeps its merged O and (m, l) in shared memory; after one
    // cluster barrier (splits past `splits` left at the top: exited threads do not hold a
    // barrier.cluster up) split s finishes elements s * blockDim.x + threadIdx.x, stepping
    // splits * blockDim.x, reading every split's partial through distributed shared memory
    // and summing in split order exactly as the scratch merge below does. No scratch, no
    // atomics, no global round trips.
    cluster_sync();
    B12X_PAGED_TRACE(5, 0);
    const uint32_t o_base = smem_addr(s_o), ml_base = smem_addr(m_l);
    // Per row: the merged (m, l) and each split's weight 2^(m_sp - m), into this CTA's shared
    // memory past warp 0's O slots (peers read only those and m_l). Lane group (row r, 8
    // splits) loads the splits' (m, l) at once; the max is a shuffle, l sums in split order.
    float* s_cw = s_o + 16 * D;  // [16][w: kMaxClusterSplits, l_sp: kMaxClusterSplits, m, l]
    constexpr int kCw = 2 * kMaxClusterSplits + 2;
    static_assert(16 * kMaxClusterSplits % 64 == 0, "whole warps of (row, split) lanes");
    for (int idx = threadIdx.x; idx < 16 * kMaxClusterSplits; idx += blockDim.x) {
      const int r = idx / kMaxClusterSplits, sp = idx % kMaxClusterSplits;
      const bool on = r < tile_rows && sp < splits;
      const float m_sp = on ? ld_shared_cluster_f32_published(ml_base + r * 8, sp) : -INFINITY;
      const float l_sp = on ? ld_shared_cluster_f32_published(ml_base + r * 8 + 4, sp) : 0.0f;
      float m = m_sp;
#pragma unroll
      for (int x = 1; x < kMaxClusterSplits; x *= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, x));
      if (on) {
        s_cw[r * kCw + sp] = m == -INFINITY ? 0.0f : exp2f(m_sp - m);
        s_cw[r * kCw + kMaxClusterSplits + sp] = l_sp;
        if (sp == 0) s_cw[r * kCw + 2 * kMaxClusterSplits] = m;
      }
    }
    __syncthreads();
    if (threadIdx.x < tile_rows) {
      float* c = s_cw + threadIdx.x * kCw;
      float l = 0.0f;
      for (int sp = 0; sp < splits; ++sp) l += c[sp] * c[kMaxClusterSplits + sp];
      c[2 * kMaxClusterSplits + 1] = l;
    }
    __syncthreads();
    finish(
        split * blockDim.x + threadIdx.x, splits * blockDim.x,
        [&](int r, int d) {
          if (s_cw[r * kCw + 2 * kMaxClusterSplits] == -INFINITY) return 0.0f;
          float os[kMaxClusterSplits];
#pragma unroll
          for (int sp = 0; sp < kMaxClusterSplits; ++sp)
            if (sp < splits) os[sp] = ld_shared_cluster_f32_published(o_base + (r * D + d) * 4, sp);
          float o = 0.0f;
#pragma unroll
          for (int sp = 0; sp < kMaxClusterSplits; ++sp)
            if (sp < splits) o += s_cw[r * kCw + sp] * os[sp];
          return o;
        },
        [&](int r, int i) { return s_cw[r * kCw + 2 * kMaxClusterSplits + i]; });
    cluster_sync();  // no CTA leaves while a peer may still read its shared memory
    B12X_PAGED_TRACE(6, 0);
    return;
  }
  // Split partial -> scratch; the last split CTA of this (b, g, tile) merges them in order.
  float* part = p.partials + (slot * p.max_splits + split) * 16 * D;
  float* part_ml = p.partial_ml + (slot * p.max_splits + split) * 32;
  // Only the tile's rows: a decode tile of group G has G of its 16 rows.
  for (int idx = threadIdx.x; idx < tile_rows * D; idx += blockDim.x) __stcg(part + idx, s_o[idx]);
  if (threadIdx.x < 2 * tile_rows) __stcg(part_ml + threadIdx.x, m_l[threadIdx.x]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = arrive_tagged(p.counters + slot, unsigned(splits)) == unsigned(splits - 1);
  __syncthreads();
  B12X_PAGED_TRACE(5, 0);
  if (!s_last) return;
  __threadfence();
  const float* all = p.partials + slot * p.max_splits * 16 * D;
  const float* all_ml = p.partial_ml + slot * p.max_splits * 32;
  // Every split's (m, l) of the tile's rows -> shared memory in one round of independent loads
  // (the O area is free: this CTA's partial went to scratch), then per row the merged (m, l)
  // and each split's weight 2^(m_sp - m), in split order. Shared use: 3 * splits * tile_rows
  // <= 3 * 64 * 16 floats <= WARPS * 16 * D.
  const int n_ml = splits * tile_rows;
  float* s_pml = s_o;            // [splits][tile_rows][2]
  float* s_w = s_o + 2 * n_ml;   // [splits][tile_rows]
  for (int i = threadIdx.x; i < 2 * n_ml; i += blockDim.x) {
    const int sp = i / (2 * tile_rows);
    s_pml[i] = __ldcg(all_ml + sp * 32 + i % (2 * tile_rows));
  }
  __syncthreads();
  float* s_m = s_ml + WARPS * 32;
  if (threadIdx.x < tile_rows) {
    const int r = threadIdx.x;
    float m = -INFINITY, l = 0.0f;
    for (int sp = 0; sp < splits; ++sp) m = fmaxf(m, s_pml[(sp * tile_rows + r) * 2]);
    for (int sp = 0; sp < splits; ++sp) {
      const float w = m == -INFINITY ? 0.0f : exp2f(s_pml[(sp * tile_rows + r) * 2] - m);
      s_w[sp * tile_rows + r] = w;
      l += w * s_pml[(sp * tile_rows + r) * 2 + 1];
    }
    s_m[r * 2] = m;
    s_m[r * 2 + 1] = l;
  }
  __syncthreads();
  finish(
      threadIdx.x, blockDim.x,
      [&](int r, int d) {
        if (s_m[r * 2] == -INFINITY) return 0.0f;
        // Sum in split order; four loads in flight at a time.
        const float* src = all + r * D + d;
        float o = 0.0f;
        int sp = 0;
        for (; sp + 4 <= splits; sp += 4) {
          float a[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = __ldcg(src + (sp + i) * 16 * D);
#pragma unroll
          for (int i = 0; i < 4; ++i) o += s_w[(sp + i) * tile_rows + r] * a[i];
        }
        for (; sp < splits; ++sp) o += s_w[sp * tile_rows + r] * __ldcg(src + sp * 16 * D);
        return o;
      },
      [&](int r, int i) { return s_m[r * 2 + i]; });
  B12X_PAGED_TRACE(6, 0);
}

}  // namespace b12x

// MINB as __launch_bounds__ takes it: SM120/SM121 (100 KB of shared memory per SM) never hold
// more than 2 of these CTAs per SM, so the register budget there is for 2.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define B12X_PAGED_MINB(MINB) ((MINB) < 2 ? (MINB) : 2)
#else
#define B12X_PAGED_MINB(MINB) (MINB)
#endif
