// fused_moe_decode.cu — moe.fused_moe, the decode path (packed FP4 experts, small T).  crate: b12x-moe
//   The math of fused_moe.cu (the simple path) and src/fused_moe/reference.rs, on an expert-major
//   list of rows built on the device, so that each touched expert's weights are read once per
//   call and one captured graph serves any routing:
//   1. route: the (token, slot) pairs grouped by expert — counts, an exclusive scan, a stable
//      scatter (rows of an expert in pair order) — into `slots` {expert, first row, rows <= R}
//      (an expert with more than R rows gets several slots), per row its token, expert and routing
//      weight, per pair its row (-1 when its id is outside [0, E): fault bit, skipped). The
//      quantized recipes also write x^ per row (W4A8: MXFP8 of x; NVFP4: x with the expert's
//      encode scale, left as e2m1 * UE4M3, exact in BF16; 1 / enc goes to FC1's epilogue).
//   2. FC1: gemm.blockscaled's W4A16 decode kernel body (b12x/bsgemv_decode.cuh) over the unit
//      list (slot, 128-row block of the expert, k-stage): TMA boxes of the stacked packed codes
//      at the expert's row block, x rows of the slot (gathered by token for W4A16). The packed
//      FC1 interleaves gate and up per 16 rows (8 gate rows, then the 8 matching up rows), so the
//      MMA rows g and g + 8 a lane finishes are gate j and up j: the epilogue writes
//      h[row, j] = bf16(w_row * act(bf16(g), bf16(u))) directly.
//   3. (W4A8 / NVFP4) h^ = the recipe's quantize-then-dequantize of each h row, in place.
//   4. FC2: the same body on h's rows -> y_rows[row, o] = bf16(sum) (BF16 per expert output).
//   5. combine: y[t] = bf16(sum over valid slots, in slot order, of f32(y_rows[pair_row])).
//   Steps 2-5 launch with PDL (each waits for its predecessor before reading what it wrote),
//   except that FC1 at T k <= kMoeEarlyPairs computes the route's slots from ids itself and FC2
//   reads the route's slots (two launches back) before their waits: both ask for their first
//   ring of weights while their predecessor still runs (MoeRows::units).
// Tensors: ids [T, k] i32, weights [T, k] f32, x [T, Hd] bf16 (row stride ldx, 16-byte rows);
//   packed experts (src/fused_moe/packed.rs): per matrix the experts' layout-v3 codes stacked at a
//   stride of rbs 128-row blocks ([E rbs 128, K/2] bytes, rows past the matrix zero), their
//   swizzled scale tiles stacked likewise, NVFP4 encode scales [E]; scratch regions (the plan's
//   layout): slots, meta, row_token, row_expert, row_weight, pair_row, xq, h, y_rows, partials,
//   counters.
// Constraints: Hd, I multiples of 32, E <= 4096; the decode route: 4 (E + 3 P) bytes of shared
//   memory (the plan sends it T <= 16 and the grouped GEMV's T up to what the device's opt-in
//   limit holds) and 16-bit scan halves (P < 65536), the tiled path any P <= MAX_PAIRS.
// Entry points: b12x_fused_moe_route, b12x_fused_moe_decode_gemv_{nvfp4,mxfp4}_nt{1,2},
//   b12x_fused_moe_quant_rows, b12x_fused_moe_combine_rows; the grouped path (end of file):
//   b12x_fused_moe_group_{zero,count,scan,place,gather}, b12x_fused_moe_tile_{nvfp4,mxfp4}_wm2,
//   b12x_fused_moe_tile_wg{,64,32}{,_act}_{nvfp4,mxfp4} (SM90: the gather and act_rows — or FC1's
//   epilogue, the _act kernels — then write x^ / h in each 32-k group's fragment order,
//   moe_store_group), b12x_fused_moe_act_rows;
//   b12x_fused_moe_route_topk_{softmax,sigmoid,sqrtsoftplus} (router logits in the op).
// Oracle: src/fused_moe/reference.rs; the grouping: src/fused_moe/packed.rs (group).
#include <stddef.h>
#include <stdint.h>

#include "b12x/bsgemv_decode.cuh"
#include "b12x/common.cuh"
#include "b12x/quant.cuh"
#include "moe_math.cuh"
#include "route_topk.cuh"

namespace b12x {

constexpr int kMoeRouteThreads = 256;
constexpr unsigned kMoeDecodeFaultExpertId = 1;  // FAULT_EXPERT_ID

// Mirrored by src/fused_moe/params.rs (MoeRouteParams).
struct MoeRouteParams {
  const int32_t* ids;     // [T, k]
  const float* weights;   // [T, k]
  const bf16* x;          // [T, Hd], row stride ldx
  const float* a1_enc;    // [E]: x's NVFP4 encode scale per expert (NVFP4 recipe) or null
  int4* slots;            // [max_slots] {expert, first row, rows, 0}
  int32_t* meta;          // [2]: slots, rows
  int32_t* row_token;     // [P]
  int32_t* row_expert;    // [P]
  float* row_weight;      // [P]
  int32_t* pair_row;      // [P]: the row of pair p, -1 for an id outside [0, E)
  bf16* xq;               // [P, Hd]: x^ per row (quantized recipes) or null
  unsigned int* error;    // [1] fault bits
  int64_t ldx;            // elements between rows of x
  int32_t tokens, top_k, experts, hidden;
  int32_t slot_rows;      // R: rows per slot at most (8 NT of the FC kernels)
  int32_t quant;          // 0: none (W4A16), 1: MXFP8 (W4A8), 2: NVFP4
  int32_t rows_per_cta;   // x^ rows each CTA writes
  int32_t reserved;
};
static_assert(sizeof(MoeRouteParams) == 136, "size must match src/fused_moe/params.rs");
static_assert(offsetof(MoeRouteParams, ldx) == 96, "offset must match params.rs");
static_assert(offsetof(MoeRouteParams, slot_rows) == 120, "offset must match params.rs");

// The B values v[0..B) as bf16 pairs into words w[o .. o + B / 2).
template <int B>
__device__ __forceinline__ void moe_pack_words(const float (&v)[B], uint32_t (&w)[16], int o) {
#pragma unroll
  for (int i = 0; i < B / 2; ++i) w[o + i] = moe_pack_bf16x2(v[2 * i], v[2 * i + 1]);
}
// B bf16 values at src (16-byte aligned) through the recipe's quantize-then-dequantize (B = 32:
// MXFP8; B = 16: NVFP4 with encode scale enc, left as e2m1 * UE4M3), as bf16 pairs into words
// w[o .. o + B / 2).
template <int B>
__device__ __forceinline__ void qdq_bf16_words(const bf16* src, float enc, uint32_t (&w)[16], int o) {
  float v[B];
#pragma unroll
  for (int i = 0; i < B; i += 8) {
    const uint4 x = *reinterpret_cast<const uint4*>(src + i);
    const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[i + 2 * j] = __uint_as_float(xs[j] << 16);
      v[i + 2 * j + 1] = __uint_as_float(xs[j] & 0xFFFF0000u);
    }
  }
  if constexpr (B == 32) {
    mxfp8_qdq_block(v);
  } else {
    nvfp4_qdq_block<false>(v, enc);
  }
  moe_pack_words<B>(v, w, o);
}

// qdq_bf16_words to dst (may equal src), in k order.
template <int B>
__device__ __forceinline__ void qdq_bf16_block(const bf16* src, bf16* dst, float enc) {
  uint32_t w[16];
  qdq_bf16_words<B>(src, enc, w, 0);
#pragma unroll
  for (int i = 0; i < B / 8; ++i)
    *reinterpret_cast<uint4*>(dst + 8 * i) = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
}

// SM90's wgmma tiles read their x operand (x^ for FC1, h for FC2) in the fragment order of each
// 32-k group (`kperm`): stored bf16 pair P = 8 h2 + 4 u + t holds the pair a = 4 t + 2 h2 + u
// of the row's k order, so that a lane t of the tile finds every weight code of its k16 steps
// 2c + h2 in one layout-v2 word (8 consecutive k of group c: word t) and converts it with
// pair<Q> (the decode GEMV's 9-ALU form) instead of a lane-dependent pair. Both operands take
// the same permutation of k, so the MMA's sum is over the same products. In 16-byte vectors:
// output vector V holds word V of each input vector (a 4 x 4 transpose of words).
__device__ __forceinline__ void moe_store_group(bf16* dst, const uint32_t (&w)[16]) {
#pragma unroll
  for (int v = 0; v < 4; ++v)
    *reinterpret_cast<uint4*>(dst + 8 * v) = make_uint4(w[v], w[4 + v], w[8 + v], w[12 + v]);
}
// Grouping, identical in every CTA (each recomputes it from ids: no grid-wide synchronization);
// CTA 0 writes the metadata, every CTA its share of x^ rows. Dynamic shared memory:
// 4 (E + 3 P) bytes.
__device__ __forceinline__ void moe_route(const MoeRouteParams& p) {
  extern __shared__ int32_t s_dyn_route[];
  __shared__ uint32_t s_wsum[kMoeRouteThreads / 32];
  const int E = p.experts, P = p.tokens * p.top_k, R = p.slot_rows;
  int32_t* s_off = s_dyn_route;   // [E]: counts, then packed prefixes, then running rows
  int32_t* s_e = s_off + E;       // [P]: expert of pair p or -1
  int32_t* s_row = s_e + P;       // [P]: row of pair p or -1
  int32_t* s_pair = s_row + P;    // [P]: pair of row r
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  pdl_wait_then_release();
  for (int i = tid; i < E; i += blockDim.x) s_off[i] = 0;
  __syncthreads();
  for (int i = tid; i < P; i += blockDim.x) {
    const int e = p.ids[i];
    const bool ok = e >= 0 && e < E;
    s_e[i] = ok ? e : -1;
    if (ok) {
      atomicAdd(&s_off[e], 1);
    } else if (blockIdx.x == 0) {
      atomicOr(p.error, kMoeDecodeFaultExpertId);
    }
  }
  __syncthreads();
  // Exclusive scan of (rows << 16 | slots) per expert: slots <= rows <= P <= 2048 (an expert's
  // ceil(c / R) slots never exceed its c rows), so the low half never carries into the high one. Thread i scans experts [i per, (i + 1) per).
  const int per = (E + blockDim.x - 1) / blockDim.x;
  const int lo = min(tid * per, E), hi = min(lo + per, E);
  uint32_t sum = 0;
  for (int i = lo; i < hi; ++i) {
    const uint32_t c = uint32_t(s_off[i]);
    sum += (c << 16) | ((c + R - 1) / R);
  }
  uint32_t incl = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += y;
  }
  if (lane == 31) s_wsum[warp] = incl;
  __syncthreads();
  uint32_t run = incl - sum, total = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) {
    if (w < warp) run += s_wsum[w];
    total += s_wsum[w];
  }
  for (int i = lo; i < hi; ++i) {
    const uint32_t c = uint32_t(s_off[i]);
    s_off[i] = int32_t(run);
    run += (c << 16) | ((c + R - 1) / R);
  }
  __syncthreads();
  const int rows = int(total >> 16), nslots = int(total & 0xFFFFu);
  // Slots (CTA 0): expert e's rows [r0, r1) in runs of R.
  if (blockIdx.x == 0) {
    for (int e = tid; e < E; e += blockDim.x) {
      const uint32_t v = uint32_t(s_off[e]);
      const int r0 = int(v >> 16), s0 = int(v & 0xFFFFu);
      const int r1 = e + 1 < E ? int(uint32_t(s_off[e + 1]) >> 16) : rows;
      for (int j = 0; r0 + j * R < r1; ++j) p.slots[s0 + j] = make_int4(e, r0 + j * R, min(R, r1 - r0 - j * R), 0);
    }
    if (tid == 0) {
      p.meta[0] = nslots;
      p.meta[1] = rows;
    }
  }
  __syncthreads();
  for (int e = tid; e < E; e += blockDim.x) s_off[e] = int32_t(uint32_t(s_off[e]) >> 16);
  __syncthreads();
  // Stable rows: warp 0 walks the pairs in order, 32 at a time; lanes of one expert take
  // consecutive rows in lane order.
  if (warp == 0) {
    for (int base = 0; base < P; base += 32) {
      const int i = base + lane;
      const int e = i < P ? s_e[i] : -1;
      const unsigned grp = __match_any_sync(0xffffffffu, e);
      const int rank = __popc(grp & ((1u << lane) - 1u));
      const int row = e >= 0 ? s_off[e] + rank : -1;
      __syncwarp();
      if (e >= 0 && rank == 0) s_off[e] += __popc(grp);
      __syncwarp();
      if (i < P) s_row[i] = row;
      if (row >= 0) s_pair[row] = i;
    }
  }
  __syncthreads();
  if (blockIdx.x == 0) {
    for (int i = tid; i < P; i += blockDim.x) {
      const int row = s_row[i];
      p.pair_row[i] = row;
      if (row >= 0) {
        p.row_token[row] = i / p.top_k;
        p.row_expert[row] = s_e[i];
        p.row_weight[row] = p.weights[i];
      }
    }
  }
  if (p.quant == 0) return;
  // x^ rows [blockIdx.x rpc, + rpc): one thread per block of B values.
  const int B = p.quant == 1 ? 32 : 16, hd = p.hidden, nb = hd / B;
  const int r_begin = blockIdx.x * p.rows_per_cta, r_end = min(r_begin + p.rows_per_cta, rows);
  for (int idx = tid; idx < (r_end - r_begin) * nb; idx += blockDim.x) {
    const int row = r_begin + idx / nb, b = idx % nb;
    const int pair = s_pair[row];
    const bf16* src = p.x + (long long)(pair / p.top_k) * p.ldx + b * B;
    bf16* dst = p.xq + (long long)row * hd + b * B;
    if (p.quant == 1) {
      qdq_bf16_block<32>(src, dst, 1.0f);
    } else {
      qdq_bf16_block<16>(src, dst, p.a1_enc[s_e[pair]]);
    }
  }
}

// Mirrored by src/fused_moe/params.rs (MoeGemvParams).
struct MoeGemvParams {
  BsGemvParams g;            // the matrix kind's stacked weight (codes map, scales, k, kstages, stages,
                             // scale_tiles, scale_bias, out_scale), partials, counters; x, y, n, m unused
  const int4* slots;         // route's slots
  const int32_t* meta;       // route's [slots, rows]
  const int32_t* row_token;  // FC1 W4A16: x row of each row
  const float* row_weight;   // FC1: routing weight of each row
  const bf16* xin;           // FC1: x (gathered by row_token) or x^ rows; FC2: h rows
  bf16* out;                 // FC1: h [P, I]; FC2: y_rows [P, Hd]
  const float* w_enc;        // [E]: the NVFP4 weights' encode scales, or null
  const float* a_enc;        // [E]: the NVFP4 recipe's activation encode scales, or null
  int64_t ldin;              // elements between rows of xin
  int32_t rbs;               // 128-row blocks per expert of the stacked weight
  int32_t out_cols;          // I (FC1) or Hd (FC2)
  int32_t mode;              // kMoeFc1Gated, kMoeFc1Plain or 2 (FC2)
  int32_t act;               // kActSilu, kActSwigluOai, kActRelu2
  float limit;               // the activation's limit (+inf: none)
  int32_t gather;            // 1: xin row = row_token[row] (W4A16 FC1)
  int32_t max_slots;         // the slots region's capacity (a bound on meta[0])
  int32_t early;             // kMoeEarly*: when the first ring of weights is requested (MoeRows)
  const int32_t* ids;        // kMoeEarlyLocal (FC1): the call's [T, k] expert ids
  int32_t pairs;             // kMoeEarlyLocal: T k (<= kMoeEarlyPairs)
  int32_t experts;           // kMoeEarlyLocal: E
  int32_t slot_rows;         // kMoeEarlyLocal: the route's R
  int32_t reserved;          // zero (the struct is 64-byte aligned: BsGemvParams' TMA descriptor)
};
static_assert(sizeof(MoeGemvParams) == 384, "size must match src/fused_moe/params.rs");
static_assert(offsetof(MoeGemvParams, slots) == 256, "offset must match params.rs");
static_assert(offsetof(MoeGemvParams, ldin) == 320, "offset must match params.rs");
static_assert(offsetof(MoeGemvParams, early) == 356, "offset must match params.rs");
static_assert(offsetof(MoeGemvParams, ids) == 360, "offset must match params.rs");

// MoeGemvParams::early. kMoeEarlyNone: the PDL wait first, then the route's slots. kMoeEarlyRoute
// (FC2): the route's slots before the wait (see MoeRows::units). kMoeEarlyLocal (FC1 at
// T k <= kMoeEarlyPairs): each CTA computes the route's slots itself from ids (moe_local_slots),
// so its weights stream while the route kernel still runs.
constexpr int kMoeEarlyNone = 0;
constexpr int kMoeEarlyRoute = 1;
constexpr int kMoeEarlyLocal = 2;
constexpr int kMoeEarlyPairs = 64;
constexpr int kMoeEarlySlots = kMoeEarlyPairs + kMoeEarlyPairs / 8;  // min(E, P) + P / R, R >= 8

// A CTA's own copy of the route's slots (kMoeEarlyLocal).
struct MoeEarlySmem {
  int4 slots[kMoeEarlySlots];
  int32_t expert[kMoeEarlyPairs];  // pair p's expert, -1 outside [0, E)
  int32_t nslots[kMoeEarlyPairs];  // an expert's slot count at its first pair, else 0
};
static_assert(sizeof(MoeEarlySmem) == 1664, "src/fused_moe/mod.rs GEMV_STATIC_SMEM counts it");

// The route's slots (moe_route: experts ascending, expert e's rows start at the number of valid
// pairs of smaller experts, in runs of R) from ids, by every thread of the CTA (blockDim >= P):
// pair p's thread counts the valid pairs below and equal to its expert; the first pair of each
// expert writes that expert's slots after the slots of the smaller experts. Returns the slot
// count; s.slots is complete when it returns.
__device__ __noinline__ int moe_local_slots(const MoeGemvParams& mp, MoeEarlySmem& s) {
  const int P = min(mp.pairs, kMoeEarlyPairs), E = mp.experts, R = mp.slot_rows, tid = threadIdx.x;
  if (tid < P) {
    const int e = __ldcg(mp.ids + tid);  // L2: written by a kernel this one does not wait for
    s.expert[tid] = e >= 0 && e < E ? e : -1;
  }
  __syncthreads();
  const int e = tid < P ? s.expert[tid] : -1;
  int below = 0, count = 0;
  bool first = true;
  if (e >= 0) {
#pragma unroll 1
    for (int j = 0; j < P; ++j) {
      const int f = s.expert[j];
      below += f >= 0 && f < e;
      count += f == e;
      first = first && !(f == e && j < tid);
    }
  }
  const int mine = e >= 0 && first ? (count + R - 1) / R : 0;
  if (tid < P) s.nslots[tid] = mine;
  __syncthreads();
  int n = 0, before = 0;
#pragma unroll 1
  for (int j = 0; j < P; ++j) {
    const int c = s.nslots[j];
    n += c;
    if (s.expert[j] < e) before += c;  // experts -1 count no slots
  }
#pragma unroll 1
  for (int m = 0; m < mine; ++m)
    if (before + m < kMoeEarlySlots) s.slots[before + m] = make_int4(e, below + m * R, min(R, count - m * R), 0);
  __syncthreads();
  return min(n, kMoeEarlySlots);
}

constexpr int kMoeFc1Gated = 0;
constexpr int kMoeFc1Plain = 1;  // 2: FC2 (the plain store)

// bsgemv::gemv's Rows over the route's slots: unit row block rb is row block rb % rbs of slot
// rb / rbs's expert.
struct MoeRows {
  const MoeGemvParams& mp;
  MoeEarlySmem& es;
  const int4* sl;  // the route's slots, or es.slots (kMoeEarlyLocal)
  __device__ __forceinline__ int4 slot(int rb) const { return sl[rb / mp.rbs]; }
  // kMoeEarlyNone: after the wait for the route (PDL: everything before this point reads no
  // scratch). kMoeEarlyRoute (FC2): before its wait — FC2's PDL predecessor (FC1 or quant_rows)
  // released it only after its own wait, and FC1's waited for the route, so the route's slots
  // and meta are complete and visible here; only h (x of FC2) is not yet. kMoeEarlyLocal (FC1):
  // the slots from ids (moe_local_slots; ids were complete before the route released FC1: the
  // route waited for their producer first), nothing of the route's scratch. Either way the CTA
  // reads its units and asks for its first ring of weights (bsgemv::gemv's early_weights) before
  // its predecessor finishes, and waits in wait_inputs(), before staging any x row and before any
  // global write.
  __device__ __forceinline__ int units(int kstages) const {
    int n;
    if (mp.early == kMoeEarlyLocal) {
      n = moe_local_slots(mp, es);
    } else {
      if (mp.early != kMoeEarlyRoute) pdl_wait_then_release();  // kMoeEarlyNone
      n = mp.meta[0];
    }
    return min(n, mp.max_slots) * mp.rbs * kstages;
  }
  static constexpr bool kEarlyWeights = true;
  __device__ __forceinline__ bool early_weights() const { return mp.early != 0; }
  __device__ __forceinline__ void wait_inputs() const {
    if (mp.early != kMoeEarlyNone) pdl_wait_then_release();
  }
  __device__ __forceinline__ int per_cta(int units) const { return max(1, (units + int(gridDim.x) - 1) / int(gridDim.x)); }
  __device__ __forceinline__ int weight_block(int rb) const { return slot(rb).x * mp.rbs + rb % mp.rbs; }
  __device__ __forceinline__ int rows(int rb) const { return slot(rb).z; }
  __device__ __forceinline__ const bf16* x_row(int rb, int r) const {
    const int row = slot(rb).y + r;
    return mp.xin + (long long)(mp.gather ? mp.row_token[row] : row) * mp.ldin;
  }
  template <typename TOut, int NT, int kRowMul, int kHi>
  __device__ __forceinline__ void store(int rb, int row_base, int g, int t, const float (&v)[NT][4], const float (&)[2],
                                        bool) const {
    static_assert(kRowMul == 1 && kHi == 8, "FP4 weights: MMA rows g and g + 8");
    const int4 s = slot(rb);
    // The row of the expert's packed matrix that MMA row 0 of this warp holds (a multiple of 16).
    const int local = row_base - (rb / mp.rbs) * mp.rbs * bsgemv::kRows;
    float os = mp.g.out_scale;
    if (mp.w_enc != nullptr) os = os / mp.w_enc[s.x];
    if (mp.a_enc != nullptr) os = os / mp.a_enc[s.x];
    const int cols = mp.out_cols;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int tok = 8 * nt + 2 * t + c;
        if (tok >= s.z) continue;
        const long long row = s.y + tok;
        bf16* out = mp.out + row * cols;
        if (mp.mode == kMoeFc1Gated) {
          const int j = local / 2 + g;  // 8 gate rows, then their 8 up rows, per 16
          if (j < cols) {
            const float gv = __bfloat162float(__float2bfloat16_rn(v[nt][c] * os));
            const float uv = __bfloat162float(__float2bfloat16_rn(v[nt][2 + c] * os));
            out[j] = __float2bfloat16_rn(mp.row_weight[row] * moe_act_rt(mp.act, gv, uv, mp.limit));
          }
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = local + g + 8 * h;
            if (r >= cols) continue;
            const float y = v[nt][2 * h + c] * os;
            if (mp.mode == kMoeFc1Plain) {
              const float gv = __bfloat162float(__float2bfloat16_rn(y));
              out[r] = __float2bfloat16_rn(mp.row_weight[row] * moe_act_rt(mp.act, gv, 0.0f, mp.limit));
            } else {
              out[r] = __float2bfloat16_rn(y);
            }
          }
        }
      }
  }
};

// Mirrored by src/fused_moe/params.rs (MoeRowsParams): the h quantization and the combine.
struct MoeRowsParams {
  const int32_t* meta;        // route's [slots, rows]
  const int32_t* row_expert;  // [P]
  const int32_t* pair_row;    // [P]
  const float* a2_enc;        // [E] (NVFP4 recipe) or null
  bf16* h;                    // [P, I]: quantized in place
  const bf16* y_rows;         // [P, Hd]
  bf16* y;                    // [T, Hd], row stride ldy
  int64_t ldy;
  int32_t tokens, top_k, hidden, inter;
  int32_t quant;              // 1: MXFP8, 2: NVFP4
  int32_t max_rows;           // the call's T k (a bound on meta[1])
};
static_assert(sizeof(MoeRowsParams) == 88, "size must match src/fused_moe/params.rs");
static_assert(offsetof(MoeRowsParams, ldy) == 56, "offset must match params.rs");

// h^ = the recipe's quantize-then-dequantize of each row of h, in place: one thread per block
// (grid-stride over the plan's rows; rows past meta[1] idle).
__device__ __forceinline__ void moe_quant_rows(const MoeRowsParams& p) {
  pdl_wait_then_release();
  const int rows = min(p.meta[1], p.max_rows);
  const int B = p.quant == 1 ? 32 : 16, nb = p.inter / B;
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < (long long)rows * nb;
       idx += (long long)gridDim.x * blockDim.x) {
    const int row = int(idx / nb), b = int(idx % nb);
    bf16* src = p.h + (long long)row * p.inter + b * B;
    if (p.quant == 1) {
      qdq_bf16_block<32>(src, src, 1.0f);
    } else {
      qdq_bf16_block<16>(src, src, p.a2_enc[p.row_expert[row]]);
    }
  }
}

// y[t, o .. o + 7] = bf16(sum over t's valid slots, in slot order, of f32(y_rows[row, o ..])):
// one thread per 8 outputs, grid (ceil(Hd / 8 / 128), T).
__device__ __forceinline__ void moe_combine_rows(const MoeRowsParams& p) {
  pdl_wait_then_release();
  const int t = blockIdx.y, o = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (o >= p.hidden) return;
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int s = 0; s < p.top_k; ++s) {
    const int row = p.pair_row[t * p.top_k + s];
    if (row < 0) continue;
    const uint4 w = *reinterpret_cast<const uint4*>(p.y_rows + (long long)row * p.hidden + o);
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      acc[2 * j] += __uint_as_float(ws[j] << 16);
      acc[2 * j + 1] += __uint_as_float(ws[j] & 0xFFFF0000u);
    }
  }
  uint4 w;
  w.x = moe_pack_bf16x2(acc[0], acc[1]);
  w.y = moe_pack_bf16x2(acc[2], acc[3]);
  w.z = moe_pack_bf16x2(acc[4], acc[5]);
  w.w = moe_pack_bf16x2(acc[6], acc[7]);
  *reinterpret_cast<uint4*>(p.y + (long long)t * p.ldy + o) = w;
}

}  // namespace b12x

extern "C" __global__ void __launch_bounds__(b12x::kMoeRouteThreads)
    b12x_fused_moe_route(const __grid_constant__ b12x::MoeRouteParams p) {
  b12x::moe_route(p);
}

// Occupancy as gemm.blockscaled's decode kernels (blockscaled_gemv.cu).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define B12X_MOE_GEMV_MIN_CTAS(NT) ((NT) == 1 ? 2 : 1)
#else
#define B12X_MOE_GEMV_MIN_CTAS(NT) ((NT) == 1 ? 3 : 2)
#endif

#define B12X_MOE_GEMV(FMT, FMTNAME, NT)                                                                       \
  extern "C" __global__ void __launch_bounds__(32 * (b12x::bsgemv::kConsumers + 1), B12X_MOE_GEMV_MIN_CTAS(NT)) \
      b12x_fused_moe_decode_gemv_##FMTNAME##_nt##NT(const __grid_constant__ b12x::MoeGemvParams p) {          \
    __shared__ b12x::MoeEarlySmem s_early;                                                                   \
    const int4* sl = p.early == b12x::kMoeEarlyLocal ? s_early.slots : p.slots;                               \
    b12x::bsgemv::gemv<b12x::bsgemv::Fmt::FMT, NT, 1, b12x::bf16>(p.g, b12x::MoeRows{p, s_early, sl});        \
  }
B12X_MOE_GEMV(Nvfp4, nvfp4, 1)
B12X_MOE_GEMV(Nvfp4, nvfp4, 2)
B12X_MOE_GEMV(Mxfp4, mxfp4, 1)
B12X_MOE_GEMV(Mxfp4, mxfp4, 2)

extern "C" __global__ void __launch_bounds__(256) b12x_fused_moe_quant_rows(const __grid_constant__ b12x::MoeRowsParams p) {
  b12x::moe_quant_rows(p);
}

extern "C" __global__ void __launch_bounds__(128)
    b12x_fused_moe_combine_rows(const __grid_constant__ b12x::MoeRowsParams p) {
  b12x::moe_combine_rows(p);
}

// Router logits routed inside the op (Query::router): moe.route_topk's kernel into the scratch's
// topk_ids / topk_weights, launched first.
B12X_ROUTE_TOPK_ENTRIES(b12x_fused_moe_route_topk_)

// ==== the grouped path (large T) =================================================================
// Grouping for any P: zero the counts; one thread per pair takes its rank in its expert
// (atomicAdd: the order of rows inside an expert is not stable, and need not be — every row's
// FC1 / FC2 outputs depend on that row only, and the combine sums in slot order through pair_row,
// so y is bitwise reproducible); one CTA scans the counts into row and slot starts (slots of R =
// the tile's BM rows); one thread per pair writes its row's token, expert and weight; x^ rows
// (a copy for W4A16, MXFP8 / NVFP4 quantize-then-dequantize otherwise). Then FC1 as
// gemm.blockscaled's tiled kernel per (slot, N tile) into gu (the interleaved gate/up rows,
// BF16), the activation kernel into h (and h^), FC2 the same into y_rows, the combine.

#include "b12x/bsgemm_tile.cuh"
#include "b12x/bsgemm_wgmma.cuh"

namespace b12x {

// Mirrored by src/fused_moe/params.rs (MoeGroupParams).
struct MoeGroupParams {
  const int32_t* ids;     // [T, k] (route_topk's scratch output or the caller's)
  const float* weights;   // [T, k]
  const bf16* x;          // [T, Hd], row stride ldx
  const float* a1_enc;    // [E] (NVFP4 recipe) or null
  int32_t* counts;        // [E] scratch
  int32_t* rank;          // [P] scratch: rank of pair p in its expert, -1 masked
  int32_t* row_start;     // [E] scratch
  int4* slots;            // [max_slots]
  int32_t* meta;          // [3]: slots, rows, tail slots
  int32_t* row_token;     // [P]
  int32_t* row_expert;    // [P]
  float* row_weight;      // [P]
  int32_t* pair_row;      // [P]
  bf16* xq;               // [P, Hd]: x^ rows
  unsigned int* error;    // [1]
  int64_t ldx;
  int32_t tokens, top_k, experts, hidden;
  int32_t slot_rows;      // R = BM
  int32_t quant;          // 0: copy (W4A16), 1: MXFP8, 2: NVFP4
  int32_t max_rows;       // the call's P (a bound on meta[1])
  int32_t kperm;          // x^ rows in the wgmma tiles' fragment order (moe_store_group)
  int4* tail_slots;       // [E] (tail_rows > 0): the experts' tail slots, meta[2] of them
  int32_t tail_rows;      // 0, or the tail slots' rows (< R): an expert's last c % R rows go to a
                          // tail slot when 0 < c % R <= tail_rows (the 64-row tile runs them)
  int32_t reserved;
};
static_assert(sizeof(MoeGroupParams) == 176, "size must match src/fused_moe/params.rs");
static_assert(offsetof(MoeGroupParams, tail_slots) == 160, "offset must match params.rs");
static_assert(offsetof(MoeGroupParams, ldx) == 120, "offset must match params.rs");
static_assert(offsetof(MoeGroupParams, slot_rows) == 144, "offset must match params.rs");

__device__ __forceinline__ void moe_group_zero(const MoeGroupParams& p) {
  pdl_wait_then_release();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.experts; i += gridDim.x * blockDim.x) p.counts[i] = 0;
}

__device__ __forceinline__ void moe_group_count(const MoeGroupParams& p) {
  pdl_wait_then_release();
  const int P = p.tokens * p.top_k;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < P; i += gridDim.x * blockDim.x) {
    const int e = p.ids[i];
    if (e >= 0 && e < p.experts) {
      p.rank[i] = atomicAdd(&p.counts[e], 1);
    } else {
      p.rank[i] = -1;
      atomicOr(p.error, kMoeDecodeFaultExpertId);
    }
  }
}

// One CTA of 1024 threads: exclusive scan of (rows << 32 | slots) over the experts (thread i
// takes a contiguous run of ceil(E / 1024)), the slots of each expert, meta (slots, rows, tail
// slots). With tail slots (tail_rows > 0) the low word packs (tail slots << 16 | slots): an
// expert of c rows has c / R full slots, then its last c % R rows in one more R-row slot when
// c % R > tail_rows, else (when nonzero) in a tail slot; both totals stay below 2^16 (the plan
// checks its slot capacity). Rows stay in expert order either way: a tail slot's rows follow its
// expert's last full slot's.
__device__ __forceinline__ void moe_group_scan(const MoeGroupParams& p) {
  __shared__ unsigned long long s_wsum[32];
  pdl_wait_then_release();
  const int E = p.experts, R = p.slot_rows, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int TR = p.tail_rows;
  const int per = (E + blockDim.x - 1) / blockDim.x;
  const int lo = min(tid * per, E), hi = min(lo + per, E);
  // (full slots incl. a last partial one, tail slots) of c rows
  auto split = [&](int c) {
    const int rem = c % R;
    const bool tail = TR > 0 && rem > 0 && rem <= TR;
    return make_int2(c / R + (rem > 0 && !tail ? 1 : 0), tail ? 1 : 0);
  };
  auto packed = [&](int e) {
    const int c = p.counts[e];
    const int2 s = split(c);
    return (static_cast<unsigned long long>(unsigned(c)) << 32) | ((unsigned(s.y) << 16) + unsigned(s.x));
  };
  unsigned long long sum = 0;
  for (int e = lo; e < hi; ++e) sum += packed(e);
  unsigned long long incl = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long y = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += y;
  }
  if (lane == 31) s_wsum[warp] = incl;
  __syncthreads();
  unsigned long long run = incl - sum, total = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) {
    if (w < warp) run += s_wsum[w];
    total += s_wsum[w];
  }
  // Without tail slots the low word is the slot count alone (it may pass 2^16).
  const unsigned long long smask = TR > 0 ? 0xFFFFull : 0xFFFFFFFFull;
  for (int e = lo; e < hi; ++e) {
    const int c = p.counts[e], r0 = int(run >> 32), s0 = int(run & smask);
    const int2 s = split(c);
    p.row_start[e] = r0;
    for (int j = 0; j < s.x; ++j) p.slots[s0 + j] = make_int4(e, r0 + j * R, min(R, c - j * R), 0);
    if (s.y) p.tail_slots[int((run >> 16) & 0xFFFFull)] = make_int4(e, r0 + s.x * R, c - s.x * R, 0);
    run += packed(e);
  }
  if (tid == 0) {
    p.meta[0] = int(total & smask);
    p.meta[1] = int(total >> 32);
    p.meta[2] = TR > 0 ? int((total >> 16) & 0xFFFFull) : 0;
  }
}

__device__ __forceinline__ void moe_group_place(const MoeGroupParams& p) {
  pdl_wait_then_release();
  const int P = p.tokens * p.top_k;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < P; i += gridDim.x * blockDim.x) {
    const int r = p.rank[i];
    int row = -1;
    if (r >= 0) {
      const int e = p.ids[i];
      row = p.row_start[e] + r;
      p.row_token[row] = i / p.top_k;
      p.row_expert[row] = e;
      p.row_weight[row] = p.weights[i];
    }
    p.pair_row[i] = row;
  }
}

// x^ rows: one thread per block of B values (8: a copy; 32: MXFP8; 16: NVFP4), grid-stride;
// with kperm one thread per 32-k group (its 32 / B blocks), stored in fragment order.
__device__ __forceinline__ void moe_group_gather(const MoeGroupParams& p) {
  pdl_wait_then_release();
  const int rows = min(p.meta[1], p.max_rows);
  if (p.kperm) {
    const int ng = p.hidden / 32;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < (long long)rows * ng;
         idx += (long long)gridDim.x * blockDim.x) {
      const int row = int(idx / ng), b = int(idx % ng);
      const bf16* src = p.x + (long long)p.row_token[row] * p.ldx + b * 32;
      uint32_t w[16];
      if (p.quant == 0) {
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const uint4 x = *reinterpret_cast<const uint4*>(src + 8 * v);
          w[4 * v] = x.x, w[4 * v + 1] = x.y, w[4 * v + 2] = x.z, w[4 * v + 3] = x.w;
        }
      } else if (p.quant == 1) {
        qdq_bf16_words<32>(src, 1.0f, w, 0);
      } else {
        const float enc = p.a1_enc[p.row_expert[row]];
        qdq_bf16_words<16>(src, enc, w, 0);
        qdq_bf16_words<16>(src + 16, enc, w, 8);
      }
      moe_store_group(p.xq + (long long)row * p.hidden + b * 32, w);
    }
    return;
  }
  const int B = p.quant == 0 ? 8 : p.quant == 1 ? 32 : 16, nb = p.hidden / B;
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < (long long)rows * nb;
       idx += (long long)gridDim.x * blockDim.x) {
    const int row = int(idx / nb), b = int(idx % nb);
    const bf16* src = p.x + (long long)p.row_token[row] * p.ldx + b * B;
    bf16* dst = p.xq + (long long)row * p.hidden + b * B;
    if (p.quant == 0) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else if (p.quant == 1) {
      qdq_bf16_block<32>(src, dst, 1.0f);
    } else {
      qdq_bf16_block<16>(src, dst, p.a1_enc[p.row_expert[row]]);
    }
  }
}

// Mirrored by src/fused_moe/params.rs (MoeTileParams).
struct MoeTileParams {
  BsGemmParams g;          // the matrix kind's stacked codes / scales, x = the rows (x^ or h), y = the
                           // output rows (gu or y_rows), n = the matrix's rows, mtiles 1, no split
  const int4* slots;
  const int32_t* meta;
  const float* w_enc;      // [E] NVFP4 weight encode scales or null
  const float* a_enc;      // [E] NVFP4-recipe activation encode scales or null
  int32_t ntiles;          // N tiles per slot: ceil(n / BN)
  int32_t rbs;             // 128-row blocks per expert of the stacked weight
  int32_t max_slots;
  // 1: the tail slots' launch (the wgmma tiles only): it neither waits for the kernel before it
  // (the 128-row tile on the same rows) nor reads what that kernel writes, and CTA 0 waits for
  // it at exit instead, so that the launch starts on SMs the big tile's CTAs leave while the
  // rest finish, and the next kernel's wait (on this grid's completion) still covers both. What
  // it reads was complete before the big tile's CTAs passed their waits, all of which preceded
  // this grid's launch (their pdl_launch_dependents follow the wait): x^ / h by TMA and the
  // scales by bulk copy (through L2), the slots and meta with ld.global.cg (no L1 line left by
  // an earlier call).
  int32_t late_wait;
};
static_assert(sizeof(MoeTileParams) == 200, "size must match src/fused_moe/params.rs");
static_assert(offsetof(MoeTileParams, slots) == 152, "offset must match params.rs");
static_assert(offsetof(MoeTileParams, ntiles) == 184, "offset must match params.rs");

// A tile's entry (the wgmma tiles keep the CTA's first kMoeTileTab in shared memory, so that the
// producing thread's tile start reads no global memory and divides nothing): x = the slot's
// expert | N tile nt << 12 (E <= 4096), y = its first row, z = its rows, w = the epilogue's
// out_scale (alpha over the NVFP4 weight and activation encode scales) as f32 bits.
constexpr int kMoeTileTab = 64;
// (Slots and meta are read past L1 (ld.global.cg): the tail slots' launch reads them before any
// grid-dependency wait — see MoeTileParams::late_wait.)
__device__ __forceinline__ int4 moe_slot_entry(const MoeTileParams& mp, int slot, int nt) {
  const int4 s = __ldcg(mp.slots + slot);
  float os = mp.g.out_scale;
  if (mp.w_enc != nullptr) os = os / mp.w_enc[s.x];
  if (mp.a_enc != nullptr) os = os / mp.a_enc[s.x];
  return make_int4(s.x | (nt << 12), s.y, s.z, __float_as_int(os));
}
__device__ __forceinline__ int4 moe_tile_entry(const MoeTileParams& mp, int tile) {
  const int slot = tile / mp.ntiles;
  return moe_slot_entry(mp, slot, tile - slot * mp.ntiles);
}
// Tile `tile` (= slot * ntiles + N tile) of entry en. The tiled bodies compute n0 = tile * BN
// (mtiles = 1: m0 = 0), so the weight, scale and output bases are moved back by slot * ntiles * BN
// rows (a multiple of 128) and forward to the slot's expert and rows; its bounds (row < n, m)
// then hold exactly the slot's expert's rows and the slot's rows.
template <int BN>
__device__ __forceinline__ BsGemmParams moe_tile_params_of(const MoeTileParams& mp, int tile, int4 en) {
  static_assert(BN % 128 == 0, "the shift stays on 128-row scale blocks");
  const int e = en.x & 0xFFF, nt = en.x >> 12;
  BsGemmParams p = mp.g;
  const long long shift = (long long)(tile - nt) * BN;  // slot * ntiles * BN
  const long long wrow = (long long)e * mp.rbs * bsgemv::kRows - shift;
  p.codes = reinterpret_cast<const unsigned char*>(reinterpret_cast<uintptr_t>(mp.g.codes) +
                                                   uintptr_t(wrow * mp.g.row_bytes));
  p.scales = reinterpret_cast<const unsigned char*>(reinterpret_cast<uintptr_t>(mp.g.scales) +
                                                    uintptr_t(wrow / bsgemv::kRows * mp.g.scale_tiles * 512));
  p.x = mp.g.x + (long long)en.y * mp.g.ldx;
  p.y = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(mp.g.y) +
                                uintptr_t(((long long)en.y * mp.g.ldy - shift) * (long long)sizeof(bf16)));
  p.n = int(shift) + mp.g.n;
  p.m = en.z;
  p.out_scale = __int_as_float(en.w);
  return p;
}
// The mma.sync tile's: CTA blockIdx.x = slot * ntiles + N tile.
template <int BN>
__device__ __forceinline__ BsGemmParams moe_tile_params(const MoeTileParams& mp, int slot) {
  return moe_tile_params_of<BN>(mp, slot * mp.ntiles, moe_slot_entry(mp, slot, 0));
}

// The mma.sync tiled body (bsgemm_tile.cuh): BM = 32 WM slot rows by BN = 32 WN weight rows.
template <bsgemv::Fmt F, int WM, int WN>
__device__ __forceinline__ void moe_tile(const MoeTileParams& mp) {
  pdl_wait_then_release();
  const int slot = int(blockIdx.x) / mp.ntiles;
  if (slot >= min(mp.meta[0], mp.max_slots)) return;  // CTA-uniform, before any barrier
  const BsGemmParams p = moe_tile_params<32 * WN>(mp, slot);
  bsgemm::gemm<F, WM, WN, bf16>(p);
}

// Mirrored by src/fused_moe/params.rs (MoeTileAct): FC1's activation in the wgmma tiles' epilogue
// (the `_act` kernels: W4A16 recipes, gated activations, PlanOptions::fused_activation):
// h[row, j] = bf16(w_row act(bf16(g), bf16(u))) from the tile's gate / up accumulators, stored in
// the fragment order of h's 32-j groups — the values act_rows would write from gu (not launched).
struct MoeTileAct {
  bf16* h;                   // [T k rows, inter]
  const float* row_weight;   // [T k rows]
  int32_t inter, act;
  float limit;
  int32_t reserved;
};
static_assert(sizeof(MoeTileAct) == 32, "size must match src/fused_moe/params.rs");

// Mirrored by src/fused_moe/params.rs (MoeTileTmaParams): the wgmma tile's parameters, the
// mma.sync tile's plus FC1's activation and two TMA descriptors.
struct MoeTileTmaParams {
  MoeTileParams t;
  MoeTileAct act;      // FC1 only (zeros elsewhere)
  TmaDescriptor xmap;  // the call's rows (x^ / h) [T k rows, K] bf16: boxes 64 k x BM (128, 64 or 32) rows, 128-byte swizzle
  TmaDescriptor wmap;  // the stacked codes [E rbs 128 rows, K / 2 bytes] as bf16 pairs: boxes 32 x 256 rows,
                       // 64-byte swizzle
};
static_assert(offsetof(MoeTileTmaParams, act) == 200, "offset must match params.rs");
static_assert(offsetof(MoeTileTmaParams, xmap) == 256, "offset must match params.rs");
static_assert(offsetof(MoeTileTmaParams, wmap) == 384, "offset must match params.rs");
static_assert(sizeof(MoeTileTmaParams) == 512, "size must match params.rs");

// SM90: the wgmma tile, BM = 128 (or, the wg64 / wg32 kernels, 64 / 32) slot rows — the wgmma's N — by BN =
// 256 weight rows in 4 / MT warpgroups of MT
// m64 weight tiles (kMoeWgMT; src/fused_moe/mod.rs launches WG_TILE_THREADS = kMoeWgThreads) —
// the math of bsgemm::wgemm (bsgemm_wgmma.cuh: the A fragment, the weight, dequantized from
// shared memory into registers, x from shared memory by descriptor; the same scale words and
// epilogue) with x in each 32-k group's fragment order (moe_store_group: the gather and the
// activation kernel write it so, kperm), which lets a lane convert whole words with the decode
// GEMV's pair<Q> instead of bsgemm::wgemm's lane-dependent Fp4LanePair, and with its own ring:
// - one thread at a time fills a stage with TMA / bulk copies — x's two 64-k slabs (the 128-byte
//   swizzle wgmma reads), the codes box (the 64-byte swizzle, which is w_pos<false>'s chunk
//   order), the scale tiles of the live 128-row blocks — completing on the stage's `full`
//   barrier; no other thread computes a load address (bsgemm::load_stage's per-thread cp.async
//   addressing was ~37% of wgemm's k loop);
// - wgmma groups stay in flight across k-tiles (no wait_group 0 and no block barrier per
//   k-tile): kAb A-register buffers, each warp arriving on the stage's `empty` barrier at step 1
//   of the next k-tile, once wait_group says its warpgroup's MMAs of the stage are complete, and
//   counting itself in s_rel; the warp that completes the count (the last to leave the stage)
//   refills it at its step 3, S - 1 k-tiles ahead of the one being read. (Until session 60 tid 0
//   refilled every stage, first waiting for all 16 warps' arrivals: its warpgroup stalled on
//   the slowest warp each k-tile. A 17th producer warp does not fit the 128-register consumers:
//   544 threads cap ptxas at 96 registers.)
// - persistent CTAs (the host launches min(tiles, PlanOptions::tile_ctas or one per SM)): CTA b
//   walks the live tiles b, b + grid, ... (tile = slot ntiles + N tile; the live count is read on
//   the device, so a captured graph serves any routing) as one stream of k-tiles through the
//   ring — the next tile's first stages load under this tile's last k-tiles and epilogue, and
//   the barrier setup, scale table and descriptor prefetch happen once per CTA, not per tile.
// Rows past the slot in x (the next slot's, or zeros past the call's rows) reach only output
// columns the epilogue does not store; codes and x past K read as zeros (TMA bounds), so a scale
// tile not copied past K multiplies zeros. With one live 128-row block, the second block's codes
// are the next expert's and its scale words whatever the stage held: those products land in
// weight rows past n, which the epilogue does not store either (s_tab, indexed by a byte, holds
// no Inf or NaN). Each tile's params (pointers moved to its slot, as the mma.sync tile's) live in a
// shared ring for the epilogue (s_p). Other targets build a trapping body (Rust lists it on SM90 only).
#if B12X_SM90_FEATURES
namespace wg {
// D[64 x 32] += A[64 x 16] B[16 x 32]: wg::mma_m64n64k16_rs's operands and layout at N = 32
// (d[4 j + e], j < 4), for the wg32 tiles only (kept here so that b12x-core's header, which every
// crate's kernels hash, stays as it was).
__device__ __forceinline__ void mma_m64n32k16_rs(float (&d)[16], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
        "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int(accumulate)));
}
}  // namespace wg
#endif
constexpr int kMoeWgMT = 1;
constexpr int kMoeWgThreads = 128 * 4 / kMoeWgMT;

// FC1's epilogue with the activation fused (the `_act` kernels, MT = 1): the
// warp's weight rows r + g and r + 8 + g (r: its first expert-local FC1 row, a multiple of 16) are
// the gate and the up row of j = r / 2 + g (FC1's interleave: gate j at 16 (j / 8) + j % 8, up 8
// further). Each value is finish's bf16 output (acc times out_scale, rounded) taken back to f32,
// as act_rows reads gu; h = bf16(w_row act(g, u)) as act_rows computes it. Lanes g and g ^ 1
// (lane ^ 4) hold j and j ^ 1 of tokens 2t and 2t + 1: after one exchange the even lane stores
// token 2t's pair (j, j + 1), the odd lane token 2t + 1's — pair a = j / 2 % 16 of the 32-j group
// r / 64 at word 4 (a % 4) + a / 4 (moe_store_group's order; a / 4 is the warp's (r / 16) % 4).
template <int ACT, int XT>
__device__ __forceinline__ void moe_act_epilogue(const MoeTileTmaParams& mpt, const BsGemmParams& p, int n0, int nrow0,
                                                 const float (&acc)[XT][4]) {
  const MoeTileParams& mp = mpt.t;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int r = n0 - (p.n - mp.g.n) + nrow0;  // p.n = the tile's row shift + n
  if (r >= mp.g.n) return;                    // warp-uniform: n = 2 inter, a multiple of 64
  const long long row0 = (p.x - mp.g.x) / mp.g.ldx;  // the slot's first row
  const long long inter = mpt.act.inter;
  bf16* h = mpt.act.h + row0 * inter + (r >> 6) * 32 + 2 * (4 * (g >> 1) + ((r >> 4) & 3));
  // Row weights past L1, as the slots and meta: the tail slots' launch (late_wait) reads them
  // before any grid-dependency wait.
  const float* rw = mpt.act.row_weight + row0;
  const float os = p.out_scale, limit = mpt.act.limit;
  const bool odd = (g & 1) != 0;
#pragma unroll
  for (int jt = 0; jt < XT; ++jt) {
    float v[2];
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int tok = 8 * jt + 2 * t + b;
      const float gv = __bfloat162float(__float2bfloat16_rn(acc[jt][b] * os));
      const float uv = __bfloat162float(__float2bfloat16_rn(acc[jt][2 + b] * os));
      v[b] = tok < p.m ? __ldcg(rw + tok) * moe_act<ACT>(gv, uv, limit) : 0.0f;
    }
    const float other = __shfl_xor_sync(0xffffffffu, odd ? v[0] : v[1], 4);
    const int tok = 8 * jt + 2 * t + (odd ? 1 : 0);
    if (tok < p.m)
      *reinterpret_cast<uint32_t*>(h + tok * inter) = odd ? moe_pack_bf16x2(other, v[1]) : moe_pack_bf16x2(v[0], other);
  }
}
// kAct: FC1 with the activation in the epilogue (the `_act` kernels; the others' code is as
// before the fused epilogue existed).
template <bsgemv::Fmt F, int kBm, bool kAct>
__device__ __forceinline__ void moe_tile_wg(const MoeTileTmaParams& mpt) {
#if B12X_SM90_FEATURES
  constexpr int kThreads = kMoeWgThreads;
  using T = bsgemm::Tile<F, kBm / 32, 8>;
  constexpr int BM = T::BM, BN = T::BN, MT = kMoeWgMT;
  constexpr int kTw = F == bsgemv::Fmt::Nvfp4 ? 2 : 1;  // scale tiles per k-tile and 128-row block
  static_assert(F == bsgemv::Fmt::Nvfp4 || F == bsgemv::Fmt::Mxfp4, "FP4 weights");
  static_assert((BM == 128 || BM == 64 || BM == 32) && BN == 256 && T::kX == 2 * BM * 128 && T::kW == BN * 64, "the stage's boxes");
  static_assert(T::kStage % 1024 == 0, "1024-byte aligned stages");
  struct Producer {
    const unsigned char* scales;  // the tile's first 128-row block's scale tiles
    int xrow0, wrow0, blocks, scale_tiles;
    int j, kt;                    // the next k-tile to produce: k-tile kt of the CTA's tile j
  };
  // The epilogue params of the CTA's tiles j (pointers moved to the tile's slot) at j % kPr. The
  // producing thread writes tile j's before it issues the tile's first k-tile n = j ktiles (so the
  // consumers' full-barrier waits acquire it); for n >= S it has first waited until every warp arrived on
  // the empty barrier of k-tile n - S, which a warp does in k-tile n - S + 1, of tile >= j - (S -
  // 1) > j - kPr: every warp has finished the epilogue of tile j - kPr, the entry's last reader.
  constexpr int kPr = 4;
  __shared__ BsGemmParams s_p[kPr];
  __shared__ Producer s_prod;
  __shared__ __align__(8) uint64_t s_full[bsgemm::kMaxStages], s_empty[bsgemm::kMaxStages];
  // Per stage, the releases so far (every warp adds one per k-tile it leaves): the warp whose add
  // completes a round of kWarps refills the stage (see the k loop).
  __shared__ uint32_t s_rel[bsgemm::kMaxStages];
  constexpr int kWarps = kThreads / 32;
  static_assert((kWarps & (kWarps - 1)) == 0, "a round of releases is the counter's low bits");
  __shared__ uint32_t s_tab[256];
  extern __shared__ __align__(16) unsigned char s_dyn[];
  const MoeTileParams& mp = mpt.t;
  const uint32_t ring = (smem_addr(s_dyn) + 1023u) & ~1023u;  // the launch adds 1024 bytes of slack
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t full0 = smem_addr(s_full), empty0 = smem_addr(s_empty);
  if (tid == 0) {
    tma_prefetch_descriptor(&mpt.xmap);
    tma_prefetch_descriptor(&mpt.wmap);
  }
  // The tail slots' launch (late_wait) waits for the big tile at exit — CTA 0, whether it has
  // tiles or not, so that this grid completes only after that one; the others leave when done.
  const bool late = mp.late_wait != 0, waits_last = late && blockIdx.x == 0;
  if (late) {
    pdl_launch_dependents();
  } else {
    pdl_wait_then_release();
  }
  // Persistent: CTA b takes the live tiles (slot, N tile) = b, b + grid, ... (tile = slot ntiles + N
  // tile) as one stream of k-tiles through one ring, so a tile's first stages load under the
  // previous tile's last k-tiles and epilogue.
  const int tiles = min(__ldcg(mp.meta), mp.max_slots) * mp.ntiles, tile0 = int(blockIdx.x), tstride = int(gridDim.x);
  if (tile0 >= tiles) {  // CTA-uniform, before any barrier
    if (waits_last) pdl_wait();
    return;
  }
  const int S = mp.g.stages, ktiles = mp.g.ktiles;
  // S >= 2: a refill would otherwise overwrite the stage being read; S <= kPr: s_p's reuse (the
  // host plans 2..4).
  if (S < 2 || S > kPr) __trap();
  const int mine = (tiles - tile0 + tstride - 1) / tstride, total = mine * ktiles;  // the CTA's tiles, k-tiles
  __shared__ int4 s_tiles[kMoeTileTab];  // moe_tile_entry of the CTA's tiles j < kMoeTileTab
  for (int j = tid; j < min(mine, kMoeTileTab); j += kThreads) s_tiles[j] = moe_tile_entry(mp, tile0 + j * tstride);
  if (tid == 0) s_prod.j = 0, s_prod.kt = 0;
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kWarps);
      s_rel[s] = 0;
    }
    mbar_fence_init();
  }
  bsgemv::fill_scale_table<F>(s_tab, mp.g.scale_bias, tid, kThreads);
  __syncthreads();

  // The CTA's next k-tile n (k-tile kt of its tile j: s_prod's counters) into stage st, by tid 0
  // for the first S, then by lane 0 of the last warp to release stage st; at a tile's first
  // k-tile, the tile's producer fields and epilogue params first (s_prod passes from one producing
  // thread to the next through the empty barrier: the writer's warp arrives after writing, the
  // next producer waits on it).
  // Called for n = 0, 1, ... in order (one producing thread at a time, each after the previous
  // one's release through the empty barriers), so the k-tile's place comes from s_prod (j, kt)
  // with no division, and the tile's slot from s_tiles (no global load) for j < kMoeTileTab.
  auto produce = [&](int st) {
    const int j = s_prod.j, kt = s_prod.kt;
    if (kt == 0) {
      const int tile = tile0 + j * tstride;
      const int4 en = j < kMoeTileTab ? s_tiles[j] : moe_tile_entry(mp, tile);
      const int e = en.x & 0xFFF, nt = en.x >> 12;
      s_p[j % kPr] = moe_tile_params_of<BN>(mp, tile, en);
      Producer pr;
      pr.xrow0 = en.y;
      pr.wrow0 = (e * mp.rbs) * bsgemv::kRows + nt * BN;
      pr.blocks = nt * BN + 128 < mp.g.n ? 2 : 1;
      pr.scale_tiles = mp.g.scale_tiles;
      pr.scales = mp.g.scales + (long long)(e * mp.rbs + 2 * nt) * mp.g.scale_tiles * 512;
      pr.j = j, pr.kt = 0;
      s_prod = pr;
    }
    const Producer pr = s_prod;
    if (kt + 1 == ktiles) {
      s_prod.j = j + 1, s_prod.kt = 0;
    } else {
      s_prod.kt = kt + 1;
    }
    const uint32_t xs = ring + uint32_t(st) * T::kStage, bar = full0 + 8 * st;
    const int nsc = min(kTw, pr.scale_tiles - kt * kTw);  // scale tiles of this k-tile (none past K)
    const uint32_t sbytes = nsc > 0 ? uint32_t(pr.blocks * nsc * 512) : 0u;
    mbar_arrive_expect_tx(bar, T::kX + T::kW + sbytes);
    tma_load_2d(xs, &mpt.xmap, kt * 128, pr.xrow0, bar);
    tma_load_2d(xs + BM * 128, &mpt.xmap, kt * 128 + 64, pr.xrow0, bar);
    tma_load_2d(xs + T::kX, &mpt.wmap, kt * 32, pr.wrow0, bar);
    for (int rb = 0; rb < pr.blocks && nsc > 0; ++rb)
      bulk_copy_g2s(xs + T::kX + T::kW + uint32_t(rb * kTw * 512),
                    pr.scales + ((long long)rb * pr.scale_tiles + kt * kTw) * 512, uint32_t(nsc * 512), bar);
  };
  if (tid == 0)
    for (int s = 0; s < S && s < total; ++s) produce(s);
  __syncwarp();  // warp 0 converged before the warpgroup's .aligned wgmma instructions

  // Warpgroup wgi owns weight rows 64 MT wgi .. as MT m64 tiles i; its warp wl rows 64 i + 16 wl
  // + g and + 8 of each (bsgemm::wgemm's).
  const int wgi = warp >> 2, wl = warp & 3;
  const int nrow0 = 64 * MT * wgi + 16 * wl;
  const uint32_t sc_blk = uint32_t(nrow0 >> 7);
  auto sc_off = [&](int i, int h) { return bsgemm::wg_scale_off(nrow0 + 64 * i + g + 8 * h); };
  const int tsh = 8 * (t >> 1);  // NVFP4: the scale byte of the lane's 8 k within a 32-k group

  constexpr int XT = BM / 8;  // the wgmma's n8 column tiles (x rows)
  float acc[MT][XT][4];
  constexpr int kAb = 3;  // A buffers: kAb - 1 MMA groups in flight while the next step dequantizes
  static_assert(kAb == 2 || kAb == 3, "two or three A buffers");
  uint32_t a[kAb][MT][4];  // [buffer][m64 tile][register]: buffer s % kAb at k16 step s of every k-tile
  // Steps 2c and 2c + 1 read x in the fragment order of 32-k group c (moe_store_group): lane t's
  // MMA slots (2t, 2t + 1) and (2t + 8, 2t + 9) are k 32c + 8t + 4 h2 + (0, 1) and + (2, 3) of
  // step 2c + h2 — pairs 2 h2 and 2 h2 + 1 of the layout-v2 word of 8 k at 32c + 8t. wq: that
  // word of rows g and g + 8 of each m64 tile; sq: its block scale (NVFP4 16-k block 2c + t / 2,
  // MXFP4 32-k block c) as bf16x2.
  uint32_t wq[MT][2], sq[MT][2];
  int st = 0, phase = 0, n = 0;  // n: the CTA's k-tile being read (stage st)
  bool last = false;             // lane 0: its warp was the last to leave k-tile n - 1
  for (int j = 0; j < mine; ++j) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int c = 0; c < XT; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.0f;
  for (int kt = 0; kt < ktiles; ++kt, ++n) {
    mbar_wait(full0 + 8 * st, uint32_t(phase));
    const int prev = st == 0 ? S - 1 : st - 1;  // k-tile n - 1's stage
    const uint32_t xs = ring + uint32_t(st) * T::kStage, ws = xs + T::kX, ss = ws + T::kW;
    const uint64_t xdesc = wg::desc_sw128(xs);
    uint32_t scw[MT][2][kTw];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int u = 0; u < kTw; ++u) scw[i][h][u] = bsgemv::ld_shared_u32(ss + sc_off(i, h) + 512u * (kTw * sc_blk + u));
#pragma unroll
    for (int s = 0; s < 8; ++s) {  // k16 steps
      uint32_t(&ab)[MT][4] = a[s % kAb];
      // The MMAs kAb steps back, the last readers of this buffer, are done (three buffers: at
      // steps 0 and 1 the last readers are the previous k-tile's steps 6 and 7, two back).
      if (kAb == 3 && s < 2) {
        wg::wait<1>();
      } else {
        wg::wait<kAb - 1>();
      }
      if (s == 1 && n > 0) {  // k-tile n - 1's MMAs and the warp's reads of its stage are done
        __syncwarp();
        if (lane == 0) {
          mbar_arrive(empty0 + 8 * prev);
          last = (atomicAdd(&s_rel[prev], 1u) & (kWarps - 1)) == kWarps - 1;
        }
        __syncwarp();  // converged before the step's .aligned wgmma instructions
      }
      if (s == 3 && n > 0) {
        // The last warp to leave k-tile n - 1 refills its stage with k-tile n - 1 + S (no warp
        // waits for the slowest one). The count only elects: the refill is ordered after every
        // warp's reads by the empty barrier's wait, which returns at once here.
        if (last && n - 1 + S < total) {
          mbar_wait(empty0 + 8 * prev, uint32_t(st == 0 ? phase ^ 1 : phase));  // k-tile n - 1's round
          produce(prev);  // k-tile n - 1 + S
        }
        last = false;
        __syncwarp();  // converged again before the warpgroup's .aligned wgmma instructions
      }
      if ((s & 1) == 0) {  // group c = s / 2: the lane's words (conflict free: rows g = 0..7 x words t
                           // cover the 32 banks under the 64-byte swizzle) and their scales
        const int c = s >> 1;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            wq[i][h] = bsgemv::ld_shared_u32(ws + bsgemm::w_pos<false>(nrow0 + 64 * i + g + 8 * h, c) + 4u * uint32_t(t));
            const uint32_t word = scw[i][h][kTw == 2 ? c >> 1 : 0];
            const int shift = F == bsgemv::Fmt::Nvfp4 ? 16 * (c & 1) + tsh : 8 * c;
            sq[i][h] = s_tab[(word >> shift) & 0xFF];
          }
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const bool h2 = (s & 1) != 0;
        ab[i][0] = bsgemv::hmul2_bf16(h2 ? bsgemv::pair<2>(wq[i][0]) : bsgemv::pair<0>(wq[i][0]), sq[i][0]);
        ab[i][1] = bsgemv::hmul2_bf16(h2 ? bsgemv::pair<2>(wq[i][1]) : bsgemv::pair<0>(wq[i][1]), sq[i][1]);
        ab[i][2] = bsgemv::hmul2_bf16(h2 ? bsgemv::pair<3>(wq[i][0]) : bsgemv::pair<1>(wq[i][0]), sq[i][0]);
        ab[i][3] = bsgemv::hmul2_bf16(h2 ? bsgemv::pair<3>(wq[i][1]) : bsgemv::pair<1>(wq[i][1]), sq[i][1]);
      }
      wg::fence();
      // The step's x descriptor: the k-tile's base plus the step's offset in 16-byte units (the
      // 14-bit address field cannot carry: the ring ends below 256 KB).
      const uint64_t db = (uint64_t(uint32_t(xdesc >> 32)) << 32) | (uint32_t(xdesc) + uint32_t(((s >> 2) * (BM * 128) + 32 * (s & 3)) >> 4));
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if constexpr (BM == 128) {
          wg::mma_m64n128k16_rs(reinterpret_cast<float(&)[64]>(acc[i]), ab[i], db, true);
        } else if constexpr (BM == 64) {
          wg::mma_m64n64k16_rs(reinterpret_cast<float(&)[32]>(acc[i]), ab[i], db, true);
        } else {
          wg::mma_m64n32k16_rs(reinterpret_cast<float(&)[16]>(acc[i]), ab[i], db, true);
        }
      }
      wg::commit();
    }
    if (++st == S) st = 0, phase ^= 1;
  }
  wg::wait<0>();
  bsgemm::CtaWork cw;
  cw.m0 = 0, cw.n0 = (tile0 + j * tstride) * BN, cw.kt0 = 0, cw.ktiles = ktiles;
  // kSplit = false: finish's split-K merge has block barriers, which warps in different tiles
  // would not meet (the moe launches never split).
  if constexpr (!kAct) {
    bsgemm::finish<MT, XT, BM, BN, bf16, 64, false>(s_p[j % kPr], cw, acc, 0, nrow0);
  } else {
    static_assert(MT == 1, "the fused epilogue takes one m64 tile per warp");
    if (mpt.act.act == kActSilu) {
      moe_act_epilogue<kActSilu, XT>(mpt, s_p[j % kPr], cw.n0, nrow0, acc[0]);
    } else {
      moe_act_epilogue<kActSwigluOai, XT>(mpt, s_p[j % kPr], cw.n0, nrow0, acc[0]);
    }
  }
  }
  if (waits_last) pdl_wait();
#else
  __trap();
#endif
}

// Mirrored by src/fused_moe/params.rs (MoeActParams): h[row, j] = bf16(w_row * act(g, u)) from
// FC1's interleaved BF16 rows (gate j at 16 (j / 8) + j % 8, up j 8 further; non-gated: g = gu[j]),
// then h^ for W4A8 / NVFP4: one thread per block of B j (8, 32 MXFP8, 16 NVFP4), grid-stride; with
// kperm (the wgmma tiles) one thread per 32 j, stored in fragment order (moe_store_group).
struct MoeActParams {
  const int32_t* meta;
  const int32_t* row_expert;
  const float* row_weight;
  const float* a2_enc;     // [E] (NVFP4 recipe) or null
  const bf16* gu;          // [P, gu_cols]
  bf16* h;                 // [P, I]
  int32_t gu_cols;         // FC1's rows: 2 I (gated) or I
  int32_t inter;           // I
  int32_t gated, act;
  float limit;
  int32_t quant;           // 0 none, 1 MXFP8, 2 NVFP4
  int32_t max_rows;
  int32_t kperm;           // h rows in the wgmma tiles' fragment order (moe_store_group)
};
static_assert(sizeof(MoeActParams) == 80, "size must match src/fused_moe/params.rs");
static_assert(offsetof(MoeActParams, gu_cols) == 48, "offset must match params.rs");
static_assert(offsetof(MoeActParams, limit) == 64, "offset must match params.rs");

// h[row, j0 .. j0 + B) (after the recipe's quantize-then-dequantize) into v.
template <int B>
__device__ __forceinline__ void moe_act_values(const MoeActParams& p, int row, int j0, float (&v)[B]) {
  const bf16* gu = p.gu + (long long)row * p.gu_cols;
  const float w = p.row_weight[row];
  // 16-byte loads (rows and j0 are multiples of 8): gated, j0 + 8 q's gate run of 8 at 16 (j0 / 8
  // + q) with its up run 8 further; non-gated, g = gu[j].
  auto lo = [](uint32_t b) { return __uint_as_float(b << 16); };
  auto hi = [](uint32_t b) { return __uint_as_float(b & 0xFFFF0000u); };
#pragma unroll
  for (int q = 0; q < B / 8; ++q) {
    const int gc = p.gated ? 16 * ((j0 >> 3) + q) : j0 + 8 * q;
    const uint4 gv = *reinterpret_cast<const uint4*>(gu + gc);
    const uint4 uv = p.gated ? *reinterpret_cast<const uint4*>(gu + gc + 8) : make_uint4(0, 0, 0, 0);
    const uint32_t gw[4] = {gv.x, gv.y, gv.z, gv.w}, uw[4] = {uv.x, uv.y, uv.z, uv.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float g = (i & 1) ? hi(gw[i >> 1]) : lo(gw[i >> 1]);
      const float u = (i & 1) ? hi(uw[i >> 1]) : lo(uw[i >> 1]);
      v[8 * q + i] = __bfloat162float(__float2bfloat16_rn(w * moe_act_rt(p.act, g, u, p.limit)));
    }
  }
  if constexpr (B == 32) {
    mxfp8_qdq_block(v);
  } else if constexpr (B == 16) {
    nvfp4_qdq_block<false>(v, p.a2_enc[p.row_expert[row]]);
  }
}

template <int B>
__device__ __forceinline__ void moe_act_block(const MoeActParams& p, int row, int j0) {
  float v[B];
  moe_act_values<B>(p, row, j0, v);
  bf16* dst = p.h + (long long)row * p.inter + j0;
#pragma unroll
  for (int i = 0; i < B; i += 8) {
    uint4 o;
    o.x = moe_pack_bf16x2(v[i], v[i + 1]);
    o.y = moe_pack_bf16x2(v[i + 2], v[i + 3]);
    o.z = moe_pack_bf16x2(v[i + 4], v[i + 5]);
    o.w = moe_pack_bf16x2(v[i + 6], v[i + 7]);
    *reinterpret_cast<uint4*>(dst + i) = o;
  }
}

// kperm: the 32 j of group j0 / 32 (its 32 / B blocks), stored in fragment order.
template <int B>
__device__ __forceinline__ void moe_act_group(const MoeActParams& p, int row, int j0) {
  uint32_t w[16];
#pragma unroll
  for (int q = 0; q < 32 / B; ++q) {
    float v[B];
    moe_act_values<B>(p, row, j0 + B * q, v);
    moe_pack_words<B>(v, w, q * (B / 2));
  }
  moe_store_group(p.h + (long long)row * p.inter + j0, w);
}

__device__ __forceinline__ void moe_act_rows(const MoeActParams& p) {
  pdl_wait_then_release();
  const int rows = min(p.meta[1], p.max_rows);
  if (p.kperm) {
    const int ng = p.inter / 32;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < (long long)rows * ng;
         idx += (long long)gridDim.x * blockDim.x) {
      const int row = int(idx / ng), j0 = int(idx % ng) * 32;
      if (p.quant == 0) {
        moe_act_group<8>(p, row, j0);
      } else if (p.quant == 1) {
        moe_act_group<32>(p, row, j0);
      } else {
        moe_act_group<16>(p, row, j0);
      }
    }
    return;
  }
  const int B = p.quant == 0 ? 8 : p.quant == 1 ? 32 : 16, nb = p.inter / B;
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < (long long)rows * nb;
       idx += (long long)gridDim.x * blockDim.x) {
    const int row = int(idx / nb), j0 = int(idx % nb) * B;
    if (p.quant == 0) {
      moe_act_block<8>(p, row, j0);
    } else if (p.quant == 1) {
      moe_act_block<32>(p, row, j0);
    } else {
      moe_act_block<16>(p, row, j0);
    }
  }
}

}  // namespace b12x

#define B12X_MOE_GROUP(NAME, THREADS)                                                              \
  extern "C" __global__ void __launch_bounds__(THREADS)                                            \
      b12x_fused_moe_group_##NAME(const __grid_constant__ b12x::MoeGroupParams p) {                \
    b12x::moe_group_##NAME(p);                                                                     \
  }
B12X_MOE_GROUP(zero, 256)
B12X_MOE_GROUP(count, 256)
B12X_MOE_GROUP(scan, 1024)
B12X_MOE_GROUP(place, 256)
B12X_MOE_GROUP(gather, 256)

// Tiles: BM = 64 (WM 2) rows by BN = 256 weight rows, one CTA per SM as gemm.blockscaled's
// 64-row tiles (its 128-row tile, WM 4, spills here: the per-CTA params copy costs registers).
#define B12X_MOE_TILE(FMT, FMTNAME, WM)                                                            \
  extern "C" __global__ void __launch_bounds__(b12x::bsgemm::kThreads, 1)                          \
      b12x_fused_moe_tile_##FMTNAME##_wm##WM(const __grid_constant__ b12x::MoeTileParams p) {      \
    b12x::moe_tile<b12x::bsgemv::Fmt::FMT, WM, 8>(p);                                              \
  }
B12X_MOE_TILE(Nvfp4, nvfp4, 2)
B12X_MOE_TILE(Mxfp4, mxfp4, 2)

// SM90: the wgmma tiles, BM = 128 (wg), 64 (wg64) or 32 (wg32) slot rows by BN = 256 weight rows,
// persistent; the `_act` kernels are FC1 with the activation in the epilogue (MoeTileAct).
#define B12X_MOE_TILE_WG(FMT, FMTNAME, NAME, BM)                                                   \
  extern "C" __global__ void __launch_bounds__(b12x::kMoeWgThreads, 1)                             \
      b12x_fused_moe_tile_##NAME##_##FMTNAME(const __grid_constant__ b12x::MoeTileTmaParams p) {    \
    b12x::moe_tile_wg<b12x::bsgemv::Fmt::FMT, BM, false>(p);                                       \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(b12x::kMoeWgThreads, 1)                             \
      b12x_fused_moe_tile_##NAME##_act_##FMTNAME(const __grid_constant__ b12x::MoeTileTmaParams p) { \
    b12x::moe_tile_wg<b12x::bsgemv::Fmt::FMT, BM, true>(p);                                        \
  }
B12X_MOE_TILE_WG(Nvfp4, nvfp4, wg, 128)
B12X_MOE_TILE_WG(Mxfp4, mxfp4, wg, 128)
B12X_MOE_TILE_WG(Nvfp4, nvfp4, wg64, 64)
B12X_MOE_TILE_WG(Mxfp4, mxfp4, wg64, 64)
B12X_MOE_TILE_WG(Nvfp4, nvfp4, wg32, 32)
B12X_MOE_TILE_WG(Mxfp4, mxfp4, wg32, 32)

extern "C" __global__ void __launch_bounds__(256) b12x_fused_moe_act_rows(const __grid_constant__ b12x::MoeActParams p) {
  b12x::moe_act_rows(p);
}
