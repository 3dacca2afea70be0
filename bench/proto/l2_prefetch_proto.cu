// Prototype harness: warming a GEMV's weights into L2 while the kernel before it (a
// latency-bound, 64-CTA "attention") runs (not part of the build, not the source of any
// reported number). A small PDL-launched kernel P between the two issues L2 prefetches of W
// (cp.async.bulk.prefetch.L2 chunks or per-line prefetch.global.L2), then waits for the
// attention, then lets the GEMV (the real bf16_gemv mmad kernel, PDL) launch.
// Result on the H200 (session 38, bench-results/2026-12-04-h200-e/call1, call2): no variant
// helped. Every P made attention -> P -> GEMV slower than attention -> GEMV (26.4-80 vs 22.9 us
// at 33.6 MB; 64 KB bulk chunks were very slow), the GEMV after P took as long as after the
// stand-in alone (10.5-10.6 us), and the read probe after a bulk prefetch of W took 8.96 us
// (difference of two graphs), against 5.70 us after a plain read had left W in L2 (11.65 us
// alone in a graph, the graph's start included). So bf16_gemv's PDL prologue now copies its first W stages into shared
// memory / registers instead of asking L2 for them.
//   cd bench/proto && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a \
//     -I../../b12x-core/include -o /tmp/l2p l2_prefetch_proto.cu && /tmp/l2p
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#include "proto_common.cuh"
#include "proto_launch.cuh"

// The attention stand-in: each CTA reads its slice with U 16-byte loads in flight per thread
// (latency-bound at 64 CTAs), releasing its dependents first like the real kernels do.
template <int U>
__global__ void __launch_bounds__(256) fake_attention(const b12x::Vec16* src, size_t vec_per_cta, uint32_t* sink) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const b12x::Vec16* p = src + blockIdx.x * vec_per_cta;
  uint32_t acc = 0;
  for (size_t i = threadIdx.x; i < vec_per_cta; i += 256 * U) {
    b12x::Vec16 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = (i + u * 256 < vec_per_cta) ? b12x::ld_global_v16(p + i + u * 256) : b12x::Vec16{};
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].w[0] ^ v[u].w[3];
  }
  if (acc == 0x12345678u) *sink = acc;
}

// mode 0: cp.async.bulk.prefetch.L2 of `chunk`-byte pieces; 1: prefetch.global.L2 per 128 B line;
// 2: prefetch.global.L2::evict_last per line.
__global__ void __launch_bounds__(256) l2_prefetch(const char* base, size_t bytes, size_t chunk, int mode) {
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, nth = (size_t)gridDim.x * blockDim.x;
  if (mode == 0) {
    for (size_t off = tid * chunk; off < bytes; off += nth * chunk) {
      const uint32_t sz = (uint32_t)(chunk < bytes - off ? chunk : bytes - off);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(sz) : "memory");
    }
  } else if (mode == 1) {
    for (size_t off = tid * 128; off < bytes; off += nth * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off));
  } else {
    for (size_t off = tid * 128; off < bytes; off += nth * 128)
      asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(base + off));
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

static void launch(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t st, void** args, bool pdl) {
  launch_maybe_pdl(fn, grid, block, smem, st, args, pdl);
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  const size_t kv_bytes = 16u << 20;  // the B = 1 x 4k attention's K and V
  b12x::Vec16* kv; CK(cudaMalloc(&kv, kv_bytes));
  CK(cudaMemset(kv, 1, kv_bytes));
  const size_t att_ctas = 64, vec_per_cta = kv_bytes / 16 / att_ctas;
  const void* att_fns[] = {(const void*)fake_attention<1>, (const void*)fake_attention<2>, (const void*)fake_attention<4>};
  const void* att = att_fns[1];
  auto run_att = [&](bool pdl) {
    const b12x::Vec16* s = kv; size_t v = vec_per_cta; uint32_t* sk = g_sink;
    void* a[] = {&s, &v, &sk};
    launch(att, dim3(att_ctas), dim3(256), 0, st, a, pdl);
  };
  for (int i = 0; i < 3; ++i) {
    att = att_fns[i];
    printf("attention stand-in U=%d alone: %.2f us\n", 1 << i, time_graph(st, [&] { run_att(false); }));
  }
  att = att_fns[getenv("PROTO_ATT_U") ? atoi(getenv("PROTO_ATT_U")) : 1];

  for (int n : {4096, 6144}) {
    const int k = 4096;
    const size_t w_bytes = (size_t)n * k * 2;
    bf16 *w, *x, *y; CK(cudaMalloc(&w, w_bytes)); CK(cudaMalloc(&x, k * 2)); CK(cudaMalloc(&y, 64 * n * 2));
    fill_bf16<<<1024, 256>>>(w, (size_t)n * k, 1); fill_bf16<<<8, 256>>>(x, k, 2);
    CK(cudaDeviceSynchronize());
    Bf16GemvParams p{};
    p.w = w; p.x = x; p.y = y; p.ldw = k; p.ldx = k; p.ldy = n; p.n = n; p.k = k; p.m = 1;
    p.k_per_split = k; p.ksplit = 1; p.warps_k = 8; p.warps_r = 1; p.n_pad = n; p.m_pad = 8;
    const void* gemv = (const void*)b12x_bf16_gemv_mmad_nt1_rt1_u4_bf16out;
    const size_t smem = 8 * 8 * (16 + 4) * 4;
    auto run_gemv = [&](bool pdl) {
      Bf16GemvParams q = p; q.flags = pdl ? b12x::kPdl : 0;
      void* a[] = {&q};
      launch(gemv, dim3(n / 16, 1), dim3(256), smem, st, a, pdl);
    };
    auto run_pf = [&](int ctas, size_t chunk, int mode, size_t bytes) {
      const char* b = (const char*)w; void* a[] = {&b, &bytes, &chunk, &mode};
      launch((const void*)l2_prefetch, dim3(ctas), dim3(256), 0, st, a, true);
    };
    printf("\nW %d x %d (%.1f MB)\n", n, k, w_bytes / 1e6);
    const double g = time_graph(st, [&] { run_gemv(false); });
    const double gg = time_graph(st, [&] { run_gemv(false); run_gemv(true); });
    printf("gemv alone %.2f | gemv, gemv(pdl) %.2f (second, W in L2: %.2f)\n", g, gg, gg - g);
    const double a = time_graph(st, [&] { run_att(false); });
    printf("att alone %.2f | att -> gemv(pdl) %.2f\n", a, time_graph(st, [&] { run_att(false); run_gemv(true); }));
    printf("att -> gemv(plain) %.2f\n", time_graph(st, [&] { run_att(false); run_gemv(false); }));
    struct V { int ctas; size_t chunk; int mode; double frac; };
    const V vs[] = {{4, 65536, 0, 1}, {16, 65536, 0, 1}, {16, 16384, 0, 1}, {64, 16384, 0, 1}, {132, 4096, 0, 1},
                    {132, 128, 1, 1}, {132, 128, 2, 1}, {16, 65536, 0, 0.5}, {16, 65536, 0, 0.75}};
    for (const V& v : vs) {
      const size_t bytes = (size_t)(w_bytes * v.frac) / 16 * 16;
      const double t = time_graph(st, [&] { run_att(false); run_pf(v.ctas, v.chunk, v.mode, bytes); run_gemv(true); });
      const double t2 = time_graph(st, [&] { run_att(false); run_pf(v.ctas, v.chunk, v.mode, bytes); });
      printf("att -> P(ctas %3d, chunk %6zu, mode %d, %.0f%%) -> gemv(pdl) %.2f | att -> P %.2f\n", v.ctas, v.chunk,
             v.mode, v.frac * 100, t, t2);
    }
    const double t = time_graph(st, [&] { run_pf(16, 65536, 0, w_bytes); run_gemv(true); });
    printf("P(16, 64K) -> gemv(pdl), nothing before %.2f\n", t);
    // How fast is W read back from L2? The read probe (plain streaming loads) cold, after the
    // line prefetch kernel, and after a first read of its own (plain loads, L2-allocating).
    auto run_read = [&] {
      ReadBwParams rp{(const b12x::Vec16*)w, g_sink, w_bytes / 16, 0x9e3779b9u, 0};
      b12x_read_bw<<<528, 512, 0, st>>>(rp);
    };
    auto run_flush_read = [&] {
      ReadBwParams rp{(const b12x::Vec16*)w, g_sink, w_bytes / 16, 0x9e3779b9u, 0};
      b12x_flush_read<<<528, 512, 0, st>>>(rp);
    };
    const double r = time_graph(st, run_read), pr = time_graph(st, [&] { run_pf(132, 4096, 0, w_bytes); });
    const double prr = time_graph(st, [&] { run_pf(132, 4096, 0, w_bytes); run_read(); });
    const double fr = time_graph(st, run_flush_read), frr = time_graph(st, [&] { run_flush_read(); run_read(); });
    printf("read cold %.2f | P %.2f, P -> read %.2f (read %.2f) | plain read %.2f, -> read %.2f (read %.2f)\n", r, pr,
           prr, prr - pr, fr, frr, frr - fr);
    printf("P -> gemv(plain) %.2f | plain read -> gemv(plain) %.2f\n",
           time_graph(st, [&] { run_pf(132, 4096, 0, w_bytes); run_gemv(false); }) - pr,
           time_graph(st, [&] { run_flush_read(); run_gemv(false); }) - fr);
    // correctness of the chained call
    CK(cudaFree(w)); CK(cudaFree(x)); CK(cudaFree(y));
  }
  return 0;
}
