// Prototype harness (not part of the build, not the source of any reported number; written in
// session 12, first run in session 13: bench-results/2026-12-01-h200-c/wgmma/): is the single-call gap of bf16_gemv to cuBLAS at M = 16
// (0.95x on 7168x4096) the consumers' ldmatrix + mma.sync issue, which cuBLAS's nvjet kernels
// avoid with wgmma reading both operands straight from shared memory? An sm_90a-only kernel laid
// out like nvjet's `64x16` tile: one CTA per 64-row block of W, 384 threads — warpgroup 0's
// first thread issues the TMA boxes (W 64 rows x 64 k, x 16 tokens x 64 k, 128-byte swizzle) into
// a ring of 10 KB stages; warpgroups 1 and 2 take alternate stages, each running four
// wgmma.m64n16k16 per stage into its own accumulators, and release a stage once its wgmmas have
// completed; at the end warpgroup 2 hands its partial tile to warpgroup 1 through shared memory,
// which adds and stores y. Checked against the naive f32 reference, timed with the project's
// method against bf16_gemv's TMA kernel (same boxes) and cuBLAS (cublasGemmEx).
//   cd bench/proto && nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a \
//     -I../../b12x-core/include -o /tmp/wgmma gemv_wgmma_proto.cu -lcublas && /tmp/wgmma
// (wgmma needs the arch-specific compute_90a target; compiles here: 34 registers in the kernel.)
// (-DNO_CUBLAS builds it without the cuBLAS rows.)
#include <cuda.h>
#include <cuda_runtime.h>
#ifndef NO_CUBLAS
#include <cublas_v2.h>
#endif
#include <cmath>
#include <cstdio>
#include "../../b12x-gemm/kernels/bf16_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"

#include "proto_common.cuh"
#include "proto_launch.cuh"

namespace wg {

constexpr int kRows = 64, kTokens = 16, kK = 64;            // one stage: W 64 x 64, x 16 x 64
constexpr uint32_t kWBox = kRows * kK * 2, kXBox = kTokens * kK * 2;
constexpr uint32_t kStage = kWBox + kXBox;                   // 10 KB, a multiple of 1 KB
constexpr int kMaxStages = 20;

struct Params {
  CUtensorMap w_map;  // W [N, K] bf16, box {64 k, 64 rows}, 128-byte swizzle
  CUtensorMap x_map;  // x [M, K] bf16, box {64 k, 16 tokens}, 128-byte swizzle
  bf16* y;            // [M, N]
  int n, k, m, stages;
  int defer;          // release each stage one step late (after the next stage's wgmmas are issued)
  int lockstep_only;  // kMc: each rank loads its own x box (no multicast), the empty barriers still cluster-wide
  int cta_wait;       // kMc: consumers arrive with the default .release.cta and the producer waits with
                     //   the default acquire (CUTLASS's ClusterBarrier) instead of cluster scope
};

// Shared-memory matrix descriptor of a K-major tile in the 128-byte swizzle: rows of 128 bytes,
// 8-row groups 1024 bytes apart (stride byte offset), the leading offset unused.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t s_addr) {
  return (uint64_t)((s_addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// Pins the accumulators around the asynchronous wgmmas: no read or move of them may be scheduled
// between an issue and its wait.
__device__ __forceinline__ void fence_operands(float (&d)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) asm volatile("" : "+f"(d[e])::"memory");
}

// D[64 x 16] (+)= A[64 x 16] * B[16 x 16]^T, both K-major bf16 in shared memory, f32 accumulate.
__device__ __forceinline__ void wgmma_m64n16k16(float (&d)[8], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(accumulate));
}


// x multicast (the kMc kernels): the box lands at the same offset in every CTA of the cluster
// named by `mask` and completes as transaction bytes on each one's barrier at `bar`.
__device__ __forceinline__ void tma_load_2d_mc(uint32_t s_dst, const CUtensorMap* desc, int c0, int c1, uint32_t bar,
                                               uint16_t mask, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;" ::"r"(s_dst),
      "l"(desc), "r"(c0), "r"(c1), "r"(bar), "h"(mask), "l"(policy)
      : "memory");
}
// The consumers' release of a stage on rank `rank`'s empty barrier. kClusterRelease: with
// release semantics at cluster scope (a cluster-scope fence per arrival); otherwise the default
// (.release.cta), as CUTLASS's ClusterBarrier::arrive(cta_id) — the consumers only read the
// stage (wgmma, complete at wait_group), so there is nothing for the peer to acquire.
template <bool kClusterRelease>
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar_local, int rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar_local), "r"(rank));
  if (kClusterRelease)
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
  else
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void mbar_wait_acq_cluster(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar), "r"(parity)
      : "memory");
}

// kMc: launched in clusters of C consecutive row blocks walking the same k-stages in step; rank r
// loads stage i's x box for i % C == r by multicast into every rank's ring, and a stage is
// refilled only once every rank's consumers have released it (empty barriers count C arrivals,
// one from each rank: warp w of the consuming warpgroup signals rank w).
template <bool kMc>
__global__ void __launch_bounds__(384, 1) gemv_wgmma(const __grid_constant__ Params p) {
  __shared__ __align__(8) uint64_t s_bar[2 * kMaxStages];
  __shared__ float s_part[kRows * kTokens];
  extern __shared__ unsigned char s_dyn[];
  const uint32_t ring = (b12x::smem_addr(s_dyn) + 1023u) & ~1023u;
  const uint32_t full0 = b12x::smem_addr(s_bar), empty0 = full0 + 8 * kMaxStages;
  const int wgroup = threadIdx.x / 128, t = threadIdx.x % 128;
  const int ksteps = (p.k + kK - 1) / kK, stages = p.stages;
  const int row0 = blockIdx.x * kRows;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      b12x::mbar_init(full0 + 8 * s, 1);
      b12x::mbar_init(empty0 + 8 * s, kMc ? b12x::cluster_size() : 1);
    }
    b12x::mbar_fence_init();
  }
  __syncthreads();
  const int csize = kMc ? b12x::cluster_size() : 1, crank = kMc ? b12x::cluster_rank() : 0;
  if (kMc) b12x::cluster_sync();  // every rank's barriers exist before a peer's box or arrival lands

  if (wgroup == 0) {
    if (t == 0) {
      const uint64_t w_policy = b12x::l2_policy_evict_first(), x_policy = b12x::l2_policy_evict_last();
      for (int i = 0; i < ksteps; ++i) {
        const int s = i % stages;
        if (i >= stages) {
          if (kMc && !p.cta_wait)
            mbar_wait_acq_cluster(empty0 + 8 * s, ((i / stages) - 1) & 1);
          else
            b12x::mbar_wait(empty0 + 8 * s, ((i / stages) - 1) & 1);
        }
        const uint32_t bar = full0 + 8 * s, st = ring + s * kStage;
        b12x::mbar_arrive_expect_tx(bar, kStage);
        b12x::tma_load_2d(st, reinterpret_cast<const b12x::TmaDescriptor*>(&p.w_map), i * kK, row0, bar, w_policy);
        if (!kMc)
          b12x::tma_load_2d(st + kWBox, reinterpret_cast<const b12x::TmaDescriptor*>(&p.x_map), i * kK, 0, bar,
                            x_policy);
        else if (p.lockstep_only)
          b12x::tma_load_2d(st + kWBox, reinterpret_cast<const b12x::TmaDescriptor*>(&p.x_map), i * kK, 0, bar,
                            x_policy);
        else if (i % csize == crank)
          tma_load_2d_mc(st + kWBox, &p.x_map, i * kK, 0, bar, (uint16_t)((1u << csize) - 1u), x_policy);
      }
    }
    __syncwarp();  // the cluster barrier is .aligned: warp 0 reconverges after thread 0's loop
    if (kMc) b12x::cluster_sync();  // no rank exits while a peer may still arrive on its barriers
    return;  // the consumers synchronize among themselves only (named barrier 1)
  }

  // Consumer warpgroup c takes stages i = c, c + 2, ...
  const int c = wgroup - 1;
  float d[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) d[e] = 0.0f;
  int first = 1;
  // Releases stage slot `rs` (its wgmmas complete).
  auto release = [&](int rs) {
    if (kMc) {
      if (t % 32 == 0 && t / 32 < csize) {
        if (p.cta_wait)
          mbar_arrive_remote<false>(empty0 + 8 * rs, t / 32);
        else
          mbar_arrive_remote<true>(empty0 + 8 * rs, t / 32);
      }
    } else if (t == 0) {
      b12x::mbar_arrive(empty0 + 8 * rs);
    }
  };
  int pending = -1;  // p.defer: the slot whose wgmmas may still be in flight, released one step late
  for (int i = c; i < ksteps; i += 2) {
    const int s = i % stages;
    b12x::mbar_wait(full0 + 8 * s, (i / stages) & 1);
    const uint32_t st = ring + s * kStage;
    if (!p.defer) fence_operands(d);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk) {
      wgmma_m64n16k16(d, desc_sw128(st + 32 * kk), desc_sw128(st + kWBox + 32 * kk), first ? 0 : 1);
      first = 0;
    }
    wgmma_commit();
    if (p.defer) {
      // The previous group (this warpgroup's last stage) is done once at most one is pending.
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (pending >= 0) release(pending);
      pending = s;
    } else {
      wgmma_wait_all();  // the stage's shared memory has been read
      fence_operands(d);
      release(s);
    }
  }
  if (p.defer) {
    wgmma_wait_all();
    fence_operands(d);
    if (pending >= 0) release(pending);
  }
  // Accumulator fragment (m64nNk16, f32): warp w of the warpgroup holds rows 16w + lane/4 (+8
  // for d[2], d[3], d[6], d[7]), columns (e/4)*8 + 2*(lane%4) + (e%2).
  const int w = t / 32, lane = t % 32;
  auto for_each = [&](auto&& f) {
#pragma unroll
    for (int e = 0; e < 8; ++e) f(e, 16 * w + lane / 4 + 8 * ((e >> 1) & 1), (e >> 2) * 8 + 2 * (lane % 4) + (e & 1));
  };
  if (c == 1) for_each([&](int e, int r, int tok) { s_part[tok * kRows + r] = d[e]; });
  asm volatile("bar.sync 1, 256;" ::: "memory");
  if (c == 0)
    for_each([&](int e, int r, int tok) {
      const float v = d[e] + s_part[tok * kRows + r];
      if (row0 + r < p.n && tok < p.m) p.y[(long long)tok * p.n + row0 + r] = __float2bfloat16_rn(v);
    });
  if (kMc) b12x::cluster_sync();
}

}  // namespace wg

// The TMA kernel of bf16_gemv (one CTA per 64-row block, kb8), for the same-run comparison.
template <int NT, int KB>
__global__ void __launch_bounds__(160, 1) lib_tma(const __grid_constant__ b12x::Bf16GemvTmaParams p) {
  b12x::bf16_gemv::gemv_tma<NT, 1, 4, KB, bf16>(p);
}
__global__ void bf16_to_f32(const bf16* a, float* b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    b[i] = __bfloat162float(a[i]);
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  struct Case { int n, k, m; };
  const Case cases[] = {{7168, 4096, 16}, {18432, 7168, 16}};
  const size_t max_w = 18432ull * 7168;
  bf16 *w, *x, *y; float *ref, *yf;
  CK(cudaMalloc(&w, max_w * 2)); CK(cudaMalloc(&x, 16 * 18432 * 2)); CK(cudaMalloc(&y, 16ull * 18432 * 2));
  CK(cudaMalloc(&ref, 16ull * 18432 * 4)); CK(cudaMalloc(&yf, 16ull * 18432 * 4));
  fill_bf16<<<1024, 256>>>(w, max_w, 1); fill_bf16<<<64, 256>>>(x, 16 * 18432, 2); CK(cudaDeviceSynchronize());
#ifndef NO_CUBLAS
  cublasHandle_t h; cublasCreate(&h); cublasSetStream(h, st);
  void* ws; CK(cudaMalloc(&ws, 32 << 20)); cublasSetWorkspace(h, ws, 32 << 20);
#endif
  auto check = [&](const Case& c) {
    const size_t cnt = (size_t)c.n * c.m;
    bf16_to_f32<<<256, 256>>>(y, yf, cnt);
    std::vector<float> a(cnt), r(cnt);
    CK(cudaMemcpy(a.data(), yf, cnt * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r.data(), ref, cnt * 4, cudaMemcpyDeviceToHost));
    double e = 0, mx = 0;
    for (size_t i = 0; i < cnt; ++i) { e = std::max(e, (double)std::fabs(a[i] - r[i])); mx = std::max(mx, (double)std::fabs(r[i])); }
    return e / mx;
  };
  for (int round = 0; round < 1; ++round)
    for (auto c : cases) {
      printf("== round %d: N=%d K=%d M=%d (%.1f MB)\n", round, c.n, c.k, c.m, c.n * (double)c.k * 2 / 1e6);
      ref_gemv<<<(c.n * c.m * 32 + 255) / 256, 256>>>(w, x, ref, c.n, c.k, c.m);
      CK(cudaDeviceSynchronize());
#ifndef NO_CUBLAS
      {
        const float alpha = 1.0f, beta = 0.0f;
        auto gemm = [&] {
          cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, c.n, c.m, c.k, &alpha, w, CUDA_R_16BF, c.k, x, CUDA_R_16BF, c.k, &beta,
                       y, CUDA_R_16BF, c.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        };
        gemm(); CK(cudaStreamSynchronize(st));
        printf("  %-34s %7.2f us | rel err %.2e\n", "cuBLAS cublasGemmEx", time_graph(st, gemm), check(c));
      }
#endif
      {  // bf16_gemv's TMA kernel, rb, kb8, as deep a ring as fits
        const int nt = c.m > 8 ? 2 : 1, kb = 8, rows = 64;
        const uint32_t stage = kb * (rows * 128 + 8 * nt * 128);
        const int stages = std::min<int>(16, (prop.sharedMemPerBlockOptin - 2048) / stage);
        const uint32_t dyn = stages * stage + 1024;
        auto kernel = nt == 2 ? lib_tma<2, 8> : lib_tma<1, 8>;
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
        b12x::Bf16GemvTmaParams p{};
        encode((CUtensorMap*)&p.w_map, w, c.k, c.n, (uint64_t)c.k * 2, 64, rows);
        encode((CUtensorMap*)&p.x_map, x, c.k, c.m, (uint64_t)c.k * 2, 64, 8 * nt);
        p.g.y = y; p.g.ldy = c.n; p.g.n = c.n; p.g.k = c.k; p.g.m = c.m;
        p.kstages = (c.k + 64 * kb - 1) / (64 * kb);
        p.units_per_cta = p.kstages; p.stages = stages; p.flags = b12x::kTmaEvictFirst;
        const int grid = (c.n + rows - 1) / rows;
        auto run = [&] { kernel<<<grid, 160, dyn, st>>>(p); };
        run(); CK(cudaStreamSynchronize(st));
        const double err = check(c);
        printf("  %-34s %7.2f us | rel err %.2e\n", "b12x tma rb kb8 (library kernel)", time_graph(st, run), err);
      }
      // variant 0: multicast (mc > 1) or none; 1: clusters, cluster-wide empty barriers, own x
      // loads (lockstep without multicast); 2: launched in clusters, the plain kernel; 3: as 0
      // with the remote arrivals and the producer's wait at the default (CTA) scope; 4: as 3 with
      // each stage released one step late; 5: as 1 at CTA scope (is the lockstep itself the
      // cost?). Without clusters, variant 1 is the deferred release.
      for (int mc : {1, 2, 4})
        for (int variant = mc > 1 ? 2 : 0; variant < (mc > 1 ? 6 : 1); ++variant)
        for (int stages : {8, 16}) {
          if (mc > 1 && (c.n / wg::kRows) % mc != 0) continue;
          wg::Params p{};
          encode(&p.w_map, w, c.k, c.n, (uint64_t)c.k * 2, 64, wg::kRows);
          encode(&p.x_map, x, c.k, c.m, (uint64_t)c.k * 2, 64, wg::kTokens);
          p.y = y; p.n = c.n; p.k = c.k; p.m = c.m; p.stages = stages; p.lockstep_only = mc > 1 && (variant == 1 || variant == 5); p.cta_wait = variant >= 3;
          p.defer = mc > 1 ? variant == 4 : variant == 1;
          const uint32_t dyn = stages * wg::kStage + 1024;
          if (dyn + 8 * 1024 > prop.sharedMemPerBlockOptin) continue;
          auto kernel = mc > 1 && variant != 2 ? wg::gemv_wgmma<true> : wg::gemv_wgmma<false>;
          CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
          if (mc > 1) CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
          const int grid = (c.n + wg::kRows - 1) / wg::kRows;
          cudaLaunchAttribute attr;
          const cudaLaunchConfig_t cfg = launch_config(dim3(grid), dim3(384), dyn, st, mc > 1, mc, attr);
          auto run = [&] { CK(cudaLaunchKernelEx(&cfg, kernel, p)); };
          CK(cudaMemset(y, 0, (size_t)c.n * c.m * 2));
          run(); CK(cudaStreamSynchronize(st));
          const double err = check(c);
          static const char* const kVariant[6] = {"multicast", "lockstep, own x", "cluster launch only", "multicast, cta-scope arrive+wait", "multicast, cta-scope, deferred release", "lockstep, own x, cta-scope arrive+wait"};
          char name[96];
          if (mc > 1)
            snprintf(name, sizeof name, "wgmma 64x16, %d st, c%d %s", stages, mc, kVariant[variant]);
          else
            snprintf(name, sizeof name, "wgmma 64x16, %d stages%s", stages, variant ? ", deferred release" : "");
          printf("  %-44s %7.2f us | rel err %.2e%s\n", name, time_graph(st, run), err, err > 2e-2 ? "  WRONG" : "");
        }
    }
  return 0;
}
