// bf16_gemv.cu — skinny GEMM (decode GEMV) against BF16 weights.        crate: b12x-gemm
//   y[m,n] = sum_k x[m,k] * W[n,k] (+ bias[n])   (f32 accumulate, bias added in f32, one rounding to TOut)
//   _silu entry points (fused SwiGLU): x[m,k] = bf16(silu(min(g, L)) * clamp(u, -L, L)), g = xin[m,k],
//   u = xin[m,K+k] (silu_mul_vec, b12x/activation.cuh: activation.silu_and_mul's very bits)
// Tensors (row-major, strides in elements):  W [N, K] bf16   x [M, K] bf16|f32   bias [N] bf16|f32
//   y [M, N] bf16|f32;  _silu: xin [M, 2K] bf16 = [gate | up] (row stride >= 2K) in place of x
// Constraints: M <= tokens of the variant (MMA: 8*NT; SIMT: any, MT per pass); any N, K >= 1;
//   variants without _unaligned need 16-byte aligned W/x base pointers and 16-byte row strides;
//   _silu: NT = 1 (M <= 8), bf16 y, aligned, K % 8 == 0 (the up half 16-byte aligned too).
// Strategy: BF16 x -> swap-AB mma.sync m16n8k16 (16 W rows are the MMA rows, 8 tokens the
//   MMA columns); each warp streams its W rows either straight into registers one group of
//   U k-steps ahead (mmad) or through its own swizzled cp.async ring (mma, S-1 stages in
//   flight), K split across the warps of a CTA and across CTAs;
//   or (tma) one persistent CTA per SM whose producer warp keeps a deep ring of TMA boxes of W
//   and x in flight while consumer warps feed the same MMAs from shared memory (ldmatrix),
//   the flat (row block, k-stage) list split evenly over the CTAs (stream-K);
//   f32 x -> SIMT f32 FMAs from 16-byte register loads (x is never rounded to bf16).
//   _silu (mma, mmad): where a lane loads x's 16-byte piece of k..k+7 it loads the gate piece
//   and the up piece K elements further (both after the PDL wait, like x), and feeds their
//   silu_mul_vec to the same MMAs right before they run; W, merges and the output unchanged.
//   Partials are merged in a fixed order (warps through shared memory, CTAs by the
//   last-arriving CTA of each row block), so results are bitwise reproducible.
// Entry points: b12x_bf16_gemv_mmad_nt{N}_rt{R}_u{U}_{bf16,f32}out, ..._mma_nt{N}_rt{R}_u{U}_s{S}_*,
//   ..._mma_nt{N}_unaligned_*, ..._tma_nt{N}_rt{R}_cw{W}_kb{B}_* (Bf16GemvTmaParams),
//   ..._simt_mt{T}_rs{R}_{bf16,f32}out, ..._simt_mt{T}_unaligned_*,
//   ..._mmad_nt1_rt{R}_u{U}_silu_bf16out, ..._mma_nt1_rt{R}_u{U}_s{S}_silu_bf16out (Bf16GemvActParams).
//   ..._mma_nt1_rt{R}_u{U}_s{S}{,_addnorm}_rope_bf16out (Bf16GemvRopeParams): a decode QKV
//   projection whose epilogue applies attention.rope to the q and k heads and stores the new
//   k (rotated) and v into a paged cache, as attention.rope_kv_append does (GemvRopeEpi below).
//   Oracle: src/bf16_gemv/reference.rs
#include "b12x/activation.cuh"
#include "b12x/common.cuh"
#include "b12x/mma.cuh"
#include "b12x/rope_math.cuh"

namespace b12x {
namespace bf16_gemv {

// Shared-memory row padding of the per-warp partial tile: makes the fragment stores
// (lanes g, t -> row g, token 2t) and the row-contiguous reads bank-conflict free.
constexpr int kRowPad = 4;
// Every CTA has at most 8 warps (256 threads): lets the heavy variants use up to 255 registers.
constexpr int kMaxThreads = 256;
// K elements covered by one warp step of the MMA kernel: 4 lanes x 8 elements.
constexpr int kMmaStepK = 32;
// K elements covered by one warp step of the SIMT kernel: 32 lanes x 8 elements.
constexpr int kSimtStepK = 256;

}  // namespace bf16_gemv

// Mirrored by `Bf16GemvParams` in src/bf16_gemv/params.rs (size and offsets asserted there).
struct Bf16GemvParams {
  const bf16* w;         // [N, K] bf16, row stride ldw
  const void* x;         // [M, K] bf16 (mma) or f32 (simt), row stride ldx
  const void* bias;      // [N] bf16 or f32 (see flags), nullptr for no bias
  void* y;               // [M, N] TOut, row stride ldy
  float* partials;       // [ksplit, m_pad, n_pad] f32 split-K partials (scratch); ksplit > 1 only
  unsigned long long* counters;  // [gridDim.x] tagged arrival counters (scratch, any initial bits; arrive_tagged); ksplit > 1 only
  long long ldw;         // W row stride, elements
  long long ldx;         // x row stride, elements
  long long ldy;         // y row stride, elements
  int n;                 // N
  int k;                 // K
  int m;                 // live M (rows of x / y)
  int k_per_split;       // K elements per CTA split, multiple of 32 (the last split may be shorter)
  int ksplit;            // == gridDim.y
  int warps_k;           // warps of a CTA along K
  int warps_r;           // warps of a CTA along N; blockDim.x == 32 * warps_k * warps_r
  int n_pad;             // gridDim.x * rows per CTA (row stride of partials)
  int m_pad;             // token capacity of partials (>= m)
  int flags;             // bit 0 (kBiasF32): bias is f32, else bf16; bit 1 (kPdl): launched with PDL;
                         //   bit 2 (kYSilu): the SwiGLU epilogue (below)
  float y_limit;         // kYSilu: the swiglu limit L (finite, > 0), or +inf for none
  int reserved;          // zero; pads the struct to a multiple of 8 bytes
};
static_assert(sizeof(Bf16GemvParams) == 120, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, y_limit) == 112, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, bias) == 16, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, partials) == 32, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, counters) == 40, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, ldw) == 48, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, ldy) == 64, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, n) == 72, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, m) == 80, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, k_per_split) == 84, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, ksplit) == 88, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, warps_k) == 92, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, warps_r) == 96, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, n_pad) == 100, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, m_pad) == 104, "mirror of params.rs");
static_assert(offsetof(Bf16GemvParams, flags) == 108, "mirror of params.rs");
constexpr int kBiasF32 = 1;
constexpr int kPdl = 2;
// SwiGLU epilogue: W's rows come in 16-row groups of 8 gate rows then the 8 matching up rows
// (group j: gate rows 8j..8j+7, up rows 8j..8j+7 of the MLP), and y is [M, N/2]:
// y[m, 8j+i] = silu_mul_f32(bf16(g), bf16(u), y_limit) rounded to TOut, g and u the finished
// (bias-added) sums of rows 16j+i and 16j+8+i — what this GEMV would store for them (bf16 y),
// then activation.silu_and_mul. Every path that finishes a 16-row tile finishes both halves
// in one thread (MMA fragment rows g and g+8; the shared-memory tiles' rows r, r+8).
constexpr int kYSilu = 4;

// Parameters of the fused-activation entry points (`b12x_bf16_gemv_*_silu_*`): the plain ones,
// with x [M, 2K] bf16 = [gate | up] (row stride ldx >= 2K; k stays K), plus the swiglu limit.
// Mirrored by `Bf16GemvActParams` in src/bf16_gemv/params.rs (size and offsets asserted there).
struct Bf16GemvActParams {
  Bf16GemvParams g;
  float limit;   // L (finite, > 0): g <- min(g, L), u <- clamp(u, -L, L); +inf: no limit
  int reserved;  // zero; pads the struct to a multiple of 8 bytes
};
static_assert(sizeof(Bf16GemvActParams) == 128, "mirror of params.rs");
static_assert(offsetof(Bf16GemvActParams, limit) == 120, "mirror of params.rs");
static_assert(offsetof(Bf16GemvActParams, reserved) == 124, "mirror of params.rs");

// Parameters of the fused add+RMSNorm entry points (`b12x_bf16_gemv_*_addnorm_*`): the plain
// ones (x [M, K] bf16: the sublayer output added to the residual), plus the residual, its
// rounded sum (written by CTA (0, 0)) and the norm weight. The GEMV's input is norm.rmsnorm's
// fused form: r = bf16(x + residual), h = bf16((r · rrms) · w), rrms = rsqrtf(Σ r² / K + eps).
// Mirrored by `Bf16GemvNormParams` in src/bf16_gemv/params.rs (size and offsets asserted there).
struct Bf16GemvNormParams {
  Bf16GemvParams g;
  const bf16* residual;  // [M, K], row stride ldr (read)
  bf16* residual_out;    // [M, K], row stride ldro: r = bf16(x + residual) (written; no alias)
  const bf16* norm_w;    // [K] contiguous
  long long ldr;
  long long ldro;
  float eps;             // added to mean(r²) before the rsqrt
  int reserved;          // zero; pads the struct to a multiple of 8 bytes
};
static_assert(sizeof(Bf16GemvNormParams) == 168, "mirror of params.rs");
static_assert(offsetof(Bf16GemvNormParams, residual) == 120, "mirror of params.rs");
static_assert(offsetof(Bf16GemvNormParams, ldro) == 152, "mirror of params.rs");
static_assert(offsetof(Bf16GemvNormParams, eps) == 160, "mirror of params.rs");

// The rope + KV-append epilogue of the `_rope` entry points (a decode step's QKV projection):
// W's N = (H + 2 Hkv) D rows are the q heads, then the k heads, then the v heads, each head's
// rows in 16-row groups that pair every rotary pair in one thread (fragment rows g and g + 8):
// group j of a head holds dims a(8j + i) then b(8j + i), i < 8, with a(f) = f, b(f) = f + D/2
// (NeoX) or a(f) = 2f, b(f) = 2f + 1 (GPT-J); the v heads use the same order. Per token m (the
// decode batch's request m, one new token each) and pair, with va, vb the bf16 sums this GEMV
// would store (bias included): q heads -> y at the dims' own columns, rotated by
// attention.rope (rope_rotate on cos / sin of pair f at positions[m], rope_cos_sin); k heads ->
// y unrotated and the rotated pair into k_cache; v heads -> y and v_cache — the slot of cache
// position seq_lens[m] - 1 in request m's pages, kv_append's rules and fault bits. So y and the
// caches are bit for bit this GEMV (plain order of W's rows) followed by
// attention.rope_kv_append on y's q, k and v columns. Mirrored by `GemvRopeEpi` in
// src/bf16_gemv/params.rs.
constexpr int kRopeMaxPairs = 128;  // head_dim <= 256
// Fault bits (attention's kernels/paging.cuh; src/paging.rs in b12x-attention).
constexpr unsigned int kRopeFaultPageId = 1;
constexpr unsigned int kRopeFaultLength = 2;
constexpr unsigned int kRopeFaultQueryLayout = 4;
constexpr unsigned int kRopeFaultPosition = 8;
struct GemvRopeEpi {
  const int* positions;   // [M] rope positions
  const int* seq_lens;    // [M] context lengths including the new token
  const int* page_table;  // [M, pt_stride] page ids
  const float* cos_sin;   // [max_position, D] f32 table, or null: sincosf of pos * inv_freq
  bf16* k_cache;          // [num_pages, page_size, Hkv, D]
  bf16* v_cache;          // [num_pages, page_size, Hkv, D]
  unsigned int* error;    // [1] fault bits (ORed)
  long long pt_stride;    // elements between page-table rows
  int heads;              // H
  int kv_heads;           // Hkv
  int head_dim;           // D (rotary_dim = D, offset 0)
  int page_size;          // P
  int num_pages;          // page ids must lie in [0, num_pages)
  int max_pages;          // pages per request: seq_lens must be <= max_pages * P
  int max_position;       // positions must lie in [0, max_position)
  int neox;               // 1: NeoX halves, 0: GPT-J pairs
  float scale;            // multiplies cos and sin (YaRN's mscale ratio; 1 otherwise)
  int reserved;           // zero
  float inv_freq[kRopeMaxPairs];  // D/2 entries used
};
static_assert(sizeof(GemvRopeEpi) == 616, "mirror of params.rs");
static_assert(offsetof(GemvRopeEpi, pt_stride) == 56, "mirror of params.rs");
static_assert(offsetof(GemvRopeEpi, scale) == 96, "mirror of params.rs");
static_assert(offsetof(GemvRopeEpi, inv_freq) == 104, "mirror of params.rs");

// Parameters of the `_rope` / `_addnorm_rope` entry points: the add+RMSNorm parameters (their
// norm fields unused by `_rope`), then the epilogue's.
struct Bf16GemvRopeParams {
  Bf16GemvNormParams n;
  GemvRopeEpi r;
};
static_assert(sizeof(Bf16GemvRopeParams) == 784, "mirror of params.rs");
static_assert(offsetof(Bf16GemvRopeParams, r) == 168, "mirror of params.rs");

// The split add+RMSNorm of a decoder layer's second norm (the `_resrms` and `_rmsx` entry points,
// ring feed, NT = 1, unsplit). `_resrms` (the O projection): y[m, n] = r = bf16(bf16(v) + residual[m, n])
// with v the sum this GEMV would store (bias included): norm.rmsnorm's new residual, bit for bit;
// and sum_sq[m, g] = the sum of r * r over the 16 rows of group g (rows 16g..16g+15 < N), added in a
// fixed butterfly (lanes r % 16: xor 8, 4, 2, 1): the same bits whatever the config. `_rmsx` (the
// gate/up projection, x = that r, W's columns pre-multiplied by the norm weight): every finished
// sum v of token m is v * rrms[m] before the bias and the store (or the SwiGLU epilogue), rrms[m] =
// rsqrtf(S / K + eps), S = the sum of sum_sq[m, 0..groups) in a fixed order (lane l adds groups
// l, l + 32, ... in turn, then a butterfly xor 16..1). Mirrored by `GemvRmsEpi` in params.rs.
struct GemvRmsEpi {
  const bf16* residual;  // _resrms: [M, N] bf16, row stride ldr (read; never y)
  float* sum_sq;         // [M, groups] f32, row stride lds: written (_resrms) / read (_rmsx)
  long long ldr;
  long long lds;
  int groups;            // _resrms: ceil(N / 16); _rmsx: the entries summed per token (ceil(K / 16))
  float eps;             // _rmsx: added to S / K before the rsqrt
};
static_assert(sizeof(GemvRmsEpi) == 40, "mirror of params.rs");
static_assert(offsetof(GemvRmsEpi, groups) == 32, "mirror of params.rs");

// Parameters of the `_resrms` / `_rmsx` entry points.
struct Bf16GemvRmsParams {
  Bf16GemvParams g;
  GemvRmsEpi e;
};
static_assert(sizeof(Bf16GemvRmsParams) == 160, "mirror of params.rs");
static_assert(offsetof(Bf16GemvRmsParams, e) == 120, "mirror of params.rs");

// Parameters of the TMA entry points (`b12x_bf16_gemv_tma_*`). Mirrored by `Bf16GemvTmaParams`
// in src/bf16_gemv/params.rs. Of `g` they use bias, y, partials, counters, ldy, n, k, m and
// flags (partial slots are [tokens of the tile][rows per CTA], not m_pad-strided).
struct Bf16GemvTmaParams {
  TmaDescriptor w_map;  // W [N, K] bf16: boxes of 64 k x rows-per-CTA rows, 128-byte swizzle
  TmaDescriptor x_map;  // x [M, K] bf16: boxes of 64 k x 8*NT tokens, 128-byte swizzle, zero fill
  Bf16GemvParams g;
  int kstages;        // k-stages (64*KB k each) per row block
  int units_per_cta;  // consecutive (row block, k-stage) units each CTA walks (the last may have fewer)
  int stages;         // ring depth, 2..kMaxTmaStages
  int flags;          // bit 0 (TMA_FLAG_EVICT_FIRST): L2 evict-first hint on W; bit 1 (TMA_FLAG_CLUSTER): cluster split-K
  int pad[14];        // zeros: the size to the descriptors' 64-byte alignment
};
static_assert(sizeof(Bf16GemvTmaParams) == 448, "mirror of params.rs");
constexpr int kTmaEvictFirst = 1;  // Bf16GemvTmaParams::flags bits (TMA_FLAG_* in params.rs)
constexpr int kTmaCluster = 2;
static_assert(offsetof(Bf16GemvTmaParams, x_map) == 128, "mirror of params.rs");
static_assert(offsetof(Bf16GemvTmaParams, g) == 256, "mirror of params.rs");
static_assert(offsetof(Bf16GemvTmaParams, kstages) == 376, "mirror of params.rs");
static_assert(offsetof(Bf16GemvTmaParams, flags) == 388, "mirror of params.rs");

namespace bf16_gemv {

__device__ __forceinline__ uint32_t ld_nc_u16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t ld_nc_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// Eight bf16 at p (elements k .. k+7), zero beyond k_end. kVector: one 16-byte load when the
// whole chunk is in bounds (caller guarantees 16-byte alignment); otherwise 2-byte loads.
template <bool kVector, bool kStream>
__device__ __forceinline__ Vec16 load_bf16x8(const bf16* p, int k, int k_end) {
  if (kVector && k + 8 <= k_end) return kStream ? ld_global_stream_v16(p) : ld_global_v16(p);
  Vec16 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = (k + 2 * i < k_end) ? ld_nc_u16(p + 2 * i) : 0u;
    const uint32_t hi = (k + 2 * i + 1 < k_end) ? ld_nc_u16(p + 2 * i + 1) : 0u;
    v.w[i] = lo | (hi << 16);
  }
  return v;
}

// Eight f32 at p (elements k .. k+7) as two vectors, zero beyond k_end.
template <bool kVector>
__device__ __forceinline__ void load_f32x8(const float* p, int k, int k_end, Vec16 (&v)[2]) {
  if (kVector && k + 8 <= k_end) {
    v[0] = ld_global_v16(p);
    v[1] = ld_global_v16(p + 4);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i / 4].w[i % 4] = (k + i < k_end) ? ld_nc_u32(p + i) : 0u;
}

// Two k16 MMAs over one 32-wide k step. The lane holds W[g][kb+8t .. +8] (w_lo),
// W[g+8][same] (w_hi) and x[token g][same] (xv). A dot product does not care about k order,
// so those eight k values are fed as this lane's slots {2t,2t+1,2t+8,2t+9} of two MMAs, with
// the same permutation on A and B: the sum is exactly the 32-term dot product.
__device__ __forceinline__ void mma_step(float (&acc)[4], const Vec16& w_lo, const Vec16& w_hi,
                                         const Vec16& xv) {
  const uint32_t a0[4] = {w_lo.w[0], w_hi.w[0], w_lo.w[1], w_hi.w[1]};
  const uint32_t b0[2] = {xv.w[0], xv.w[1]};
  mma_m16n8k16_bf16_f32(acc, a0, b0);
  const uint32_t a1[4] = {w_lo.w[2], w_hi.w[2], w_lo.w[3], w_hi.w[3]};
  const uint32_t b1[2] = {xv.w[2], xv.w[3]};
  mma_m16n8k16_bf16_f32(acc, a1, b1);
}

// All MMAs of one group: U k-steps x RT row tiles x NT token tiles.
template <int U, int RT, int NT>
__device__ __forceinline__ void mma_group(float (&acc)[RT][NT][4], const Vec16 (&v_w)[U][RT][2],
                                          const Vec16 (&v_x)[U][NT]) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma_step(acc[rt][nt], v_w[u][rt][0], v_w[u][rt][1], v_x[u][nt]);
}

// Live tokens up to which the fused activation of an 8-token (NT = 1) piece is formed once per
// element (silu_mul_piece_shared) rather than by every lane for its own eight elements.
constexpr int kSiluShareMax = 4;

// The activated x piece of this lane (token lane >> 2, k elements 8 (lane & 3) .. + 7 of the
// step) for an NT = 1 tile whose first m_live tokens are live, each element formed once: for each
// live token m, lane L takes element L of the token's 32 (the four words of its owner, lane
// 4m + L / 8, by shuffles), applies silu_mul_f32 and rounds it to bf16, and the owner lanes
// gather their eight results back. The same per-element math and rounding as silu_mul_vec, so
// the same bits; lanes of tokens past m_live get zeros (what silu_mul_vec makes of their zero
// pieces). A warp spends ~70 instructions per live token and step here, against ~320 for eight
// elements per lane in silu_mul_vec whatever the live count.
__device__ __forceinline__ Vec16 silu_mul_piece_shared(const Vec16& g, const Vec16& u, float limit, int m_live) {
  const int lane = threadIdx.x & 31;
  const int word = (lane & 7) >> 1, high = lane & 1;
  const int gather = 8 * (lane & 3);  // the first lane holding this lane's elements
  Vec16 out{{0u, 0u, 0u, 0u}};
#pragma unroll 1
  for (int m = 0; m < m_live; ++m) {  // warp-uniform
    const int owner = 4 * m + (lane >> 3);
    uint32_t gw[4], uw[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      gw[j] = __shfl_sync(0xffffffffu, g.w[j], owner);
      uw[j] = __shfl_sync(0xffffffffu, u.w[j], owner);
    }
    const uint32_t gp = word == 0 ? gw[0] : word == 1 ? gw[1] : word == 2 ? gw[2] : gw[3];
    const uint32_t up = word == 0 ? uw[0] : word == 1 ? uw[1] : word == 2 ? uw[2] : uw[3];
    // bf16 -> f32 as unpack_f32<bf16> does it: the element's bits in the top half.
    const float gf = __uint_as_float(high ? (gp & 0xFFFF0000u) : (gp << 16));
    const float uf = __uint_as_float(high ? (up & 0xFFFF0000u) : (up << 16));
    const bf16 y = from_f32<bf16>(silu_mul_f32(gf, uf, limit));
    const uint32_t yb = *reinterpret_cast<const unsigned short*>(&y);
    uint32_t e[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) e[i] = __shfl_sync(0xffffffffu, yb, gather + i);
    if ((lane >> 2) == m) {
#pragma unroll
      for (int j = 0; j < 4; ++j) out.w[j] = e[2 * j] | (e[2 * j + 1] << 16);
    }
  }
  return out;
}

// mma_group on x pieces formed by the fused activation of (gate, up) (kSilu): with NT = 1 and at
// most kSiluShareMax live tokens each element once (silu_mul_piece_shared), else every lane its
// own eight (silu_mul_vec). Each piece is formed right before its MMAs (forming the whole group
// first took ptxas past 128 registers, and spilled, in the direct feed's two-CTA variants);
// every accumulator sees the k steps in mma_group's order, so the sums are bit for bit
// mma_group's on the activated x.
template <int U, int RT, int NT>
__device__ __forceinline__ void mma_group_silu(float (&acc)[RT][NT][4], const Vec16 (&v_w)[U][RT][2],
                                               const Vec16 (&v_g)[U][NT], const Vec16 (&v_u)[U][NT], float limit,
                                               int m_live) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const Vec16 xa = NT == 1 && m_live <= kSiluShareMax
                           ? silu_mul_piece_shared(v_g[u][nt], v_u[u][nt], limit, m_live)
                           : silu_mul_vec<bf16>(v_g[u][nt], v_u[u][nt], limit);
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) mma_step(acc[rt][nt], v_w[u][rt][0], v_w[u][rt][1], xa);
    }
}

// What a lane's x piece is made of (template argument of the MMA kernels).
constexpr int kXPlain = 0;  // x as it is
constexpr int kXSilu = 1;   // silu_mul of the gate piece and the up piece K elements further
constexpr int kXNorm = 2;   // norm.rmsnorm's fused form of the x piece and the residual piece
constexpr int kXAddRms = 3;  // `_addrms`: r = bf16(x + residual) as it is; rrms scales the sums
// Live tokens the add+RMSNorm prologue serves (NT = 1) and warps it reduces over (kMaxThreads).
constexpr int kNormTokens = 8;
constexpr int kNormWarps = kMaxThreads / 32;

// The add+RMSNorm input of one lane (kXNorm): its tokens' residual pieces, the norm weight's
// piece (k chunk 8t) and its tokens' rrms (after the prologue).
template <int NT>
struct NormLane {
  const bf16* r[NT];
  const bf16* w;
  float rrms[NT];
  // kXAddRms: where this lane's pieces of r go (writer lanes only: CTA row block 0, row-warp 0,
  // live tokens) and its running sums of r² (row-warp 0 only: the other row warps see the same
  // pieces).
  bf16* ro[NT];
  bool writer;
  bool counts;
  float ss[NT];
};

// kXAddRms: one 8-element piece r = bf16(x + res) (norm.rmsnorm's new residual, the same
// operations), its squares added to ss in element order (counting lanes only), stored to `ro`
// (writer lanes only).
__device__ __forceinline__ Vec16 add_rms_vec(const Vec16& x, const Vec16& res, bool counts, float& ss, bool writer,
                                             bf16* ro) {
  float fx[8], fr[8];
  unpack_f32<bf16>(x, fx);
  unpack_f32<bf16>(res, fr);
#pragma unroll
  for (int j = 0; j < 8; ++j) fx[j] += fr[j];
  const Vec16 r = pack_from_f32<bf16>(fx);
  if (counts) {
    unpack_f32<bf16>(r, fx);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss = fmaf(fx[j], fx[j], ss);
  }
  if (writer) st_global_v16(ro, r);
  return r;
}

// One 8-element piece of norm.rmsnorm's fused form (rmsnorm.cu's steps, the same operations):
// r = bf16(x + res) in f32, then bf16((r · rrms) · w).
__device__ __forceinline__ Vec16 add_norm_vec(const Vec16& x, const Vec16& res, const Vec16& w, float rrms) {
  float fx[8], fr[8], fw[8];
  unpack_f32<bf16>(x, fx);
  unpack_f32<bf16>(res, fr);
  unpack_f32<bf16>(w, fw);
#pragma unroll
  for (int j = 0; j < 8; ++j) fx[j] += fr[j];
  const Vec16 r = pack_from_f32<bf16>(fx);
  unpack_f32<bf16>(r, fx);
#pragma unroll
  for (int j = 0; j < 8; ++j) fx[j] = (fx[j] * rrms) * fw[j];
  return pack_from_f32<bf16>(fx);
}

// mma_group on x pieces formed by add_norm_vec (kXNorm): each piece right before its MMAs.
template <int U, int RT, int NT>
__device__ __forceinline__ void mma_group_norm(float (&acc)[RT][NT][4], const Vec16 (&v_w)[U][RT][2],
                                               const Vec16 (&v_x)[U][NT], const Vec16 (&v_r)[U][NT],
                                               const Vec16 (&v_n)[U], const float (&rrms)[NT]) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const Vec16 xa = add_norm_vec(v_x[u][nt], v_r[u][nt], v_n[u], rrms[nt]);
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) mma_step(acc[rt][nt], v_w[u][rt][0], v_w[u][rt][1], xa);
    }
}

// The add+RMSNorm prologue (kXNorm; after the PDL wait, every thread of the CTA): rrms of each
// live token (<= kNormTokens) from its whole rows of x and the residual, into s_rrms; CTA (0, 0)
// also stores the rounded sums r to residual_out. Thread i owns the 16-byte vectors i + j *
// blockDim.x of a row (four loads of each row in flight), sums r² with an fmaf chain, then the
// warps' sums (butterflies) are added in warp order: the same bits in every CTA. IEEE division
// and addition, rsqrtf, as rmsnorm.cu (its summation tree differs: rrms within its oracle's bound).
__device__ __forceinline__ void add_norm_prologue(const Bf16GemvParams& p, const Bf16GemvNormParams& q,
                                                  float* s_rrms) {
  __shared__ float s_red[kNormTokens][kNormWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nvec = p.k / 8;
  const bool writer = blockIdx.x == 0 && blockIdx.y == 0;
  const int m = min(p.m, kNormTokens);
  const bf16* x0 = reinterpret_cast<const bf16*>(p.x);
#pragma unroll 1
  for (int tok = 0; tok < m; ++tok) {
    const bf16* xr = x0 + (long long)tok * p.ldx;
    const bf16* rr = q.residual + (long long)tok * q.ldr;
    bf16* ro = q.residual_out + (long long)tok * q.ldro;
    float ss = 0.0f;
#pragma unroll 1
    for (int base = threadIdx.x; base < nvec; base += 4 * blockDim.x) {
      Vec16 vx[4], vr[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = base + j * blockDim.x;
        vx[j] = i < nvec ? ld_global_v16(xr + 8 * i) : Vec16{{0u, 0u, 0u, 0u}};
        vr[j] = i < nvec ? ld_global_v16(rr + 8 * i) : Vec16{{0u, 0u, 0u, 0u}};
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float fx[8], fr[8];
        unpack_f32<bf16>(vx[j], fx);
        unpack_f32<bf16>(vr[j], fr);
#pragma unroll
        for (int e = 0; e < 8; ++e) fx[e] += fr[e];
        const Vec16 r = pack_from_f32<bf16>(fx);
        const int i = base + j * blockDim.x;
        if (writer && i < nvec) st_global_v16(ro + 8 * i, r);
        unpack_f32<bf16>(r, fx);
#pragma unroll
        for (int e = 0; e < 8; ++e) ss = fmaf(fx[e], fx[e], ss);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) s_red[tok][warp] = ss;
  }
  __syncthreads();
  if (threadIdx.x < m) {
    float ss = 0.0f;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) ss += s_red[threadIdx.x][w];
    s_rrms[threadIdx.x] = rsqrtf(ss / static_cast<float>(p.k) + q.eps);
  }
  __syncthreads();
}

__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

// The `_rmsx` prologue (after the PDL wait): rrms of each live token (<= kNormTokens) from its
// sum_sq row into s_scale, warp w taking tokens w, w + warps, ... (GemvRmsEpi's fixed order, the
// same bits in every CTA and config). Read only after the CTA barrier before the epilogue.
__device__ __forceinline__ void rms_scale_prologue(const Bf16GemvParams& p, const GemvRmsEpi& e, float* s_scale) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int m = min(p.m, kNormTokens);
  for (int tok = warp; tok < m; tok += warps) {
    const float* row = e.sum_sq + (long long)tok * e.lds;
    float ss = 0.0f;
#pragma unroll 8
    for (int gi = lane; gi < e.groups; gi += 32) ss += row[gi];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) s_scale[tok] = rsqrtf(ss / static_cast<float>(p.k) + e.eps);
  }
}

// bias[row] as f32 (the bias is f32 or bf16, kBiasF32; the caller checks it is present).
__device__ __forceinline__ float bias_at(const Bf16GemvParams& p, int row) {
  return (p.flags & kBiasF32) ? reinterpret_cast<const float*>(p.bias)[row]
                              : to_f32<bf16>(reinterpret_cast<const bf16*>(p.bias)[row]);
}

template <typename TOut>
__device__ __forceinline__ void store_out(const Bf16GemvParams& p, int row, int tok, float v) {
  if (p.bias != nullptr) v += bias_at(p, row);
  reinterpret_cast<TOut*>(p.y)[(long long)tok * p.ldy + row] = from_f32<TOut>(v);
}

// kYSilu: the activation of gate row `row` (row % 16 < 8) and its up row `row + 8`, sums vg and
// vu, each finished as store_out would (bias in f32, one rounding to TOut), stored at y column
// (row / 16) * 8 + row % 16.
template <typename TOut>
__device__ __forceinline__ void store_act(const Bf16GemvParams& p, int row, int tok, float vg, float vu) {
  if (p.bias != nullptr) {
    vg += bias_at(p, row);
    vu += bias_at(p, row + 8);
  }
  const float g = to_f32<TOut>(from_f32<TOut>(vg));
  const float u = to_f32<TOut>(from_f32<TOut>(vu));
  const int col = (row >> 4) * 8 + (row & 15);
  reinterpret_cast<TOut*>(p.y)[(long long)tok * p.ldy + col] = from_f32<TOut>(silu_mul_f32(g, u, p.y_limit));
}

// The rope epilogue (GemvRopeEpi) of W rows `row` (row % 16 < 8) and `row + 8` for token `tok`:
// sums va, vb finished as store_out would (bias in f32, one rounding to bf16), then stored,
// rotated and appended as the struct's comment says. One thread per (pair, token).
__device__ __forceinline__ void store_rope(const Bf16GemvParams& p, const GemvRopeEpi& e, int row, int tok, float va,
                                           float vb) {
  if (p.bias != nullptr) {
    va += bias_at(p, row);
    vb += bias_at(p, row + 8);
  }
  float a = to_f32<bf16>(from_f32<bf16>(va));
  float b = to_f32<bf16>(from_f32<bf16>(vb));
  const int d = e.head_dim;
  const int head = row / d;
  const int in_head = row - head * d;
  const int f = (in_head >> 4) * 8 + (in_head & 7);  // the pair
  const int da = e.neox ? f : 2 * f;
  const int db = e.neox ? f + d / 2 : 2 * f + 1;
  bf16* yrow = reinterpret_cast<bf16*>(p.y) + (long long)tok * p.ldy + (long long)head * d;
  // One reporter per token: the first pair of the first k head.
  const bool reporter = head == e.heads && f == 0;
  const bool kv = head >= e.heads;
  // The unrotated k and v go to y as the plain GEMV stores them.
  if (kv) {
    yrow[da] = from_f32<bf16>(a);
    yrow[db] = from_f32<bf16>(b);
  }
  if (head < e.heads + e.kv_heads) {
    const int pos = __ldg(e.positions + tok);
    if (pos >= 0 && pos < e.max_position) {
      float c, sn;
      rope_cos_sin(e.cos_sin, d, e.inv_freq[f], e.scale, pos, f, c, sn);
      rope_rotate(a, b, c, sn);
    } else if (reporter) {
      atomicOr(e.error, kRopeFaultPosition);
    }
  }
  if (!kv) {
    yrow[da] = from_f32<bf16>(a);
    yrow[db] = from_f32<bf16>(b);
    return;
  }
  // kv_append's slot of the new token (decode: q_len 1, cache position len - 1).
  const int len = __ldg(e.seq_lens + tok);
  if (len < 0 || (long long)len > (long long)e.max_pages * e.page_size) {
    if (reporter) atomicOr(e.error, kRopeFaultLength);
    return;
  }
  if (len < 1) {
    if (reporter) atomicOr(e.error, kRopeFaultQueryLayout);
    return;
  }
  const int pos = len - 1;
  const int page = __ldg(e.page_table + (long long)tok * e.pt_stride + pos / e.page_size);
  if (page < 0 || page >= e.num_pages) {
    if (reporter) atomicOr(e.error, kRopeFaultPageId);
    return;
  }
  const bool is_k = head < e.heads + e.kv_heads;
  const int g = is_k ? head - e.heads : head - e.heads - e.kv_heads;
  bf16* dst = (is_k ? e.k_cache : e.v_cache) +
              (((long long)page * e.page_size + pos % e.page_size) * e.kv_heads + g) * d;
  dst[da] = from_f32<bf16>(a);
  dst[db] = from_f32<bf16>(b);
}

// s_part: [warps_k][mt][rows_cta + kRowPad] f32, every warp's partial tile of this CTA.
// Sums it over warps (in warp order), then stores y (ksplit == 1) or this split's partials.
// `rope` (the `_rope` entry points, ksplit == 1): the pairs (r, r + 8) of each 16-row tile go
// through store_rope instead. `res` (`_resrms`, ksplit == 1, bf16 y): the residual add and the
// 16-row sums of squares (GemvRmsEpi). `scale` (`_rmsx`, `_addrms`, ksplit == 1): each token's
// rrms (s_rrms: rms_scale_prologue's, or the `_addrms` CTA's own) multiplies its sums before the
// bias (and before the rope epilogue's rounding).
template <typename TOut>
__device__ __forceinline__ void finish_tile(const Bf16GemvParams& p, const float* s_part,
                                            int rows_cta, int mt, int m0, const GemvRopeEpi* rope = nullptr,
                                            const GemvRmsEpi* res = nullptr, const float* scale = nullptr) {
  const int stride_r = rows_cta + kRowPad;
  const int row_base = blockIdx.x * rows_cta;
  const int mt_live = min(mt, p.m - m0);
  if (res != nullptr) {
    // Warp-uniform loop: 16 consecutive lanes hold the 16 rows of one group of one token
    // (rows_cta % 16 == 0 and each warp starts at a multiple of 32), lane % 16 == row % 16.
    const int total = rows_cta * mt_live;
    const int lane = threadIdx.x & 31;
    for (int base = threadIdx.x - lane; base < total; base += blockDim.x) {
      const int idx = base + lane;
      const int r = idx % rows_cta;
      const int tok = idx / rows_cta;
      const int row = row_base + r;
      const bool live = idx < total && row < p.n;
      float sq = 0.0f;
      if (live) {
        float v = 0.0f;
        for (int kw = 0; kw < p.warps_k; ++kw) v += s_part[(kw * mt + tok) * stride_r + r];
        if (p.bias != nullptr) v += bias_at(p, row);
        const float yv = to_f32<bf16>(from_f32<bf16>(v));
        const float rv = to_f32<bf16>(from_f32<bf16>(
            yv + to_f32<bf16>(res->residual[(long long)(m0 + tok) * res->ldr + row])));
        reinterpret_cast<bf16*>(p.y)[(long long)(m0 + tok) * p.ldy + row] = from_f32<bf16>(rv);
        sq = rv * rv;
      }
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
      if (live && (r & 15) == 0) res->sum_sq[(long long)(m0 + tok) * res->lds + row / 16] = sq;
    }
    return;
  }
  if (rope != nullptr) {
    const int pairs = rows_cta / 2;
    for (int idx = threadIdx.x; idx < pairs * mt_live; idx += blockDim.x) {
      const int pr = idx % pairs;
      const int tok = idx / pairs;
      const int r = (pr >> 3) * 16 + (pr & 7);
      float va = 0.0f, vb = 0.0f;
      for (int kw = 0; kw < p.warps_k; ++kw) {
        va += s_part[(kw * mt + tok) * stride_r + r];
        vb += s_part[(kw * mt + tok) * stride_r + r + 8];
      }
      if (scale != nullptr) {
        va *= scale[tok];
        vb *= scale[tok];
      }
      const int row = row_base + r;
      if (row < p.n) store_rope(p, *rope, row, m0 + tok, va, vb);
    }
    return;
  }
  if ((p.flags & kYSilu) && p.ksplit == 1) {
    // Pairs (gate row r, up row r + 8) of each 16-row tile (rows_cta is a multiple of 16).
    const int pairs = rows_cta / 2;
    for (int idx = threadIdx.x; idx < pairs * mt_live; idx += blockDim.x) {
      const int pr = idx % pairs;
      const int tok = idx / pairs;
      const int r = (pr >> 3) * 16 + (pr & 7);
      float vg = 0.0f, vu = 0.0f;
      for (int kw = 0; kw < p.warps_k; ++kw) {
        vg += s_part[(kw * mt + tok) * stride_r + r];
        vu += s_part[(kw * mt + tok) * stride_r + r + 8];
      }
      if (scale != nullptr) {
        vg *= scale[tok];
        vu *= scale[tok];
      }
      const int row = row_base + r;
      if (row < p.n) store_act<TOut>(p, row, m0 + tok, vg, vu);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < rows_cta * mt_live; idx += blockDim.x) {
    const int r = idx % rows_cta;
    const int tok = idx / rows_cta;
    float v = 0.0f;
    for (int kw = 0; kw < p.warps_k; ++kw) v += s_part[(kw * mt + tok) * stride_r + r];
    if (scale != nullptr) v *= scale[tok];
    const int row = row_base + r;
    if (p.ksplit == 1) {
      if (row < p.n) store_out<TOut>(p, row, m0 + tok, v);
    } else {
      p.partials[((long long)blockIdx.y * p.m_pad + m0 + tok) * p.n_pad + row] = v;
    }
  }
}

// Split-K merge: the last CTA of a row block to arrive sums the ksplit partials in split order.
template <typename TOut>
__device__ __forceinline__ void merge_splits(const Bf16GemvParams& p, int rows_cta) {
  __shared__ int s_is_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int prev = arrive_tagged(&p.counters[blockIdx.x], unsigned(p.ksplit));
    s_is_last = (prev == unsigned(p.ksplit - 1));
  }
  __syncthreads();
  if (!s_is_last) return;
  __threadfence();
  const int row_base = blockIdx.x * rows_cta;
  if (p.flags & kYSilu) {
    const int pairs = rows_cta / 2;
    for (int idx = threadIdx.x; idx < pairs * p.m; idx += blockDim.x) {
      const int pr = idx % pairs;
      const int tok = idx / pairs;
      const int row = row_base + (pr >> 3) * 16 + (pr & 7);
      if (row >= p.n) continue;
      float vg = 0.0f, vu = 0.0f;
      for (int ks = 0; ks < p.ksplit; ++ks) {
        vg += __ldcg(&p.partials[((long long)ks * p.m_pad + tok) * p.n_pad + row]);
        vu += __ldcg(&p.partials[((long long)ks * p.m_pad + tok) * p.n_pad + row + 8]);
      }
      store_act<TOut>(p, row, tok, vg, vu);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < rows_cta * p.m; idx += blockDim.x) {
    const int r = idx % rows_cta;
    const int tok = idx / rows_cta;
    const int row = row_base + r;
    if (row >= p.n) continue;
    float v = 0.0f;
    for (int ks = 0; ks < p.ksplit; ++ks)
      v += __ldcg(&p.partials[((long long)ks * p.m_pad + tok) * p.n_pad + row]);
    store_out<TOut>(p, row, tok, v);
  }
}

// One lane's operand pointers: W rows (rt*16 + h*8 + g) of the warp's tile and x rows
// (tokens nt*8 + g), each already offset to the lane's k chunk 8t. Rows past N are clamped to
// N-1 (valid memory; their results are never stored); tokens past M read nothing (xok false).
template <int NT, int RT>
struct MmaOperands {
  const bf16* w[RT][2];
  const bf16* x[NT];
  bool xok[NT];
  __device__ __forceinline__ MmaOperands(const Bf16GemvParams& p, int row0, int g, int t) {
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = min(row0 + rt * 16 + h * 8 + g, p.n - 1);
        w[rt][h] = p.w + (long long)row * p.ldw + 8 * t;
      }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int tok = nt * 8 + g;
      xok[nt] = tok < p.m;
      x[nt] = reinterpret_cast<const bf16*>(p.x) + (long long)min(tok, p.m - 1) * p.ldx + 8 * t;
    }
  }
};

// K range [k_tail, k_end) one 32-wide step at a time, steps round-robin over `nwarps` warps
// (this is warp `wk`), bounds-checked loads (the last step may be partial). kSilu: x's piece is
// silu_mul_vec of the gate piece and the up piece `x_up` elements further (zeros past k_end on
// both give 0).
// kXNorm: add_norm_vec of the x piece, the residual piece and the norm weight's piece (zeros past
// k_end give 0).
template <int NT, int RT, bool kAligned, int kX>
__device__ __forceinline__ void mma_tail(float (&acc)[RT][NT][4], const MmaOperands<NT, RT>& o, int k_tail,
                                         int k_end, int wk, int nwarps, int x_up, float act_limit,
                                         NormLane<NT>& nl) {
  constexpr bool kSilu = kX == kXSilu;
  const int t = (threadIdx.x & 31) & 3;
  const int tail_steps = (k_end - k_tail + kMmaStepK - 1) / kMmaStepK;
  for (int s = wk; s < tail_steps; s += nwarps) {
    const int off = k_tail + s * kMmaStepK;
    const int kl = off + 8 * t;  // this lane's first k
    Vec16 v_w[RT][2];
    Vec16 v_x[NT];
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) v_w[rt][h] = load_bf16x8<kAligned, true>(o.w[rt][h] + off, kl, k_end);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      v_x[nt] = o.xok[nt] ? load_bf16x8<kAligned, false>(o.x[nt] + off, kl, k_end) : Vec16{{0u, 0u, 0u, 0u}};
      if constexpr (kSilu) {
        const Vec16 up = o.xok[nt] ? load_bf16x8<kAligned, false>(o.x[nt] + x_up + off, kl, k_end)
                                   : Vec16{{0u, 0u, 0u, 0u}};
        v_x[nt] = silu_mul_vec<bf16>(v_x[nt], up, act_limit);
      }
      if constexpr (kX == kXNorm) {
        const Vec16 res = o.xok[nt] ? load_bf16x8<kAligned, false>(nl.r[nt] + off, kl, k_end)
                                    : Vec16{{0u, 0u, 0u, 0u}};
        const Vec16 wn = load_bf16x8<kAligned, false>(nl.w + off, kl, k_end);
        v_x[nt] = add_norm_vec(v_x[nt], res, wn, nl.rrms[nt]);
      }
      if constexpr (kX == kXAddRms) {
        // K % 8 == 0 (aligned): a piece is whole or wholly past k_end (then zeros, not stored).
        const Vec16 res = o.xok[nt] ? load_bf16x8<kAligned, false>(nl.r[nt] + off, kl, k_end)
                                    : Vec16{{0u, 0u, 0u, 0u}};
        v_x[nt] = add_rms_vec(v_x[nt], res, nl.counts, nl.ss[nt], nl.writer && kl < k_end, nl.ro[nt] + off);
      }
    }
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma_step(acc[rt][nt], v_w[rt][0], v_w[rt][1], v_x[nt]);
  }
}

// Epilogue of the MMA kernels (call after a __syncthreads that frees s_part's memory): every
// warp stores its fragments into the partial tile [warps_k][MT][rows_cta + kRowPad] at row
// offset r0, then the CTA sums over warps and stores y or this split's partials.
template <int NT, int RT, typename TOut>
__device__ __forceinline__ void mma_finish(const Bf16GemvParams& p, const float (&acc)[RT][NT][4], float* s_part,
                                           int wk, int r0, int rows_cta, const GemvRopeEpi* rope = nullptr,
                                           const GemvRmsEpi* res = nullptr, const float* scale = nullptr) {
  constexpr int MT = 8 * NT;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  // Fragment c[0..1] = (row g, tokens 2t, 2t+1), c[2..3] = (row g+8, same tokens).
  const int stride_r = rows_cta + kRowPad;
  if (wk < p.warps_k) {
    float* s_mine = s_part + wk * MT * stride_r;
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int r = r0 + rt * 16 + g;
        const int tok = nt * 8 + 2 * t;
        s_mine[tok * stride_r + r] = acc[rt][nt][0];
        s_mine[(tok + 1) * stride_r + r] = acc[rt][nt][1];
        s_mine[tok * stride_r + r + 8] = acc[rt][nt][2];
        s_mine[(tok + 1) * stride_r + r + 8] = acc[rt][nt][3];
      }
  }
  __syncthreads();
  finish_tile<TOut>(p, s_part, rows_cta, MT, 0, rope, res, scale);
  if (p.ksplit > 1) merge_splits<TOut>(p, rows_cta);
}

// ---- BF16 x: tensor-core swap-AB GEMV. ----
// A warp owns RT 16-row tiles and all 8*NT tokens; it walks its CTA's K range in groups of
// U 32-wide steps, interleaved with the other warps_k warps of its row group so that the
// CTA streams one contiguous stretch of each W row at a time.
// Aligned variants stage W through a kStages-deep cp.async ring private to each warp,
// keeping kStages-1 groups in flight (ptxas cannot sink these copies next to their MMAs the
// way it does with register loads). The copies walk each W row contiguously (a warp copy
// instruction covers 512/(64U) rows x 64U bytes, like a streaming read), and the lanes then
// read their fragment pieces back from a swizzled tile. x pieces are copied by the lane that
// consumes them. Unaligned variants load through registers with 2-byte loads.
//   ring stage = W tile [ROWS_W rows][4U chunks of 16 B] (chunk c of row r stored at
//                c ^ ((r & 1) << 2): conflict-free for both the row-wise copies and the
//                fragment reads of lanes g, g+1)  then  x [U steps][NT][32 lanes] 16 B
//                (kXSilu: the gate pieces, then the up pieces in the same layout; kXNorm: the
//                x pieces, the residual pieces, then the norm weight's pieces).
template <int NT, int RT, int U, int kXSets>
struct MmaRing {
  static constexpr int kRows = 16 * RT;
  static constexpr int kChunksPerRow = 4 * U;                  // 16-byte chunks, 32U k values
  static constexpr int kWBytes = kRows * kChunksPerRow * 16;   // W tile of one stage
  static constexpr int kXPieceBytes = U * NT * 32 * 16;        // one set of x pieces (x, or gate / up)
  static constexpr int kXBytes = kXSets * kXPieceBytes;     // x pieces of one stage
  static constexpr int kGroupBytes = kWBytes + kXBytes;        // one ring stage
  static constexpr int kWCopiesPerLane = kRows * kChunksPerRow / 32;
  static_assert(U >= 2, "the swizzle flips chunk bit 2: rows of at least 8 chunks");
};

// How a warp of gemv_mma gets its W and x fragments.
enum class Feed {
  kRing,       // aligned: per-warp cp.async ring through shared memory (kStages deep)
  kDirect,     // aligned: 16-byte register loads straight from global, one group ahead
  kUnaligned,  // any alignment: 2-byte register loads
};

// kSilu (aligned feeds only): x is [M, 2K] = [gate | up]; each lane loads the gate piece of
// its k chunk and the up piece K elements further, and feeds silu_mul_vec of the two
// (b12x/activation.cuh, with `act_limit`) to the MMAs where the plain x piece goes.
// kXNorm (aligned feeds only, `nq` the entry point's parameters): each lane also loads the
// residual piece of its k chunk and the norm weight's piece, and feeds add_norm_vec of the three
// with its token's rrms (add_norm_prologue, after the PDL wait and the first x copies).
// `rope` (the `_rope` entry points): the epilogue of GemvRopeEpi instead of the plain store.
// `res` / `rms_x` (the `_resrms` / `_rmsx` entry points, ring feed): GemvRmsEpi's residual
// epilogue / rrms scale (rms_scale_prologue right after the first ring stages are issued).
template <int NT, int RT, int U, int kStages, typename TOut, Feed kFeed, int kX>
__device__ __forceinline__ void gemv_mma(const Bf16GemvParams& p, float act_limit,
                                         const Bf16GemvNormParams* nq = nullptr, const GemvRopeEpi* rope = nullptr,
                                         const GemvRmsEpi* res = nullptr, const GemvRmsEpi* rms_x = nullptr) {
  constexpr int ROWS_W = 16 * RT;
  constexpr bool kAligned = kFeed != Feed::kUnaligned;
  constexpr bool kSilu = kX == kXSilu;
  constexpr bool kNorm = kX == kXNorm;
  constexpr bool kAddRms = kX == kXAddRms;
  using Ring = MmaRing<NT, RT, U, kSilu || kAddRms ? 2 : kNorm ? 3 : 1>;
  static_assert(!kAddRms || (kFeed == Feed::kRing && NT * 8 <= kNormTokens), "the `_addrms` x load: ring, NT = 1");
  static_assert(!kNorm || (kAligned && NT * 8 <= kNormTokens), "the fused add+RMSNorm: aligned, NT = 1");
  static_assert(kFeed != Feed::kRing || kStages >= 2, "the cp.async ring needs at least two stages");
  static_assert(!kSilu || kAligned, "the fused activation needs 16-byte vectors of x");
  // Elements from a gate piece to its up piece (kSilu).
  const int x_up = kSilu ? p.k : 0;
  // 128-byte aligned dynamic shared memory (after the 16-byte static merge flag): with the
  // default 16-byte alignment the ring starts at byte 16 and the LM-head GEMV runs 14% slower
  // on the H200 (474 vs 415 µs, same SASS otherwise).
  extern __shared__ __align__(128) unsigned char s_raw[];
  float* s_part = reinterpret_cast<float*>(s_raw);  // [warps_k][MT][rows_cta + kRowPad], after the loop
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int wk = warp % p.warps_k;
  const int wr = warp / p.warps_k;
  const int rows_cta = ROWS_W * p.warps_r;
  const int row0 = blockIdx.x * rows_cta + wr * ROWS_W;
  const int k_begin = blockIdx.y * p.k_per_split;
  const int k_end = min(p.k, k_begin + p.k_per_split);

  const MmaOperands<NT, RT> o(p, row0, g, t);
  // kXNorm: this lane's residual and norm-weight pieces; rrms after the prologue.
  __shared__ float s_rrms[kNormTokens];
  NormLane<NT> nl;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    nl.r[nt] = nullptr;
    nl.rrms[nt] = 0.0f;
    nl.ro[nt] = nullptr;
    nl.ss[nt] = 0.0f;
  }
  nl.w = nullptr;
  nl.writer = false;
  nl.counts = false;
  // kXAddRms: the sums of squares of each row-warp-0 warp, [warps_k][token], then the rrms.
  __shared__ float s_ss[kAddRms ? kNormWarps : 1][kAddRms ? kNormTokens : 1];
  if constexpr (kAddRms) {
    nl.counts = wr == 0;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int tok = min(nt * 8 + g, p.m - 1);
      nl.r[nt] = nq->residual + (long long)tok * nq->ldr + 8 * t;
      nl.ro[nt] = nq->residual_out + (long long)tok * nq->ldro + 8 * t;
    }
    // ksplit == 1 (host): blockIdx.y == 0. Only live tokens' lanes write.
    nl.writer = blockIdx.x == 0 && wr == 0 && g < p.m;
  }
  if constexpr (kNorm) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      nl.r[nt] = nq->residual + (long long)min(nt * 8 + g, p.m - 1) * nq->ldr + 8 * t;
    nl.w = nq->norm_w + 8 * t;
  }
  // Runs the prologue (every thread) and picks up this lane's tokens' rrms.
  auto norm_prologue = [&]() {
    if constexpr (kNorm) {
      add_norm_prologue(p, *nq, s_rrms);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) nl.rrms[nt] = o.xok[nt] ? s_rrms[nt * 8 + g] : 0.0f;
    }
  };
  // PDL launch (flags): the aligned feeds below load their first W (the ring's first
  // kStages-1 stages, the direct feed's first register group) before they wait (pdl_wait) for
  // the kernel before them, x and everything else after, and only then let the next PDL kernel
  // launch (so only the kernel right before this one can still be running while W is read).
  // The unaligned feed waits first. Plain launches: no wait, the ring's old issue order.
  const bool pdl = p.flags & kPdl;
  float acc[RT][NT][4];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[rt][nt][i] = 0.0f;

  const int span = max(k_end - k_begin, 0);
  const int groups = span / (kMmaStepK * U);
  if constexpr (kFeed == Feed::kDirect) {
    // Group gi + warps_k is loaded into the registers group gi's MMAs just read. The loop is
    // kept rolled, so the loads issue right after the MMAs and stay in flight across the
    // back-edge (ptxas cannot sink them next to their uses, which would serialize latency).
    // W streams past L1 (no_allocate); x is re-read by every warp of the SM and stays in L1.
    Vec16 v_w[U][RT][2];
    Vec16 v_x[U][NT];
    // kSilu: the group's gate and up pieces in flight instead of x (mma_group_silu forms x);
    // kNorm: x, residual (v_u) and norm-weight pieces (mma_group_norm forms x).
    Vec16 v_g[kSilu || kNorm ? U : 1][NT], v_u[kSilu || kNorm ? U : 1][NT];
    Vec16 v_n[kNorm ? U : 1];
    auto load_w = [&](int gi) {
      const int k0 = k_begin + gi * kMmaStepK * U;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int rt = 0; rt < RT; ++rt)
#pragma unroll
          for (int h = 0; h < 2; ++h) v_w[u][rt][h] = ld_global_stream_v16(o.w[rt][h] + k0 + u * kMmaStepK);
    };
    auto load_x = [&](int gi) {
      const int k0 = k_begin + gi * kMmaStepK * U;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if constexpr (kSilu) {
            v_g[u][nt] = o.xok[nt] ? ld_global_v16(o.x[nt] + k0 + u * kMmaStepK) : Vec16{{0u, 0u, 0u, 0u}};
            v_u[u][nt] = o.xok[nt] ? ld_global_v16(o.x[nt] + x_up + k0 + u * kMmaStepK) : Vec16{{0u, 0u, 0u, 0u}};
          } else if constexpr (kNorm) {
            v_g[u][nt] = o.xok[nt] ? ld_global_v16(o.x[nt] + k0 + u * kMmaStepK) : Vec16{{0u, 0u, 0u, 0u}};
            v_u[u][nt] = o.xok[nt] ? ld_global_v16(nl.r[nt] + k0 + u * kMmaStepK) : Vec16{{0u, 0u, 0u, 0u}};
            if (nt == 0) v_n[u] = ld_global_v16(nl.w + k0 + u * kMmaStepK);
          } else {
            v_x[u][nt] = o.xok[nt] ? ld_global_v16(o.x[nt] + k0 + u * kMmaStepK) : Vec16{{0u, 0u, 0u, 0u}};
          }
        }
    };
    // PDL: the first group's W goes into its registers before the wait, its x after.
    if (wk < groups) load_w(wk);
    if (pdl) pdl_wait_then_release();
    if (wk < groups) load_x(wk);
    norm_prologue();
#pragma unroll 1
    for (int gi = wk; gi < groups; gi += p.warps_k) {
      if constexpr (kSilu) {
        mma_group_silu<U, RT, NT>(acc, v_w, v_g, v_u, act_limit, min(p.m, 8 * NT));
      } else if constexpr (kNorm) {
        mma_group_norm<U, RT, NT>(acc, v_w, v_g, v_u, v_n, nl.rrms);
      } else {
        mma_group<U, RT, NT>(acc, v_w, v_x);
      }
      if (gi + p.warps_k < groups) {
        load_w(gi + p.warps_k);
        load_x(gi + p.warps_k);
      }
    }
  } else if constexpr (kFeed == Feed::kRing) {
    unsigned char* s_ring = s_raw + warp * kStages * Ring::kGroupBytes;
    const uint32_t s_ring_addr = smem_addr(s_ring);
    // This lane's row-contiguous W copies: source pointers (+ k0 per group) and tile offsets.
    const bf16* r_wc[Ring::kWCopiesPerLane];
    uint32_t r_wc_off[Ring::kWCopiesPerLane];
#pragma unroll
    for (int i = 0; i < Ring::kWCopiesPerLane; ++i) {
      const int idx = i * 32 + lane;
      const int r = idx / Ring::kChunksPerRow;
      const int c = idx % Ring::kChunksPerRow;
      r_wc[i] = p.w + (long long)min(row0 + r, p.n - 1) * p.ldw + c * 8;
      r_wc_off[i] = (r * Ring::kChunksPerRow + (c ^ ((r & 1) << 2))) * 16;
    }
    // The copies of group gi's W (issue_w) and x (issue_x) into ring stage `stage`; nothing
    // past the last group.
    auto issue_w = [&](int gi, int stage) {
      if (gi < groups) {
        const int k0 = k_begin + gi * kMmaStepK * U;
        const uint32_t s_stage = s_ring_addr + stage * Ring::kGroupBytes;
#pragma unroll
        for (int i = 0; i < Ring::kWCopiesPerLane; ++i) cp_async_cg_16(s_stage + r_wc_off[i], r_wc[i] + k0);
      }
    };
    auto issue_x = [&](int gi, int stage) {
      if (gi < groups) {
        const int k0 = k_begin + gi * kMmaStepK * U;
        const uint32_t s_stage = s_ring_addr + stage * Ring::kGroupBytes;
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            cp_async_ca_16_zfill(s_stage + Ring::kWBytes + ((u * NT + nt) * 32 + lane) * 16,
                                 o.x[nt] + k0 + u * kMmaStepK, o.xok[nt]);
            if constexpr (kSilu)
              cp_async_ca_16_zfill(s_stage + Ring::kWBytes + Ring::kXPieceBytes + ((u * NT + nt) * 32 + lane) * 16,
                                   o.x[nt] + x_up + k0 + u * kMmaStepK, o.xok[nt]);
            if constexpr (kNorm || kAddRms)
              cp_async_ca_16_zfill(s_stage + Ring::kWBytes + Ring::kXPieceBytes + ((u * NT + nt) * 32 + lane) * 16,
                                   nl.r[nt] + k0 + u * kMmaStepK, o.xok[nt]);
            if constexpr (kNorm) {
              cp_async_ca_16_zfill(s_stage + Ring::kWBytes + 2 * Ring::kXPieceBytes + ((u * NT + nt) * 32 + lane) * 16,
                                   nl.w + k0 + u * kMmaStepK, true);
            }
          }
      }
    };
    // Both copies of group gi, then a commit either way, so wait_group counts stay uniform.
    auto issue = [&](int gi, int stage) {
      issue_w(gi, stage);
      issue_x(gi, stage);
      cp_async_commit();
    };
    if (pdl) {
      // The first kStages-1 stages' W copies go out before the wait, then each stage's x copies
      // and a commit. The first committed group thus holds the W of every first stage with the
      // x of stage 0, and group s >= 1 only x of stage s: waiting for a group still implies its
      // stage's W has landed (earlier groups complete first).
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) issue_w(wk + s * p.warps_k, s);
      pdl_wait_then_release();
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        issue_x(wk + s * p.warps_k, s);
        cp_async_commit();
      }
    } else {
      // Plain launches keep one committed group per stage (W and x together).
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) issue(wk + s * p.warps_k, s);
    }
    // kNorm: rrms while the first stages' copies fly; `_rmsx`: rrms from the partial sums.
    norm_prologue();
    if (rms_x != nullptr) rms_scale_prologue(p, *rms_x, s_rrms);
    if (res != nullptr) {
      // The residual rows the epilogue adds (written by an earlier kernel, so after the wait):
      // into L1 now, off the CTA's tail. One prefetch per 128-byte line and token.
      const int lines = (rows_cta * 2 + 127) / 128;
      for (int i = threadIdx.x; i < min(p.m, kNormTokens) * lines; i += blockDim.x) {
        const int row = min(blockIdx.x * rows_cta + (i % lines) * 64, p.n - 1);
        prefetch_l1(res->residual + (long long)(i / lines) * res->ldr + row);
      }
    }
    int stage = 0;
    for (int gi = wk; gi < groups; gi += p.warps_k) {
      cp_async_wait<kStages - 2>();
      // Other lanes copied parts of this tile; this also orders last iteration's reads of the
      // stage refilled below before the refill.
      __syncwarp();
      const unsigned char* s_stage = s_ring + stage * Ring::kGroupBytes;
      Vec16 v_w[U][RT][2];
      Vec16 v_x[U][NT];
      // kSilu: the up pieces (v_x holds the gate pieces). kNorm reads its three piece sets from the
      // stage right before each k step's MMAs instead (all U of them at once took ptxas to 255
      // registers and spills in the u8 variant); this stage is refilled only next iteration.
      Vec16 v_u[kSilu ? U : 1][NT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int rt = 0; rt < RT; ++rt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = rt * 16 + h * 8 + g;
            const int c = (4 * u + t) ^ ((g & 1) << 2);
            v_w[u][rt][h] = *reinterpret_cast<const Vec16*>(s_stage + (r * Ring::kChunksPerRow + c) * 16);
          }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if constexpr (!kNorm && !kAddRms)
            v_x[u][nt] = *reinterpret_cast<const Vec16*>(s_stage + Ring::kWBytes + ((u * NT + nt) * 32 + lane) * 16);
          if constexpr (kSilu)
            v_u[u][nt] = *reinterpret_cast<const Vec16*>(s_stage + Ring::kWBytes + Ring::kXPieceBytes +
                                                         ((u * NT + nt) * 32 + lane) * 16);
        }
      }
      // Refill the stage consumed in the previous iteration.
      issue(gi + (kStages - 1) * p.warps_k, stage == 0 ? kStages - 1 : stage - 1);
      if constexpr (kSilu) {
        mma_group_silu<U, RT, NT>(acc, v_w, v_x, v_u, act_limit, min(p.m, 8 * NT));
      } else if constexpr (kNorm) {
        const unsigned char* s_x = s_stage + Ring::kWBytes + lane * 16;
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int at = (u * NT + nt) * 32 * 16;
            const Vec16 xa = add_norm_vec(*reinterpret_cast<const Vec16*>(s_x + at),
                                          *reinterpret_cast<const Vec16*>(s_x + Ring::kXPieceBytes + at),
                                          *reinterpret_cast<const Vec16*>(s_x + 2 * Ring::kXPieceBytes + at),
                                          nl.rrms[nt]);
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) mma_step(acc[rt][nt], v_w[u][rt][0], v_w[u][rt][1], xa);
          }
      } else if constexpr (kAddRms) {
        // Like kNorm: each k step's two piece sets read right before its MMAs.
        const unsigned char* s_x = s_stage + Ring::kWBytes + lane * 16;
        const int k0 = k_begin + gi * kMmaStepK * U;
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int at = (u * NT + nt) * 32 * 16;
            const Vec16 xa = add_rms_vec(*reinterpret_cast<const Vec16*>(s_x + at),
                                         *reinterpret_cast<const Vec16*>(s_x + Ring::kXPieceBytes + at), nl.counts,
                                         nl.ss[nt], nl.writer, nl.ro[nt] + k0 + u * kMmaStepK);
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) mma_step(acc[rt][nt], v_w[u][rt][0], v_w[u][rt][1], xa);
          }
      } else {
        mma_group<U, RT, NT>(acc, v_w, v_x);
      }
      stage = stage == kStages - 1 ? 0 : stage + 1;
    }
    cp_async_wait<0>();
  } else {
    if (pdl) {
      pdl_wait_then_release();
    }
    for (int gi = wk; gi < groups; gi += p.warps_k) {
      const int k0 = k_begin + gi * kMmaStepK * U;
      Vec16 v_w[U][RT][2];
      Vec16 v_x[U][NT];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int rt = 0; rt < RT; ++rt)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            v_w[u][rt][h] = load_bf16x8<false, true>(o.w[rt][h] + k0 + u * kMmaStepK, 0, 8);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          v_x[u][nt] = load_bf16x8<false, false>(o.x[nt] + k0 + u * kMmaStepK, 0, 8);
#pragma unroll
          for (int i = 0; i < 4; ++i) v_x[u][nt].w[i] = o.xok[nt] ? v_x[u][nt].w[i] : 0u;
        }
      mma_group<U, RT, NT>(acc, v_w, v_x);
    }
  }
  // Tail (< U steps, the last may be partial): one 32-wide step per warp, bounds-checked loads.
  mma_tail<NT, RT, kAligned, kX>(acc, o, k_begin + groups * kMmaStepK * U, k_end, wk, p.warps_k, x_up, act_limit, nl);
  if constexpr (kAddRms) {
    // This warp's Σ r² per token: the 4 lanes of a token (t) in a fixed butterfly; row-warp-0
    // warps publish theirs (every warp takes part in the shuffles).
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float ss = nl.ss[nt];
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);
      ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      if (wr == 0 && t == 0) s_ss[wk][nt * 8 + g] = ss;
    }
  }
  // The partial tile overlays the ring: every warp must be done reading its ring first.
  __syncthreads();
  if constexpr (kAddRms) {
    // rrms per live token: the warps' sums added in warp order (the same bits in every CTA),
    // published to finish_tile by mma_finish's barrier.
    if (threadIdx.x < min(p.m, kNormTokens)) {
      float ss = 0.0f;
      for (int w = 0; w < p.warps_k; ++w) ss += s_ss[w][threadIdx.x];
      s_rrms[threadIdx.x] = rsqrtf(ss / static_cast<float>(p.k) + nq->eps);
    }
  }
  mma_finish<NT, RT, TOut>(p, acc, s_part, wk, wr * ROWS_W, rows_cta, rope, res,
                           rms_x != nullptr || kAddRms ? s_rrms : nullptr);
}

// ---- BF16 x: TMA-fed GEMV over a flat work list (stream-K). ----
// The work is a list of units (row block rb of ROWS = 16*RT*CW rows, k-stage ks of 64*KB k),
// row-major over (rb, ks). CTA c walks units [c*q, min((c+1)*q, units)). With q = units / SMs
// (rounded up) every CTA moves the same bytes up to one unit, whatever N and K are: one wave,
// no tail of idle SMs; with q = kstages each CTA owns one whole row block (no merges).
// Warp CW is the producer: one lane keeps `stages` ring stages of TMA boxes in flight (W with an
// optional evict-first L2 hint, x with evict-last), across row-block boundaries. Consumer warp w owns
// rows [16*RT*w, +16*RT) of every stage and reads its fragments with ldmatrix from the
// 128-byte-swizzled boxes (conflict free), then releases the stage. When a row block ends (or
// the CTA's list does) the warp flushes its accumulators: a row block covered by this CTA
// alone is stored straight to y; one shared with neighbouring CTAs goes to this CTA's partial
// slot (0: its first row block, 1: its last), and the last warp of the covering CTAs to arrive
// (tagged counter per row block and warp: arrive_tagged, no memset) sums the slots in CTA order: the same
// bits whichever CTA finishes last.
// Out-of-range rows (>= N), tokens (>= M) and k (>= K) are zero-filled by the TMA.
constexpr int kMaxTmaStages = 16;
// Prototype hook (bench/proto/gemv_phase_proto.cu and gemv_drain_proto.cu time a CTA's phases
// with it): when `cond` holds, record phase k. Nothing in the library defines it, so it
// compiles to nothing.
#ifndef B12X_GEMV_TMA_MARK
#define B12X_GEMV_TMA_MARK(k, cond)
#endif

template <int NT, int RT, int CW, int KB>
struct TmaTile {
  static constexpr int kRows = 16 * RT * CW;                // W rows per unit (and per CTA row block)
  static constexpr int kTokens = 8 * NT;
  static constexpr uint32_t kWBox = kRows * 128;            // one 64-k box of W
  static constexpr uint32_t kXBox = kTokens * 128;          // one 64-k box of x
  static constexpr uint32_t kStageBytes = KB * (kWBox + kXBox);
  static_assert(kRows <= 256 && kTokens <= 256, "TMA box dimensions are at most 256");
  static_assert(kWBox % 1024 == 0 && kXBox % 1024 == 0, "swizzled boxes start 1024-byte aligned");
};

// Calls f(rt, nt, e, r, tok) for every accumulator element acc[rt][nt][e] of this lane: W row
// r (from the warp's first row) and token tok, in the m16n8 fragment layout (c0, c1: row g,
// tokens 2t, 2t+1; c2, c3: row g+8).
template <int NT, int RT, typename F>
__device__ __forceinline__ void for_each_fragment(F&& f) {
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) f(rt, nt, e, rt * 16 + g + (e >> 1) * 8, nt * 8 + 2 * t + (e & 1));
}

// The bias (f32) of this lane's 2·RT rows of a warp's block [row_base, +16*RT): rows g, g + 8 of
// each 16-row tile (0 past N or without a bias).
template <int RT>
__device__ __forceinline__ void tma_load_bias(const Bf16GemvParams& p, bool has_bias, int row_base, float (&bias)[RT][2]) {
  const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) bias[rt][h] = 0.0f;
  if (!has_bias) return;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + rt * 16 + g + 8 * h;
      if (row < p.n) bias[rt][h] = bias_at(p, row);
    }
}

// Stores one warp's fragments for rows [row_base, +16*RT): the values of store_out per element
// (v + bias[row] in f32 with a bias, v itself without, then one rounding), one predicated store
// per element at a constant offset from the lane's first. It runs once per row block, at the
// very end of most CTAs, so its length is on the call's critical path: with a branch per
// element (store_out) it took ~1,080 of the ~2,560 SM cycles from a CTA's last data to its exit
// (bench-results/2026-12-01-h200-j/drain/).
template <int NT, int RT, typename TOut>
__device__ __forceinline__ void tma_store_y(const Bf16GemvParams& p, const float (&v)[RT][NT][4], bool has_bias,
                                            const float (&bias)[RT][2], int row_base) {
  const int g = (threadIdx.x & 31) >> 2;
  const int t = threadIdx.x & 3;
  if (p.flags & kYSilu) {
    // Fragments e (row g) and e + 2 (row g + 8) of a tile are a (gate, up) pair: y column
    // (row_base + 16 rt) / 2 + g.
    TOut* a_lane = reinterpret_cast<TOut*>(p.y) + (long long)(2 * t) * p.ldy + row_base / 2 + g;
    for_each_fragment<NT, RT>([&](int rt, int nt, int e, int r, int tok) {
      if (e >= 2) return;
      const float vg = has_bias ? v[rt][nt][e] + bias[rt][0] : v[rt][nt][e];
      const float vu = has_bias ? v[rt][nt][e + 2] + bias[rt][1] : v[rt][nt][e + 2];
      const float a = silu_mul_f32(to_f32<TOut>(from_f32<TOut>(vg)), to_f32<TOut>(from_f32<TOut>(vu)), p.y_limit);
      if (row_base + r < p.n && tok < p.m) a_lane[(long long)(nt * 8 + (e & 1)) * p.ldy + rt * 8] = from_f32<TOut>(a);
    });
    return;
  }
  // The lane's element (token 2t, row g); the others sit at constant multiples of ldy and
  // constant row offsets from it.
  TOut* y_lane = reinterpret_cast<TOut*>(p.y) + (long long)(2 * t) * p.ldy + row_base + g;
  for_each_fragment<NT, RT>([&](int rt, int nt, int e, int r, int tok) {
    // Without a bias v itself (v + 0 would turn -0 into +0).
    const TOut out = from_f32<TOut>(has_bias ? v[rt][nt][e] + bias[rt][e >> 1] : v[rt][nt][e]);
    if (row_base + r < p.n && tok < p.m) y_lane[(long long)(nt * 8 + (e & 1)) * p.ldy + (r - g)] = out;
  });
}

template <int NT, int RT, int CW, int KB, typename TOut>
__device__ __forceinline__ void gemv_tma(const Bf16GemvTmaParams& tp) {
  using Tile = TmaTile<NT, RT, CW, KB>;
  constexpr int ROWS = Tile::kRows;
  constexpr int MT = Tile::kTokens;
  __shared__ __align__(8) uint64_t s_bar[2 * kMaxTmaStages];  // full[stages], then empty[stages]
  extern __shared__ unsigned char s_dyn[];
  const uint32_t ring = (smem_addr(s_dyn) + 1023u) & ~1023u;  // the launch adds 1 KB of slack
  const Bf16GemvParams& p = tp.g;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int kstages = tp.kstages;
  const int q = tp.units_per_cta;
  const int units = (p.n + ROWS - 1) / ROWS * kstages;  // the flat list: row-major (row block, k-stage)
  // Cluster split-K (flags bit 1): cluster r (consecutive CTAs) owns row block r, and its
  // rank c the k-stages [c·kstages/C, (c+1)·kstages/C); the partial tiles are summed through
  // distributed shared memory at the end. Otherwise CTA b walks units [b·q, (b+1)·q).
  const bool clustered = tp.flags & kTmaCluster;
  int u_begin, n_units;
  if (clustered) {
    const int nc = cluster_size(), c = cluster_rank();
    const int lo = c * kstages / nc, hi = (c + 1) * kstages / nc;
    u_begin = int(blockIdx.x) / nc * kstages + lo;
    n_units = hi - lo;
  } else {
    u_begin = min(int(blockIdx.x) * q, units);
    n_units = min(units - u_begin, q);
  }
  // Walk order (producer and consumers alike): the CTA's list rotated so that, when it spans
  // two or more row blocks and its last row block continues in the next CTA, that block's
  // units come first; its first row block (if it began in the previous CTA) is next anyway.
  // Both contributions to every shared row block are then finished early, so its merge
  // (partials out, counter, the last arrival's sum) overlaps the ring's streaming instead of
  // trailing the last load, and the CTA ends on a direct store of y. Each row block's units
  // keep their k order, so the bits are those of the plain order.
  int tail = 0;
  if (!clustered && n_units > 0 && u_begin / kstages != (u_begin + n_units - 1) / kstages)
    tail = (u_begin + n_units) % kstages;
  auto unit_at = [&](int i) { return i < tail ? u_begin + n_units - tail + i : u_begin + i - tail; };
  const int stages = tp.stages;
  const uint32_t full0 = smem_addr(s_bar);
  const uint32_t empty0 = full0 + 8 * kMaxTmaStages;
  const bool pdl = p.flags & kPdl;
  // Producer (warp CW, lane 0). Stage s of round r waits for the consumers' release of round
  // r-1. PDL launch: the first round's W boxes go out before pdl_wait (W is never written by an
  // earlier kernel on the stream, so they stream while that kernel finishes), everything else
  // after it. Otherwise each stage's W and x boxes go out together (x then arrives with stage 0
  // instead of behind the whole first round of W: ~0.7 µs sooner on the 58 MB shapes).
  const bool evict_first = tp.flags & kTmaEvictFirst;
  const uint64_t w_policy = l2_policy_evict_first();
  const uint64_t x_policy = l2_policy_evict_last();
  // Unit i of the walk: its row block and first k.
  auto unit_origin = [&](int i, int& rb, int& k0) {
    const int u = unit_at(i);
    rb = u / kstages;
    k0 = (u - rb * kstages) * 64 * KB;
  };
  auto load_w = [&](int i, int s) {
    const uint32_t bar = full0 + 8 * s;
    mbar_arrive_expect_tx(bar, Tile::kStageBytes);
    int rb, k0;
    unit_origin(i, rb, k0);
    const uint32_t st = ring + s * Tile::kStageBytes;
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      if (evict_first)
        tma_load_2d(st + j * Tile::kWBox, &tp.w_map, k0 + 64 * j, rb * ROWS, bar, w_policy);
      else
        tma_load_2d(st + j * Tile::kWBox, &tp.w_map, k0 + 64 * j, rb * ROWS, bar);
    }
  };
  auto load_x = [&](int i, int s) {
    const uint32_t bar = full0 + 8 * s;
    int rb, k0;
    unit_origin(i, rb, k0);
    const uint32_t st = ring + s * Tile::kStageBytes;
#pragma unroll
    for (int j = 0; j < KB; ++j)
      tma_load_2d(st + KB * Tile::kWBox + j * Tile::kXBox, &tp.x_map, k0 + 64 * j, 0, bar, x_policy);
  };
  // The producer lane initializes the barriers and sends the ring's first round right at the
  // top of the kernel, before the CTA barrier: after an L2 flush the kernel's code comes from
  // DRAM, and the producer's loop sits at the far end of the entry point (ptxas places it after
  // the consumers'), so W streams while the rest of the code is fetched.
  const int first = min(stages, n_units);
  if (warp == CW && lane == 0) {
    B12X_GEMV_TMA_MARK(3, true);
    tma_prefetch_descriptor(&tp.w_map);
    tma_prefetch_descriptor(&tp.x_map);
    for (int s = 0; s < stages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, CW);
    }
    mbar_fence_init();
    for (int i = 0; i < first; ++i) {
      load_w(i, i);
      B12X_GEMV_TMA_MARK(4, i == 0);
      if (!pdl) load_x(i, i);
    }
    B12X_GEMV_TMA_MARK(0, true);
  }
  __syncthreads();

  if (clustered && n_units < 1) __trap();  // a rank without work would skip the cluster barriers
  if (warp == CW) {
    // Every thread lets the next PDL kernel launch only after its own pdl_wait, so only the
    // kernel right before this one can still be running while W is read.
    if (lane == 0) {
      if (pdl) {
        pdl_wait_then_release();
        for (int i = 0; i < first; ++i) load_x(i, i);
      }
      int s = first % stages, round = first / stages;
      for (int i = first; i < n_units; ++i) {
        if (round > 0) mbar_wait(empty0 + 8 * s, (round - 1) & 1);
        load_w(i, s);
        load_x(i, s);
        if (++s == stages) s = 0, ++round;
      }
    }
    if (pdl && lane != 0) {
      pdl_wait_then_release();
    }
    if (clustered) {  // the consumers' two cluster barriers count every thread
      __syncwarp();
      cluster_sync();
      cluster_sync();
    }
    return;  // nothing below synchronizes the whole CTA
  }
  if (pdl) {  // the consumers write y, partials and counters
    pdl_wait_then_release();
  }

  // Consumer warp `warp`: rows [16*RT*warp, +16*RT) of each stage's W boxes.
  const int l7 = lane & 7;
  const int mat = lane >> 3;  // the 8x8 matrix this lane addresses in ldmatrix.x4
  // A (W, 16 rows x 16 k): matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) = a0, a1, a2, a3.
  const int a_row = 16 * RT * warp + l7 + ((mat & 1) << 3);
  const int a_chunk = mat >> 1;
  // B (x, 8 tokens x 32 k): matrices k 0-7, 8-15, 16-23, 24-31 = b0, b1 of two k16 steps.
  float acc[RT][NT][4];
  auto zero = [&] { for_each_fragment<NT, RT>([&](int rt, int nt, int e, int, int) { acc[rt][nt][e] = 0.0f; }); };
  zero();
  // The bias of the lane's rows of the current row block (loaded when the block starts, so a
  // bias read from DRAM is not waited for at the end of the call).
  const bool has_bias = p.bias != nullptr;
  float bias[RT][2];
  int s = 0, round = 0, prev_rb = -1;
  for (int i = 0; i < n_units; ++i) {
    // Whether this unit ends its row block, and which CTAs share that block, worked out before
    // the wait: the integer divisions took ~480 SM cycles after the CTA's last mma otherwise.
    const int rb = unit_at(i) / kstages;
    const bool ends_block = !(i + 1 < n_units && unit_at(i + 1) / kstages == rb);
    const int qd = clustered ? 1 : q;
    const int c_first = rb * kstages / qd;
    const int c_last = ((rb + 1) * kstages - 1) / qd;
    if (rb != prev_rb) {
      prev_rb = rb;
      tma_load_bias<RT>(p, has_bias, rb * ROWS + 16 * RT * warp, bias);
    }
    mbar_wait(full0 + 8 * s, round & 1);
    B12X_GEMV_TMA_MARK(1, warp == 0 && i == 0);
    B12X_GEMV_TMA_MARK(2, warp == 0 && i == n_units - 1);
    B12X_GEMV_TMA_MARK(7, i == n_units - 1);
    const uint32_t st = ring + s * Tile::kStageBytes;
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      const uint32_t w_box = st + j * Tile::kWBox;
      const uint32_t x_box = st + KB * Tile::kWBox + j * Tile::kXBox;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t b[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) ldmatrix_x4(b[nt], x_box + swizzle128_offset(nt * 8 + l7, 4 * h + mat));
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
          for (int rt = 0; rt < RT; ++rt) {
            uint32_t a[4];
            ldmatrix_x4(a, w_box + swizzle128_offset(a_row + 16 * rt, 2 * (2 * h + kk) + a_chunk));
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              const uint32_t bb[2] = {b[nt][2 * kk], b[nt][2 * kk + 1]};
              mma_m16n8k16_bf16_f32(acc[rt][nt], a, bb);
            }
          }
        }
      }
    }
    B12X_GEMV_TMA_MARK(5, i == n_units - 1);
    __syncwarp();
    if (lane == 0) mbar_arrive(empty0 + 8 * s);
    if (++s == stages) s = 0, ++round;

    if (!ends_block) continue;  // row block rb goes on
    const int row_base = rb * ROWS + 16 * RT * warp;
    // A row block this CTA owns alone: y stored right away.
    if (!clustered && c_first == c_last) {
      B12X_GEMV_TMA_MARK(8, i == n_units - 1);
      tma_store_y<NT, RT, TOut>(p, acc, has_bias, bias, row_base);
      B12X_GEMV_TMA_MARK(6, i == n_units - 1);
      zero();
      continue;
    }
    if (clustered) {
      // This is the CTA's only row block. Each lane's fragments go to this CTA's partial
      // tile (after the ring) in fragment order; after the barrier rank c sums fragment f for
      // f % C == c over ranks 0..C-1 in order and stores it; the second barrier keeps every
      // tile alive until all ranks have read it.
      // Tile layout [warp][fragment][lane]: conflict-free for the stores and the remote loads.
      constexpr int F = RT * NT * 4;
      // config.rs sizes it the same (tma_cluster_tile_bytes: CW · 32 lanes · F values · 4 B).
      const uint32_t s_mine = ring + stages * Tile::kStageBytes + (warp * F * 32 + lane) * 4;
      for_each_fragment<NT, RT>([&](int rt, int nt, int e, int, int) {
        st_shared_f32(s_mine + ((rt * NT + nt) * 4 + e) * 32 * 4, acc[rt][nt][e]);
      });
      __syncwarp();
      cluster_sync();
      const int nc = cluster_size(), c = cluster_rank();
      for_each_fragment<NT, RT>([&](int rt, int nt, int e, int r, int tok) {
        const int f = (rt * NT + nt) * 4 + e;
        if (f % nc != c) return;
        float sum = 0.0f;
        for (int src = 0; src < nc; ++src) sum += ld_shared_cluster_f32(s_mine + f * 32 * 4, src);
        if (row_base + r < p.n && tok < p.m) store_out<TOut>(p, row_base + r, tok, sum);
      });
      __syncwarp();
      cluster_sync();
      break;
    }
    // Flush row block rb, which CTAs c_first..c_last share: sum the partials.
    // Partial slot of CTA c for row block rb: [c][slot][token][ROWS] f32, slot 0 when rb is
    // the first row block of c's stretch, 1 when it is the last.
    auto slot_of = [&](int c) -> float* {
      const int slot = (c * q) / kstages == rb ? 0 : 1;
      return p.partials + (long long)(2 * c + slot) * (MT * ROWS);
    };
    const int warp_row = 16 * RT * warp;
    float* mine = slot_of(blockIdx.x);
    for_each_fragment<NT, RT>([&](int rt, int nt, int e, int r, int tok) {
      __stcg(mine + tok * ROWS + warp_row + r, acc[rt][nt][e]);
    });
    __threadfence();
    __syncwarp();
    unsigned int prev = 0;
    if (lane == 0) prev = arrive_tagged(&p.counters[rb * CW + warp], unsigned(c_last - c_first + 1));
    prev = __shfl_sync(0xffffffffu, prev, 0);
    if (prev == unsigned(c_last - c_first)) {
      __threadfence();
      float sum[RT][NT][4];
      for_each_fragment<NT, RT>([&](int rt, int nt, int e, int, int) { sum[rt][nt][e] = 0.0f; });
      // Loads of up to 8 / (NT·RT) contributors in flight (32 values per lane; more spill at
      // NT = 4, and at RT = 3 with 8 / NT).
#pragma unroll(8 / (NT * RT))
      for (int c = c_first; c <= c_last; ++c) {
        const float* part = slot_of(c);
        for_each_fragment<NT, RT>([&](int rt, int nt, int e, int r, int tok) {
          sum[rt][nt][e] += c == int(blockIdx.x) ? acc[rt][nt][e] : __ldcg(part + tok * ROWS + warp_row + r);
        });
      }
      tma_store_y<NT, RT, TOut>(p, sum, has_bias, bias, row_base);
    }
    B12X_GEMV_TMA_MARK(6, i == n_units - 1);
    zero();
  }
}

// ---- f32 x: SIMT GEMV (x is never rounded to bf16). ----
// A warp owns RS rows; lane l covers k = k0 + 8l .. +8 of each 256-wide step; tokens are
// processed MT at a time (the W stretch is re-read from L2/L1 for every further pass).
template <int MT, int RS, typename TOut, bool kAligned>
__device__ __forceinline__ void gemv_simt(const Bf16GemvParams& p) {
  if (p.flags & kPdl) {  // PDL launch: nothing is read before the previous kernel completes
    pdl_wait_then_release();
  }
  extern __shared__ __align__(128) float s_part[];  // [warps_k][MT][rows_cta + kRowPad]
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int wk = warp % p.warps_k;
  const int wr = warp / p.warps_k;
  const int rows_cta = RS * p.warps_r;
  const int row0 = blockIdx.x * rows_cta + wr * RS;
  const int k_begin = blockIdx.y * p.k_per_split;
  const int k_end = min(p.k, k_begin + p.k_per_split);
  const int span = max(k_end - k_begin, 0);
  const int groups = span / kSimtStepK;
  const int k_tail = k_begin + groups * kSimtStepK;
  const bool has_tail = k_tail < k_end;
  const int stride_r = rows_cta + kRowPad;
  const float* g_x = reinterpret_cast<const float*>(p.x);

  const bf16* r_w[RS];
#pragma unroll
  for (int r = 0; r < RS; ++r) {
    const int row = min(row0 + r, p.n - 1);
    r_w[r] = p.w + (long long)row * p.ldw + 8 * lane;
  }

  for (int m0 = 0; m0 < p.m; m0 += MT) {
    float acc[RS][MT];
#pragma unroll
    for (int r = 0; r < RS; ++r)
#pragma unroll
      for (int j = 0; j < MT; ++j) acc[r][j] = 0.0f;
    const float* r_x[MT];
    bool r_xok[MT];
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      r_xok[j] = m0 + j < p.m;
      r_x[j] = g_x + (long long)min(m0 + j, p.m - 1) * p.ldx + 8 * lane;
    }
    // Full steps round-robin over the warps_k warps, then the tail on the next warp in turn.
    const int steps = groups + (has_tail ? 1 : 0);
    for (int gi = wk; gi < steps; gi += p.warps_k) {
      const int off = k_begin + gi * kSimtStepK;
      const int kl = off + 8 * lane;
      const int kb = gi < groups ? kl + 8 : k_end;  // full step: every chunk in bounds
      Vec16 v_w[RS];
#pragma unroll
      for (int r = 0; r < RS; ++r) v_w[r] = load_bf16x8<kAligned, true>(r_w[r] + off, kl, kb);
      float wf[RS][8];
#pragma unroll
      for (int r = 0; r < RS; ++r) unpack_f32<bf16>(v_w[r], wf[r]);
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        Vec16 v_x[2] = {Vec16{{0u, 0u, 0u, 0u}}, Vec16{{0u, 0u, 0u, 0u}}};
        if (r_xok[j]) load_f32x8<kAligned>(r_x[j] + off, kl, kb, v_x);
        const float* xf = reinterpret_cast<const float*>(v_x);
#pragma unroll
        for (int r = 0; r < RS; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][j] = fmaf(wf[r][e], xf[e], acc[r][j]);
      }
    }
    float* s_mine = s_part + wk * MT * stride_r;
#pragma unroll
    for (int r = 0; r < RS; ++r)
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        const float v = warp_sum(acc[r][j]);
        if (lane == 0) s_mine[j * stride_r + wr * RS + r] = v;
      }
    __syncthreads();
    finish_tile<TOut>(p, s_part, rows_cta, MT, m0);
    __syncthreads();
  }
  if (p.ksplit > 1) merge_splits<TOut>(p, rows_cta);
}

}  // namespace bf16_gemv
}  // namespace b12x

using b12x::Bf16GemvParams;
using b12x::Bf16GemvTmaParams;
using b12x::bf16;

#define B12X_GEMV_MMA(NT, RT, U, S, TOUT, OUTNAME)                                               \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_##OUTNAME##out(                       \
          const __grid_constant__ Bf16GemvParams p) {                                          \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, TOUT, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXPlain>(p, 0.0f);  \
  }

// Direct register feed. MINB: CTAs of kMaxThreads per SM the register budget must allow
// (2 caps the light variants at 128 registers, so two full CTAs fit on an SM).
#define B12X_GEMV_MMAD(NT, RT, U, MINB, TOUT, OUTNAME)                                          \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, MINB)                \
      b12x_bf16_gemv_mmad_nt##NT##_rt##RT##_u##U##_##OUTNAME##out(                               \
          const __grid_constant__ Bf16GemvParams p) {                                          \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, 0, TOUT, b12x::bf16_gemv::Feed::kDirect, b12x::bf16_gemv::kXPlain>(p, 0.0f);  \
  }

// Unaligned fallback: register path with 2-byte loads, one per token tile count.
#define B12X_GEMV_MMA_UNALIGNED(NT, TOUT, OUTNAME)                                              \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_unaligned_##OUTNAME##out(const __grid_constant__ Bf16GemvParams p) { \
    b12x::bf16_gemv::gemv_mma<NT, 1, 2, 1, TOUT, b12x::bf16_gemv::Feed::kUnaligned, b12x::bf16_gemv::kXPlain>(p, 0.0f);  \
  }

// Fused SwiGLU on the x load (x = [gate | up], Bf16GemvActParams): the ring and direct feeds.
#define B12X_GEMV_MMA_SILU(NT, RT, U, S, TOUT, OUTNAME)                                          \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_silu_##OUTNAME##out(                  \
          const __grid_constant__ b12x::Bf16GemvActParams p) {                                 \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, TOUT, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXSilu>(p.g, p.limit); \
  }
#define B12X_GEMV_MMAD_SILU(NT, RT, U, MINB, TOUT, OUTNAME)                                     \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, MINB)                \
      b12x_bf16_gemv_mmad_nt##NT##_rt##RT##_u##U##_silu_##OUTNAME##out(                          \
          const __grid_constant__ b12x::Bf16GemvActParams p) {                                 \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, 0, TOUT, b12x::bf16_gemv::Feed::kDirect, b12x::bf16_gemv::kXSilu>(p.g, p.limit); \
  }

// Fused add+RMSNorm on the x load (Bf16GemvNormParams): the ring and direct feeds.
#define B12X_GEMV_MMA_NORM(NT, RT, U, S, TOUT, OUTNAME)                                          \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_addnorm_##OUTNAME##out(               \
          const __grid_constant__ b12x::Bf16GemvNormParams p) {                                \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, TOUT, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXNorm>(p.g, 0.0f, &p); \
  }
#define B12X_GEMV_MMAD_NORM(NT, RT, U, MINB, TOUT, OUTNAME)                                     \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, MINB)                \
      b12x_bf16_gemv_mmad_nt##NT##_rt##RT##_u##U##_addnorm_##OUTNAME##out(                       \
          const __grid_constant__ b12x::Bf16GemvNormParams p) {                                \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, 0, TOUT, b12x::bf16_gemv::Feed::kDirect, b12x::bf16_gemv::kXNorm>(p.g, 0.0f, &p); \
  }

// The rope + KV-append epilogue (Bf16GemvRopeParams): the ring feed, plain or add+RMSNorm x.
#define B12X_GEMV_MMA_ROPE(NT, RT, U, S)                                                         \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_rope_bf16out(                          \
          const __grid_constant__ b12x::Bf16GemvRopeParams p) {                                \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, bf16, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXPlain>(p.n.g, 0.0f, nullptr, &p.r); \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_addnorm_rope_bf16out(                  \
          const __grid_constant__ b12x::Bf16GemvRopeParams p) {                                \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, bf16, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXNorm>(p.n.g, 0.0f, &p.n, &p.r); \
  }

// The split second add+RMSNorm (Bf16GemvRmsParams): the O projection's residual epilogue and the
// gate/up projection's rrms scale; the ring feed, plain x, BF16 out.
#define B12X_GEMV_MMA_RMS(NT, RT, U, S)                                                          \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_resrms_bf16out(                        \
          const __grid_constant__ b12x::Bf16GemvRmsParams p) {                                 \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, bf16, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXPlain>(p.g, 0.0f, nullptr, nullptr, &p.e); \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_rmsx_bf16out(                          \
          const __grid_constant__ b12x::Bf16GemvRmsParams p) {                                 \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, bf16, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXPlain>(p.g, 0.0f, nullptr, nullptr, nullptr, &p.e); \
  }

// Persistent TMA feed (aligned BF16 x): CW consumer warps + 1 producer warp.
#define B12X_GEMV_TMA(NT, RT, CW, KB, TOUT, OUTNAME)                                            \
  extern "C" __global__ void __launch_bounds__(32 * (CW + 1), 1)                                 \
      b12x_bf16_gemv_tma_nt##NT##_rt##RT##_cw##CW##_kb##KB##_##OUTNAME##out(                     \
          const __grid_constant__ b12x::Bf16GemvTmaParams p) {                                 \
    b12x::bf16_gemv::gemv_tma<NT, RT, CW, KB, TOUT>(p);                                        \
  }

#define B12X_GEMV_SIMT(MT, RS, TOUT, OUTNAME)                                                   \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_simt_mt##MT##_rs##RS##_##OUTNAME##out(const __grid_constant__ Bf16GemvParams p) { \
    b12x::bf16_gemv::gemv_simt<MT, RS, TOUT, true>(p);                                         \
  }

#define B12X_GEMV_SIMT_UNALIGNED(MT, TOUT, OUTNAME)                                             \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_simt_mt##MT##_unaligned_##OUTNAME##out(const __grid_constant__ Bf16GemvParams p) { \
    b12x::bf16_gemv::gemv_simt<MT, 2, TOUT, false>(p);                                         \
  }

// The variant table in src/bf16_gemv/mod.rs lists exactly these.
#define B12X_GEMV_ALL_OUT(MACRO, ...) MACRO(__VA_ARGS__, bf16, bf16) MACRO(__VA_ARGS__, float, f32)

B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 1, 1, 4, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 1, 1, 8, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 1, 2, 4, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 2, 1, 4, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 2, 1, 8, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 2, 2, 4, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 4, 1, 4, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 4, 2, 2, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 8, 1, 2, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMAD, 8, 2, 2, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 1, 1, 4, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 1, 1, 8, 3)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 1, 2, 4, 3)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 2, 1, 4, 3)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 2, 2, 2, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 4, 1, 2, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 4, 2, 2, 3)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 8, 1, 2, 3)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA, 8, 2, 2, 3)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 1, 1, 4, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 1, 1, 4, 8)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 1, 1, 2, 8)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 1, 3, 3, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 1, 3, 3, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 2, 1, 4, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 2, 1, 4, 8)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 2, 1, 2, 8)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 2, 3, 3, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 2, 3, 3, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_TMA, 4, 1, 4, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA_UNALIGNED, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA_UNALIGNED, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA_UNALIGNED, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_MMA_UNALIGNED, 8)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT, 1, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT, 1, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT, 2, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT, 4, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT, 8, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT_UNALIGNED, 1)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT_UNALIGNED, 2)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT_UNALIGNED, 4)
B12X_GEMV_ALL_OUT(B12X_GEMV_SIMT_UNALIGNED, 8)
// The fused SwiGLU x load: the SILU_NT (= 1) rows of the ring and direct tables (config.rs),
// BF16 output only (an MLP's down projection; each output costs ~0.37 MB of sm_90a cubin per
// binary). The direct variants past 128 registers (u8, rt2) take MINB 1. Last in the file, so
// the entry points above keep their PTX (labels included) from before these existed.
B12X_GEMV_MMAD_SILU(1, 1, 4, 2, bf16, bf16)
B12X_GEMV_MMAD_SILU(1, 1, 8, 1, bf16, bf16)
B12X_GEMV_MMAD_SILU(1, 2, 4, 1, bf16, bf16)
B12X_GEMV_MMA_SILU(1, 1, 4, 4, bf16, bf16)
B12X_GEMV_MMA_SILU(1, 1, 8, 3, bf16, bf16)
B12X_GEMV_MMA_SILU(1, 2, 4, 3, bf16, bf16)
// The fused add+RMSNorm x load: the same six NT = 1 rows, BF16 output (a decoder layer's QKV and
// gate/up projections after their norms). After the SwiGLU ones, so earlier PTX stays as it was.
// All MINB 1: the u4 direct variant spilled at the 128-register cap of MINB 2.
B12X_GEMV_MMAD_NORM(1, 1, 4, 1, bf16, bf16)
B12X_GEMV_MMAD_NORM(1, 1, 8, 1, bf16, bf16)
B12X_GEMV_MMAD_NORM(1, 2, 4, 1, bf16, bf16)
B12X_GEMV_MMA_NORM(1, 1, 4, 4, bf16, bf16)
B12X_GEMV_MMA_NORM(1, 1, 8, 3, bf16, bf16)
B12X_GEMV_MMA_NORM(1, 2, 4, 3, bf16, bf16)
// The rope + KV-append epilogue (a decode QKV projection), plain and add+RMSNorm x: the ring rows
// of the fused tables, BF16 output. Last in the file, so earlier PTX stays as it was.
B12X_GEMV_MMA_ROPE(1, 1, 4, 4)
B12X_GEMV_MMA_ROPE(1, 1, 8, 3)
B12X_GEMV_MMA_ROPE(1, 2, 4, 3)
// The split second add+RMSNorm (the O projection's `_resrms` epilogue, the gate/up projection's
// `_rmsx` scale): the same ring rows, BF16 output. Last in the file, so earlier PTX stays as it was.
B12X_GEMV_MMA_RMS(1, 1, 4, 4)
B12X_GEMV_MMA_RMS(1, 1, 8, 3)
B12X_GEMV_MMA_RMS(1, 2, 4, 3)

// norm 1 folded as a scale (the `_addrms` x load, Bf16GemvNormParams; norm_w unused: W's columns
// carry the norm weight): x is the sublayer output, each lane forms r = bf16(x + residual) per
// piece (norm.rmsnorm's new residual, bit for bit; CTA row block 0 stores it to residual_out),
// the CTA sums r² over the whole row as it streams (row-warp 0's lanes, then the warps in order:
// no prologue, nothing waits for it before the last MMA), and every finished sum is multiplied
// by rrms = rsqrtf(S / K + eps) before the bias and the store or the rope epilogue. The ring
// rows, BF16 out, unsplit; plain and rope stores. Last in the file, so earlier PTX stays as it was.
#define B12X_GEMV_MMA_ADDRMS(NT, RT, U, S)                                                       \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_addrms_bf16out(                        \
          const __grid_constant__ b12x::Bf16GemvNormParams p) {                                \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, bf16, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXAddRms>(p.g, 0.0f, &p); \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(b12x::bf16_gemv::kMaxThreads, 1)                   \
      b12x_bf16_gemv_mma_nt##NT##_rt##RT##_u##U##_s##S##_addrms_rope_bf16out(                   \
          const __grid_constant__ b12x::Bf16GemvRopeParams p) {                                \
    b12x::bf16_gemv::gemv_mma<NT, RT, U, S, bf16, b12x::bf16_gemv::Feed::kRing, b12x::bf16_gemv::kXAddRms>(p.n.g, 0.0f, &p.n, &p.r); \
  }
B12X_GEMV_MMA_ADDRMS(1, 1, 4, 4)
B12X_GEMV_MMA_ADDRMS(1, 1, 8, 3)
B12X_GEMV_MMA_ADDRMS(1, 2, 4, 3)
