// Prototype harness for gemm.blockscaled's decode kernel (not part of the build, not the source
// of any reported number): where does a W4A16 NVFP4 decode call's time go? On the GPU machine
// (nvcc, no Rust) it compiles in seconds. It holds a copy of the library's `gemv` (session 30's
// kernel, kernels/blockscaled_gemv.cu) with per-CTA timeline marks (%globaltimer: start, first
// stage consumed, last stage released, last consumer warp done) and switches FL that take parts
// away: 1 = consumers wait and release but compute nothing (the pipeline alone), 2 = no copies
// and no waits (the compute alone, on whatever shared memory holds), 4 = no merge of shared row
// blocks, 8 = the producer stages only live x rows. FL = 0 is the library kernel and is checked
// bitwise against it (and FL = 8 against FL = 0). Times: graph replays with the project's L2
// flush, median of 30; a size-matched plain read (proto_trace.cuh) for comparison.
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr \
//     -I../../b12x-core/include -o /tmp/d bsgemv_decode_proto.cu && /tmp/d
#define B12X_PROTO_ENTRY_POINTS 1
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstring>
#include <string>
#include "../../b12x-gemm/kernels/blockscaled_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"
using b12x::bf16;
#include "proto_common.cuh"
#include "proto_trace.cuh"

// [cta][mark]: 0 start, 1 first stage consumed (warp 0), 2 last stage released (warp 0), 3 last
// consumer warp done.
__device__ unsigned long long g_tr[4096][4];
__device__ __forceinline__ void trace_mark(int k) {
  if (k == 3) {
    if ((threadIdx.x & 31) == 0) atomicMax(&g_tr[blockIdx.x][3], gtimer());
  } else if (threadIdx.x == 0) {
    g_tr[blockIdx.x][k] = gtimer();
    if (k == 0) g_tr[blockIdx.x][3] = 0;
  }
}

namespace b12x {
namespace bsgemv {
// True when a byte of w is not a normal, valid UE4M3 scale (e = 0, 0x7F, or bit 7 set); carries
// and borrows between bytes give false positives only (the exact table path).
__device__ __forceinline__ bool ue4m3_needs_table(uint32_t w) {
  return ((((w & 0x78787878u) - 0x01010101u) | w | (w + 0x01010101u)) & 0x80808080u) != 0;
}
// Bytes 0 and 1 of w (normal UE4M3) -> their bf16 scales x 2^119, each in both halves.
__device__ __forceinline__ void ue4m3_pair_x2p119(uint32_t w, uint32_t (&o)[2]) {
  const uint32_t p = __byte_perm(w, 0u, 0x4140);  // halves: byte 0, byte 1
  const uint32_t v = (__funnelshift_l(0u, p & 0x007F007Fu, 4)) + 0x77807780u;
  o[0] = __byte_perm(v, 0u, 0x1010);
  o[1] = __byte_perm(v, 0u, 0x3232);
}
// FL64 / 128 / 192 / 960: pair Q of a layout-v2 word with the word's first KI rotations (Q1's rotr 4, Q2's
// rotr 10, Q3's rotr 6 and rotr 14) done as mul.wide.u32 by 2^(32 - r) (IMAD.WIDE on the FMA
// pipe: lo | hi is the rotation) instead of SHF on the ALU pipe; the same bits.
template <int Q, int KI>
__device__ __forceinline__ uint32_t pair_im(uint32_t w, const uint32_t (&mul)[4]) {
  constexpr uint32_t kM = 0x81C081C0u, k14 = 0x00400040u;
  auto rot = [&](int idx, int r) -> uint32_t {
    if (idx < KI) {
      const uint64_t d = (uint64_t)w * mul[idx];
      return (uint32_t)d | (uint32_t)(d >> 32);
    }
    return __funnelshift_r(w, w, r);
  };
  if (Q == 0) return w & kM;
  if (Q == 1) return rot(0, 4) & kM;
  if (Q == 2) return rot(1, 10) & kM;
  return (rot(2, 6) & (kM & ~k14)) | (rot(3, 14) & k14);
}
template <int NT, int CH, int KI>
__device__ __forceinline__ void sub_chunk_im(const uint4& cl, const uint4& ch, const uint32_t (&scl)[2],
                                             const uint32_t (&sch)[2], const uint32_t (&xs)[NT],
                                             const uint32_t (&mul)[4], float (&acc)[CH][NT][4]) {
  const uint32_t wl[4] = {cl.x, cl.y, cl.z, cl.w}, wh[4] = {ch.x, ch.y, ch.z, ch.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t sl = scl[j >> 1], sh = sch[j >> 1];
    const uint32_t a0[4] = {hmul2_bf16(pair_im<0, KI>(wl[j], mul), sl), hmul2_bf16(pair_im<0, KI>(wh[j], mul), sh),
                            hmul2_bf16(pair_im<1, KI>(wl[j], mul), sl), hmul2_bf16(pair_im<1, KI>(wh[j], mul), sh)};
    const uint32_t a1[4] = {hmul2_bf16(pair_im<2, KI>(wl[j], mul), sl), hmul2_bf16(pair_im<2, KI>(wh[j], mul), sh),
                            hmul2_bf16(pair_im<3, KI>(wl[j], mul), sl), hmul2_bf16(pair_im<3, KI>(wh[j], mul), sh)};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint4 x = ld_shared_v4(xs[nt] + 64 * j);
      const uint32_t b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
      mma_m16n8k16_bf16_f32(acc[0][nt], a0, b0);
      mma_m16n8k16_bf16_f32(acc[CH - 1][nt], a1, b1);
    }
  }
}
// sub_chunk with x loaded only by lanes whose token g is live (the other MMA columns are never
// stored: any value will do; zeros).
template <int NT, int CH>
__device__ __forceinline__ void sub_chunk_px(const uint4& cl, const uint4& ch, const uint32_t (&scl)[2],
                                             const uint32_t (&sch)[2], const uint32_t (&xs)[NT], bool live0,
                                             float (&acc)[CH][NT][4]) {
  const uint32_t wl[4] = {cl.x, cl.y, cl.z, cl.w}, wh[4] = {ch.x, ch.y, ch.z, ch.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t sl = scl[j >> 1], sh = sch[j >> 1];
    const uint32_t a0[4] = {hmul2_bf16(pair<0>(wl[j]), sl), hmul2_bf16(pair<0>(wh[j]), sh),
                            hmul2_bf16(pair<1>(wl[j]), sl), hmul2_bf16(pair<1>(wh[j]), sh)};
    const uint32_t a1[4] = {hmul2_bf16(pair<2>(wl[j]), sl), hmul2_bf16(pair<2>(wh[j]), sh),
                            hmul2_bf16(pair<3>(wl[j]), sl), hmul2_bf16(pair<3>(wh[j]), sh)};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 x = make_uint4(0u, 0u, 0u, 0u);
      if (nt == 0 ? live0 : true) x = ld_shared_v4(xs[nt] + 64 * j);
      const uint32_t b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
      mma_m16n8k16_bf16_f32(acc[0][nt], a0, b0);
      mma_m16n8k16_bf16_f32(acc[CH - 1][nt], a1, b1);
    }
  }
}
template <Fmt F, int NT, int KB, typename TOut, int FL>
__device__ __forceinline__ void gemv_x(const BsGemvParams& p) {
  trace_mark(0);
  using Info = FmtInfo<F>;
  constexpr bool kFp8 = Info::kFp8;
  constexpr int kBoxK = Info::kBoxK;
  constexpr uint32_t kScaleBytes = Info::kScaleBytes, kXPitch = Info::kXPitch;
  // A stage: KB code boxes, their scales, KB staged x boxes; 1024-byte multiple (the swizzled
  // code boxes of every stage start 1024-byte aligned).
  constexpr uint32_t kXBox = 8 * NT * kXPitch;  // one box's staged x
  constexpr uint32_t kXOff = KB * (kCodeBytes + kScaleBytes);
  constexpr uint32_t kStageBytes = (KB * (kCodeBytes + kScaleBytes + kXBox) + 1023u) & ~1023u;
  constexpr int MT = 8 * NT;
  __shared__ __align__(8) uint64_t s_bar[2 * kMaxStages];  // full[stages], then empty[stages]
  __shared__ uint32_t s_tab[256];                          // scale byte -> bf16x2 scale
  extern __shared__ unsigned char s_dyn[];
  const uint32_t ring = (smem_addr(s_dyn) + 1023u) & ~1023u;  // the launch adds 1 KB of slack
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int kstages = p.kstages, q = p.units_per_cta, stages = p.stages;
  const int units = (p.n + kRows - 1) / kRows * kstages;
  const int u_begin = min(int(blockIdx.x) * q, units);
  const int n_units = min(units - u_begin, q);
  // Walk order as gemm.bf16_gemv's tma configs: when the CTA's list spans row blocks and its last
  // row block continues in the next CTA, that block's units come first (its merge then overlaps
  // the streaming); each row block's units keep their k order.
  int tail = 0, head = 0;
  if (n_units > 0 && u_begin / kstages != (u_begin + n_units - 1) / kstages) {
    tail = (u_begin + n_units) % kstages;
    // FL8192: the first row block's units (shared with the previous CTA) go last, so the CTA
    // that finishes a shared block is always the block's last CTA, at its very end.
    if ((FL & 8192) != 0 && u_begin % kstages != 0) head = kstages - u_begin % kstages;
  }
  auto unit_at = [&](int i) {
    if (i < tail) return u_begin + n_units - tail + i;
    if (i < n_units - head) return u_begin + head + (i - tail);
    return u_begin + (i - (n_units - head));
  };
  const uint32_t full0 = smem_addr(s_bar), empty0 = full0 + 8 * kMaxStages;

  fill_scale_table<F>(s_tab, p.scale_bias, threadIdx.x, blockDim.x);
  auto load = [&](int i, int s) {
    const int u = unit_at(i);
    const int rb = u / kstages, ks = u - rb * kstages;
    const uint32_t bar = full0 + 8 * s, st = ring + s * kStageBytes;
    constexpr int kTiles = KB * Info::kTilesPerBox;
    const int tiles = kTiles > 0 ? min(kTiles, p.scale_tiles - ks * kTiles) : 0;
    mbar_arrive_expect_tx(bar, KB * kCodeBytes + 512u * tiles);
#pragma unroll
    for (int j = 0; j < KB; ++j) tma_load_2d(st + j * kCodeBytes, &p.codes_map, (ks * KB + j) * 64, rb * kRows, bar);
    if (kTiles > 0)
      bulk_copy_g2s(st + KB * kCodeBytes, p.scales + ((size_t)rb * p.scale_tiles + ks * kTiles) * 512, 512u * tiles, bar);
  };
  const int first = min(stages, n_units);
  if (warp == kConsumers && lane == 0) {
    tma_prefetch_descriptor(&p.codes_map);
    for (int s = 0; s < stages; ++s) {
      mbar_init(full0 + 8 * s, 1 + 32);  // the TMA lane's expect_tx + the warp's 32 x arrivals
      mbar_init(empty0 + 8 * s, 32 * kConsumers);  // every consumer lane releases
    }
    mbar_fence_init();
    if (!(FL & 2)) for (int i = 0; i < ((FL & 512) ? min(first, 1) : first); ++i) load(i, i);
  }
  __syncthreads();
  if (warp == kConsumers) {
    // x of unit i into stage s, zeros past M and K; FP8 block scales too (cp.async: 16 bytes of
    // 4 tile columns per tile row (32 x 32), or the box's one f32 (128 x 128)); then each lane
    // arrives on the stage's full barrier once its copies have landed.
    // FP4: lane L copies chunk L of every token row (k = 64t + 32c' + 8q with L = (c' 4 + q) 4 +
    // t); FP8: chunk L % 16 (k = 8 (L % 16)) of the rows of parity L / 16.
    const int xt = lane & 3, xq = (lane >> 2) & 3, xc = lane >> 4;
    const int x_koff = kFp8 ? 8 * (lane & 15) : 64 * xt + 32 * xc + 8 * xq;
    const uint32_t x_soff = kFp8 ? 16u * (lane & 15) + kXPitch * (lane >> 4) : 16u * lane;
    const bool tile32 = (p.flags & kTile32) != 0;
    const float* bscales = reinterpret_cast<const float*>(p.scales);
    auto stage_x = [&](int i, int s) {
      const int u = unit_at(i);
      const int rb = u / kstages, ks = u - rb * kstages;
      const uint32_t st = ring + s * kStageBytes;
      const uint32_t xb = st + kXOff + x_soff;
#pragma unroll
      for (int j = 0; j < KB; ++j) {
        const int k = (ks * KB + j) * kBoxK + x_koff;
        constexpr int kRowStep = kFp8 ? 2 : 1;
#pragma unroll
        for (int r0 = 0; r0 < 8 * NT; r0 += kRowStep) {
          const int r = r0 + (kFp8 ? (lane >> 4) : 0);
          const bool live = r < p.m && k < p.k;
          if (!(FL & 8) || r < p.m) cp_async<16>(xb + j * kXBox + r0 * kXPitch, live ? p.x + (long long)r * p.ldx + k : p.x, live);
        }
        if (F == Fmt::Fp8Block) {
          // Zeros for a box past K (the last unit of a row block may hold one: its codes are
          // zeros too) and for tile rows past N; the padded rows keep every live copy in bounds.
          const uint32_t sdst = st + KB * kCodeBytes + 512u * j;
          const int box = ks * KB + j;
          const bool box_live = box * kBoxK < p.k;
          if (tile32) {
            if (lane < 4) {  // tile row 4 rb + lane: columns 4 box .. 4 box + 3
              const int tr = 4 * rb + lane;
              const bool live = box_live && tr < p.sgroups;
              cp_async<16>(sdst + 16u * lane, live ? bscales + (long long)tr * p.sld + 4 * box : bscales, live);
            }
          } else if (lane == 0) {
            cp_async<4>(sdst, box_live ? bscales + (long long)rb * p.sld + box : bscales, box_live);
          }
        }
      }
      cp_async_mbar_arrive(full0 + 8 * s);
    };
    if (FL & 2) return;
    for (int i = 0; i < first; ++i) {
      if ((FL & 512) && i == 1) {  // the rest of the ring once every CTA's stage 0 is requested
        __nanosleep(uint32_t(p.reserved[1]));
        __syncwarp();
        if (lane == 0)
          for (int j = 1; j < first; ++j) load(j, j);
      }
      stage_x(i, i);
    }
    int s = first % stages, round = first / stages;
    for (int i = first; i < n_units; ++i) {
      if (round > 0) mbar_wait(empty0 + 8 * s, (round - 1) & 1);
      if (lane == 0) load(i, s);
      stage_x(i, s);
      if (++s == stages) s = 0, ++round;
    }
    return;  // nothing below synchronizes the whole CTA
  }

  // Consumer warp `warp`: rows [16 warp, +16) of each unit; the MMA's rows g and g + 8 are weight
  // rows r_lo and r_lo + kHi. FP4: 16 warp + g and + 8. FP8: 16 warp + 2g and + 1, so that the
  // four rows of a half warp's 8-byte code loads (g = 0..3) sit 2 apart under the 128-byte
  // swizzle (chunk XOR 0, 2, 4, 6): the two chunks of a group land in 8 distinct bank groups.
  constexpr int kRowMul = kFp8 ? 2 : 1, kHi = kFp8 ? 1 : 8;
  const int r_lo = 16 * warp + kRowMul * g;
  // Scale bytes of row r in a tile: (r % 32) * 16 + (r / 32) * 4 (layout.rs); r_lo + kHi is 16 kHi
  // bytes further (same 32-row group).
  const uint32_t sc_off = uint32_t((r_lo % 32) * 16 + (r_lo / 32) * 4);
  // NVFP4: tile t holds the lane's 4 blocks (k 64t ..); MXFP4: tile t / 2, bytes 2 (t % 2) ..
  const uint32_t sc_tile = F == Fmt::Nvfp4 ? 512u * t : 512u * (t >> 1);
  const int sc_shift = F == Fmt::Nvfp4 ? 0 : 16 * (t & 1);
  // FP4: the lane's 16-byte chunks 2t, 2t + 1; FP8: 8 bytes at chunk 2T + t / 2 (per group T).
  const uint32_t code_lo0 = swizzle128_offset(r_lo, 2 * t), code_lo1 = swizzle128_offset(r_lo, 2 * t + 1);
  const uint32_t code_hi0 = swizzle128_offset(r_lo + 8, 2 * t), code_hi1 = swizzle128_offset(r_lo + 8, 2 * t + 1);
  // FP8 block scales: 32 x 32 tiles: the warp's tile row (warp / 2), 4 columns per box.
  const bool tile32 = (p.flags & kTile32) != 0;
  const uint32_t bs_off = tile32 ? 16u * (warp >> 1) : 0u;
  const bool has_bias = p.bias != nullptr;
  constexpr int CH = NT == 1 ? 2 : 1;  // accumulator chains
  float acc[CH][NT][4];
  auto zero = [&](float (&a)[CH][NT][4]) {
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) a[c][nt][e] = 0.0f;
  };
  // acc += part * scale (FP8 block: a tile's partial sums; part is zeroed).
  auto promote = [&](float (&part)[CH][NT][4], float scale) {
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[c][nt][e] = fmaf(part[c][nt][e], scale, acc[c][nt][e]), part[c][nt][e] = 0.0f;
  };
  zero(acc);
  // FL64..: the rotations' multipliers from a parameter (1) the compiler cannot fold.
  const uint32_t one = uint32_t(p.reserved[0]);
  const uint32_t imul[4] = {one << 28, one << 22, one << 26, one << 18};
  int pend0 = -1, pend1 = -1;  // FL256: shared row blocks whose merge waits for the end
  int s = 0, round = 0;
  for (int i = 0; i < n_units; ++i) {
    const int rb = unit_at(i) / kstages;
    const bool ends_block = !(i + 1 < n_units && unit_at(i + 1) / kstages == rb);
    const uint32_t st = ring + s * kStageBytes;
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      const uint32_t sbox = st + KB * kCodeBytes + (kFp8 ? 512u : 512u * Info::kTilesPerBox) * j;
      const uint32_t cb = st + j * kCodeBytes;
      const uint32_t xbox = st + kXOff + j * kXBox;
      if (j == 0 && !(FL & 2)) mbar_wait(full0 + 8 * s, round & 1);
      if (j == 0 && i == 0) trace_mark(1);
      if constexpr ((FL & 1) != 0) continue;
      if constexpr (kFp8) {
        // x of group T, token g + 8 nt: chunk 4T + t of its row.
        const uint32_t x0 = xbox + g * kXPitch + 16u * t;
        uint32_t sw_lo = 0, sw_hi = 0;
        if (F == Fmt::Mxfp8) {  // the box's one tile: bytes T of rows g, g + 8 are group T's scales
          sw_lo = ld_shared_u32(sbox + sc_off);
          sw_hi = ld_shared_u32(sbox + sc_off + 16 * kHi);
        }
        float part[CH][NT][4];  // Fp8Block: one scale tile's partial sums
        if constexpr (F == Fmt::Fp8Block) zero(part);
#pragma unroll
        for (int T = 0; T < 4; ++T) {
          const uint32_t coff = 8u * (t & 1);
          const uint2 cl = ld_shared_v2(cb + swizzle128_offset(r_lo, 2 * T + (t >> 1)) + coff);
          const uint2 chv = ld_shared_v2(cb + swizzle128_offset(r_lo + kHi, 2 * T + (t >> 1)) + coff);
          uint32_t l = kTwo120, h = kTwo120;
          if constexpr (F == Fmt::Mxfp8) {
            l = s_tab[(sw_lo >> (8 * T)) & 0xFF];
            h = s_tab[(sw_hi >> (8 * T)) & 0xFF];
          }
          if constexpr (F == Fmt::Fp8Block) {
            fp8_group<NT, CH>(cl, chv, l, h, x0 + 64u * T, part);
            if (tile32) promote(part, ld_shared_f32(sbox + bs_off + 4u * T));
          } else {
            fp8_group<NT, CH>(cl, chv, l, h, x0 + 64u * T, acc);
          }
        }
        if constexpr (F == Fmt::Fp8Block) {
          if (!tile32) promote(part, ld_shared_f32(sbox));
        }
      } else {
        uint32_t sw_lo = 0, sw_hi = 0;
#pragma unroll
        for (int c2 = 0; c2 < 2; ++c2) {
          // x of this 32-k piece from the staged tile: token g + 8 nt, chunks (c' 4 + q) 4 + t.
          uint32_t xs[NT];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) xs[nt] = xbox + (g + 8 * nt) * kXPitch + 256u * c2 + 16u * t;
          if (c2 == 0) {
            sw_lo = ld_shared_u32(sbox + sc_tile + sc_off) >> sc_shift;
            sw_hi = ld_shared_u32(sbox + sc_tile + sc_off + 128) >> sc_shift;
          }
          const uint4 c_lo = ld_shared_v4(cb + (c2 ? code_lo1 : code_lo0));
          const uint4 c_hi = ld_shared_v4(cb + (c2 ? code_hi1 : code_hi0));
          uint32_t l[2], h[2];
          if ((FL & 32) != 0 && F == Fmt::Nvfp4) {
            // UE4M3 byte b (normal, valid) -> bf16 of its value x 2^119: ((b & 0x7F) << 4) + (239 << 7);
            // words holding a subnormal / zero (e = 0), 0x7F or a sign-set byte take the table.
            const bool slow_lo = ue4m3_needs_table(sw_lo), slow_hi = ue4m3_needs_table(sw_hi);
            if (!slow_lo) {
              ue4m3_pair_x2p119(sw_lo >> (16 * c2), l);
            } else {
              l[0] = s_tab[(sw_lo >> (16 * c2)) & 0xFF];
              l[1] = s_tab[(sw_lo >> (16 * c2 + 8)) & 0xFF];
            }
            if (!slow_hi) {
              ue4m3_pair_x2p119(sw_hi >> (16 * c2), h);
            } else {
              h[0] = s_tab[(sw_hi >> (16 * c2)) & 0xFF];
              h[1] = s_tab[(sw_hi >> (16 * c2 + 8)) & 0xFF];
            }
          } else if (F == Fmt::Nvfp4) {  // blocks 2c', 2c' + 1 of the lane's 64 k: bytes 2c', 2c' + 1
            l[0] = s_tab[(sw_lo >> (16 * c2)) & 0xFF];
            l[1] = s_tab[(sw_lo >> (16 * c2 + 8)) & 0xFF];
            h[0] = s_tab[(sw_hi >> (16 * c2)) & 0xFF];
            h[1] = s_tab[(sw_hi >> (16 * c2 + 8)) & 0xFF];
          } else {  // one MX block per 32 k: byte c'
            l[0] = l[1] = s_tab[(sw_lo >> (8 * c2)) & 0xFF];
            h[0] = h[1] = s_tab[(sw_hi >> (8 * c2)) & 0xFF];
          }
          if constexpr ((FL & 192) != 0) {
            sub_chunk_im<NT, CH, (FL & 64 ? 1 : 0) + (FL & 128 ? 2 : 0) + (FL & 1024 ? 1 : 0)>(c_lo, c_hi, l, h, xs, imul, acc);
          } else if constexpr ((FL & 16) != 0) {
            sub_chunk_px<NT, CH>(c_lo, c_hi, l, h, xs, g < p.m, acc);
          } else {
            sub_chunk<NT, CH>(c_lo, c_hi, l, h, xs, acc);
          }
        }
      }
    }
    // Release the stage once its data is consumed (the MMAs above used every loaded register).
    // Every lane arrives for its own reads (with one arrival per warp after __syncwarp,
    // compute-sanitizer racecheck reported the refills of a wrapped ring as races with the other
    // lanes' reads: bench-results/2026-12-02-h200-c/w4a16-op-xsmem/). No proxy fence: these are
    // reads, and the producer's wait on this barrier orders them before its TMA / bulk-copy
    // overwrite (CUTLASS's TMA pipelines release the same way); `fence.proxy.async` here cost a
    // MEMBAR.ALL.CTA per warp and stage (5.5% of ncu's stall samples,
    // bench-results/2026-12-02-h200-d/w4a16-release/).
    mbar_arrive(empty0 + 8 * s);
    if (i == n_units - 1) trace_mark(2);
    if (++s == stages) s = 0, ++round;
    if (!ends_block) continue;

    // The row block is done (registers kept for the loop above are few: three CTAs per SM).
    const int c_first = rb * kstages / q, c_last = ((rb + 1) * kstages - 1) / q;
    const int row_base = rb * kRows + 16 * warp;
    // Bias of rows r_lo and r_lo + kHi (f32; 0 without a bias or past N).
    float bias[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + kRowMul * g + kHi * h;
      if (has_bias && row < p.n)
        bias[h] = (p.flags & kBiasF32) ? reinterpret_cast<const float*>(p.bias)[row]
                                       : __bfloat162float(reinterpret_cast<const bf16*>(p.bias)[row]);
    }

    float tot[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) tot[nt][e] = CH == 2 ? acc[0][nt][e] + acc[CH - 1][nt][e] : acc[0][nt][e];
    // Lane element e of tile nt: row kRowMul g + kHi (e >> 1), token 8 nt + 2t + (e & 1).
    auto store = [&](const float (&v)[NT][4]) {
      const float os = epilogue_scale(p.out_scale, p.xmult, p.flags);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = row_base + kRowMul * g + kHi * (e >> 1), tok = 8 * nt + 2 * t + (e & 1);
          const float y = v[nt][e] * os;
          // Without a bias y itself (y + 0 would turn -0 into +0).
          const TOut out = from_f32<TOut>(has_bias ? y + bias[e >> 1] : y);
          if (row < p.n && tok < p.m) reinterpret_cast<TOut*>(p.y)[(long long)tok * p.ldy + row] = out;
        }
    };
    if (c_first == c_last || (FL & 4)) {  // a row block this CTA owns alone
      store(tot);
      zero(acc);
      continue;
    }
    // Row block rb is shared by CTAs c_first..c_last: partial slot [c][slot][token][128 rows],
    // slot 0 when rb is the first row block of c's stretch, 1 when it is its last.
    auto slot_of = [&](int c) -> float* {
      const int slot = (c * q) / kstages == rb ? 0 : 1;
      return p.partials + (long long)(2 * c + slot) * (MT * kRows);
    };
    const int wrow = 16 * warp + kRowMul * g;
    if constexpr ((FL & 2048) != 0) {
      // LL merge (NCCL's LL protocol): every CTA but c_last stores its live partials as 64-bit
      // words {f32 value, launch tag} (single-copy atomic: no fence, no counter); c_last, which
      // finishes rb last (its list starts in rb and the walk takes its tail block first), polls
      // the words of c_first .. c_last - 1, sums in CTA order with its own registers, stores y and
      // clears the words (graph replays reuse the grid id).
      unsigned long long gid;
      asm volatile("mov.u64 %0, %%gridid;" : "=l"(gid));
      const uint32_t tag = uint32_t(gid) | 0x80000000u;
      auto ll_slot = [&](int c) -> unsigned long long* {
        const int slot = (c * q) / kstages == rb ? 0 : 1;
        return reinterpret_cast<unsigned long long*>(p.partials) + (long long)(2 * c + slot) * (MT * kRows);
      };
      if (int(blockIdx.x) != c_last) {
        unsigned long long* mine = ll_slot(blockIdx.x);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int tok = 8 * nt + 2 * t + (e & 1);
            if (tok < p.m) {
              const unsigned long long v = (uint64_t(tag) << 32) | __float_as_uint(tot[nt][e]);
              asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(mine + tok * kRows + wrow + kHi * (e >> 1)), "l"(v) : "memory");
            }
          }
      } else {
        float sum[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) sum[nt][e] = 0.0f;
        for (int c = c_first; c <= c_last; ++c) {
          if (c == c_last) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) sum[nt][e] += tot[nt][e];
            continue;
          }
          unsigned long long* part = ll_slot(c);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int tok = 8 * nt + 2 * t + (e & 1);
              if (tok < p.m) {
                unsigned long long* a = part + tok * kRows + wrow + kHi * (e >> 1);
                unsigned long long v;
                for (;;) {
                  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(a) : "memory");
                  if (uint32_t(v >> 32) == tag) break;
                  if constexpr ((FL & 4096) != 0) __nanosleep(256);  // back off: leave the SM to the streaming CTA
                }
                sum[nt][e] += __uint_as_float(uint32_t(v));
                asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(a), "l"(0ull) : "memory");
              }
            }
        }
        store(sum);
      }
      zero(acc);
      continue;
    }
    float* mine = slot_of(blockIdx.x);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        __stcg(mine + (8 * nt + 2 * t + (e & 1)) * kRows + wrow + kHi * (e >> 1), tot[nt][e]);
    if constexpr ((FL & 256) != 0) {  // fence, arrive and (if last) sum at the end
      if (pend0 < 0) pend0 = rb; else pend1 = rb;
      zero(acc);
      continue;
    }
    __threadfence();
    __syncwarp();
    unsigned int prev = 0;
    if (lane == 0) prev = arrive_tagged(&p.counters[rb * kConsumers + warp], unsigned(c_last - c_first + 1));
    prev = __shfl_sync(0xffffffffu, prev, 0);
    if (prev == unsigned(c_last - c_first)) {
      __threadfence();
      float sum[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) sum[nt][e] = 0.0f;
      for (int c = c_first; c <= c_last; ++c) {
        const float* part = slot_of(c);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            sum[nt][e] += c == int(blockIdx.x) ? tot[nt][e]
                                               : __ldcg(part + (8 * nt + 2 * t + (e & 1)) * kRows + wrow + kHi * (e >> 1));
      }
      store(sum);
    }
    zero(acc);
  }
  if constexpr ((FL & 256) != 0) {
    if (pend0 >= 0) {
      __threadfence();
      __syncwarp();
      unsigned int prev0 = 0, prev1 = 0;
      auto span = [&](int rb) { return unsigned(((rb + 1) * kstages - 1) / q - rb * kstages / q + 1); };
      if (lane == 0) {
        prev0 = arrive_tagged(&p.counters[pend0 * kConsumers + warp], span(pend0));
        if (pend1 >= 0) prev1 = arrive_tagged(&p.counters[pend1 * kConsumers + warp], span(pend1));
      }
      prev0 = __shfl_sync(0xffffffffu, prev0, 0);
      prev1 = __shfl_sync(0xffffffffu, prev1, 0);
      bool fenced = false;
      for (int j = 0; j < 2; ++j) {
        const int rb = j == 0 ? pend0 : pend1;
        if (rb < 0 || (j == 0 ? prev0 : prev1) != span(rb) - 1) continue;
        if (!fenced) __threadfence(), fenced = true;
        const int c_first = rb * kstages / q, c_last = ((rb + 1) * kstages - 1) / q;
        const int row_base = rb * kRows + 16 * warp, wrow = 16 * warp + kRowMul * g;
        float bias[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + kRowMul * g + kHi * h;
          if (has_bias && row < p.n)
            bias[h] = (p.flags & kBiasF32) ? reinterpret_cast<const float*>(p.bias)[row]
                                           : __bfloat162float(reinterpret_cast<const bf16*>(p.bias)[row]);
        }
        float sum[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) sum[nt][e] = 0.0f;
        for (int c = c_first; c <= c_last; ++c) {
          const int slot = (c * q) / kstages == rb ? 0 : 1;
          const float* part = p.partials + (long long)(2 * c + slot) * (MT * kRows);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) sum[nt][e] += __ldcg(part + (8 * nt + 2 * t + (e & 1)) * kRows + wrow + kHi * (e >> 1));
        }
        const float os = epilogue_scale(p.out_scale, p.xmult, p.flags);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = row_base + kRowMul * g + kHi * (e >> 1), tok = 8 * nt + 2 * t + (e & 1);
            const float y = sum[nt][e] * os;
            const TOut out = from_f32<TOut>(has_bias ? y + bias[e >> 1] : y);
            if (row < p.n && tok < p.m) reinterpret_cast<TOut*>(p.y)[(long long)tok * p.ldy + row] = out;
          }
      }
    }
  }
  trace_mark(3);
}

}  // namespace bsgemv
}  // namespace b12x

B12X_BSGEMV(Nvfp4, nvfp4, w4a16, 1, 1, b12x::bf16, bf16)
B12X_BSGEMV(Nvfp4, nvfp4, w4a16, 1, 2, b12x::bf16, bf16)
template <int KB, int FL>
__global__ void __launch_bounds__(288, 3) px(const __grid_constant__ BsGemvParams p) {
  b12x::bsgemv::gemv_x<b12x::bsgemv::Fmt::Nvfp4, 1, KB, bf16, FL>(p);
}

using KFn = void (*)(BsGemvParams);
template <int KB>
static KFn px_fn(int fl) {
  switch (fl) {
    case 0: return px<KB, 0>;
    case 1: return px<KB, 1>;
    case 2: return px<KB, 2>;
    case 4: return px<KB, 4>;
    case 8: return px<KB, 8>;
    case 12: return px<KB, 12>;
    case 16: return px<KB, 16>;
    case 32: return px<KB, 32>;
    case 48: return px<KB, 48>;
    case 52: return px<KB, 52>;
    case 64: return px<KB, 64>;
    case 128: return px<KB, 128>;
    case 192: return px<KB, 192>;
    case 1216: return px<KB, 1216>;
    case 256: return px<KB, 256>;
    case 512: return px<KB, 512>;
    case 384: return px<KB, 384>;
    case 448: return px<KB, 448>;
    case 896: return px<KB, 896>;
    case 960: return px<KB, 960>;
    case 2048: return px<KB, 2048>;
    case 2560: return px<KB, 2560>;
    case 6144: return px<KB, 6144>;
    case 6656: return px<KB, 6656>;
    case 8704: return px<KB, 8704>;
    case 10752: return px<KB, 10752>;
  }
  return nullptr;
}

static void report_marks(const char* what, int grid, double event_us) {
  static unsigned long long h[4096][4];
  CK(cudaMemcpyFromSymbol(h, g_tr, sizeof(unsigned long long) * 4 * grid));
  unsigned long long s0 = ~0ull;
  for (int c = 0; c < grid; ++c) s0 = std::min(s0, h[c][0]);
  std::vector<double> v[4];
  for (int c = 0; c < grid; ++c)
    for (int m = 0; m < 4; ++m) v[m].push_back(h[c][m] ? (h[c][m] - s0) * 1e-3 : 0.0);
  for (auto& x : v) std::sort(x.begin(), x.end());
  auto q = [&](int m, double f) { return v[m][std::min<size_t>(v[m].size() - 1, (size_t)(f * v[m].size()))]; };
  printf("  %-30s %7.2f us | start max %5.2f | first p10 %5.2f p50 %5.2f p90 %5.2f | streamed p10 %6.2f p50 %6.2f p90 %6.2f max %6.2f"
         " | done p50 %6.2f max %6.2f | outside %5.2f\n",
         what, event_us, q(0, 1.0), q(1, 0.1), q(1, 0.5), q(1, 0.9), q(2, 0.1), q(2, 0.5), q(2, 0.9), q(2, 1.0), q(3, 0.5),
         q(3, 1.0), event_us - q(3, 1.0));
}

__global__ void fill_rand(unsigned char* p, size_t n, uint32_t seed, int lo, int span) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = span ? (unsigned char)(lo + (h >> 8) % span) : (unsigned char)(h >> 8);
  }
}

// Every scale byte pair through the arithmetic path vs the table (FL32's exactness).
__global__ void check_scales(int* bad) {
  __shared__ uint32_t tab[256];
  b12x::bsgemv::fill_scale_table<b12x::bsgemv::Fmt::Nvfp4>(tab, 0, threadIdx.x, blockDim.x);
  __syncthreads();
  for (int v = threadIdx.x; v < 65536; v += blockDim.x) {
    const uint32_t w = uint32_t(v) | (0x40u << 16) | (0x38u << 24);
    uint32_t o[2];
    if (b12x::bsgemv::ue4m3_needs_table(w)) continue;
    b12x::bsgemv::ue4m3_pair_x2p119(w, o);
    if (o[0] != tab[v & 0xFF] || o[1] != tab[v >> 8]) atomicAdd(bad, 1);
  }
  // Every byte that is not a normal valid scale must be flagged, in every position.
  for (int v = threadIdx.x; v < 256 * 4; v += blockDim.x) {
    const int b = v & 0xFF, pos = v >> 8;
    const bool normal = (b & 0x78) != 0 && b < 0x7F;
    const uint32_t w = (0x40404040u & ~(0xFFu << (8 * pos))) | (uint32_t(b) << (8 * pos));
    if (!normal && !b12x::bsgemv::ue4m3_needs_table(w)) atomicAdd(bad + 1, 1);
    if (normal && b12x::bsgemv::ue4m3_needs_table(w)) atomicAdd(bad + 2, 1);  // a slow path only
  }
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  struct Shape { int n, k; };
  const Shape shapes[] = {{18432, 7168}, {36864, 7168}, {4096, 7168}};
  const size_t max_codes = 36864ull * 7168 / 2, max_scales = 36864ull * 7168 / 16 + (1 << 20);
  unsigned char *codes, *scales; bf16 *x, *y0, *y1; float* partials; unsigned long long* counters;
  CK(cudaMalloc(&codes, max_codes)); CK(cudaMalloc(&scales, max_scales)); CK(cudaMalloc(&x, 16 * 18432 * 2));
  CK(cudaMalloc(&y0, 16 * 36864 * 2)); CK(cudaMalloc(&y1, 16 * 36864 * 2));
  CK(cudaMalloc(&partials, 64 << 20)); CK(cudaMalloc(&counters, 1 << 20));
  fill_rand<<<1024, 256>>>(codes, max_codes, 1, 0, 0);
  fill_rand<<<1024, 256>>>(scales, max_scales, 2, 0x28, 0x20);  // UE4M3 0.0625 .. 1.9
  fill_bf16<<<64, 256>>>(x, 16 * 18432, 3);
  CK(cudaMemset(counters, 0xA5, 1 << 20));
  CK(cudaMemset(partials, 0, 64 << 20));
  CK(cudaDeviceSynchronize());
  const int M = getenv("PROTO_M") ? atoi(getenv("PROTO_M")) : 1;
  {
    int* bad; CK(cudaMalloc(&bad, 12)); CK(cudaMemset(bad, 0, 12));
    check_scales<<<1, 256>>>(bad);
    int h[3]; CK(cudaMemcpy(h, bad, 12, cudaMemcpyDeviceToHost));
    printf("arithmetic UE4M3 scales: %d pairs differ from the table, %d bad bytes unflagged, %d good bytes flagged\n", h[0], h[1], h[2]);
  }
  // ncu mode: PROTO_NCU=1 launches the selected kernels once each (PROTO_SHAPE, PROTO_CFG indices;
  // PROTO_FLS: comma list of FL values, -1 the library kernel), no timing.
  const bool ncu = getenv("PROTO_NCU") != nullptr;
  const int sel_shape = getenv("PROTO_SHAPE") ? atoi(getenv("PROTO_SHAPE")) : -1;
  const int sel_cfg = getenv("PROTO_CFG") ? atoi(getenv("PROTO_CFG")) : -1;
  std::vector<int> fls = {0, 1, 2, 4, 8, 12, 16, 32, 48, 52};
  if (getenv("PROTO_FLS")) {
    fls.clear();
    std::string t = getenv("PROTO_FLS");
    for (size_t a = 0; a < t.size();) { size_t b = t.find(',', a); if (b == std::string::npos) b = t.size(); fls.push_back(atoi(t.substr(a, b - a).c_str())); a = b + 1; }
  }
  struct Cfg { int kb, stages, ctas; };
  const Cfg cfgs[] = {{1, 3, 3}, {1, 2, 3}, {1, 4, 2}, {2, 2, 2}, {1, 8, 1}, {2, 4, 1}};
  for (int si = 0; si < 3; ++si) {
    const Shape sh = shapes[si];
    if (sel_shape >= 0 && si != sel_shape) continue;
    const size_t wbytes = (size_t)sh.n * sh.k / 2 + (size_t)sh.n * sh.k / 16;
    printf("== N=%d K=%d M=%d (%.1f MB codes + scales)\n", sh.n, sh.k, M, wbytes / 1e6);
    if (!ncu) {
      const int grid = sms * 2;
      const double t = time_graph(st, [&] { traced_read<<<grid, 512, 0, st>>>((const uint4*)codes, wbytes / 16, g_sink); });
      report("read, 2 CTAs/SM", grid, t);
    }
    BsGemvParams p;
    memset(&p, 0, sizeof p);
    encode(reinterpret_cast<CUtensorMap*>(&p.codes_map), codes, sh.k / 4, sh.n, sh.k / 2, 64, 128);
    p.scales = scales; p.x = x; p.bias = nullptr; p.partials = partials; p.counters = counters;
    p.ldx = sh.k; p.ldy = sh.n; p.n = sh.n; p.k = sh.k; p.m = M;
    p.scale_tiles = (sh.k / 16 + 3) / 4; p.scale_bias = 0; p.out_scale = 1.0f; p.flags = 0;
    p.reserved[0] = 1; p.reserved[1] = getenv("PROTO_DELAY") ? atoi(getenv("PROTO_DELAY")) : 500;
    for (int ci = 0; ci < 6; ++ci) {
      const Cfg c = cfgs[ci];
      if (sel_cfg >= 0 && ci != sel_cfg) continue;
      const uint32_t stage = ((uint32_t)c.kb * (16384 + 2048 + 8 * 576) + 1023) & ~1023u;
      const uint32_t smem = c.stages * stage + 1024;
      if (c.ctas * (smem + 1024 + 2048 + 1024) > 233472) { printf("  skip kb%d s%d c%d\n", c.kb, c.stages, c.ctas); continue; }
      p.kstages = (sh.k + 256 * c.kb - 1) / (256 * c.kb);
      const int units = (sh.n + 127) / 128 * p.kstages;
      const int q = (units + sms * c.ctas - 1) / (sms * c.ctas);
      const int grid = (units + q - 1) / q;
      p.units_per_cta = q; p.stages = c.stages;
      KFn lib = c.kb == 1 ? b12x_bsgemv_w4a16_nvfp4_nt1_kb1_bf16out : b12x_bsgemv_w4a16_nvfp4_nt1_kb2_bf16out;
      auto run = [&](KFn f, bf16* y) {
        CK(cudaFuncSetAttribute((const void*)f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        BsGemvParams pp = p; pp.y = y;
        return time_graph(st, [&] { f<<<grid, 288, smem, st>>>(pp); });
      };
      if (ncu) {
        for (int fl : fls) {
          KFn f = fl < 0 ? lib : c.kb == 1 ? px_fn<1>(fl) : px_fn<2>(fl);
          if (!f) continue;
          CK(cudaFuncSetAttribute((const void*)f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
          BsGemvParams pp = p; pp.y = y1;
          f<<<grid, 288, smem, st>>>(pp);
          CK(cudaStreamSynchronize(st));
        }
        continue;
      }
      char name[96];
      snprintf(name, sizeof name, "lib kb%d s%d c%d grid %d", c.kb, c.stages, c.ctas, grid);
      const double tl = run(lib, y0);
      printf("  %-30s %7.2f us\n", name, tl);
      const bool full = c.kb == 2 && c.stages == 2 && c.ctas == 2 || c.kb == 1 && c.stages == 3 && c.ctas == 3;
      for (int fl : fls) {
        if (fl != 0 && !full) continue;
        KFn f = fl < 0 ? nullptr : c.kb == 1 ? px_fn<1>(fl) : px_fn<2>(fl);
        if (!f) continue;
        CK(cudaMemset(y1, 0xFF, 16 * 36864 * 2));
        const double t = run(f, y1);
        CK(cudaStreamSynchronize(st));
        snprintf(name, sizeof name, "FL%-2d kb%d s%d c%d", fl, c.kb, c.stages, c.ctas);
        report_marks(name, grid, t);
        if ((fl & 2048) != 0 && (fl & 7) == 0) {
          std::vector<uint16_t> a((size_t)M * sh.n), b((size_t)M * sh.n);
          CK(cudaMemcpy(a.data(), y0, a.size() * 2, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(b.data(), y1, b.size() * 2, cudaMemcpyDeviceToHost));
          size_t diff = 0; for (size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
          printf("    vs lib (timed replays): %zu of %zu differ\n", diff, a.size());
        }
        if ((fl & 2048) != 0) {  // graph replay with new x: the cleared words must not be reused
          cudaGraph_t gg; cudaGraphExec_t ge;
          BsGemvParams pp = p; pp.y = y1;
          CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
          f<<<grid, 288, smem, st>>>(pp);
          CK(cudaStreamEndCapture(st, &gg));
          CK(cudaGraphInstantiate(&ge, gg, 0));
          CK(cudaGraphLaunch(ge, st));
          fill_bf16<<<64, 256, 0, st>>>(x, 16 * 18432, 77);
          CK(cudaGraphLaunch(ge, st));
          BsGemvParams pl = p; pl.y = y0;
          lib<<<grid, 288, smem, st>>>(pl);
          CK(cudaStreamSynchronize(st));
          std::vector<uint16_t> a((size_t)M * sh.n), b((size_t)M * sh.n);
          CK(cudaMemcpy(a.data(), y0, a.size() * 2, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(b.data(), y1, b.size() * 2, cudaMemcpyDeviceToHost));
          size_t diff = 0; for (size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
          printf("    replay with new x vs lib: %zu of %zu differ\n", diff, a.size());
          fill_bf16<<<64, 256, 0, st>>>(x, 16 * 18432, 3);
          lib<<<grid, 288, smem, st>>>(pl);
          CK(cudaStreamSynchronize(st));
          cudaGraphExecDestroy(ge); cudaGraphDestroy(gg);
        }
        if ((fl & 7) == 0) {
          std::vector<uint16_t> a((size_t)M * sh.n), b((size_t)M * sh.n);
          CK(cudaMemcpy(a.data(), y0, a.size() * 2, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(b.data(), y1, b.size() * 2, cudaMemcpyDeviceToHost));
          size_t diff = 0; for (size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
          printf("    vs lib: %zu of %zu differ\n", diff, a.size());
        }
      }
    }
  }
  return 0;
}
