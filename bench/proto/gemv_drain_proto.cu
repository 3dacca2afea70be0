// gemv_drain_proto.cu (session 20): gemv_phase_proto.cu with three more marks that split a CTA's
// last ~1.2 µs (its last stage's data in -> exit): every consumer warp's pass of its last full
// barrier (7), the end of its last stage's mma loop (5, at issue), its store of y (6); the max
// over warps of each; then (call 2) the same split in SM cycles (%clock64, marks 5-9: 8 = the
// direct store's branch entered, 9 = the warp's return) since %globaltimer ticked in 256 ns steps.
// Built and run as gemv_phase_proto.cu.
// Prototype harness: where a single graph-replayed call of the bf16_gemv TMA kernel spends the
// ~3 µs it takes beyond a pure read of the same 264 MB (session 15; not part of the build, not
// the source of any reported number). Wraps gemv_tma in kernels that record, per CTA
// (%globaltimer, 32 ns steps): its first instruction, the producer lane's arrival at its block
// (phase 3), its first stage of W boxes sent (phase 4), the first round sent (phase 0),
// consumer warp 0's first and last full stage (phases 1, 2; B12X_GEMV_TMA_MARK in
// bf16_gemv.cu) and the CTA's exit; the read probes get start and exit. Timed with the
// project's flush (proto_common.cuh), median of 30; the phases are the last replay's.
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/phase gemv_phase_proto.cu && /tmp/phase
// -DEARLY_PF: the wrapper's producer lane prefetches the two tensor maps before anything else.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>

__device__ unsigned long long g_mark[4096][10];
#define B12X_GEMV_TMA_MARK(k, cond)                                                     \
  if (cond) {                                                                           \
    unsigned long long t_;                                                              \
    if ((k) < 5) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                 \
    else asm volatile("mov.u64 %0, %%clock64;" : "=l"(t_));                             \
    if ((threadIdx.x & 31) == 0) {                                                      \
      if ((k) < 5) g_mark[blockIdx.x][k] = t_;                                          \
      else atomicMax(&g_mark[blockIdx.x][(k) < 5 ? 0 : (k)], t_);                       \
    }                                                                                   \
  }
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#include "proto_common.cuh"
#include "proto_trace.cuh"

template <int NT, int RT, int CW, int KB>
__global__ void __launch_bounds__(32 * (CW + 1), 1) phased_tma(const __grid_constant__ b12x::Bf16GemvTmaParams p) {
  trace_start();
  if (threadIdx.x == 0)
    for (int j = 5; j < 10; ++j) g_mark[blockIdx.x][j] = 0;
#ifdef EARLY_PF  // variant: the producer lane prefetches both descriptors as its first instruction
  if (threadIdx.x == 32 * CW) {
    b12x::tma_prefetch_descriptor(&p.w_map);
    b12x::tma_prefetch_descriptor(&p.x_map);
  }
#endif
  b12x::bf16_gemv::gemv_tma<NT, RT, CW, KB, bf16>(p);
  B12X_GEMV_TMA_MARK(9, threadIdx.x < 32 * CW);
  trace_end();
}

// The ceiling's register probe (8 loads in flight per thread, grid-stride), traced.
__global__ void __launch_bounds__(512) traced_read_gs(const __grid_constant__ ReadBwParams p) {
  trace_start();
  read_bw<8>(p);
  trace_end();
}

static double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(q * v.size()))];
}

// Phases of the last replay against the event time (µs from the first CTA's start).
static void report_phases(const char* what, int grid, double event_us, bool marks) {
  static unsigned long long h[4096][3], m[4096][10];
  CK(cudaMemcpyFromSymbol(h, g_trace, sizeof(unsigned long long) * 3 * grid));
  if (marks) CK(cudaMemcpyFromSymbol(m, g_mark, sizeof(unsigned long long) * 10 * grid));
  unsigned long long s0 = ~0ull;
  for (int c = 0; c < grid; ++c) s0 = std::min(s0, h[c][0]);
  std::vector<double> start, pro, issued, sent, first, last, end, drain, wskew, mmas, store, ex;
  for (int c = 0; c < grid; ++c) {
    start.push_back((h[c][0] - s0) * 1e-3);
    end.push_back((h[c][1] - s0) * 1e-3);
    if (marks) {
      pro.push_back((m[c][3] - h[c][0]) * 1e-3);
      issued.push_back((m[c][4] - h[c][0]) * 1e-3);
      sent.push_back((m[c][0] - s0) * 1e-3);
      first.push_back((m[c][1] - s0) * 1e-3);
      last.push_back((m[c][2] - s0) * 1e-3);
      drain.push_back((h[c][1] - m[c][2]) * 1e-3);
      mmas.push_back((double)m[c][5] - (double)m[c][7]);
      wskew.push_back((double)m[c][8] - (double)m[c][5]);
      store.push_back((double)m[c][6] - (double)m[c][8]);
      ex.push_back((double)m[c][9] - (double)m[c][6]);
    }
  }
  printf("  %-34s event %6.2f | CTAs %4d | start med %5.2f max %5.2f", what, event_us, grid, pct(start, 0.5), pct(start, 1));
  if (marks)
    printf(" | producer in %4.2f 1st W sent %4.2f (from CTA start) | ring sent med %5.2f max %5.2f | 1st stage med %5.2f max %5.2f | last stage p10 %6.2f med %6.2f max %6.2f"
           " | stage->exit med %5.2f max %5.2f",
           pct(pro, 0.5), pct(issued, 0.5), pct(sent, 0.5), pct(sent, 1), pct(first, 0.5), pct(first, 1), pct(last, 0.1), pct(last, 0.5), pct(last, 1),
           pct(drain, 0.5), pct(drain, 1));
  if (marks)
    printf(" | drain in SM cycles, max over warps (med/max over CTAs): last pass -> mma loop issued %5.0f/%5.0f, -> store entered %5.0f/%5.0f,"
           " -> y stored %5.0f/%5.0f, -> return %5.0f/%5.0f",
           pct(mmas, 0.5), pct(mmas, 1), pct(wskew, 0.5), pct(wskew, 1), pct(store, 0.5), pct(store, 1), pct(ex, 0.5), pct(ex, 1));
  printf(" | exit p10 %6.2f med %6.2f last %6.2f | outside %5.2f\n", pct(end, 0.1), pct(end, 0.5), pct(end, 1),
         event_us - pct(end, 1));
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  const int n = 18432, k = 7168, m = 8;
  const size_t wn = (size_t)n * k;
  bf16 *w, *x, *y; float* partials; unsigned long long* counters;
  CK(cudaMalloc(&w, wn * 2)); CK(cudaMalloc(&x, 64 * k * 2)); CK(cudaMalloc(&y, 16ull * n * 4));
  CK(cudaMalloc(&partials, 64 << 20)); CK(cudaMalloc(&counters, 1 << 20)); CK(cudaMemset(counters, 0, 1 << 20));
  fill_bf16<<<1024, 256>>>(w, wn, 1); fill_bf16<<<64, 256>>>(x, 64 * k, 2); CK(cudaDeviceSynchronize());
  printf("== N=%d K=%d M=%d (%.1f MB), %d SMs\n", n, k, m, wn * 2 / 1e6, sms);
  ReadBwParams rp{(const b12x::Vec16*)w, g_sink, wn * 2 / 16, 0x9e3779b9u, 0};
  for (int rounds = 0; rounds < 2; ++rounds) {
    for (int c : {1, 2, 4}) {
      const int grid = sms * c;
      const double t = time_graph(st, [&] { traced_read_gs<<<grid, 512, 0, st>>>(rp); });
      char name[64]; snprintf(name, sizeof name, "read u8, %d CTAs/SM, grid-stride", c);
      report_phases(name, grid, t, false);
    }
    auto run_tma = [&](auto kernel, const char* id, int nt, int rt, int cw, int kb, bool sk) {
      const int rows = 16 * rt * cw;
      const uint32_t stage = kb * (rows * 128 + 8 * nt * 128);
      const int stages = std::min<int>(16, (prop.sharedMemPerBlockOptin - 1024 - 1024) / stage);
      const uint32_t dyn = stages * stage + 1024;
      CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
      b12x::Bf16GemvTmaParams p{};
      encode((CUtensorMap*)&p.w_map, w, k, n, (uint64_t)k * 2, 64, rows);
      encode((CUtensorMap*)&p.x_map, x, k, m, (uint64_t)k * 2, 64, 8 * nt);
      p.g.y = y; p.g.ldy = n; p.g.n = n; p.g.k = k; p.g.m = m; p.g.partials = partials; p.g.counters = counters;
      p.kstages = (k + 64 * kb - 1) / (64 * kb);
      const int units = (n + rows - 1) / rows * p.kstages;
      p.units_per_cta = sk ? (units + sms - 1) / sms : p.kstages;
      p.stages = stages; p.flags = 1;  // evict-first W
      const int grid = (units + p.units_per_cta - 1) / p.units_per_cta;
      const double t = time_graph(st, [&] { kernel<<<grid, 32 * (cw + 1), dyn, st>>>(p); });
      char name[96]; snprintf(name, sizeof name, "%s_s%d_%s_ef", id, stages, sk ? "sk" : "rb");
      report_phases(name, grid, t, true);
    };
    run_tma(phased_tma<1, 3, 3, 4>, "tma_nt1_rt3_cw3_kb4", 1, 3, 3, 4, false);
    run_tma(phased_tma<1, 3, 3, 2>, "tma_nt1_rt3_cw3_kb2", 1, 3, 3, 2, false);
    run_tma(phased_tma<1, 3, 3, 4>, "tma_nt1_rt3_cw3_kb4", 1, 3, 3, 4, true);
    run_tma(phased_tma<1, 1, 4, 8>, "tma_nt1_rt1_cw4_kb8", 1, 1, 4, 8, true);
  }
  return 0;
}
