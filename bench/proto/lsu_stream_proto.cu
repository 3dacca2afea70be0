// Prototype harness: does a GEMV-shaped streaming read (one CTA per SM, each CTA a contiguous
// stretch of W, as bf16_gemv's row blocks) reach the read probe's speed when it loads through
// the LSU (registers or cp.async into a shared ring) instead of TMA? Not part of the build,
// not the source of any reported number. Single graph-replayed reads, L2 flushed (the
// project's flush), median of 30:
//   reg  U  : every thread keeps U 16-byte ld.global.nc.L1::no_allocate loads in flight; a warp
//             instruction covers 512 contiguous bytes
//   cpa  S,U: cp.async.cg 16 B x U per thread per stage, S stages in flight (commit/wait_group)
//   tma  KB : bulk copies of KB x 8 KB per stage, 4 stages (one elected thread)
// each either `contig` (CTA b reads [b*q, (b+1)*q)) or `inter` (CTA b reads pieces b, b+G, ...),
// next to the project's read probe (b12x_read_bw, 1-4 CTAs of 512 threads per SM).
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/lsu lsu_stream_proto.cu && /tmp/lsu
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#include "../../b12x-core/include/b12x/common.cuh"
#include "../../b12x-core/kernels/read_bw.cu"

using b12x::bf16;
#include "proto_common.cuh"

using b12x::Vec16;

struct SP {
  const Vec16* src;
  unsigned int* sink;
  long long n_vec;  // whole pieces only
  int inter;        // 0 contig, 1 inter
};

// The pieces CTA b walks: contig [b*q, (b+1)*q), or inter b, b+G, ...
__device__ __forceinline__ void pieces_of_cta(int inter, long long pieces, long long& begin, long long& end,
                                              long long& step) {
  if (inter) {
    begin = blockIdx.x; end = pieces; step = gridDim.x;
  } else {
    const long long q = (pieces + gridDim.x - 1) / gridDim.x;
    begin = blockIdx.x * q; end = min(begin + q, pieces); step = 1;
  }
}

// A piece is blockDim * U vectors (one iteration of the CTA). Contig: CTA b takes pieces
// [b*q, (b+1)*q); inter: pieces b, b+G, ...
template <int U>
__global__ void __launch_bounds__(1024) stream_reg(const __grid_constant__ SP p) {
  const long long piece = (long long)blockDim.x * U;
  const long long pieces = p.n_vec / piece;
  long long begin, end, step;
  pieces_of_cta(p.inter, pieces, begin, end, step);
  unsigned int acc = 0;
  for (long long c = begin; c < end; c += step) {
    const Vec16* base = p.src + c * piece + threadIdx.x;
    Vec16 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = b12x::ld_global_stream_v16(base + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].w[0] ^ v[u].w[1] ^ v[u].w[2] ^ v[u].w[3];
  }
  if (acc == 0x12345678u) *p.sink = acc;
}

// cp.async ring: S stages of blockDim * U vectors; piece = one stage.
template <int S, int U>
__global__ void __launch_bounds__(1024) stream_cpa(const __grid_constant__ SP p) {
  extern __shared__ __align__(128) unsigned char s_ring[];
  const long long piece = (long long)blockDim.x * U;
  const long long pieces = p.n_vec / piece;
  long long begin, end, step;
  pieces_of_cta(p.inter, pieces, begin, end, step);
  unsigned int acc = 0;
  int it = 0;
  const uint32_t ring = b12x::smem_addr(s_ring);
  for (long long c = begin; c < end; c += step, ++it) {
    const int s = it % S;
    const Vec16* base = p.src + c * piece + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t dst = ring + ((s * U + u) * blockDim.x + threadIdx.x) * 16;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(base + u * blockDim.x));
    }
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 1));
    // The oldest stage has landed (this thread's part of it): touch it.
    const int so = (it + 1) % S;
    unsigned int v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(ring + ((so * U) * blockDim.x + threadIdx.x) * 16));
    acc ^= v;
  }
  asm volatile("cp.async.wait_group 0;");
  if (acc == 0x12345678u) *p.sink = acc;
}

// Bulk copies: one thread, 4 stages of KB x 8 KB; piece = one stage.
template <int KB>
__global__ void __launch_bounds__(32) stream_bulk(const __grid_constant__ SP p) {
  constexpr int kStages = 4, kBytes = KB * 8192;
  extern __shared__ __align__(128) unsigned char s_ring[];
  __shared__ __align__(8) unsigned long long s_full[kStages];
  if (threadIdx.x != 0) return;
  const uint32_t bar0 = b12x::smem_addr(&s_full[0]);
  for (int s = 0; s < kStages; ++s) b12x::mbar_init(bar0 + 8 * s, 1);
  b12x::mbar_fence_init();
  const long long pieces = p.n_vec * 16 / kBytes;
  long long begin, end, step;
  pieces_of_cta(p.inter, pieces, begin, end, step);
  const unsigned char* src = reinterpret_cast<const unsigned char*>(p.src);
  unsigned int acc = 0;
  int it = 0;
  for (long long c = begin; c < end; c += step, ++it) {
    const int s = it % kStages;
    if (it >= kStages) {
      b12x::mbar_wait(bar0 + 8 * s, ((it / kStages) - 1) & 1);
      acc ^= *reinterpret_cast<const unsigned int*>(&s_ring[s * kBytes]);
    }
    b12x::mbar_arrive_expect_tx(bar0 + 8 * s, kBytes);
    b12x::bulk_copy_g2s(b12x::smem_addr(&s_ring[s * kBytes]), src + c * kBytes, kBytes, bar0 + 8 * s);
  }
  for (int j = max(it - kStages, 0); j < it; ++j) {
    const int s = j % kStages;
    b12x::mbar_wait(bar0 + 8 * s, (j / kStages) & 1);
    acc ^= *reinterpret_cast<const unsigned int*>(&s_ring[s * kBytes]);
  }
  if (acc == 0x12345678u) *p.sink = acc;
}


// Row-piece bulk copies (a GEMV fed by 1-D copies of W row pieces instead of 2-D boxes): CTA b
// owns rows [b*rows_cta, +rows_cta) of a [n, k] bf16 matrix; a stage is R rows x B bytes (R
// bulk copies, one per row, B contiguous bytes each, into rows padded by 16 bytes); the walk is
// (row group of R rows, k piece) row-major, S stages in flight. One elected thread.
struct RowsP {
  const unsigned char* src;
  unsigned int* sink;
  int rows_cta, R, B, S, row_bytes;
};
__global__ void __launch_bounds__(32) stream_rows(const __grid_constant__ RowsP p) {
  extern __shared__ __align__(128) unsigned char s_ring[];
  __shared__ __align__(8) unsigned long long s_full[16];
  if (threadIdx.x != 0) return;
  const uint32_t bar0 = b12x::smem_addr(&s_full[0]);
  for (int s = 0; s < p.S; ++s) b12x::mbar_init(bar0 + 8 * s, 1);
  b12x::mbar_fence_init();
  const int pieces = p.row_bytes / p.B, groups = p.rows_cta / p.R;
  const int units = pieces * groups;
  const uint32_t stage_bytes = p.R * (p.B + 16);
  const unsigned char* base = p.src + (size_t)blockIdx.x * p.rows_cta * p.row_bytes;
  unsigned int acc = 0;
  for (int it = 0; it < units; ++it) {
    const int s = it % p.S;
    if (it >= p.S) {
      b12x::mbar_wait(bar0 + 8 * s, ((it / p.S) - 1) & 1);
      acc ^= *reinterpret_cast<const unsigned int*>(&s_ring[s * stage_bytes]);
    }
    const int g = it / pieces, c = it - g * pieces;
    b12x::mbar_arrive_expect_tx(bar0 + 8 * s, p.R * p.B);
    for (int r = 0; r < p.R; ++r)
      b12x::bulk_copy_g2s(b12x::smem_addr(&s_ring[s * stage_bytes + r * (p.B + 16)]),
                          base + (size_t)(g * p.R + r) * p.row_bytes + (size_t)c * p.B, p.B, bar0 + 8 * s);
  }
  for (int j = max(units - p.S, 0); j < units; ++j) {
    const int s = j % p.S;
    b12x::mbar_wait(bar0 + 8 * s, (j / p.S) & 1);
    acc ^= *reinterpret_cast<const unsigned int*>(&s_ring[s * stage_bytes]);
  }
  if (acc == 0x12345678u) *p.sink = acc;
}

int main(int argc, char** argv) {
  const bool rows_only = argc > 1 && strcmp(argv[1], "rows") == 0;
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs\n", prop.name, sms);
  const size_t max_bytes = 18432ull * 7168 * 2;
  Vec16* w;
  CK(cudaMalloc(&w, max_bytes));
  fill_bf16<<<1024, 256>>>((bf16*)w, max_bytes / 2, 1);
  CK(cudaDeviceSynchronize());
  const int smem_max = (int)prop.sharedMemPerBlockOptin - 1024;
  CK(cudaFuncSetAttribute(stream_cpa<4, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  CK(cudaFuncSetAttribute(stream_cpa<8, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  CK(cudaFuncSetAttribute(stream_cpa<6, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  CK(cudaFuncSetAttribute(stream_bulk<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  CK(cudaFuncSetAttribute(stream_bulk<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  CK(cudaFuncSetAttribute(stream_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  if (rows_only) {
    // 18432 x 7168 bf16, 128 CTAs of 144 rows (bf16_gemv rt3's row blocks).
    const int row_bytes = 7168 * 2;
    const double bytes = 18432.0 * row_bytes;
    struct C { int R, B, S; };
    for (int rep = 0; rep < 2; ++rep) {
      {
        ReadBwParams rp{w, g_sink, (unsigned long long)(bytes / 16), 0x9e3779b9u, 0};
        for (int per : {2, 4}) {
          const double t = time_graph(st, [&] { b12x_read_bw<<<sms * per, 512, 0, st>>>(rp); });
          printf("  probe b12x_read_bw x%d          %8.2f us  %6.3f TB/s\n", per, t, bytes / t / 1e6);
        }
        SP sp{w, g_sink, (long long)(bytes / 16), 0};
        const double t = time_graph(st, [&] { stream_bulk<4><<<sms, 32, 4 * 4 * 8192, st>>>(sp); });
        printf("  bulk 32KB x4 stages contig       %8.2f us  %6.3f TB/s\n", t, bytes / t / 1e6);
      }
      for (C c : {C{16, 2048, 3}, C{16, 1024, 6}, C{16, 3584, 2}, C{8, 4096, 3}, C{8, 2048, 6}, C{48, 512, 4},
                  C{144, 128, 8}, C{16, 512, 12}, C{4, 7168, 3}, C{2, 14336, 4}}) {
        RowsP rp{(const unsigned char*)w, g_sink, 144, c.R, c.B, c.S, row_bytes};
        const int smem = c.S * c.R * (c.B + 16);
        if (smem > smem_max) continue;
        const double t = time_graph(st, [&] { stream_rows<<<128, 32, smem, st>>>(rp); });
        printf("  rows R%-3d x %5d B, %2d stages (%3d KB)  %8.2f us  %6.3f TB/s\n", c.R, c.B, c.S, smem / 1024, t,
               bytes / t / 1e6);
      }
    }
    return 0;
  }
  for (int rep = 0; rep < 2; ++rep) {
    for (size_t bytes : {max_bytes, (size_t)7168 * 4096 * 2}) {
      printf("== %.1f MB\n", bytes / 1e6);
      const long long n_vec = bytes / 16;
      {
        ReadBwParams rp{w, g_sink, (unsigned long long)n_vec, 0x9e3779b9u, 0};
        for (int per : {1, 2, 4}) {
          const double t = time_graph(st, [&] { b12x_read_bw<<<sms * per, 512, 0, st>>>(rp); });
          printf("  probe b12x_read_bw x%d          %8.2f us  %6.3f TB/s\n", per, t, bytes / t / 1e6);
        }
      }
      for (int inter : {0, 1}) {
        SP p{w, g_sink, n_vec, inter};
        const char* mode = inter ? "inter " : "contig";
        auto go = [&](const char* name, auto kern, int grid, int threads, int smem) {
          const double t = time_graph(st, [&] { kern<<<grid, threads, smem, st>>>(p); });
          printf("  %-30s %s %8.2f us  %6.3f TB/s\n", name, mode, t, bytes / t / 1e6);
        };
        go("reg U4  512t x1", stream_reg<4>, sms, 512, 0);
        go("reg U8  512t x1", stream_reg<8>, sms, 512, 0);
        go("reg U16 256t x1", stream_reg<16>, sms, 256, 0);
        go("reg U8  1024t x1", stream_reg<8>, sms, 1024, 0);
        go("reg U4  512t x2", stream_reg<4>, 2 * sms, 512, 0);
        go("reg U8  512t x1 (128 CTAs)", stream_reg<8>, 128, 512, 0);
        go("cpa S4 U4 512t x1", stream_cpa<4, 4>, sms, 512, 4 * 4 * 512 * 16);
        go("cpa S8 U2 512t x1", stream_cpa<8, 2>, sms, 512, 8 * 2 * 512 * 16);
        go("cpa S6 U4 256t x1", stream_cpa<6, 4>, sms, 256, 6 * 4 * 256 * 16);
        go("bulk 16KB x4 stages x1", stream_bulk<2>, sms, 32, 4 * 2 * 8192);
        go("bulk 32KB x4 stages x1", stream_bulk<4>, sms, 32, 4 * 4 * 8192);
        go("bulk 16KB x4 stages x2", stream_bulk<2>, 2 * sms, 32, 4 * 2 * 8192);
      }
    }
  }
  return 0;
}
