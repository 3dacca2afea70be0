// Prototype harness: per-CTA timelines of the bf16_gemv kernels (not part of the build, not the
// source of any reported number). Wraps the TMA and mma-ring kernel bodies in kernels that
// record each CTA's SM, its first instruction and its last warp's exit (%globaltimer), replays
// them in a graph with the project's L2 flush (median of 30 samples), and prints where a
// call's time goes: first CTA start → last CTA start (launch skew), CTA durations (min, median,
// max) and the last exit, against the event-timed call. A plain streaming read (one CTA per SM
// reading a contiguous slice, 16-byte loads) is traced the same way for comparison.
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/trace gemv_trace_proto.cu && /tmp/trace
// (No -lcuda: proto_common.cuh's `encode` gets the tensor-map encoder through
// cudaGetDriverEntryPoint, so the binary also builds on a machine without the driver.)
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#include "proto_common.cuh"
#include "proto_trace.cuh"

template <int NT, int CW, int KB>
__global__ void __launch_bounds__(32 * (CW + 1), 1) traced_tma(const __grid_constant__ b12x::Bf16GemvTmaParams p) {
  trace_start();
  b12x::bf16_gemv::gemv_tma<NT, 1, CW, KB, bf16>(p);
  trace_end();
}
template <int NT, int RT, int U, int S>
__global__ void __launch_bounds__(256, 1) traced_mma(const __grid_constant__ Bf16GemvParams p) {
  trace_start();
  b12x::bf16_gemv::gemv_mma<NT, RT, U, S, bf16, b12x::bf16_gemv::Feed::kRing>(p);
  trace_end();
}
int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  {
    unsigned long long* r; CK(cudaMalloc(&r, 8)); timer_resolution<<<1, 1>>>(r);
    unsigned long long h; CK(cudaMemcpy(&h, r, 8, cudaMemcpyDeviceToHost));
    printf("globaltimer step: %llu ns\n", h);
  }
  struct Shape { int n, k; };
  const Shape shapes[] = {{7168, 4096}, {4096, 7168}, {18432, 7168}};
  const size_t max_w = 18432ull * 7168;
  bf16 *w, *x, *y; float* partials; unsigned long long* counters;  // tagged merge counters (arrive_tagged)
  CK(cudaMalloc(&w, max_w * 2)); CK(cudaMalloc(&x, 64 * 18432 * 2)); CK(cudaMalloc(&y, 16ull * 18432 * 4));
  CK(cudaMalloc(&partials, 64 << 20)); CK(cudaMalloc(&counters, 1 << 20));
  fill_bf16<<<1024, 256>>>(w, max_w, 1); fill_bf16<<<64, 256>>>(x, 64 * 18432, 2); CK(cudaDeviceSynchronize());
  for (auto sh : shapes) {
    const size_t wbytes = (size_t)sh.n * sh.k * 2;
    printf("== N=%d K=%d (%.1f MB)\n", sh.n, sh.k, wbytes / 1e6);
    for (int c : {1, 2}) {
      const int grid = sms * c;
      const double t = time_graph(st, [&] { traced_read<<<grid, 512, 0, st>>>((const uint4*)w, wbytes / 16, g_sink); });
      char name[64]; snprintf(name, sizeof name, "read, %d CTAs/SM, contiguous slices", c);
      report(name, grid, t);
    }
    for (int m : {8, 16}) {
      // TMA, one CTA per 64-row block (rb), as deep a ring as fits.
      auto run_tma = [&](auto kernel, int nt, int cw, int kb, bool sk) {
        const int rows = 16 * cw;
        const uint32_t stage = kb * (rows * 128 + 8 * nt * 128);
        const int stages = std::min<int>(16, (prop.sharedMemPerBlockOptin - 1024 - 1024) / stage);
        const uint32_t dyn = stages * stage + 1024;
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
        b12x::Bf16GemvTmaParams p{};
        encode((CUtensorMap*)&p.w_map, w, sh.k, sh.n, (uint64_t)sh.k * 2, 64, rows);
        encode((CUtensorMap*)&p.x_map, x, sh.k, m, (uint64_t)sh.k * 2, 64, 8 * nt);
        p.g.y = y; p.g.ldy = sh.n; p.g.n = sh.n; p.g.k = sh.k; p.g.m = m; p.g.partials = partials; p.g.counters = counters;
        p.kstages = (sh.k + 64 * kb - 1) / (64 * kb);
        const int row_blocks = (sh.n + rows - 1) / rows;
        const int units = row_blocks * p.kstages;
        p.units_per_cta = sk ? (units + sms - 1) / sms : p.kstages;
        p.stages = stages; p.flags = 1;
        const int grid = (units + p.units_per_cta - 1) / p.units_per_cta;
        const double t = time_graph(st, [&] {
          if (sk) CK(cudaMemsetAsync(counters, 0, 1 << 16, st));
          kernel<<<grid, 32 * (cw + 1), dyn, st>>>(p);
        });
        char name[96]; snprintf(name, sizeof name, "M=%d tma_nt%d_cw%d_kb%d_s%d_%s", m, nt, cw, kb, stages, sk ? "sk (+memset)" : "rb");
        report(name, grid, t);
      };
      if (m == 8) {
        run_tma(traced_tma<1, 4, 8>, 1, 4, 8, false);
        run_tma(traced_tma<1, 4, 4>, 1, 4, 4, false);
        run_tma(traced_tma<1, 4, 8>, 1, 4, 8, true);
      } else {
        run_tma(traced_tma<2, 4, 8>, 2, 4, 8, false);
        run_tma(traced_tma<2, 4, 4>, 2, 4, 4, false);
        run_tma(traced_tma<2, 4, 8>, 2, 4, 8, true);
      }
      if (m == 8) {  // mma ring (the 264 MB choice at M <= 8): one CTA per 16 rows, 4 k-warps
        auto kernel = traced_mma<1, 1, 4, 4>;
        const int wk = 4, u = 4, stages = 4;
        const uint32_t dyn = wk * stages * (16 * 4 * u * 16 + u * 512);
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
        Bf16GemvParams p{};
        p.w = w; p.x = x; p.y = y; p.ldw = sh.k; p.ldx = sh.k; p.ldy = sh.n; p.n = sh.n; p.k = sh.k; p.m = m;
        p.k_per_split = (sh.k + 31) / 32 * 32; p.ksplit = 1; p.warps_k = wk; p.warps_r = 1; p.n_pad = (sh.n + 15) / 16 * 16; p.m_pad = 8;
        const int grid = sh.n / 16;
        if (grid <= 4096) {
          const double t = time_graph(st, [&] { kernel<<<grid, 32 * wk, dyn, st>>>(p); });
          report("M=8 mma_nt1_rt1_u4_s4_wr1_wk4", grid, t);
        }
      }
    }
  }
  return 0;
}
