// varlen.cu — prefill attention over packed variable-length sequences.  crate: b12x-attention
//   Sequence b: query rows cu_q[b]..cu_q[b+1], key/value rows cu_k[b]..cu_k[b+1] of the packed
//   tensors. Query i of a sequence (q_len, k_len) sits at t = k_len - q_len + i and sees keys p
//   with p <= t (causal; every key otherwise) and p >= t - W (W = window_left >= 0):
//     s_p = scale * q . k_p;  L = log(sum_p exp(s_p) + exp(sink_h));  o = sum_p exp(s_p - L) v_p;
//     lse = L (natural log, includes the sink; -inf for a row without keys or sink, o = 0).
// Tensors: q [Tq, H, D], k, v [Tk, Hkv, D] bf16|f16 (row strides q/k/v_stride, heads contiguous)
//   cu_seqlens_q, cu_seqlens_k [B+1] i32   sinks [H] f32   o [Tq, H, D] (row stride o_stride)
//   lse [Tq, H] f32 (row stride lse_stride; optional)   error [1] u32.
// Constraints: D in {64, 128, 256}; BM = 16 * MT * WARPS query rows (MT m16 tiles per warp).
// Strategy (FlashAttention-2's forward): CTA (h, y, b) of WARPS warps takes query blocks
//   nblk-1-y, nblk-1-y-gridDim.y, ... of sequence b and head h (the heaviest causal blocks
//   first); the BM x D query block sits in shared memory, the visible key blocks of BN keys
//   stream from the last to the first through a 2-stage cp.async ring of (K, V) tiles. Shared tiles are unpadded rows of D
//   elements with 16-byte chunk c of row r stored at chunk c ^ (r & 7) (ldmatrix conflict-free;
//   <= 96 KB per CTA so every config runs on SM120). Each warp owns 16 * MT query rows: S = Q K^T
//   and O += P V with mma.sync m16n8k16 (Q and K by ldmatrix — Q once per query block into
//   registers when MT = 1 and D <= 128 —, P from the S registers, V by ldmatrix.trans), online
//   softmax in base 2 in registers (ex2.approx.ftz; a row's running maximum moves only when a
//   block exceeds it by more than 2^8 in probability, and O is rescaled only when one moved);
//   masks only on blocks crossing the causal diagonal, the window edge or the sequence end. Keys
//   past the sequence load as zeros.
//   The packing is untrusted: every CTA checks both cu arrays first (src/varlen/mod.rs).
// Entry points: b12x_varlen_{bf16,f16}_d{D}_m{BM}_n{BN}_w{WARPS}: d64 m128_n64_w4, m64_n64_w4;
//   d128 m64_n64_w4, m64_n32_w4, m128_n64_w8, m128_n32_w8, m128_n32_w4; d256 m64_n32_w4.
// Oracle: src/varlen/reference.rs
#include <stddef.h>

#include "attention_mma.cuh"
#include "b12x/common.cuh"
#include "b12x/mma.cuh"
#include "paging.cuh"

namespace b12x {

// Mirrored by src/varlen/params.rs (size and offsets asserted on both sides).
struct VarlenParams {
  const void* q;                // [Tq, H, D], row stride q_stride
  const void* k;                // [Tk, Hkv, D], row stride k_stride
  const void* v;                // [Tk, Hkv, D], row stride v_stride
  const float* sinks;           // [H] or null
  const int32_t* cu_seqlens_q;  // [B + 1]
  const int32_t* cu_seqlens_k;  // [B + 1]
  void* o;                      // [Tq, H, D], row stride o_stride
  float* lse;                   // [Tq, H], row stride lse_stride, or null
  unsigned int* error;          // [1]
  int64_t q_stride;
  int64_t k_stride;
  int64_t v_stride;
  int64_t o_stride;
  int64_t lse_stride;
  int32_t total_q;
  int32_t total_k;
  int32_t batch;
  int32_t heads;
  int32_t kv_heads;
  int32_t m_blocks;  // gridDim.y
  int32_t causal;
  int32_t window_left;  // -1: off
  float scale_log2;     // softmax scale * log2(e)
  int32_t reserved;
};
static_assert(sizeof(VarlenParams) == 152, "size must match src/varlen/params.rs");
static_assert(offsetof(VarlenParams, q_stride) == 72, "offset must match params.rs");
static_assert(offsetof(VarlenParams, total_q) == 112, "offset must match params.rs");
static_assert(offsetof(VarlenParams, scale_log2) == 144, "offset must match params.rs");

// Byte offset of 16-byte chunk c of row r in a swizzled tile of D-element rows.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return uint32_t(r * (D / 8) * 16 + c * 16) ^ uint32_t((r & 7) * 16);
}

template <typename T, int D, int MT, int BN, int WARPS>
__device__ __forceinline__ void varlen_attention(const VarlenParams& p) {
  using Mma = MmaOf<T>;
  constexpr int BM = 16 * MT * WARPS;  // each warp owns 16 * MT rows
  constexpr int kThreads = 32 * WARPS;
  // 16-row warps at D <= 128 keep their Q fragments in registers (D / 4 of them).
  constexpr bool kQRegs = MT == 1 && D <= 128;
  constexpr int kChunks = D / 8;
  constexpr int kQBytes = BM * D * 2, kTileBytes = BN * D * 2;
  static_assert(kChunks >= 8, "the swizzle needs >= 8 chunks per row");
  extern __shared__ __align__(128) unsigned char s_dyn[];
  const uint32_t s_q = smem_addr(s_dyn);
  const uint32_t s_kv = s_q + kQBytes;  // stage st: K at st * 2 * kTileBytes, V after it
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int lr = lane >> 2, lc = 2 * (lane & 3);
  const int h = blockIdx.x, b = blockIdx.z;
  const int g = h / (p.heads / p.kv_heads);

  if (!(packing_ok(p.cu_seqlens_q, p.batch, p.total_q) & packing_ok(p.cu_seqlens_k, p.batch, p.total_k))) {
    // Every row of o is zeroed, every lse -inf: the grid's CTAs share the rows.
    const int id = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const int n = gridDim.x * gridDim.y * gridDim.z;
    if (id == 0 && threadIdx.x == 0) atomicOr(p.error, kFaultQueryLayout);
    for (int row = id; row < p.total_q; row += n)
      for (int idx = threadIdx.x; idx < p.heads * kChunks; idx += blockDim.x) {
        const int hh = idx / kChunks, c = idx % kChunks;
        st_global_v16(static_cast<T*>(p.o) + row * p.o_stride + hh * D + c * 8, Vec16{{0u, 0u, 0u, 0u}});
        if (c == 0 && p.lse) p.lse[row * p.lse_stride + hh] = -INFINITY;
      }
    return;
  }
  const int q0 = __ldg(p.cu_seqlens_q + b), q_len = __ldg(p.cu_seqlens_q + b + 1) - q0;
  const int k0 = __ldg(p.cu_seqlens_k + b), k_len = __ldg(p.cu_seqlens_k + b + 1) - k0;
  const int n_mblk = (q_len + BM - 1) / BM;
  const bool causal = p.causal != 0;
  const int W = p.window_left;
  const float sl2 = p.scale_log2;
  const T* q_base = static_cast<const T*>(p.q) + (long long)q0 * p.q_stride + h * D;
  const T* k_base = static_cast<const T*>(p.k) + (long long)k0 * p.k_stride + g * D;
  const T* v_base = static_cast<const T*>(p.v) + (long long)k0 * p.v_stride + g * D;
  const float sink2 = p.sinks ? __ldg(p.sinks + h) * kLog2e : -INFINITY;
  // ldmatrix row addresses. Chunk c of row r sits at byte (r * kRowBytes + 16 * c) ^ (16 * (r & 7))
  // of its tile (rows are >= 128 bytes), and every fragment row here has r & 7 = lane & 7: a
  // step's address is (the lane's row offset + the step's chunk offset) ^ swizzle.
  constexpr uint32_t kRowBytes = D * 2;
  const uint32_t sw = (lane & 7) * 16;
  const uint32_t q_row = (warp * 16 * MT + (lane & 15)) * kRowBytes + (lane >> 4) * 16;
  // K and V: the 4 swizzled chunk offsets of a row (k16 step & 3); step >> 2 adds 128 bytes.
  uint32_t k_off[4], v_off[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    k_off[i] = (((lane >> 4) * 8 + (lane & 7)) * kRowBytes + (2 * i + ((lane >> 3) & 1)) * 16) ^ sw;
    v_off[i] = ((lane & 15) * kRowBytes + (2 * i + (lane >> 4)) * 16) ^ sw;
  }

  for (int j = blockIdx.y; j < n_mblk; j += gridDim.y) {
    const int m0 = (n_mblk - 1 - j) * BM;
    const int rows = min(BM, q_len - m0);
    const int t_first = k_len - q_len + m0, t_last = t_first + rows - 1;
    const int k_begin = W >= 0 ? max(0, t_first - W) : 0;
    const int k_end = causal ? min(k_len, t_last + 1) : k_len;
    const int nb_lo = k_begin / BN;
    const int nb_hi = k_end > k_begin ? (k_end + BN - 1) / BN : nb_lo;  // no block: empty rows

    // K and V of key block n into stage st (keys past the sequence are zero-filled).
    auto issue_kv = [&](int n, int st) {
      constexpr int kRowsPerPass = kThreads / kChunks;
      const int r0 = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
      const int kb = n * BN;
      const T* gk = k_base + (long long)(kb + r0) * p.k_stride + c * 8;
      const T* gv = v_base + (long long)(kb + r0) * p.v_stride + c * 8;
      const uint32_t s_st = s_kv + st * 2 * kTileBytes;
#pragma unroll
      for (int i = 0; i < BN / kRowsPerPass; ++i) {
        const int r = r0 + i * kRowsPerPass;
        const bool ok = kb + r < k_len;
        const uint32_t dst = s_st + swz<D>(r, c);
        cp_async_cg_16_zfill(dst, ok ? gk : k_base, ok);
        cp_async_cg_16_zfill(dst + kTileBytes, ok ? gv : v_base, ok);
        gk += kRowsPerPass * p.k_stride;
        gv += kRowsPerPass * p.v_stride;
      }
    };

    float acc[MT][D / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][n][e] = 0.0f;
    float m_run[MT][2], l_run[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) m_run[mt][r] = -INFINITY, l_run[mt][r] = 0.0f;

    uint32_t qf[kQRegs ? D / 16 : 1][4];
    if (nb_hi > nb_lo) {
      // Q block (rows past the sequence zero) and the last key block: one group.
      {
        constexpr int kRowsPerPass = kThreads / kChunks;
        const int r0 = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
        const T* gq = q_base + (long long)(m0 + r0) * p.q_stride + c * 8;
#pragma unroll
        for (int i = 0; i < BM / kRowsPerPass; ++i) {
          const int r = r0 + i * kRowsPerPass;
          const bool ok = r < rows;
          cp_async_cg_16_zfill(s_q + swz<D>(r, c), ok ? gq : q_base, ok);
          gq += kRowsPerPass * p.q_stride;
        }
      }
      issue_kv(nb_hi - 1, 0);
      cp_async_commit();
    }
    for (int n = nb_hi - 1; n >= nb_lo; --n) {
      const int st = (nb_hi - 1 - n) & 1;
      if (n > nb_lo) issue_kv(n - 1, st ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
      const uint32_t s_k = s_kv + st * 2 * kTileBytes, s_v = s_k + kTileBytes;

      // The warp's Q fragments stay in registers for the whole block row (16-row warps, D <= 128).
      if (kQRegs && n == nb_hi - 1) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qf[kk], s_q + ((q_row + kk * 32) ^ sw));
      }

      // S = Q K^T: 16 * MT rows x BN keys per warp.
      float s[MT][BN / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n8 = 0; n8 < BN / 8; ++n8)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][n8][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (kQRegs) {
#pragma unroll
            for (int i = 0; i < 4; ++i) a[mt][i] = qf[kk][i];
          } else {
            ldmatrix_x4(a[mt], s_q + ((q_row + mt * 16 * kRowBytes + kk * 32) ^ sw));
          }
        }
#pragma unroll
        for (int nn = 0; nn < BN / 16; ++nn) {
          uint32_t bk[4];
          ldmatrix_x4(bk, s_k + k_off[kk & 3] + nn * 16 * kRowBytes + (kk >> 2) * 128);
          const uint32_t b0[2] = {bk[0], bk[1]}, b1[2] = {bk[2], bk[3]};
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            Mma::run(s[mt][2 * nn], a[mt], b0);
            Mma::run(s[mt][2 * nn + 1], a[mt], b1);
          }
        }
      }

      // Mask (only blocks that cross the sequence end, the diagonal or the window edge).
      const int kb = n * BN;
      const bool need_mask =
          kb + BN > k_len || (causal && kb + BN - 1 > t_first) || (W >= 0 && kb < t_last - W);
      if (need_mask) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n8 = 0; n8 < BN / 8; ++n8)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = kb + n8 * 8 + lc + (e & 1);
              const int dt = key - (t_first + warp * 16 * MT + mt * 16 + lr + 8 * (e >> 1));  // key - t
              const bool vis = key < k_len && (!causal || dt <= 0) && (W < 0 || dt >= -W);
              if (!vis) s[mt][n8][e] = -INFINITY;
            }
      }

      // Online softmax (raw logits; base 2 with the scale folded into the exponent). The O
      // rescale is skipped when no row of the warp has a new maximum.
      float corr[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -INFINITY;
#pragma unroll
          for (int n8 = 0; n8 < BN / 8; ++n8) mx = fmaxf(mx, fmaxf(s[mt][n8][2 * r], s[mt][n8][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // The running maximum moves only when the block's maximum exceeds it by more than
          // 2^kLazyLog2 in probability (or it was -inf): probabilities stay <= 2^8, exact after the
          // final division by l, and O is rescaled rarely.
          const float m_old = m_run[mt][r];
          const bool move = m_old == -INFINITY || (mx - m_old) * sl2 > kLazyLog2;
          const float m_new = move ? fmaxf(m_old, mx) : m_old;
          corr[mt][r] = move && m_new != m_old ? exp2_ftz((m_old - m_new) * sl2) : 1.0f;
          m_run[mt][r] = m_new;
          const float ms = m_new == -INFINITY ? 0.0f : m_new * sl2;
          float sum = 0.0f;
#pragma unroll
          for (int n8 = 0; n8 < BN / 8; ++n8)
#pragma unroll
            for (int e = 2 * r; e < 2 * r + 2; ++e) {
              const float pv = exp2_ftz(fmaf(s[mt][n8][e], sl2, -ms));
              s[mt][n8][e] = pv;
              sum += pv;
            }
          l_run[mt][r] = l_run[mt][r] * corr[mt][r] + sum;
        }
      }
      bool rescale = false;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) rescale |= corr[mt][0] != 1.0f || corr[mt][1] != 1.0f;
      if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n = 0; n < D / 8; ++n) {
            acc[mt][n][0] *= corr[mt][0];
            acc[mt][n][1] *= corr[mt][0];
            acc[mt][n][2] *= corr[mt][1];
            acc[mt][n][3] *= corr[mt][1];
          }
      }

      // O += P V: P (16 keys per k-step) from the S registers, V by ldmatrix.trans.
#pragma unroll
      for (int kt = 0; kt < BN / 16; ++kt) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          a[mt][0] = Mma::pack(s[mt][2 * kt][0], s[mt][2 * kt][1]);
          a[mt][1] = Mma::pack(s[mt][2 * kt][2], s[mt][2 * kt][3]);
          a[mt][2] = Mma::pack(s[mt][2 * kt + 1][0], s[mt][2 * kt + 1][1]);
          a[mt][3] = Mma::pack(s[mt][2 * kt + 1][2], s[mt][2 * kt + 1][3]);
        }
#pragma unroll
        for (int nd = 0; nd < D / 16; ++nd) {
          uint32_t bv[4];
          ldmatrix_x4_trans(bv, s_v + v_off[nd & 3] + kt * 16 * kRowBytes + (nd >> 2) * 128);
          const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            Mma::run(acc[mt][2 * nd], a[mt], b0);
            Mma::run(acc[mt][2 * nd + 1], a[mt], b1);
          }
        }
      }
      __syncthreads();  // stage st (and, after the last block, the Q block) is free
    }

    // Epilogue: normalize, add the sink, write the block's rows.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float l = l_run[mt][r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float m = m_run[mt][r] == -INFINITY ? -INFINITY : m_run[mt][r] * sl2;
        const float m2 = fmaxf(m, sink2);
        float o_mul = 0.0f, lse = -INFINITY;
        if (m2 != -INFINITY) {
          const float keys = m == -INFINITY ? 0.0f : exp2f(m - m2);
          const float l2 = l * keys + (sink2 == -INFINITY ? 0.0f : exp2f(sink2 - m2));
          o_mul = keys / l2;
          lse = (m2 + log2f(l2)) * kLn2;
        }
        const int row = warp * 16 * MT + mt * 16 + lr + 8 * r;
        if (row < rows) {
          T* out = static_cast<T*>(p.o) + (long long)(q0 + m0 + row) * p.o_stride + h * D + lc;
#pragma unroll
          for (int n = 0; n < D / 8; ++n) {
            const uint32_t v = Mma::pack(acc[mt][n][2 * r] * o_mul, acc[mt][n][2 * r + 1] * o_mul);
            *reinterpret_cast<uint32_t*>(out + n * 8) = v;
          }
          if (p.lse && (lane & 3) == 0) p.lse[(long long)(q0 + m0 + row) * p.lse_stride + h] = lse;
        }
      }
  }
}

}  // namespace b12x

// MT: m16 row tiles per warp (BM = 16 * MT * WARPS). MINB: CTAs per SM the register budget must
// allow (what shared memory allows on SM90, at most 2).
#define B12X_VARLEN(NAME, T, D, BM, BN, MT, WARPS, MINB)                                        \
  extern "C" __global__ void __launch_bounds__(32 * WARPS, MINB)                                 \
      b12x_varlen_##NAME##_d##D##_m##BM##_n##BN##_w##WARPS(const __grid_constant__ b12x::VarlenParams p) { \
    static_assert(BM == 16 * MT * WARPS, "BM = 16 * MT * WARPS");                                \
    b12x::varlen_attention<T, D, MT, BN, WARPS>(p);                                              \
  }
#define B12X_VARLEN_ALL(NAME, T)                 \
  B12X_VARLEN(NAME, T, 64, 128, 64, 2, 4, 2)     \
  B12X_VARLEN(NAME, T, 64, 64, 64, 1, 4, 2)      \
  B12X_VARLEN(NAME, T, 128, 64, 64, 1, 4, 2)     \
  B12X_VARLEN(NAME, T, 128, 64, 32, 1, 4, 2)     \
  B12X_VARLEN(NAME, T, 128, 128, 64, 1, 8, 1)    \
  B12X_VARLEN(NAME, T, 128, 128, 32, 1, 8, 1)    \
  B12X_VARLEN(NAME, T, 128, 128, 32, 2, 4, 2)    \
  B12X_VARLEN(NAME, T, 256, 64, 32, 1, 4, 2)

B12X_VARLEN_ALL(bf16, b12x::bf16)
B12X_VARLEN_ALL(f16, b12x::fp16)
