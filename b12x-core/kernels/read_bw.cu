// read_bw.cu — the project's read-bandwidth probe: the ceiling every benchmark reports against.   crate: b12x-core
//   sink = xor of every 32-bit word of src (written only when it equals a magic value, so the
//   loads cannot be optimized away and nothing is written in practice)
// Tensors: src [n_vec] 16-byte vectors   sink [1] u32
// Constraints: src 16-byte aligned.   Strategy: grid-stride loop, kUnroll independent 16-byte
//   streaming loads in flight per thread; bench.rs tries both unrolls and several grid sizes
//   and reports the fastest (the ceiling should be the best this GPU does).
// Entry points: b12x_read_bw (4 loads in flight), b12x_read_bw_u8 (8).   Oracle: none (a probe).
#include "b12x/common.cuh"

struct ReadBwParams {
  const b12x::Vec16* src;  // [n_vec]
  unsigned int* sink;      // [1]
  unsigned long long n_vec;
  unsigned int magic;
  unsigned int pad;
};
static_assert(sizeof(ReadBwParams) == 32, "mirror of ReadBwParams in bench.rs");

template <int kUnroll>
__device__ __forceinline__ void read_bw(const ReadBwParams& p) {
  unsigned int acc = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < p.n_vec; i += kUnroll * stride) {
    b12x::Vec16 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = b12x::ld_global_stream_v16(p.src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].w[0] ^ v[u].w[1] ^ v[u].w[2] ^ v[u].w[3];
  }
  for (; i < p.n_vec; i += stride) {
    b12x::Vec16 v = b12x::ld_global_stream_v16(p.src + i);
    acc ^= v.w[0] ^ v.w[1] ^ v.w[2] ^ v.w[3];
  }
  if (acc == p.magic) p.sink[0] = acc;
}

extern "C" __global__ void __launch_bounds__(512) b12x_read_bw(const __grid_constant__ ReadBwParams p) {
  read_bw<4>(p);
}
extern "C" __global__ void __launch_bounds__(512) b12x_read_bw_u8(const __grid_constant__ ReadBwParams p) {
  read_bw<8>(p);
}
