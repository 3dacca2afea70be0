// Prototype harness for the bf16_gemv TMA kernels (not part of the build, not the source of any
// reported number): on a GPU machine with nvcc but no Rust it compiles in ~40 s, where a GPU
// bundle takes minutes, so kernel variants can be compared quickly. It includes the kernel
// sources directly, times the TMA variants (work split, L2 hint, descriptor promotion, CTAs per
// SM), two of the older kernels and cublasGemmEx (whose heuristics differ from PyTorch's: compare
// kernels with kernels within one run, never with the bench's peer), with the project's flush
// and read probes, graph-replayed, median of 30, and checks each result against a naive kernel
// (relative 1e-2 bf16 / 1e-4 f32: the f32 bound is stricter than the op's oracle bound, so a
// single CTA summing all of K can "FAIL" here by accumulation order alone).
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/p gemv_tma_proto.cu -lcublas && /tmp/p
// Env: PROTO_SHAPE=NxK, PROTO_M=m (one case), PROTO_NCU=1 (one launch per variant, for ncu).
// Outputs of the runs behind the variant table: bench-results/2026-11-30-h200-d/prototype/.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#include "proto_common.cuh"

__global__ void read_probe(const uint4* p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = i + j * stride < n ? __ldcs(p + i + j * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (acc == 0x12345678) *sink = acc;
}
__global__ void empty_kernel() {}


struct Variant { int nt, rt, cw, kb; const void* fn_bf16; const void* fn_f32; };
#define V(NT, RT, CW, KB) {NT, RT, CW, KB, (const void*)b12x_bf16_gemv_tma_nt##NT##_rt##RT##_cw##CW##_kb##KB##_bf16out, (const void*)b12x_bf16_gemv_tma_nt##NT##_rt##RT##_cw##CW##_kb##KB##_f32out}
static Variant kVariants[] = {V(1, 1, 4, 4), V(1, 1, 4, 8), V(2, 1, 4, 4), V(2, 1, 4, 8), V(2, 1, 2, 8), V(4, 1, 4, 2)};


int main(int argc, char** argv) {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  cublasHandle_t hb; cublasCreate(&hb); cublasSetStream(hb, st);
  void* cublas_ws; CK(cudaMalloc(&cublas_ws, 64 << 20)); cublasSetWorkspace(hb, cublas_ws, 64 << 20);
  uint32_t* sink = g_sink;
  printf("empty kernel graph: %.2f us\n", time_graph(st, [&] { empty_kernel<<<1, 32, 0, st>>>(); }));
  struct Shape { int n, k; bool f32; };
  std::vector<Shape> shapes = {{7168, 4096, false}, {4096, 7168, false}, {18432, 7168, false}, {384, 7168, true}};
  int ms[] = {8, 16};
  const size_t max_w = 129280ull * 7168;
  bf16 *w, *x; float *yref, *partials; void* y; unsigned long long* counters;  // tagged merge counters (arrive_tagged)
  CK(cudaMalloc(&w, max_w * 2)); CK(cudaMalloc(&x, 64 * 18432 * 2)); CK(cudaMalloc(&yref, 16ull * 129280 * 4));
  CK(cudaMalloc(&y, 16ull * 129280 * 4)); CK(cudaMalloc(&partials, 64 << 20)); CK(cudaMalloc(&counters, 1 << 20));
  fill_bf16<<<1024, 256>>>(w, max_w, 1); fill_bf16<<<64, 256>>>(x, 64 * 18432, 2); CK(cudaDeviceSynchronize());
  // read probe at the full 2 GB and at each size
  auto probe = [&](size_t bytes) {
    size_t nv = bytes / 8192 * 512;
    ReadBwParams rp{(const b12x::Vec16*)w, sink, nv, 0x9e3779b9u, 0};
    double best = 1e30;
    for (int c : {1, 2, 4}) {
      best = std::min(best, time_graph(st, [&] { b12x_read_bw<<<sms * c, 512, 0, st>>>(rp); }));
      best = std::min(best, time_graph(st, [&] { b12x_read_bw_u8<<<sms * c, 512, 0, st>>>(rp); }));
    }
    for (int c : {2, 4, 6}) best = std::min(best, time_graph(st, [&] { b12x_read_bw_bulk<<<sms * c, 32, 0, st>>>(rp); }));
    return best;
  };
  double t2g = probe(max_w * 2);
  printf("read probe %zu MB: %.2f us = %.3f TB/s\n", max_w * 2 >> 20, t2g, max_w * 2 / t2g / 1e6);
  double ceil_tbps = max_w * 2 / t2g / 1e6;
  const char* only = getenv("PROTO_SHAPE");  // e.g. "7168x4096"
  const bool ncu = getenv("PROTO_NCU") != nullptr;
  for (auto sh : shapes) {
    if (only) { char buf[64]; snprintf(buf, sizeof buf, "%dx%d", sh.n, sh.k); if (strcmp(buf, only) != 0) continue; }
    size_t wbytes = (size_t)sh.n * sh.k * 2;
    double tp = probe(wbytes);
    printf("== N=%d K=%d %s out: read probe %.2f us (%.1f%% of 2GB ceiling)\n", sh.n, sh.k, sh.f32 ? "f32" : "bf16", tp, 100.0 * wbytes / tp / 1e6 / ceil_tbps);
    for (int m : ms) {
      if (getenv("PROTO_M") && atoi(getenv("PROTO_M")) != m) continue;
      ref_gemv<<<(sh.n * m * 32 + 255) / 256, 256, 0, st>>>(w, x, yref, sh.n, sh.k, m);
      float one = 1, zero = 0;
      double tc = time_graph(st, [&] {
        cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, m, sh.k, &one, w, CUDA_R_16BF, sh.k, x, CUDA_R_16BF, sh.k, &zero, y,
                     sh.f32 ? CUDA_R_32F : CUDA_R_16BF, sh.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      });
      {  // the existing kernels, for reference
        struct Old { const char* name; const void* fn; int nt, rows_cta, wk, threads; uint32_t dyn; };
        std::vector<Old> olds;
        if (m <= 8) {
          olds.push_back({"mmad_nt1_rt1_u4_wr1_wk8", (const void*)b12x_bf16_gemv_mmad_nt1_rt1_u4_bf16out, 1, 16, 8, 256, 8 * 8 * 20 * 4});
          olds.push_back({"mma_nt1_rt1_u4_s4_wr1_wk4", (const void*)b12x_bf16_gemv_mma_nt1_rt1_u4_s4_bf16out, 1, 16, 4, 128, 98304});
        } else {
          olds.push_back({"mmad_nt2_rt1_u4_wr1_wk8", (const void*)b12x_bf16_gemv_mmad_nt2_rt1_u4_bf16out, 2, 16, 8, 256, 8 * 16 * 20 * 4});
          olds.push_back({"mma_nt2_rt2_u2_s4_wr1_wk8", (const void*)b12x_bf16_gemv_mma_nt2_rt2_u2_s4_bf16out, 2, 32, 8, 256, 196608});
        }
        if (!sh.f32) for (auto& o : olds) {
          Bf16GemvParams p{};
          p.w = w; p.x = x; p.y = y; p.ldw = sh.k; p.ldx = sh.k; p.ldy = sh.n; p.n = sh.n; p.k = sh.k; p.m = m;
          p.k_per_split = (sh.k + 31) / 32 * 32; p.ksplit = 1; p.warps_k = o.wk; p.warps_r = 1;
          const int blocks = (sh.n + o.rows_cta - 1) / o.rows_cta;
          p.n_pad = blocks * o.rows_cta; p.m_pad = 8 * o.nt;
          CK(cudaFuncSetAttribute(o.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, o.dyn));
          auto launch = [&] { void* args[] = {&p}; CK(cudaLaunchKernel(o.fn, dim3(blocks), dim3(o.threads), args, o.dyn, st)); };
          double t = time_graph(st, launch);
          printf("  M=%2d old %-28s: %8.2f us %5.1f%% | cublas %8.2f us | ratio %.2f\n", m, o.name, t, 100.0 * wbytes / t / 1e6 / ceil_tbps, tc, tc / t);
        }
      }
      for (int qm = 0; qm < 2; ++qm) for (int promo = 1; promo < 2; ++promo) for (int flags = 0; flags < 1; flags += 2) for (int cps = 1; cps <= 1; ++cps) for (auto& v : kVariants) {
        if (ncu && !(qm == 1 && promo == 1 && flags == 0)) continue;
        if (qm == 1 && cps == 2) continue;
        if (8 * v.nt < m || (v.nt > 1 && 8 * v.nt / 2 >= m)) continue;
        const int rows = 16 * v.rt * v.cw;
        const uint32_t stage = v.kb * (rows * 128 + 8 * v.nt * 128);
        const int stages = std::min<int>(16, (prop.sharedMemPerBlockOptin / cps - 1024 - 512) / stage);
        if (stages < 2 || (cps == 2 && qm == 1)) continue;
        const uint32_t dyn = stages * stage + 1024;
        Bf16GemvTmaParams p{};
        encode((CUtensorMap*)&p.w_map, w, sh.k, sh.n, (uint64_t)sh.k * 2, 64, rows, promo ? CU_TENSOR_MAP_L2_PROMOTION_NONE : CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
        encode((CUtensorMap*)&p.x_map, x, sh.k, m, (uint64_t)sh.k * 2, 64, 8 * v.nt, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
        p.g.y = y; p.g.ldy = sh.n; p.g.n = sh.n; p.g.k = sh.k; p.g.m = m; p.g.partials = partials; p.g.counters = counters;
        const int blocks = (sh.n + rows - 1) / rows;
        p.kstages = (sh.k + 64 * v.kb - 1) / (64 * v.kb);
        const int tail_blocks = blocks;
        const int units = blocks * p.kstages;
        p.units_per_cta = qm == 0 ? std::max(1, (units + sms * cps - 1) / (sms * cps)) : qm == 1 ? p.kstages : (p.kstages + 1) / 2;
        p.stages = stages;
        p.flags = flags == 0 ? 1 : 0;
        const int grid = (units + p.units_per_cta - 1) / p.units_per_cta;
        const void* fn = sh.f32 ? v.fn_f32 : v.fn_bf16;
        CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
        const size_t ctr_bytes = (size_t)std::max(tail_blocks, 1) * v.cw * 4;
        const bool split = units > p.units_per_cta && p.units_per_cta % p.kstages != 0;
        auto launch = [&] {
          if (split) CK(cudaMemsetAsync(counters, 0, ctr_bytes, st));
          void* args[] = {&p};
          CK(cudaLaunchKernel(fn, dim3(grid), dim3(32 * (v.cw + 1)), args, dyn, st));
        };
        CK(cudaMemsetAsync(y, 0xff, 16ull * sh.n * 4, st));
        launch(); CK(cudaStreamSynchronize(st));
        // check
        std::vector<float> ref((size_t)m * sh.n), got((size_t)m * sh.n);
        CK(cudaMemcpy(ref.data(), yref, ref.size() * 4, cudaMemcpyDeviceToHost));
        double maxerr = 0;
        if (sh.f32) { CK(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost)); }
        else { std::vector<uint16_t> hb16(got.size()); CK(cudaMemcpy(hb16.data(), y, hb16.size() * 2, cudaMemcpyDeviceToHost));
               for (size_t i = 0; i < got.size(); ++i) { uint32_t u = (uint32_t)hb16[i] << 16; memcpy(&got[i], &u, 4); } }
        for (size_t i = 0; i < got.size(); ++i) { double e = fabs(got[i] - ref[i]) / (1.0 + fabs(ref[i])); if (!(e <= maxerr)) maxerr = e; }
        double t = ncu ? 0.0 : time_graph(st, launch);
        printf("  M=%2d tma_nt%d_rt%d_cw%d_kb%d s%d cps%d qm%d promo%d fl%d grid %d q %d split %d: %8.2f us %5.1f%% | cublas %8.2f us | ratio %.2f | err %.1e %s\n",
               m, v.nt, v.rt, v.cw, v.kb, stages, cps, qm, promo, flags, grid, p.units_per_cta, split, t, 100.0 * wbytes / t / 1e6 / ceil_tbps, tc, tc / t, maxerr,
               maxerr < (sh.f32 ? 1e-4 : 1e-2) ? "OK" : "FAIL");
      }
    }
  }
  return 0;
}
