// Prototype harness: programmatic dependent launch (PDL) for bf16_gemv in a decode graph's
// steady state (not part of the build, not the source of any reported number). Each graph
// holds 8 back-to-back calls, each on its own copy of W (cold weights, as consecutive layers),
// L2 flushed before each sample, median of 30 samples / 8. It times the TMA kernels and the mma
// ring kernel with and without the PDL launch attribute, cublasGemmEx the same way, and the read
// probes, and checks the chained result against a naive kernel.
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/pdl gemv_pdl_proto.cu -lcublas && /tmp/pdl
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#include "proto_common.cuh"

static const int kCalls = getenv("PROTO_CALLS") ? atoi(getenv("PROTO_CALLS")) : 8;

// cluster > 1: launch in clusters of that many CTAs along x (placement only: the kernels run
// their plain work split; the cluster just spreads CTAs over the GPCs).
static void launch(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t st, void* params, bool pdl, int cluster = 1) {
  cudaLaunchAttribute attrs[2]{};
  int n = 0;
  if (pdl) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster; attrs[n].val.clusterDim.y = 1; attrs[n++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid; cfg.blockDim = block; cfg.dynamicSmemBytes = smem; cfg.stream = st;
  cfg.attrs = attrs; cfg.numAttrs = n;
  void* args[] = {params};
  CK(cudaLaunchKernelExC(&cfg, fn, args));
}


struct Tma { int nt, cw, kb; const void* fn; };
#define T(NT, CW, KB) {NT, CW, KB, (const void*)b12x_bf16_gemv_tma_nt##NT##_rt1_cw##CW##_kb##KB##_bf16out}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  cublasHandle_t hb; cublasCreate(&hb); cublasSetStream(hb, st);
  void* ws; CK(cudaMalloc(&ws, 64 << 20)); cublasSetWorkspace(hb, ws, 64 << 20);
  struct Shape { int n, k; };
  const Shape shapes[] = {{7168, 4096}, {4096, 7168}, {18432, 7168}};
  const int ms[] = {1, 16};
  const size_t max_w = 18432ull * 7168;
  std::vector<bf16*> w(kCalls);
  for (auto& p : w) { CK(cudaMalloc(&p, max_w * 2)); fill_bf16<<<1024, 256>>>(p, max_w, 1); }
  bf16* x; float *yref, *partials; bf16* y; unsigned long long* counters;  // tagged merge counters (arrive_tagged)
  CK(cudaMalloc(&x, 64 * 18432 * 2)); CK(cudaMalloc(&yref, 16ull * 18432 * 4)); CK(cudaMalloc(&y, 16ull * 18432 * 2));
  CK(cudaMalloc(&partials, 64 << 20)); CK(cudaMalloc(&counters, 1 << 20));
  fill_bf16<<<64, 256>>>(x, 64 * 18432, 2); CK(cudaDeviceSynchronize());
  printf("calls per graph: %d, each on its own W; times are per call\n", kCalls);
  for (auto sh : shapes) {
    const size_t wbytes = (size_t)sh.n * sh.k * 2;
    {  // read probes, the same way
      const size_t nv = wbytes / 8192 * 512;
      double best = 1e30;
      for (int c : {1, 2, 4}) for (int kind = 0; kind < 2; ++kind) for (int pdl = 0; pdl < 2; ++pdl) {
        auto fn = kind ? (const void*)b12x_read_bw_u8 : (const void*)b12x_read_bw;
        double t = time_graph(st, [&] { for (int i = 0; i < kCalls; ++i) { ReadBwParams rp{(const b12x::Vec16*)w[i], g_sink, nv, 0x9e3779b9u, 0}; launch(fn, dim3(sms * c), dim3(512), 0, st, &rp, pdl); } }) / kCalls;
        best = std::min(best, t);
      }
      printf("== N=%d K=%d: read probe x%d %.2f us (%.3f TB/s)\n", sh.n, sh.k, kCalls, best, wbytes / best / 1e6);
    }
    for (int m : ms) {
      ref_gemv<<<(sh.n * m * 32 + 255) / 256, 256, 0, st>>>(w[0], x, yref, sh.n, sh.k, m);
      float one = 1, zero = 0;
      double tc = time_graph(st, [&] { for (int i = 0; i < kCalls; ++i)
        cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, m, sh.k, &one, w[i], CUDA_R_16BF, sh.k, x, CUDA_R_16BF, sh.k, &zero, y,
                     CUDA_R_16BF, sh.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); }) / kCalls;
      printf("  M=%2d cublas x%d: %.2f us\n", m, kCalls, tc);
      auto check = [&](const char* what) {
        std::vector<float> ref((size_t)m * sh.n); std::vector<uint16_t> got((size_t)m * sh.n);
        CK(cudaMemcpy(ref.data(), yref, ref.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
        double maxerr = 0;
        for (size_t i = 0; i < got.size(); ++i) { uint32_t u = (uint32_t)got[i] << 16; float f; memcpy(&f, &u, 4);
          double e = fabs(f - ref[i]) / (1.0 + fabs(ref[i])); if (!(e <= maxerr)) maxerr = e; }
        return maxerr < 1e-2 ? "OK" : "FAIL";
      };
      // mma ring kernel (the 264 MB shape's choice at M <= 4), one CTA per 16 rows, 2 k-warps.
      if (m <= 8 && getenv("PROTO_MMA")) {
        const void* fn = m == 1 ? (const void*)b12x_bf16_gemv_mma_nt1_rt1_u8_s3_bf16out : (const void*)b12x_bf16_gemv_mma_nt1_rt1_u4_s4_bf16out;
        const int wk = m == 1 ? 2 : 4;
        Bf16GemvParams p{};
        p.x = x; p.y = y; p.ldw = sh.k; p.ldx = sh.k; p.ldy = sh.n; p.n = sh.n; p.k = sh.k; p.m = m;
        p.k_per_split = (sh.k + 31) / 32 * 32; p.ksplit = 1; p.warps_k = wk; p.warps_r = 1; p.n_pad = (sh.n + 15) / 16 * 16; p.m_pad = 8;
        const int u = m == 1 ? 8 : 4, stages = m == 1 ? 3 : 4;
        const uint32_t dyn = wk * stages * (16 * 4 * u * 16 + u * 512);  // Config::dynamic_smem
        CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
        for (int pdl = 0; pdl < 2; ++pdl) {
          auto chain = [&] { for (int i = 0; i < kCalls; ++i) { Bf16GemvParams q = p; q.w = w[i]; q.flags = pdl ? 2 : 0; launch(fn, dim3(sh.n / 16), dim3(32 * wk), dyn, st, &q, pdl); } };
          CK(cudaMemsetAsync(y, 0xff, 16ull * sh.n * 2, st)); chain(); CK(cudaStreamSynchronize(st));
          const char* ok = check("mma");
          printf("  M=%2d mma_nt1_u%d_wk%d pdl%d: %8.2f us | cublas %.2f | ratio %.2f | %s\n", m, m == 1 ? 8 : 4, wk, pdl,
                 time_graph(st, chain) / kCalls, tc, tc / (time_graph(st, chain) / kCalls), ok);
        }
      }
      const Tma tmas[] = {T(1, 4, 8), T(2, 4, 8), T(2, 4, 4), T(2, 2, 8)};
      for (auto v : tmas) {
        if (8 * v.nt < m || (v.nt > 1 && 8 * v.nt / 2 >= m)) continue;
        const int rows = 16 * v.cw;
        const uint32_t stage = v.kb * (rows * 128 + 8 * v.nt * 128);
        const int stages = std::min<int>(16, (prop.sharedMemPerBlockOptin - 1024 - 512) / stage);
        const uint32_t dyn = stages * stage + 1024;
        CK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
        std::vector<Bf16GemvTmaParams> ps(kCalls);
        for (int i = 0; i < kCalls; ++i) {
          Bf16GemvTmaParams& p = ps[i];
          p = Bf16GemvTmaParams{};
          encode((CUtensorMap*)&p.w_map, w[i], sh.k, sh.n, (uint64_t)sh.k * 2, 64, rows);
          encode((CUtensorMap*)&p.x_map, x, sh.k, m, (uint64_t)sh.k * 2, 64, 8 * v.nt);
          p.g.y = y; p.g.ldy = sh.n; p.g.n = sh.n; p.g.k = sh.k; p.g.m = m; p.g.partials = partials; p.g.counters = counters;
          p.kstages = (sh.k + 64 * v.kb - 1) / (64 * v.kb);
          p.units_per_cta = p.kstages;  // rb: one CTA per row block
          p.stages = stages; p.flags = 1;
        }
        const int grid = (sh.n + rows - 1) / rows;
        for (int cl : {1, 2, 4})
        for (int pdl = 0; pdl < 2; ++pdl) {
          if (grid % cl) continue;
          for (auto& p : ps) p.g.flags = pdl ? 2 : 0;  // Bf16GemvParams::flags bit 1: PDL launch
          auto chain = [&] { for (int i = 0; i < kCalls; ++i) launch(v.fn, dim3(grid), dim3(32 * (v.cw + 1)), dyn, st, &ps[i], pdl, cl); };
          CK(cudaMemsetAsync(y, 0xff, 16ull * sh.n * 2, st)); chain(); CK(cudaStreamSynchronize(st));
          const char* ok = check("tma");
          const double t = time_graph(st, chain) / kCalls;
          printf("  M=%2d tma_nt%d_cw%d_kb%d_s%d_rb cluster %d pdl%d grid %d: %8.2f us %.3f TB/s | cublas %.2f | ratio %.2f | %s\n", m, v.nt, v.cw, v.kb,
                 stages, cl, pdl, grid, t, wbytes / t / 1e6, tc, tc / t, ok);
        }
      }
    }
  }
  return 0;
}
