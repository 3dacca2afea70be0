// Prototype harness (not part of the build, not the source of any reported number yet): do lines
// loaded with gemm.l2_warm's evict-last policy survive the benches' L2 flush (zeros with plain
// stores, read back with plain loads: EventTimer::flush_l2), and does cuCtxResetPersistingL2Cache
// (which flush_l2 calls first since session 48) undo that? Written in session 48 after review;
// run it before trusting any evict-last bench row measured without the reset.
//
// For W of 8 / 16 / 32 MB, each sample: [optional warm of W: normal or evict-last], [optional
// reset], flush, then the timed read of W (the l2_warm kernel itself, normal priority, as the
// reader). Medians of 15, µs. Expected if evict-last lines persist through the flush: "warm EL,
// flush" reads like "warm, no flush" (L2 speed); with the reset, like "cold".
//   cd bench/proto && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a \
//     -I../../b12x-core/include -o /tmp/elp evict_last_persist_proto.cu -lcuda && /tmp/elp
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "../../b12x-gemm/kernels/l2_warm.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const size_t flush_bytes = std::max<size_t>(256u << 20, 2 * (size_t)prop.l2CacheSize);
  void *flush, *w;
  unsigned int* sink;
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMalloc(&w, 32u << 20));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(w, 0x3c, 32u << 20));
  printf("%s, L2 %d MB, persisting L2 max %d MB\n", prop.name, prop.l2CacheSize >> 20, prop.persistingL2CacheMaxSize >> 20);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto warm = [&](size_t bytes, bool evict_last) {
    L2WarmParams p{(const b12x::Vec16*)w, bytes / 16, evict_last ? kL2WarmEvictLast : 0, 0};
    b12x_l2_warm<<<prop.multiProcessorCount, 256, 0, st>>>(p);
  };
  auto do_flush = [&]() {
    ReadBwParams rp{(const b12x::Vec16*)flush, sink, flush_bytes / 16, 0x9e3779b9u, 0};
    b12x_flush_fill<<<prop.multiProcessorCount * 4, 512, 0, st>>>(rp);
    b12x_flush_read<<<prop.multiProcessorCount * 4, 512, 0, st>>>(rp);
  };
  // mode: 0 cold (flush only); 1 warm normal, flush; 2 warm evict-last, flush; 3 warm evict-last,
  // reset, flush; 4 warm normal, no flush; 5 warm evict-last, no flush.
  const char* names[] = {"cold (flush)", "warm, flush", "warm EL, flush", "warm EL, reset, flush", "warm, no flush",
                         "warm EL, no flush"};
  for (size_t mb : {8, 16, 32}) {
    const size_t bytes = mb << 20;
    for (int mode = 0; mode < 6; ++mode) {
      std::vector<double> t;
      for (int s = 0; s < 15; ++s) {
        // Start each sample from a clean state: reset + flush.
        CK(cudaStreamSynchronize(st));
        cuCtxResetPersistingL2Cache();
        do_flush();
        if (mode >= 1) warm(bytes, mode == 2 || mode == 3 || mode == 5);
        CK(cudaStreamSynchronize(st));
        if (mode == 3) cuCtxResetPersistingL2Cache();
        if (mode <= 3) do_flush();
        CK(cudaEventRecord(a, st));
        warm(bytes, false);
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1e3);
      }
      std::sort(t.begin(), t.end());
      printf("W %2zu MB  %-24s %8.2f us\n", mb, names[mode], t[t.size() / 2]);
    }
  }
  return 0;
}
