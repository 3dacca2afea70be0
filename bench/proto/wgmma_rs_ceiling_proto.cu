// Prototype harness (not part of the build): the ceiling of the SM90 fused-MoE wgmma tile's k-loop
// STRUCTURE, without its data movement — to tell whether the ~30% of the wgmma peak the tile
// reaches at T = 4096 (b12x-moe/src/fused_moe/README.md, "The 64-row wgmma tile") is lost in the
// structure (warpgroups per SM, register-A wgmma of N columns, a dequantization chain between
// waits) or in the tile's own loop (its loads, barriers, producer, epilogue).
//
// Kernel: one CTA per SM of W warpgroups (W * 128 threads), each looping k16 steps over three
// A-register buffers exactly as moe_tile_wg does — wait_group<2>, the step's "codes" (one 16-byte
// shared load per thread, or, `pre`, loaded one step ahead), a chain of D dependent
// (funnel-shift, xor, bf16x2 multiply) triples per A register (the real conversion is ~5 ALU
// per register: D = 2 is close, D = 0 only an OR), wgmma.fence, one m64nNk16 register-A wgmma
// reading B (bf16, K-major, 128-byte swizzle) from shared memory, commit. Data are zeros: only
// the schedule is measured. TFLOP/s counts 2 * 64 * N * 16 per wgmma per warpgroup.
//
// Build and run on the H200 / H100 (no Rust needed):
//   nvcc -std=c++17 -O3 -arch=sm_90a -I b12x-core/include -o /tmp/wgc bench/proto/wgmma_rs_ceiling_proto.cu && /tmp/wgc
#include "b12x/wgmma_sm90.cuh"

#include <cstdio>
#include <cuda_runtime.h>

using namespace b12x;

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm volatile("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}


template <int W, int N, int D, bool kPre>
__global__ void __launch_bounds__(W * 128, 1) ceiling(int iters, int* sink) {
#if B12X_SM90_FEATURES
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t base = (uint32_t(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
  const int tid = threadIdx.x;
  for (int i = tid; i < 16384; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = 0u;  // 64 KB
  __syncthreads();
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  uint32_t a[3][4] = {};
  const uint32_t codes = base + 32768u + uint32_t(tid & 127) * 16u;
  uint4 next = lds128(codes);
  int it = 0;
  do {
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      wg::wait<2>();
      const uint4 v = kPre ? next : lds128(codes + 16u * s);
      const uint32_t r[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t y = r[j] | a[s][j];
#pragma unroll
        for (int d = 0; d < D; ++d) y = mul_bf16x2(__funnelshift_r(y, y, 3 + d) ^ (0x81C081C0u + d), 0x3F803F80u);
        a[s][j] = y;
      }
      if (kPre) next = lds128(codes + 16u * ((s + 1) % 3));
      wg::fence();
      const uint64_t desc = wg::desc_sw128(base + 32u * s);
      if constexpr (N == 128) {
        wg::mma_m64n128k16_rs(acc, a[s], desc, true);
      } else {
        wg::mma_m64n64k16_rs(acc, a[s], desc, true);
      }
      wg::commit();
    }
  } while (++it < iters);
  wg::wait<0>();
  float q = 0.0f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) q += acc[i];
  if (q == 1.2345f) sink[0] = 1;  // keeps the MMAs
#endif
}

template <int W, int N, int D, bool kPre>
void run(int sms, int* sink) {
  auto k = ceiling<W, N, D, kPre>;
  const int smem = 100000, iters = 4000;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  k<<<sms, W * 128, smem>>>(10, sink);  // warm-up
  cudaEventRecord(e0);
  k<<<sms, W * 128, smem>>>(iters, sink);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  const double flop = 2.0 * 64 * N * 16 * 3.0 * iters * W * sms;
  const double us_per_ktile = ms * 1e3 / (iters * 3.0 / 8.0);  // 8 k16 steps = one 128-k tile
  printf("warpgroups %d  N %3d  chain %d  codes %s: %7.1f TFLOP/s  (%.3f us per 128-k tile per CTA)  %s\n", W, N, D,
         kPre ? "one step ahead" : "at the step    ", flop / (ms * 1e9), us_per_ktile,
         cudaGetErrorString(cudaGetLastError()));
}

int main() {
  int dev = 0, sms = 0, clk = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, dev);
  printf("%s, %d SMs, %.0f MHz max\n", prop.name, sms, clk / 1e3);
  int* sink = nullptr;
  cudaMalloc(&sink, 4);
  run<4, 128, 0, false>(sms, sink);
  run<4, 128, 2, false>(sms, sink);
  run<4, 128, 2, true>(sms, sink);
  run<4, 128, 4, false>(sms, sink);
  run<2, 128, 2, false>(sms, sink);
  run<4, 64, 0, false>(sms, sink);
  run<4, 64, 2, false>(sms, sink);
  run<4, 64, 2, true>(sms, sink);
  run<4, 64, 4, false>(sms, sink);
  cudaFree(sink);
  return 0;
}
