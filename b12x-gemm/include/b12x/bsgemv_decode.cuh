// bsgemv_decode.cuh — gemm.blockscaled's decode kernel body (W4A16 / W8A16, M <= 16), shared with
// crates that run it over rows of their own.                                     crate: b12x-gemm
//   `bsgemv::gemv<F, NT, KB, TOut, Rows>` is the kernel of kernels/blockscaled_gemv.cu (its header
//   comment and src/blockscaled/README.md describe it: persistent stream-K CTAs, a TMA producer
//   warp, eight consumer warps dequantizing layout-v3 codes into swap-AB mma.sync, tagged merges).
//   `Rows` decides which weight row blocks the unit list covers, which x rows each unit stages and
//   what the epilogue stores: `DenseRows` is one weight (gemm.blockscaled's entry points, built in
//   blockscaled_gemv.cu); moe.fused_moe's decode path runs the same body over the row blocks of
//   the experts a batch touches (b12x-moe/kernels/fused_moe_decode.cu).
// Exported to dependent crates' kernels through `links = "b12x_gemm"` (DEP_B12X_GEMM_INCLUDE).
#pragma once

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
  int flags;                     // bit 0: bias is f32; bit 1 (FP8 block): 32 x 32 scale tiles (else 128 x 128)
  int sld;                       // FP8 block: f32 scales per row of scale tiles (padded to a multiple of 4)
  int sgroups;                   // FP8 block: rows of scale tiles, ceil(N / tile)
  const float* xmult;            // pre-quantized x: its f32 tensor scale (NVFP4: the encode scale, flags bit 2), or nullptr
  const float* xscales;          // block FP8 x with f32 scales (flags bit 3): [M][K / 128] f32, written by the pre-pass
};
static_assert(sizeof(BsGemvParams) == 256, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, scales) == 128, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, ldx) == 176, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, n) == 192, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, out_scale) == 224, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, flags) == 228, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, sgroups) == 236, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, xmult) == 240, "mirror of gemv.rs");
static_assert(offsetof(BsGemvParams, xscales) == 248, "mirror of gemv.rs");

namespace bsgemv {

constexpr int kRows = 128;          // weight rows per unit (8 consumer warps x 16)
constexpr int kConsumers = 8;
constexpr uint32_t kCodeBytes = kRows * 128;      // one TMA box: 128 rows x 128 bytes
constexpr int kMaxStages = 12;
constexpr int kBiasF32 = 1;
constexpr int kTile32 = 2;
constexpr int kXmultInv = 4;  // xmult is an encode scale (NVFP4): divide by it
// Block-FP8 weights x block FP8 1 x 128 x with f32 scales: x̂ holds the codes' values and the
// promotion of each weight tile's partial sums multiplies by the x row's scale of the 128-k group
// too (xscales: [M][K / 128] f32). The decode kernels read this flag (a branch per promotion:
// measured free there); the tiled and wgmma kernels have w8a8f32 instances instead (bsgemm::gemm /
// wgemm's kXs: as a runtime branch it slowed the bf16-x wgmma prefill by 12%).
constexpr int kXScaleF32 = 8;
constexpr uint32_t kTwo120 = 0x7B807B80u;  // bf16x2 (2^120, 2^120)
constexpr uint32_t kStaggerNs = 500;        // stage 0 first, then the rest of the ring (gemv)

// Nvfp4, Mxfp4: E2M1 codes (layout v2), 256 k per box. Mxfp8: E4M3 codes with UE8M0 scales in
// swizzled 128x4 tiles; Fp8Block: E4M3 with f32 scales per 128 x 128 or 32 x 32 tile (flags),
// applied to per-tile partial sums; Fp8Tensor: E4M3, the one scale in the epilogue; 128 k per box.
enum class Fmt { Nvfp4, Mxfp4, Mxfp8, Fp8Block, Fp8Tensor };
template <Fmt F>
struct FmtInfo {
  static constexpr bool kFp8 = F == Fmt::Mxfp8 || F == Fmt::Fp8Block || F == Fmt::Fp8Tensor;
  static constexpr int kBoxK = kFp8 ? 128 : 256;  // k per TMA box of codes (128 bytes per row)
  // Swizzled 128x4 scale tiles per box (bulk copy): NVFP4 256 k / 16 / 4, MXFP4 / MXFP8 k / 32 / 4.
  static constexpr int kTilesPerBox = F == Fmt::Nvfp4 ? 4 : F == Fmt::Mxfp4 ? 2 : F == Fmt::Mxfp8 ? 1 : 0;
  // Shared memory per box for scales (src/blockscaled/gemv.rs mirrors it): FP4 2 KB, FP8 512 B
  // (one MXFP8 tile, or the f32 block scales: 4 tile rows x 4 x 4 B at most).
  static constexpr uint32_t kScaleBytes = kFp8 ? 512u : 4u * 512u;
  // x of one box, staged by the producer warp: 8 NT token rows at a pitch of the box's 2 kBoxK
  // bytes + 64 (rows g and g + 1 of a quarter warp 4 bank groups apart: every ld.shared.v4 of a
  // warp conflict free). FP4: each row's 32 16-byte chunks in the consumers' read order (chunk
  // (c' 4 + q) 4 + t holds k = 64t + 32c' + 8q .. +7); FP8: in k order.
  static constexpr uint32_t kXPitch = 2 * kBoxK + 64;
};

// The scale table both paths dequantize with: scale byte c -> its BF16 scale in both halves.
// NVFP4: the UE4M3 value x 2^119 (127 (NaN) and sign-set bytes: 0, never Inf/NaN); MX: exponent
// field c + scale_bias (pack_weight keeps every used byte in range; others 0). Threads tid,
// tid + nthreads, ... fill it; the caller synchronizes.
template <Fmt F>
__device__ __forceinline__ void fill_scale_table(uint32_t* tab, int scale_bias, int tid, int nthreads) {
  for (int c = tid; c < 256; c += nthreads) {
    uint32_t b = 0;
    if (F == Fmt::Nvfp4) {
      b = c < 127 ? ue4m3_bf16_x2p119(c) : 0u;
    } else {
      const int e = c + scale_bias;
      b = (c < 255 && e >= 1 && e <= 254) ? uint32_t(e) << 7 : 0u;
    }
    tab[c] = b | (b << 16);
  }
}

// The epilogue's f32 multiplier: alpha x the weight's factor (out_scale), times the tensor scale
// of pre-quantized activations read from the device (divided by an NVFP4 encode scale).
__device__ __forceinline__ float epilogue_scale(float out_scale, const float* xmult, int flags) {
  if (xmult == nullptr) return out_scale;
  const float v = __ldg(xmult);
  return (flags & kXmultInv) ? out_scale / v : out_scale * v;
}

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

__device__ __forceinline__ uint2 ld_shared_v2(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}

// s times the f32 x scales of two consecutive x rows staged at shared address `addr` (the
// block-FP8 promotions with f32-scaled x: a lane's MMA elements e & 1 = 0, 1).
__device__ __forceinline__ void x_scaled(float s, uint32_t addr, float (&s2)[2]) {
  const uint2 v = ld_shared_v2(addr);
  s2[0] = s * __uint_as_float(v.x);
  s2[1] = s * __uint_as_float(v.y);
}

// N (4 or 16) bytes global -> shared (cp.async, L1-cached: x is shared by the CTAs of an SM), or
// N zeros when !live (src-size 0).
template <int N>
__device__ __forceinline__ void cp_async(uint32_t s_dst, const void* g_src, bool live) {
  static_assert(N == 4 || N == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(s_dst), "l"(g_src), "n"(N), "r"(live ? N : 0)
               : "memory");
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

// The 8 MMA k-steps of one lane's 32 k of E4M3 codes in a 128-k box (FP8 formats): four groups
// T of 8 k (k 32T + 8t .. +7: 8 bytes of rows g and g + 8 from chunk 2T + t/2 of their box lines),
// each two steps — word 0's pairs (k0, k1), (k2, k3) against x's bf16x2 registers 0 and 1, word
// 1's against 2 and 3 — so every MMA sums the 32 k of one group T only: per-group f32 scales can
// multiply the MMA's partial sums (Fp8Block). The pairs are code * 2^-120, times scl / sch in
// BF16 (MXFP8: the block scale times 2^(120 - c); else 2^120: the code itself).
template <int NT, int CH>
__device__ __forceinline__ void fp8_group(const uint2& cl, const uint2& ch, uint32_t scl, uint32_t sch, uint32_t xaddr0,
                                          float (&acc)[CH][NT][4]) {
  const uint32_t a0[4] = {hmul2_bf16(e4m3_pair_bf16_2m120<0>(cl.x), scl), hmul2_bf16(e4m3_pair_bf16_2m120<0>(ch.x), sch),
                          hmul2_bf16(e4m3_pair_bf16_2m120<1>(cl.x), scl), hmul2_bf16(e4m3_pair_bf16_2m120<1>(ch.x), sch)};
  const uint32_t a1[4] = {hmul2_bf16(e4m3_pair_bf16_2m120<0>(cl.y), scl), hmul2_bf16(e4m3_pair_bf16_2m120<0>(ch.y), sch),
                          hmul2_bf16(e4m3_pair_bf16_2m120<1>(cl.y), scl), hmul2_bf16(e4m3_pair_bf16_2m120<1>(ch.y), sch)};
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const uint4 x = ld_shared_v4(xaddr0 + nt * 8 * FmtInfo<Fmt::Mxfp8>::kXPitch);  // x_k0 .. x_k7 of token g + 8 nt
    const uint32_t b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
    mma_m16n8k16_bf16_f32(acc[0][nt], a0, b0);
    mma_m16n8k16_bf16_f32(acc[CH - 1][nt], a1, b1);
  }
}

// The rows a decode launch works on (`gemv`'s Rows): DenseRows is gemm.blockscaled's — one weight
// of p.n rows, x rows [0, p.m), y [p.m, p.n] — and moe.fused_moe supplies its expert-major rows
// (b12x-moe/kernels/fused_moe_decode.cu). A Rows type provides:
//   units(kstages), per_cta(units): the launch's unit count and units per CTA (stream-K);
//   weight_block(rb): the 128-row block of the codes / scales that unit row block rb reads;
//   rows(rb), x_row(rb, r): unit row block rb's live x rows and the address of x row r;
//   kEarlyWeights, early_weights(), wait_inputs(): with kEarlyWeights (a compile-time switch, so
//     that DenseRows' code stays as it was) and early_weights() the producer asks for its whole
//     first ring of weights at once (no stagger) and only then calls wait_inputs() (a PDL wait
//     for x's producer), before staging any x; the consumers call wait_inputs() after the
//     barrier set-up (DenseRows: kEarlyWeights = false, neither function);
//   store<TOut, NT, kRowMul, kHi>(rb, row_base, g, t, v, bias, has_bias): the epilogue of a
//     finished row block (v: the lane's MMA elements, rows row_base + kRowMul g + kHi (e >> 1),
//     tokens 8 nt + 2t + (e & 1)).
struct DenseRows {
  const BsGemvParams& p;
  __device__ __forceinline__ int units(int kstages) const { return (p.n + kRows - 1) / kRows * kstages; }
  __device__ __forceinline__ int per_cta(int) const { return p.units_per_cta; }
  __device__ __forceinline__ int weight_block(int rb) const { return rb; }
  __device__ __forceinline__ int rows(int) const { return p.m; }
  __device__ __forceinline__ const bf16* x_row(int, int r) const { return p.x + (long long)r * p.ldx; }
  static constexpr bool kEarlyWeights = false;
  template <typename TOut, int NT, int kRowMul, int kHi>
  __device__ __forceinline__ void store(int, int row_base, int g, int t, const float (&v)[NT][4], const float (&bias)[2],
                                        bool has_bias) const {
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
  }
};

template <Fmt F, int NT, int KB, typename TOut, class Rows>
__device__ __forceinline__ void gemv(const BsGemvParams& p, const Rows& rows) {
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
  const int kstages = p.kstages, stages = p.stages;
  const int units = rows.units(kstages);
  const int q = rows.per_cta(units);
  const int u_begin = min(int(blockIdx.x) * q, units);
  const int n_units = min(units - u_begin, q);
  // Walk order: when the CTA's list spans row blocks, the units of its last row block come first
  // if that block continues in the next CTA (its merge then overlaps the streaming, as in
  // gemm.bf16_gemv's tma configs), and those of its first row block come last if that block
  // began in the previous CTA (which walked it first: this CTA, the block's last, then finishes
  // it at its very end instead of waiting at its start); each row block's units keep their k
  // order, so the order of the blocks changes no sum (bench/proto/bsgemv_decode_proto.cu FL8192:
  // -0.1 to -0.35 µs, -2.2 at 36864 x 7168 M = 8, bench-results/2026-12-03-h200/proto/6/).
  int tail = 0, head = 0;
  if (n_units > 0 && u_begin / kstages != (u_begin + n_units - 1) / kstages) {
    tail = (u_begin + n_units) % kstages;
    if (u_begin % kstages != 0) head = kstages - u_begin % kstages;
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
    for (int j = 0; j < KB; ++j)
      tma_load_2d(st + j * kCodeBytes, &p.codes_map, (ks * KB + j) * 64, rows.weight_block(rb) * kRows, bar);
    if (kTiles > 0)
      bulk_copy_g2s(st + KB * kCodeBytes, p.scales + ((size_t)rows.weight_block(rb) * p.scale_tiles + ks * kTiles) * 512,
                    512u * tiles, bar);
  };
  const int first = min(stages, n_units);
  if (warp == kConsumers && lane == 0) {
    tma_prefetch_descriptor(&p.codes_map);
    for (int s = 0; s < stages; ++s) {
      mbar_init(full0 + 8 * s, 1 + 32);  // the TMA lane's expect_tx + the warp's 32 x arrivals
      mbar_init(empty0 + 8 * s, 32 * kConsumers);  // every consumer lane releases
    }
    mbar_fence_init();
    if (first > 0) load(0, 0);  // the rest of the ring after the stagger below
  }
  __syncthreads();
  if constexpr (Rows::kEarlyWeights) {
    if (warp != kConsumers) rows.wait_inputs();  // the consumers (the producer warp: below)
  }
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
          const bool live = r < rows.rows(rb) && k < p.k;
          cp_async<16>(xb + j * kXBox + r0 * kXPitch, live ? rows.x_row(rb, r) + k : p.x, live);
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
          // f32 x scales: token `lane`'s scale of this 128-k box at byte 64 + 4 lane (zeros for
          // tokens past M and a box past K).
          if ((p.flags & kXScaleF32) && lane < 8 * NT) {
            const bool live = box_live && lane < p.m;
            cp_async<4>(sdst + 64u + 4u * lane, live ? p.xscales + (long long)lane * (p.k / 128) + box : p.xscales, live);
          }
        }
      }
      cp_async_mbar_arrive(full0 + 8 * s);
    };
    // Stage 0 first: every CTA asks for its first stage, then waits kStaggerNs before asking for
    // the rest of its ring, so that all first stages reach the memory system ahead of all later
    // ones and the consumers start ~1 µs sooner (issuing the whole ring at once, the first stages
    // landed only with most of the ~2 x 9.5 MB that 264 CTAs ask for: bench/proto/
    // bsgemv_decode_proto.cu FL512, bench-results/2026-12-03-h200/proto/3/: 250, 500 and
    // 1000 ns alike, -1.2 µs at 18432 x 7168 and 4096 x 7168, M = 1).
    if constexpr (Rows::kEarlyWeights) {
      // early_weights(): the rest of the ring at once, then the wait for x.
      const bool early = rows.early_weights();
      for (int i = 0; i < first; ++i) {
        if (i == (early ? 0 : 1)) {
          if (!early) __nanosleep(kStaggerNs);
          __syncwarp();
          if (lane == 0)
            for (int j = 1; j < first; ++j) load(j, j);
          if (early) rows.wait_inputs();
        }
        stage_x(i, i);
      }
    } else {
      for (int i = 0; i < first; ++i) {
        if (i == 1) {
          __nanosleep(kStaggerNs);
          __syncwarp();
          if (lane == 0)
            for (int j = 1; j < first; ++j) load(j, j);
        }
        stage_x(i, i);
      }
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
  // acc += part * scale (FP8 block: a tile's partial sums; part is zeroed), with f32 x scales
  // times the token's scale of the box (staged at byte 64 of the box's scales: tokens 8 nt + 2t,
  // + 1 of the lane's elements e & 1).
  const bool xsf = (p.flags & kXScaleF32) != 0;
  auto promote = [&](float (&part)[CH][NT][4], float scale, uint32_t sbox) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float s2[2] = {scale, scale};
      if (xsf) x_scaled(scale, sbox + 64u + 32u * nt + 8u * t, s2);
#pragma unroll
      for (int c = 0; c < CH; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[c][nt][e] = fmaf(part[c][nt][e], s2[e & 1], acc[c][nt][e]), part[c][nt][e] = 0.0f;
    }
  };
  zero(acc);
  int s = 0, round = 0;
  // The walk's row block and k-stage, advanced per unit: unit_at is consecutive inside each of
  // its three runs (tail, middle, head), so only a run's first unit needs the division (it cost
  // two divisions per unit, ~50 instructions, beside ~300 of dequantization and MMA).
  auto place = [&](int i, int& rb_, int& ks_) {
    const int u = unit_at(i);
    rb_ = u / kstages;
    ks_ = u - rb_ * kstages;
  };
  int rb = 0, ks = 0, next_rb = 0, next_ks = 0;  // unit i's, unit i + 1's (when it exists)
  if (n_units > 0) place(0, rb, ks);
  for (int i = 0; i < n_units; ++i, rb = next_rb, ks = next_ks) {
    next_rb = rb, next_ks = ks + 1;
    if (i + 1 == tail || i + 1 == n_units - head) {
      place(i + 1, next_rb, next_ks);  // the next run's first unit
    } else if (next_ks == kstages) {
      next_rb = rb + 1, next_ks = 0;
    }
    const bool ends_block = !(i + 1 < n_units && next_rb == rb);
    const uint32_t st = ring + s * kStageBytes;
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      const uint32_t sbox = st + KB * kCodeBytes + (kFp8 ? 512u : 512u * Info::kTilesPerBox) * j;
      const uint32_t cb = st + j * kCodeBytes;
      const uint32_t xbox = st + kXOff + j * kXBox;
      if (j == 0) mbar_wait(full0 + 8 * s, round & 1);
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
            if (tile32) promote(part, ld_shared_f32(sbox + bs_off + 4u * T), sbox);
          } else {
            fp8_group<NT, CH>(cl, chv, l, h, x0 + 64u * T, acc);
          }
        }
        if constexpr (F == Fmt::Fp8Block) {
          if (!tile32) promote(part, ld_shared_f32(sbox), sbox);
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
      rows.template store<TOut, NT, kRowMul, kHi>(rb, row_base, g, t, v, bias, has_bias);
    };
    if (c_first == c_last) {  // a row block this CTA owns alone
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
    float* mine = slot_of(blockIdx.x);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        __stcg(mine + (8 * nt + 2 * t + (e & 1)) * kRows + wrow + kHi * (e >> 1), tot[nt][e]);
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
}

}  // namespace bsgemv
}  // namespace b12x
