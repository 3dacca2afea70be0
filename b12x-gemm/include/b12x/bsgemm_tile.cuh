// bsgemm_tile.cuh — gemm.blockscaled's tiled kernel body (M > 16, mma.sync), shared with crates
// that run it over tiles of their own.                                           crate: b12x-gemm
//   `bsgemm::gemm<F, WM, WN, TOut, kXs>(p)` is the kernel of kernels/blockscaled_gemv.cu's
//   `b12x_bsgemm_*_wm*_wn*` entry points (described below). moe.fused_moe's grouped path runs it
//   per (expert slot, N tile) with a BsGemmParams whose pointers are offset to the slot's expert
//   and rows (b12x-moe/kernels/fused_moe_decode.cu, the grouped path).
// Exported to dependent crates' kernels through `links = "b12x_gemm"` (DEP_B12X_GEMM_INCLUDE).
#pragma once

#include "b12x/bsgemv_decode.cuh"
#include "b12x/common.cuh"
#include "b12x/fp4_dequant.cuh"
#include "b12x/mma.cuh"

// ---- middle and prefill buckets (M > 16): CTA tiles of x rows x weight rows ------------------
// y[m, n] = out_scale * sum_k x[m, k] W[n, k] (+ bias[n]), the decode path's math, for any M.
// A CTA computes BM = 32 WM rows of x by BN = 32 WN weight rows (grid: M tiles fastest, so the
// CTAs running together share weight tiles and x stays in L2), K in k-tiles of 128: a ring of
// `stages` k-tiles in shared memory, filled by all 256 threads with cp.async (x bf16 128 k per
// row, the packed codes' 64 (FP4) or 128 (FP8) bytes per weight row, the tiles' scales; zeros
// past M, N and K), each stage's completion an mbarrier that every thread's copies arrive on;
// one __syncthreads per k-tile before its slot is refilled. Eight warps, 2 (M) x 4 (N), each
// owns 16 WM x 8 WN outputs: x is the MMA's A (16-byte ld.shared of 8 consecutive k per row),
// the weight its B, dequantized in registers exactly as the decode path does (E2M1 / E4M3 ->
// bf16 by bit placement, x the block scale in bf16; block-FP8 f32 scales on per-tile f32 partial
// sums), with the same K permutation: lane t takes the k of its 16-byte chunk(s) and the MMA's k
// slots 2t, 2t+1, 2t+8, 2t+9 hold the word's pairs, x read in the matching order. FP4: lane t
// owns k 32t .. 32t + 31 of the k-tile (chunk t of the row's 64 bytes, four words of 8 k, two
// MMA steps each), visiting word (q + t) % 4 at step pair q; FP8: k 32T + 8t .. + 7 of each
// 32-k group T (8 bytes: two steps). Shared-memory layouts (16-byte chunk c of a row at chunk
// c ^ f(row)) make every warp's loads conflict free: x rows 256 bytes, f = row & 1 (FP4) or
// 4 (row & 1) (FP8); weight rows 64 bytes (FP4), f = (row >> 1) & 3, or 128 bytes (FP8),
// f = 2 (row & 3). The scale table and the format rules are the decode path's.
namespace b12x {

// Mirrored by `BsGemmParams` in src/blockscaled/gemv.rs (size and offsets asserted there).
struct BsGemmParams {
  const unsigned char* codes;   // [N, row_bytes] packed codes (FP4 layout v2/v3 words, FP8 bytes)
  const unsigned char* scales;  // as BsGemvParams::scales
  const bf16* x;                // [M, K] bf16, row stride ldx (16-byte aligned rows)
  const void* bias;             // [N] bf16 or f32 (flags), nullptr for none
  void* y;                      // [M, N] TOut, row stride ldy
  float* partials;              // split-K (gridDim.y > 1): [tiles][splits][BM * BN] f32 (scratch)
  unsigned long long* counters; // split-K: [tiles] tagged arrival counters (scratch, any bits)
  long long ldx, ldy;
  int n, k, m;
  int row_bytes;                // code bytes per weight row: K / 2 (FP4) or K (FP8)
  int ktiles;                   // ceil(K / 128)
  int mtiles;                   // ceil(M / BM): the grid is mtiles x ceil(N / BN) x splits
  int stages;                   // ring depth, 2..kMaxStages
  int scale_tiles;              // as BsGemvParams
  int scale_bias;
  float out_scale;
  int flags;
  int sld, sgroups;
  int kt_per;                   // k-tiles per split (blockIdx.y): [y kt_per, min(ktiles, (y + 1) kt_per))
  const float* xmult;           // as BsGemvParams
  const unsigned char* xscales; // native kernels: x's scales as staged by b12x_bsgemm_stage_xq (else unused)
  // Split tail (wgmma kernels, gridDim.y == 1): CTAs from tail0 on split the output tiles tail0 ..
  // in tail_splits parts of K each (partials and counters indexed from tail0); <= 1: no tail.
  int tail0;
  int tail_splits;
};
static_assert(sizeof(BsGemmParams) == 152, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, partials) == 40, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, ldx) == 56, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, n) == 72, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, out_scale) == 108, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, kt_per) == 124, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, xmult) == 128, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, xscales) == 136, "mirror of gemv.rs");
static_assert(offsetof(BsGemmParams, tail0) == 144, "mirror of gemv.rs");

namespace bsgemm {

using bsgemv::Fmt;
constexpr int kThreads = 256;
constexpr int kMaxStages = 8;
constexpr uint32_t kScaleSmem = 2048;  // per stage: NVFP4 two 128-row blocks x two tiles, at most

template <Fmt F, int WM, int WN>
struct Tile {
  static constexpr bool kFp8 = bsgemv::FmtInfo<F>::kFp8;
  static constexpr int BM = 32 * WM, BN = 32 * WN;
  static constexpr int RB = kFp8 ? 128 : 64;  // code bytes per weight row and k-tile
  static constexpr uint32_t kX = BM * 256u, kW = BN * uint32_t(RB);
  static constexpr uint32_t kStage = kX + kW + kScaleSmem;
  static_assert(BN == 128 || BN == 256, "scale staging covers one or two 128-row blocks");
};

template <bool kFp8>
__device__ __forceinline__ uint32_t x_pos(int row, int c) {
  return uint32_t(row * 256 + 16 * (c ^ ((row & 1) * (kFp8 ? 4 : 1))));
}
template <bool kFp8>
__device__ __forceinline__ uint32_t w_pos(int row, int c) {
  return kFp8 ? uint32_t(row * 128 + 16 * (c ^ ((row & 3) << 1))) : uint32_t(row * 64 + 16 * (c ^ ((row >> 1) & 3)));
}

// ---- the pieces the tiled kernels share (dequantizing and native) ----------------------------
// x rows m0 .. m0 + BM (bf16, row stride ldx), k-tile kt (128 k: 16 chunks of 16 bytes per row)
// into shared memory at st, zeros past M and K. kWg: wgmma's 128-byte-swizzled K-major layout,
// two 64-k slabs [2][BM rows][128 bytes] with chunk c of a slab row at c ^ (row % 8); else the
// mma.sync kernels' 256-byte rows at x_pos. All kThreads threads copy.
template <int BM, bool kFp8, bool kWg>
__device__ __forceinline__ void load_x_rows(uint32_t st, const BsGemmParams& p, int m0, int kt, int tid) {
#pragma unroll
  for (int j = 0; j < BM * 16 / kThreads; ++j) {
    const int i = tid + kThreads * j, row = i >> 4, c = i & 15;
    const int gm = m0 + row, gk = kt * 128 + 8 * c;
    const bool live = gm < p.m && gk < p.k;
    const uint32_t dst =
        kWg ? uint32_t((c >> 3) * (BM * 128) + row * 128 + 16 * ((c & 7) ^ (row & 7))) : x_pos<kFp8>(row, c);
    bsgemv::cp_async<16>(st + dst, live ? p.x + (long long)gm * p.ldx + gk : p.x, live);
  }
}

// 128-byte code rows with chunk c at c ^ (row % 8): the wgmma kernels' FP8 weight, whose lanes
// (g, t) read rows g = 0..7 at one chunk (conflict free; w_pos<true> would put rows g, g + 4 on
// one bank).
__device__ __forceinline__ uint32_t w_pos8(int row, int c) { return uint32_t(row * 128 + 16 * (c ^ (row & 7))); }

// Code rows row0 .. row0 + ROWS of a byte matrix (row stride ld bytes), k-tile kt (RB bytes per
// row), into shared memory at dst, chunk c of row r at w_pos<RB == 128>(r, c); zeros past `rows`
// and `row_bytes`. The kThreads threads copy (fewer when the tile has fewer chunks: 32 rows of 64
// bytes, the NVFP4 native kernels' x).
template <int ROWS, int RB, bool kSw8 = false>
__device__ __forceinline__ void load_code_rows(uint32_t dst, const unsigned char* src, long long ld, int row0, int rows,
                                               int row_bytes, int kt, int tid) {
  static_assert(!kSw8 || RB == 128, "the 8-row swizzle is for 128-byte rows");
  constexpr int kCh = RB / 16, kChunks = ROWS * kCh;
  static_assert(kChunks % kThreads == 0 || kChunks < kThreads, "whole rounds of copies, or one partial");
#pragma unroll
  for (int j = 0; j < (kChunks + kThreads - 1) / kThreads; ++j) {
    if (kChunks < kThreads && tid >= kChunks) break;
    const int i = tid + kThreads * j, row = i / kCh, c = i % kCh;
    const int gr = row0 + row, gb = kt * RB + 16 * c;
    const bool live = gr < rows && gb < row_bytes;
    const uint32_t at = kSw8 ? w_pos8(row, c) : w_pos<RB == 128>(row, c);
    bsgemv::cp_async<16>(dst + at, live ? src + (long long)gr * ld + gb : src, live);
  }
}

// The weight scales of k-tile kt for weight rows n0 .. n0 + BN into ss: swizzled 512-byte tiles
// (kTiles per k-tile and 128-row block: NVFP4 two, MX one), or block FP8's f32 (32 x 32 tiles: 16
// bytes, 4 columns, per 32-row tile row; 128 x 128: one f32 per 128-row block; rows past N zeros,
// the padded rows keep every copy in bounds).
template <int kTiles, int BN>
__device__ __forceinline__ void load_scale_tiles(uint32_t ss, const BsGemmParams& p, int n0, int kt, int tid) {
  constexpr int kChunks = (BN / 128) * kTiles * 32;
  if (tid < kChunks) {
    const int rb = tid / (kTiles * 32), tile = kt * kTiles + (tid / 32) % kTiles, c = tid % 32;
    const int grb = n0 / 128 + rb;
    const bool live = grb * 128 < p.n && tile < p.scale_tiles;
    bsgemv::cp_async<16>(ss + 16u * tid, live ? p.scales + ((long long)grb * p.scale_tiles + tile) * 512 + 16 * c : p.scales,
                         live);
  }
}
template <int BN>
__device__ __forceinline__ void load_block_scales(uint32_t ss, const BsGemmParams& p, int n0, int kt, int tid) {
  const float* bscales = reinterpret_cast<const float*>(p.scales);
  if (p.flags & bsgemv::kTile32) {
    if (tid < BN / 32) {
      const int tr = n0 / 32 + tid;
      const bool live = tr < p.sgroups;
      bsgemv::cp_async<16>(ss + 16u * tid, live ? bscales + (long long)tr * p.sld + 4 * kt : bscales, live);
    }
  } else if (tid < BN / 128) {
    const int grb = n0 / 128 + tid;
    const bool live = grb < p.sgroups;
    bsgemv::cp_async<4>(ss + 16u * tid, live ? bscales + (long long)grb * p.sld + kt : bscales, live);
  }
}

// f32 x scales (the kXs kernels: block-FP8 weights x block FP8 1 x 128 x with f32 scales, p.xscales
// [M][ktiles] f32): x rows m0 .. m0 + BM of k-tile kt at ss + 128, after the block scales (f32
// each; zeros past M and K).
template <int BM, int BN>
__device__ __forceinline__ void load_x_scales_f32(uint32_t ss, const BsGemmParams& p, int m0, int kt, int tid) {
  static_assert(BN / 32 * 16 <= 128 && 128 + 4 * BM <= int(kScaleSmem), "block and x scales fit the stage's scale area");
  if (tid < BM) {
    const float* xsf = reinterpret_cast<const float*>(p.xscales);
    const bool live = m0 + tid < p.m && kt < p.ktiles;
    bsgemv::cp_async<4>(ss + 128u + 4u * tid, live ? xsf + (long long)(m0 + tid) * p.ktiles + kt : xsf, live);
  }
}

// One ring stage of the tiled and wgmma kernels at st: x rows (kWg: wgmma's swizzled slabs), the
// weight's code rows (FP8 in the wgmma kernels: the 8-row swizzle), the format's scales; every
// thread then arrives on the stage's barrier `bar` once its copies land.
template <Fmt F, int BM, int BN, bool kWg, bool kXs = false>
__device__ __forceinline__ void load_stage(uint32_t st, const BsGemmParams& p, int m0, int n0, int kt, int tid,
                                           uint32_t bar) {
  using T = Tile<F, BM / 32, BN / 32>;
  load_x_rows<BM, T::kFp8, kWg>(st, p, m0, kt, tid);
  load_code_rows<BN, T::RB, kWg && T::kFp8>(st + T::kX, p.codes, p.row_bytes, n0, p.n, p.row_bytes, kt, tid);
  const uint32_t ss = st + T::kX + T::kW;
  if constexpr (F == Fmt::Nvfp4 || F == Fmt::Mxfp4 || F == Fmt::Mxfp8) {
    load_scale_tiles<F == Fmt::Nvfp4 ? 2 : 1, BN>(ss, p, n0, kt, tid);
  } else if constexpr (F == Fmt::Fp8Block) {
    load_block_scales<BN>(ss, p, n0, kt, tid);
    if constexpr (kXs) load_x_scales_f32<BM, BN>(ss, p, m0, kt, tid);
  }
  bsgemv::cp_async_mbar_arrive(bar);
}

// A CTA's output tile (M tiles fastest) and its split's k-tiles [kt0, kt0 + ktiles): split-K,
// gridDim.y splits of kt_per k-tiles (Rust leaves no split empty), or (kTail: the wgmma kernels)
// the split tail, CTA tail0 + s u + v taking part v of tile tail0 + u's k-tiles [v kt / s,
// (v + 1) kt / s) (Rust keeps s <= ktiles). The split (slot indexing the partial tiles and the
// counter, split, splits) goes to shared memory for `finish`, so that no register holds it across
// the k loop. Thread 0 initializes the ring's S barriers (every thread arrives on each); the
// caller synchronizes the block before the loop.
struct CtaWork {
  int m0, n0, kt0, ktiles;
};
__device__ __forceinline__ int* split_info() {
  __shared__ int s_split[3];  // slot, split, splits
  return s_split;
}
template <int BM, int BN, bool kTail = false>
__device__ __forceinline__ CtaWork cta_work(const BsGemmParams& p, uint32_t bar0) {
  CtaWork w;
  int tile = int(blockIdx.x), slot = tile, split = int(blockIdx.y), splits = int(gridDim.y);
  w.kt0 = split * p.kt_per;
  int kt1 = min(p.ktiles, w.kt0 + p.kt_per);
  if constexpr (kTail) {
    if (p.tail_splits > 1 && tile >= p.tail0) {
      const int u = tile - p.tail0;
      splits = p.tail_splits;
      slot = u / splits;
      split = u - slot * splits;
      tile = p.tail0 + slot;
      w.kt0 = split * p.ktiles / splits;
      kt1 = (split + 1) * p.ktiles / splits;
    }
  }
  w.m0 = (tile % p.mtiles) * BM;
  w.n0 = (tile / p.mtiles) * BN;
  w.ktiles = kt1 - w.kt0;
  if (threadIdx.x == 0) {
    int* si = split_info();
    si[0] = slot, si[1] = split, si[2] = splits;
    for (int s = 0; s < p.stages; ++s) mbar_init(bar0 + 8 * s, kThreads);
    mbar_fence_init();
  }
  return w;
}

// After the k loop, shared by the tiled kernels (BF16 dequantization, the SM120 native MMAs and
// the SM90 wgmma kernels): split-K's partial tiles and their ordered sum, then the epilogue
// (alpha and the tensor scales, the bias in f32, one rounding, stores inside M x N).
// acc[i][j][e]: the warp's weight tile i (rows nrow0 + RS i + g + 8 (e >> 1)) by x tile j (rows
// xrow0 + 8 j + 2t + (e & 1)).
// kSplit: the split code is built (the middle tiles, BM <= 64, and the wgmma kernels' split tail;
// Rust never splits the other 128-row kernels).
template <int WT, int XT, int BM, int BN, typename TOut, int RS = 16, bool kSplit = (BM <= 64)>
__device__ __forceinline__ void finish(const BsGemmParams& p, const CtaWork& cw, float (&acc)[WT][XT][4], int xrow0,
                                       int nrow0) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int m0 = cw.m0, n0 = cw.n0;
  if constexpr (kSplit) {
    const int* si = split_info();
    const int tile = si[0], split = si[1], splits = si[2];
    if (splits > 1) {
      // Split-K: every split stores its f32 partial tile (lane-major: coalesced), the last to
      // arrive on the tile's tagged counter sums all splits in split order (bitwise reproducible)
      // and runs the epilogue.
      __shared__ unsigned int s_prev;
      constexpr int kV = WT * XT * 4;
      auto slot_of = [&](int sp) {
        return p.partials + ((long long)tile * splits + sp) * (BM * BN) + (long long)warp * kV * 32 + lane;
      };
      float* mine = slot_of(split);
#pragma unroll
      for (int i = 0; i < WT; ++i)
#pragma unroll
        for (int j = 0; j < XT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) __stcg(mine + ((i * XT + j) * 4 + e) * 32, acc[i][j][e]);
      __threadfence();
      __syncthreads();
      if (tid == 0) s_prev = arrive_tagged(&p.counters[tile], unsigned(splits));
      __syncthreads();
      if (s_prev != unsigned(splits - 1)) return;
      __threadfence();
#pragma unroll
      for (int i = 0; i < WT; ++i)
#pragma unroll
        for (int j = 0; j < XT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
      for (int sp = 0; sp < splits; ++sp) {
        const float* part_sp = slot_of(sp);
#pragma unroll
        for (int i = 0; i < WT; ++i)
#pragma unroll
          for (int j = 0; j < XT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += __ldcg(part_sp + ((i * XT + j) * 4 + e) * 32);
      }
    }
  }

  // Epilogue: lane element e of tile (i, j) is weight row 16 i + g + 8 (e >> 1), x row 8 j + 2t +
  // (e & 1).
  const bool has_bias = p.bias != nullptr;
  const float os = bsgemv::epilogue_scale(p.out_scale, p.xmult, p.flags);
#pragma unroll
  for (int i = 0; i < WT; ++i) {
    float bias[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = n0 + nrow0 + RS * i + g + 8 * h;
      if (has_bias && col < p.n)
        bias[h] = (p.flags & bsgemv::kBiasF32) ? reinterpret_cast<const float*>(p.bias)[col]
                                               : __bfloat162float(reinterpret_cast<const bf16*>(p.bias)[col]);
    }
#pragma unroll
    for (int j = 0; j < XT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n0 + nrow0 + RS * i + g + 8 * (e >> 1), row = m0 + xrow0 + 8 * j + 2 * t + (e & 1);
        const float y = acc[i][j][e] * os;
        const TOut out = from_f32<TOut>(has_bias ? y + bias[e >> 1] : y);
        if (row < p.m && col < p.n) reinterpret_cast<TOut*>(p.y)[(long long)row * p.ldy + col] = out;
      }
  }
}

// kXs (block FP8 only): x is block FP8 1 x 128 with f32 scales (x̂ = its codes); each promotion
// multiplies by the x rows' scales too (a template parameter, not a branch: the plain kernels'
// code stays as it was).
template <Fmt F, int WM, int WN, typename TOut, bool kXs = false>
__device__ __forceinline__ void gemm(const BsGemmParams& p) {
  using T = Tile<F, WM, WN>;
  constexpr bool kFp8 = T::kFp8;
  constexpr int BM = T::BM, BN = T::BN;
  constexpr bool kPromote = F == Fmt::Fp8Block;
  __shared__ __align__(8) uint64_t s_bar[kMaxStages];
  __shared__ uint32_t s_tab[256];
  extern __shared__ __align__(16) unsigned char s_dyn[];
  const uint32_t ring = (smem_addr(s_dyn) + 127u) & ~127u;  // the launch adds 128 bytes of slack
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t bar0 = smem_addr(s_bar);
  const CtaWork cw = cta_work<BM, BN>(p, bar0);
  const int m0 = cw.m0, n0 = cw.n0, kt0 = cw.kt0, ktiles = cw.ktiles, S = p.stages;
  bsgemv::fill_scale_table<F>(s_tab, p.scale_bias, tid, kThreads);
  __syncthreads();

  const bool tile32 = (p.flags & bsgemv::kTile32) != 0;
  // k-tile kt into ring slot s; every thread arrives on the slot's barrier once its copies land.
  auto load = [&](int kt, int s) {
    load_stage<F, BM, BN, false, kXs>(ring + uint32_t(s) * T::kStage, p, m0, n0, kt, tid, bar0 + 8 * s);
  };

  // Warp (wm, wn): x rows xrow0 .. + 16 WM (XT = 2 WM 8-row MMA column tiles), weight rows
  // nrow0 .. + 8 WN (WT = WN / 2 16-row MMA row tiles). The weight is the MMA's A (swap-AB, as
  // the decode path): its dequantized bf16x2 pairs are written by mul.bf16x2 straight into A's
  // register quad, and x's B registers are two consecutive registers of a 16-byte ld.shared — no
  // register moves (x as A needed four per MMA: rows g and g + 8 interleave in A's quad).
  constexpr int XT = 2 * WM, WT = WN / 2;
  const int wm = warp & 1, wn = warp >> 1;
  const int xrow0 = wm * 16 * WM, nrow0 = wn * 8 * WN;
  // Scale bytes of weight row r = nrow0 + 16 i + g (+ 8) in its 128-row block's tiles: (r % 32) *
  // 16 + ((r % 128) / 32) * 4 (layout.rs); nrow0 is a multiple of 32 and the warp's rows stay in
  // one block: sc_row + 256 (i % 2) + 4 (i / 2) (+ 128 for row g + 8) in block sc_blk.
  const uint32_t sc_row = uint32_t(g * 16 + ((nrow0 & 127) >> 5) * 4), sc_blk = uint32_t(nrow0 >> 7);
  auto sc_off = [&](int i, int h) { return sc_row + 256u * (i & 1) + 4u * (i >> 1) + 128u * h; };
  float acc[WT][XT][4];
  float part[kPromote ? WT : 1][kPromote ? XT : 1][4];
  auto zero_part = [&]() {
#pragma unroll
    for (int i = 0; i < (kPromote ? WT : 1); ++i)
#pragma unroll
      for (int j = 0; j < (kPromote ? XT : 1); ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[i][j][e] = 0.0f;
  };
  // acc += part * s, with f32 x scales (kXs: staged at ss + 128) times x row xrow0 + 8 j + 2t (+ 1)'s.
  static_assert(!kXs || F == Fmt::Fp8Block, "f32 x scales go with block-FP8 weights");
  auto promote = [&](float s, uint32_t ss) {
#pragma unroll
    for (int j = 0; j < (kPromote ? XT : 1); ++j) {
      float s2[2] = {s, s};
      if constexpr (kXs) bsgemv::x_scaled(s, ss + 128u + 4u * uint32_t(xrow0 + 8 * j + 2 * t), s2);
#pragma unroll
      for (int i = 0; i < (kPromote ? WT : 1); ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = fmaf(part[i][j][e], s2[e & 1], acc[i][j][e]), part[i][j][e] = 0.0f;
    }
  };
#pragma unroll
  for (int i = 0; i < WT; ++i)
#pragma unroll
    for (int j = 0; j < XT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  zero_part();
  // The two k-steps of one 8-k word (FP4) or group half (FP8): A quads a0, a1 against x's
  // registers (.x, .y) and (.z, .w) of every column tile; a0's MMAs first, then a1's, so the two
  // MMAs into one accumulator are XT apart.
  auto mma2 = [&](float (&c)[XT][4], const uint32_t (&a0)[4], const uint32_t (&a1)[4], const uint4 (&xb)[XT]) {
#pragma unroll
    for (int j = 0; j < XT; ++j) {
      const uint32_t b[2] = {xb[j].x, xb[j].y};
      mma_m16n8k16_bf16_f32(c[j], a0, b);
    }
#pragma unroll
    for (int j = 0; j < XT; ++j) {
      const uint32_t b[2] = {xb[j].z, xb[j].w};
      mma_m16n8k16_bf16_f32(c[j], a1, b);
    }
  };

  for (int s = 0; s < S - 1 && s < ktiles; ++s) load(kt0 + s, s);
  int slot = 0, phase = 0;
  for (int kt = 0; kt < ktiles; ++kt) {
    mbar_wait(bar0 + 8 * slot, uint32_t(phase));
    __syncthreads();  // every warp is done with the slot of k-tile kt - 1: refill it
    if (kt + S - 1 < ktiles) load(kt0 + kt + S - 1, (slot + S - 1) % S);
    const uint32_t xs = ring + uint32_t(slot) * T::kStage, ws = xs + T::kX, ss = ws + T::kW;
    if constexpr (!kFp8) {
      // Scales of the lane's k (blocks 2t, 2t + 1 for NVFP4, block t for MXFP4), rows g, g + 8.
      uint32_t sc[WT][2][2];
#pragma unroll
      for (int i = 0; i < WT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t off = sc_off(i, h) + (F == Fmt::Nvfp4 ? 1024u : 512u) * sc_blk;
          if (F == Fmt::Nvfp4) {
            const uint32_t wd = bsgemv::ld_shared_u32(ss + off + 512u * (t >> 1)) >> (16 * (t & 1));
            sc[i][h][0] = s_tab[wd & 0xFF];
            sc[i][h][1] = s_tab[(wd >> 8) & 0xFF];
          } else {
            sc[i][h][0] = sc[i][h][1] = s_tab[(bsgemv::ld_shared_u32(ss + off) >> (8 * t)) & 0xFF];
          }
        }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int w = (q + t) & 3;  // the word this lane multiplies at step pair q
        uint4 xb[XT];
#pragma unroll
        for (int j = 0; j < XT; ++j) xb[j] = bsgemv::ld_shared_v4(xs + x_pos<false>(xrow0 + 8 * j + g, 4 * t + w));
#pragma unroll
        for (int i = 0; i < WT; ++i) {
          const int r = nrow0 + 16 * i + g;
          const uint32_t lo = bsgemv::ld_shared_u32(ws + w_pos<false>(r, t) + 4u * w);
          const uint32_t hi = bsgemv::ld_shared_u32(ws + w_pos<false>(r + 8, t) + 4u * w);
          const uint32_t sl = (w >> 1) ? sc[i][0][1] : sc[i][0][0], sh = (w >> 1) ? sc[i][1][1] : sc[i][1][0];
          const uint32_t a0[4] = {bsgemv::hmul2_bf16(bsgemv::pair<0>(lo), sl), bsgemv::hmul2_bf16(bsgemv::pair<0>(hi), sh),
                                  bsgemv::hmul2_bf16(bsgemv::pair<1>(lo), sl), bsgemv::hmul2_bf16(bsgemv::pair<1>(hi), sh)};
          const uint32_t a1[4] = {bsgemv::hmul2_bf16(bsgemv::pair<2>(lo), sl), bsgemv::hmul2_bf16(bsgemv::pair<2>(hi), sh),
                                  bsgemv::hmul2_bf16(bsgemv::pair<3>(lo), sl), bsgemv::hmul2_bf16(bsgemv::pair<3>(hi), sh)};
          mma2(acc[i], a0, a1, xb);
        }
      }
    } else {
#pragma unroll
      for (int T = 0; T < 4; ++T) {
        uint4 xb[XT];
#pragma unroll
        for (int j = 0; j < XT; ++j) xb[j] = bsgemv::ld_shared_v4(xs + x_pos<true>(xrow0 + 8 * j + g, 4 * T + t));
#pragma unroll
        for (int i = 0; i < WT; ++i) {
          const int r = nrow0 + 16 * i + g;
          const uint32_t coff = 8u * (t & 1);
          const uint2 lo = bsgemv::ld_shared_v2(ws + w_pos<true>(r, 2 * T + (t >> 1)) + coff);
          const uint2 hi = bsgemv::ld_shared_v2(ws + w_pos<true>(r + 8, 2 * T + (t >> 1)) + coff);
          uint32_t sl = bsgemv::kTwo120, sh = bsgemv::kTwo120;
          if constexpr (F == Fmt::Mxfp8) {  // the rows' 4 scale bytes of the k-tile: byte T
            sl = s_tab[(bsgemv::ld_shared_u32(ss + 512u * sc_blk + sc_off(i, 0)) >> (8 * T)) & 0xFF];
            sh = s_tab[(bsgemv::ld_shared_u32(ss + 512u * sc_blk + sc_off(i, 1)) >> (8 * T)) & 0xFF];
          }
          const uint32_t a0[4] = {bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<0>(lo.x), sl),
                                  bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<0>(hi.x), sh),
                                  bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<1>(lo.x), sl),
                                  bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<1>(hi.x), sh)};
          const uint32_t a1[4] = {bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<0>(lo.y), sl),
                                  bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<0>(hi.y), sh),
                                  bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<1>(lo.y), sl),
                                  bsgemv::hmul2_bf16(e4m3_pair_bf16_2m120<1>(hi.y), sh)};
          if constexpr (kPromote) {
            mma2(part[i], a0, a1, xb);
          } else {
            mma2(acc[i], a0, a1, xb);
          }
        }
        // 32 x 32 tiles: the warp's 32 weight rows (WN = 4) are tile row wn of the CTA, column T.
        if constexpr (kPromote) {
          if (tile32) promote(bsgemv::ld_shared_f32(ss + 16u * wn + 4u * T), ss);
        }
      }
      if constexpr (kPromote) {
        if (!tile32) promote(bsgemv::ld_shared_f32(ss + 16u * sc_blk), ss);
      }
    }
    if (++slot == S) slot = 0, phase ^= 1;
  }

  finish<WN / 2, 2 * WM, BM, BN, TOut>(p, cw, acc, xrow0, nrow0);
}
}  // namespace bsgemm
}  // namespace b12x
