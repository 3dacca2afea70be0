// read_bw.cu — the project's read-bandwidth probe: the ceiling every benchmark reports against.   crate: b12x-core
//   sink = xor of every 32-bit word of src (written only when it equals a magic value, so the
//   loads cannot be optimized away and nothing is written in practice)
// Tensors: src [n_vec] 16-byte vectors   sink [1] u32
// Constraints: src 16-byte aligned.   Strategy: grid-stride loop, kUnroll independent 16-byte
//   streaming loads in flight per thread; bench.rs tries both unrolls and several grid sizes
//   and reports the fastest (the ceiling should be the best this GPU does).
//   b12x_read_bw_bulk: one thread per CTA streams kBulkChunk-byte pieces through a
//   kBulkStages-deep shared-memory ring with cp.async.bulk (the copy engine path, no L1, no
//   registers; the way TMA-fed kernels and cuBLAS read), xoring one word of each landed piece.
// Entry points: b12x_read_bw (4 loads in flight), b12x_read_bw_u8 (8), b12x_read_bw_bulk;
//   the L2 flush of bench.rs (EventTimer): b12x_flush_fill (zeros, plain stores) then
//   b12x_flush_read (plain, L2-allocating loads; xor into the sink as above).
//   Oracle: none (a probe).
#include "b12x/common.cuh"
#include "b12x/mma.cuh"

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

constexpr int kBulkStages = 4;
constexpr int kBulkChunk = 8192;  // bytes; 4 x 8 KB = 32 KB of static shared memory per CTA

// n_vec must be a multiple of kBulkChunk / 16 (the host rounds the buffer).
extern "C" __global__ void __launch_bounds__(32) b12x_read_bw_bulk(const __grid_constant__ ReadBwParams p) {
  __shared__ __align__(128) unsigned char s_ring[kBulkStages][kBulkChunk];
  __shared__ __align__(8) unsigned long long s_full[kBulkStages];
  if (threadIdx.x != 0) return;
  const uint32_t bar0 = b12x::smem_addr(&s_full[0]);
#pragma unroll
  for (int s = 0; s < kBulkStages; ++s) b12x::mbar_init(bar0 + 8 * s, 1);
  b12x::mbar_fence_init();
  const unsigned long long chunks = p.n_vec * 16 / kBulkChunk;
  const unsigned char* src = reinterpret_cast<const unsigned char*>(p.src);
  unsigned int acc = 0;
  int it = 0;
  for (unsigned long long c = blockIdx.x; c < chunks; c += gridDim.x, ++it) {
    const int s = it % kBulkStages;
    if (it >= kBulkStages) {
      b12x::mbar_wait(bar0 + 8 * s, ((it / kBulkStages) - 1) & 1);
      acc ^= *reinterpret_cast<const unsigned int*>(&s_ring[s][0]);
    }
    b12x::mbar_arrive_expect_tx(bar0 + 8 * s, kBulkChunk);
    b12x::bulk_copy_g2s(b12x::smem_addr(&s_ring[s][0]), src + c * kBulkChunk, kBulkChunk, bar0 + 8 * s);
  }
  // Drain: the last min(it, kBulkStages) pieces.
  for (int j = max(it - kBulkStages, 0); j < it; ++j) {
    const int s = j % kBulkStages;
    b12x::mbar_wait(bar0 + 8 * s, (j / kBulkStages) & 1);
    acc ^= *reinterpret_cast<const unsigned int*>(&s_ring[s][0]);
  }
  if (acc == p.magic) p.sink[0] = acc;
}

// ---- the benchmarks' L2 flush ------------------------------------------------------------
// Why not memset + b12x_read_bw: the probe's ld.global.nc.L1::no_allocate lines do not displace
// the memset's dirty lines (or lines the timed work itself loaded with normal priority) from L2,
// so the timed work paid their write-backs: the read probe over 58.7 MB took 20.0 us after that
// flush and 17.2 us after this one (bench-results/2026-12-01-h200-d/). Plain stores, then plain
// loads of the whole buffer (max(256 MB, 2x L2), as bench/peers.py flushes before the peers),
// leave L2 holding only clean, normal-priority lines of the flush buffer.
extern "C" __global__ void __launch_bounds__(512) b12x_flush_fill(const __grid_constant__ ReadBwParams p) {
  b12x::Vec16* dst = const_cast<b12x::Vec16*>(p.src);
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n_vec; i += stride)
    dst[i] = b12x::Vec16{{0u, 0u, 0u, 0u}};
}
extern "C" __global__ void __launch_bounds__(512) b12x_flush_read(const __grid_constant__ ReadBwParams p) {
  unsigned int acc = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n_vec; i += stride) {
    b12x::Vec16 v;
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                 : "l"(p.src + i));
    acc ^= v.w[0] ^ v.w[1] ^ v.w[2] ^ v.w[3];
  }
  if (acc == p.magic) p.sink[0] = acc;
}
