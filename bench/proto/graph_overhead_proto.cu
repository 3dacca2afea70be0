// Prototype harness (not part of the build, not the source of any reported number): what the
// project's timing method charges a single graph-replayed call that does (almost) nothing,
// against the same call timed the way bench/peers.py times PyTorch (graph_overhead_torch.py).
// Rows: an empty kernel, one graph per sample, replayed on a non-blocking stream (the project's
// harnesses), on the legacy default stream (where PyTorch records its events and replays), and
// each with the graph uploaded before the first sample; L2 flushed before each sample as in
// proto_common.cuh's time_graph (median of 50).
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/overhead graph_overhead_proto.cu && /tmp/overhead
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "../../b12x-core/kernels/read_bw.cu"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); return 1;} } while (0)

__global__ void empty_kernel(int* p) { if (p && threadIdx.x == 1234) *p = 0; }

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t flush_bytes = 2 * (size_t)prop.l2CacheSize;
  void* flush; unsigned* sink;
  CK(cudaMalloc(&flush, flush_bytes)); CK(cudaMalloc(&sink, 4));
  cudaStream_t nb;
  CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  for (int pass = 0; pass < 2; ++pass)
  for (int legacy = 0; legacy < 2; ++legacy)
    for (int upload = 0; upload < 2; ++upload) {
      cudaStream_t st = legacy ? (cudaStream_t)0 : nb;
      cudaStream_t cap;
      CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal));
      empty_kernel<<<1, 32, 0, cap>>>(nullptr);
      CK(cudaStreamEndCapture(cap, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      if (upload) CK(cudaGraphUpload(ge, st));
      for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, st));
      cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
      std::vector<double> t;
      for (int i = 0; i < 50; ++i) {
        CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, st));
        ReadBwParams rp{(const b12x::Vec16*)flush, sink, flush_bytes / 16, 0x9e3779b9u, 0};
        b12x_read_bw<<<528, 512, 0, st>>>(rp);
        CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1e3);
      }
      std::sort(t.begin(), t.end());
      printf("pass %d: empty kernel graph, %s stream%s: median %.2f us (p10 %.2f, p90 %.2f)\n", pass,
             legacy ? "legacy default" : "non-blocking", upload ? ", uploaded" : "", t[25], t[5], t[45]);
      cudaGraphExecDestroy(ge); cudaGraphDestroy(g); cudaStreamDestroy(cap);
    }
  return 0;
}
