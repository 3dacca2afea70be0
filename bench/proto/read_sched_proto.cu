// Prototype harness: how the order and the distribution of work over CTAs changes a single
// graph-replayed streaming read (not part of the build, not the source of any reported number).
// One thread per CTA streams "units" through an S-deep shared-memory ring, either as 1-D bulk
// copies of contiguous bytes or as the bf16_gemv TMA kernel's 2-D boxes (64 W rows x 64 k,
// KB boxes per unit, row-major (row block, k-stage) unit list), and takes its units
//   contig:  CTA b the stretch [b*q, (b+1)*q)        (bf16_gemv's rb / stream-K split)
//   inter:   CTA b the units b, b+G, b+2G, ...       (the bench's read probe)
//   contig-rot: contig, but CTA b starts at unit (b*r) mod q of its stretch and wraps around
//   dynamic: the next unit of a global ticket counter (work stealing; the last CTA to finish
//            resets the counter, so graph replays need no memset)
// Each case prints the event time and the per-CTA timeline (%globaltimer) like gemv_trace_proto.
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/sched read_sched_proto.cu && /tmp/sched
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

__device__ unsigned long long g_ticket[2];


enum Sched { kContig = 0, kInter = 1, kDynamic = 2, kContigRot = 3 };

struct SchedParams {
  b12x::TmaDescriptor w_map;  // 2-D mode
  const unsigned char* src;   // 1-D mode
  unsigned int* sink;
  long long units;
  int q;           // contig: units per CTA
  int unit_bytes;  // 1-D: bytes per unit; 2-D: KB * 64 rows * 128
  int kb;          // 2-D: boxes per unit
  int kstages;     // 2-D: units per row block
  int stages;
  int sched;
  int two_d;
  int box_rows;    // 2-D: rows per box (64, or bf16_gemv rt3's 144)
  int rot_mul;     // contig-rot: CTA b starts its stretch at unit (b * rot_mul) mod its length
};

extern "C" __global__ void __launch_bounds__(32) sched_read(const __grid_constant__ SchedParams p) {
  extern __shared__ unsigned char s_dyn[];
  __shared__ __align__(8) unsigned long long s_full[16];
  if (threadIdx.x != 0) return;
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  g_trace[blockIdx.x][0] = gtimer();
  g_trace[blockIdx.x][2] = sm;
  const uint32_t ring = (b12x::smem_addr(s_dyn) + 1023u) & ~1023u;
  const uint32_t bar0 = b12x::smem_addr(&s_full[0]);
  for (int s = 0; s < p.stages; ++s) b12x::mbar_init(bar0 + 8 * s, 1);
  b12x::mbar_fence_init();
  if (p.two_d) b12x::tma_prefetch_descriptor(&p.w_map);
  long long begin = 0, end = p.units;
  if (p.sched == kContig || p.sched == kContigRot) {
    begin = min((long long)blockIdx.x * p.q, p.units);
    end = min(begin + p.q, p.units);
  }
  const long long len = end - begin;
  const long long rot = p.sched == kContigRot && len > 0 ? ((long long)blockIdx.x * p.rot_mul) % len : 0;
  auto next = [&](long long i, long long prev) -> long long {
    if (p.sched == kContig) return begin + i;
    if (p.sched == kContigRot) return i < len ? begin + (i + rot) % len : end;
    if (p.sched == kInter) return blockIdx.x + i * gridDim.x;
    return (long long)atomicAdd(&g_ticket[0], 1ull);
  };
  unsigned int acc = 0;
  long long t = next(0, -1);
  int it = 0;
  for (; t < end; ++it) {
    const int s = it % p.stages;
    if (it >= p.stages) {
      b12x::mbar_wait(bar0 + 8 * s, ((it / p.stages) - 1) & 1);
      unsigned int v;
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(ring + s * p.unit_bytes));
      acc ^= v;
    }
    const uint32_t bar = bar0 + 8 * s, dst = ring + s * p.unit_bytes;
    b12x::mbar_arrive_expect_tx(bar, p.unit_bytes);
    if (p.two_d) {
      const int rb = int(t / p.kstages);
      const int k0 = int(t - (long long)rb * p.kstages) * 64 * p.kb;
      for (int j = 0; j < p.kb; ++j)
        b12x::tma_load_2d(dst + j * p.box_rows * 128, &p.w_map, k0 + 64 * j, rb * p.box_rows, bar);
    } else {
      b12x::bulk_copy_g2s(dst, p.src + t * p.unit_bytes, p.unit_bytes, bar);
    }
    t = next(it + 1, t);
  }
  for (int j = max(it - p.stages, 0); j < it; ++j) {
    const int s = j % p.stages;
    b12x::mbar_wait(bar0 + 8 * s, (j / p.stages) & 1);
    unsigned int v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(ring + s * p.unit_bytes));
    acc ^= v;
  }
  if (acc == 0x12345678u) *p.sink = acc;
  if (p.sched == kDynamic) {
    if (atomicAdd(&g_ticket[1], 1ull) == gridDim.x - 1) {
      atomicExch(&g_ticket[0], 0ull);
      atomicExch(&g_ticket[1], 0ull);
    }
  }
  g_trace[blockIdx.x][1] = gtimer();
}

int main(int argc, char** argv) {
  // `rt3`: only 18432 x 7168 and only its 144-row cases (and the 64-row kb4 contig reference).
  const bool rt3_only = argc > 1 && strcmp(argv[1], "rt3") == 0;
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  const size_t max_w = 18432ull * 7168;
  bf16* w;
  CK(cudaMalloc(&w, max_w * 2));
  fill_bf16<<<1024, 256>>>(w, max_w, 1);
  CK(cudaDeviceSynchronize());
  CK(cudaFuncSetAttribute(sched_read, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop.sharedMemPerBlockOptin - 1024));
  const char* names[] = {"contig", "inter", "dynamic", "contig-rot"};
  struct Shape { int n, k; };
  for (Shape sh : {Shape{7168, 4096}, Shape{4096, 7168}, Shape{18432, 7168}}) {
    if (rt3_only && sh.n != 18432) continue;
    const size_t bytes = (size_t)sh.n * sh.k * 2;
    printf("== N=%d K=%d (%.1f MB), %d SMs\n", sh.n, sh.k, bytes / 1e6, sms);
    auto run = [&](bool two_d, int unit_kb_or_boxes, int stages, int sched, int ctas_per_sm, bool rb,
                   int rot_mul = 0, int box_rows = 64, int grid_override = 0) {
      SchedParams p{};
      p.box_rows = box_rows;
      p.rot_mul = rot_mul;
      p.src = (const unsigned char*)w; p.sink = g_sink; p.stages = stages; p.sched = sched; p.two_d = two_d;
      char name[96];
      if (two_d) {
        p.kb = unit_kb_or_boxes;
        p.unit_bytes = p.kb * box_rows * 128;
        encode((CUtensorMap*)&p.w_map, w, sh.k, sh.n, (uint64_t)sh.k * 2, 64, box_rows);
        p.kstages = (sh.k + 64 * p.kb - 1) / (64 * p.kb);
        p.units = (long long)((sh.n + box_rows - 1) / box_rows) * p.kstages;
        snprintf(name, sizeof name, "2d %drow kb%d s%d %s%s x%d r%d", box_rows, p.kb, stages,
                 rb ? "rb" : names[sched], "", ctas_per_sm, rot_mul);
      } else {
        p.unit_bytes = unit_kb_or_boxes * 1024;
        p.units = bytes / p.unit_bytes;
        snprintf(name, sizeof name, "1d %dKB s%d %s x%d", unit_kb_or_boxes, stages, names[sched], ctas_per_sm);
      }
      int grid = sms * ctas_per_sm;
      if (sched == kContig || sched == kContigRot) {
        p.q = rb ? p.kstages : int((p.units + grid - 1) / grid);
        grid = int((p.units + p.q - 1) / p.q);
      }
      if (grid > 4096) return;
      const size_t dyn = (size_t)stages * p.unit_bytes + 1024;
      if (dyn > prop.sharedMemPerBlockOptin - 1024) return;
      const double t = time_graph(st, [&] { sched_read<<<grid, 32, dyn, st>>>(p); });
      report(name, grid, t);
    };
    if (!rt3_only) {
    // 1-D bulk: the bench probe's shape (8 KB, 4 stages, inter, 2-6 CTAs/SM), then larger units.
    for (int c : {2, 4}) run(false, 8, 4, kInter, c, false);
    for (int sched : {kContig, kInter, kDynamic}) run(false, 32, 4, sched, 1, false);
    for (int sched : {kContig, kInter, kDynamic}) run(false, 16, 8, sched, 1, false);
    run(false, 8, 4, kDynamic, 2, false);
    run(false, 16, 4, kDynamic, 2, false);
    // 2-D boxes as bf16_gemv's TMA kernel: rb (one CTA per 64-row block), stream-K contig,
    // interleaved and dynamic units.
    for (int kb : {8, 4}) {
      const int stages = kb == 8 ? 3 : 6;
      run(true, kb, stages, kContig, 1, true);
      for (int sched : {kContig, kInter, kDynamic}) run(true, kb, stages, sched, 1, false);
    }
    run(true, 2, 12, kDynamic, 1, false);
    run(true, 4, 3, kDynamic, 2, false);
    // Contiguous stretches, each CTA starting at its own rotation (partition camping?), then
    // the plain contig and inter again for an A/B in the same minute.
    for (int kb : {8, 4}) {
      const int stages = kb == 8 ? 3 : 6;
      for (int rm : {1, 7, 13}) run(true, kb, stages, kContigRot, 1, false, rm);
      run(true, kb, stages, kContig, 1, false);
      run(true, kb, stages, kInter, 1, false);
    }
    }
    // bf16_gemv rt3's stream on 18432 rows: 144-row boxes, one CTA per row block (rb: 128
    // CTAs), kb4 x 2 stages (its race's pick) and kb2 x 5, and 64-row kb4 x 6 for reference.
    if (sh.n % 144 == 0) {
      run(true, 4, 2, kContig, 1, true, 0, 144);
      run(true, 2, 5, kContig, 1, true, 0, 144);
      run(true, 4, 3, kContig, 1, true, 0, 144);
      run(true, 4, 2, kInter, 1, false, 0, 144);
      run(true, 4, 6, kContig, 1, false);
      // Longer row pieces per stage (kb16 = 2 KB of each row) on thinner row blocks, stream-K
      // stretches (contig) and interleaved, then the rt3 pick again.
      run(true, 16, 6, kContig, 1, false, 0, 16);
      run(true, 16, 3, kContig, 1, false, 0, 32);
      run(true, 8, 6, kContig, 1, false, 0, 32);
      run(true, 8, 12, kContig, 1, false, 0, 16);
      run(true, 8, 3, kContig, 1, false, 0, 64);
      run(true, 16, 6, kInter, 1, false, 0, 16);
      run(true, 4, 2, kContig, 1, true, 0, 144);
    }
  }
  return 0;
}
