// decode-probe: how fast can the paged decode layout be *read* (no attention math), as a function
// of how many 16-key blocks each warp keeps in flight, and of who reads a page?
//
// Written at the end of session 8 (no device time left to run it). The question it answers
// (see the session's closing note): attention.paged's BF16 and E4M3 kernels take the same time at
// 128 x 32k although E4M3 reads half the bytes, which points at "blocks in flight x latency"
// rather than bytes. Build and run on the GPU machine:
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o probe probe.cu && ./probe > probe.txt
//
// Layout as attention.paged: cache [num_pages, P = 16, Hkv = 8, D = 128], element size ES (2:
// bf16, 1: e4m3), every request's pages a seeded random permutation (scattered). Variants:
//   head  <STAGES>: one CTA per (request, KV head, split), 4 warps, each warp streams its 16-key
//                   blocks (K and V: 16 rows of D*ES bytes at a stride of Hkv*D*ES) through a
//                   STAGES-deep cp.async ring; blocks in flight per warp = STAGES - 1.
//   page  <STAGES>: one CTA per (request, split), 4 warps; warp w streams KV heads 2w, 2w+1 of
//                   every page of the split (per token 2*D*ES contiguous bytes; the 4 warps
//                   together read each token's Hkv*D*ES bytes, i.e. whole pages) through the
//                   same kind of ring: the "all heads of a page in one CTA" layout.
// Each CTA XOR-reduces one word per block so the loads are not dead. Timing: CUDA events around
// one launch, L2 flushed (memset of 2 x L2) before each of 20 samples, median.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));     \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

constexpr int P = 16, HKV = 8, D = 128, WARPS = 4;

__device__ __forceinline__ void cp16(uint32_t s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ uint32_t saddr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// bytes of one warp block: 16 keys x (K, V) x D x ES for "head"; for "page" the same for two
// heads (a page of P = 16 tokens, KV heads 2w and 2w + 1).
template <bool kPage, int ES>
struct Geo {
  static constexpr int kRow = D * ES;                   // bytes of one (token, head) row
  static constexpr int kHeads = kPage ? HKV / WARPS : 1;  // heads per warp block
  static constexpr int kBlock = 2 * 16 * kHeads * kRow;  // K and V
};

template <bool kPage, int ES, int STAGES>
__global__ void __launch_bounds__(32 * WARPS) probe(const uint8_t* __restrict__ k, const uint8_t* __restrict__ v,
                                                    const int* __restrict__ pt, int pages_per_req, int splits,
                                                    unsigned* out) {
  using G = Geo<kPage, ES>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // head: blockIdx.z = b * HKV + g; page: blockIdx.z = b.
  const int b = kPage ? blockIdx.z : blockIdx.z / HKV, g = kPage ? 0 : blockIdx.z % HKV;
  const int split = blockIdx.x;
  const int per = (pages_per_req + splits - 1) / splits;
  const int p_lo = split * per, p_hi = min(pages_per_req, p_lo + per);
  uint8_t* ring = smem + warp * STAGES * G::kBlock;
  const size_t page_bytes = (size_t)P * HKV * G::kRow;
  auto issue = [&](int page_idx, int st) {
    const int page = __ldg(pt + (size_t)b * pages_per_req + page_idx);
    const uint8_t* kp = k + page * page_bytes;
    const uint8_t* vp = v + page * page_bytes;
    uint8_t* dst = ring + st * G::kBlock;
    constexpr int kSpan = G::kHeads * G::kRow;  // contiguous bytes per token
    const int g0 = kPage ? warp * G::kHeads : g;
    for (int i = lane; i < 16 * (kSpan / 16); i += 32) {
      const int key = i / (kSpan / 16), c = i % (kSpan / 16);
      const size_t off = ((size_t)key * HKV + g0) * G::kRow + c * 16;
      cp16(saddr(dst + key * kSpan + c * 16), kp + off);
      cp16(saddr(dst + 16 * kSpan + key * kSpan + c * 16), vp + off);
    }
  };
  unsigned acc = 0;
  // head: warp w takes pages p_lo + w, p_lo + w + WARPS, ...; page: every warp takes every
  // page (its two heads). STAGES - 1 blocks in flight ahead.
  const int first = kPage ? p_lo : p_lo + warp, step = kPage ? 1 : WARPS;
  int next = first, it = 0;
  for (int s = 0; s < STAGES - 1; ++s) {
    if (next < p_hi) issue(next, s);
    commit();
    next += step;
  }
  for (int pg = first; pg < p_hi; pg += step, ++it) {
    if (next < p_hi) issue(next, (it + STAGES - 1) % STAGES);
    commit();
    next += step;
    wait_pending<STAGES - 1>();
    __syncwarp();
    acc ^= reinterpret_cast<const unsigned*>(ring + (it % STAGES) * G::kBlock)[lane];
    __syncwarp();
  }
  wait_pending<0>();
  if (acc == 0x12345678u) out[0] = acc;  // keeps the loads alive, never true for the fill below
}


__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred done;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n@!done bra W_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// Bulk-copy variant: lane i copies row (kv = i / 16, key = i % 16) of the warp block (kSpan
// contiguous bytes) to a padded pitch; one mbarrier per stage; STAGES - 1 blocks in flight.
template <bool kPage, int ES>
struct BGeo {
  static constexpr int kSpan = Geo<kPage, ES>::kHeads * Geo<kPage, ES>::kRow;
  static constexpr int kPitch = kSpan + 16;
  static constexpr int kBlock = 32 * kPitch;
};
template <bool kPage, int ES, int STAGES>
__global__ void __launch_bounds__(32 * WARPS) probe_bulk(const uint8_t* __restrict__ k, const uint8_t* __restrict__ v,
                                                    const int* __restrict__ pt, int pages_per_req, int splits,
                                                    unsigned* out) {
  using G = Geo<kPage, ES>;
  using BG = BGeo<kPage, ES>;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) unsigned long long bars[WARPS * STAGES];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int b = kPage ? blockIdx.z : blockIdx.z / HKV, g = kPage ? 0 : blockIdx.z % HKV;
  const int split = blockIdx.x;
  const int per = (pages_per_req + splits - 1) / splits;
  const int p_lo = split * per, p_hi = min(pages_per_req, p_lo + per);
  uint8_t* ring = smem + warp * STAGES * BG::kBlock;
  const uint32_t bar0 = saddr(&bars[warp * STAGES]);
  if (lane < STAGES) mbar_init(bar0 + 8 * lane, 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncwarp();
  const size_t page_bytes = (size_t)P * HKV * G::kRow;
  const int g0 = kPage ? warp * G::kHeads : g;
  auto issue = [&](int page_idx, int st) {
    const int page = __ldg(pt + (size_t)b * pages_per_req + page_idx);
    const uint32_t bar = bar0 + 8 * st;
    if (lane == 0) mbar_expect(bar, 32 * BG::kSpan);
    __syncwarp();
    const int kv = lane >> 4, key = lane & 15;
    const uint8_t* src = (kv ? v : k) + page * page_bytes + ((size_t)key * HKV + g0) * G::kRow;
    bulk(saddr(ring + st * BG::kBlock + lane * BG::kPitch), src, BG::kSpan, bar);
  };
  unsigned acc = 0;
  const int first = kPage ? p_lo : p_lo + warp, step = kPage ? 1 : WARPS;
  int next = first, it = 0;
  for (int s = 0; s < STAGES - 1; ++s) {
    if (next < p_hi) issue(next, s);
    next += step;
  }
  for (int pg = first; pg < p_hi; pg += step, ++it) {
    if (next < p_hi) issue(next, (it + STAGES - 1) % STAGES);
    next += step;
    const int st = it % STAGES;
    mbar_wait(bar0 + 8 * st, (it / STAGES) & 1);
    acc ^= reinterpret_cast<const unsigned*>(ring + st * BG::kBlock + lane * BG::kPitch)[0];
    __syncwarp();
  }
  if (acc == 0x12345678u) out[0] = acc;
}

template <bool kPage, int ES, int STAGES>
float run_bulk(const uint8_t* k, const uint8_t* v, const int* pt, int B, int pages_per_req, int splits, unsigned* out,
          uint8_t* flush, size_t flush_bytes) {
  using BG = BGeo<kPage, ES>;
  const int smem = WARPS * STAGES * BG::kBlock;
  if (smem > 227 * 1024) return -1.0f;
  auto kern = probe_bulk<kPage, ES, STAGES>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  dim3 grid(splits, 1, kPage ? B : B * HKV);
  std::vector<float> t;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int s = 0; s < 22; ++s) {
    CK(cudaMemsetAsync(flush, s, flush_bytes));
    CK(cudaEventRecord(e0));
    kern<<<grid, 32 * WARPS, smem>>>(k, v, pt, pages_per_req, splits, out);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (s >= 2) t.push_back(ms * 1000.0f);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <bool kPage, int ES, int STAGES>
float run(const uint8_t* k, const uint8_t* v, const int* pt, int B, int pages_per_req, int splits, unsigned* out,
          uint8_t* flush, size_t flush_bytes) {
  using G = Geo<kPage, ES>;
  const int smem = WARPS * STAGES * G::kBlock;
  if (smem > 227 * 1024) return -1.0f;
  auto kern = probe<kPage, ES, STAGES>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  dim3 grid(splits, 1, kPage ? B : B * HKV);
  std::vector<float> t;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int s = 0; s < 22; ++s) {
    CK(cudaMemsetAsync(flush, s, flush_bytes));
    CK(cudaEventRecord(e0));
    kern<<<grid, 32 * WARPS, smem>>>(k, v, pt, pages_per_req, splits, out);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (s >= 2) t.push_back(ms * 1000.0f);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t flush_bytes = 2 * (size_t)prop.l2CacheSize;
  uint8_t* flush;
  CK(cudaMalloc(&flush, flush_bytes));
  unsigned* out;
  CK(cudaMalloc(&out, 4));
  printf("%s, %d SMs; median of 20 launches, L2 flushed; TB/s of K + V bytes\n", prop.name, prop.multiProcessorCount);
  printf("%-6s %-5s %-4s %-7s %-7s %8s %10s %8s\n", "ES", "who", "B", "ctx", "stages", "splits", "us", "TB/s");
  for (int es : {2, 1}) {
    for (int B : {8, 32, 128}) {
      for (int ctx : {2048, 8192, 32768}) {
        const int pages_per_req = ctx / P;
        const size_t num_pages = (size_t)B * pages_per_req;
        const size_t cache = num_pages * P * HKV * D * es;
        uint8_t *k, *v;
        CK(cudaMalloc(&k, cache));
        CK(cudaMalloc(&v, cache));
        CK(cudaMemset(k, 0x3c, cache));
        CK(cudaMemset(v, 0x3c, cache));
        std::vector<int> pages(num_pages);
        std::iota(pages.begin(), pages.end(), 0);
        std::shuffle(pages.begin(), pages.end(), std::mt19937(ctx + B));
        int* pt;
        CK(cudaMalloc(&pt, num_pages * 4));
        CK(cudaMemcpy(pt, pages.data(), num_pages * 4, cudaMemcpyHostToDevice));
        const double bytes = 2.0 * cache;
        // Splits: about 3 CTAs per SM in one wave for "head"; about one CTA per SM for "page"
        // (its ring is 4 warps x STAGES x 16 KB for bf16).
        const int sm3 = 3 * prop.multiProcessorCount;
        const int head_splits = std::max(1, std::min(pages_per_req / 4, sm3 / (B * HKV)));
        const int page_splits = std::max(1, std::min(pages_per_req, prop.multiProcessorCount / B + 1));
        auto row = [&](const char* who, int stages, int splits, float us) {
          if (us < 0) return;
          printf("%-6s %-5s %-4d %-7d %-7d %8d %10.2f %8.3f\n", es == 2 ? "bf16" : "e4m3", who, B, ctx, stages, splits, us,
                 bytes / (us * 1e-6) / 1e12);
        };
        if (es == 2) {
          row("head", 2, head_splits, run<false, 2, 2>(k, v, pt, B, pages_per_req, head_splits, out, flush, flush_bytes));
          row("head", 3, head_splits, run<false, 2, 3>(k, v, pt, B, pages_per_req, head_splits, out, flush, flush_bytes));
          row("head", 5, head_splits, run<false, 2, 5>(k, v, pt, B, pages_per_req, head_splits, out, flush, flush_bytes));
          row("page", 2, page_splits, run<true, 2, 2>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
          row("page", 3, page_splits, run<true, 2, 3>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
          for (int sp : {head_splits, 2 * head_splits}) {
          row("bhead", 3, sp, run_bulk<false, 2, 3>(k, v, pt, B, pages_per_req, sp, out, flush, flush_bytes));
          row("bhead", 4, sp, run_bulk<false, 2, 4>(k, v, pt, B, pages_per_req, sp, out, flush, flush_bytes));
          row("bhead", 6, sp, run_bulk<false, 2, 6>(k, v, pt, B, pages_per_req, sp, out, flush, flush_bytes));
          }
          row("bpage", 2, page_splits, run_bulk<true, 2, 2>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
          row("bpage", 3, page_splits, run_bulk<true, 2, 3>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
        } else {
          row("head", 2, head_splits, run<false, 1, 2>(k, v, pt, B, pages_per_req, head_splits, out, flush, flush_bytes));
          row("head", 3, head_splits, run<false, 1, 3>(k, v, pt, B, pages_per_req, head_splits, out, flush, flush_bytes));
          row("head", 5, head_splits, run<false, 1, 5>(k, v, pt, B, pages_per_req, head_splits, out, flush, flush_bytes));
          row("head", 9, head_splits, run<false, 1, 9>(k, v, pt, B, pages_per_req, head_splits, out, flush, flush_bytes));
          row("page", 2, page_splits, run<true, 1, 2>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
          row("page", 3, page_splits, run<true, 1, 3>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
          for (int sp : {head_splits, 2 * head_splits}) {
          row("bhead", 3, sp, run_bulk<false, 1, 3>(k, v, pt, B, pages_per_req, sp, out, flush, flush_bytes));
          row("bhead", 5, sp, run_bulk<false, 1, 5>(k, v, pt, B, pages_per_req, sp, out, flush, flush_bytes));
          row("bhead", 9, sp, run_bulk<false, 1, 9>(k, v, pt, B, pages_per_req, sp, out, flush, flush_bytes));
          }
          row("bpage", 3, page_splits, run_bulk<true, 1, 3>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
          row("bpage", 5, page_splits, run_bulk<true, 1, 5>(k, v, pt, B, pages_per_req, page_splits, out, flush, flush_bytes));
        }
        CK(cudaFree(k));
        CK(cudaFree(v));
        CK(cudaFree(pt));
      }
    }
  }
  return 0;
}
