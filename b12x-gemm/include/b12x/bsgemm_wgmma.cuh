// bsgemm_wgmma.cuh — gemm.blockscaled's SM90 wgmma kernel body (M > 64), shared with crates that
// run it over tiles of their own.                                                crate: b12x-gemm
//   `bsgemm::wgemm<F, MT, TOut, kXs>(p)` is the kernel of kernels/blockscaled_gemv.cu's
//   `b12x_bsgemm_wg_*` entry points (described below). moe.fused_moe's grouped path runs it per
//   (expert slot, N tile) on SM90, as it runs the tiled body (bsgemm_tile.cuh) elsewhere, with a
//   BsGemmParams whose pointers are offset to the slot's expert and rows.
// Exported to dependent crates' kernels through `links = "b12x_gemm"` (DEP_B12X_GEMM_INCLUDE).
#pragma once

#include "b12x/bsgemm_tile.cuh"
#include "b12x/wgmma_sm90.cuh"

namespace b12x {
namespace bsgemm {

// ---- SM90 only: wgmma with the dequantized weight as register A ------------------------------
// CTA tile 128 x rows by 128 MT weight rows; two warpgroups of 64 MT weight rows (MT m64 tiles
// each) run wgmma.m64n128k16 with A — the weight, swap-AB as everywhere here — from registers and
// B, x, from shared memory: no ld.shared of x and one MMA instruction per 64 x 128 x 16 instead of
// sixteen mma.sync. The ring, loaders, scale staging and epilogue are the tiled kernels'; x is
// staged in wgmma's 128-byte-swizzled K-major layout (load_x_rows<.., kWg>), FP8 code rows with
// chunk c at c ^ (row % 8) (w_pos8). The A fragment wants k in natural order (lane t: k 2t, 2t + 1,
// 2t + 8, 2t + 9 of each k16 step): FP4, pair t of the step's two layout-v2 words (k 16 s .. + 7
// and + 8 .. + 15 of the row) — bsgemv::pair<t>'s rotation chosen per lane at run time (four ALU
// instructions per pair instead of ~2.25); FP8, bytes 2 (t % 2), + 1 of the step chunk's words
// t / 2 and 2 + t / 2 — e4m3_pair_bf16_2m120's byte permutation with a per-lane selector. Scales as
// the tiled kernels (NVFP4 per 16 k, MX per 32 k in the BF16 multiply; per-tensor FP8's in the
// epilogue); block FP8's f32 scales multiply per-tile partial sums (DeepGEMM's promotion: a k16
// step that starts a tile overwrites the partial accumulators, scale-d = 0; 32 x 32 tiles every
// two steps, 128 x 128 every k-tile; with MT = 2 the warpgroup's m64 tiles take turns through
// the one set of partial sums, a pass of eight k-steps each). The A registers are
// double-buffered across k-steps (wait_group 1 before a buffer is rewritten); every k-tile's MMAs
// complete (wait_group 0) before the block barrier that lets its slot be refilled. Other targets
// build a trapping body; Rust lists these kernels on SM90 only.
// The wgmma bodies' lane geometry (wgemm here, moe.fused_moe's TMA-fed tile): the byte of weight
// row r's scale word in its 128-row block's 512-byte scale tile, and the lane's FP4 pair —
// bsgemv::pair<t>'s rotation chosen per lane at run time (t = 3 takes two bits from rotation 14).
__device__ __forceinline__ uint32_t wg_scale_off(int r) { return uint32_t((r & 31) * 16 + ((r & 127) >> 5) * 4); }
struct Fp4LanePair {
  int r1;
  uint32_t m1, m2;
  __device__ __forceinline__ explicit Fp4LanePair(int t) {
    constexpr uint32_t kM = 0x81C081C0u, k14 = 0x00400040u;
    r1 = t == 0 ? 0 : t == 1 ? 4 : t == 2 ? 10 : 6;
    m1 = t == 3 ? (kM & ~k14) : kM;
    m2 = t == 3 ? k14 : 0u;
  }
  __device__ __forceinline__ uint32_t operator()(uint32_t w) const {
    return (e2m1_rotr(w, r1) & m1) | (e2m1_rotr(w, 14) & m2);
  }
};

template <Fmt F, int MT, typename TOut, bool kXs = false>
__device__ __forceinline__ void wgemm(const BsGemmParams& p) {
#if B12X_SM90_FEATURES
  using T = Tile<F, 4, 4 * MT>;
  constexpr bool kFp8 = T::kFp8, kPromote = F == Fmt::Fp8Block;
  constexpr int BM = T::BM, BN = T::BN;  // 128 x rows, 128 MT weight rows
  static_assert(MT == 1 || MT == 2, "one or two m64 tiles per warpgroup");
  static_assert(T::kStage % 1024 == 0 && T::kX == 2 * BM * 128, "1024-byte aligned stages of two x slabs");
  __shared__ __align__(8) uint64_t s_bar[kMaxStages];
  __shared__ uint32_t s_tab[256];
  extern __shared__ __align__(16) unsigned char s_dyn[];
  const uint32_t ring = (smem_addr(s_dyn) + 1023u) & ~1023u;  // the launch adds 1024 bytes of slack
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t bar0 = smem_addr(s_bar);
  const CtaWork cw = cta_work<BM, BN, true>(p, bar0);
  const int m0 = cw.m0, n0 = cw.n0, kt0 = cw.kt0, ktiles = cw.ktiles, S = p.stages;
  bsgemv::fill_scale_table<F>(s_tab, p.scale_bias, tid, kThreads);
  __syncthreads();

  auto load = [&](int kt, int s) {
    load_stage<F, BM, BN, true, kXs>(ring + uint32_t(s) * T::kStage, p, m0, n0, kt, tid, bar0 + 8 * s);
  };

  // Warpgroup wgi owns weight rows 64 MT wgi .. as MT m64 tiles i; its warp wl rows 64 i + 16 wl
  // + g and + 8 of each.
  const int wgi = warp >> 2, wl = warp & 3;
  const int nrow0 = 64 * MT * wgi + 16 * wl;
  const uint32_t sc_blk = uint32_t(nrow0 >> 7);
  auto sc_off = [&](int i, int h) { return wg_scale_off(nrow0 + 64 * i + g + 8 * h); };
  // The lane's pair: FP4, Fp4LanePair; FP8, bytes 2 (t % 2), + 1 of a word as
  // e4m3_pair_bf16_2m120<t % 2> places them.
  const Fp4LanePair fp4(t);
  const uint32_t sel = (t & 1) ? 0x3424u : 0x1404u;
  auto pair_t = [&](uint32_t w) {
    if constexpr (kFp8) {
      const uint32_t q = __byte_perm(w, 0u, sel);
      return (q & 0x80008000u) | ((q >> 4) & 0x07F007F0u);
    } else {
      return fp4(w);
    }
  };

  float acc[MT][16][4];
  float part[kPromote ? 16 : 1][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  const bool tile32 = (p.flags & bsgemv::kTile32) != 0;
  static_assert(!kXs || F == Fmt::Fp8Block, "f32 x scales go with block-FP8 weights");

  for (int s = 0; s < S - 1 && s < ktiles; ++s) load(kt0 + s, s);
  int slot = 0, phase = 0;
  for (int kt = 0; kt < ktiles; ++kt) {
    mbar_wait(bar0 + 8 * slot, uint32_t(phase));
    wg::fence_proxy_async();  // the landed x, before the wgmmas (async proxy) read it
    __syncthreads();          // every warp's MMAs of k-tile kt - 1 are complete: refill its slot
    if (kt + S - 1 < ktiles) load(kt0 + kt + S - 1, (slot + S - 1) % S);
    const uint32_t xs = ring + uint32_t(slot) * T::kStage, ws = xs + T::kX, ss = ws + T::kW;
    // The rows' scale words of the k-tile: NVFP4 two tiles (blocks 0-3, 4-7 of 16 k), MX one
    // (blocks 0-3 of 32 k).
    constexpr int kTw = F == Fmt::Nvfp4 ? 2 : (F == Fmt::Mxfp4 || F == Fmt::Mxfp8) ? 1 : 0;
    uint32_t scw[MT][2][kTw > 0 ? kTw : 1];
    if constexpr (kTw > 0) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int u = 0; u < kTw; ++u)
            scw[i][h][u] = bsgemv::ld_shared_u32(ss + sc_off(i, h) + 512u * (kTw * sc_blk + u));
    }
    uint32_t a[2][MT][4];  // [buffer][m64 tile][register]
    // Block FP8 runs its m64 tiles one after the other through the one set of partial sums (a
    // pass per tile); the others run every tile in each k16 step.
    constexpr int kPasses = kPromote ? MT : 1;
#pragma unroll
    for (int ip = 0; ip < kPasses; ++ip) {
#pragma unroll
      for (int s = 0; s < 8; ++s) {  // k16 steps
        const int u = 8 * ip + s;
        uint32_t(&ab)[MT][4] = a[u & 1];
        if (u >= 2) wg::wait<1>();  // the MMAs two steps back, the last readers of this buffer, are done
        const int blk = F == Fmt::Nvfp4 ? s : s >> 1;  // the step's scale block in the k-tile (16 / 32 k)
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (kPromote && i != ip) continue;
          const int r = nrow0 + 64 * i + g;
          uint32_t w[2][2];  // [row g, g + 8][k 2t.. / 2t + 8..]
          if constexpr (kFp8) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint32_t at = ws + w_pos8(r + 8 * h, s) + 4u * uint32_t(t >> 1);
              w[h][0] = bsgemv::ld_shared_u32(at);
              w[h][1] = bsgemv::ld_shared_u32(at + 8u);
            }
          } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint2 v = bsgemv::ld_shared_v2(ws + w_pos<false>(r + 8 * h, s >> 1) + 8u * (s & 1));
              w[h][0] = v.x;
              w[h][1] = v.y;
            }
          }
          uint32_t sl = bsgemv::kTwo120, sh = bsgemv::kTwo120;
          if constexpr (kTw > 0) {
            sl = s_tab[(scw[i][0][kTw == 2 ? blk >> 2 : 0] >> (8 * (blk & 3))) & 0xFF];
            sh = s_tab[(scw[i][1][kTw == 2 ? blk >> 2 : 0] >> (8 * (blk & 3))) & 0xFF];
          }
          ab[i][0] = bsgemv::hmul2_bf16(pair_t(w[0][0]), sl);
          ab[i][1] = bsgemv::hmul2_bf16(pair_t(w[1][0]), sh);
          ab[i][2] = bsgemv::hmul2_bf16(pair_t(w[0][1]), sl);
          ab[i][3] = bsgemv::hmul2_bf16(pair_t(w[1][1]), sh);
        }
        wg::fence();
        const uint64_t db = wg::desc_sw128(xs + uint32_t(s >> 2) * (BM * 128) + 32u * (s & 3));
        if constexpr (kPromote) {
          // A tile's first step overwrites the partial sums (scale-d = 0).
          const bool first = tile32 ? (s & 1) == 0 : s == 0;
          wg::mma_m64n128k16_rs(reinterpret_cast<float(&)[64]>(part), ab[ip], db, !first);
        } else {
#pragma unroll
          for (int i = 0; i < MT; ++i) wg::mma_m64n128k16_rs(reinterpret_cast<float(&)[64]>(acc[i]), ab[i], db, true);
        }
        wg::commit();
        if constexpr (kPromote) {
          if (tile32 ? (s & 1) == 1 : s == 7) {
            // The tile's partial sums are complete: acc += part * its f32 scale (32 x 32: tile row
            // (nrow0 + 64 ip) / 32, which holds the warp's 16 rows, column s / 2; 128 x 128: the
            // warpgroup's block).
            wg::wait<0>();
            const int r0 = nrow0 + 64 * ip;
            const float sc =
                bsgemv::ld_shared_f32(ss + (tile32 ? 16u * uint32_t(r0 >> 5) + 4u * uint32_t(s >> 1) : 16u * sc_blk));
#pragma unroll
            for (int j = 0; j < 16; ++j) {
              float s2[2] = {sc, sc};  // f32 x scales: x rows 8 j + 2t, + 1 (staged at ss + 128)
              if constexpr (kXs) bsgemv::x_scaled(sc, ss + 128u + 4u * uint32_t(8 * j + 2 * t), s2);
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[ip][j][e] = fmaf(part[j][e], s2[e & 1], acc[ip][j][e]);
            }
          }
        }
      }
    }
    wg::wait<0>();
    if (++slot == S) slot = 0, phase ^= 1;
  }
  finish<MT, 16, BM, BN, TOut, 64, true>(p, cw, acc, 0, nrow0);
#else
  __trap();
#endif
}

}  // namespace bsgemm
}  // namespace b12x
