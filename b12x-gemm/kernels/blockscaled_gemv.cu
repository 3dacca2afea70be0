// blockscaled_gemv.cu — gemm.blockscaled, decode path (M <= 16): FP4 weights x BF16 activations
// (W4A16).                                                                       crate: b12x-gemm
//   y[m,n] = out_scale * sum_k x[m,k] * W[n,k] (+ bias[n])   (f32 accumulate, bias added in f32,
//   one rounding to TOut), W = E2M1 code * block scale (NVFP4: UE4M3 per 16 k; MXFP4: UE8M0 per 32)
// Tensors: codes [N, K/2] bytes (pack_weight layout v2: row-major, bit-permuted 32-bit words),
//   scales in the swizzled 128x4 layout (b12x_quant::layout), x [M, K] bf16 (row stride ldx),
//   bias [N] bf16|f32, y [M, N] TOut (row stride ldy).
// Constraints: K % 32 == 0 (the codes' rows are whole 16-byte lines for the TMA); M <= 8 * NT.
// Strategy (src/blockscaled/README.md): one to three persistent CTAs per SM walk an even share of
//   the flat (row block of 128 rows, KB x 256-k) unit list (stream-K). A producer warp keeps a
//   ring of stages in flight: per 256-k box the codes as one TMA box (128 rows x 128 bytes,
//   128-byte swizzle, zero past N and K), the unit's swizzled scale tiles as one bulk copy, and x
//   (8 NT tokens x 256 k) staged with cp.async by the warp's 32 lanes in the order the consumers
//   read it (zero past M and K; the stage's full barrier counts the TMA bytes and the 32 lanes'
//   cp.async arrivals). Eight consumer warps own 16 rows each: lane (g, t) takes the 64
//   contiguous k 64t .. 64t + 63 of a box (16-byte chunks 2t and 2t + 1 of its rows' box lines:
//   conflict free under the swizzle), turns each adjacent pair of codes of a layout-v2 word into
//   a bf16x2 of code * 2^-126 with rotates and masks (9 ALU instructions per word,
//   b12x/fp4_dequant.cuh), scales it by the block's BF16 scale (exact) and feeds swap-AB mma.sync
//   m16n8k16 (16 weight rows x 8 tokens) with x's bf16 pairs as staged. The MMA sums over k, so
//   this K permutation, applied to both operands, changes only the summation order. Row blocks
//   shared by neighbouring CTAs are merged by the last warp to arrive, in CTA order (tagged
//   counters, no memset): bitwise reproducible.
// Entry points: b12x_bsgemv_w4a16_{nvfp4,mxfp4}_nt{1,2}_kb{1,2}_{bf16,f16,f32}out (BsGemvParams).
// Oracle: src/blockscaled/reference.rs.
#include "b12x/common.cuh"
#include "b12x/fp4_dequant.cuh"
#include "b12x/mma.cuh"

namespace b12x {

// Mirrored by `BsGemvParams` in src/blockscaled/gemv.rs (size and offsets asserted there).
struct BsGemvParams {
  TmaDescriptor codes_map;       // codes [N, K/2] bytes as 16-bit elements [N, K/4]: boxes of 64 x 128 rows, 128-byte swizzle
  const unsigned char* scales;   // swizzled 128x4 tiles, [ceil(N/128)][scale_tiles][512 B]
  const bf16* x;                 // [M, K] bf16, row stride ldx
  const void* bias;              // [N] bf16 or f32 (flags), nullptr for none
  void* y;                       // [M, N] TOut, row stride ldy
  float* partials;               // [2 * gridDim.x][8 * NT][128] f32 partial tiles (scratch)
  unsigned long long* counters;  // [row blocks * 8] tagged arrival counters (scratch, any bits)
  long long ldx;                 // x row stride, elements
  long long ldy;                 // y row stride, elements
  int n, k, m;                   // N, K, live M
  int kstages;                   // 256-k stages per row block: ceil(K / 256)
  int units_per_cta;             // consecutive units of the flat list per CTA
  int stages;                    // ring depth, 2..kMaxStages
  int scale_tiles;               // 512-byte scale tiles per 128-row block: ceil(K / block / 4)
  int scale_bias;                // MXFP4: BF16 exponent field of scale byte e is e + scale_bias
  float out_scale;               // alpha x the format's factor: NVFP4 2^7 / enc, MXFP4 2^(126 - scale_bias)
  int flags;                     // bit 0: bias is f32
  int reserved[6];
};
static_assert(sizeof(BsGemvParams) == 256, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, scales) == 128, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, ldx) == 176, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, n) == 192, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, out_scale) == 224, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, flags) == 228, "mirror of gemv.rs");

namespace bsgemv {

constexpr int kRows = 128;          // weight rows per unit (8 consumer warps x 16)
constexpr int kConsumers = 8;
constexpr int kBoxK = 256;                        // k per TMA box of codes (128 bytes per row)
constexpr uint32_t kCodeBytes = kRows * 128;      // one TMA box: 128 rows x 128 bytes
constexpr uint32_t kScaleBytes = 4 * 512;         // up to 4 scale tiles per box (NVFP4: 16 columns)
// x of one box, staged by the producer warp: 8 NT token rows at a 576-byte pitch (512 bytes of x
// + 64 of padding), each row's 32 16-byte chunks in the order the consumers read them (chunk
// (c' 4 + q) 4 + t holds k = 64t + 32c' + 8q .. +7): every ld.shared.v4 of a warp is conflict
// free (rows g and g + 1 of a quarter warp 4 bank groups apart, lanes t adjacent).
constexpr uint32_t kXPitch = 576;
constexpr int kMaxStages = 12;
constexpr int kBiasF32 = 1;

enum class Fmt { Nvfp4, Mxfp4 };
template <Fmt F>
struct FmtInfo;
template <>
struct FmtInfo<Fmt::Nvfp4> {
  static constexpr int kBlock = 16;
  static constexpr int kTilesPerBox = 4;  // 256 k / 16 = 16 columns
};
template <>
struct FmtInfo<Fmt::Mxfp4> {
  static constexpr int kBlock = 32;
  static constexpr int kTilesPerBox = 2;  // 8 columns
};

__device__ __forceinline__ uint32_t hmul2_bf16(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}

// 16 bytes global -> shared (cp.async, L1-cached: x is shared by the CTAs of an SM), or 16 zeros
// when !live (src-size 0).
__device__ __forceinline__ void cp_async_16(uint32_t s_dst, const void* g_src, bool live) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(s_dst), "l"(g_src), "r"(live ? 16 : 0) : "memory");
}

// Arrives on mbarrier `bar` once this thread's earlier cp.async copies have landed (the arrival
// is one of the barrier's expected arrivals: .noinc).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

template <int Q>
__device__ __forceinline__ uint32_t pair(uint32_t w) {
  return e2m1_sm90_pair_bf16_2m126<Q>(w);
}

// The 8 MMA k-steps of one lane's 32 k (four layout-v2 words of 8 k, two steps each): weight rows
// g and g + 8 (cl, ch), their block scales as bf16x2 (sc[row][0..1]: NVFP4 words 0-1 and 2-3
// take blocks 0 and 1; MXFP4 both the same), and x (8 bf16 per word at shared address
// xs[nt] + 64 j, the staged x tile) for NT token tiles. Word
// j's step A multiplies pairs (k0, k1) and (k2, k3) — MMA slots (2t, 2t+1) and (2t+8, 2t+9) — by
// x's bf16x2 registers 0 and 1 as loaded, step B pairs (k4, k5), (k6, k7) by registers 2 and 3.
// With CH = 2 even and odd steps accumulate into two chains (half the dependent MMA latency; NT = 1),
// with CH = 1 into one (NT = 2: registers for two CTAs per SM).
template <int NT, int CH>
__device__ __forceinline__ void sub_chunk(const uint4& cl, const uint4& ch, const uint32_t (&scl)[2],
                                          const uint32_t (&sch)[2], const uint32_t (&xs)[NT], float (&acc)[CH][NT][4]) {
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
      const uint4 x = ld_shared_v4(xs[nt] + 64 * j);  // x0x1 x2x3 x4x5 x6x7
      const uint32_t b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
      mma_m16n8k16_bf16_f32(acc[0][nt], a0, b0);
      mma_m16n8k16_bf16_f32(acc[CH - 1][nt], a1, b1);
    }
  }
}

template <Fmt F, int NT, int KB, typename TOut>
__device__ __forceinline__ void gemv_w4a16(const BsGemvParams& p) {
  using Info = FmtInfo<F>;
  // A stage: KB code boxes, the unit's scale tiles, KB staged x boxes; 1024-byte multiple (the
  // swizzled code boxes of every stage start 1024-byte aligned).
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
  int tail = 0;
  if (n_units > 0 && u_begin / kstages != (u_begin + n_units - 1) / kstages) tail = (u_begin + n_units) % kstages;
  auto unit_at = [&](int i) { return i < tail ? u_begin + n_units - tail + i : u_begin + i - tail; };
  const uint32_t full0 = smem_addr(s_bar), empty0 = full0 + 8 * kMaxStages;

  for (int c = threadIdx.x; c < 256; c += blockDim.x) {
    uint32_t b = 0;
    if (F == Fmt::Nvfp4) {
      b = c < 127 ? ue4m3_bf16_x2p119(c) : 0u;  // 127 (NaN) and sign-set bytes: 0, never Inf/NaN
    } else {
      const int e = c + p.scale_bias;
      b = (c < 255 && e >= 1 && e <= 254) ? uint32_t(e) << 7 : 0u;  // pack_weight keeps every used byte in range
    }
    s_tab[c] = b | (b << 16);
  }
  auto load = [&](int i, int s) {
    const int u = unit_at(i);
    const int rb = u / kstages, ks = u - rb * kstages;
    const uint32_t bar = full0 + 8 * s, st = ring + s * kStageBytes;
    constexpr int kTiles = KB * Info::kTilesPerBox;
    const int tiles = min(kTiles, p.scale_tiles - ks * kTiles);
    mbar_arrive_expect_tx(bar, KB * kCodeBytes + 512u * tiles);
#pragma unroll
    for (int j = 0; j < KB; ++j) tma_load_2d(st + j * kCodeBytes, &p.codes_map, (ks * KB + j) * (kBoxK / 4), rb * kRows, bar);
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
    for (int i = 0; i < first; ++i) load(i, i);
  }
  __syncthreads();
  if (warp == kConsumers) {
    // x of unit i into stage s: lane L copies chunk L of every token row of every box (k = 64t +
    // 32c' + 8q with L = (c' 4 + q) 4 + t), zeros past M and K, then arrives on the stage's full
    // barrier once its copies have landed.
    const int xt = lane & 3, xq = (lane >> 2) & 3, xc = lane >> 4;
    auto stage_x = [&](int i, int s) {
      const int u = unit_at(i);
      const int ks = u - (u / kstages) * kstages;
      const uint32_t xb = ring + s * kStageBytes + kXOff + 16u * lane;
#pragma unroll
      for (int j = 0; j < KB; ++j) {
        const int k = (ks * KB + j) * kBoxK + 64 * xt + 32 * xc + 8 * xq;
#pragma unroll
        for (int r = 0; r < 8 * NT; ++r) {
          const bool live = r < p.m && k < p.k;
          cp_async_16(xb + j * kXBox + r * kXPitch, live ? p.x + (long long)r * p.ldx + k : p.x, live);
        }
      }
      cp_async_mbar_arrive(full0 + 8 * s);
    };
    for (int i = 0; i < first; ++i) stage_x(i, i);
    int s = first % stages, round = first / stages;
    for (int i = first; i < n_units; ++i) {
      if (round > 0) mbar_wait(empty0 + 8 * s, (round - 1) & 1);
      if (lane == 0) load(i, s);
      stage_x(i, s);
      if (++s == stages) s = 0, ++round;
    }
    return;  // nothing below synchronizes the whole CTA
  }

  // Consumer warp `warp`: rows [16 warp, +16) of each unit.
  // Scale bytes of rows g and g + 8 in a tile: (r % 32) * 16 + (r / 32) * 4 (layout.rs).
  const int r_lo = 16 * warp + g;
  const uint32_t sc_off = uint32_t((r_lo % 32) * 16 + (r_lo / 32) * 4);
  // NVFP4: tile t holds the lane's 4 blocks (k 64t ..); MXFP4: tile t / 2, bytes 2 (t % 2) ..
  const uint32_t sc_tile = F == Fmt::Nvfp4 ? 512u * t : 512u * (t >> 1);
  const int sc_shift = F == Fmt::Nvfp4 ? 0 : 16 * (t & 1);
  const uint32_t code_lo0 = swizzle128_offset(r_lo, 2 * t), code_lo1 = swizzle128_offset(r_lo, 2 * t + 1);
  const uint32_t code_hi0 = swizzle128_offset(r_lo + 8, 2 * t), code_hi1 = swizzle128_offset(r_lo + 8, 2 * t + 1);
  const bool has_bias = p.bias != nullptr;
  constexpr int CH = NT == 1 ? 2 : 1;  // accumulator chains
  float acc[CH][NT][4];
  auto zero = [&] {
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[c][nt][e] = 0.0f;
  };
  zero();
  int s = 0, round = 0;
  for (int i = 0; i < n_units; ++i) {
    const int rb = unit_at(i) / kstages;
    const bool ends_block = !(i + 1 < n_units && unit_at(i + 1) / kstages == rb);
    const uint32_t st = ring + s * kStageBytes;
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      const uint32_t sbox = st + KB * kCodeBytes + 512u * Info::kTilesPerBox * j;
      const uint32_t cb = st + j * kCodeBytes;
      const uint32_t xbox = st + kXOff + j * kXBox;
      uint32_t sw_lo = 0, sw_hi = 0;
#pragma unroll
      for (int c2 = 0; c2 < 2; ++c2) {
        // x of this 32-k piece from the staged tile: token g + 8 nt, chunks (c' 4 + q) 4 + t.
        uint32_t xs[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) xs[nt] = xbox + (g + 8 * nt) * kXPitch + 256u * c2 + 16u * t;
        if (j == 0 && c2 == 0) mbar_wait(full0 + 8 * s, round & 1);
        if (c2 == 0) {
          sw_lo = ld_shared_u32(sbox + sc_tile + sc_off) >> sc_shift;
          sw_hi = ld_shared_u32(sbox + sc_tile + sc_off + 128) >> sc_shift;
        }
        const uint4 c_lo = ld_shared_v4(cb + (c2 ? code_lo1 : code_lo0));
        const uint4 c_hi = ld_shared_v4(cb + (c2 ? code_hi1 : code_hi0));
        uint32_t l[2], h[2];
        if (F == Fmt::Nvfp4) {  // blocks 2c', 2c' + 1 of the lane's 64 k: bytes 2c', 2c' + 1
          l[0] = s_tab[(sw_lo >> (16 * c2)) & 0xFF];
          l[1] = s_tab[(sw_lo >> (16 * c2 + 8)) & 0xFF];
          h[0] = s_tab[(sw_hi >> (16 * c2)) & 0xFF];
          h[1] = s_tab[(sw_hi >> (16 * c2 + 8)) & 0xFF];
        } else {  // one MX block per 32 k: byte c'
          l[0] = l[1] = s_tab[(sw_lo >> (8 * c2)) & 0xFF];
          h[0] = h[1] = s_tab[(sw_hi >> (8 * c2)) & 0xFF];
        }
        sub_chunk<NT, CH>(c_lo, c_hi, l, h, xs, acc);
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
    if (++s == stages) s = 0, ++round;
    if (!ends_block) continue;

    // The row block is done (registers kept for the loop above are few: three CTAs per SM).
    const int c_first = rb * kstages / q, c_last = ((rb + 1) * kstages - 1) / q;
    const int row_base = rb * kRows + 16 * warp;
    // Bias of rows g and g + 8 (f32; 0 without a bias or past N).
    float bias[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + g + 8 * h;
      if (has_bias && row < p.n)
        bias[h] = (p.flags & kBiasF32) ? reinterpret_cast<const float*>(p.bias)[row]
                                       : __bfloat162float(reinterpret_cast<const bf16*>(p.bias)[row]);
    }

    float tot[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) tot[nt][e] = CH == 2 ? acc[0][nt][e] + acc[CH - 1][nt][e] : acc[0][nt][e];
    // Lane element e of tile nt: row g + 8 (e >> 1), token 8 nt + 2t + (e & 1).
    auto store = [&](const float (&v)[NT][4]) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = row_base + g + 8 * (e >> 1), tok = 8 * nt + 2 * t + (e & 1);
          const float y = v[nt][e] * p.out_scale;
          // Without a bias y itself (y + 0 would turn -0 into +0).
          const TOut out = from_f32<TOut>(has_bias ? y + bias[e >> 1] : y);
          if (row < p.n && tok < p.m) reinterpret_cast<TOut*>(p.y)[(long long)tok * p.ldy + row] = out;
        }
    };
    if (c_first == c_last) {  // a row block this CTA owns alone
      store(tot);
      zero();
      continue;
    }
    // Row block rb is shared by CTAs c_first..c_last: partial slot [c][slot][token][128 rows],
    // slot 0 when rb is the first row block of c's stretch, 1 when it is its last.
    auto slot_of = [&](int c) -> float* {
      const int slot = (c * q) / kstages == rb ? 0 : 1;
      return p.partials + (long long)(2 * c + slot) * (MT * kRows);
    };
    const int wrow = 16 * warp + g;
    float* mine = slot_of(blockIdx.x);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        __stcg(mine + (8 * nt + 2 * t + (e & 1)) * kRows + wrow + 8 * (e >> 1), tot[nt][e]);
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
                                               : __ldcg(part + (8 * nt + 2 * t + (e & 1)) * kRows + wrow + 8 * (e >> 1));
      }
      store(sum);
    }
    zero();
  }
}

}  // namespace bsgemv
}  // namespace b12x

using b12x::BsGemvParams;

// Occupancy: NT = 1 three CTAs per SM on SM90 (72 registers; 228 KB of shared memory), NT = 2
// two (96 registers); two and one on SM120 (100 KB of shared memory per SM).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define B12X_BSGEMV_MIN_CTAS(NT) ((NT) == 1 ? 2 : 1)
#else
#define B12X_BSGEMV_MIN_CTAS(NT) ((NT) == 1 ? 3 : 2)
#endif

#define B12X_BSGEMV(FMT, FMTNAME, NT, KB, TOUT, OUTNAME)                                                    \
  extern "C" __global__ void __launch_bounds__(32 * (b12x::bsgemv::kConsumers + 1), B12X_BSGEMV_MIN_CTAS(NT))                   \
      b12x_bsgemv_w4a16_##FMTNAME##_nt##NT##_kb##KB##_##OUTNAME##out(const __grid_constant__ BsGemvParams p) { \
    b12x::bsgemv::gemv_w4a16<b12x::bsgemv::Fmt::FMT, NT, KB, TOUT>(p);                                       \
  }

// The entry-point table in src/blockscaled/gemv.rs lists exactly these.
#define B12X_BSGEMV_OUTS(FMT, FMTNAME, NT, KB)           \
  B12X_BSGEMV(FMT, FMTNAME, NT, KB, b12x::bf16, bf16) \
  B12X_BSGEMV(FMT, FMTNAME, NT, KB, b12x::fp16, f16)  \
  B12X_BSGEMV(FMT, FMTNAME, NT, KB, float, f32)

B12X_BSGEMV_OUTS(Nvfp4, nvfp4, 1, 1)
B12X_BSGEMV_OUTS(Nvfp4, nvfp4, 1, 2)
B12X_BSGEMV_OUTS(Nvfp4, nvfp4, 2, 1)
B12X_BSGEMV_OUTS(Nvfp4, nvfp4, 2, 2)
B12X_BSGEMV_OUTS(Mxfp4, mxfp4, 1, 1)
B12X_BSGEMV_OUTS(Mxfp4, mxfp4, 1, 2)
B12X_BSGEMV_OUTS(Mxfp4, mxfp4, 2, 1)
B12X_BSGEMV_OUTS(Mxfp4, mxfp4, 2, 2)
