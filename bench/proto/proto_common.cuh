// proto_common.cuh — helpers shared by the prototype harnesses in bench/proto (not part of the
// build): error checks, a hashed bf16 fill, a naive reference GEMV (f32 out), graph-replay
// timing with the project's L2 flush (EventTimer::flush_l2 since session 14: zero fill + plain
// read of max(256 MB, 2x L2), outside the timed events; before session 15 these harnesses
// flushed with the old memset + no-allocate read) and the
// bf16 tensor-map encoder (through cudaGetDriverEntryPoint: no -lcuda needed).
// Include after the kernel sources (it uses b12x_flush_fill, b12x_flush_read and ReadBwParams).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
#define CKD(x) do { CUresult e = (x); if (e != CUDA_SUCCESS) { printf("CU %d at %d\n", (int)e, __LINE__); exit(1);} } while (0)


__global__ void fill_bf16(bf16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16((float)(h & 0xffff) / 32768.0f - 1.0f);
  }
}
__global__ void ref_gemv(const bf16* w, const bf16* x, float* y, int n, int k, int m) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (warp >= n * m) return;
  int row = warp % n, tok = warp / n;
  float s = 0;
  for (int i = lane; i < k; i += 32) s += __bfloat162float(w[(size_t)row * k + i]) * __bfloat162float(x[(size_t)tok * k + i]);
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if (lane == 0) y[(size_t)tok * n + row] = s;
}

static void* g_flush; static size_t g_flush_bytes; static uint32_t* g_sink;
// Median µs of one replay of a graph capturing work(), L2 flushed before each sample.
static double time_graph(cudaStream_t st, std::function<void()> work, int samples = 30) {
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  work();
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, st));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<double> t;
  for (int i = 0; i < samples; ++i) {
    {  // the project's flush (EventTimer::flush_l2, session 14): zeros with plain stores, read back with plain loads
      ReadBwParams rp{(const b12x::Vec16*)g_flush, g_sink, g_flush_bytes / 16, 0x9e3779b9u, 0};
      b12x_flush_fill<<<528, 512, 0, st>>>(rp);
      b12x_flush_read<<<528, 512, 0, st>>>(rp);
    }
    CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b)); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1e3);
  }
  std::sort(t.begin(), t.end());
  cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
  return t[t.size() / 2];
}

// The harnesses' start: a non-blocking stream, the device's properties, the flush buffer
// (max(256 MB, 2x L2)) and the read probe's sink.
static cudaStream_t proto_init(cudaDeviceProp& prop) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CK(cudaGetDeviceProperties(&prop, 0));
  g_flush_bytes = std::max<size_t>(256u << 20, 2 * (size_t)prop.l2CacheSize);
  CK(cudaMalloc(&g_flush, g_flush_bytes));
  CK(cudaMalloc(&g_sink, 4));
  return st;
}

// A 2-D bf16 tensor map with 128-byte swizzle (inner = contiguous dimension), as the kernels'
// TMA boxes expect; the driver's encoder is looked up once through the runtime.
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static void encode(CUtensorMap* map, const void* base, uint64_t inner, uint64_t outer, uint64_t stride_bytes,
                   uint32_t box_inner, uint32_t box_outer,
                   CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_NONE) {
  static EncodeTiled fn = nullptr;
  if (!fn) {
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void**)&fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !fn) { printf("no cuTensorMapEncodeTiled\n"); exit(1); }
  }
  cuuint64_t dims[2] = {inner, outer}; cuuint64_t strides[1] = {stride_bytes};
  cuuint32_t box[2] = {box_inner, box_outer}; cuuint32_t es[2] = {1, 1};
  CKD(fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void*)base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
         CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}
