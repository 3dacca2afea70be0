// Prototype harness: does attention.rope_kv_append's warm part run beside the QKV projection?
// (not part of the build, not the source of any reported number). The B = 1 Qwen3-8B chain's
// QKV GEMV (the real `mma_nt1_rt1_u8_s3` kernel the session races to, N 6144, K 4096, 384 CTAs of
// 64 threads, 73.7 KB shared memory: three per SM) launched with PDL after a stamp kernel, then
// the real rope_kv_append kernel with only its warm part (PDL; its CTAs stamp %globaltimer at
// start and end through B12X_ROPE_KV_WARM_TRACE), then a plain read of the cached K/V (the
// attention's bytes, 16.8 MB). Prints event times and the warm CTAs' start / end offsets from
// the stamp (the GEMV's start), for several warm grids and read modes.
//   cd bench/proto && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a \
//     -I../../b12x-core/include -I../../b12x-attention/kernels -o /tmp/wop warm_overlap_proto.cu && /tmp/wop
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

__device__ unsigned long long g_wt[4096][3];
__device__ unsigned long long g_t0;
__device__ __forceinline__ unsigned long long wt_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void warm_trace(int point, int wb) {
  if (threadIdx.x == 0) {
    g_wt[wb][point] = wt_now();
    if (point == 0) {
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      g_wt[wb][2] = sm;
    }
  }
}
#define B12X_ROPE_KV_WARM_TRACE(point, wb) warm_trace(point, wb)
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-attention/kernels/rope_kv_append.cu"
#include "../../b12x-core/kernels/read_bw.cu"
#include "proto_common.cuh"
#include "proto_launch.cuh"

__global__ void stamp0() { g_t0 = wt_now(); }
__device__ unsigned long long g_t1;
__global__ void stamp1() { g_t1 = wt_now(); }

// A light stand-in for the warm part: THREADS threads, no shared memory, few registers, reading
// [src, src + bytes) contiguously (the cache pages in order), U loads in flight per thread; stamps
// into g_wt like the real part (start, end, SM).
template <int THREADS, int U>
__global__ void __launch_bounds__(THREADS) warm_lite(const b12x::Vec16* src, size_t n, uint32_t* sink) {
  warm_trace(0, blockIdx.x);
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * (size_t)THREADS * U + threadIdx.x; i < n; i += (size_t)gridDim.x * THREADS * U) {
    b12x::Vec16 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i + u * THREADS < n ? b12x::ld_global_v16(src + i + u * THREADS) : b12x::Vec16{};
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].w[0] ^ v[u].w[1] ^ v[u].w[2] ^ v[u].w[3];
  }
  if (acc == 0x12345678u) *sink = acc;
  warm_trace(1, blockIdx.x);
}

static void launch(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t st, void** args, bool pdl) {
  launch_maybe_pdl(fn, grid, block, smem, st, args, pdl);
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  // The QKV GEMV.
  const int n = 6144, k = 4096;
  bf16 *w, *x, *y;
  CK(cudaMalloc(&w, (size_t)n * k * 2)); CK(cudaMalloc(&x, k * 2)); CK(cudaMalloc(&y, 8 * n * 2));
  fill_bf16<<<1024, 256>>>(w, (size_t)n * k, 1); fill_bf16<<<8, 256>>>(x, k, 2);
  const void* gemv = (const void*)b12x_bf16_gemv_mma_nt1_rt1_u8_s3_bf16out;
  const int gemv_smem = 2 * 3 * (16 * 1 * 4 * 8 * 16 + 8 * 1 * 32 * 16);
  CK(cudaFuncSetAttribute(gemv, cudaFuncAttributeMaxDynamicSharedMemorySize, gemv_smem));
  Bf16GemvParams gp{};
  gp.w = w; gp.x = x; gp.y = y; gp.ldw = k; gp.ldx = k; gp.ldy = n; gp.n = n; gp.k = k; gp.m = 1;
  gp.k_per_split = k; gp.ksplit = 1; gp.warps_k = 2; gp.warps_r = 1; gp.n_pad = n; gp.m_pad = 8;
  gp.y_limit = INFINITY;
  auto run_gemv = [&](bool pdl) {
    Bf16GemvParams q = gp; q.flags = pdl ? b12x::kPdl : 0;
    void* a[] = {&q};
    launch(gemv, dim3(n / 16), dim3(64), gemv_smem, st, a, pdl);
  };
  // The cache: 4096 keys of one request, Hkv 8, D 128, P 16, pages scattered.
  const int P = 16, hkv = 8, d = 128, max_pages = 256, num_pages = 264, len = 4097;
  const size_t page_bytes = (size_t)P * hkv * d * 2, cache_bytes = page_bytes * num_pages;
  void *kc, *vc; CK(cudaMalloc(&kc, cache_bytes)); CK(cudaMalloc(&vc, cache_bytes));
  CK(cudaMemset(kc, 1, cache_bytes)); CK(cudaMemset(vc, 2, cache_bytes));
  std::vector<int> pt(max_pages);
  for (int i = 0; i < max_pages; ++i) pt[i] = (i * 97) % num_pages;
  int *d_pt, *d_len, *d_cu; unsigned* d_err;
  CK(cudaMalloc(&d_pt, max_pages * 4)); CK(cudaMalloc(&d_len, 4)); CK(cudaMalloc(&d_cu, 8)); CK(cudaMalloc(&d_err, 4));
  CK(cudaMemcpy(d_pt, pt.data(), max_pages * 4, cudaMemcpyHostToDevice));
  const int cu[2] = {0, 1};
  CK(cudaMemcpy(d_len, &len, 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(d_cu, cu, 8, cudaMemcpyHostToDevice));
  CK(cudaMemset(d_err, 0, 4));
  b12x::RopeKvAppendParams rp{};
  rp.append.k_cache = kc; rp.append.v_cache = vc; rp.append.page_table = d_pt; rp.append.seq_lens = d_len;
  rp.append.cu_seqlens_q = d_cu; rp.append.error = d_err; rp.append.tokens = 1; rp.append.batch = 1;
  rp.append.max_pages = max_pages; rp.append.pt_stride = max_pages; rp.append.num_pages = num_pages;
  rp.append.kv_heads = hkv; rp.append.head_dim = d; rp.append.page_size = P;
  rp.q_blocks = 0;
  const void* rka = (const void*)b12x_rope_kv_append_bf16_neox;
  auto run_warm = [&](int blocks, int flags, bool pdl) {
    b12x::RopeKvAppendParams q = rp; q.warm_blocks = blocks; q.flags = flags;
    void* a[] = {&q};
    launch(rka, dim3(blocks), dim3(256), 0, st, a, pdl);
  };
  auto run_stamp = [&] { launch((const void*)stamp0, dim3(1), dim3(32), 0, st, nullptr, false); };
  // The attention stand-in: a plain read of every cached page in the cache (16.9 MB).
  auto run_read = [&] {
    ReadBwParams p{(const b12x::Vec16*)kc, g_sink, cache_bytes / 16, 0x9e3779b9u, 0};
    b12x_read_bw<<<264, 512, 0, st>>>(p);
    ReadBwParams p2{(const b12x::Vec16*)vc, g_sink, cache_bytes / 16, 0x9e3779b9u, 0};
    b12x_read_bw<<<264, 512, 0, st>>>(p2);
  };
  CK(cudaDeviceSynchronize());
  const double g = time_graph(st, [&] { run_stamp(); run_gemv(true); });
  const double r = time_graph(st, run_read);
  const double gr = time_graph(st, [&] { run_stamp(); run_gemv(true); run_read(); });
  printf("stamp -> gemv(pdl) %.2f us | read K,V (2 launches) %.2f | stamp -> gemv -> read %.2f\n", g, r, gr);
  {
    time_graph(st, [&] { run_stamp(); run_gemv(true); launch((const void*)stamp1, dim3(1), dim3(32), 0, st, nullptr, false); });
    unsigned long long t0, t1;
    CK(cudaMemcpyFromSymbol(&t0, g_t0, 8)); CK(cudaMemcpyFromSymbol(&t1, g_t1, 8));
    printf("gemv ends (a plain stamp after it) %.2f us after the stamp\n", (double)(t1 - t0) * 1e-3);
  }
  auto run_lite = [&](const void* fn, int threads, int blocks, bool pdl) {
    const b12x::Vec16* src = (const b12x::Vec16*)kc; size_t nn = cache_bytes / 16; uint32_t* sk = g_sink;
    void* a[] = {&src, &nn, &sk};
    launch(fn, dim3(blocks), dim3(threads), 0, st, a, pdl);
  };
  auto timeline = [&](int blocks, const char* what, double alone, double chained) {
    static unsigned long long h[4096][3];
    unsigned long long t0;
    CK(cudaMemcpyFromSymbol(h, g_wt, sizeof(unsigned long long) * 3 * blocks));
    CK(cudaMemcpyFromSymbol(&t0, g_t0, 8));
    std::vector<double> s, e;
    std::vector<int> seen(1024, 0);
    int used = 0;
    for (int c = 0; c < blocks; ++c) {
      s.push_back((double)(long long)(h[c][0] - t0) * 1e-3);
      e.push_back((double)(long long)(h[c][1] - t0) * 1e-3);
      if (!seen[h[c][2] & 1023]++) ++used;
    }
    std::sort(s.begin(), s.end()); std::sort(e.begin(), e.end());
    printf("%-44s alone %6.2f | stamp -> gemv -> it %6.2f | CTAs on %3d SMs, start min %6.2f med %6.2f max %6.2f, "
           "end min %6.2f med %6.2f max %6.2f us after the stamp\n",
           what, alone, chained, used, s.front(), s[s.size() / 2], s.back(), e.front(), e[e.size() / 2], e.back());
  };
  // Light stand-ins (K cache only, 8.4 MB): do CTAs this small run beside the GEMV?
  struct Lite { const void* fn; int threads, blocks; const char* name; };
  const Lite lites[] = {{(const void*)warm_lite<128, 8>, 128, sms, "lite 128 thr x 8 loads, SMs CTAs"},
                        {(const void*)warm_lite<256, 16>, 256, sms, "lite 256 thr x 16 loads, SMs CTAs"},
                        {(const void*)warm_lite<64, 8>, 64, 2 * sms, "lite 64 thr x 8 loads, 2 x SMs CTAs"}};
  for (const Lite& l : lites) {
    const double a = time_graph(st, [&] { run_lite(l.fn, l.threads, l.blocks, false); });
    const double c = time_graph(st, [&] { run_stamp(); run_gemv(true); run_lite(l.fn, l.threads, l.blocks, true); });
    timeline(l.blocks, l.name, a, c);
  }
  {
    const double a = time_graph(st, [&] { run_lite((const void*)warm_lite<128, 8>, 128, sms, false); });
    const double c = time_graph(st, [&] { run_stamp(); run_gemv(false); run_lite((const void*)warm_lite<128, 8>, 128, sms, false); });
    timeline(sms, "lite 128 x 8, plain launches (no overlap)", a, c);
  }
  const int E = b12x::kRopeKvEarly, L = b12x::kRopeKvWarmEvictLast, F = b12x::kRopeKvWarmPrefetch;
  struct V { int blocks, flags; const char* name; };
  const V vs[] = {{sms, E | L, "load evict_last"}, {sms, E, "load"}, {sms, E | L | F, "prefetch evict_last"},
                  {2 * sms, E | L, "load evict_last"}, {sms / 2, E | L, "load evict_last"}, {4 * sms, E | L, "load evict_last"}};
  for (const V& v : vs) {
    const double wa = time_graph(st, [&] { run_warm(v.blocks, v.flags, false); });
    const double gw = time_graph(st, [&] { run_stamp(); run_gemv(true); run_warm(v.blocks, v.flags, true); });
    // The warm CTAs of the last replay of the chain above.
    static unsigned long long h[4096][3];
    unsigned long long t0;
    CK(cudaMemcpyFromSymbol(h, g_wt, sizeof(unsigned long long) * 3 * v.blocks));
    CK(cudaMemcpyFromSymbol(&t0, g_t0, 8));
    std::vector<double> s, e;
    std::vector<int> seen(1024, 0);
    int used = 0;
    for (int c = 0; c < v.blocks; ++c) {
      s.push_back((double)(long long)(h[c][0] - t0) * 1e-3);
      e.push_back((double)(long long)(h[c][1] - t0) * 1e-3);
      if (!seen[h[c][2] & 1023]++) ++used;
    }
    std::sort(s.begin(), s.end()); std::sort(e.begin(), e.end());
    const double gwr = time_graph(st, [&] { run_stamp(); run_gemv(true); run_warm(v.blocks, v.flags, true); run_read(); });
    printf("warm %4d CTAs %-20s alone %6.2f | gemv -> warm %6.2f | -> read %6.2f (read after: %5.2f vs %5.2f cold) | "
           "warm CTAs on %3d SMs, start min %6.2f med %6.2f max %6.2f, end min %6.2f med %6.2f max %6.2f us after the stamp\n",
           v.blocks, v.name, wa, gw, gwr, gwr - gw, gr - g, used, s.front(), s[s.size() / 2], s.back(), e.front(),
           e[e.size() / 2], e.back());
  }
  unsigned err; CK(cudaMemcpy(&err, d_err, 4, cudaMemcpyDeviceToHost));
  printf("error word %u (want 0)\n", err);
  return 0;
}
