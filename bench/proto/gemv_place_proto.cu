// Prototype harness (not part of the build, not the source of any reported number): does the
// single-call bf16_gemv TMA kernel lose to cuBLAS at M = 8-16 because of *where and when* its
// CTAs read, rather than what they read? For the shapes still slower than cuBLAS it times, in
// one process with the project's method (graph replay, L2 flushed, median of 30; two rounds):
//   - the TMA kernel as the library launches it (rb: one CTA per 64-row block; sk: stream-K);
//   - the same launched in thread block clusters of 2 or 4 with no cross-CTA work (cluster
//     placement only: cuBLAS's nvjet kernels run in clusters of 4 along N);
//   - the ring's depth (bytes in flight per SM): 64-k boxes per stage (KB) x stages;
//   - a plain streaming read of W's bytes and cuBLAS's GEMM (cublasGemmEx, the toolkit's
//     cuBLAS: not the nvjet kernel PyTorch's cuBLAS picks) on the same buffers.
// Earlier variants of this harness (session 12, bench-results/2026-12-01-h200-b/): clusters of
// 2 or 4 with no cross-CTA work changed nothing; k rotation (row block rb starting at k-stage
// rb*kstages/row_blocks) was 0-2% slower on 7168x4096 and 12-32% slower on 4096x7168; keeping
// 1-8 more units of W prefetched into L2 ahead of the ring (cp.async.bulk.prefetch.tensor) was
// 8-40% slower, monotonically in the distance; W without the evict-first hint 10-12% slower.
// Those kernel experiments are patches kept there (placement/rotate.patch,
// prefetch/prefetch.patch); run_tma's `pf` (flags bits 8..15) does nothing without the latter.
// Every GEMV variant's output is checked against a naive f32 reference.
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/place gemv_place_proto.cu -lcublas && /tmp/place
// (-DNO_CUBLAS builds it without the cuBLAS rows.)
#include <cuda.h>
#include <cuda_runtime.h>
#ifndef NO_CUBLAS
#include <cublas_v2.h>
#endif
#include <cmath>
#include <cstdio>
#include <string>
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#include "proto_common.cuh"
#include "proto_trace.cuh"
#include "proto_launch.cuh"

template <int NT, int KB>
__global__ void __launch_bounds__(160, 1) traced_tma(const __grid_constant__ b12x::Bf16GemvTmaParams p) {
  trace_start();
  b12x::bf16_gemv::gemv_tma<NT, 1, 4, KB, bf16>(p);
  trace_end();
}
__global__ void bf16_to_f32(const bf16* a, float* b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    b[i] = __bfloat162float(a[i]);
}

struct Bufs { bf16 *w, *x, *y; float *ref, *yf, *partials; unsigned long long* counters; };

// Max |y - ref| / max |ref| over the M x N outputs.
static double check(const Bufs& b, int n, int m) {
  const size_t cnt = (size_t)n * m;
  bf16_to_f32<<<256, 256>>>(b.y, b.yf, cnt);
  std::vector<float> y(cnt), r(cnt);
  CK(cudaMemcpy(y.data(), b.yf, cnt * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), b.ref, cnt * 4, cudaMemcpyDeviceToHost));
  double e = 0, mx = 0;
  for (size_t i = 0; i < cnt; ++i) { e = std::max(e, (double)std::fabs(y[i] - r[i])); mx = std::max(mx, (double)std::fabs(r[i])); }
  return e / mx;
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  struct Case { int n, k, m; };
  const Case cases[] = {{7168, 4096, 16}, {7168, 4096, 8}, {4096, 7168, 16}, {18432, 7168, 8}, {18432, 7168, 16}};
  const size_t max_w = 18432ull * 7168;
  Bufs b{};
  CK(cudaMalloc(&b.w, max_w * 2)); CK(cudaMalloc(&b.x, 64 * 18432 * 2)); CK(cudaMalloc(&b.y, 16ull * 18432 * 2));
  CK(cudaMalloc(&b.ref, 16ull * 18432 * 4)); CK(cudaMalloc(&b.yf, 16ull * 18432 * 4));
  CK(cudaMalloc(&b.partials, 64 << 20)); CK(cudaMalloc(&b.counters, 1 << 20));
  fill_bf16<<<1024, 256>>>(b.w, max_w, 1); fill_bf16<<<64, 256>>>(b.x, 64 * 18432, 2); CK(cudaDeviceSynchronize());
#ifndef NO_CUBLAS
  cublasHandle_t h; cublasCreate(&h); cublasSetStream(h, st);
  void* ws; CK(cudaMalloc(&ws, 32 << 20)); cublasSetWorkspace(h, ws, 32 << 20);
#endif
  for (int round = 0; round < 2; ++round)
  for (auto c : cases) {
    const size_t wbytes = (size_t)c.n * c.k * 2;
    printf("== round %d: N=%d K=%d M=%d (%.1f MB)\n", round, c.n, c.k, c.m, wbytes / 1e6);
    ref_gemv<<<(c.n * c.m * 32 + 255) / 256, 256>>>(b.w, b.x, b.ref, c.n, c.k, c.m);
    CK(cudaDeviceSynchronize());
    for (int per_sm : {1, 2}) {
      const int grid = sms * per_sm;
      const double t = time_graph(st, [&] { traced_read<<<grid, 512, 0, st>>>((const uint4*)b.w, wbytes / 16, g_sink); });
      char name[64]; snprintf(name, sizeof name, "read, %d CTA/SM", per_sm);
      report(name, grid, t);
    }
#ifndef NO_CUBLAS
    {
      const float alpha = 1.0f, beta = 0.0f;
      auto gemm = [&] {
        cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, c.n, c.m, c.k, &alpha, b.w, CUDA_R_16BF, c.k, b.x,
                                        CUDA_R_16BF, c.k, &beta, b.y, CUDA_R_16BF, c.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) { printf("cublas %d\n", (int)s); exit(1); }
      };
      gemm(); CK(cudaStreamSynchronize(st));
      const double t = time_graph(st, gemm);
      printf("  %-44s event %7.2f us | rel err %.2e\n", "cuBLAS cublasGemmEx", t, check(b, c.n, c.m));
    }
#endif
    auto run_tma = [&](auto kernel, int nt, int kb, bool sk, int pf, bool ef, int cluster, int max_stages = 16) {
      constexpr int rows = 64;
      const uint32_t stage = kb * (rows * 128 + 8 * nt * 128);
      const int stages = std::min<int>(max_stages, (prop.sharedMemPerBlockOptin - 1024 - 1024) / stage);
      const uint32_t dyn = stages * stage + 1024;
      CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
      b12x::Bf16GemvTmaParams p{};
      encode((CUtensorMap*)&p.w_map, b.w, c.k, c.n, (uint64_t)c.k * 2, 64, rows);
      encode((CUtensorMap*)&p.x_map, b.x, c.k, c.m, (uint64_t)c.k * 2, 64, 8 * nt);
      p.g.y = b.y; p.g.ldy = c.n; p.g.n = c.n; p.g.k = c.k; p.g.m = c.m; p.g.partials = b.partials; p.g.counters = b.counters;
      p.kstages = (c.k + 64 * kb - 1) / (64 * kb);
      const int row_blocks = (c.n + rows - 1) / rows;
      const int units = row_blocks * p.kstages;
      p.units_per_cta = sk ? (units + sms - 1) / sms : p.kstages;
      p.stages = stages;
      p.flags = (ef ? b12x::kTmaEvictFirst : 0) | (pf << 8);
      int grid = (units + p.units_per_cta - 1) / p.units_per_cta;
      if (cluster > 1 && grid % cluster) return;
      cudaLaunchAttribute attr;
      cudaLaunchConfig_t cfg = launch_config(dim3(grid), dim3(160), dyn, st, cluster > 1, cluster, attr);
      auto launch = [&] {
        if (sk) CK(cudaMemsetAsync(b.counters, 0, 1 << 16, st));
        CK(cudaLaunchKernelEx(&cfg, kernel, p));
      };
      launch(); CK(cudaStreamSynchronize(st));
      const double err = check(b, c.n, c.m);
      const double t = time_graph(st, launch);
      char name[96];
      snprintf(name, sizeof name, "tma kb%d s%d %s pf%d %s%s", kb, stages, sk ? "sk+memset" : "rb", pf, ef ? "ef" : "nh",
               cluster > 1 ? (" cl" + std::to_string(cluster)).c_str() : "");
      report(name, grid, t);
      if (err > 2e-2) printf("  ^ WRONG: rel err %.3e\n", err);
    };
    // Ring depth (bytes in flight per SM), no prefetch, evict-first: KB = 2, 4, 8 with 2 stages
    // up to as many as fit.
    for (int kb : {8, 4, 2})
      for (bool sk : {false, true}) {
        if (!sk && c.n > 8192) continue;  // rb is 2+ waves there
        for (int ms : {2, 3, 4, 6, 8, 12, 16}) {
          if (kb * ms > 32 || kb * ms < 8) continue;
          if (c.m == 16) {
            if (kb == 8) run_tma(traced_tma<2, 8>, 2, 8, sk, 0, true, 1, ms);
            else if (kb == 4) run_tma(traced_tma<2, 4>, 2, 4, sk, 0, true, 1, ms);
            else run_tma(traced_tma<2, 2>, 2, 2, sk, 0, true, 1, ms);
          } else {
            if (kb == 8) run_tma(traced_tma<1, 8>, 1, 8, sk, 0, true, 1, ms);
            else if (kb == 4) run_tma(traced_tma<1, 4>, 1, 4, sk, 0, true, 1, ms);
            else run_tma(traced_tma<1, 2>, 1, 2, sk, 0, true, 1, ms);
          }
        }
      }
  }
  return 0;
}
