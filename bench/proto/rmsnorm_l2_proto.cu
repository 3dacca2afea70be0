// Prototype harness: L2 cache hints on norm.rmsnorm's streams (not part of the build, not the
// source of any reported number). At T = 4096, D = 4096 (bf16) the op moves 33.5 MB in and
// 33.5 MB out: y fits in L2, so what the kernel leaves for the cache to write back while it
// runs decides part of its time. Variants of the plain path (same math as
// b12x-norm/kernels/rmsnorm.cu, one CTA per row, KV 16-byte vectors per thread):
//   load hint  L: 0 ld.global.cg (the library), 1 ld.global.cs, 2 cg + L2::cache_hint
//                 evict_first, 3 L1::no_allocate + L2 evict_first
//   store hint S: 0 st.global (the library), 1 L2::cache_hint evict_last (insight only: such
//                 lines outlive a normal-priority flush), 2 st.global.cs
// Every variant's y is compared bitwise with the library kernel's. Also times the project's
// read probe on the op's bytes (size-matched ceiling) and on x's bytes alone.
// `bound` (session 19): per shape, what any rmsnorm must at least do -- read x alone, write y alone,
// copy x to y (one CTA per row, grid-stride, cudaMemcpyAsync) -- next to the library's v1..v8,
// the same math with the stores switched off, and R rows per CTA (rms_rows).
// Also a persistent form (rms_persist: grid = SMs x CTAs per SM, next row's loads in flight
// during this row's reduction); `/tmp/rms_l2 persist` runs only it and the library's v2.
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/rms_l2 rmsnorm_l2_proto.cu && /tmp/rms_l2 [persist|bound]
#include <cuda.h>
#include <cmath>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#include "../../b12x-norm/kernels/rmsnorm.cu"
#include "../../b12x-core/kernels/read_bw.cu"

using b12x::bf16;
#include "proto_common.cuh"

using b12x::Vec16;

template <int L>
__device__ __forceinline__ Vec16 ld_x(const void* p, uint64_t pol) {
  Vec16 v;
  if constexpr (L == 0) {
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p));
  } else if constexpr (L == 1) {
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p));
  } else if constexpr (L == 2) {
    asm volatile("ld.global.cg.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p), "l"(pol));
  } else {
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p), "l"(pol));
  }
  return v;
}

template <int S>
__device__ __forceinline__ void st_y(void* p, const Vec16& v, uint64_t pol) {
  if constexpr (S == 0) {
    asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]),
                 "r"(v.w[3]) : "memory");
  } else if constexpr (S == 1) {
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
                 "r"(v.w[2]), "r"(v.w[3]), "l"(pol) : "memory");
  } else {
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]),
                 "r"(v.w[3]) : "memory");
  }
}

template <int KV, int L, int S>
__global__ void __launch_bounds__(1024) rms_hint(const __grid_constant__ b12x::RmsnormParams p) {
  constexpr int VEC = 8;
  __shared__ float s_red[33];
  uint64_t pol_first, pol_last;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol_first));
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol_last));
  const int64_t row = blockIdx.x;
  const int nvec = p.cols / VEC;
  const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const bf16*>(p.x) + row * p.x_stride);
  const Vec16* g_w = static_cast<const Vec16*>(p.w);
  Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<bf16*>(p.y) + row * p.y_stride);
  Vec16 r_x[KV], r_w[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    r_x[k] = Vec16{};
    if (i < nvec) r_x[k] = ld_x<L>(g_x + i, pol_first);
  }
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) r_w[k] = b12x::ld_global_v16(g_w + i);
  }
  float r_ss = 0.0f;
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    float f[VEC];
    b12x::unpack_f32<bf16>(r_x[k], f);
#pragma unroll
    for (int j = 0; j < VEC; ++j) r_ss = fmaf(f[j], f[j], r_ss);
  }
  const float ss = b12x::block_sum(r_ss, s_red);
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    asm volatile("" : "+r"(r_x[k].w[0]), "+r"(r_x[k].w[1]), "+r"(r_x[k].w[2]), "+r"(r_x[k].w[3]));
  }
  const float rrms = rsqrtf(ss / static_cast<float>(p.cols) + p.eps);
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) {
      float fx[VEC], fw[VEC], fy[VEC];
      b12x::unpack_f32<bf16>(r_x[k], fx);
      b12x::unpack_f32<bf16>(r_w[k], fw);
#pragma unroll
      for (int j = 0; j < VEC; ++j) fy[j] = (fx[j] * rrms) * fw[j];
      st_y<S>(g_y + i, b12x::pack_from_f32<bf16>(fy), S == 1 ? pol_last : pol_first);
    }
  }
}


// Persistent form: CTA c normalizes rows c, c + G, c + 2G, ... with the next row's loads issued
// before this row's reduction (two rows in flight per thread); w is loaded once per CTA.
template <int KV>
__global__ void __launch_bounds__(1024) rms_persist(const __grid_constant__ b12x::RmsnormParams p) {
  constexpr int VEC = 8;
  __shared__ float s_red[33];
  const int nvec = p.cols / VEC;
  const Vec16* g_w = static_cast<const Vec16*>(p.w);
  Vec16 r_w[KV], a[KV], b[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) r_w[k] = b12x::ld_global_v16(g_w + i);
  }
  auto load = [&](int64_t row, Vec16 (&v)[KV]) {
    const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const bf16*>(p.x) + row * p.x_stride);
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      v[k] = Vec16{};
      if (i < nvec && row < p.rows) v[k] = b12x::ld_global_cg_v16(g_x + i);
    }
  };
  auto finish = [&](int64_t row, Vec16 (&v)[KV]) {
    float r_ss = 0.0f;
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      float f[VEC];
      b12x::unpack_f32<bf16>(v[k], f);
#pragma unroll
      for (int j = 0; j < VEC; ++j) r_ss = fmaf(f[j], f[j], r_ss);
    }
    const float ss = b12x::block_sum(r_ss, s_red);
    const float rrms = rsqrtf(ss / static_cast<float>(p.cols) + p.eps);
    Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<bf16*>(p.y) + row * p.y_stride);
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < nvec) {
        float fx[VEC], fw[VEC], fy[VEC];
        b12x::unpack_f32<bf16>(v[k], fx);
        b12x::unpack_f32<bf16>(r_w[k], fw);
#pragma unroll
        for (int j = 0; j < VEC; ++j) fy[j] = (fx[j] * rrms) * fw[j];
        b12x::st_global_v16(g_y + i, b12x::pack_from_f32<bf16>(fy));
      }
    }
  };
  const int64_t G = gridDim.x;
  int64_t row = blockIdx.x;
  load(row, a);
  while (row < p.rows) {
    load(row + G, b);
    finish(row, a);
    row += G;
    if (row >= p.rows) break;
    load(row + G, a);
    finish(row, b);
    row += G;
  }
}

// --- `bound` mode (session 19): what any rmsnorm at these shapes must at least do. ---
// copy_row: one CTA per row with rmsnorm's load/store pattern, y = x (no reduction).
template <int KV>
__global__ void __launch_bounds__(1024) copy_row(const __grid_constant__ b12x::RmsnormParams p) {
  const int64_t row = blockIdx.x;
  const int nvec = p.cols / 8;
  const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const bf16*>(p.x) + row * p.x_stride);
  Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<bf16*>(p.y) + row * p.y_stride);
  Vec16 r[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) r[k] = b12x::ld_global_cg_v16(g_x + i);
  }
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) b12x::st_global_v16(g_y + i, r[k]);
  }
}
// write_row: one CTA per row, stores only (y = a per-element pattern; the sample's writes).
template <int KV>
__global__ void __launch_bounds__(1024) write_row(const __grid_constant__ b12x::RmsnormParams p) {
  const int64_t row = blockIdx.x;
  const int nvec = p.cols / 8;
  Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<bf16*>(p.y) + row * p.y_stride);
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    Vec16 v;
    v.w[0] = v.w[1] = v.w[2] = v.w[3] = (uint32_t)(row * 977 + i);
    if (i < nvec) b12x::st_global_v16(g_y + i, v);
  }
}
// copy_grid: grid-stride copy over the flat tensor, V vectors per thread per step (loads first).
template <int V>
__global__ void __launch_bounds__(512) copy_grid(const Vec16* __restrict__ src, Vec16* __restrict__ dst, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t base = blockIdx.x * (size_t)blockDim.x + threadIdx.x; base < n; base += stride * V) {
    Vec16 r[V];
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (base + k * stride < n) r[k] = b12x::ld_global_cg_v16(src + base + k * stride);
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (base + k * stride < n) b12x::st_global_v16(dst + base + k * stride, r[k]);
  }
}
// rms_nostore: rms_hint<KV, 0, 0>'s loads and math; y is stored only when p.reserved != 0 (it is
// 0 here), so the time is the read of x and w, the reduction and the math without the writes.
template <int KV>
__global__ void __launch_bounds__(1024) rms_nostore(const __grid_constant__ b12x::RmsnormParams p) {
  constexpr int VEC = 8;
  __shared__ float s_red[33];
  const int64_t row = blockIdx.x;
  const int nvec = p.cols / VEC;
  const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const bf16*>(p.x) + row * p.x_stride);
  const Vec16* g_w = static_cast<const Vec16*>(p.w);
  Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<bf16*>(p.y) + row * p.y_stride);
  Vec16 r_x[KV], r_w[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    r_x[k] = Vec16{};
    if (i < nvec) r_x[k] = b12x::ld_global_cg_v16(g_x + i);
  }
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) r_w[k] = b12x::ld_global_v16(g_w + i);
  }
  float r_ss = 0.0f;
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    float f[VEC];
    b12x::unpack_f32<bf16>(r_x[k], f);
#pragma unroll
    for (int j = 0; j < VEC; ++j) r_ss = fmaf(f[j], f[j], r_ss);
  }
  const float ss = b12x::block_sum(r_ss, s_red);
  const float rrms = rsqrtf(ss / static_cast<float>(p.cols) + p.eps);
  uint32_t acc = 0;
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    float fx[VEC], fw[VEC], fy[VEC];
    b12x::unpack_f32<bf16>(r_x[k], fx);
    b12x::unpack_f32<bf16>(r_w[k], fw);
#pragma unroll
    for (int j = 0; j < VEC; ++j) fy[j] = (fx[j] * rrms) * fw[j];
    const Vec16 yv = b12x::pack_from_f32<bf16>(fy);
    acc ^= yv.w[0] ^ yv.w[1] ^ yv.w[2] ^ yv.w[3];
  }
  if (p.reserved != 0) g_y[threadIdx.x] = Vec16{{acc, acc, acc, acc}};
}
// rms_rows: R rows per CTA, every row's loads issued before any math, one pair of barriers for
// the R sums of squares (same per-row reduction order as the library's v{KV}: bitwise equal).
template <int KV, int R>
__global__ void __launch_bounds__(1024) rms_rows(const __grid_constant__ b12x::RmsnormParams p) {
  constexpr int VEC = 8;
  __shared__ float s_red[R][33];
  const int nvec = p.cols / VEC;
  const Vec16* g_w = static_cast<const Vec16*>(p.w);
  Vec16 r_x[R][KV], r_w[KV];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = (int64_t)blockIdx.x * R + r;
    const Vec16* g_x = reinterpret_cast<const Vec16*>(static_cast<const bf16*>(p.x) + row * p.x_stride);
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      r_x[r][k] = Vec16{};
      if (i < nvec && row < p.rows) r_x[r][k] = b12x::ld_global_cg_v16(g_x + i);
    }
  }
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < nvec) r_w[k] = b12x::ld_global_v16(g_w + i);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      float f[VEC];
      b12x::unpack_f32<bf16>(r_x[r][k], f);
#pragma unroll
      for (int j = 0; j < VEC; ++j) ss = fmaf(f[j], f[j], ss);
    }
    ss = b12x::warp_sum(ss);
    if (lane == 0) s_red[r][warp] = ss;
  }
  __syncthreads();
  if (warp < R) {
    float t = lane < nwarps ? s_red[warp][lane] : 0.0f;
    t = b12x::warp_sum(t);
    if (lane == 0) s_red[warp][32] = t;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = (int64_t)blockIdx.x * R + r;
    if (row >= p.rows) break;
    const float rrms = rsqrtf(s_red[r][32] / static_cast<float>(p.cols) + p.eps);
    Vec16* g_y = reinterpret_cast<Vec16*>(static_cast<bf16*>(p.y) + row * p.y_stride);
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < nvec) {
        float fx[VEC], fw[VEC], fy[VEC];
        b12x::unpack_f32<bf16>(r_x[r][k], fx);
        b12x::unpack_f32<bf16>(r_w[k], fw);
#pragma unroll
        for (int j = 0; j < VEC; ++j) fy[j] = (fx[j] * rrms) * fw[j];
        b12x::st_global_v16(g_y + i, b12x::pack_from_f32<bf16>(fy));
      }
    }
  }
}

using Kern = void (*)(b12x::RmsnormParams);

static double read_probe(cudaStream_t st, const void* buf, size_t bytes) {
  double best = 1e30;
  ReadBwParams rp{(const Vec16*)buf, g_sink, bytes / 16, 0x9e3779b9u, 0};
  for (int per_sm : {1, 2, 4}) {
    best = std::min(best, time_graph(st, [&] { b12x_read_bw<<<132 * per_sm, 512, 0, st>>>(rp); }, 20));
  }
  return best;
}

// grid: 0 = T, > 0 CTAs per SM (persistent), < 0 = -R rows per CTA (rms_rows).
struct V { const char* name; Kern k; int kv; int grid = 0; };

// Checks v against the library's v2 (bitwise) and returns its median µs (0 when it differs).
static double time_variant(cudaStream_t st, const cudaDeviceProp& prop, const V& v, b12x::RmsnormParams p,
                           bf16* y, bf16* yref) {
  const int T = p.rows, D = p.cols;
  p.y = y;
  const int thr = ((D / 8 / v.kv) + 31) / 32 * 32;
  if (thr > 1024) return 0.0;
  CK(cudaMemsetAsync(y, 0xff, (size_t)T * D * 2, st));
  const int grid = v.grid > 0 ? std::min(T, v.grid * prop.multiProcessorCount)
                   : v.grid < 0 ? (T + (-v.grid) - 1) / (-v.grid) : T;
  v.k<<<grid, thr, 0, st>>>(p);
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  std::vector<uint16_t> a((size_t)T * D), b((size_t)T * D);
  CK(cudaMemcpy(a.data(), y, a.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), yref, b.size() * 2, cudaMemcpyDeviceToHost));
  const bool same = memcmp(a.data(), b.data(), a.size() * 2) == 0;
  const double us = time_graph(st, [&] { v.k<<<grid, thr, 0, st>>>(p); }, 30);
  return same ? us : -us;
}

// `bound`: per shape, the lower bounds of any rmsnorm (read x; write y; copy x to y in several
// forms, cudaMemcpyAsync included) next to the library's kernels and the R-rows-per-CTA form.
static int bound_main(cudaStream_t st, const cudaDeviceProp& prop, bf16* x, bf16* w, bf16* y, bf16* yref,
                      const std::vector<V>& vs) {
  const int shapes[][2] = {{4096, 4096}, {4096, 7168}, {8192, 4096}, {2048, 4096}, {32768, 4096}};
  const int sms = prop.multiProcessorCount;
  for (int rep = 0; rep < 2; ++rep)
    for (auto& sh : shapes) {
      const int T = sh[0], D = sh[1];
      const size_t half = (size_t)T * D * 2;
      const double bytes = 2.0 * half;
      b12x::RmsnormParams p{};
      p.x = x; p.w = w; p.x_stride = D; p.y_stride = D; p.rows = T; p.cols = D; p.eps = 1e-6f; p.y = yref;
      const int thr_v2 = ((D / 8 / 2) + 31) / 32 * 32;
      b12x_rmsnorm_v2_bf16<<<T, thr_v2, 0, st>>>(p);
      CK(cudaStreamSynchronize(st));
      p.y = y;  // the copy and write rows below write y, never the reference (session 19 call 1 wrote yref)
      printf("rep %d T %d D %d (%.1f MB moved; 85%% of the 1 GB read ceiling needs bytes / 0.85 / ceiling)\n", rep, T,
             D, bytes / 1e6);
      auto row = [&](const char* name, double us) {
        printf("  %-34s %8.2f us  %6.3f TB/s (op bytes / time)%s\n", name, fabs(us), bytes / fabs(us) / 1e6,
               us < 0 ? "  DIFFERS" : "");
      };
      row("read probe, op bytes", read_probe(st, x, (size_t)bytes));
      row("read probe, x bytes", read_probe(st, x, half));
      row("cudaMemcpyAsync x -> y", time_graph(st, [&] {
            CK(cudaMemcpyAsync(y, x, half, cudaMemcpyDeviceToDevice, st));
          }, 30));
      for (int kv : {1, 2, 4}) {
        const int thr = ((D / 8 / kv) + 31) / 32 * 32;
        if (thr > 1024) continue;
        char n[64];
        snprintf(n, sizeof n, "copy_row v%d", kv);
        auto k = kv == 1 ? copy_row<1> : kv == 2 ? copy_row<2> : copy_row<4>;
        row(n, time_graph(st, [&] { k<<<T, thr, 0, st>>>(p); }, 30));
        snprintf(n, sizeof n, "write_row v%d", kv);
        auto wk = kv == 1 ? write_row<1> : kv == 2 ? write_row<2> : write_row<4>;
        row(n, time_graph(st, [&] { wk<<<T, thr, 0, st>>>(p); }, 30));
        snprintf(n, sizeof n, "rms_nostore v%d", kv);
        auto nk = kv == 1 ? rms_nostore<1> : kv == 2 ? rms_nostore<2> : rms_nostore<4>;
        row(n, time_graph(st, [&] { nk<<<T, thr, 0, st>>>(p); }, 30));
      }
      for (int per_sm : {2, 4, 8})
        for (int v : {2, 4}) {
          char n[64];
          snprintf(n, sizeof n, "copy_grid %d CTAs/SM V%d", per_sm, v);
          auto k = v == 2 ? copy_grid<2> : copy_grid<4>;
          row(n, time_graph(st, [&] {
                k<<<sms * per_sm, 512, 0, st>>>((const Vec16*)x, (Vec16*)y, half / 16);
              }, 30));
        }
      for (auto& v : vs) row(v.name, time_variant(st, prop, v, p, y, yref));
    }
  return 0;
}

int main(int argc, char** argv) {
  // `persist`: only the library's v2 and the persistent forms (the hint variants were call 1).
  const bool persist_only = argc > 1 && strcmp(argv[1], "persist") == 0;
  // `bound`: copies, write-only and no-store forms, and R rows per CTA (session 19).
  const bool bound = argc > 1 && strcmp(argv[1], "bound") == 0;
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  printf("%s, %d SMs, L2 %d B\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize);
  const int Tmax = 32768, Dmax = 7168;
  bf16 *x, *w, *y, *yref;
  CK(cudaMalloc(&x, (size_t)Tmax * Dmax * 2));
  CK(cudaMalloc(&w, (size_t)Dmax * 2));
  CK(cudaMalloc(&y, (size_t)Tmax * Dmax * 2));
  CK(cudaMalloc(&yref, (size_t)Tmax * Dmax * 2));
  fill_bf16<<<1024, 256, 0, st>>>(x, (size_t)Tmax * Dmax, 7);
  fill_bf16<<<64, 256, 0, st>>>(w, Dmax, 11);
  CK(cudaStreamSynchronize(st));

  std::vector<V> vs = {
      {"lib v1", b12x_rmsnorm_v1_bf16, 1},     {"lib v2", b12x_rmsnorm_v2_bf16, 2},
      {"lib v4", b12x_rmsnorm_v4_bf16, 4},     {"L0S0 v2", rms_hint<2, 0, 0>, 2},
      {"L1S0 v2", rms_hint<2, 1, 0>, 2},       {"L2S0 v2", rms_hint<2, 2, 0>, 2},
      {"L3S0 v2", rms_hint<2, 3, 0>, 2},       {"L2S2 v2", rms_hint<2, 2, 2>, 2},
      {"L0S2 v2", rms_hint<2, 0, 2>, 2},       {"L2S0 v1", rms_hint<1, 2, 0>, 1},
      {"L2S0 v4", rms_hint<4, 2, 0>, 4},       {"L1S0 v4", rms_hint<4, 1, 0>, 4},
      {"persist v2 x8", rms_persist<2>, 2, 8}, {"persist v2 x4", rms_persist<2>, 2, 4},
      {"persist v4 x8", rms_persist<4>, 4, 8}, {"persist v4 x4", rms_persist<4>, 4, 4},
      {"persist v1 x4", rms_persist<1>, 1, 4}, {"persist v1 x2", rms_persist<1>, 1, 2},
      {"persist v2 x6", rms_persist<2>, 2, 6},
  };
  if (bound) {
    vs = {{"lib v1", b12x_rmsnorm_v1_bf16, 1},      {"lib v2", b12x_rmsnorm_v2_bf16, 2},
          {"lib v4", b12x_rmsnorm_v4_bf16, 4},      {"lib v8", b12x_rmsnorm_v8_bf16, 8},
          {"rows v2 R2", rms_rows<2, 2>, 2, -2},    {"rows v1 R2", rms_rows<1, 2>, 1, -2},
          {"rows v1 R4", rms_rows<1, 4>, 1, -4},    {"rows v2 R4", rms_rows<2, 4>, 2, -4},
          {"rows v4 R2", rms_rows<4, 2>, 4, -2}};
    return bound_main(st, prop, x, w, y, yref, vs);
  }
  if (persist_only) {
    std::vector<V> keep;
    for (auto& v : vs)
      if (v.grid || strcmp(v.name, "lib v2") == 0) keep.push_back(v);
    vs = keep;
  }
  // Run last (once): evict_last lines of y may outlive the flush and skew what follows.
  const V last = {"L2S1 v2 (evict_last y)", rms_hint<2, 2, 1>, 2};
  const int shapes[][2] = {{4096, 4096}, {4096, 7168}, {32768, 4096}, {8192, 4096}, {2048, 4096}};
  for (int rep = 0; rep < (persist_only ? 2 : 3); ++rep) {
    if (rep == 2) vs = {last};
    for (auto& sh : shapes) {
      const int T = sh[0], D = sh[1];
      const double bytes = 2.0 * T * D * 2;
      b12x::RmsnormParams p{};
      p.x = x; p.w = w; p.x_stride = D; p.y_stride = D; p.rows = T; p.cols = D; p.eps = 1e-6f;
      p.y = yref;
      const int thr_v2 = ((D / 8 / 2) + 31) / 32 * 32;
      b12x_rmsnorm_v2_bf16<<<T, thr_v2, 0, st>>>(p);
      CK(cudaStreamSynchronize(st));
      printf("T %d D %d (%.1f MB moved): read probe op bytes %.2f us, x bytes %.2f us\n", T, D, bytes / 1e6,
             read_probe(st, x, (size_t)bytes), read_probe(st, x, (size_t)bytes / 2));
      for (auto& v : vs) {
        const double us = time_variant(st, prop, v, p, y, yref);
        if (us == 0.0) continue;
        printf("  %-24s %8.2f us  %6.3f TB/s  %s\n", v.name, fabs(us), bytes / fabs(us) / 1e6,
               us > 0 ? "bitwise equal" : "DIFFERS");
      }
    }
  }
  return 0;
}
