// l2_warm.cu — reads a byte range through L2 so that a later kernel finds it there.   crate: b12x-gemm
//   Nothing is computed or written: every 16-byte vector of src is loaded once (the loaded words
//   are folded into a register an empty asm statement consumes, so no load is dead).
// Tensors: src [n_vec] 16-byte vectors (any dtype's bytes).
// Constraints: src 16-byte aligned; n_vec < 2^63.
// Strategy: grid-stride loop, kUnroll = 4 independent 16-byte loads in flight per thread, L1 not
//   allocated; L2 lines allocated with an evict-last policy (createpolicy.fractional, fraction 1)
//   when flags & kL2WarmEvictLast, else with normal priority. Meant to run on a second stream
//   beside a latency-bound kernel (gemm.l2_warm's module docs): the grid is the caller's choice.
// Entry point: b12x_l2_warm (L2WarmParams).   Oracle: none (no output; tests/gpu_l2_warm.rs checks
//   that nothing changes and that a read of the range gets faster).
#include "b12x/common.cuh"
#include "b12x/mma.cuh"

// Mirrored by `L2WarmParams` in src/l2_warm.rs (size and offsets asserted there).
struct L2WarmParams {
  const b12x::Vec16* src;    // [n_vec]
  unsigned long long n_vec;  // 16-byte vectors to read
  int flags;                 // bit 0 (kL2WarmEvictLast): evict-last L2 policy, else normal
  int reserved;              // zero
};
static_assert(sizeof(L2WarmParams) == 24, "mirror of l2_warm.rs");
static_assert(offsetof(L2WarmParams, flags) == 16, "mirror of l2_warm.rs");
constexpr int kL2WarmEvictLast = 1;

template <bool kEvictLast>
__device__ __forceinline__ void l2_warm(const L2WarmParams& p) {
  constexpr int kUnroll = 4;
  uint64_t policy = 0;
  if constexpr (kEvictLast) policy = b12x::l2_policy_evict_last();
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  uint32_t acc = 0;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n_vec;
       i += kUnroll * stride) {
    uint32_t w[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const unsigned long long j = i + u * stride;
#pragma unroll
      for (int e = 0; e < 4; ++e) w[u][e] = 0u;
      if (j < p.n_vec) {
        if constexpr (kEvictLast)
          asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                       : "=r"(w[u][0]), "=r"(w[u][1]), "=r"(w[u][2]), "=r"(w[u][3])
                       : "l"(p.src + j), "l"(policy));
        else
          asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(w[u][0]), "=r"(w[u][1]), "=r"(w[u][2]), "=r"(w[u][3])
                       : "l"(p.src + j));
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= w[u][0];
  }
  asm volatile("" ::"r"(acc));
}

extern "C" __global__ void __launch_bounds__(512) b12x_l2_warm(const __grid_constant__ L2WarmParams p) {
  if (p.flags & kL2WarmEvictLast)
    l2_warm<true>(p);
  else
    l2_warm<false>(p);
}
